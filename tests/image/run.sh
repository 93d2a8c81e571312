#!/usr/bin/env bash
# What the container image relies on, checked without Docker: the binary starts as uid/gid 65532
# (the distroless "nonroot" user) with the root filesystem read-only and only a tmpfs writable, and
# serves webhooks there. Uses a private mount namespace (needs root: CI runs as root).
#
#   tests/image/run.sh                      # the debug binary `cargo test` already built
#   tests/image/run.sh --release            # builds and checks the release binary the image ships
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=debug
if [ "${1:-}" = "--release" ]; then
  profile=release
  cargo build --release --locked --bin hookgate
fi
bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/hookgate"
[ -x "$bin" ] || cargo build --bin hookgate

if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  # In CI (CI set and non-empty) a skip would hide a machine that cannot run this check.
  if [ -n "${CI:-}" ]; then
    echo "image: FAILED: CI=$CI, but this check needs root and mount namespaces to make / read-only" >&2
    exit 1
  fi
  echo "image: skipped (needs root and mount namespaces to make / read-only)"
  exit 0
fi

work=$(mktemp -d /tmp/hookgate-image.XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
admin=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# In a private mount namespace: a tmpfs for the database; the binary and the manifests copied
# there as the image has them (the checkout itself may not be readable by 65532); then / read-only,
# then drop to 65532 with a working directory it can enter.
unshare -m sh -c "
  mount -t tmpfs -o mode=1777 tmpfs '$work' &&
  mkdir '$work/app' && cp '$bin' '$work/app/hookgate' && cp -r config/examples '$work/app/examples' &&
  chmod -R a+rX '$work/app' &&
  mount -o remount,ro,bind / &&
  cd '$work' &&
  exec setpriv --reuid 65532 --regid 65532 --clear-groups \
    '$work/app/hookgate' standalone -f '$work/app/examples' --listen 127.0.0.1:$port \
    --admin-listen 127.0.0.1:$admin --database-url 'sqlite://$work/hookgate.db'
" > "/tmp/hookgate-image-$port.log" 2>&1 &
pid=$!

passed=0; failed=0
check() { if "$@"; then passed=$((passed+1)); else failed=$((failed+1)); echo "image: FAILED: $*"; fi; }

for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
check curl -sf "http://127.0.0.1:$admin/readyz" -o /dev/null
answer=$("$bin" send -f config/examples --integration payments/stripe \
  --body-file config/payloads/stripe-invoice.json --url "http://127.0.0.1:$port" 2>/dev/null || true)
# Compared as JSON, not as text: key order and spacing are not part of the contract.
answer_is() {
  python3 -c 'import json, sys
status, _, body = sys.argv[1].partition(" ")
try:
    got = json.loads(body)
except ValueError:
    got = None
sys.exit(0 if (status, got) == (sys.argv[2], json.loads(sys.argv[3])) else 1)' "$answer" "$1" "$2"
}
check answer_is 200 '{"received": true, "duplicate": false}'
check test "$(ps -o uid= -p "$(pgrep -P "$pid" -f 'hookgate standalone' || echo "$pid")" | tr -d ' ')" = 65532
# Nothing may have been written outside the tmpfs.
check test ! -e config/examples/hookgate.db
check test ! -e hookgate.db

kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
if [ "$failed" != 0 ]; then
  cat "/tmp/hookgate-image-$port.log" >&2
fi
rm -f "/tmp/hookgate-image-$port.log"
echo "image: $passed passed, $failed failed"
[ "$failed" = 0 ]

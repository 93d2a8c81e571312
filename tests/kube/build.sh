#!/usr/bin/env bash
# Builds kube-apiserver and etcd from tests/kube/go.mod into a cache directory, once per version, and
# prints that directory. Needs Go and the Go module proxy; everything else comes from go.sum.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1=="k8s.io/kubernetes"{print $2}' "$here/go.mod" | head -n 1)"
[ -n "$version" ] || version="$(awk '/k8s.io\/kubernetes v/{print $2; exit}' "$here/go.mod")"
stamp="$(cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/main.go | sha256sum | cut -c1-12)"
out="${HOOKGATE_KUBE_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/hookgate/kube/$version-$stamp}"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { echo "tests/kube/build.sh: go is not on PATH" >&2; exit 3; }

mkdir -p "$out.tmp"
minor="${version#v1.}"; minor="${minor%%.*}"
# Without these the server reports v0.0.0 and clients (helm's kubeVersion check) refuse it.
ldflags="-s -w"
for kv in "gitVersion=$version" "gitMajor=1" "gitMinor=$minor" "gitTreeState=clean" \
          "buildDate=1970-01-01T00:00:00Z"; do
  ldflags="$ldflags -X k8s.io/component-base/version.$kv"
done
start=$(date +%s)
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/kube-apiserver" ./cmd/kube-apiserver)
(cd "$here" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" ./cmd/etcd)
rm -rf "$out" && mv "$out.tmp" "$out"
echo "tests/kube/build.sh: built kube-apiserver $version and etcd in $(( $(date +%s) - start )) s" >&2
echo "$out"

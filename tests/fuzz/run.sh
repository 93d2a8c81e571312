#!/usr/bin/env bash
# libFuzzer runs of every target (cargo-fuzz). Usage:
#   tests/fuzz/run.sh                 # a short smoke run of each target
#   tests/fuzz/run.sh 10000000        # the long run: this many executions per target
# cargo-fuzz needs -Zsanitizer; this machine has only the stable toolchain, so RUSTC_BOOTSTRAP=1
# unlocks it. Crashes land in tests/fuzz/artifacts/<target>/ and must become regression tests.
set -euo pipefail
cd "$(dirname "$0")"
runs=${1:-20000}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
export RUSTC_BOOTSTRAP=1
passed=0
for target in header_parsers verify json_fields manifests; do
  # The manifest target starts from the repository's examples; libFuzzer writes what it finds
  # to the first directory, corpus/<target> (git-ignored), and only reads the second.
  seeds=()
  [ "$target" = manifests ] && seeds=(corpus/manifests ../../config/examples) && mkdir -p corpus/manifests
  cargo fuzz run --fuzz-dir . -O "$target" "${seeds[@]}" -- -runs="$runs" 2>&1 | tail -n 1
  passed=$((passed + 1))
done
echo "fuzz: $passed passed, 0 failed"

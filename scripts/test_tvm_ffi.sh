#!/usr/bin/env bash
# Libraries compiled by TVM v0.27 (tvm-ffi ABI) from a plain C host on our runtime, outputs
# compared byte for byte with TVM 0.27's own (scripts/build_ffi_fixtures.py builds both), and
# from the CLI. Needs target/release/libtvm_runtime.so and target/release/tvmrt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
FX="$TVMRT_CACHE/ffi_fixtures"
[ -f "$FX/manifest.json" ] || { echo "test_tvm_ffi: no fixtures in $FX (run scripts/build_ffi_fixtures.py)"; exit 1; }
B="$PWD/build/tvm_ffi"
rm -rf "$B" && mkdir -p "$B/out"
${CC:-cc} -std=c99 -Wall -Wextra -Werror -O2 -o "$B/tvm_ffi_host" tests/c/tvm_ffi_host.c \
  -Iinclude -Ltarget/release -ltvm_runtime
LD_LIBRARY_PATH="$PWD/target/release" "$B/tvm_ffi_host" "$FX" "$B/out"
n=0
for f in "$B"/out/*.bin; do
  cmp "$f" "$FX/$(basename "$f")"
  n=$((n + 1))
done
echo "test_tvm_ffi: C host: $n outputs equal TVM 0.27's"

#!/usr/bin/env bash
# The C boundary's fast paths (the table in src/c_api/mod.rs), measured: the release library as
# shipped, and the same library built with `--features bench-no-fast-paths` (every entry runs
# its general path inside the boundary), each run by scripts/bench.sh against the reference on
# the benchmarks the fast paths serve.
#
#   scripts/bench_boundary.sh [scripts/bench.sh arguments, e.g. --rounds 3 --no-wait]
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/bench/boundary
mkdir -p "$out"
cargo build --release --lib
cp -f target/release/libtvm_runtime.so "$out/with-fast-paths.so"
cargo build --release --lib --features bench-no-fast-paths
cp -f target/release/libtvm_runtime.so "$out/boundary-only.so"
cargo build --release --lib # the shipped build back in place (cached per feature set)
only=packed_call,kernel_call,workspace
for v in with-fast-paths boundary-only; do
  echo "== $v"
  OURS_LIB="$PWD/$out/$v.so" bash scripts/bench.sh --only "$only" "$@"
done

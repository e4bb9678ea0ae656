#!/usr/bin/env bash
# Soak and load test (examples/soak.rs on the quick profile, scripts/soak_callbacks.py on the release library):
#   - 8 application threads, each with its own executors, run the bundled MLP and mobilenet
#     (fixture, when built) alternately;
#   - 1,000 load / run / unload cycles of the MLP library;
#   - 10,000 PackedFunc callbacks from C into Python and back (TVM's Python package on ours).
# Every output is checked; VmRSS and open fds are sampled and must stay flat after warm-up.
#
#   scripts/soak.sh          CI size (a few minutes on 2 cores)
#   scripts/soak.sh --long   the size reported in benches/README.md
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

runs=12
cycles=1000
calls=10000
if [ "${1:-}" = "--long" ]; then
  runs=100
  cycles=5000
  calls=50000
fi

# The soak program on the quick profile (optimised, no LTO; `cargo test --profile quick` has
# built it); the callbacks stage loads the shipped library, target/release's.
cargo build --release --quiet --lib
cargo build --profile quick --quiet --example soak
soak=target/quick/examples/soak
fixtures="$TVMRT_CACHE/fixtures"

models=(--model examples/models/mlp.so)
if [ -f "$fixtures/mobilenet.so" ]; then
  models+=(--model "$fixtures/mobilenet.so")
else
  tvmrt_skip TVMRT_REQUIRE_MODELS "mobilenet (no $fixtures/mobilenet.so); the threads run the MLP only"
fi
"$soak" threads --threads 8 --runs "$runs" "${models[@]}"
"$soak" cycles --cycles "$cycles" --model examples/models/mlp.so

if [ -f "$fixtures/packed_call.so" ] && [ -x "$TVMRT_PYTHON" ]; then
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/tvmrt-soak.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  cp target/release/libtvm_runtime.so "$tmp/"
  TVM_LIBRARY_PATH="$tmp" TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes \
    "$TVMRT_PYTHON" scripts/soak_callbacks.py "$fixtures" "$calls"
else
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "callbacks into Python (packed_call fixture or TVM's Python package missing)"
fi
echo "soak: passed"

#!/usr/bin/env bash
# Regenerates the checked-in C headers from the Rust declarations with cbindgen:
#   include/dlpack/dlpack.h               (cbindgen/dlpack.toml)
#   include/tvm/runtime/c_runtime_api.h   (cbindgen/c_runtime_api.toml)
#   include/tvm/runtime/c_backend_api.h   (cbindgen/c_backend_api.toml)
# It runs tests/headers.rs with TVMRT_UPDATE_HEADERS=1, which writes the headers that differ
# and then runs the test's checks (exports, C99/C++11 compiles, values and layouts, and TVM's
# reference headers when present). Extra arguments go to cargo test (e.g. --release).
# include/tvm/runtime/device_plugin.h and the C++ API headers (every other .h under
# include/tvm/runtime/, e.g. module.h, packed_func.h, container/*.h) are hand-written and not
# touched: the stale-header check compares only the three generated files; tests/headers.rs
# checks device_plugin.h's layout (ABI version, size, every field's offset) against Rust.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f scripts/env.sh ]; then
  # TVM's reference headers, for the comparison (skipped when absent).
  source scripts/env.sh
fi
TVMRT_UPDATE_HEADERS=1 cargo test "$@" --test headers
git status --short -- include/ 2>/dev/null || true

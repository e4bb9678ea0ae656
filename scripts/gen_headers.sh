#!/usr/bin/env bash
# Regenerates the checked-in C headers from the Rust declarations with cbindgen:
#   include/dlpack/dlpack.h               (cbindgen/dlpack.toml)
#   include/tvm/runtime/c_runtime_api.h   (cbindgen/c_runtime_api.toml)
#   include/tvm/runtime/c_backend_api.h   (cbindgen/c_backend_api.toml)
# It runs tests/headers.rs with TVMRT_UPDATE_HEADERS=1, which writes the headers that differ
# and then runs the test's checks (exports, C99/C++11 compiles, values and layouts, and TVM's
# reference headers when present). Extra arguments go to cargo test (e.g. --release).
# include/tvm/runtime/device_plugin.h is hand-written and not touched; tests/headers.rs checks
# its layout (ABI version, size, every field's offset) against the Rust declaration.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f scripts/env.sh ]; then
  # TVM's reference headers, for the comparison (skipped when absent).
  source scripts/env.sh
fi
TVMRT_UPDATE_HEADERS=1 cargo test "$@" --test headers
git status --short -- include/ 2>/dev/null || true

#!/usr/bin/env bash
# Model-checks the lock-free protocols with loom (src/sync.rs): the thread pool's launch, done
# and barrier words and its sleeps, object reference counts, the registry's start-up flag.
#
#   scripts/loom.sh [test name filter ...]      (default: every loom test, `loom_`)
#
# Builds the library's unit tests with the `loom` feature (the `threads` feature and the loom
# crate: the models need nothing else; build_runtime.rs sets the `loom` cfg for this crate only,
# so the dependencies are the ones the plain test build of the same profile compiled) and runs
# the tests named loom_*. Environment:
#   LOOM_MAX_PREEMPTIONS   preemptions per explored execution (default 2, set in src/sync.rs)
#   TVMRT_CARGO_PROFILE    cargo profile (default quick)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${TVMRT_CARGO_PROFILE:-quick}"
[ $# -gt 0 ] || set -- loom_
cargo test --profile "$profile" -p tvm-runtime --lib --no-default-features --features loom \
  -- "$@"

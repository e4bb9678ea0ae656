#!/usr/bin/env bash
# The test command.
#
#   bash scripts/test.sh           the full tier (what CI runs on a fresh clone): installs what
#                                  is missing (scripts/setup.sh), builds, then runs the Rust
#                                  tests, the C conformance suite on our library and on the
#                                  reference (plus valgrind), the feature sets (each builds; the
#                                  C suite on deploy and minimal), the boards under qemu (aarch64
#                                  runs the Rust tests on deploy), the Python suite on both, the
#                                  examples and the header check.
#   bash scripts/test.sh --quick   the quick tier (a few minutes once built): fmt, the Rust tests
#                                  and the C suite on our library, all on the `quick` profile.
#
# Rust tests build with the `quick` profile (optimised, no LTO); LTO and one codegen unit stay
# for the shipped library (`--release`), which the C, Python and example stages use. Tests that
# cannot run here (no GPU, no fixtures) skip through one mechanism per language, each writing
# to $TVMRT_SKIP_LOG and each failing instead under the matching TVMRT_REQUIRE_* switch:
# tests/common/skip.rs (Rust and CLI tests), tvmrt_helpers.skip and conftest.py (Python: every
# pytest skip is logged), tvmrt_skip in scripts/skip.sh (the scripts) and SKIP in
# c_tests/check.h (the C suite). The summary at the end counts them per suite and lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
bash scripts/setup.sh
source scripts/env.sh

step() { printf '\n==> %s  [at %d s]\n' "$*" "$SECONDS"; }

mkdir -p build
export TVMRT_SKIP_LOG="$PWD/build/skipped-tests.txt"
: >"$TVMRT_SKIP_LOG"
skip_summary() {
  local n
  n="$(sort -u "$TVMRT_SKIP_LOG" | grep -c . || true)"
  printf '\n==> %s skipped test(s)%s\n' "$n" "$([ "$n" = 0 ] || echo ':')"
  [ "$n" = 0 ] && return 0
  # Per suite: the test binary, python[ref|ours], the script or the C test.
  printf '    by suite:%s\n' "$(sort -u "$TVMRT_SKIP_LOG" | sed -nE 's/^skipped: ([^: ]+).*/\1/p' \
    | sort | uniq -c | awk '{printf " %s %s,", $2, $1}' | sed 's/,$//')"
  sort -u "$TVMRT_SKIP_LOG" | sed 's/^/    /'
}
trap skip_summary EXIT

if [ "$quick" = 1 ]; then
  step "fmt"
  cargo fmt --all -- --check
  step "rust tests (profile quick)"
  cargo test --profile quick
  if [ -f c_tests/CMakeLists.txt ]; then
    step "C suite on our runtime (profile quick)"
    TVMRT_CARGO_PROFILE=quick bash scripts/run_c_tests.sh ours
  fi
  step "quick tier passed (the full tier: bash scripts/test.sh)"
  exit 0
fi

# The fixtures are compiled by TVM's Python (one core, some ten minutes on a fresh machine) in
# the background while the release build, clippy and rustdoc keep the other core busy; their
# installs (apt) run first, here, since apt takes one caller at a time. Everything they build
# is cached; the stages that need them start after the wait below.
step "installs for the fixtures: POCL (OpenCL on the CPU), the cross compilers"
bash scripts/setup_opencl.sh
bash scripts/cross_setup.sh
step "fixtures: building in the background (cached; log in build/fixtures.log)"
build_fixtures() {
  set -e
  "$TVMRT_PYTHON" scripts/build_fixtures.py --models
  "$TVMRT_FFI_PYTHON" scripts/build_ffi_fixtures.py
  "$TVMRT_PYTHON" scripts/build_llm_fixtures.py
  "$TVMRT_PYTHON" scripts/build_opencl_fixtures.py
  "$TVMRT_PYTHON" scripts/build_cross_fixtures.py
  # The JavaScript stage's installs (emscripten, Chromium, tvmjs) and kernels; the foreground
  # runs no apt until the wait below.
  bash scripts/test_wasm.sh --prepare
}
build_fixtures >build/fixtures.log 2>&1 &
fixtures_pid=$!
trap 'kill "$fixtures_pid" 2>/dev/null || true; skip_summary' EXIT

step "build (release: the shipped library and the tvmrt binary, which the Python suite's RPC tests need on both runtimes)"
cargo build --release

if command -v cargo-clippy >/dev/null 2>&1 || cargo clippy --version >/dev/null 2>&1; then
  step "clippy"
  # capi compiles the runtime's sources again as the C library; its own test target would be
  # the root package's unit tests without their dev-dependencies: linted as a library only.
  cargo clippy --workspace --exclude tvm-runtime-capi --all-targets -- -D warnings
  cargo clippy -p tvm-runtime-capi --lib -- -D warnings
else
  tvmrt_skip "clippy (not installed)"
fi
step "fmt"
cargo fmt --all -- --check
step "rustdoc (no broken or private links in the public docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib -p tvm-runtime

# The stages that need no fixtures run while they build: the feature sets, the Rust tests' build
# and loom.
# Feature sets (issue 32): every set builds, the C suite runs on `deploy` and `minimal`, the
# Rust tests on `deploy` run for aarch64 in the cross stage below (tests that need a feature a
# set lacks report their skip). Each set's
# library goes to its own target directory, built as scripts/size_report.sh and CMake's
# TVMRT_FEATURES build it (so neither rebuilds it); `default` is the release build above.
step "feature sets: minimal, deploy and cpu build (target/sets/<set>), and the CLI on each"
for set in minimal deploy cpu; do
  cargo build --release -p tvm-runtime-capi --lib --no-default-features --features "$set" \
    --target-dir "target/sets/$set"
done
for set in minimal deploy cpu; do
  cargo check -p tvmrt --no-default-features --features "$set" --target-dir target/sets/check
  # Compiled models call libm without naming it; every set's library must bring it (build.rs).
  needed="$(readelf -d "target/sets/$set/release/libtvm_runtime.so")"
  grep -q 'NEEDED.*\[libm\.so' <<<"$needed" || { echo "the $set library does not link libm"; exit 1; }
done

# The C library's package (capi) is left out: it holds no tests, and the C stages below use the
# release build of it.
step "rust tests: build (profile quick; they run once the fixtures are ready)"
cargo test --profile quick --workspace --exclude tvm-runtime-capi --no-run

# Issue 29 part 5 (weak memory): the lock-free protocols model-checked with loom (src/sync.rs;
# the dependencies are the quick build's, just built).
step "loom: the pool's launch/done/barrier words and sleeps, reference counts, registry start-up"
bash scripts/loom.sh

step "fixtures: waiting for the background build (resnet18 and mobilenet, tvm-ffi by TVM 0.27, the LLM decoder, OpenCL, the boards)"
fixtures_rc=0
wait "$fixtures_pid" || fixtures_rc=$?
cat build/fixtures.log
[ "$fixtures_rc" = 0 ] || { echo "the fixture build failed (exit $fixtures_rc)"; exit 1; }
# Tests that need fixtures fail instead of skipping from here on.
export TVMRT_REQUIRE_FIXTURES=1 TVMRT_REQUIRE_MODELS=1
# setup.sh installed lavapipe: the Vulkan tests must run on it, not skip.
if [ -n "${VK_ICD_FILENAMES:-}" ] && [ -f "$VK_ICD_FILENAMES" ]; then
  export TVMRT_REQUIRE_VULKAN=1
fi

# Issue 30: OpenCL on POCL (an OpenCL driver running on the CPU, installed above), with the
# OpenCL fixtures built above (kernels, a small CNN, a heterogeneous graph, a Relax model and
# MobileNet for mali, intel_graphics and adreno): the OpenCL tests (Rust and Python), MobileNet's
# included, fail instead of skipping from here on.
export TVMRT_REQUIRE_OPENCL=1 TVMRT_REQUIRE_OPENCL_MODELS=1

step "rust tests (profile quick)"
cargo test --profile quick --workspace --exclude tvm-runtime-capi

if [ -f c_tests/CMakeLists.txt ]; then
  step "C suite on the reference runtime"
  bash scripts/run_c_tests.sh ref
  step "C suite on our runtime"
  bash scripts/run_c_tests.sh ours
  step "C suite on our runtime under valgrind"
  bash scripts/run_c_tests.sh ours --valgrind
fi

if [ -f c_tests/CMakeLists.txt ]; then
  step "C suite on the deploy and minimal sets"
  bash scripts/run_c_tests.sh ours --features deploy
  bash scripts/run_c_tests.sh ours --features minimal
fi
# Issue 29 (boards), cross-built with Debian's cross compilers and run under qemu-user
# (scripts/cross.sh installs them when missing). aarch64 on the `deploy` set: one quick-profile
# build serves the Rust tests (which are also the deploy set's Rust tests, issue 32), the C suite
# and the models; the aarch64 default features (the GPU backends stay there) type-check. armv7
# (32-bit) and riscv64 on `deploy`: the build, the C suite and one model each. Models are
# compiled for each board by the reference compiler (build_cross_fixtures.py, cached in
# $TVMRT_CACHE/fixtures-<arch>) and run by the cross-built tvmrt against the x86-64 reference
# runtime's outputs (the cross compilers and the board fixtures came with the fixtures above).
step "cross: aarch64 (build, Rust tests, C suite, mlp and relax_mlp), armv7 and riscv64 (build, C suite, one model) under qemu"
deploy="--no-default-features --features deploy"
TVMRT_CROSS_FEATURES="$deploy" TVMRT_CROSS_MODELS="mlp relax_mlp" \
  bash scripts/cross.sh aarch64 build test c-suite models
# The same board models on TVM v0.16.0's own C++ runtime, cross-built from its sources (fetched
# from GitHub once and cached; skipped where they cannot be fetched), byte for byte against ours.
bash scripts/cross_ref_runtime.sh aarch64
bash scripts/cross.sh aarch64 check
TVMRT_CROSS_FEATURES="$deploy" TVMRT_CROSS_MODELS="mlp" bash scripts/cross.sh armv7 build c-suite models
TVMRT_CROSS_FEATURES="$deploy" TVMRT_CROSS_MODELS="relax_mlp" \
  bash scripts/cross.sh riscv64 build c-suite models

# Issue 28 (JavaScript): the runtime compiled to WebAssembly with Debian's emscripten (installed
# when missing), driven by the unchanged npm tvmjs (@mlc-ai/web-runtime@0.18.0-dev2) in node and,
# in headless Chromium (installed when missing), a page running a TVM 0.27 Relax MLP; the
# screenshot is target/wasm/browser.png.
step "JavaScript / WebAssembly: tvmjs over our wasm in node and headless Chromium"
bash scripts/test_wasm.sh

step "size check: the x86-64 .so of each set and the static mlp program against benches/size_budgets.tsv (fails over a ceiling; prints OVER BUDGET over the issue's budget)"
bash scripts/size_report.sh --check
bash scripts/static_deploy.sh --check

if [ -d tests/python ]; then
  step "Python suite on the reference runtime"
  bash scripts/run_python_tests.sh ref
  step "Python suite on our runtime"
  bash scripts/run_python_tests.sh ours
fi

step "Relax VM fixtures from C on both runtimes"
bash scripts/test_relax.sh both

step "tvm-ffi libraries (TVM 0.27) from C and the CLI"
bash scripts/test_tvm_ffi.sh

step "C++ API (header-only over the C ABI) on both runtimes"
bash scripts/test_cpp.sh

step "examples, install layout, drop-in substitution, device plugin"
bash scripts/run_examples.sh

step "sanitizers (ASan, TSan) and the CPU-only build"; bash scripts/test_sanitizers.sh
step "soak and load test"; bash scripts/soak.sh

step "all tests passed"

#!/usr/bin/env bash
# Cross builds for the boards TVM deploys to, tested under qemu-user.
#
#   scripts/cross.sh aarch64|armv7|riscv64 [build|test|c-suite|all ...]   (default: build)
#
#   build    the library (libtvm_runtime.so and .a) and tvmrt, for the target, with Debian's
#            cross compiler as the linker and as the C compiler of the build scripts
#   test     the library's Rust tests (unit tests and the integration tests) under qemu-user;
#            tests that need compiled fixtures skip (the fixtures are built for x86-64; a
#            target's own live in $TVMRT_CACHE/fixtures-<arch>, see tests/common/fixture_dirs.rs)
#   c-suite  the C conformance suite (c_tests/), cross-compiled with cmake/toolchain-<arch>.cmake
#            against the cross-built library, run by ctest under qemu-user
#   all      build, test and c-suite
#
# Environment:
#   TVMRT_CARGO_PROFILE    cargo profile (default quick: optimised, no LTO; release for the
#                          shipped library)
#   TVMRT_CROSS_FEATURES   cargo feature arguments (default: the default features), e.g.
#                          "--no-default-features --features deploy"
#   TVMRT_CROSS_TEST_ARGS  extra arguments for the test binaries (after --), e.g. a name filter
#
# Outputs: target/cross/<triple>/<profile>/ (target/cross-<tag>/... with TVMRT_CROSS_FEATURES),
# the C suite's build in build/cross/<arch>/. Installs what is missing (scripts/cross_setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 aarch64|armv7|riscv64 [build|test|c-suite|all ...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
arch="$1"
shift
case "$arch" in
  aarch64) gnu=aarch64-linux-gnu triple=aarch64-unknown-linux-gnu qemu=qemu-aarch64 ;;
  armv7) gnu=arm-linux-gnueabihf triple=armv7-unknown-linux-gnueabihf qemu=qemu-arm ;;
  riscv64) gnu=riscv64-linux-gnu triple=riscv64gc-unknown-linux-gnu qemu=qemu-riscv64 ;;
  *) usage ;;
esac
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build)
[ "${stages[*]}" = all ] && stages=(build test c-suite)
for s in "${stages[@]}"; do
  case "$s" in build | test | c-suite) ;; *) usage ;; esac
done

bash scripts/cross_setup.sh "$arch"
source scripts/env.sh

profile="${TVMRT_CARGO_PROFILE:-quick}"
read -r -a features <<<"${TVMRT_CROSS_FEATURES:-}"
target_dir="$PWD/target/cross"
if [ ${#features[@]} -gt 0 ]; then
  tag="$(printf '%s' "${features[*]}" | tr -c 'A-Za-z0-9' '-' | tr -s '-' | sed 's/^-//;s/-$//')"
  target_dir="$PWD/target/cross-$tag"
fi
out="$target_dir/$triple/$profile"
sysroot="/usr/$gnu"

# Cargo's per-target settings: the linker, qemu as the runner of test binaries, the C compiler
# of build scripts (build.rs's shim, bzip2-sys and zstd-sys of the dev-dependencies).
T="$(tr 'a-z-' 'A-Z_' <<<"$triple")"
t="${triple//-/_}"
export "CARGO_TARGET_${T}_LINKER=$gnu-gcc"
export "CARGO_TARGET_${T}_RUNNER=$qemu -L $sysroot"
export "CC_${t}=$gnu-gcc" "CXX_${t}=$gnu-g++" "AR_${t}=$gnu-ar"
export HOST_CC=cc HOST_CXX=c++
# The tests that compile C (tests/headers.rs checks the layouts with the target's compiler)
# read CC and CXX; qemu finds the target's loader and libraries in the sysroot.
export CC="$gnu-gcc" CXX="$gnu-g++" QEMU_LD_PREFIX="$sysroot"
# The tests that run tvmrt run the cross-built one under qemu too (tests/vulkan.rs).
export TVMRT_TEST_RUNNER="$qemu -L $sysroot"

cargo_args=(--profile "$profile" --target "$triple" --target-dir "$target_dir" "${features[@]}")

stage_build() {
  echo "==> cross build $triple ($profile${features[*]:+, ${features[*]}})"
  local start=$SECONDS
  cargo build "${cargo_args[@]}" -p tvm-runtime --lib
  cargo build "${cargo_args[@]}" -p tvmrt
  file -L "$out/libtvm_runtime.so" "$out/tvmrt" | sed "s|$PWD/||"
  stat -c "%n: %s bytes" "$out/libtvm_runtime.a" | sed "s|$PWD/||"
  "$qemu" -L "$sysroot" "$out/tvmrt" --version
  echo "==> cross build $triple: $((SECONDS - start)) s"
}

stage_test() {
  echo "==> Rust tests under $qemu ($triple, $profile)"
  local start=$SECONDS log="build/cross/$arch/rust-tests.log"
  mkdir -p "build/cross/$arch"
  # No fixtures are compiled for the boards yet: the tests that need them skip (each skip is
  # printed and logged) instead of failing under the test command's TVMRT_REQUIRE_* switches.
  unset TVMRT_REQUIRE_FIXTURES TVMRT_REQUIRE_MODELS
  local own_log=0
  if [ -z "${TVMRT_SKIP_LOG:-}" ]; then
    export TVMRT_SKIP_LOG="$PWD/build/cross/$arch/skipped.txt"
    : >"$TVMRT_SKIP_LOG"
    own_log=1
  fi
  local rc=0 test_args=()
  read -r -a test_args <<<"${TVMRT_CROSS_TEST_ARGS:-}"
  cargo test "${cargo_args[@]}" --no-fail-fast -p tvm-runtime --lib --tests -- "${test_args[@]}" 2>&1 |
    tee "$log" || rc=$?
  # The totals of every test binary (cargo prints one result line each).
  awk '/^test result:/ { p += $4; f += $6; i += $8 } END {
    printf "==> Rust tests %s: %d passed, %d failed, %d ignored\n", T, p, f, i }' T="$triple" "$log"
  if [ "$own_log" = 1 ]; then
    echo "==> skipped (reported): $(sort -u "$TVMRT_SKIP_LOG" | grep -c . || true)"
  fi
  echo "==> Rust tests $triple: $((SECONDS - start)) s"
  return "$rc"
}

stage_c_suite() {
  echo "==> C suite under $qemu ($triple, $profile)"
  local start=$SECONDS
  # The library as the sources are now (cargo test does not build the cdylib).
  cargo build "${cargo_args[@]}" -p tvm-runtime --lib
  local build="build/cross/$arch/c_tests"
  cmake -S c_tests -B "$build" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-$arch.cmake" \
    -DTVM_INCLUDE_DIRS="$PWD/include" -DTVM_RUNTIME_LIB="$out/libtvm_runtime.so" >/dev/null
  cmake --build "$build" -j "$(nproc)"
  (cd "$build" && ctest --output-on-failure)
  echo "==> C suite $triple: $((SECONDS - start)) s"
}

for s in "${stages[@]}"; do
  case "$s" in
    build) stage_build ;;
    test) stage_test ;;
    c-suite) stage_c_suite ;;
  esac
done

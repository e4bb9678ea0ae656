#!/usr/bin/env bash
# Cross builds for the boards TVM deploys to, tested under qemu-user.
#
#   scripts/cross.sh aarch64|armv7|riscv64 [build|check|test|c-suite|models|static|rpc|package|all ...]   (default: build)
#
#   check    cargo check of the library and tvmrt for the target (type-checks a feature set,
#            e.g. the default one with the GPU backends, without building it)
#   build    the library (libtvm_runtime.so and .a) and tvmrt, for the target, with Debian's
#            cross compiler as the linker and as the C compiler of the build scripts
#   test     the library's Rust tests (unit tests and the integration tests) under qemu-user;
#            tests that need compiled fixtures skip (the fixtures are built for x86-64; a
#            target's own live in $TVMRT_CACHE/fixtures-<arch>, see tests/common/fixture_dirs.rs)
#   c-suite  the C conformance suite (c_tests/), cross-compiled with cmake/toolchain-<arch>.cmake
#            against the cross-built library, run by ctest under qemu-user
#   models   models compiled for the target by the reference compiler
#            (scripts/build_cross_fixtures.py, cached in $TVMRT_CACHE/fixtures-<arch>) run by the
#            cross-built tvmrt under qemu-user, outputs compared with the x86-64 reference
#            runtime's (scripts/run_cross_fixtures.py)
#   static   the static deploy program (examples/static_deploy: the bundled mlp compiled as a
#            system library for the target, linked with the `minimal` static library built for
#            the target, release profile), run under qemu-user: it checks its outputs against
#            the x86-64 reference runtime's (rtol 1e-5); prints its stripped size
#   rpc      `tvmrt rpc-server` under qemu-user driven from the host by TVM's Python, TVM's
#            client and ours (on target/release/libtvm_runtime.so, built if missing), directly
#            and through TVM's tracker (scripts/cross_rpc.py)
#   package  the CMake package built for the target (the top-level CMakeLists.txt with
#            cmake/toolchain-<arch>.cmake, cargo's build of the build stage reused) and
#            installed into a sysroot (DESTDIR=build/cross/<arch>/sysroot, prefix /usr); then
#            pkg-config in that sysroot (PKG_CONFIG_SYSROOT_DIR) compiles a program, and
#            find_package(tvm) in a cross CMake project (examples/c) builds deploy_model, which
#            runs the board's mlp (fixtures-<arch>, the models stage builds it) under qemu-user
#   all      build, test and c-suite
#
# Environment:
#   TVMRT_CARGO_PROFILE    cargo profile (default quick: optimised, no LTO; release for the
#                          shipped library)
#   TVMRT_CROSS_FEATURES   cargo feature arguments (default: the default features), e.g.
#                          "--no-default-features --features deploy"
#   TVMRT_CROSS_TEST_ARGS  extra arguments for the test binaries (after --), e.g. a name filter
#   TVMRT_CROSS_MODELS     the fixtures the models stage runs (default: all that were built);
#                          naming resnet18, mobilenet or relax_resnet18/relax_mobilenet builds
#                          the large models too (build_cross_fixtures.py --models)
#
# Outputs: target/cross/<triple>/<profile>/ (target/cross-<tag>/... with TVMRT_CROSS_FEATURES),
# the C suite's build in build/cross/<arch>/. Installs what is missing (scripts/cross_setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 aarch64|armv7|riscv64 [build|check|test|c-suite|models|static|rpc|package|all ...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
arch="$1"
shift
source scripts/cross_arch.sh
cross_arch "$arch" || usage
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build)
[ "${stages[*]}" = all ] && stages=(build test c-suite)
for s in "${stages[@]}"; do
  case "$s" in build | check | test | c-suite | models | static | rpc | package) ;; *) usage ;; esac
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
  cargo build "${cargo_args[@]}" -p tvm-runtime-capi --lib
  cargo build "${cargo_args[@]}" -p tvmrt
  file -L "$out/libtvm_runtime.so" "$out/tvmrt" | sed "s|$PWD/||"
  stat -c "%n: %s bytes" "$out/libtvm_runtime.a" | sed "s|$PWD/||"
  "$qemu" -L "$sysroot" "$out/tvmrt" --version
  echo "==> cross build $triple: $((SECONDS - start)) s"
}

stage_check() {
  echo "==> cargo check $triple (${features[*]:-default features})"
  local start=$SECONDS
  cargo check "${cargo_args[@]}" -p tvm-runtime -p tvmrt
  echo "==> cargo check $triple: $((SECONDS - start)) s"
}

stage_test() {
  echo "==> Rust tests under $qemu ($triple, $profile)"
  local start=$SECONDS log="build/cross/$arch/rust-tests.log"
  mkdir -p "build/cross/$arch"
  # No fixtures are compiled for the boards yet: the tests that need them skip (each skip is
  # printed and logged) instead of failing under the test command's TVMRT_REQUIRE_* switches.
  # Nor are the GPU drivers: the host's lavapipe and POCL are x86-64 libraries, which a
  # program of the target cannot load, so the Vulkan and OpenCL tests skip there too.
  unset TVMRT_REQUIRE_FIXTURES TVMRT_REQUIRE_MODELS TVMRT_REQUIRE_VULKAN TVMRT_REQUIRE_OPENCL
  local own_log=0
  if [ -z "${TVMRT_SKIP_LOG:-}" ]; then
    export TVMRT_SKIP_LOG="$PWD/build/cross/$arch/skipped.txt"
    : >"$TVMRT_SKIP_LOG"
    own_log=1
  fi
  local rc=0 test_args=()
  read -r -a test_args <<<"${TVMRT_CROSS_TEST_ARGS:-}"
  # The CLI tests run the target's tvmrt next to the test binaries (another package: cargo
  # test of this one does not build it).
  cargo build "${cargo_args[@]}" -p tvmrt
  # The randomised unit tests (JSON, float printing) draw a twentieth of their cases: emulated,
  # they would take minutes (src/packed_func/mod.rs, test_scale).
  TVMRT_TEST_SCALE="${TVMRT_TEST_SCALE:-20}" \
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
  cargo build "${cargo_args[@]}" -p tvm-runtime-capi --lib
  local build="build/cross/$arch/c_tests"
  cmake -S c_tests -B "$build" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-$arch.cmake" \
    -DTVM_INCLUDE_DIRS="$PWD/include" -DTVM_RUNTIME_LIB="$out/libtvm_runtime.so" >/dev/null
  cmake --build "$build" -j "$(nproc)"
  (cd "$build" && ctest --output-on-failure)
  echo "==> C suite $triple: $((SECONDS - start)) s"
}

stage_models() {
  echo "==> models under $qemu ($triple, $profile)"
  local start=$SECONDS names=() big=()
  read -r -a names <<<"${TVMRT_CROSS_MODELS:-}"
  local n
  for n in "${names[@]}"; do
    case "$n" in resnet18 | mobilenet | relax_resnet18 | relax_mobilenet) big=(--models) ;; esac
  done
  "$TVMRT_PYTHON" scripts/build_cross_fixtures.py --arch "$arch" "${big[@]}"
  echo "==> fixtures ready: $((SECONDS - start)) s"
  cargo build "${cargo_args[@]}" -p tvmrt
  "$TVMRT_PYTHON" scripts/run_cross_fixtures.py --dir "$TVMRT_CACHE/fixtures-$rarch" \
    --tvmrt "$out/tvmrt" --runner "$qemu -L $sysroot" "${names[@]}"
  echo "==> models $triple: $((SECONDS - start)) s"
}

stage_static() {
  echo "==> static deploy program for $triple, under $qemu"
  local start=$SECONDS key model dir="build/cross/$arch/static_deploy"
  local tvm_target
  tvm_target="$("$TVMRT_PYTHON" -c 'import sys; sys.path.insert(0, "scripts")
import build_cross_fixtures as b; print(b.ARCHES[sys.argv[1]][2])' "$arch")"
  key="$( (cat examples/static_deploy/build_model.py examples/models/mlp.so
    echo "$tvm_target") | sha256sum | cut -c1-16)"
  model="$TVMRT_CACHE/static_deploy/$arch-$key"
  if [ ! -f "$model/mlp_syslib.o" ] || [ ! -f "$model/mlp_model.h" ]; then
    rm -rf "$model.tmp"
    TOPHUB_LOCATION=NONE "$TVMRT_PYTHON" examples/static_deploy/build_model.py "$model.tmp" \
      "$tvm_target"
    rm -rf "$model"
    mv "$model.tmp" "$model"
  fi
  local sets="$PWD/target/cross-sets/minimal"
  cargo build --release --target "$triple" --target-dir "$sets" -p tvm-runtime-capi --lib \
    --no-default-features --features minimal
  local archive="$sets/$triple/release/libtvm_runtime.a"
  mkdir -p "$dir"
  "$gnu-gcc" -std=c99 -Os -Wall -Wextra -Werror -Iinclude -I"$model" \
    -c examples/static_deploy/main.c -o "$dir/main.o"
  "$gnu-gcc" -o "$dir/static_mlp" "$dir/main.o" "$model/mlp_syslib.o" "$archive" \
    -Wl,--gc-sections -Wl,--as-needed -lm -lpthread -ldl
  "$gnu-strip" -o "$dir/static_mlp.stripped" "$dir/static_mlp"
  file "$dir/static_mlp.stripped" | sed "s|$PWD/||"
  "$qemu" -L "$sysroot" "$dir/static_mlp.stripped"
  echo "==> static mlp $triple: $(stat -c %s "$dir/static_mlp.stripped") bytes stripped" \
    "(runtime static, libc shared); $((SECONDS - start)) s"
}

stage_rpc() {
  echo "==> rpc-server under $qemu ($triple, $profile), driven from the host"
  local start=$SECONDS
  cargo build "${cargo_args[@]}" -p tvmrt
  # Our client: TVM's Python on our x86-64 library (the test command's release build).
  [ -f target/release/libtvm_runtime.so ] || cargo build --release -p tvm-runtime-capi --lib
  "$TVMRT_PYTHON" scripts/cross_rpc.py --arch "$arch" --tvmrt "$out/tvmrt" \
    --runner "$qemu -L $sysroot" --our-lib target/release
  echo "==> rpc $triple: $((SECONDS - start)) s"
}

stage_package() {
  echo "==> CMake package for $triple, installed in a sysroot"
  local start=$SECONDS pkg="build/cross/$arch/package" root="$PWD/build/cross/$arch/sysroot"
  cmake -S . -B "$pkg" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-$arch.cmake" \
    -DTVMRT_CARGO_DIR="$target_dir" -DTVMRT_CARGO_PROFILE="$profile" >/dev/null
  cmake --build "$pkg"
  rm -rf "$root"
  DESTDIR="$root" cmake --install "$pkg" --prefix /usr >/dev/null
  file -L "$root/usr/lib/libtvm_runtime.so" | sed "s|$PWD/||"
  echo "features: $(PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root/usr/lib/pkgconfig" \
    pkg-config --variable=features tvm_runtime)"
  # pkg-config in the sysroot: its flags point into it.
  local flags
  flags="$(PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root/usr/lib/pkgconfig" \
    pkg-config --cflags --libs tvm_runtime)"
  echo "pkg-config --cflags --libs tvm_runtime: ${flags//$PWD\//}"
  # shellcheck disable=SC2086 # the flags are words
  "$gnu-gcc" -o "$pkg/features_pc" cmake/tvm_runtime_features.c $flags
  LD_LIBRARY_PATH="$root/usr/lib" "$qemu" -L "$sysroot" "$pkg/features_pc" >"$pkg/features.txt"
  echo "the pkg-config program lists $(wc -l <"$pkg/features.txt") features"
  # find_package(tvm) in a cross CMake project.
  cmake -S examples/c -B "$pkg/example-c" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-$arch.cmake" \
    -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
  cmake --build "$pkg/example-c"
  local mlp="$TVMRT_CACHE/fixtures-$rarch/mlp.so"
  if [ -f "$mlp" ]; then
    LD_LIBRARY_PATH="$root/usr/lib" "$qemu" -L "$sysroot" "$pkg/example-c/deploy_model" "$mlp" \
      data | tee "$pkg/deploy_model.txt"
    # Its outputs (printed with 6 decimals) against the x86-64 reference's for the same model.
    "$TVMRT_PYTHON" - "$pkg/deploy_model.txt" "${mlp%.so}/output_0.npy" <<'PY'
import re, sys
import numpy as np
got = [float(v) for v in re.findall(r"^  \[\d+\] (\S+)$", open(sys.argv[1]).read(), re.M)]
want = np.load(sys.argv[2]).ravel()
ok = len(got) == want.size and np.all(np.abs(np.array(got) - want) <= 5e-7 + 1e-5 * np.abs(want))
print("deploy_model: outputs %s the x86-64 reference's (rtol 1e-5, 6 printed decimals)"
      % ("match" if ok else "DIFFER from"))
sys.exit(0 if ok else 1)
PY
  else
    tvmrt_skip TVMRT_REQUIRE_FIXTURES "no $mlp for the cross-built deploy_model (cross.sh $arch models)"
  fi
  echo "==> package $triple: $((SECONDS - start)) s"
}

for s in "${stages[@]}"; do
  case "$s" in
    package) stage_package ;;
    static) stage_static ;;
    rpc) stage_rpc ;;
    build) stage_build ;;
    check) stage_check ;;
    test) stage_test ;;
    c-suite) stage_c_suite ;;
    models) stage_models ;;
  esac
done

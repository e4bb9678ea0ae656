#!/usr/bin/env bash
# Hardening stage of the test command (issue 16):
#   1. AddressSanitizer (with LeakSanitizer): the Rust tests of the CPU rooms, built
#      --no-default-features --features cpu (so this is also the CPU-only build's test run),
#      then the C conformance suite on that instrumented library;
#   2. ThreadSanitizer, with std itself rebuilt instrumented (-Zbuild-std, needs the rust-src
#      component, installed here when missing): the tests that run threads (the lib's unit
#      tests, thread pool included; tests/concurrency.rs: one executor per thread, object
#      references and the registry from many threads; tests/registry.rs; tests/core_api.rs with
#      the eight-thread stress test; tests/rpc.rs: server threads and client sessions);
#   3. the CPU-only release library (no CUDA, no Vulkan): the C suite on it, and the stripped
#      sizes of both builds.
# Any sanitizer report fails the stage; there are no suppressions.
# The sanitizers need nightly flags on the stable toolchain (RUSTC_BOOTSTRAP=1, see
# DESIGN.md "Sanitizers"), an explicit --target (so build scripts and proc macros are not
# instrumented) and their own target directories. Most of the stage's time is compiling (each
# sanitizer builds its own copy of the dependencies, and TSan its own std), hence the cheap
# profile below.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

step() { printf '\n==> %s\n' "$*"; }
host=x86_64-unknown-linux-gnu
if [ "$(rustc -vV | sed -n 's/^host: //p')" != "$host" ]; then
  tvmrt_skip "sanitizer stage (the host is not $host)"
  exit 0
fi
export RUSTC_BOOTSTRAP=1
# Sanitizer builds: our crate at opt-level 1 with line tables (reports name file and line),
# every other crate (dependencies, the test-only ones, TSan's std) at opt-level 0 without debug
# information, which halves the compile time.
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_DEV_DEBUG=line-tables-only \
  CARGO_PROFILE_DEV_INCREMENTAL=false
cargo_san() {
  # `build` makes the C library (the capi package), `test` runs the runtime crate's tests.
  local pkg=tvm-runtime
  [ "$1" != build ] || pkg=tvm-runtime-capi
  cargo "$1" -p "$pkg" --no-default-features --features cpu --target "$host" \
    --config 'profile.dev.package."*".opt-level=0' --config 'profile.dev.package."*".debug=false' \
    "${@:2}"
}

# C suite against one library, mode (a) of c_tests/CMakeLists.txt. Extra arguments are CMake
# definitions.
c_suite() {
  local name="$1" lib="$2"
  shift 2
  cmake -S c_tests -B "build/c_tests-$name" -DCMAKE_BUILD_TYPE=Debug \
    -DTVM_INCLUDE_DIRS="$PWD/include" -DTVM_RUNTIME_LIB="$lib" "$@" >/dev/null
  cmake --build "build/c_tests-$name" -j "$(nproc)" >/dev/null
  (cd "build/c_tests-$name" && ctest --output-on-failure)
}

step "AddressSanitizer: Rust tests of the CPU-only build"
# The tests ask for impossible sizes on purpose and expect a clean error, so allocations may
# return null.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
RUSTFLAGS="-Zsanitizer=address" cargo_san test --target-dir target/asan --lib \
  --test core_api --test graph_executor --test fixtures --test elf_check --test concurrency \
  --test registry --test null_device --test relax_vm --test rpc --test llm_param_cache \
  --test llm_decoder

step "AddressSanitizer: C suite on the instrumented library"
# A cdylib does not carry the sanitizer runtime: the C tests are linked with the C compiler's
# (-fsanitize=address), which the library's instrumentation then uses. The suite asks for
# impossible sizes on purpose and expects a clean error, so allocations may return null.
RUSTFLAGS="-Zsanitizer=address" cargo_san build --target-dir target/asan --lib
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
  c_suite asan "$PWD/target/asan/$host/debug/libtvm_runtime.so" \
  -DCMAKE_C_FLAGS=-fsanitize=address -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address \
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address
unset ASAN_OPTIONS

# The JSON and float-printing unit tests run on one thread and take most of a minute under
# ThreadSanitizer (big-integer arithmetic, instrumented): skipped here, run everywhere else.
step "ThreadSanitizer: the tests that run threads"
# TSan needs std itself instrumented: with the prebuilt std, the slow (contended) paths of
# std's Mutex/RwLock and libtest's own channel are invisible to it and it reports the accesses
# those locks protect as races. So std is rebuilt with the sanitizer (-Zbuild-std), which needs
# the rust-src component: installed here when missing (CI: a fresh machine with rustup).
std_src="$(rustc --print sysroot)/lib/rustlib/src/rust/library/std"
if [ ! -d "$std_src" ] && command -v rustup >/dev/null 2>&1; then
  rustup component add rust-src
fi
if [ -d "$std_src" ]; then
  TSAN_OPTIONS="halt_on_error=1:allocator_may_return_null=1" RUSTFLAGS="-Zsanitizer=thread" \
    cargo_san test -Zbuild-std --target-dir target/tsan --lib \
    --test concurrency --test registry --test core_api --test rpc \
    -- --skip packed_func::json:: --skip packed_func::float_text::
else
  tvmrt_skip "ThreadSanitizer (needs the rust-src component to rebuild std, and no rustup)"
fi

step "CPU-only release library: C suite and sizes"
# The cpu set's directory, which the test command's feature-set step already built.
cargo build --release --no-default-features --features cpu -p tvm-runtime-capi --lib \
  --target-dir target/sets/cpu
c_suite cpu-only "$PWD/target/sets/cpu/release/libtvm_runtime.so"
for lib in target/release/libtvm_runtime.so target/sets/cpu/release/libtvm_runtime.so; do
  if [ -f "$lib" ]; then
    strip -o "$lib.stripped" "$lib"
    echo "stripped size of $lib: $(stat -c %s "$lib.stripped") bytes"
    rm -f "$lib.stripped"
  fi
done

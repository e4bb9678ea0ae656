#!/usr/bin/env bash
# Prepares the GPU checks for a machine with an NVIDIA GPU but no Rust toolchain (the device
# machine some sessions are lent): builds here, copies what the checks run into .dev/, and
# downloads the Vulkan loader with the GL vendor libraries the NVIDIA Vulkan driver needs into
# .gl/ (both ignored by git). On the GPU machine, from a copy of the repo with .dev and .gl:
#   bash scripts/gpu_run.sh            (writes logs to $OUT, or to .dev/out without it)
# It runs the CUDA tests, the C API tests on CUDA, cuda_bench idle and under load, and the
# Vulkan tests on the NVIDIA driver, each required to run (TVMRT_REQUIRE_CUDA/VULKAN=1).
set -euo pipefail
cd "$(dirname "$0")/.."
D=.dev
mkdir -p "$D/deps" .gl
pwd > "$D/src_root"
exe() { # the test executable cargo built for a --test target (its JSON messages)
  cargo test --test "$1" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1" | tail -1
}
cp "$(exe cuda)" "$D/deps/cuda-test"
cp "$(exe vulkan)" "$D/deps/vulkan-test"
cargo build -p tvmrt
cp target/debug/tvmrt "$D/tvmrt"   # tests/vulkan.rs looks for it beside deps/
cargo build --release --example cuda_bench
cp target/release/examples/cuda_bench "$D/"
cargo build --release -p tvm-runtime-capi --lib
cp target/release/libtvm_runtime.so "$D/"
strip --strip-debug "$D"/deps/* "$D/tvmrt" "$D/cuda_bench"
strip "$D/libtvm_runtime.so"
for t in test_cuda test_device test_ndarray; do
  cc -Wall -Wextra -Werror -std=c99 -I include -I c_tests "c_tests/$t.c" -o "$D/$t" \
    -L"$D" -ltvm_runtime -lpthread -ldl -Wl,-rpath,'$ORIGIN' \
    -DTVMRT_FIXTURE_MODULE='"unused"' -DTVMRT_SCRATCH_DIR='"/tmp"'
done
cp "$(command -v glslangValidator)" "$D/"   # tests/vulkan.rs compiles its shaders with it
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial
# shellcheck disable=SC2086
apt-get $o update >/dev/null
# shellcheck disable=SC2086
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
du -sh "$D" .gl

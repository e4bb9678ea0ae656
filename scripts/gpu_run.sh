#!/usr/bin/env bash
# The GPU checks staged by scripts/gpu_stage.sh, run on the GPU machine from the repo root.
# Needs nvidia-smi, a C compiler (tests/cuda.rs builds its test library) and root (the
# Vulkan loader is unpacked into /). Logs go to $OUT (or .dev/out).
R=$PWD; D=$R/.dev; OUT=${OUT:-$D/out}; mkdir -p "$OUT"
# The test executables name their sources by the path they were built at (.dev/src_root).
src=$(cat "$D/src_root")
if [ "$src" != "$R" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$R" "$src"; fi
nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
export RUST_BACKTRACE=1 TVMRT_REQUIRE_CUDA=1
status=0
echo "== Rust CUDA tests"
timeout 240 "$D/deps/cuda-test" 2>&1 | tee "$OUT/cuda_test.log"; [ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "== C API tests on CUDA"
for t in test_cuda test_device test_ndarray; do
  LD_LIBRARY_PATH=$D timeout 60 "$D/$t" || status=1
done 2>&1 | tee "$OUT/c_tests.log"
echo "== cuda_bench, idle"
{ timeout 90 "$D/cuda_bench"; timeout 90 "$D/cuda_bench" --launches 100000 --mib 256; } 2>&1 | tee "$OUT/bench.log"
echo "== cuda_bench, busy ($(nproc) spinning processes)"
pids=; for _ in $(seq "$(nproc)"); do (while :; do :; done) & pids="$pids $!"; done
{ timeout 120 "$D/cuda_bench"; timeout 120 "$D/cuda_bench"; } 2>&1 | tee "$OUT/bench_busy.log"
# shellcheck disable=SC2086
kill $pids 2>/dev/null; wait 2>/dev/null
echo "== Vulkan tests on the NVIDIA driver"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
"$D/tvmrt" devices 2>&1 | tee "$OUT/devices.log"
PATH=$D:$PATH TVMRT_REQUIRE_VULKAN=1 timeout 150 "$D/deps/vulkan-test" 2>&1 | tee "$OUT/vulkan_test.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "gpu_run: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status

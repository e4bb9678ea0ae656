# Source this file: exports the locations scripts/setup.sh prepared.
export TVMRT_CACHE="${TVMRT_CACHE:-$HOME/.cache/tvm-runtime-rs}"
export TVMRT_REF_DIR="$TVMRT_CACHE/wheel/tvm"
export TVMRT_REF_LIB="$TVMRT_REF_DIR/libtvm_runtime.so"
export TVMRT_REF_INCLUDE="$TVMRT_REF_DIR/include"
export TVMRT_REF_DLPACK_INCLUDE="$TVMRT_REF_DIR/dlpack/include"
export TVMRT_PYTHON="$TVMRT_CACHE/venv/bin/python"
export TVMRT_FFI_PYTHON="$TVMRT_CACHE/venv-ffi/bin/python"
export TVM_FFI=ctypes
# tvmrt_skip: the one way a script reports something it cannot run (counted by the test command).
source "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
# Vulkan tests run on Mesa's lavapipe when it is installed.
if [ -z "${VK_ICD_FILENAMES:-}" ] && [ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ]; then
  export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi

# The benchmark scripts share build/bench (the two runtimes' library links, the C drivers): a
# second one started meanwhile would swap the libraries under the first, so they run one at a
# time. The lock is held by file descriptor 9 until the script exits.
bench_lock() {
  [ -n "${TVMRT_BENCH_LOCKED:-}" ] && return 0
  mkdir -p build/bench
  exec 9>build/bench/.lock
  if ! flock -n 9; then
    echo "$(basename "$0"): another benchmark script is running (build/bench/.lock is held)" >&2
    exit 1
  fi
  export TVMRT_BENCH_LOCKED=1
}

# Source this file: exports the locations scripts/setup.sh prepared.
export TVMRT_CACHE="${TVMRT_CACHE:-$HOME/.cache/tvm-runtime-rs}"
export TVMRT_REF_DIR="$TVMRT_CACHE/wheel/tvm"
export TVMRT_REF_LIB="$TVMRT_REF_DIR/libtvm_runtime.so"
export TVMRT_REF_INCLUDE="$TVMRT_REF_DIR/include"
export TVMRT_REF_DLPACK_INCLUDE="$TVMRT_REF_DIR/dlpack/include"
export TVMRT_PYTHON="$TVMRT_CACHE/venv/bin/python"
export TVMRT_FFI_PYTHON="$TVMRT_CACHE/venv-ffi/bin/python"
export TVM_FFI=ctypes
# Vulkan tests run on Mesa's lavapipe when it is installed.
if [ -z "${VK_ICD_FILENAMES:-}" ] && [ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ]; then
  export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi

#!/usr/bin/env bash
# Prepares everything the tests need on a fresh machine, idempotently:
#   - Debian packages (cmake, valgrind) when missing,
#   - the reference runtime and compiler (PyPI wheel hhb-tvm==3.2.3, TVM 0.16.dev0) unpacked,
#   - a Python virtual environment with TVM's Python package (ctypes FFI) and its needs.
# Everything is cached under $TVMRT_CACHE (default ~/.cache/tvm-runtime-rs), outside the tree.
# Prints nothing but progress; source scripts/env.sh afterwards for the variables.
set -euo pipefail
CACHE="${TVMRT_CACHE:-$HOME/.cache/tvm-runtime-rs}"
mkdir -p "$CACHE"

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v valgrind >/dev/null || need_apt+=(valgrind)
command -v g++ >/dev/null || need_apt+=(g++)
# clang++: the C++ API headers must compile warning-free with it too (scripts/test_cpp.sh).
command -v clang++ >/dev/null || need_apt+=(clang)
# Vulkan: the loader, Mesa's lavapipe (a CPU Vulkan driver) and glslang for the test shaders.
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || need_apt+=(mesa-vulkan-drivers)
ldcache="$(ldconfig -p 2>/dev/null || true)"  # captured: a pipe into grep -q can die of SIGPIPE
grep -q 'libvulkan\.so\.1' <<<"$ldcache" || need_apt+=(libvulkan1)
command -v glslangValidator >/dev/null || need_apt+=(glslang-tools)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

WHEEL_DIR="$CACHE/wheel"
if [ ! -f "$WHEEL_DIR/tvm/libtvm_runtime.so" ]; then
  echo "setup: fetching the reference wheel hhb-tvm==3.2.3"
  mkdir -p "$WHEEL_DIR"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.10 \
    hhb-tvm==3.2.3 -d "$WHEEL_DIR"
  unzip -q -o "$WHEEL_DIR"/hhb_tvm-3.2.3-*.whl 'tvm/*' -d "$WHEEL_DIR"
  rm -f "$WHEEL_DIR"/hhb_tvm-3.2.3-*.whl
fi

VENV="$CACHE/venv"
if [ ! -f "$VENV/.ready" ]; then
  echo "setup: creating the Python environment"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "numpy<2" "ml_dtypes<0.5" decorator attrs psutil scipy \
    typing_extensions cloudpickle tornado packaging tqdm tflite pytest
  site="$("$VENV/bin/python" -c 'import site;print(site.getsitepackages()[0])')"
  cp -r "$WHEEL_DIR/tvm" "$site/"
  rm -f "$site"/tvm/_ffi/_cy3/*.so
  touch "$VENV/.ready"
fi
# TVM v0.27 (the tvm-ffi ABI) in its own environment: it compiles the tvm-ffi fixtures
# (scripts/build_ffi_fixtures.py) and computes their expected outputs.
VENV_FFI="$CACHE/venv-ffi"
if [ ! -f "$VENV_FFI/.ready" ]; then
  echo "setup: creating the TVM 0.27 environment (apache-tvm, for the tvm-ffi fixtures)"
  rm -rf "$VENV_FFI"
  python3 -m venv "$VENV_FFI"
  "$VENV_FFI/bin/pip" install -q "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.15.post2" "numpy<2.3"
  touch "$VENV_FFI/.ready"
fi
echo "setup: ready in $CACHE"

#!/usr/bin/env bash
# Runs the Python suite (tests/python) with TVM's own Python package (hhb-tvm 3.2.3,
# TVM 0.16.dev0) in runtime-only mode on one libtvm_runtime.so.
#
#   scripts/run_python_tests.sh ours|ref [pytest args...]
#
#   ours  target/release/libtvm_runtime.so (built here with cargo build --release, unless
#         TVMRT_SKIP_BUILD=1), copied so that a concurrent rebuild cannot swap it mid-run
#   ref   TVM's reference libtvm_runtime.so from the wheel ($TVMRT_REF_LIB)
#
# The library is put alone in a temporary directory: TVM_LIBRARY_PATH points there, so TVM can
# never pick up libtvm.so (the full compiler next to the reference runtime); conftest.py checks
# what was loaded and stops at once otherwise. Fixtures come from scripts/build_fixtures.py
# (cached in $TVMRT_CACHE/fixtures); tests that need them skip when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

[ $# -ge 1 ] || { echo "usage: $0 ours|ref [pytest args...]" >&2; exit 2; }
which="$1"
shift

if [ -f scripts/build_fixtures.py ]; then
  # Builds with the full compiler (libtvm.so), in its own process, before runtime-only mode.
  env -u TVM_LIBRARY_PATH -u TVM_USE_RUNTIME_LIB "$TVMRT_PYTHON" scripts/build_fixtures.py
fi
[ -f scripts/build_llm_fixtures.py ] && env -u TVM_LIBRARY_PATH -u TVM_USE_RUNTIME_LIB "$TVMRT_PYTHON" scripts/build_llm_fixtures.py

tmp="$(mktemp -d "${TMPDIR:-/tmp}/tvmrt-pytest.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
case "$which" in
  ref)
    [ -f "$TVMRT_REF_LIB" ] || { echo "missing $TVMRT_REF_LIB (run scripts/setup.sh)" >&2; exit 1; }
    ln -s "$TVMRT_REF_LIB" "$tmp/libtvm_runtime.so"
    src="$TVMRT_REF_LIB"
    ;;
  ours)
    if [ "${TVMRT_SKIP_BUILD:-0}" != 1 ]; then
      cargo build --release --quiet
    fi
    src="$PWD/target/release/libtvm_runtime.so"
    cp "$src" "$tmp/libtvm_runtime.so"
    ;;
  *)
    echo "usage: $0 ours|ref [pytest args...]" >&2
    exit 2
    ;;
esac

export TVM_LIBRARY_PATH="$tmp" TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes
export TVMRT_WHICH="$which" TVMRT_EXPECT_LIB="$tmp/libtvm_runtime.so" TVMRT_LIB_SOURCE="$src"
export PYTHONDONTWRITEBYTECODE=1
# Extra arguments go to pytest; the whole suite runs unless they name paths under tests/python.
target=(tests/python)
for a in "$@"; do
  case "$a" in tests/python*) target=() ;; esac
done
"$TVMRT_PYTHON" -m pytest -q ${target[@]+"${target[@]}"} "$@"

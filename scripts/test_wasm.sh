#!/usr/bin/env bash
# The JavaScript / WebAssembly tests (issue 28): our runtime compiled to wasm, driven by TVM's
# unchanged JavaScript runtime from npm (`@mlc-ai/web-runtime@0.18.0-dev2`, tvmjs).
#
#   1. scripts/build_wasm.sh: target/wasm/tvmjs_runtime.{wasm,wasi.js} (installs emscripten)
#   2. npm: tvmjs into $TVMRT_CACHE/npm-web (once)
#   3. kernels compiled by TVM 0.27 for wasm32 (scripts/wasm/build_wasm_fixtures.py, with the
#      venv scripts/setup.sh makes) linked into target/wasm/test_model.wasm
#   4. node --test tests/wasm/*.test.js (node's own runner, no npm test framework)
#   5. headless Chromium (Debian's `chromium`, installed when missing) runs the MLP in a page;
#      the screenshot is kept as target/wasm/browser.png
#
#   scripts/test_wasm.sh [--no-browser | --prepare]
#
# --prepare: only what needs no build of ours (the installs: emscripten, Chromium, the rustup
# target, tvmjs from npm; the TVM 0.27 kernels), which the test command runs in the background
# while it builds; a later full run finds them in place.
#
# Environment: TVMRT_WASM_MODEL_OPT (emcc optimisation of the test model, default -O1: the
# runtime's own link is -O3, binaryen's -O3 pass over the model adds half a minute for nothing
# these tests check). A stage that cannot run reports itself through tvmrt_skip.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

browser=1
prepare=0
case "${1:-}" in
  --no-browser) browser=0 ;;
  --prepare) prepare=1 ;;
  "") ;;
  *) echo "usage: $0 [--no-browser | --prepare]" >&2; exit 2 ;;
esac

install_chromium() {
  if ! command -v chromium >/dev/null; then
    echo "== wasm: installing chromium"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
}

if [ "$prepare" = 1 ]; then
  bash scripts/build_wasm.sh --setup
  install_chromium
else
  echo "== wasm: building the runtime (scripts/build_wasm.sh)"
  bash scripts/build_wasm.sh
fi

npm_dir="$TVMRT_CACHE/npm-web"
pkg="@mlc-ai/web-runtime"
ver="0.18.0-dev2"
export TVMJS="$npm_dir/node_modules/$pkg"
if ! grep -q "\"version\": \"$ver\"" "$TVMJS/package.json" 2>/dev/null; then
  echo "== wasm: installing $pkg@$ver from npm into $npm_dir"
  command -v npm >/dev/null || {
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null
  }
  mkdir -p "$npm_dir"
  [ -f "$npm_dir/package.json" ] || echo '{"private": true}' >"$npm_dir/package.json"
  npm install --prefix "$npm_dir" --no-audit --no-fund --silent "$pkg@$ver"
fi

have_model=0
fx="$TVMRT_CACHE/wasm_fixtures"
if [ -x "${TVMRT_FFI_PYTHON:-}" ]; then
  echo "== wasm: kernels compiled by TVM 0.27 for wasm32"
  "$TVMRT_FFI_PYTHON" scripts/wasm/build_wasm_fixtures.py 2>&1 | grep -v "native vector bits" || true
fi
[ "$prepare" = 0 ] || exit 0
if [ -x "${TVMRT_FFI_PYTHON:-}" ] && [ -f "$fx/stamp" ]; then
  mapfile -t objs < <(ls "$fx"/objs/mlp*.o)
  TVMRT_WASM_OPT="${TVMRT_WASM_MODEL_OPT:--O1}" \
    bash scripts/build_wasm.sh --link target/wasm/test_model.wasm "${objs[@]}"
  have_model=1
fi
if [ "$have_model" = 0 ]; then
  rm -f target/wasm/test_model.wasm
  tvmrt_skip "the TVM 0.27 environment (\$TVMRT_FFI_PYTHON, scripts/setup.sh) is missing: no kernels, model tests skipped"
fi

echo "== wasm: node tests through tvmjs"
node --test tests/wasm/

if [ "$browser" = 1 ] && [ "$have_model" = 1 ]; then
  install_chromium
  echo "== wasm: headless Chromium page"
  node tests/wasm/browser.js target/wasm/browser.png
elif [ "$browser" = 1 ]; then
  tvmrt_skip "browser test: no model wasm (see above)"
fi
echo "== wasm: all passed"

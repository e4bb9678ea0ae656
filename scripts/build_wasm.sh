#!/usr/bin/env bash
# Builds the runtime for WebAssembly, for TVM's JavaScript runtime (tvmjs, npm
# `@mlc-ai/web-runtime`): the crate as a static library for wasm32-unknown-emscripten with the
# `web` feature set (graph, relax + llm builtins, tvm-ffi kernels as a system library; no
# threads, no dlopen, no RPC), linked by emcc into
#
#   target/wasm/tvmjs_runtime.wasm     the runtime alone (what TVM's web build puts in dist/wasm)
#   target/wasm/tvmjs_runtime.wasi.js  its JS glue wrapped as tvmjs's library provider
#                                      (`EmccWASI`, what a tvmjs build bundles as
#                                      src/tvmjs_runtime_wasi.js)
#
#   scripts/build_wasm.sh                          the two files above
#   scripts/build_wasm.sh --link OUT.wasm OBJ...   a model: the runtime plus kernel objects
#                                                  compiled by TVM for wasm32 (system library),
#                                                  with its glue as OUT.wasi.js
#
# Installs what a fresh machine lacks, idempotently: Debian's emscripten (emcc 3.1.6, with
# clang/lld 14 and binaryen) and the rustup target. Debian's emcc finds its JS tools (acorn)
# only with NODE_PATH=/usr/share/nodejs, set here.
#
# Panics: the release profile's `panic = "unwind"`, linked with -fwasm-exceptions (WebAssembly
# exception handling, which the prebuilt std for this target is compiled with), so that a
# panic inside a C entry point becomes a TVM error like everywhere else and the instance
# stays usable. The other way, nightly -Zbuild-std with panic=abort, would allow binaryen's
# Asyncify (only tvmjs's WebGPU path needs it) but turns every panic into a trap; see
# README "JavaScript / WebAssembly".
#
# Environment: TVMRT_WASM_OPT (emcc optimisation, default -O3); TVMRT_WASM_PANIC=abort builds
# the other way (nightly + rust-src, installed when missing; Asyncify on; for measurements).
# CARGO_TARGET_DIR is not used (the builds have their own, target/wasm-build[-abort]).
set -euo pipefail
cd "$(dirname "$0")/.."

out_wasm=target/wasm/tvmjs_runtime.wasm
objs=()
setup_only=0
if [ "${1:-}" = "--setup" ]; then
  setup_only=1
elif [ "${1:-}" = "--link" ]; then
  [ $# -ge 2 ] || { echo "usage: $0 [--link OUT.wasm OBJ.o...]" >&2; exit 2; }
  out_wasm="$2"
  shift 2
  objs=("$@")
  for o in "${objs[@]}"; do
    [ -f "$o" ] || { echo "build_wasm: no such object: $o" >&2; exit 2; }
  done
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--setup | --link OUT.wasm OBJ.o...]" >&2
  exit 2
fi
case "$out_wasm" in
  *.wasm) ;;
  *) echo "build_wasm: the output must end in .wasm: $out_wasm" >&2; exit 2 ;;
esac

export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"
need_apt=()
command -v emcc >/dev/null || need_apt+=(emscripten)
command -v node >/dev/null || need_apt+=(nodejs)
command -v llvm-nm >/dev/null || need_apt+=(llvm)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "build_wasm: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
triple=wasm32-unknown-emscripten
if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
  echo "build_wasm: adding the rustup target $triple"
  rustup target add "$triple" >/dev/null
fi
[ "$setup_only" = 0 ] || exit 0

# The static library. No debug info (it would be linked into the wasm).
panic="${TVMRT_WASM_PANIC:-unwind}"
case "$panic" in
  unwind)
    tdir=target/wasm-build
    cargo=(cargo)
    zflags=()
    link_flags=(-fwasm-exceptions)
    ;;
  abort)
    tdir=target/wasm-build-abort
    if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
      echo "build_wasm: installing the nightly toolchain with rust-src (for -Zbuild-std)"
      rustup toolchain install nightly --profile minimal --component rust-src >/dev/null
    fi
    cargo=(cargo +nightly)
    zflags=("-Zbuild-std=std,panic_abort")
    link_flags=(-sASYNCIFY=1)
    export CARGO_PROFILE_RELEASE_PANIC=abort
    ;;
  *) echo "build_wasm: TVMRT_WASM_PANIC must be unwind or abort" >&2; exit 2 ;;
esac
lib=$tdir/$triple/release/libtvm_runtime.a
# Fat LTO, as before session 8: the release profile's thin LTO is there for the stand-ins of
# std's default hooks (capi/build_std_hooks.rs), which WebAssembly builds do not link.
CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_DEBUG=0 "${cargo[@]}" rustc --quiet --release --lib \
  --crate-type staticlib --target "$triple" --no-default-features --features web \
  --target-dir "$tdir" "${zflags[@]}"

# Everything the C ABI names (TVM*, plus the tvm-ffi entry points kernels import) is exported;
# the linker pulls from the archive only what the exports and the objects reach.
exports="$(llvm-nm --defined-only -g "$lib" 2>/dev/null |
  awk '$2 == "T" && $3 ~ /^TVM/ { print "_" $3 }' | sort -u | paste -sd, -)"
[ -n "$exports" ] || { echo "build_wasm: no TVM* symbols in $lib" >&2; exit 1; }

mkdir -p "$(dirname "$out_wasm")"
glue="${out_wasm%.wasm}.js"
rm -f "$out_wasm"
# -sERROR_ON_UNDEFINED_SYMBOLS=0: env.TVMWasmPackedCFunc and env.TVMWasmPackedCFuncFinalizer
# are imports tvmjs provides; emcc warns about them, which is expected.
emcc "${TVMRT_WASM_OPT:--O3}" --no-entry "${link_flags[@]}" \
  -sSTANDALONE_WASM=1 -sWASM_BIGINT=1 -sALLOW_MEMORY_GROWTH=1 -sERROR_ON_UNDEFINED_SYMBOLS=0 \
  -sEXPORTED_FUNCTIONS="$exports" --pre-js scripts/wasm/preload.js \
  -o "$glue" "${objs[@]}" "$lib" 2>&1 |
  grep -v 'undefined symbol: TVMWasmPackedCFunc' || true
[ -f "$out_wasm" ] || { echo "build_wasm: emcc did not write $out_wasm" >&2; exit 1; }
bash scripts/wasm/wasi_wrap.sh "$glue" "${out_wasm%.wasm}.wasi.js"
rm -f "$glue"
echo "build_wasm: $out_wasm ($(stat -c %s "$out_wasm") bytes, $(gzip -9c "$out_wasm" | wc -c) gzip'd)"

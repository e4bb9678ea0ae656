#!/usr/bin/env bash
# Size and speed of the WebAssembly build (benches/README.md, "WebAssembly"): the runtime wasm
# alone and with the MLP (bytes, gzip -9 bytes), then, side by side on this machine, node
# running benches/wasm_bench.js (JS -> wasm packed calls, a kernel call, the MLP forward) and
# our native CLI running the same MLP compiled for x86-64 (`tvmrt run`, median of 200).
#
#   scripts/bench_wasm.sh [--rounds N]     (default 3 rounds; run scripts/test_wasm.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
rounds=3
[ "${1:-}" = "--rounds" ] && rounds="$2"
fx="$TVMRT_CACHE/wasm_fixtures"
export TVMJS="$TVMRT_CACHE/npm-web/node_modules/@mlc-ai/web-runtime"
if [ ! -f "$fx/stamp" ] || [ ! -f "$TVMJS/package.json" ]; then
  echo "bench_wasm: run scripts/test_wasm.sh first (fixtures, npm tvmjs)" >&2
  exit 1
fi

# The model linked as shipped (-O3), into its own directory.
out=build/bench/wasm
mkdir -p "$out"
mapfile -t objs < <(ls "$fx"/objs/mlp*.o)
bash scripts/build_wasm.sh >/dev/null
bash scripts/build_wasm.sh --link "$out/test_model.wasm" "${objs[@]}" >/dev/null
echo "| file | bytes | gzip -9 bytes |"
echo "|---|--:|--:|"
for f in target/wasm/tvmjs_runtime.wasm target/wasm/tvmjs_runtime.wasi.js "$out/test_model.wasm"; do
  echo "| $(basename "$f") | $(stat -c %s "$f") | $(gzip -9c "$f" | wc -c) |"
done

tvmrt="${TVMRT_BIN:-target/release/tvmrt}"
[ -x "$tvmrt" ] || cargo build --release -p tvmrt --quiet
echo
echo "| round | packed call, tvmjs (ns) | packed call, bare TVMFuncCall export (ns) | kernel call, tvmjs (ns) | MLP forward, node (us, median) | MLP forward, native tvmrt (us, median) |"
echo "|--:|--:|--:|--:|--:|--:|"
for r in $(seq "$rounds"); do
  js="$(TVMRT_WASM_DIR="$out" node benches/wasm_bench.js)"
  native="$("$tvmrt" run "$fx/mlp_native.so" --function main --input "x=$fx/mlp_x.npy" \
    --input "w1=$fx/mlp_w1.npy" --input "w2=$fx/mlp_w2.npy" --repeat 200 |
    sed -n 's/.*median \([0-9.]*\) \(us\|ms\).*/\1 \2/p')"
  native_us="$(awk '{ print ($2 == "ms") ? $1 * 1000 : $1 }' <<<"$native")"
  # shellcheck disable=SC2016  # JavaScript template literals, not shell expansions
  node -e '
    const j = JSON.parse(process.argv[1]);
    const f = (v) => v.toFixed(0);
    console.log(`| ${process.argv[2]} | ${f(j.packed_call_tvmjs_ns)} | ${f(j.packed_call_raw_ns)} | ` +
      `${f(j.kernel_call_tvmjs_ns)} | ${f(j.mlp_forward_median_us)} | ${process.argv[3]} |`);
  ' "$js" "$r" "$native_us"
done
echo
echo "node $(node --version), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"

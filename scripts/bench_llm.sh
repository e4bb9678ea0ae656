#!/usr/bin/env bash
# Decoder benchmark through the C API, side by side: the same C binary (benches/bench_llm_decode.c,
# built against TVM's reference headers and library) runs the decoder fixture of
# scripts/build_llm_fixtures.py on TVM's reference libtvm_runtime.so and on ours, alternately,
# one process per round, and prints one table.
#
#   scripts/bench_llm.sh [--rounds N] [--gens N] [--no-build]
#
#   --rounds N   processes per runtime, alternating which runtime goes first (default 6)
#   --gens N     timed 64-token greedy generations per process (default 5)
#
# Rows: one decode step (median and min over every timed step of every round, us), tokens/s of
# a 64-token greedy generation (median over the generations), prefill (us), load +
# vm_initialization and the weights (ms), peak RSS (MB, max over the rounds) and ours/ref.
# Raw outputs go under build/bench/llm/<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds=6
gens=5
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --gens) gens="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "bench_llm.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
source scripts/env.sh
FX="${TVMRT_FIXTURES:-$TVMRT_CACHE/fixtures}/llm"
[ -f "$FX/stamp" ] || { echo "bench_llm.sh: $FX was not built (scripts/build_llm_fixtures.py)" >&2; exit 1; }
[ "$build" = 1 ] && cargo build --release --lib >&2

out="build/bench"
bench_lock
res="$out/llm/$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$out/lib-ref" "$out/lib-ours" "$res"
ln -sfn "$(realpath "$TVMRT_REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
cp -f target/release/libtvm_runtime.so "$out/lib-ours/libtvm_runtime.so.tmp"
mv -f "$out/lib-ours/libtvm_runtime.so.tmp" "$out/lib-ours/libtvm_runtime.so"
cc -std=c99 -O2 -Wall -Wextra -Werror -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE" \
  -o "$out/bench_llm_decode" benches/bench_llm_decode.c -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now
mapfile -t names < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["param_names"]))' "$FX/meta.json")

{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
  echo "rounds $rounds gens $gens"
  echo "loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$res/meta.txt"
for r in $(seq 1 "$rounds"); do
  order="ref ours"
  [ $((r % 2)) = 0 ] && order="ours ref"
  for which in $order; do
    echo "== round $r/$rounds: $which" >&2
    TVM_NUM_THREADS=1 LD_LIBRARY_PATH="$root/$out/lib-$which" \
      "$out/bench_llm_decode" "$FX" --gens "$gens" -- "${names[@]}" >"$res/$which.$r.txt"
  done
done
echo "loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/meta.txt"

python3 - "$res" <<'EOF'
import glob, os, statistics as st, sys

res = sys.argv[1]
meta = dict(l.rstrip("\n").split(" ", 1) for l in open(os.path.join(res, "meta.txt")))

def load(which):
    d = {}
    for p in sorted(glob.glob(os.path.join(res, f"{which}.*.txt"))):
        for line in open(p):
            k, v = line.split()
            d.setdefault(k, []).append(v if k == "CHECK" else float(v))
    return d

ref, ours = load("ref"), load("ours")
rows = []
def row(metric, f, unit, target=""):
    r, o = f(ref), f(ours)
    rows.append((metric, unit, r, o, o / r if r else float("nan"), target))
row("decode step, median", lambda d: st.median(d["STEP_US"]), "us", "<= 0.7")
row("decode step, min", lambda d: min(d["STEP_US"]), "us")
row("64-token greedy", lambda d: st.median(d["TOKENS_PER_S"]), "tokens/s")
row("prefill (3 tokens)", lambda d: st.median(d["PREFILL_US"]), "us")
row("load + vm_initialization", lambda d: st.median(d["LOAD_MS"]), "ms")
row("weights (cache load + lookup)", lambda d: st.median(d["PARAMS_MS"]), "ms")
row("peak RSS", lambda d: max(d["MAXRSS_KB"]) / 1024, "MB")
print(f"\ndate {meta['date']}  commit {meta['commit']}  host {meta['host']}")
print(f"TVM_NUM_THREADS=1; rounds {meta['rounds']} (alternating processes per runtime)")
print(f"loadavg before {meta['loadavg_before']}, after {meta['loadavg_after']}\n")
print(f"{'metric':32} {'unit':8} {'reference':>10} {'ours':>10} {'ours/ref':>9}  target")
for m, u, r, o, q, t in rows:
    print(f"{m:32} {u:8} {r:10.3f} {o:10.3f} {q:9.3f}  {t}")
print("\nours/ref: < 1 means ours is faster / smaller (tokens/s: > 1 means ours is faster).")
bad = set(ref["CHECK"]) != set(ours["CHECK"]) or len(set(ref["CHECK"])) != 1
if bad:
    print(f"ERROR tokens differ (ref {sorted(set(ref['CHECK']))}, ours {sorted(set(ours['CHECK']))})")
sys.exit(1 if bad else 0)
EOF
echo "raw results: $res"

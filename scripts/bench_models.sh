#!/usr/bin/env bash
# Model benchmark, side by side: the same C binary (benches/bench_model.c, built against TVM's
# reference headers and library) runs resnet18 and mobilenet on TVM's reference
# libtvm_runtime.so and on ours, alternately, one process per round, and prints one table.
#
#   scripts/bench_models.sh [--rounds N] [--runs N] [--threads N] [--no-build] [MODEL ...]
#   scripts/bench_models.sh --load [bench_load.sh options]   (under load: see bench_load.sh)
#
#   --rounds N   processes per runtime and model, alternating which runtime goes first (default 4)
#   --runs N     timed run() calls per process after 2 warm-up runs (default 6); the run()
#                median is taken over rounds x runs calls (default 24)
#   --threads N  TVM_NUM_THREADS for both runtimes; by default each runtime uses its own
#                default thread count (the reference: half the logical CPUs on x86-64)
#   MODEL        graph libraries (default: resnet18.so and mobilenet.so from the fixtures,
#                built by scripts/build_fixtures.py --models)
#
# Columns: run() median / min / max in ms, load+create (median of the rounds), first run()
# (median), set_input (ns), peak RSS (max over the rounds, MB), and ours/ref ratios. After the
# table, ours's per-op profile (tvmrt run --profile) splits a run into kernels and runtime
# overhead. Raw outputs go under build/bench/models/<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--load" ]; then shift; exec bash scripts/bench_load.sh "$@"; fi
root="$PWD"
rounds=4
runs=6
threads=""
build=1
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    -*) echo "bench_models.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
source scripts/env.sh
if [ ${#models[@]} -eq 0 ]; then
  models=("$TVMRT_CACHE/fixtures/resnet18.so" "$TVMRT_CACHE/fixtures/mobilenet.so")
fi
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "bench_models.sh: $m is missing (scripts/build_fixtures.py --models)" >&2; exit 1; }
done
[ "$build" = 1 ] && cargo build --release --lib --bins >&2

out="build/bench"
bench_lock
res="$out/models/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/lib-ref" "$out/lib-ours" "$res"
ln -sfn "$(realpath "$TVMRT_REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
cp -f target/release/libtvm_runtime.so "$out/lib-ours/libtvm_runtime.so.tmp"
mv -f "$out/lib-ours/libtvm_runtime.so.tmp" "$out/lib-ours/libtvm_runtime.so"
cc -std=c99 -O2 -Wall -Wextra -Werror -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE" \
  -o "$out/bench_model" benches/bench_model.c -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now -lm

{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
  echo "threads ${threads:-the default of each runtime}"
  echo "rounds $rounds runs $runs"
  echo "loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$res/meta.txt"

for m in "${models[@]}"; do
  name="$(basename "$m" .so)"
  for r in $(seq 1 "$rounds"); do
    order="ref ours"
    [ $((r % 2)) = 0 ] && order="ours ref"
    for which in $order; do
      echo "== $name round $r/$rounds: $which" >&2
      env ${threads:+TVM_NUM_THREADS=$threads} LD_LIBRARY_PATH="$root/$out/lib-$which" \
        "$out/bench_model" "$m" --runs "$runs" --warmup 2 >"$res/$name.$which.$r.txt"
    done
  done
done
echo "loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/meta.txt"

python3 - "$res" "${models[@]}" <<'EOF'
import glob, os, statistics as st, sys

res, models = sys.argv[1], [os.path.basename(m)[:-3] for m in sys.argv[2:]]
meta = dict(l.rstrip("\n").split(" ", 1) for l in open(os.path.join(res, "meta.txt")))

def load(name, which):
    d = {"RUN_MS": [], "LOAD_CREATE_MS": [], "FIRST_RUN_MS": [], "SET_INPUT_NS": [],
         "MAXRSS_KB": [], "RUN_CPU_MS": [], "CHECK": set()}
    for p in sorted(glob.glob(os.path.join(res, f"{name}.{which}.*.txt"))):
        for line in open(p):
            k, v = line.split()
            if k == "CHECK":
                d[k].add(v)
            else:
                d[k].append(float(v))
    return d

rows, bad = [], []
for name in models:
    ref, ours = load(name, "ref"), load(name, "ours")
    if ref["CHECK"] != ours["CHECK"] or len(ref["CHECK"]) != 1:
        bad.append(f"{name}: outputs differ (ref {sorted(ref['CHECK'])}, ours {sorted(ours['CHECK'])})")
    def row(metric, f, unit, target=None):
        r, o = f(ref), f(ours)
        ratio = o / r if r else float("nan")
        ok = "" if target is None else ("yes" if ratio <= target else "NO")
        rows.append((name, metric, unit, r, o, ratio, f"<= {target}" if target else "", ok))
    row("run() median", lambda d: st.median(d["RUN_MS"]), "ms", 0.97)
    row("run() min", lambda d: min(d["RUN_MS"]), "ms")
    row("run() max", lambda d: max(d["RUN_MS"]), "ms")
    row("load+create", lambda d: st.median(d["LOAD_CREATE_MS"]), "ms", 0.5)
    row("first run()", lambda d: st.median(d["FIRST_RUN_MS"]), "ms")
    row("set_input", lambda d: st.median(d["SET_INPUT_NS"]), "ns")
    row("peak RSS", lambda d: max(d["MAXRSS_KB"]) / 1024, "MB", 1.0)
    rows.append((name, "run() calls", "", len(ref["RUN_MS"]), len(ours["RUN_MS"]), None, "", ""))

hdr = ("model", "metric", "unit", "reference", "ours", "ours/ref", "target", "met")
fmt = lambda v: "-" if v is None else (f"{v:,.0f}" if isinstance(v, int) or v >= 1000 else f"{v:.2f}")
table = [hdr] + [(a, b, c, fmt(d), fmt(e), "-" if f is None else f"{f:.3f}", g, h)
                 for a, b, c, d, e, f, g, h in rows]
w = [max(len(str(r[i])) for r in table) for i in range(len(hdr))]
print(f"\ndate {meta['date']}  commit {meta['commit']}  host {meta['host']}")
print(f"threads: {meta['threads']}; {meta['rounds']} (alternating processes per runtime)")
print(f"loadavg before {meta['loadavg_before']}, after {meta['loadavg_after']}\n")
for i, r in enumerate(table):
    print("  ".join(str(c).ljust(w[j]) if j < 3 or j > 5 else str(c).rjust(w[j])
                    for j, c in enumerate(r)))
    if i == 0:
        print("  ".join("-" * x for x in w))
print("\nours/ref: ratio of times (and of RSS); < 1 means ours is faster / smaller.")
with open(os.path.join(res, "table.md"), "w") as f:
    f.write("| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr) + "\n")
    for r in table[1:]:
        f.write("| " + " | ".join(str(c) for c in r) + " |\n")
for b in bad:
    print("ERROR", b)
sys.exit(1 if bad else 0)
EOF

echo
echo "Where ours spends a run() (tvmrt run --profile; kernels vs runtime overhead):"
for m in "${models[@]}"; do
  prof="$res/$(basename "$m" .so).profile.txt"
  env ${threads:+TVM_NUM_THREADS=$threads} target/release/tvmrt run "$m" --repeat 10 --profile >"$prof"
  python3 - "$prof" "$(basename "$m" .so)" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
lat = re.search(r"median ([0-9.]+) ms", text)
total = re.search(r"^Total\s+([0-9.]+)", text, re.M)
if lat and total:
    run_ms, kern_ms = float(lat.group(1)), float(total.group(1)) / 1000
    print(f"  {sys.argv[2]}: run() median {run_ms:.2f} ms; kernels (per-op sum) {kern_ms:.2f} ms; "
          f"outside kernels {max(run_ms - kern_ms, 0):.3f} ms ({max(run_ms - kern_ms, 0) / run_ms:.1%})")
EOF
done
echo "raw results: $res"

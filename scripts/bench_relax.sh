#!/usr/bin/env bash
# Relax VM benchmark, side by side: the same C binary (benches/bench_relax.c, built against
# TVM's reference headers and library) runs each Relax fixture on TVM's reference
# libtvm_runtime.so and on ours, alternately, one process per round, and prints one table.
#
#   scripts/bench_relax.sh [--rounds N] [--runs N] [--threads N] [--no-build] [FIXTURE ...]
#
#   --rounds N   processes per runtime and fixture, alternating which runtime goes first
#                (default 4)
#   --runs N     timed batches per process (default 10); a batch lasts about 20 ms (at least
#                one call); the per-call median is over rounds x runs batches
#   --threads N  TVM_NUM_THREADS for both runtimes (default: the number of CPUs; only the
#                _par fixtures' kernels launch parallel work, and the reference wheel runs
#                every parallel launch as one task whatever the setting)
#   FIXTURE      relax fixtures by name (default: relax_chain relax_mlp, plus relax_resnet18
#                relax_mobilenet relax_resnet18_par relax_mobilenet_par when built with
#                scripts/build_fixtures.py --models)
#
# Rows per fixture: the call of `main` (median/min, us), load + vm_initialization (ms,
# median of the rounds), first call (ms), peak RSS (MB, max over the rounds) and ours/ref.
# For relax_chain (100 kernel calls per main) the VM overhead per kernel call is shown too.
# Raw outputs go under build/bench/relax/<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds=4
runs=10
threads=$(nproc)
build=1
fixtures=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    -*) echo "bench_relax.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) fixtures+=("$1"); shift ;;
  esac
done
source scripts/env.sh
FX="${TVMRT_FIXTURES:-$TVMRT_CACHE/fixtures}"
if [ ${#fixtures[@]} -eq 0 ]; then
  fixtures=(relax_chain relax_mlp)
  for m in relax_resnet18 relax_mobilenet relax_resnet18_par relax_mobilenet_par; do
    [ -f "$FX/$m.so" ] && fixtures+=("$m")
  done
fi
for m in "${fixtures[@]}"; do
  [ -f "$FX/$m.so" ] || { echo "bench_relax.sh: $FX/$m.so is missing (scripts/build_fixtures.py)" >&2; exit 1; }
done
[ "$build" = 1 ] && cargo build --release --lib >&2

out="build/bench"
bench_lock
res="$out/relax/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/lib-ref" "$out/lib-ours" "$res"
ln -sfn "$(realpath "$TVMRT_REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
cp -f target/release/libtvm_runtime.so "$out/lib-ours/libtvm_runtime.so.tmp"
mv -f "$out/lib-ours/libtvm_runtime.so.tmp" "$out/lib-ours/libtvm_runtime.so"
cc -std=c99 -O2 -Wall -Wextra -Werror -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE" \
  -o "$out/bench_relax" benches/bench_relax.c -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now

{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
  echo "threads $threads"
  echo "rounds $rounds runs $runs"
  echo "loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$res/meta.txt"

for m in "${fixtures[@]}"; do
  # the inputs of the manifest's first call of main
  mapfile -t ins < <("$TVMRT_PYTHON" - "$FX" "$m" <<'EOF'
import json, os, sys
fx, name = sys.argv[1:]
e = json.load(open(os.path.join(fx, "manifest.json")))[name]
c = next(c for c in e["calls"] if c["function"] == "main")
for k in c["args"]:
    print(os.path.join(fx, e["npy_dir"], k + ".npy"))
EOF
  )
  for r in $(seq 1 "$rounds"); do
    order="ref ours"
    [ $((r % 2)) = 0 ] && order="ours ref"
    for which in $order; do
      echo "== $m round $r/$rounds: $which" >&2
      TVM_NUM_THREADS="$threads" LD_LIBRARY_PATH="$root/$out/lib-$which" \
        "$out/bench_relax" "$FX/$m.so" main "${ins[@]}" --runs "$runs" >"$res/$m.$which.$r.txt"
    done
  done
done
echo "loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/meta.txt"

python3 - "$res" "${fixtures[@]}" <<'EOF'
import glob, os, statistics as st, sys

res, names = sys.argv[1], sys.argv[2:]
meta = dict(l.rstrip("\n").split(" ", 1) for l in open(os.path.join(res, "meta.txt")))
TARGET = {"relax_chain": 0.5, "relax_mlp": 0.5, "relax_resnet18": 0.95, "relax_mobilenet": 0.95,
          "relax_resnet18_par": 0.95, "relax_mobilenet_par": 0.95}

def load(name, which):
    d = {"CALL_US": [], "LOAD_INIT_MS": [], "FIRST_CALL_MS": [], "MAXRSS_KB": [], "CHECK": set()}
    for p in sorted(glob.glob(os.path.join(res, f"{name}.{which}.*.txt"))):
        for line in open(p):
            k, v = line.split()
            if k == "CHECK":
                d[k].add(v)
            else:
                d[k].append(float(v))
    return d

rows, bad = [], []
for name in names:
    ref, ours = load(name, "ref"), load(name, "ours")
    if ref["CHECK"] != ours["CHECK"] or len(ref["CHECK"]) != 1:
        bad.append(f"{name}: outputs differ (ref {sorted(ref['CHECK'])}, ours {sorted(ours['CHECK'])})")
    def row(metric, f, unit, target=None):
        r, o = f(ref), f(ours)
        ratio = o / r if r else float("nan")
        ok = "" if target is None else ("yes" if ratio <= target else "NO")
        rows.append((name, metric, unit, r, o, ratio, f"<= {target}" if target else "", ok))
    row("main() median", lambda d: st.median(d["CALL_US"]), "us", TARGET.get(name))
    row("main() min", lambda d: min(d["CALL_US"]), "us")
    if name == "relax_chain":
        row("per kernel call (/100)", lambda d: st.median(d["CALL_US"]) * 10, "ns")
    row("load+vm_initialization", lambda d: st.median(d["LOAD_INIT_MS"]), "ms", 0.5)
    row("first call", lambda d: st.median(d["FIRST_CALL_MS"]), "ms")
    row("peak RSS", lambda d: max(d["MAXRSS_KB"]) / 1024, "MB", 1.0)

hdr = ("fixture", "metric", "unit", "reference", "ours", "ours/ref", "target", "met")
fmt = lambda v: f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"
table = [hdr] + [(a, b, c, fmt(d), fmt(e), f"{f:.3f}", g, h) for a, b, c, d, e, f, g, h in rows]
w = [max(len(str(r[i])) for r in table) for i in range(len(hdr))]
print(f"\ndate {meta['date']}  commit {meta['commit']}  host {meta['host']}")
print(f"TVM_NUM_THREADS={meta['threads']}; rounds {meta['rounds']} (alternating processes per runtime)")
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
echo "raw results: $res"

#!/usr/bin/env bash
# Benchmark under load, side by side: the same C binaries (benches/bench.c, benches/bench_model.c,
# built against TVM's reference headers and library) on TVM's reference libtvm_runtime.so and on
# ours, alternately, in three conditions. See benches/README.md ("Under load").
#
#   scripts/bench_load.sh [--rounds N] [--runs N] [--seconds S] [--app-threads "2 4 8"]
#                         [--mt-models "mobilenet mlp"] [--only idle,burners,multi] [--no-build]
#
#   --rounds N        processes per runtime, model and condition (default 3); alternating order
#   --runs N          timed run() calls per single-model process after 2 warm-up runs (default 10)
#   --seconds S       how long each multi-model process runs its threads (default 3)
#   --app-threads L   application-thread counts of the multi-model case (default "2 4 8")
#   --mt-models L     fixture models of the multi-model case (default "mobilenet mlp")
#   --only LIST       which parts to run (default all):
#                       idle     ParallelLaunch x3 and resnet18/mobilenet run() on a quiet machine
#                       burners  the same with two CPU burners running
#                       multi    L application threads x one executor each, idle and with two
#                                burners
#
# Burners are `sh` busy loops this script starts (bounded by `timeout`) and stops by pid.
# Each runtime uses its default thread count (TVM_NUM_THREADS is passed through if set).
# Raw outputs go under build/bench/load/<timestamp>/; the tables are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds=3
runs=10
seconds=3
app_threads="2 4 8"
mt_models="mobilenet mlp"
only="idle,burners,multi"
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --app-threads) app_threads="$2"; shift 2 ;;
    --mt-models) mt_models="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "bench_load.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
source scripts/env.sh
fx="$TVMRT_CACHE/fixtures"
for m in resnet18 mobilenet $mt_models; do
  [ -f "$fx/$m.so" ] || { echo "bench_load.sh: $fx/$m.so is missing (scripts/build_fixtures.py --models)" >&2; exit 1; }
done
[ "$build" = 1 ] && cargo build --release --lib >&2

out="build/bench"
bench_lock
res="$out/load/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/lib-ref" "$out/lib-ours" "$res"
ln -sfn "$(realpath "$TVMRT_REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
cp -f target/release/libtvm_runtime.so "$out/lib-ours/libtvm_runtime.so.tmp"
mv -f "$out/lib-ours/libtvm_runtime.so.tmp" "$out/lib-ours/libtvm_runtime.so"
cflags=(-std=c99 -O2 -Wall -Wextra -Werror -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE")
cc "${cflags[@]}" -o "$out/bench" benches/bench.c -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now -ldl
cc "${cflags[@]}" -o "$out/bench_model" benches/bench_model.c -L"$out/lib-ref" -ltvm_runtime \
  -Wl,-z,now -lm -lpthread

burners=()
start_burners() {
  for _ in 1 2; do
    timeout 1800 sh -c 'while :; do :; done' &
    burners+=($!)
  done
  sleep 0.5
}
stop_burners() {
  local p
  for p in "${burners[@]+"${burners[@]}"}"; do kill "$p" 2>/dev/null || true; done
  for p in "${burners[@]+"${burners[@]}"}"; do wait "$p" 2>/dev/null || true; done
  burners=()
}
trap stop_burners EXIT

{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
  echo "threads ${TVM_NUM_THREADS:-the default of each runtime}"
  echo "rounds $rounds runs $runs seconds $seconds"
  echo "loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$res/meta.txt"

order() { # round -> "ref ours" or "ours ref"
  if [ $(($1 % 2)) = 1 ]; then echo "ref ours"; else echo "ours ref"; fi
}
on() { # which cmd... : run with the runtime `which`
  local which="$1"; shift
  LD_LIBRARY_PATH="$root/$out/lib-$which" "$@"
}

single() { # condition
  local cond="$1" r which m
  for r in $(seq 1 3); do
    for which in $(order "$r"); do
      echo "== $cond: parallel_launch $r/3 $which" >&2
      on "$which" "$out/bench" --only parallel_launch >"$res/launch.$cond.$which.$r.txt" 2>/dev/null
    done
  done
  for r in $(seq 1 "$rounds"); do
    for m in resnet18 mobilenet; do
      for which in $(order "$r"); do
        echo "== $cond: $m $r/$rounds $which" >&2
        on "$which" "$out/bench_model" "$fx/$m.so" --runs "$runs" --warmup 2 \
          >"$res/model.$cond.$m.$which.$r.txt"
      done
    done
  done
}

multi() { # condition
  local cond="$1" t m which
  for t in $app_threads; do
    for m in $mt_models; do
      for which in $(order "$t"); do
        echo "== $cond: $t threads x $m, $which" >&2
        on "$which" "$out/bench_model" "$fx/$m.so" --app-threads "$t" --seconds "$seconds" \
          --warmup 2 >"$res/multi.$cond.$m.$t.$which.txt"
      done
    done
  done
}

case ",$only," in *,idle,*) single idle ;; esac
case ",$only," in *,burners,*) start_burners; single burners; stop_burners ;; esac
case ",$only," in *,multi,*) multi idle; start_burners; multi burners; stop_burners ;; esac
echo "loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/meta.txt"

python3 - "$res" <<'EOF'
import glob, os, re, statistics as st, sys

res = sys.argv[1]
meta = dict(l.rstrip("\n").split(" ", 1) for l in open(os.path.join(res, "meta.txt")))
out, bad = [], []

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

def table(title, hdr, rows):
    out.append(f"\n### {title}\n")
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "---|" * len(hdr))
    for r in rows:
        out.append("| " + " | ".join(r) + " |")

f = lambda v: f"{v:,.0f}" if v >= 1000 else (f"{v:.1f}" if v >= 10 else f"{v:.3g}")
ratio = lambda o, r: f"{o / r:.2f}" if r else "-"

def lines(path, key):
    vals = []
    for line in open(path):
        p = line.split()
        if p and p[0] == key:
            vals.append(p[1:])
    return vals

for cond in ("idle", "burners"):
    rows = []
    for name in ("parallel_launch", "parallel_launch_barrier"):
        got = {}
        for which in ("ref", "ours"):
            got[which] = [float(v[1]) for p in sorted(glob.glob(f"{res}/launch.{cond}.{which}.*.txt"))
                          for v in lines(p, "RESULT") if v[0] == name]
        if not got["ref"] or not got["ours"]:
            continue
        r, o = got["ref"], got["ours"]
        rows.append([name, " / ".join(f(x) for x in r), " / ".join(f(x) for x in o),
                     ratio(st.median(o), st.median(r)), f(max(r)), f(max(o)), ratio(max(o), max(r))])
    if rows:
        table(f"{cond}: TVMBackendParallelLaunch of an empty lambda (ns; three processes each)",
              ["benchmark", "reference runs", "ours runs", "median ours/ref", "ref worst",
               "ours worst", "worst ours/ref"], rows)
    rows = []
    for m in ("resnet18", "mobilenet"):
        got, checks = {}, {}
        for which in ("ref", "ours"):
            ps = sorted(glob.glob(f"{res}/model.{cond}.{m}.{which}.*.txt"))
            got[which] = [float(v[0]) for p in ps for v in lines(p, "RUN_MS")]
            checks[which] = {v[0] for p in ps for v in lines(p, "CHECK")}
        if not got["ref"] or not got["ours"]:
            continue
        if checks["ref"] != checks["ours"] or len(checks["ref"]) != 1:
            bad.append(f"{cond} {m}: outputs differ {checks}")
        r, o = got["ref"], got["ours"]
        for metric, fn in (("median", st.median), ("p99", lambda x: pct(x, 0.99)), ("worst", max)):
            rows.append([m, metric, f(fn(r)), f(fn(o)), ratio(fn(o), fn(r))])
        # CPU time the process spent per run (all its threads) and the cores it got on
        # average (CPU time / wall time, medians): how much of the machine each runtime had.
        cpu = {w: [float(v[0]) for p in sorted(glob.glob(f"{res}/model.{cond}.{m}.{w}.*.txt"))
                   for v in lines(p, "RUN_CPU_MS")] for w in ("ref", "ours")}
        if cpu["ref"] and cpu["ours"]:
            rc, oc = st.median(cpu["ref"]), st.median(cpu["ours"])
            rows.append([m, "CPU ms per run (median)", f(rc), f(oc), ratio(oc, rc)])
            rows.append([m, "cores used (CPU / wall)", f"{rc / st.median(r):.2f}",
                         f"{oc / st.median(o):.2f}", ""])
        rows.append([m, "run() calls", str(len(r)), str(len(o)), ""])
    if rows:
        table(f"{cond}: run() of one model, one application thread (ms)",
              ["model", "metric", "reference", "ours", "ours/ref"], rows)

for cond in ("idle", "burners"):
    rows = []
    keys = sorted({tuple(os.path.basename(p).split(".")[2:4])
                   for p in glob.glob(f"{res}/multi.{cond}.*.txt")}, key=lambda k: (k[0], int(k[1])))
    for m, t in keys:
        d = {}
        for which in ("ref", "ours"):
            p = f"{res}/multi.{cond}.{m}.{t}.{which}.txt"
            if not os.path.exists(p):
                continue
            lat = [float(v[0]) for v in lines(p, "MT_RUN_MS")]
            per = [int(v[1]) for v in lines(p, "MT_THREAD_RUNS")]
            wall = float(lines(p, "MT_WALL_S")[0][0])
            checks = {v[0] for v in lines(p, "CHECK")}
            d[which] = (lat, per, wall, checks)
        if len(d) < 2:
            continue
        if d["ref"][3] != d["ours"][3] or len(d["ref"][3]) != 1:
            bad.append(f"{cond} {m} x{t}: outputs differ")
        for which in ("ref", "ours"):
            lat, per, wall, _ = d[which]
            d[which] = dict(thr=sum(per) / wall, p50=st.median(lat) if lat else float("nan"),
                            p99=pct(lat, 0.99), worst=max(lat) if lat else float("nan"),
                            fair=f"{min(per)}..{max(per)}")
        r, o = d["ref"], d["ours"]
        rows.append([m, t, f"{f(r['thr'])} / {f(o['thr'])}", ratio(r["thr"], o["thr"]),
                     f"{f(r['p50'])} / {f(o['p50'])}", f"{f(r['p99'])} / {f(o['p99'])}",
                     ratio(o["p99"], r["p99"]), f"{f(r['worst'])} / {f(o['worst'])}",
                     f"{r['fair']} / {o['fair']}"])
    if rows:
        table(f"{cond}: several models in one process (each thread its own executor)",
              ["model", "threads", "runs/s ref / ours", "time per run ours/ref",
               "p50 ms ref / ours", "p99 ms ref / ours", "p99 ours/ref", "worst ms ref / ours",
               "runs per thread (min..max) ref / ours"], rows)

head = (f"Date {meta['date']}, commit `{meta['commit']}`, {meta['host']}, threads: "
        f"{meta['threads']}, {meta['rounds']}, load average before/after "
        f"{meta['loadavg_before']} / {meta.get('loadavg_after', '?')}.")
text = head + "\n" + "\n".join(out) + "\n"
print(text)
open(os.path.join(res, "table.md"), "w").write(text)
for b in bad:
    print("ERROR", b)
print(f"raw results: {res}")
sys.exit(1 if bad else 0)
EOF

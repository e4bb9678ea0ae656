#!/usr/bin/env bash
# Runtime benchmarks: the same C binary (benches/bench.c, compiled against TVM's reference
# headers) runs against TVM's reference libtvm_runtime.so and against ours, alternately, and
# the results are joined into one table with ours/reference ratios. See benches/README.md.
#
#   scripts/bench.sh [--rounds N] [--quick] [--no-wait] [--no-build] [--only NAME[,...]]
#                    [-- extra bench.c args]
#
#   --rounds N   alternate ref/ours N times (default 5); each number reported is the best
#                (lowest ns/op) of the N runs for that runtime, to shed interference from other
#                processes on a shared machine. Inside one run every number is already the
#                median of 7 repetitions (see bench.c).
#   --quick      1 round, 5 repetitions of 10 ms (a smoke run; numbers are noisier)
#   --no-wait    do not wait for an idle machine before each run (by default each run waits
#                up to $BENCH_IDLE_TIMEOUT s, default 120, until the CPUs are <= 15% busy
#                over half a second; a run that starts on a busy machine is noted in meta.txt)
#   --no-build   do not run cargo build --release --lib (use target/release/libtvm_runtime.so as is)
#   --only LIST  run only benchmarks whose names start with one of the comma-separated prefixes
#
# Environment: OURS_LIB (default target/release/libtvm_runtime.so), REF_LIB (default
# $TVMRT_REF_LIB), FIXTURES (default $TVMRT_CACHE/fixtures), CC (default cc), BENCH_REPS,
# BENCH_REP_MS, TVM_NUM_THREADS (passed through to both runtimes).
#
# Output: the table on stdout; raw per-run results and a Markdown copy of the table
# (table.md) under build/bench/results/<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

rounds=5
build_ours=1
wait_idle=1
only=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --quick) rounds=1; export BENCH_REPS="${BENCH_REPS:-5}" BENCH_REP_MS="${BENCH_REP_MS:-10}"; shift ;;
    --no-build) build_ours=0; shift ;;
    --no-wait) wait_idle=0; shift ;;
    --only) only="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

source scripts/env.sh
REF_LIB="${REF_LIB:-$TVMRT_REF_LIB}"
[ -n "${OURS_LIB:-}" ] && build_ours=0  # an explicit library is used as given
OURS_LIB="${OURS_LIB:-$root/target/release/libtvm_runtime.so}"
FIXTURES="${FIXTURES:-$TVMRT_CACHE/fixtures}"
CC="${CC:-cc}"

[ -f "$REF_LIB" ] || { echo "bench.sh: reference runtime $REF_LIB is missing (run scripts/setup.sh)" >&2; exit 1; }
[ -d "$TVMRT_REF_INCLUDE/tvm/runtime" ] || { echo "bench.sh: TVM headers missing under $TVMRT_REF_INCLUDE" >&2; exit 1; }

if [ "$build_ours" = 1 ]; then
  echo "== cargo build --release --lib" >&2
  cargo build --release --lib >&2
fi
[ -f "$OURS_LIB" ] || { echo "bench.sh: our runtime $OURS_LIB is missing (cargo build --release)" >&2; exit 1; }

out="build/bench"
bench_lock
stamp="$(date +%Y%m%d-%H%M%S)"
res="$out/results/$stamp"
mkdir -p "$out/lib-ref" "$out/lib-ours" "$res"

# The runtimes under test, each as libtvm_runtime.so in a directory of its own. Ours is copied,
# not linked, so a concurrent cargo build cannot swap it in the middle of the runs.
ln -sfn "$(realpath "$REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
cp -f "$OURS_LIB" "$out/lib-ours/libtvm_runtime.so.tmp"
mv -f "$out/lib-ours/libtvm_runtime.so.tmp" "$out/lib-ours/libtvm_runtime.so"

# The benchmark links against the reference library (through the SONAME libtvm_runtime.so, no
# RPATH: LD_LIBRARY_PATH picks the runtime at run time). -z now makes a symbol missing from
# the runtime under test fail at start-up instead of in the middle of a benchmark.
inc=(-I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE")
cflags=(-std=c99 -O2 -Wall -Wextra -Werror)
"$CC" "${cflags[@]}" "${inc[@]}" -o "$out/bench" benches/bench.c \
  -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now -ldl
"$CC" "${cflags[@]}" "${inc[@]}" -fPIC -shared -fvisibility=hidden \
  -o "$out/dso_add_one.so" benches/dso_add_one.c

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock build.rs 2>/dev/null)" ]; then
  commit="$commit+dirty"
fi
{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $commit"
  echo "host $(uname -n) $(uname -m), $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
  echo "tvm_num_threads ${TVM_NUM_THREADS:-unset}"
  echo "rounds $rounds"
  echo "ref_lib $(realpath "$REF_LIB")"
  echo "ours_lib $(realpath "$OURS_LIB") (copied to $out/lib-ours)"
  echo "fixtures $FIXTURES"
  echo "loadavg_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$res/meta.txt"

# The kernel-call subject: the project's fixture if it exists, else the same function compiled
# here with the reference TVM compiler (benches/make_add_one.py), if that is installed.
kernel="$FIXTURES/add_one.so"
if [ ! -f "$kernel" ]; then
  kernel="$root/$out/add_one.so"
  if [ ! -f "$kernel" ] || [ benches/make_add_one.py -nt "$kernel" ]; then
    if [ -x "${TVMRT_PYTHON:-}" ] && "$TVMRT_PYTHON" benches/make_add_one.py "$kernel.tmp" >&2 \
      && mv -f "$kernel.tmp" "$kernel"; then
      echo "== no $FIXTURES/add_one.so: compiled $kernel with the reference TVM compiler" >&2
    else
      rm -f "$kernel.tmp" "$kernel"
      echo "== no $FIXTURES/add_one.so and could not compile one: kernel_call.add_one skipped" >&2
    fi
  fi
fi
echo "kernel $kernel" >>"$res/meta.txt"

bench_args=(--fixtures "$FIXTURES" --kernel "$kernel" --dso "$root/$out/dso_add_one.so")
[ -n "$only" ] && bench_args+=(--only "$only")
bench_args+=("${extra[@]+"${extra[@]}"}")

cpu_busy() { # percent of all CPUs busy over the next 0.5 s
  local c u n s i w q sq st t1 i1 t2 i2
  read -r c u n s i w q sq st _ </proc/stat
  t1=$((u + n + s + i + w + q + sq + st)); i1=$((i + w))
  sleep 0.5
  read -r c u n s i w q sq st _ </proc/stat
  t2=$((u + n + s + i + w + q + sq + st)); i2=$((i + w))
  echo $((t2 > t1 ? 100 * ((t2 - t1) - (i2 - i1)) / (t2 - t1) : 0))
}
await_idle() { # label
  [ "$wait_idle" = 1 ] || return 0
  local deadline=$((SECONDS + ${BENCH_IDLE_TIMEOUT:-120})) busy
  while :; do
    busy="$(cpu_busy)"
    [ "$busy" -le 15 ] && { echo "idle_check $1 busy=${busy}%" >>"$res/meta.txt"; return 0; }
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "idle_check $1 busy=${busy}% (gave up waiting)" >>"$res/meta.txt"
      echo "bench.sh: machine still ${busy}% busy, running $1 anyway" >&2
      return 0
    fi
    sleep 2
  done
}

failed=0
run_one() { # which round
  local which="$1" r="$2" lib="$root/$out/lib-$1"
  await_idle "$which-$r"
  echo "== round $r/$rounds: $which" >&2
  LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$out/bench" "${bench_args[@]}" >"$res/$which-$r.txt" 2> >(tee -a "$res/$which-$r.log" >&2) ||
    { echo "bench.sh: the $which run of round $r failed (exit $?), see $res/$which-$r.log" >&2; failed=1; }
  if [ -n "$threads_pass" ]; then
    # The fork-join benchmarks again with TVM_NUM_THREADS set, as a deployment asking for all
    # cores would run. Unset, each runtime picks its default (TVM: half the logical CPUs on
    # x86-64, found by reading /sys/devices/system/cpu/online on every launch).
    TVM_NUM_THREADS="$threads_pass" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$out/bench" "${bench_args[@]}" --only parallel_launch 2> >(tee -a "$res/$which-$r.log" >&2) |
      sed -E "s/^(RESULT|SKIP|INFO) (parallel_[a-z_]*)/\1 \2@threads=$threads_pass/" \
        >>"$res/$which-$r.txt" ||
      { echo "bench.sh: the $which TVM_NUM_THREADS=$threads_pass run of round $r failed" >&2; failed=1; }
  fi
}
threads_pass=""
if [ -z "${TVM_NUM_THREADS:-}" ] && { [ -z "$only" ] || [[ ",$only" == *",parallel"* ]]; }; then
  threads_pass="$(nproc)"
fi
for r in $(seq 1 "$rounds"); do
  # Alternate which runtime goes first so neither always runs on a warmer (or busier) machine.
  if [ $((r % 2)) = 1 ]; then run_one ref "$r"; run_one ours "$r"
  else run_one ours "$r"; run_one ref "$r"; fi
done
echo "loadavg_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/meta.txt"

python3 - "$res" <<'EOF'
import glob, os, sys

res = sys.argv[1]
meta_lines = [l.rstrip("\n") for l in open(os.path.join(res, "meta.txt"))]
meta = dict(l.split(" ", 1) for l in meta_lines if " " in l)
idle = [l for l in meta_lines if l.startswith("idle_check ")]
gave_up = [l.split()[1] for l in idle if "gave up" in l]

def load(which):
    best, info, skips, order = {}, {}, {}, []
    for path in sorted(glob.glob(os.path.join(res, f"{which}-*.txt"))):
        for line in open(path):
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "RESULT":
                name, v = parts[1], float(parts[2])
                if name not in best:
                    order.append(name)
                best[name] = min(v, best.get(name, v))
            elif parts[0] == "INFO":
                info.setdefault(parts[1], " ".join(parts[2:]))
            elif parts[0] == "SKIP":
                skips[parts[1]] = " ".join(parts[2:])
    return best, info, skips, order

ref, ref_info, ref_skip, order_ref = load("ref")
ours, ours_info, ours_skip, order_ours = load("ours")
order = order_ref + [n for n in order_ours if n not in order_ref]
copy_bytes = float(ref_info.get("copy_bytes") or ours_info.get("copy_bytes") or 16 * 2**20)

# name -> (target description, check(ours_value_in_display_unit) -> bool)
targets = {
    "packed_call": ("<= 6 ns", lambda v: v <= 6),
    "array_alloc_free": ("<= 100 ns", lambda v: v <= 100),
    "parallel_launch": ("<= 0.8 us", lambda v: v <= 800),
    "copy_vs_memcpy": (">= 0.95x memcpy", lambda v: v >= 0.95),
}

def display(name, ns):
    """(value, unit) shown for a result in ns/op."""
    if ns is None:
        return None, ""
    if name.startswith("module_load"):
        return ns / 1e6, "ms"
    if name in ("memcpy_16m", "array_copy_16m"):
        return copy_bytes / ns, "GB/s"
    return ns, "ns"

def fmt(v):
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"

rows = []
for name in order:
    r, o = ref.get(name), ours.get(name)
    rv, unit = display(name, r)
    ov, unit2 = display(name, o)
    unit = unit or unit2
    ratio = f"{o / r:.2f}" if (r and o) else "-"  # time ratio: < 1 means ours is faster
    tgt, ok = "", ""
    key = "kernel_call" if name.startswith("kernel_call") else name.split("@")[0]
    if key == "kernel_call":
        tgt, chk = "<= 10 ns", (lambda v: v <= 10)
    elif key in targets:
        tgt, chk = targets[key]
    else:
        chk = None
    if chk and ov is not None:
        ok = "yes" if chk(ov) else "NO"
    rows.append((name, unit, fmt(rv), fmt(ov), ratio, tgt, ok))
    if name == "array_copy_16m" and "memcpy_16m" in ref and "memcpy_16m" in ours:
        # Fraction of memcpy throughput each runtime's TVMArrayCopyFromTo reaches.
        rf = ref["memcpy_16m"] / r if r else None
        of = ours["memcpy_16m"] / o if o else None
        ok = ("yes" if of >= 0.95 else "NO") if of is not None else ""
        rows.append(("copy_vs_memcpy", "x memcpy", fmt(rf), fmt(of),
                     f"{(rf / of):.2f}" if (rf and of) else "-", ">= 0.95x memcpy", ok))

skips = sorted(set(ref_skip) | set(ours_skip))

hdr = ("benchmark", "unit", "reference", "ours", "ours/ref", "target (ours)", "met")
w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
lines = []
lines.append("  ".join(str(h).ljust(w[i]) for i, h in enumerate(hdr)))
lines.append("  ".join("-" * w[i] for i in range(len(hdr))))
for row in rows:
    lines.append("  ".join((str(c).ljust(w[i]) if i < 2 else str(c).rjust(w[i]) if i < 5 else str(c).ljust(w[i]))
                           for i, c in enumerate(row)))
print()
print(f"date {meta.get('date')}  commit {meta.get('commit')}  rounds {meta.get('rounds')} (best of)")
print(f"host {meta.get('host')}")
for k in sorted(set(k for k in list(ref_info) + list(ours_info) if k.startswith("parallel_team_size"))):
    cfg = k.split("@")[1] if "@" in k else f"TVM_NUM_THREADS {meta.get('tvm_num_threads')}"
    print(f"parallel team size for num_task=0 ({cfg}): "
          f"ref {ref_info.get(k, '?')}, ours {ours_info.get(k, '?')}")
print(f"loadavg before {meta.get('loadavg_before')}, after {meta.get('loadavg_after')}")
if idle:
    print(f"idle wait: {len(idle) - len(gave_up)}/{len(idle)} runs started on an idle machine"
          + (f" (busy: {', '.join(gave_up)})" if gave_up else ""))
print(f"runtimes: ref {ref_info.get('runtime', '?')}")
print(f"          ours {ours_info.get('runtime', '?')}")
for k in ("kernel_fixture", "module_load_fixture"):
    if k in ref_info or k in ours_info:
        print(f"{k}: {ref_info.get(k) or ours_info.get(k)}")
print()
print("\n".join(lines))
print("\nours/ref is the ratio of times (< 1: ours is faster); GB/s and 'x memcpy' are throughputs.")
for s in skips:
    print(f"skipped {s}: {ref_skip.get(s) or ours_skip.get(s)}")

with open(os.path.join(res, "table.md"), "w") as f:
    f.write(f"Date {meta.get('date')}, commit `{meta.get('commit')}`, host: {meta.get('host')}, "
            f"best of {meta.get('rounds')} rounds, load average before/after "
            f"{meta.get('loadavg_before')} / {meta.get('loadavg_after')}"
            + (f", {len(idle) - len(gave_up)}/{len(idle)} runs started on an idle machine" if idle else "")
            + ".\n\n")
    f.write("| " + " | ".join(hdr) + " |\n")
    f.write("|" + "|".join(["---", "---", "--:", "--:", "--:", "---", "---"]) + "|\n")
    for row in rows:
        f.write("| " + " | ".join(str(c) for c in row) + " |\n")
    for s in skips:
        f.write(f"\nSkipped `{s}`: {ref_skip.get(s) or ours_skip.get(s)}\n")
print(f"\nraw results and table.md: {res}")
EOF
exit "$failed"

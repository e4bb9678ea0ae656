#!/usr/bin/env bash
# Peak resident memory (issue 32, part 5), side by side: the same C program
# (benches/bench_model.c, built against TVM's reference headers, as scripts/bench_models.sh
# builds it) on TVM's reference libtvm_runtime.so, on ours built with the `deploy` set and on
# ours built with the default set (LD_LIBRARY_PATH picks the library); and `tvmrt run` built
# with `--no-default-features --features deploy` and with the default set. Each process runs
# the model once to warm up and --runs times more; its peak RSS is the kernel's ru_maxrss of
# the child (wait4), the median over --rounds processes, the runtimes alternating.
#
#   scripts/rss_report.sh [--rounds N] [--runs N] [--no-build] [MODEL.so ...]
#
#   MODEL  graph libraries (default: examples/models/mlp.so and the resnet18 fixture,
#          scripts/build_fixtures.py --models)
#
# The ratio column is the row's RSS over the reference's with bench_model for the same model
# (for tvmrt rows: a different program, shown for scale). Both runtimes use their default
# thread count. Libraries: target/sets/<set> (as scripts/size_report.sh builds them); tvmrt:
# target/sets/cli-<set>; the program and logs under build/rss.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds=3
runs=3
build=1
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    -*) echo "rss_report.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
source scripts/env.sh
if [ ${#models[@]} -eq 0 ]; then
  models=(examples/models/mlp.so)
  if [ -f "$TVMRT_CACHE/fixtures/resnet18.so" ]; then
    models+=("$TVMRT_CACHE/fixtures/resnet18.so")
  else
    tvmrt_skip TVMRT_REQUIRE_MODELS "resnet18 is missing (scripts/build_fixtures.py --models)"
  fi
fi
if [ ! -f "$TVMRT_REF_LIB" ]; then
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "no reference runtime at $TVMRT_REF_LIB (scripts/setup.sh)"
  exit 0
fi

if [ "$build" = 1 ]; then
  for s in deploy default; do
    feat=()
    [ "$s" = default ] || feat=(--no-default-features --features "$s")
    cargo build --release -p tvm-runtime --lib --target-dir "target/sets/$s" "${feat[@]}" >&2
    cargo build --release -p tvmrt --target-dir "target/sets/cli-$s" "${feat[@]}" >&2
  done
fi

out="build/rss"
mkdir -p "$out/lib-ref" "$out/lib-deploy" "$out/lib-default"
ln -sfn "$(realpath "$TVMRT_REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
for s in deploy default; do
  lib="target/sets/$s/release/libtvm_runtime.so"
  [ -f "$lib" ] || { echo "rss_report.sh: $lib is missing (drop --no-build)" >&2; exit 1; }
  ln -sfn "$root/$lib" "$out/lib-$s/libtvm_runtime.so"
  [ -x "target/sets/cli-$s/release/tvmrt" ] ||
    { echo "rss_report.sh: target/sets/cli-$s/release/tvmrt is missing (drop --no-build)" >&2; exit 1; }
done
cc -std=c99 -O2 -Wall -Wextra -Werror -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE" \
  -o "$out/bench_model" benches/bench_model.c -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now -lm

# maxrss CMD...: runs CMD, prints the child's peak RSS in KB (its stdout goes to $log).
maxrss() {
  python3 -c '
import os, subprocess, sys
with open(sys.argv[1], "w") as log:
    p = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT)
    _, status, ru = os.wait4(p.pid, 0)
code = os.waitstatus_to_exitcode(status)
if code:
    sys.exit(f"rss_report: {sys.argv[2]} exited with {code} (see {sys.argv[1]})")
print(ru.ru_maxrss)
' "$log" "$@"
}

results="$out/results.tsv"
: >"$results"
for m in "${models[@]}"; do
  name="$(basename "$m" .so)"
  for r in $(seq 1 "$rounds"); do
    order=(ref deploy default tvmrt-deploy tvmrt-default)
    [ $((r % 2)) = 0 ] && order=(tvmrt-default tvmrt-deploy default deploy ref)
    for which in "${order[@]}"; do
      log="$out/$name.$which.$r.txt"
      case "$which" in
        tvmrt-*)
          kb="$(maxrss "target/sets/cli-${which#tvmrt-}/release/tvmrt" run "$m" --repeat "$runs")"
          printf 'tvmrt run\t%s\t%s\t%s\n' "$name" "${which#tvmrt-}" "$kb" >>"$results" ;;
        *)
          kb="$(LD_LIBRARY_PATH="$root/$out/lib-$which" maxrss "$out/bench_model" "$m" \
            --runs "$runs" --warmup 1)"
          grep -q '^CHECK ' "$log" || { echo "rss_report.sh: no CHECK line in $log" >&2; exit 1; }
          printf 'bench_model\t%s\t%s\t%s\t%s\n' "$name" "$which" "$kb" \
            "$(grep '^CHECK ' "$log" | cut -d' ' -f2)" >>"$results" ;;
      esac
    done
  done
done

python3 - "$results" <<'EOF'
import collections, statistics, sys

kb = collections.defaultdict(list)
checks = collections.defaultdict(set)
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    kb[(f[0], f[1], f[2])].append(int(f[3]))
    if len(f) > 4:
        checks[f[1]].add(f[4])
names = {"ref": "reference", "deploy": "ours (deploy)", "default": "ours (default)"}
hdr = ("program", "model", "runtime", "peak RSS", "ratio to reference")
rows = []
for (prog, model, which), v in kb.items():
    med = statistics.median(v)
    ref = statistics.median(kb[("bench_model", model, "ref")])
    ratio = f"{med / ref:.2f}" + (" (other program)" if prog != "bench_model" else "")
    rows.append((prog, model, names[which], f"{med / 1024:.1f} MB", ratio))
order = {"reference": 0, "ours (deploy)": 1, "ours (default)": 2}
rows.sort(key=lambda r: (r[1], r[0], order[r[2]]))
w = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
for r in [hdr] + rows:
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
bad = [m for m, c in checks.items() if len(c) != 1]
for m in bad:
    print(f"rss_report: {m}: the runtimes' outputs differ ({sorted(checks[m])})")
sys.exit(1 if bad else 0)
EOF

#!/usr/bin/env bash
# Peak resident memory (issue 32, part 5), side by side: the same C program
# (benches/bench_model.c, built against TVM's reference headers, as scripts/bench_models.sh
# builds it) on TVM's reference libtvm_runtime.so, on ours built with the `deploy` set and on
# ours built with the default set (LD_LIBRARY_PATH picks the library); and `tvmrt run` built
# with `--no-default-features --features deploy` and with the default set. Each process runs
# the model once to warm up and --runs times more; its peak RSS is the kernel's ru_maxrss of
# the child (wait4), the median over --rounds processes (launched by a tiny C
# program, whose own ~1 MB before exec counts in every row), the runtimes alternating.
#
#   scripts/rss_report.sh [--rounds N] [--runs N] [--no-build] [MODEL.so ...]
#
#   MODEL  graph libraries (default: examples/models/mlp.so and the resnet18 fixture,
#          scripts/build_fixtures.py --models)
#
# The ratio column is the row's RSS over the reference's with bench_model for the same model
# (for tvmrt rows: a different program, shown for scale). Both runtimes use their default
# thread count. With build/static_deploy/stock/static_mlp.stripped (scripts/static_deploy.sh)
# there, the static mlp program is measured too. Libraries: target/sets/<set> (as scripts/size_report.sh builds them); tvmrt:
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
    cargo build --release -p tvm-runtime-capi --lib --target-dir "target/sets/$s" "${feat[@]}" >&2
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

# The launcher: a tiny C program forks, execs the command (stdout and stderr to LOG) and prints
# the child's ru_maxrss (KB). Not Python or the shell: a child's peak RSS includes what it had
# before exec, a copy of its parent (a Python parent alone would add 13 MB); this one's is
# about 1 MB, the same for every row.
cat >"$out/maxrss.c" <<'CEOF'
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {
  if (argc < 3) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
    execv(argv[2], argv + 2);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) return 2;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "rss_report: %s failed (status %d, see %s)\n", argv[2], status, argv[1]);
    return 1;
  }
  printf("%ld\n", ru.ru_maxrss);
  return 0;
}
CEOF
cc -O2 -Wall -Werror -o "$out/maxrss" "$out/maxrss.c"
# maxrss CMD...: runs CMD (its output to $log), prints its peak RSS in KB.
maxrss() {
  "$out/maxrss" "$log" "$@"
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
          kb="$(maxrss "$root/target/sets/cli-${which#tvmrt-}/release/tvmrt" run "$m" --repeat "$runs")"
          printf 'tvmrt run\t%s\t%s\t%s\n' "$name" "${which#tvmrt-}" "$kb" >>"$results" ;;
        *)
          kb="$(LD_LIBRARY_PATH="$root/$out/lib-$which" maxrss "$root/$out/bench_model" "$m" \
            --runs "$runs" --warmup 1)"
          grep -q '^CHECK ' "$log" || { echo "rss_report.sh: no CHECK line in $log" >&2; exit 1; }
          printf 'bench_model\t%s\t%s\t%s\t%s\n' "$name" "$which" "$kb" \
            "$(grep '^CHECK ' "$log" | cut -d' ' -f2)" >>"$results" ;;
      esac
    done
  done
done
# The static deploy program (scripts/static_deploy.sh: the mlp built in, the `minimal` runtime
# linked statically), when it has been built.
static="build/static_deploy/stock/static_mlp.stripped"
if [ -x "$static" ]; then
  for r in $(seq 1 "$rounds"); do
    log="$out/static_mlp.$r.txt"
    printf 'static_mlp\tmlp\tminimal-static\t%s\n' "$(maxrss "$root/$static")" >>"$results"
  done
fi

python3 - "$results" <<'EOF'
import collections, statistics, sys

kb = collections.defaultdict(list)
checks = collections.defaultdict(set)
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    kb[(f[0], f[1], f[2])].append(int(f[3]))
    if len(f) > 4:
        checks[f[1]].add(f[4])
names = {"ref": "reference", "deploy": "ours (deploy)", "default": "ours (default)",
         "minimal-static": "ours (minimal, static)"}
hdr = ("program", "model", "runtime", "peak RSS", "ratio to reference")
rows = []
for (prog, model, which), v in kb.items():
    med = statistics.median(v)
    ref = statistics.median(kb[("bench_model", model, "ref")])
    ratio = f"{med / ref:.2f}" + (" (other program)" if prog != "bench_model" else "")
    rows.append((prog, model, names[which], f"{med / 1024:.1f} MB", ratio))
order = {"reference": 0, "ours (deploy)": 1, "ours (default)": 2, "ours (minimal, static)": 3}
progs = {"bench_model": 0, "tvmrt run": 1, "static_mlp": 2}
rows.sort(key=lambda r: (r[1], progs[r[0]], order[r[2]]))
w = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
for r in [hdr] + rows:
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
bad = [m for m, c in checks.items() if len(c) != 1]
for m in bad:
    print(f"rss_report: {m}: the runtimes' outputs differ ({sorted(checks[m])})")
sys.exit(1 if bad else 0)
EOF

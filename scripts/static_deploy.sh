#!/usr/bin/env bash
# The static deploy program of issue 32 (budget: 400 KB in all, stripped, stock toolchain):
# the bundled mlp (examples/models/mlp.so) compiled as a system library by the reference
# compiler (examples/static_deploy/build_model.py, cached under
# $TVMRT_CACHE/static_deploy/<hash>), its graph and weights compiled into a short C main
# (examples/static_deploy/main.c), linked with the runtime's `minimal` static library
# (`cargo build --release -p tvm-runtime-capi --lib --no-default-features --features minimal`,
# target/sets/minimal, as scripts/size_report.sh builds it). Builds the program, runs it (it
# checks its output against the reference runtime's) and prints its stripped size.
#
#   scripts/static_deploy.sh [--small] [--no-build] [--check] [--budgets FILE]
#
#   (default)   our runtime static, the C library (libc, libm, libgcc_s) shared: the program
#               the budget is for; also links it -no-pie -z noseparate-code (as a board build
#               for size may) and fully static (glibc too), runs both and prints their sizes,
#               for comparison
#   --small     link the nightly build-std `minimal` archive (scripts/build_small.sh minimal)
#               instead of the stock one
#   --no-build  use the archive that is there, build no Rust
#   --check     exit 1 when the program is over its ceiling in the budgets file (over the
#               budget only prints OVER BUDGET); a wrong output always exits 1
#
# Output under build/static_deploy/. The last line of stdout is the path of the stripped
# program. Without the reference compiler (scripts/setup.sh) the stage is skipped
# (tvmrt_skip TVMRT_REQUIRE_FIXTURES).
set -euo pipefail
cd "$(dirname "$0")/.."
small=0
build=1
check=0
budgets="benches/size_budgets.tsv"
while [ $# -gt 0 ]; do
  case "$1" in
    --small) small=1; shift ;;
    --no-build) build=0; shift ;;
    --check) check=1; shift ;;
    --budgets) budgets="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "static_deploy.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
source scripts/env.sh

if [ ! -x "$TVMRT_PYTHON" ]; then
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "no reference compiler at $TVMRT_PYTHON (scripts/setup.sh)"
  exit 0
fi

# The model: rebuilt when the builder or the bundled model changes.
key="$(cat examples/static_deploy/build_model.py examples/models/mlp.so | sha256sum | cut -c1-16)"
model="$TVMRT_CACHE/static_deploy/$key"
if [ ! -f "$model/mlp_syslib.o" ] || [ ! -f "$model/mlp_model.h" ]; then
  echo "static_deploy: compiling the mlp as a system library into $model" >&2
  rm -rf "$model.tmp"
  "$TVMRT_PYTHON" examples/static_deploy/build_model.py "$model.tmp" >&2
  rm -rf "$model"
  mv "$model.tmp" "$model"
fi

# The runtime: the `minimal` static library.
if [ "$small" = 1 ]; then
  if [ "$build" = 1 ]; then
    so="$(bash scripts/build_small.sh minimal | tail -n 1)"
    archive="$(dirname "$so")/libtvm_runtime.a"
  else
    archive="target/small/minimal/x86_64-unknown-linux-gnu/release/libtvm_runtime.a"
  fi
  label="static mlp (small)"
  variant=small
else
  if [ "$build" = 1 ]; then
    cargo build --release -p tvm-runtime-capi --lib --target-dir target/sets/minimal \
      --no-default-features --features minimal >&2
  fi
  archive="target/sets/minimal/release/libtvm_runtime.a"
  label="static mlp"
  variant=stock
fi
[ -f "$archive" ] || { echo "static_deploy.sh: $archive is missing (drop --no-build)" >&2; exit 1; }

out="build/static_deploy/$variant"
mkdir -p "$out"
cc -std=c99 -Os -Wall -Wextra -Werror -Iinclude -I"$model" -c examples/static_deploy/main.c \
  -o "$out/main.o"
# The stand-ins for std's default panic and allocation-error hooks (capi/build.rs writes their
# linker arguments beside the archive; none for the small archive, whose std has no backtrace
# printer to leave out).
hooks=()
if [ "$variant" = stock ] && [ -f "$(dirname "$archive")/libtvm_runtime.ldflags" ]; then
  hooks=("@$(dirname "$archive")/libtvm_runtime.ldflags")
fi
# --gc-sections: only the archive's sections the program reaches. Also linked as a board build
# for size may link it, for comparison: not position-independent (-no-pie: no relocations to
# apply at start, no ASLR of the program's own code) and with read-only data in the executable
# segment (-z noseparate-code: no page of padding between them).
cc -o "$out/static_mlp" "$out/main.o" "$model/mlp_syslib.o" "$archive" "${hooks[@]}" \
  -Wl,--gc-sections -Wl,--as-needed -lm -lpthread -ldl
strip -o "$out/static_mlp.stripped" "$out/static_mlp"
cc -o "$out/static_mlp_nopie" "$out/main.o" "$model/mlp_syslib.o" "$archive" "${hooks[@]}" \
  -no-pie -Wl,-z,noseparate-code -Wl,--gc-sections -Wl,--as-needed -lm -lpthread -ldl
strip -o "$out/static_mlp_nopie.stripped" "$out/static_mlp_nopie"
# Fully static (glibc too; its dlopen/getaddrinfo link warnings are expected): for comparison.
cc -static -o "$out/static_mlp_full" "$out/main.o" "$model/mlp_syslib.o" "$archive" "${hooks[@]}" \
  -Wl,--gc-sections -lm -lpthread -ldl 2>"$out/static_link_warnings.txt"
strip -o "$out/static_mlp_full.stripped" "$out/static_mlp_full"

"$out/static_mlp.stripped" >"$out/run.txt" || {
  cat "$out/run.txt"
  echo "static_deploy.sh: the program failed (wrong output or an error)" >&2
  exit 1
}
"$out/static_mlp_nopie.stripped" >"$out/run_nopie.txt" || {
  cat "$out/run_nopie.txt"
  echo "static_deploy.sh: the -no-pie program failed" >&2
  exit 1
}
"$out/static_mlp_full.stripped" >"$out/run_full.txt" || {
  cat "$out/run_full.txt"
  echo "static_deploy.sh: the fully static program failed" >&2
  exit 1
}
tail -n 1 "$out/run.txt" >&2

bytes="$(stat -c %s "$out/static_mlp.stripped")"
full="$(stat -c %s "$out/static_mlp_full.stripped")"
nopie="$(stat -c %s "$out/static_mlp_nopie.stripped")"
budget="-"
ceiling="-"
if [ -f "$budgets" ]; then
  read -r budget ceiling < <(awk -v a=static -v s=mlp \
    '$1 == a && $2 == s && $3 == "x86_64" { print $4, $5 }' "$budgets" || true) || true
fi
echo "$label: $bytes bytes stripped ($((bytes / 1024)) KB; runtime static, libc shared)," \
  "$nopie bytes -no-pie -z noseparate-code, $full bytes fully static; budget ${budget:--}, ceiling ${ceiling:--}" >&2
status=0
if [ -n "$budget" ] && [ "$budget" != "-" ] && [ "$bytes" -gt "$budget" ]; then
  echo "OVER BUDGET: $label: $bytes B > budget $budget B" >&2
fi
if [ "$check" = 1 ] && [ "$variant" = stock ] && [ -n "$ceiling" ] && [ "$ceiling" != "-" ] &&
   [ "$bytes" -gt "$ceiling" ]; then
  echo "size check FAILED: $label: $bytes B > ceiling $ceiling B" >&2
  status=1
fi
realpath "$out/static_mlp.stripped"
exit "$status"

#!/usr/bin/env bash
# Instructions per operation of the call-path benchmarks, counted by callgrind: a figure that
# does not depend on the load of the machine (the timed benchmarks of scripts/bench.sh do).
# See benches/README.md, "Instruction counts".
#
#   scripts/bench_callgrind.sh [--no-build]
#
# For each benchmark and runtime the benchmark body runs under `valgrind --tool=callgrind`
# twice, with K1 and K2 operations (bench.c --calls K, bench_ffi.c BENCH_FFI_CALLS=K); the
# instructions per operation are the difference of the body function's inclusive counts
# divided by K2 - K1, so set-up, loading and the first call's lazy work cancel out.
#
#   bench.c   (reference and ours): packed_call, kernel_call.add_one.{dltensor,ndarray},
#             module_load.<the largest fixture library that loads>, module_load.dso
#   bench_ffi (ours only): TVMFuncCall of the classic add_float32 (add_dynamic.so, TVM 0.16)
#             and of the tvm-ffi add (ffi_fixtures/add.so, TVM 0.27), float32[N] for N = 1
#             and N = 4096
#
# Environment: OURS_LIB (default target/release/libtvm_runtime.so), REF_LIB (default
# $TVMRT_REF_LIB), FIXTURES, FFI_FIXTURES, CC.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build_ours=1
[ "${1:-}" = "--no-build" ] && build_ours=0
source scripts/env.sh
REF_LIB="${REF_LIB:-$TVMRT_REF_LIB}"
[ -n "${OURS_LIB:-}" ] && build_ours=0
OURS_LIB="${OURS_LIB:-$root/target/release/libtvm_runtime.so}"
FIXTURES="${FIXTURES:-$TVMRT_CACHE/fixtures}"
FFI_FIXTURES="${FFI_FIXTURES:-$TVMRT_CACHE/ffi_fixtures}"
CC="${CC:-cc}"
command -v valgrind >/dev/null || { echo "bench_callgrind.sh: valgrind is not installed" >&2; exit 1; }
if [ "$build_ours" = 1 ]; then
  cargo build --release --lib >&2
fi

out="build/bench/callgrind"
mkdir -p "$out/lib-ref" "$out/lib-ours"
ln -sfn "$(realpath "$REF_LIB")" "$out/lib-ref/libtvm_runtime.so"
cp -f "$OURS_LIB" "$out/lib-ours/libtvm_runtime.so"
inc=(-I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE")
cflags=(-std=gnu99 -O2 -Wall -Wextra -Werror)
"$CC" "${cflags[@]}" "${inc[@]}" -o "$out/bench" benches/bench.c \
  -L"$out/lib-ref" -ltvm_runtime -Wl,-z,now -ldl
"$CC" "${cflags[@]}" "${inc[@]}" -fPIC -shared -fvisibility=hidden \
  -o "$out/dso_add_one.so" benches/dso_add_one.c
"$CC" "${cflags[@]}" "${inc[@]}" -o "$out/bench_ffi" benches/bench_ffi.c \
  -L"$out/lib-ref" -ltvm_runtime

# inclusive FUNC FILE: the inclusive instruction count of FUNC in a callgrind output.
inclusive() {
  callgrind_annotate --inclusive=yes --threshold=100 "$2" 2>/dev/null |
    awk -v f="$1" '$0 ~ ":" f " " { gsub(",", "", $1); print $1; exit }'
}

# per_op LIB K1 K2 FUNC CMD...: instructions per operation of FUNC in CMD (K substituted).
per_op() {
  local lib="$1" k1="$2" k2="$3" func="$4"
  shift 4
  local a b
  for k in "$k1" "$k2"; do
    local cmd=("${@//@K@/$k}")
    LD_LIBRARY_PATH="$lib" BENCH_FFI_CALLS="$k" valgrind --tool=callgrind \
      --callgrind-out-file="$out/cg.out" "${cmd[@]}" >/dev/null 2>"$out/valgrind.log" ||
      { echo "bench_callgrind.sh: ${cmd[*]} failed:" >&2; tail -5 "$out/valgrind.log" >&2; exit 1; }
    if [ "$k" = "$k1" ]; then a="$(inclusive "$func" "$out/cg.out")"; else b="$(inclusive "$func" "$out/cg.out")"; fi
  done
  awk -v a="${a:-0}" -v b="${b:-0}" -v k1="$k1" -v k2="$k2" 'BEGIN { printf "%.1f", (b - a) / (k2 - k1) }'
}

# The module-load subject: the largest fixture library, as bench.c picks it.
biggest="$(ls -S "$FIXTURES"/*.so 2>/dev/null | head -1 || true)"

echo "| benchmark | reference (instr/op) | ours (instr/op) | ours/ref |"
echo "|---|--:|--:|--:|"
row() {
  local name="$1" func="$2" k1="$3" k2="$4" only="$5"
  local r o
  r="$(per_op "$out/lib-ref" "$k1" "$k2" "$func" "$out/bench" --fixtures "$FIXTURES" \
    --dso "$out/dso_add_one.so" --only "$only" --calls @K@)"
  o="$(per_op "$out/lib-ours" "$k1" "$k2" "$func" "$out/bench" --fixtures "$FIXTURES" \
    --dso "$out/dso_add_one.so" --only "$only" --calls @K@)"
  echo "| $name | $r | $o | $(awk -v r="$r" -v o="$o" 'BEGIN { printf "%.2f", (r > 0 ? o / r : 0) }') |"
}
row packed_call body_packed_call 1000 11000 packed_call
row kernel_call.add_one.dltensor body_kernel_call 1000 11000 kernel_call.add_one.dltensor
row kernel_call.add_one.ndarray body_kernel_call 1000 11000 kernel_call.add_one.ndarray
if [ -n "$biggest" ]; then
  row "module_load.$(basename "$biggest")" body_mod_load 2 6 "module_load.$(basename "$biggest")"
fi
row module_load.dso body_mod_load 20 120 module_load.dso

classic="$FIXTURES/add_dynamic.so"
ffi="$FFI_FIXTURES/add.so"
if [ -f "$classic" ] && [ -f "$ffi" ]; then
  echo
  echo "| tvm-ffi through TVMFuncCall (ours) | classic kernel (instr/call) | tvm-ffi kernel (instr/call) | ffi/classic |"
  echo "|---|--:|--:|--:|"
  for n in 1 4096; do
    k1=1000 k2=11000
    [ "$n" -gt 1 ] && k1=100 k2=600
    c="$(per_op "$out/lib-ours" "$k1" "$k2" calls_classic "$out/bench_ffi" "$classic" add_float32 "$ffi" add "$n")"
    f="$(per_op "$out/lib-ours" "$k1" "$k2" calls_ffi "$out/bench_ffi" "$classic" add_float32 "$ffi" add "$n")"
    echo "| float32[$n] C = A + B | $c | $f | $(awk -v c="$c" -v f="$f" 'BEGIN { printf "%.2f", f / c }') |"
  done
else
  echo "skipped: tvm-ffi rows (no $classic or $ffi; scripts/build_fixtures.py, scripts/build_ffi_fixtures.py)"
fi

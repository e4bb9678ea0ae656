#!/usr/bin/env bash
# Libraries compiled by TVM v0.27 (tvm-ffi ABI) from a plain C host on our runtime, outputs
# compared byte for byte with TVM 0.27's own (scripts/build_ffi_fixtures.py builds both), and
# from the CLI. Needs target/release/libtvm_runtime.so and target/release/tvmrt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
FX="$TVMRT_CACHE/ffi_fixtures"
[ -f "$FX/manifest.json" ] || { echo "test_tvm_ffi: no fixtures in $FX (run scripts/build_ffi_fixtures.py)"; exit 1; }
B="$PWD/build/tvm_ffi"
rm -rf "$B" && mkdir -p "$B/out"
${CC:-cc} -std=c99 -Wall -Wextra -Werror -O2 -o "$B/tvm_ffi_host" tests/c/tvm_ffi_host.c \
  -Iinclude -Ltarget/release -ltvm_runtime
LD_LIBRARY_PATH="$PWD/target/release" "$B/tvm_ffi_host" "$FX" "$B/out"
n=0
for f in "$B"/out/*.bin; do
  cmp "$f" "$FX/$(basename "$f")"
  n=$((n + 1))
done
echo "test_tvm_ffi: C host: $n outputs equal TVM 0.27's"

# The CLI: `tvmrt info` and `tvmrt run` on the dynamic-batch Relax model, inputs from .npy.
"$TVMRT_FFI_PYTHON" - "$FX" "$B" <<'PY'
import numpy as np, sys
d = np.load(f"{sys.argv[1]}/mlp_dyn.npz")
for k in ("x2", "w1", "w2"):
    np.save(f"{sys.argv[2]}/{k}.npy", d[k])
PY
# Capture first: `producer | grep -q` dies of SIGPIPE under pipefail when grep exits early.
info="$(target/release/tvmrt info "$FX/mlp_dyn.so")"
grep -q "function main(x: float32\[d0, 16\]" <<<"$info"
target/release/tvmrt run "$FX/mlp_dyn.so" --input x="$B/x2.npy" --input w1="$B/w1.npy" \
  --input w2="$B/w2.npy" --output "$B/cli" --repeat 3 >/dev/null
"$TVMRT_FFI_PYTHON" - "$FX" "$B" <<'PY'
import numpy as np, sys
got = np.load(f"{sys.argv[2]}/cli/output_0.npy")
want = np.load(f"{sys.argv[1]}/mlp_dyn.npz")["y2"]
assert got.shape == want.shape and (got == want).all(), "tvmrt output differs from TVM 0.27's"
PY
echo "test_tvm_ffi: CLI: info and run match TVM 0.27"

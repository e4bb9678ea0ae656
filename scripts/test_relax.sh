#!/usr/bin/env bash
# Relax VM fixtures from C: examples/c/deploy_relax.c, compiled once against the reference
# headers, runs every call of every relax_* fixture (scripts/build_fixtures.py) on the
# reference libtvm_runtime.so and on ours, each output compared byte for byte with the
# reference outputs saved beside the fixture; the two runs' printed outputs must be identical.
# Then (ours) the safe-Rust example examples/rust/relax.rs runs relax_mlp.
#
#   scripts/test_relax.sh [ref|ours|both]     (default both; ours = target/release)
#
# A missing fixture skips with a message, or fails under TVMRT_REQUIRE_FIXTURES (the large
# models: TVMRT_REQUIRE_MODELS).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
which="${1:-both}"
FX="${TVMRT_FIXTURES:-$TVMRT_CACHE/fixtures}"
B="$PWD/build/test_relax"
mkdir -p "$B/ref-lib" "$B/ours-lib"

if [ ! -f "$FX/manifest.json" ]; then
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "fixtures not built: no $FX/manifest.json (scripts/build_fixtures.py)"
  exit 0
fi
ln -sf "$TVMRT_REF_LIB" "$B/ref-lib/libtvm_runtime.so"
ln -sf "$PWD/target/release/libtvm_runtime.so" "$B/ours-lib/libtvm_runtime.so"
gcc -std=c99 -O2 -Wall -Werror -o "$B/deploy_relax" examples/c/deploy_relax.c \
  -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE" -L"$B/ref-lib" -ltvm_runtime

# One line per call: LIB FUNCTION INPUT.npy... --expect OUTPUT.npy...
"$TVMRT_PYTHON" - "$FX" > "$B/calls.txt" <<'EOF'
import json, os, sys
fx = sys.argv[1]
m = json.load(open(os.path.join(fx, "manifest.json")))
want = {"relax_mlp": "core", "relax_mlp_dyn": "core", "relax_control": "core",
        "relax_multi": "core", "relax_chain": "core", "relax_resnet18": "models",
        "relax_mobilenet": "models", "relax_resnet18_par": "models",
        "relax_mobilenet_par": "models"}
for name, group in want.items():
    if name not in m:
        print(f"MISSING {group} {name}")
        continue
    e = m[name]
    d = os.path.join(fx, e["npy_dir"])
    for c in e["calls"]:
        ins = " ".join(os.path.join(d, k + ".npy") for k in c["args"])
        outs = " ".join(os.path.join(d, k + ".npy") for k in c["outputs"])
        print(f"RUN {name} {os.path.join(fx, e['file'])} {c['function']} {ins} --expect {outs}")
EOF

runtimes=()
case "$which" in
  ref) runtimes=(ref) ;;
  ours) runtimes=(ours) ;;
  both) runtimes=(ref ours) ;;
  *) echo "usage: $0 [ref|ours|both]" >&2; exit 2 ;;
esac
[ "$which" = ref ] || [ -f target/release/libtvm_runtime.so ] || cargo build --release --quiet

failed=0 n=0
while read -r what a b rest; do
  if [ "$what" = MISSING ]; then
    req=TVMRT_REQUIRE_FIXTURES flag=""
    if [ "$a" = models ]; then req=TVMRT_REQUIRE_MODELS flag=" --models"; fi
    if [ -n "${!req:-}" ]; then echo "FAIL $b: not built but $req is set"; failed=1
    else tvmrt_skip "$b not built (scripts/build_fixtures.py$flag)"; fi
    continue
  fi
  name="$a"; read -r lib func args <<< "$b $rest"
  n=$((n + 1)) out="$B/$n.$a"
  for r in "${runtimes[@]}"; do
    # shellcheck disable=SC2086
    if LD_LIBRARY_PATH="$B/$r-lib" "$B/deploy_relax" "$lib" "$func" $args \
        > "$out.$r.out" 2>&1 < /dev/null; then
      :
    else
      echo "FAIL $name.$func on $r:"; cat "$out.$r.out"; failed=1
    fi
  done
  if [ "$which" = both ] && ! diff "$out.ref.out" "$out.ours.out"; then
    echo "FAIL $name.$func: ours printed something else than the reference"; failed=1
  fi
  echo "ok   $name.$func (${runtimes[*]}): $(grep -c '^output' "$out.${runtimes[-1]}.out") outputs equal to the reference's"
done < "$B/calls.txt"
if [ "$which" != ref ] && [ -f "$FX/relax_mlp.so" ]; then
  echo "--- the safe Rust API (examples/rust/relax.rs) on relax_mlp"
  # The quick profile: `cargo test --profile quick` has built it (the release profile would
  # link it again with LTO).
  cargo build --profile quick --example relax_api --quiet
  ex=target/quick/examples/relax_api
  "$ex" "$FX/relax_mlp.so" || { echo "FAIL relax_api example"; failed=1; }
elif [ "$which" != ref ]; then
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "the safe Rust API example: no $FX/relax_mlp.so (scripts/build_fixtures.py)"
fi
[ "$failed" = 0 ] || { echo "test_relax: FAILED"; exit 1; }
echo "test_relax: all relax fixtures equal the reference from C"

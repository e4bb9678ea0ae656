#!/usr/bin/env bash
# C++ API stage: TVM's C++ deployment API, header-only over our C ABI (include/tvm/runtime/).
#
#   scripts/test_cpp.sh
#
# 1. Each hand-written C++ header compiles on its own, warning-free (-Wall -Wextra -Werror,
#    C++17) with g++ and, when installed, clang++.
# 2. c_tests/cpp/ builds twice from the same sources: against the INSTALLED package of
#    tvm-runtime-rs (find_package(tvm)) and against TVM's own headers + reference library.
#    deploy_dso, syslib, graph, api and relax (Relax executables, when the fixtures exist)
#    print the same output on both; bad_use passes on both.
#    The test binaries built on ours import no C++ symbol of the runtime: only TVM* C symbols.
# 3. C++ functions registered with TVM_REGISTER_GLOBAL in a shared library are called from
#    TVM's Python package, on both runtimes, with the same output.
# 4. api, bad_use and deploy_dso run under valgrind on ours (memory errors, definite leaks fail).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ROOT="$PWD"
FIX="${TVMRT_FIXTURES:-$TVMRT_CACHE/fixtures}"
B="$ROOT/build/cpp"
PREFIX="$B/prefix"
mkdir -p "$B"
for f in add_dynamic.so add_static.so mlp.so conv.so syslib_add.o; do
  [ -f "$FIX/$f" ] || { echo "test_cpp: missing $FIX/$f (run scripts/build_fixtures.py)"; exit 1; }
done

echo "--- install to $PREFIX"
cmake -S . -B "$B/runtime" -DTVMRT_CARGO_DIR="$ROOT/target" >/dev/null
cmake --build "$B/runtime" >/dev/null
cmake --install "$B/runtime" --prefix "$PREFIX" >/dev/null

echo "--- headers compile alone, warning-free"
compilers=(g++)
if command -v clang++ >/dev/null; then compilers+=(clang++); else tvmrt_skip "clang++ is not installed"; fi
headers=$(cd "$PREFIX/include" && find tvm/runtime -name '*.h' ! -name 'c_*.h' ! -name device_plugin.h | sort)
for cxx in "${compilers[@]}"; do
  for h in $headers; do
    printf '#include <%s>\n' "$h" | "$cxx" -std=c++17 -Wall -Wextra -Wpedantic -Werror \
      -fsyntax-only -I"$PREFIX/include" -x c++ -
  done
  # The CMake build below compiles the test sources with the default compiler and -Werror.
  if [ "$cxx" != g++ ]; then
    for src in c_tests/cpp/*.cc examples/cpp/deploy_model_api.cc; do
      [ "$(basename "$src")" = ref_shim.cc ] && continue
      "$cxx" -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$PREFIX/include" "$src"
    done
  fi
  echo "$cxx: $(echo "$headers" | wc -w) headers (and the test sources with clang++): no warning"
done

echo "--- build the tests against the installed package (ours) and TVM's headers (reference)"
cmake -S c_tests/cpp -B "$B/ours" -DCMAKE_PREFIX_PATH="$PREFIX" -DSYSLIB_OBJECT="$FIX/syslib_add.o" >/dev/null
cmake --build "$B/ours" -j "$(nproc)" >/dev/null
old_abi=ON
ref_syms="$(nm -D "$TVMRT_REF_LIB")"  # captured: `nm | grep -q` can die of SIGPIPE
grep -q cxx11 <<<"$ref_syms" && old_abi=OFF
cmake -S c_tests/cpp -B "$B/ref" -DSYSLIB_OBJECT="$FIX/syslib_add.o" -DTVM_OLD_CXX_ABI="$old_abi" \
  -DTVM_RUNTIME_LIB="$TVMRT_REF_LIB" \
  -DTVM_INCLUDE_DIRS="$TVMRT_REF_INCLUDE;$TVMRT_REF_DLPACK_INCLUDE;$TVMRT_REF_DIR/dmlc-core/include" >/dev/null
cmake --build "$B/ref" -j "$(nproc)" >/dev/null

echo "--- ours imports only TVM* C symbols"
for bin in deploy_dso graph api bad_use relax syslib libtvmrt_cpp_ext.so; do
  bad=$(nm -D --undefined-only "$B/ours/$bin" | awk '{print $2}' | grep -i 'tvm' | grep -v '^TVM' || true)
  if [ -n "$bad" ]; then echo "$bin imports non-C runtime symbols:"; echo "$bad"; exit 1; fi
  n=$(nm -D --undefined-only "$B/ours/$bin" | awk '{print $2}' | grep -c '^TVM' || true)
  echo "$bin: $n TVM* C symbols, no C++ runtime symbol"
done

echo "--- run on both runtimes"
for t in deploy_dso syslib graph api; do
  (cd "$B/ref" && "./$t" "$FIX" > "$B/$t.ref.out")
  (cd "$B/ours" && "./$t" "$FIX" > "$B/$t.ours.out")
  diff "$B/$t.ref.out" "$B/$t.ours.out"
  echo "$t: identical output on both ($(tail -1 "$B/$t.ours.out"))"
done
# Relax executables (relax_mlp, relax_mlp_dyn): required where the fixture builder makes them.
if [ -f "$FIX/relax_mlp.so" ] && [ -f "$FIX/relax_mlp_dyn.so" ]; then
  (cd "$B/ref" && ./relax "$FIX" > "$B/relax.ref.out")
  (cd "$B/ours" && ./relax "$FIX" > "$B/relax.ours.out")
  diff "$B/relax.ref.out" "$B/relax.ours.out"
  echo "relax: identical output on both ($(tail -1 "$B/relax.ours.out"))"
elif grep -q '"relax_mlp"' "$FIX/manifest.json" 2>/dev/null; then
  echo "test_cpp: the manifest lists relax_mlp but $FIX/relax_mlp.so is missing"; exit 1
else
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "relax: no relax_mlp fixture in $FIX (scripts/build_fixtures.py)"
fi
for w in ref ours; do
  "$B/$w/bad_use" "$FIX" > "$B/bad_use.$w.out"
  sed "s/^/  $(printf '%-5s' "$w:") /" "$B/bad_use.$w.out"
  # Cases bad_use cannot run on this runtime's headers are counted as skips.
  while read -r why; do tvmrt_skip "bad_use on $w: $why"; done \
    < <(sed -n 's/^skipped: //p' "$B/bad_use.$w.out")
done

echo "--- C++ functions registered with TVM_REGISTER_GLOBAL, called from Python"
mkdir -p "$B/ref-lib" "$B/ours-lib"
ln -sf "$TVMRT_REF_LIB" "$B/ref-lib/libtvm_runtime.so"
ln -sf "$PREFIX/lib/libtvm_runtime.so" "$B/ours-lib/libtvm_runtime.so"
for which in ref ours; do
  TVM_LIBRARY_PATH="$B/$which-lib" TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes \
    "$TVMRT_PYTHON" c_tests/cpp/from_python.py "$B/$which/libtvmrt_cpp_ext.so" \
    2>/dev/null > "$B/python.$which.out"
done
diff "$B/python.ref.out" "$B/python.ours.out"
echo "from_python: identical output on both ($(tail -1 "$B/python.ours.out"))"

echo "--- valgrind on ours"
if command -v valgrind >/dev/null; then
  for t in api bad_use deploy_dso; do
    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
      "$B/ours/$t" "$FIX" > /dev/null 2> "$B/$t.valgrind.log" \
      || { cat "$B/$t.valgrind.log"; echo "$t: valgrind found errors"; exit 1; }
    echo "$t: valgrind clean"
  done
else
  tvmrt_skip "valgrind is not installed"
fi
echo "--- C++ API tests passed"

#!/usr/bin/env bash
# Installs the runtime into a temporary prefix, builds every example against the installed
# CMake package, and runs them; then checks drop-in substitution: a C program built and linked
# against TVM's reference libtvm_runtime.so gives identical output on ours, through
# LD_LIBRARY_PATH and through LD_PRELOAD; and that only C ABI symbols are exported.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ROOT="$PWD"
MODEL="${MODEL:-$ROOT/examples/models/mlp.so}"
INPUT="${INPUT:-data}"
ADD="${ADD:-$TVMRT_CACHE/fixtures/add_static.so}"
for f in "$MODEL" "$ADD"; do
  [ -f "$f" ] || { echo "run_examples: missing $f (run scripts/build_fixtures.py)"; exit 1; }
done
B="$ROOT/build/examples"
PREFIX="$B/prefix"
mkdir -p "$B"

echo "--- install to $PREFIX"
cmake -S . -B "$B/runtime" -DCMAKE_BUILD_TYPE=Release -DTVMRT_CARGO_DIR="$ROOT/target" >/dev/null
cmake --build "$B/runtime" >/dev/null
cmake --install "$B/runtime" --prefix "$PREFIX" >/dev/null
export LD_LIBRARY_PATH="$PREFIX/lib"

echo "--- exported symbols"
bad=$(nm -D --defined-only "$PREFIX/lib/libtvm_runtime.so" | awk '{print $3}' | grep -v '^TVM' || true)
if [ -n "$bad" ]; then echo "non-ABI symbols exported:"; echo "$bad"; exit 1; fi
echo "only TVM* symbols: $(nm -D --defined-only "$PREFIX/lib/libtvm_runtime.so" | wc -l)"

echo "--- C"
cmake -S examples/c -B "$B/c" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$B/c" >/dev/null
"$B/c/deploy_model" "$MODEL" "$INPUT" | tee "$B/c.out"

echo "--- C++"
cmake -S examples/cpp -B "$B/cpp" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$B/cpp" >/dev/null
"$B/cpp/deploy_model_cpp" "$MODEL" "$INPUT" > "$B/cpp.out"
diff "$B/c.out" "$B/cpp.out" && echo "C++ output identical to C"
"$B/cpp/deploy_model_api" "$MODEL" "$INPUT" > "$B/cpp-api.out"
diff "$B/c.out" "$B/cpp-api.out" && echo "C++ API (tvm/runtime/module.h, ...) output identical to C"

echo "--- drop-in: built against the reference, run on ours"
mkdir -p "$B/ref-lib" "$B/ours-lib"
ln -sf "$TVMRT_REF_LIB" "$B/ref-lib/libtvm_runtime.so"
ln -sf "$PREFIX/lib/libtvm_runtime.so" "$B/ours-lib/libtvm_runtime.so"
gcc -std=c99 -O2 -o "$B/deploy_ref" examples/c/deploy_model.c \
  -I"$TVMRT_REF_INCLUDE" -I"$TVMRT_REF_DLPACK_INCLUDE" -L"$B/ref-lib" -ltvm_runtime -lm
LD_LIBRARY_PATH="$B/ref-lib" "$B/deploy_ref" "$MODEL" "$INPUT" > "$B/ref.out"
LD_LIBRARY_PATH="$B/ours-lib" "$B/deploy_ref" "$MODEL" "$INPUT" > "$B/ours.out"
LD_LIBRARY_PATH="$B/ref-lib" LD_PRELOAD="$B/ours-lib/libtvm_runtime.so" "$B/deploy_ref" \
  "$MODEL" "$INPUT" > "$B/preload.out"
diff "$B/ref.out" "$B/ours.out" && echo "LD_LIBRARY_PATH: identical to the reference"
diff "$B/ref.out" "$B/preload.out" && echo "LD_PRELOAD: identical to the reference"
diff "$B/ref.out" "$B/c.out" && echo "the example built on our package agrees too"

echo "--- drop-in on resnet18 and mobilenet (every output byte hashed)"
for m in resnet18 mobilenet; do
  so="$TVMRT_CACHE/fixtures/$m.so"
  if [ ! -f "$so" ]; then
    tvmrt_skip TVMRT_REQUIRE_MODELS "$m not built: no $so (scripts/build_fixtures.py --models)"
    continue
  fi
  LD_LIBRARY_PATH="$B/ref-lib" "$B/deploy_ref" "$so" data > "$B/$m.ref.out"
  LD_LIBRARY_PATH="$B/ours-lib" "$B/deploy_ref" "$so" data > "$B/$m.ours.out"
  diff "$B/$m.ref.out" "$B/$m.ours.out"
  echo "$m: identical to the reference ($(grep fnv1a "$B/$m.ours.out" | xargs))"
done

echo "--- system library linked statically"
SYSLIB="${SYSLIB:-$TVMRT_CACHE/fixtures/syslib_add.o}"
cmake -S examples/syslib -B "$B/syslib" -DCMAKE_PREFIX_PATH="$PREFIX" -DSYSLIB_OBJECT="$SYSLIB" >/dev/null
cmake --build "$B/syslib" >/dev/null
deps="$(ldd "$B/syslib/syslib_demo")"  # captured: `ldd | grep -q` can die of SIGPIPE
if grep -q libtvm_runtime <<<"$deps"; then
  echo "syslib_demo should not need libtvm_runtime.so"; exit 1
fi
"$B/syslib/syslib_demo"

echo "--- device plugin (built against the installed package only)"
cmake -S examples/device_plugin -B "$B/plugin" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DADD_LIBRARY="$ADD" >/dev/null
cmake --build "$B/plugin" >/dev/null
(cd "$B/plugin" && ctest --output-on-failure)

echo "--- in-tree use with add_subdirectory"
cmake -S examples/intree -B "$B/intree" -DTVMRT_CARGO_DIR="$ROOT/target" >/dev/null
cmake --build "$B/intree" >/dev/null
"$B/intree/deploy_model_intree" "$MODEL" "$INPUT" > "$B/intree.out"
diff "$B/c.out" "$B/intree.out" && echo "in-tree build agrees with the installed package"

echo "--- feature sets through the package: find_package(tvm) and pkg-config name what was built"
# The list a consumer reads must be the library's: everything for the default build (every
# feature of the runtime's table in src/packed_func/features.rs), only `graph` for a
# -DTVMRT_FEATURES=minimal build (Cargo.toml: minimal = graph, no dso, no threads).
all_features="$(sed -nE 's/^    \("([a-z0-9-]+)", cfg!.*/\1/p' src/packed_func/features.rs | xargs)"
cmake -S . -B "$B/runtime-minimal" -DCMAKE_BUILD_TYPE=Release -DTVMRT_FEATURES=minimal \
  -DTVMRT_CARGO_DIR="$ROOT/target/sets/minimal" >/dev/null
cmake --build "$B/runtime-minimal" >/dev/null
cmake --install "$B/runtime-minimal" --prefix "$B/prefix-minimal" >/dev/null
mkdir -p "$B/features-probe"
cat >"$B/features-probe/CMakeLists.txt" <<'PROBE'
cmake_minimum_required(VERSION 3.16)
project(features_probe C)
find_package(tvm CONFIG REQUIRED)
string(REPLACE ";" " " list "${TVM_RUNTIME_FEATURES}")
file(WRITE "${CMAKE_BINARY_DIR}/features.txt"
  "${list}|graph=${TVM_RUNTIME_HAS_GRAPH}|dso=${TVM_RUNTIME_HAS_DSO}|tvm_ffi=${TVM_RUNTIME_HAS_TVM_FFI}\n")
PROBE
probe() {  # probe <prefix> <expected features> <graph> <dso> <tvm_ffi>
  local prefix="$1" want="$2|graph=$3|dso=$4|tvm_ffi=$5" got pc cflags
  rm -rf "$B/features-probe/build"
  cmake -S "$B/features-probe" -B "$B/features-probe/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  got="$(cat "$B/features-probe/build/features.txt")"
  [ "$got" = "$want" ] || { echo "find_package(tvm) in $prefix: '$got', expected '$want'"; exit 1; }
  pc="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=features tvm_runtime)"
  [ "$pc" = "$2" ] || { echo "pkg-config features in $prefix: '$pc', expected '$2'"; exit 1; }
  cflags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags tvm_runtime | xargs)"
  [ "$cflags" = "-I$prefix/include" ] || { echo "pkg-config --cflags: '$cflags'"; exit 1; }
  echo "$prefix: $pc (find_package and pkg-config agree)"
}
probe "$PREFIX" "$all_features" TRUE TRUE TRUE
probe "$B/prefix-minimal" graph TRUE FALSE FALSE

echo "--- Rust"
cargo run -q --profile quick --example rust_api -- "$ADD"  # built by the quick-tier tests

echo "--- Java"
cmake -S examples/java -B "$B/java" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$B/java" >/dev/null
java -Djava.library.path="$B/java" -cp "$B/java/tvm4j-example.jar" org.tvmrt.Main "$ADD"

echo "--- Node"
(cd examples/node && npm install --silent --no-audit --no-fund >/dev/null)
node examples/node/index.js "$PREFIX/lib/libtvm_runtime.so" "$ADD"

echo "--- Python (TVM's package, runtime-only, on ours)"
TVM_LIBRARY_PATH="$B/ours-lib" TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes \
  "$TVMRT_PYTHON" examples/python/run_model.py "$ADD" "$MODEL" "$INPUT"
echo "--- examples passed"

#!/usr/bin/env bash
# The board fixtures run by TVM's own C++ runtime and by ours, on the board's architecture,
# compared bit for bit: TVM v0.16.0's libtvm_runtime.so cross-built from its sources (runtime
# only: no LLVM, no GPU, no libbacktrace), our library cross-built with the `deploy` set, and
# one C program (tests/c/fixture_outputs.c) cross-compiled once and run under qemu-user with
# each library in turn (the guest's LD_LIBRARY_PATH), on every call of the board's fixtures
# ($TVMRT_CACHE/fixtures-<arch>, scripts/build_cross_fixtures.py). Every output file must be
# byte-identical; a difference is reported with its size (elements, largest absolute and ULP
# difference) and fails the script.
#
#   scripts/cross_ref_runtime.sh aarch64|armv7|riscv64 [NAME ...]
#
# NAME: fixtures of cross.json (default: the core group, all but resnet18, mobilenet and
# their Relax versions).
#
# TVM's sources (v0.16.0 and the two submodules the runtime needs, 3rdparty/dlpack and
# 3rdparty/dmlc-core, at the commits the tag pins) are fetched once with shallow git fetches
# and cached in $TVMRT_CACHE/ref-cross/tvm-v0.16.0; the runtime is built once per target in
# $TVMRT_CACHE/ref-cross/build-<arch> (build-seconds.txt records the time). When the sources
# cannot be fetched the script skips (tvmrt_skip), or fails under TVMRT_REQUIRE_TVM_SRC.
#
# Environment:
#   TVMRT_TVM_GIT          where TVM comes from: a URL (default https://github.com/apache/tvm)
#                          or a local clone or bare mirror holding the tag
#   TVMRT_DLPACK_GIT       the same for dlpack (default https://github.com/dmlc/dlpack)
#   TVMRT_DMLC_CORE_GIT    the same for dmlc-core (default https://github.com/dmlc/dmlc-core)
#   TVMRT_REF_CROSS_JOBS   parallel compile jobs for TVM's runtime (default 2)
#   TVMRT_CARGO_PROFILE    the profile of our cross build (default quick, as scripts/cross.sh)
#
# Installs what is missing (scripts/cross_setup.sh); everything it builds is cached.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 aarch64|armv7|riscv64 [NAME ...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
arch="$1"
shift
source scripts/cross_arch.sh
cross_arch "$arch" || usage
names=("$@")

bash scripts/cross_setup.sh "$arch"
source scripts/env.sh
command -v git >/dev/null || tvmrt_skip TVMRT_REQUIRE_TVM_SRC "git is not installed"
command -v git >/dev/null || exit 0

tag=v0.16.0
R="$TVMRT_CACHE/ref-cross"
src="$R/tvm-$tag"
sysroot="/usr/$gnu"
start=$SECONDS
mkdir -p "$R"

# --- TVM's sources ---------------------------------------------------------------------------

# use_repo FROM REF: sets gdir to a git directory holding REF and gref to REF's name there:
# FROM itself when it is a local repository (a clone or a bare mirror), else a shallow fetch
# of REF from the URL FROM into a scratch repository under $R (removed by done_repo).
use_repo() {
  local from="$1" ref="$2"
  if [ -d "$from" ]; then
    gdir="$(git -C "$from" rev-parse --absolute-git-dir)" && gref="$ref"
    return
  fi
  gdir="$R/git-scratch" gref=refs/tvmrt/want
  rm -rf "$gdir"
  git init -q --bare "$gdir" && timeout 600 git --git-dir="$gdir" fetch -q --depth 1 "$from" "$ref:$gref"
}
done_repo() { if [ "$gdir" = "$R/git-scratch" ]; then rm -rf "$gdir"; fi; }

fetch_sources() {
  local tvm_from="${TVMRT_TVM_GIT:-https://github.com/apache/tvm}" pins sub sha from
  echo "==> TVM $tag sources from $tvm_from"
  rm -rf "$src.tmp"
  mkdir -p "$src.tmp"
  use_repo "$tvm_from" "refs/tags/$tag" || return 1
  git --git-dir="$gdir" archive --format=tar "$gref" | tar -x -C "$src.tmp" || return 1
  pins="$(git --git-dir="$gdir" ls-tree "$gref" 3rdparty/dlpack 3rdparty/dmlc-core)"
  done_repo
  for sub in dlpack dmlc-core; do
    sha="$(awk -v p="3rdparty/$sub" '$4 == p && $2 == "commit" { print $3 }' <<<"$pins")"
    [ -n "$sha" ] || { echo "cross_ref_runtime: $tag pins no 3rdparty/$sub" >&2; return 1; }
    if [ "$sub" = dlpack ]; then
      from="${TVMRT_DLPACK_GIT:-https://github.com/dmlc/dlpack}"
    else
      from="${TVMRT_DMLC_CORE_GIT:-https://github.com/dmlc/dmlc-core}"
    fi
    echo "==> 3rdparty/$sub at $sha from $from"
    use_repo "$from" "$sha" || return 1
    git --git-dir="$gdir" archive --format=tar "$gref" | tar -x -C "$src.tmp/3rdparty/$sub" ||
      return 1
    done_repo
  done
  printf '%s\n' "$pins" >"$src.tmp/.tvmrt-sources"
  rm -rf "$src"
  mv "$src.tmp" "$src"
}

if [ ! -f "$src/.tvmrt-sources" ]; then
  if ! fetch_sources; then
    rm -rf "$src.tmp" "$R/git-scratch"
    tvmrt_skip TVMRT_REQUIRE_TVM_SRC "cannot fetch TVM $tag's sources (set TVMRT_TVM_GIT," \
      "TVMRT_DLPACK_GIT, TVMRT_DMLC_CORE_GIT to local clones where github is out of reach)"
    exit 0
  fi
fi

# --- TVM's C++ runtime, cross-built ----------------------------------------------------------

B="$R/build-$arch"
# RISC-V has no one-byte atomic instructions: gcc calls libatomic for the thread pool's
# std::atomic<int8_t> (__atomic_fetch_add_1), and TVM's CMake does not link it (added at the
# end of the link line, after the objects that need it).
link=""
[ "$arch" = riscv64 ] && link="-latomic"
# The toolchain files are copied next to the build, so that the cached build does not name
# the checkout that configured it (CMake records the toolchain's path in the build directory).
tc="$R/toolchain"
mkdir -p "$tc"
for f in "toolchain-$arch.cmake" toolchain-cross-common.cmake; do
  cmp -s "cmake/$f" "$tc/$f" || cp "cmake/$f" "$tc/$f"
done
cfg=(-DCMAKE_TOOLCHAIN_FILE="$tc/toolchain-$arch.cmake"
  -DCMAKE_BUILD_TYPE=Release -DUSE_LLVM=OFF -DUSE_LIBBACKTRACE=OFF -DUSE_CCACHE=OFF
  -DUSE_RPC=ON -DUSE_OPENMP=none -DUSE_CUDA=OFF -DUSE_OPENCL=OFF -DUSE_VULKAN=OFF
  -DUSE_GTEST=OFF -DCMAKE_CXX_STANDARD_LIBRARIES="$link")
# Configured and built when the options or the toolchain changed (a stamp of both), else reused.
want="$( (printf '%s\n' "$tag" "${cfg[@]}"; cat "$tc/toolchain-$arch.cmake" "$tc/toolchain-cross-common.cmake") | sha256sum | cut -d' ' -f1)"
if [ ! -f "$B/libtvm_runtime.so" ] || [ "$(cat "$B/tvmrt-config" 2>/dev/null)" != "$want" ]; then
  # A build directory configured with another toolchain path cannot be reconfigured in place.
  if [ -f "$B/CMakeCache.txt" ] &&
    ! grep -qx "CMAKE_TOOLCHAIN_FILE:[A-Z]*=$tc/toolchain-$arch.cmake" "$B/CMakeCache.txt"; then
    rm -rf "$B"
  fi
  cmake -S "$src" -B "$B" "${cfg[@]}" >"$R/configure-$arch.log" 2>&1 ||
    { tail -30 "$R/configure-$arch.log"; exit 1; }
  echo "==> building TVM $tag's runtime for $triple (-j${TVMRT_REF_CROSS_JOBS:-2}; log in $R/build-$arch.log)"
  t0=$SECONDS
  nice -n 10 cmake --build "$B" --target tvm_runtime -j"${TVMRT_REF_CROSS_JOBS:-2}" \
    >"$R/build-$arch.log" 2>&1 || { tail -30 "$R/build-$arch.log"; exit 1; }
  echo "$((SECONDS - t0))" >"$B/build-seconds.txt"
  echo "$want" >"$B/tvmrt-config"
fi
echo "==> TVM $tag runtime for $triple: $(stat -c %s "$B/libtvm_runtime.so") bytes" \
  "(built in $(cat "$B/build-seconds.txt" 2>/dev/null || echo ?) s)"

# --- our runtime, the board's fixtures, the host program -------------------------------------

TVMRT_CROSS_FEATURES="--no-default-features --features deploy" bash scripts/cross.sh "$arch" build
ours="$PWD/target/cross-no-default-features-features-deploy/$triple/${TVMRT_CARGO_PROFILE:-quick}/libtvm_runtime.so"

FX="$TVMRT_CACHE/fixtures-$rarch"
big=()
for n in "${names[@]}"; do
  case "$n" in resnet18 | mobilenet | relax_resnet18 | relax_mobilenet) big=(--models) ;; esac
done
if [ -x "$TVMRT_PYTHON" ]; then # builds the fixtures, or finds them up to date
  "$TVMRT_PYTHON" scripts/build_cross_fixtures.py --arch "$arch" "${big[@]}"
fi
if [ ! -f "$FX/cross.json" ]; then
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "no $FX/cross.json (scripts/build_cross_fixtures.py --arch $arch)"
  exit 0
fi

W="$PWD/build/cross/$arch/ref-runtime"
rm -rf "$W/out"
mkdir -p "$W/tvm" "$W/ours" "$W/out"
ln -sf "$B/libtvm_runtime.so" "$W/tvm/libtvm_runtime.so"
ln -sf "$ours" "$W/ours/libtvm_runtime.so"
# Compiled against TVM v0.16.0's own headers, linked against its library: the program only
# names libtvm_runtime.so, which LD_LIBRARY_PATH then picks. It does not link libm: the
# models call expf and friends without naming libm themselves, and both runtimes must bring
# it (TVM's through libstdc++, ours names it, build.rs).
"$gnu-gcc" -std=c99 -D_POSIX_C_SOURCE=199309L -O2 -Wall -Wextra -Werror \
  -I"$src/include" -I"$src/3rdparty/dlpack/include" -o "$W/fixture_outputs" \
  tests/c/fixture_outputs.c -L"$W/tvm" -ltvm_runtime
run_host() { # RUNTIME ARGS...: the host program on tvm's or our library, under qemu
  local rt="$1"
  shift
  "$qemu" -L "$sysroot" -E LD_LIBRARY_PATH="$W/$rt" "$W/fixture_outputs" "$@"
}
for rt in tvm ours; do
  loaded="$("$qemu" -L "$sysroot" -E LD_TRACE_LOADED_OBJECTS=1 -E LD_LIBRARY_PATH="$W/$rt" \
    "$W/fixture_outputs" | awk '$1 == "libtvm_runtime.so" { print $3 }')"
  if [ "$loaded" != "$W/$rt/libtvm_runtime.so" ]; then
    echo "cross_ref_runtime: the $rt run loads libtvm_runtime.so from '$loaded'" >&2
    exit 1
  fi
done

# One line per call: NAME KIND LIB FUNCTION ARGS... (graph: NAME=FILE.npy; relax: FILE.npy in
# the function's parameter order, which cross.json keeps).
python3 - "$FX" "${names[@]}" >"$W/calls.txt" <<'EOF'
import json, os, sys
fx, names = sys.argv[1], sys.argv[2:]
m = json.load(open(os.path.join(fx, "cross.json")))
large = {"resnet18", "mobilenet", "relax_resnet18", "relax_mobilenet"}
for n in names or [n for n in m if n not in large]:
    if n not in m:
        print(f"MISSING {n}")
        continue
    e = m[n]
    npy = os.path.join(fx, e["npy_dir"])
    for c in e["calls"]:
        if e["kind"] == "graph":
            args = [f"{p}={os.path.join(npy, k + '.npy')}" for p, k in c["inputs"].items()]
        else:
            args = [os.path.join(npy, k + ".npy") for k in c["inputs"].values()]
        print(n, e["kind"], os.path.join(fx, e["file"]), c["function"], *args)
EOF
if grep -q '^MISSING' "$W/calls.txt"; then
  tvmrt_skip TVMRT_REQUIRE_FIXTURES "not in $FX/cross.json:" \
    "$(awk '/^MISSING/ { printf " %s", $2 }' "$W/calls.txt")"
  exit 0
fi

echo "==> the same program on TVM $tag's runtime and on ours, under $qemu"
calls=0 outputs=0 same=0 failed=()
while read -r name kind lib func args; do
  calls=$((calls + 1))
  label="$name:$func"
  o="$W/out/$calls-$name-$func"
  read -r -a argv <<<"$args"
  ok=1
  for rt in tvm ours; do
    mkdir -p "$o/$rt"
    if [ "$kind" = graph ]; then
      set -- graph "$lib" "$o/$rt" "${argv[@]}"
    else
      set -- relax "$lib" "$o/$rt" "$func" "${argv[@]}"
    fi
    if ! run_host "$rt" "$@" >"$o/$rt.txt" 2>"$o/$rt.err"; then
      echo "FAIL $label: the run on $rt's runtime failed:"
      cat "$o/$rt.err"
      ok=0
    fi
  done
  if [ $ok = 0 ]; then
    failed+=("$label")
    continue
  fi
  mapfile -t files < <(cd "$o/tvm" && ls)
  if [ "$(cd "$o/ours" && ls)" != "$(printf '%s\n' "${files[@]}")" ] || [ ${#files[@]} = 0 ]; then
    echo "FAIL $label: outputs differ in number: tvm" "$(ls "$o/tvm")", ours "$(ls "$o/ours")"
    failed+=("$label")
    continue
  fi
  differ=()
  for f in "${files[@]}"; do
    outputs=$((outputs + 1))
    if cmp -s "$o/tvm/$f" "$o/ours/$f"; then
      same=$((same + 1))
    else
      differ+=("$f")
    fi
  done
  times="$(sed -n 's/^fixture_outputs: [^ ]* \([0-9.]*\) ms$/\1/p' "$o/tvm.err" "$o/ours.err" | xargs)"
  if [ ${#differ[@]} = 0 ]; then
    printf 'identical %-24s %d output(s), byte for byte; %s ms (tvm, ours)\n' "$label" \
      "${#files[@]}" "${times// /, }"
    continue
  fi
  failed+=("$label")
  for f in "${differ[@]}"; do
    if [ -x "$TVMRT_PYTHON" ]; then
      "$TVMRT_PYTHON" - "$label" "$o/tvm/$f" "$o/ours/$f" <<'EOF'
import sys
import numpy as np
label, a, b = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3])
if a.shape != b.shape or a.dtype != b.dtype:
    print(f"DIFFERENT {label} {sys.argv[2].rsplit('/', 1)[1]}: tvm {a.dtype}{list(a.shape)},"
          f" ours {b.dtype}{list(b.shape)}")
    sys.exit(0)
n = int((a != b).sum()) if a.dtype.kind != "f" else int((a.view(f"u{a.itemsize}") != b.view(f"u{a.itemsize}")).sum())
d = np.abs(a.astype(np.float64) - b.astype(np.float64)).max(initial=0)
ulp = ""
if a.dtype.kind == "f":
    i = np.dtype(f"i{a.itemsize}")
    ia, ib = a.view(i).astype(np.int64), b.view(i).astype(np.int64)
    ulp = f", largest {int(np.abs(ia - ib).max(initial=0))} ULP"
print(f"DIFFERENT {label} {sys.argv[2].rsplit('/', 1)[1]}: {n} of {a.size} elements,"
      f" largest |tvm - ours| {d:.3g}{ulp}")
EOF
    else
      echo "DIFFERENT $label $f: $(cmp -l "$o/tvm/$f" "$o/ours/$f" | wc -l) bytes differ"
    fi
  done
done <"$W/calls.txt"

echo "cross_ref_runtime: $arch: $same of $outputs outputs of $calls calls byte-identical between" \
  "TVM $tag's C++ runtime and ours ($((SECONDS - start)) s)${failed[*]:+; differ or failed: ${failed[*]}}"
[ ${#failed[@]} = 0 ]

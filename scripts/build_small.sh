#!/usr/bin/env bash
# The small builds of the runtime (issue 32): the `deploy` or `minimal` feature set built with
# nightly's build-std, the standard library itself rebuilt for size, and a size profile:
#
#   cargo +nightly build -Zbuild-std=std,panic_unwind -Zbuild-std-features=optimize_for_size
#     --target x86_64-unknown-linux-gnu --release -p tvm-runtime-capi --lib
#     --no-default-features --features <set>
#   with the release profile set to opt-level = "z", lto = "fat", codegen-units = 1,
#   debug = 0 and panic = "unwind" (kept: the C boundary promises that no panic aborts the host),
#   and RUSTFLAGS "-Zlocation-detail=none -Cforce-unwind-tables=no": a panic's message loses its
#   file:line (it is still caught and becomes the last error), and unwind tables are left out only
#   for functions that cannot unwind (nothing a panic passes through loses its table); with
#   unwinding also "-Cforce-frame-pointers=yes": a frame kept in rbp describes itself in a few
#   bytes of unwind table where one without needs a rule for every push and pop (deploy -18,928,
#   minimal -9,680 B; about 9 % more instructions per packed call, so only here: the stock
#   builds do not use it; at --panic abort, with no tables to shrink, it only adds code).
#   The C library (package tvm-runtime-capi: crate types cdylib and staticlib, no rlib) gets
#   fat LTO, which internalises every Rust symbol. Relative relocations are packed (`-z pack-relative-relocs`, DT_RELR): the
#   library then needs glibc >= 2.36 or musl >= 1.2.4 to load (an older glibc refuses it with
#   "version `GLIBC_ABI_DT_RELR' not found"); --no-relr builds without.
#
#   --panic abort|immediate-abort gives up that promise for size (std rebuilt with panic_abort,
#   no unwind tables, no landing pads): a panic — a bug in the runtime, never a bad input, which
#   is an error — then ends the host process instead of becoming the last error; `abort` prints
#   its message first, `immediate-abort` (-Cpanic=immediate-abort) not even that.
#
#   scripts/build_small.sh deploy|minimal [--opt-level z|s] [--no-relr]
#                          [--panic unwind|abort|immediate-abort]
#
# Builds into target/small/<set> (-opt-s with --opt-level s, -no-relr with --no-relr, -abort or
# -iabort with --panic; the stock builds are untouched) and installs the nightly
# toolchain's rust-src when missing. The last line of stdout is the path of the library built
# (libtvm_runtime.so; libtvm_runtime.a is beside it); cargo's output goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

set_name=""
opt=z
relr=1
panic=unwind
while [ $# -gt 0 ]; do
  case "$1" in
    deploy|minimal) set_name="$1"; shift ;;
    --opt-level)
      case "${2:-}" in z|s) opt="$2" ;; *) echo "build_small.sh: --opt-level z|s" >&2; exit 2 ;; esac
      shift 2 ;;
    --no-relr) relr=0; shift ;;
    --panic)
      case "${2:-}" in
        unwind|abort|immediate-abort) panic="$2" ;;
        *) echo "build_small.sh: --panic unwind|abort|immediate-abort" >&2; exit 2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "build_small.sh: unknown argument $1 (deploy|minimal [--opt-level z|s] [--no-relr] [--panic unwind|abort|immediate-abort])" >&2; exit 2 ;;
  esac
done
[ -n "$set_name" ] || { echo "usage: scripts/build_small.sh deploy|minimal [--opt-level z|s] [--no-relr] [--panic unwind|abort|immediate-abort]" >&2; exit 2; }

TARGET=x86_64-unknown-linux-gnu
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "build_small: installing the nightly toolchain" >&2
  rustup toolchain install nightly --profile minimal >&2
fi
if ! rustup +nightly component list --installed | grep -q '^rust-src'; then
  echo "build_small: adding rust-src to the nightly toolchain" >&2
  rustup component add rust-src --toolchain nightly >&2
fi

dir="target/small/$set_name"
[ "$opt" = z ] || dir="$dir-opt-$opt"
[ "$relr" = 1 ] || dir="$dir-no-relr"
flags="-Zlocation-detail=none -Cforce-unwind-tables=no"
[ "$relr" = 0 ] || flags="$flags -Clink-arg=-Wl,-z,pack-relative-relocs"
profile_panic=unwind
std_crates=std,panic_unwind
[ "$panic" = unwind ] && flags="$flags -Cforce-frame-pointers=yes"
case "$panic" in
  abort) dir="$dir-abort"; profile_panic=abort; std_crates=std,panic_abort ;;
  immediate-abort)
    dir="$dir-iabort"; profile_panic=abort; std_crates=std,panic_abort
    flags="-Zunstable-options -Cpanic=immediate-abort $flags" ;;
esac
t0=$SECONDS
CARGO_PROFILE_RELEASE_OPT_LEVEL="$opt" \
CARGO_PROFILE_RELEASE_LTO=fat \
CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
CARGO_PROFILE_RELEASE_DEBUG=0 \
CARGO_PROFILE_RELEASE_PANIC="$profile_panic" \
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$flags" \
  cargo +nightly build -Zbuild-std="$std_crates" -Zbuild-std-features=optimize_for_size \
    --target "$TARGET" --release -p tvm-runtime-capi --lib --target-dir "$dir" \
    --no-default-features --features "$set_name" >&2
lib="$dir/$TARGET/release/libtvm_runtime.so"
[ -f "$lib" ] || { echo "build_small.sh: $lib was not built" >&2; exit 1; }
strip -o "$dir/libtvm_runtime.stripped.so" "$lib"
echo "build_small: $set_name (opt-level $opt, panic $panic) built in $((SECONDS - t0)) s; stripped" \
  "$dir/libtvm_runtime.stripped.so: $(stat -c %s "$dir/libtvm_runtime.stripped.so") bytes" >&2
realpath "$lib"

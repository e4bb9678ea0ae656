#!/usr/bin/env bash
# The size floor of the C interface (issue 32): builds benches/floor, a do-nothing
# libtvm_runtime.so exporting the same C symbols as ours, each inside one panic/error boundary
# that sets the last error, with the stock toolchain (the release profile ours uses) and with
# scripts/build_small.sh's nightly build-std recipe (its RUSTFLAGS too), and prints both stripped sizes. Whatever a
# budget allows beyond the floor is what the runtime itself may take.
#
#   scripts/size_floor.sh [--no-small]
set -euo pipefail
cd "$(dirname "$0")/.."
small=1
[ "${1:-}" = "--no-small" ] && small=0
root="$PWD"
dir="$root/target/floor"
mkdir -p "$dir"
# The floor must export what ours exports: compare with the default set's symbols when built.
ours="$root/target/release/libtvm_runtime.so"

(cd benches/floor && cargo build --release --target-dir "$dir/stock" >&2)
strip -o "$dir/stock.so" "$dir/stock/release/libtvm_runtime.so"
n="$(nm -D --defined-only "$dir/stock.so" | grep -c ' T ')"
if [ -f "$ours" ]; then
  m="$(nm -D --defined-only "$ours" | grep -c ' T ')"
  [ "$n" = "$m" ] || { echo "size_floor: the floor exports $n functions, ours $m" >&2; exit 1; }
fi
printf 'floor (stock toolchain, release profile): %s bytes stripped, %s exported functions\n' \
  "$(stat -c %s "$dir/stock.so")" "$n"

if [ "$small" = 1 ]; then
  if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup component add rust-src --toolchain nightly >&2
  fi
  (cd benches/floor &&
    CARGO_PROFILE_RELEASE_OPT_LEVEL=z CARGO_PROFILE_RELEASE_LTO=fat \
      RUSTFLAGS="-Zlocation-detail=none -Cforce-unwind-tables=no -Clink-arg=-Wl,-z,pack-relative-relocs" \
      cargo +nightly build -Zbuild-std=std,panic_unwind -Zbuild-std-features=optimize_for_size \
      --target x86_64-unknown-linux-gnu --release --target-dir "$dir/small" >&2)
  strip -o "$dir/small.so" "$dir/small/x86_64-unknown-linux-gnu/release/libtvm_runtime.so"
  printf 'floor (nightly build-std, opt-level z): %s bytes stripped\n' "$(stat -c %s "$dir/small.so")"
fi

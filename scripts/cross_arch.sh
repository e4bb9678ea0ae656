# shellcheck shell=bash
# The boards, for scripts/cross.sh and scripts/cross_ref_runtime.sh (sourced): cross_arch ARCH
# sets gnu (Debian's cross-compiler prefix), triple (the Rust target), qemu (the qemu-user
# binary) and rarch (the suffix of the board's fixtures, $TVMRT_CACHE/fixtures-<rarch>), and
# fails for an unknown ARCH.
# shellcheck disable=SC2034 # the variables are the caller's
cross_arch() {
  case "$1" in
    aarch64) gnu=aarch64-linux-gnu triple=aarch64-unknown-linux-gnu qemu=qemu-aarch64 rarch=aarch64 ;;
    armv7) gnu=arm-linux-gnueabihf triple=armv7-unknown-linux-gnueabihf qemu=qemu-arm rarch=arm ;;
    riscv64) gnu=riscv64-linux-gnu triple=riscv64gc-unknown-linux-gnu qemu=qemu-riscv64 rarch=riscv64 ;;
    *) return 1 ;;
  esac
}

#!/usr/bin/env bash
# Installs what the cross builds of scripts/cross.sh need on a fresh machine, idempotently:
#   - Debian's cross compilers (C for build.rs's shim and the C suite, C++ for the header
#     check of tests/headers.rs) with their C libraries (libc6-dev-<arch>-cross, pulled in),
#   - qemu-user (qemu-aarch64, qemu-arm, qemu-riscv64: the tests run under it),
#   - the rustup targets.
#
#   scripts/cross_setup.sh [aarch64|armv7|riscv64 ...]   (no argument: all three)
#
# Prints nothing but progress.
set -euo pipefail

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(aarch64 armv7 riscv64)

need_apt=()
need_rust=()
installed_rust="$(rustup target list --installed 2>/dev/null || true)"
for t in "${targets[@]}"; do
  case "$t" in
    aarch64) gnu=aarch64-linux-gnu deb=arm64 triple=aarch64-unknown-linux-gnu qemu=qemu-aarch64 ;;
    armv7) gnu=arm-linux-gnueabihf deb=armhf triple=armv7-unknown-linux-gnueabihf qemu=qemu-arm ;;
    riscv64) gnu=riscv64-linux-gnu deb=riscv64 triple=riscv64gc-unknown-linux-gnu qemu=qemu-riscv64 ;;
    *) echo "cross_setup: unknown target $t (aarch64, armv7, riscv64)" >&2; exit 2 ;;
  esac
  command -v "$gnu-gcc" >/dev/null || need_apt+=("gcc-$gnu")
  command -v "$gnu-g++" >/dev/null || need_apt+=("g++-$gnu")
  # The sysroot qemu and the linker use (normally a dependency of the compiler).
  [ -f "/usr/$gnu/include/stdio.h" ] || need_apt+=("libc6-dev-$deb-cross")
  command -v "$qemu" >/dev/null || need_apt+=(qemu-user)
  grep -qx "$triple" <<<"$installed_rust" || need_rust+=("$triple")
done
command -v cmake >/dev/null || need_apt+=(cmake)

if [ ${#need_apt[@]} -gt 0 ]; then
  mapfile -t need_apt < <(printf '%s\n' "${need_apt[@]}" | sort -u)
  echo "cross_setup: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if [ ${#need_rust[@]} -gt 0 ]; then
  echo "cross_setup: adding rustup targets ${need_rust[*]}"
  rustup target add "${need_rust[@]}"
fi

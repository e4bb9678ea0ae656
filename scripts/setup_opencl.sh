#!/usr/bin/env bash
# Installs what the OpenCL tests need on a fresh machine, idempotently: the ICD loader
# (libOpenCL.so.1, ocl-icd-libopencl1) and POCL (pocl-opencl-icd), an OpenCL 3.0 driver that
# runs on the CPU, plus clinfo for a look at what the driver reports. Prints nothing but
# progress; nothing is installed when everything is already there.
set -euo pipefail
need_apt=()
ldcache="$(ldconfig -p 2>/dev/null || true)"  # captured: a pipe into grep -q can die of SIGPIPE
grep -q 'libOpenCL\.so\.1' <<<"$ldcache" || need_apt+=(ocl-icd-libopencl1)
[ -f /etc/OpenCL/vendors/pocl.icd ] || need_apt+=(pocl-opencl-icd)
command -v clinfo >/dev/null || need_apt+=(clinfo)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup_opencl: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${need_apt[@]}" >/dev/null
fi
echo "setup_opencl: ready"

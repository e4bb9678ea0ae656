# CMake toolchain file for riscv64 Linux boards (riscv64-linux-gnu), with Debian's cross compiler
# (gcc-riscv64-linux-gnu; scripts/cross_setup.sh installs it) and its sysroot /usr/riscv64-linux-gnu:
#   cmake -S <project> -B <build> -DCMAKE_TOOLCHAIN_FILE=<this file>
# Programs built here run under qemu-riscv64 (qemu-user) through CMAKE_CROSSCOMPILING_EMULATOR,
# which ctest uses for add_test commands (scripts/cross.sh riscv64 c-suite).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(TVMRT_CROSS_GNU riscv64-linux-gnu)
include("${CMAKE_CURRENT_LIST_DIR}/toolchain-cross-common.cmake")

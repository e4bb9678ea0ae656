# CMake toolchain file for aarch64 Linux boards (aarch64-linux-gnu), with Debian's cross compiler
# (gcc-aarch64-linux-gnu; scripts/cross_setup.sh installs it) and its sysroot /usr/aarch64-linux-gnu:
#   cmake -S <project> -B <build> -DCMAKE_TOOLCHAIN_FILE=<this file>
# Programs built here run under qemu-aarch64 (qemu-user) through CMAKE_CROSSCOMPILING_EMULATOR,
# which ctest uses for add_test commands (scripts/cross.sh aarch64 c-suite).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(TVMRT_CROSS_GNU aarch64-linux-gnu)
include("${CMAKE_CURRENT_LIST_DIR}/toolchain-cross-common.cmake")

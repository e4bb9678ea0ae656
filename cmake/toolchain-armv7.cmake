# CMake toolchain file for armv7 Linux boards (arm-linux-gnueabihf), with Debian's cross compiler
# (gcc-arm-linux-gnueabihf; scripts/cross_setup.sh installs it) and its sysroot /usr/arm-linux-gnueabihf:
#   cmake -S <project> -B <build> -DCMAKE_TOOLCHAIN_FILE=<this file>
# Programs built here run under qemu-arm (qemu-user) through CMAKE_CROSSCOMPILING_EMULATOR,
# which ctest uses for add_test commands (scripts/cross.sh armv7 c-suite).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7)
set(TVMRT_CROSS_GNU arm-linux-gnueabihf)
include("${CMAKE_CURRENT_LIST_DIR}/toolchain-cross-common.cmake")

# tvm_add_device_plugin(<target> <sources>...)
#
# Builds a device plugin for tvm-runtime-rs as a loadable module: plain CMake, no
# compiler-specific registration tricks. The plugin exports `TVMDevicePluginInit`
# (see tvm/runtime/device_plugin.h) and links the runtime for TVMAPISetLastError and
# TVMFuncCreateFromCFunc. Load it with TVMDeviceLoadPlugin(path), runtime.LoadDevicePlugin,
# or the TVM_DEVICE_PLUGINS environment variable.
function(tvm_add_device_plugin target)
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE tvm::tvm_runtime)
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    POSITION_INDEPENDENT_CODE ON)
endfunction()

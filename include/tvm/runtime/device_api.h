/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * DeviceAPI, as far as deployment uses it: memory, copies, streams and attributes of a device,
 * through TVMDeviceAllocDataSpace, TVMDeviceCopyDataFromTo, TVMStream*, TVMSynchronize and
 * runtime.GetDeviceAttr.
 */
#ifndef TVM_RUNTIME_DEVICE_API_H_
#define TVM_RUNTIME_DEVICE_API_H_

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <string>

namespace tvm {
namespace runtime {

/*! \brief Device attributes (runtime.GetDeviceAttr). */
enum DeviceAttrKind : int {
  kExist = 0,
  kMaxThreadsPerBlock = 1,
  kWarpSize = 2,
  kMaxSharedMemoryPerBlock = 3,
  kComputeVersion = 4,
  kDeviceName = 5,
  kMaxClockRate = 6,
  kMultiProcessorCount = 7,
  kMaxThreadDimensions = 8,
  kMaxRegistersPerBlock = 9,
  kGcnArch = 10,
  kApiVersion = 11,
  kDriverVersion = 12,
  kL2CacheSizeBytes = 13,
  kTotalGlobalMemory = 14,
  kAvailableGlobalMemory = 15,
};

/*! \brief Alignment of allocated data (bytes). */
constexpr int kAllocAlignment = 64;
/*! \brief Alignment of temporary (workspace) allocations (bytes). */
constexpr int kTempAllocaAlignment = 64;

/*! \brief The name of a device type ("cpu", "cuda", ...). */
inline const char* DeviceName(int type) { return DLDeviceType2Str(type); }

/*! \brief A device's operations, through the runtime's C ABI. */
class DeviceAPI {
 public:
  /*!
   * \brief The API of `dev`'s device type; throws tvm::Error (or gives nullptr with
   * allow_missing) when the runtime has no such device.
   */
  static DeviceAPI* Get(Device dev, bool allow_missing = false) {
    static DeviceAPI api;
    TVMRetValue exist;
    bool ok = false;
    try {
      api.GetAttr(dev, kExist, &exist);
      ok = exist.type_code() == kDLInt && static_cast<int64_t>(exist) != 0;
    } catch (const Error&) {
      ok = false;
    }
    if (!ok) {
      if (allow_missing) return nullptr;
      throw Error(std::string("device ") + DeviceName(static_cast<int>(dev.device_type)) + ":" +
                  std::to_string(dev.device_id) + " is not available");
    }
    return &api;
  }
  /*! \brief Whether kernels on this device type need the device set first. */
  static bool NeedSetDevice(int device_type) { return device_type != kDLCPU; }

  /*! \brief Makes `dev` current for this thread. */
  void SetDevice(Device dev) {
    PackedFunc f = PackedFunc::FromOwnedHandle(detail::GlobalHandle("__tvm_set_device"));
    f(static_cast<int>(dev.device_type), dev.device_id);
  }
  /*! \brief Attribute `kind` of `dev` into `rv`. */
  void GetAttr(Device dev, DeviceAttrKind kind, TVMRetValue* rv) {
    PackedFunc f = PackedFunc::FromOwnedHandle(detail::GlobalHandle("runtime.GetDeviceAttr"));
    *rv = f(static_cast<int>(dev.device_type), dev.device_id, static_cast<int>(kind));
  }
  /*! \brief `nbytes` bytes of device memory, aligned to `alignment`. */
  void* AllocDataSpace(Device dev, size_t nbytes, size_t alignment, DLDataType type_hint) {
    void* out = nullptr;
    detail::ThrowLastError(TVMDeviceAllocDataSpace(dev, nbytes, alignment, type_hint, &out),
                           "TVMDeviceAllocDataSpace");
    return out;
  }
  /*! \brief Device memory for a tensor of `shape` and `dtype` in memory scope `mem_scope`. */
  void* AllocDataSpace(Device dev, int ndim, const int64_t* shape, DLDataType dtype,
                       Optional<String> mem_scope = NullOpt) {
    void* out = nullptr;
    const char* scope = mem_scope.defined() ? mem_scope.value().c_str() : nullptr;
    detail::ThrowLastError(
        TVMDeviceAllocDataSpaceWithScope(dev, ndim, shape, dtype, scope, &out),
        "TVMDeviceAllocDataSpaceWithScope");
    return out;
  }
  /*! \brief Frees memory from AllocDataSpace. */
  void FreeDataSpace(Device dev, void* ptr) {
    detail::ThrowLastError(TVMDeviceFreeDataSpace(dev, ptr), "TVMDeviceFreeDataSpace");
  }
  /*! \brief Copies between tensors (either may be on this device). */
  void CopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream) {
    detail::ThrowLastError(TVMDeviceCopyDataFromTo(from, to, stream), "TVMDeviceCopyDataFromTo");
  }
  /*! \brief A new stream on `dev`. */
  TVMStreamHandle CreateStream(Device dev) {
    TVMStreamHandle out = nullptr;
    detail::ThrowLastError(TVMStreamCreate(dev.device_type, dev.device_id, &out),
                           "TVMStreamCreate");
    return out;
  }
  /*! \brief Frees a stream from CreateStream. */
  void FreeStream(Device dev, TVMStreamHandle stream) {
    detail::ThrowLastError(TVMStreamFree(dev.device_type, dev.device_id, stream),
                           "TVMStreamFree");
  }
  /*! \brief Makes `stream` the current stream of `dev`. */
  void SetStream(Device dev, TVMStreamHandle stream) {
    detail::ThrowLastError(TVMSetStream(dev.device_type, dev.device_id, stream), "TVMSetStream");
  }
  /*! \brief Waits for `stream` on `dev`. */
  void StreamSync(Device dev, TVMStreamHandle stream) {
    detail::ThrowLastError(TVMSynchronize(dev.device_type, dev.device_id, stream),
                           "TVMSynchronize");
  }
  /*! \brief Makes `event_dst` wait for `event_src`. */
  void SyncStreamFromTo(Device dev, TVMStreamHandle event_src, TVMStreamHandle event_dst) {
    detail::ThrowLastError(
        TVMStreamStreamSynchronize(dev.device_type, dev.device_id, event_src, event_dst),
        "TVMStreamStreamSynchronize");
  }
  /*! \brief Workspace memory (TVMBackendAllocWorkspace); nullptr on failure. */
  void* AllocWorkspace(Device dev, size_t nbytes, DLDataType type_hint = {}) {
    void* p = TVMBackendAllocWorkspace(dev.device_type, dev.device_id, nbytes, type_hint.code,
                                       type_hint.bits);
    if (p == nullptr) throw Error(TVMGetLastError());
    return p;
  }
  /*! \brief Frees workspace memory. */
  void FreeWorkspace(Device dev, void* data) {
    detail::ThrowLastError(TVMBackendFreeWorkspace(dev.device_type, dev.device_id, data),
                           "TVMBackendFreeWorkspace");
  }
};

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_DEVICE_API_H_

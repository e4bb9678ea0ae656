/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * NDArray: a counted reference to the runtime's tensor object; operator-> gives its DLTensor
 * (the C ABI's TVMArrayHandle). Allocation and copies go through TVMArrayAlloc,
 * TVMArrayCopyFromTo, TVMArrayCopyFromBytes/ToBytes and the DLPack functions.
 */
#ifndef TVM_RUNTIME_NDARRAY_H_
#define TVM_RUNTIME_NDARRAY_H_

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/object.h>

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <utility>

namespace tvm {

/*! \brief A device (DLPack's DLDevice). */
using Device = DLDevice;

namespace runtime {

/*! \brief The NDArray object (its DLTensor follows the object header). */
class NDArrayNode : public Object {
 public:
  static constexpr const char* _type_key = "runtime.NDArray";
  static constexpr int _arg_type_code = kTVMNDArrayHandle;
  /*! \brief The tensor. */
  const DLTensor* tensor() const { return detail::ObjectToNDArray(handle()); }
};

/*! \brief The number of bytes a tensor's elements take (dense). */
inline size_t GetDataSize(const DLTensor& arr) {
  size_t size = 1;
  for (int i = 0; i < arr.ndim; ++i) size *= static_cast<size_t>(arr.shape[i]);
  return size * ((static_cast<size_t>(arr.dtype.bits) * arr.dtype.lanes + 7) / 8);
}

/*! \brief Whether a tensor is laid out compactly in row-major order. */
inline bool IsContiguous(const DLTensor& arr) {
  if (arr.strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = arr.ndim - 1; i >= 0; --i) {
    if (arr.shape[i] == 1) continue;
    if (arr.strides[i] != expected) return false;
    expected *= arr.shape[i];
  }
  return true;
}

/*! \brief A counted reference to a tensor (nullable). */
class NDArray : public ObjectRef {
 public:
  using ContainerType = NDArrayNode;
  NDArray() = default;
  TVMRT_OBJECT_REF_CTOR(NDArray, ObjectRef)

  /*! \brief Takes over the reference an NDArray handle (TVMArrayHandle) carries. */
  static NDArray FromOwnedHandle(TVMArrayHandle handle) {
    return NDArray(detail::UncheckedTag(),
                   ObjectRef::FromOwnedHandle(detail::NDArrayToObject(handle)));
  }

  /*! \brief The tensor; throws tvm::Error on a null NDArray. */
  const DLTensor* operator->() const { return detail::ObjectToNDArray(checked_handle()); }
  /*! \brief The tensor (C ABI handle), or nullptr. */
  DLTensor* GetDLTensorPtr() const { return detail::ObjectToNDArray(data_); }
  /*! \brief Whether the tensor is compact row-major. */
  bool IsContiguous() const { return runtime::IsContiguous(*operator->()); }

  /*! \brief Copies `other` into this tensor. */
  void CopyFrom(const DLTensor* other) {
    detail::ThrowLastError(
        TVMArrayCopyFromTo(const_cast<DLTensor*>(other), Mutable(), nullptr),
        "TVMArrayCopyFromTo");
  }
  /*! \brief Copies `other` into this tensor. */
  void CopyFrom(const NDArray& other) { CopyFrom(other.operator->()); }
  /*! \brief Copies `nbytes` bytes from host memory into this tensor. */
  void CopyFromBytes(const void* data, size_t nbytes) {
    detail::ThrowLastError(TVMArrayCopyFromBytes(Mutable(), const_cast<void*>(data), nbytes),
                           "TVMArrayCopyFromBytes");
  }
  /*! \brief Copies this tensor into `other`. */
  void CopyTo(DLTensor* other) const {
    detail::ThrowLastError(TVMArrayCopyFromTo(Mutable(), other, nullptr), "TVMArrayCopyFromTo");
  }
  /*! \brief Copies this tensor into `other`. */
  void CopyTo(const NDArray& other) const { CopyTo(other.Mutable()); }
  /*! \brief Copies this tensor into `nbytes` bytes of host memory. */
  void CopyToBytes(void* data, size_t nbytes) const {
    detail::ThrowLastError(TVMArrayCopyToBytes(Mutable(), data, nbytes), "TVMArrayCopyToBytes");
  }
  /*! \brief A copy of this tensor on `dev`. */
  NDArray CopyTo(const Device& dev) const {
    const DLTensor* t = operator->();
    NDArray out = Empty(Shape(), t->dtype, dev);
    CopyTo(out);
    return out;
  }
  /*! \brief The shape. */
  ShapeTuple Shape() const {
    const DLTensor* t = operator->();
    return ShapeTuple(t->shape, t->shape + t->ndim);
  }
  /*! \brief The element type. */
  runtime::DataType DataType() const { return runtime::DataType(operator->()->dtype); }
  /*! \brief A view of this tensor's memory with another shape and type, at a byte offset. */
  NDArray CreateView(ShapeTuple shape, DLDataType dtype, uint64_t relative_byte_offset = 0) {
    TVMValue v[4];
    int codes[4] = {kTVMNDArrayHandle, kTVMObjectHandle, kTVMDataType, kDLInt};
    v[0].v_handle = Mutable();
    v[1].v_handle = shape.handle();
    v[2].v_type = dtype;
    v[3].v_int64 = static_cast<int64_t>(relative_byte_offset);
    return Downcast<NDArray>(
        detail::CallGlobalForObject("runtime.TVMArrayCreateView", v, codes, 4));
  }
  /*! \brief A DLPack tensor sharing this tensor's memory (call its deleter when done). */
  DLManagedTensor* ToDLPack() const {
    DLManagedTensor* out = nullptr;
    detail::ThrowLastError(TVMArrayToDLPack(Mutable(), &out), "TVMArrayToDLPack");
    return out;
  }

  /*! \brief A new tensor on `dev` (uninitialised). Only the global memory scope exists. */
  static NDArray Empty(ShapeTuple shape, DLDataType dtype, Device dev) {
    DLTensor* out = nullptr;
    detail::ThrowLastError(TVMArrayAlloc(shape.data(), static_cast<int>(shape.size()),
                                         dtype.code, dtype.bits, dtype.lanes, dev.device_type,
                                         dev.device_id, &out),
                           "TVMArrayAlloc");
    return FromOwnedHandle(out);
  }
  /*! \brief A new tensor in memory scope `mem_scope` on `dev`. */
  static NDArray Empty(ShapeTuple shape, DLDataType dtype, Device dev, const String& mem_scope) {
    TVMValue v[4];
    int codes[4] = {kTVMObjectHandle, kTVMDataType, kDLDevice, kTVMStr};
    v[0].v_handle = shape.handle();
    v[1].v_type = dtype;
    v[2].v_device = dev;
    v[3].v_str = mem_scope.c_str();
    return Downcast<NDArray>(
        detail::CallGlobalForObject("runtime.TVMArrayAllocWithScope", v, codes, 4));
  }
  /*! \brief Takes over a DLPack tensor (its deleter runs when the NDArray dies). */
  static NDArray FromDLPack(DLManagedTensor* tensor) {
    DLTensor* out = nullptr;
    detail::ThrowLastError(TVMArrayFromDLPack(tensor, &out), "TVMArrayFromDLPack");
    return FromOwnedHandle(out);
  }
  /*! \brief Copies between two tensors (any devices), on `stream`. */
  static void CopyFromTo(const DLTensor* from, DLTensor* to, TVMStreamHandle stream = nullptr) {
    detail::ThrowLastError(TVMArrayCopyFromTo(const_cast<DLTensor*>(from), to, stream),
                           "TVMArrayCopyFromTo");
  }

 private:
  DLTensor* Mutable() const { return detail::ObjectToNDArray(checked_handle()); }
};

}  // namespace runtime

/*! \brief The name of a device type ("cpu", "cuda", ...). */
inline const char* DLDeviceType2Str(int type) {
  switch (type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda";
    case kDLCUDAHost:
      return "cuda_host";
    case kDLCUDAManaged:
      return "cuda_managed";
    case kDLOpenCL:
      return "opencl";
    case kDLVulkan:
      return "vulkan";
    case kDLMetal:
      return "metal";
    case kDLVPI:
      return "vpi";
    case kDLROCM:
      return "rocm";
    case kDLROCMHost:
      return "rocm_host";
    case kDLExtDev:
      return "ext_dev";
    case kDLOneAPI:
      return "oneapi";
    case kDLWebGPU:
      return "webgpu";
    case kDLHexagon:
      return "hexagon";
    default:
      return "unknown";
  }
}

namespace runtime {
using tvm::DLDeviceType2Str;
}  // namespace runtime

}  // namespace tvm

inline std::ostream& operator<<(std::ostream& os, const DLDevice& dev) {
  return os << ::tvm::DLDeviceType2Str(static_cast<int>(dev.device_type)) << ":"
            << dev.device_id;
}

#endif  // TVM_RUNTIME_NDARRAY_H_

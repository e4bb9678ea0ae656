/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Objects: ObjectRef, a counted reference to a runtime object (TVMObjectRetain/TVMObjectFree),
 * Downcast<T> with a type check, and the helpers the containers use to call the runtime's
 * global functions with raw C values.
 *
 * An object handle points to the object header (uint32_t type_index; int32_t ref_counter;
 * void (*deleter)(Object*)); an NDArray's DLTensor follows its header (the C ABI's
 * TVMArrayHandle), so the two handles differ by the header's size.
 */
#ifndef TVM_RUNTIME_OBJECT_H_
#define TVM_RUNTIME_OBJECT_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/logging.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

namespace tvm {
namespace runtime {

/*! \brief The static type indices of the runtime's built-in objects. */
struct TypeIndex {
  enum : uint32_t {
    kRoot = 0,
    kRuntimeModule = 1,
    kRuntimeNDArray = 2,
    kRuntimeString = 3,
    kRuntimeArray = 4,
    kRuntimeMap = 5,
    kRuntimeShapeTuple = 6,
    kRuntimePackedFunc = 7,
  };
};

namespace detail {

/*! \brief Tag of the constructors that wrap a reference without checking its type. */
struct UncheckedTag {};

/*! \brief The size of the object header in front of an NDArray's DLTensor. */
constexpr std::ptrdiff_t kObjectHeaderBytes =
    sizeof(uint32_t) + sizeof(int32_t) + sizeof(void (*)(void*));

/*! \brief The object handle of an NDArray handle (a DLTensor inside an NDArray object). */
inline void* NDArrayToObject(void* tensor) {
  return tensor == nullptr ? nullptr : static_cast<char*>(tensor) - kObjectHeaderBytes;
}

/*! \brief The NDArray handle (DLTensor*) of an NDArray object handle. */
inline DLTensor* ObjectToNDArray(void* obj) {
  return obj == nullptr ? nullptr
                        : reinterpret_cast<DLTensor*>(static_cast<char*>(obj) + kObjectHeaderBytes);
}

/*! \brief The type index of an object handle. */
inline uint32_t TypeIndexOf(void* handle) {
  unsigned int index = 0;
  ThrowLastError(TVMObjectGetTypeIndex(handle, &index), "TVMObjectGetTypeIndex");
  return index;
}

/*! \brief The type key of a type index. */
inline std::string TypeIndex2Key(uint32_t index) {
  char* key = nullptr;
  ThrowLastError(TVMObjectTypeIndex2Key(index, &key), "TVMObjectTypeIndex2Key");
  std::string out(key == nullptr ? "" : key);
  std::free(key);
  return out;
}

/*! \brief The type index of a type key. */
inline uint32_t TypeKey2Index(const char* key) {
  unsigned int index = 0;
  ThrowLastError(TVMObjectTypeKey2Index(key, &index), "TVMObjectTypeKey2Index");
  return index;
}

/*! \brief Whether the object at `handle` is a `key` (or derives from it). */
inline bool IsInstance(void* handle, const char* key) {
  if (std::strcmp(key, "runtime.Object") == 0) return true;
  int out = 0;
  ThrowLastError(TVMObjectDerivedFrom(TypeIndexOf(handle), TypeKey2Index(key), &out),
                 "TVMObjectDerivedFrom");
  return out != 0;
}

/*! \brief The name of an argument type code, as TVM spells it in its messages. */
inline const char* ArgTypeCode2Str(int code) {
  switch (code) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case kTVMStr:
      return "str";
    case kTVMBytes:
      return "bytes";
    case kTVMOpaqueHandle:
      return "handle";
    case kTVMNullptr:
      return "NULL";
    case kTVMDLTensorHandle:
      return "ArrayHandle";
    case kTVMDataType:
      return "DLDataType";
    case kDLDevice:
      return "DLDevice";
    case kTVMPackedFuncHandle:
      return "FunctionHandle";
    case kTVMModuleHandle:
      return "ModuleHandle";
    case kTVMNDArrayHandle:
      return "NDArrayContainer";
    case kTVMObjectHandle:
      return "Object";
    case kTVMObjectRValueRefArg:
      return "ObjectRValueRefArg";
    case kTVMArgBool:
      return "bool";
    default:
      return "unknown";
  }
}

/*! \brief The argument type code an object is passed with. */
inline int ObjectArgCode(void* handle) {
  if (handle == nullptr) return kTVMNullptr;
  switch (TypeIndexOf(handle)) {
    case TypeIndex::kRuntimeModule:
      return kTVMModuleHandle;
    case TypeIndex::kRuntimeNDArray:
      return kTVMNDArrayHandle;
    case TypeIndex::kRuntimePackedFunc:
      return kTVMPackedFuncHandle;
    default:
      return kTVMObjectHandle;
  }
}

}  // namespace detail

/*!
 * \brief A runtime object. Never constructed here: an `Object*` is the object's handle, and
 * its methods ask the runtime through the C ABI.
 */
class Object {
 public:
  /*! \brief The type key of every object. */
  static constexpr const char* _type_key = "runtime.Object";
  /*! \brief The argument type code of its references (-1: decided per object). */
  static constexpr int _arg_type_code = -1;
  Object() = delete;
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  /*! \brief The object's type index. */
  uint32_t type_index() const { return detail::TypeIndexOf(handle()); }
  /*! \brief The object's type key. */
  std::string GetTypeKey() const { return detail::TypeIndex2Key(type_index()); }
  /*! \brief The type key of a type index. */
  static std::string TypeIndex2Key(uint32_t tindex) { return detail::TypeIndex2Key(tindex); }
  /*! \brief The type index of a type key. */
  static uint32_t TypeKey2Index(const std::string& key) {
    return detail::TypeKey2Index(key.c_str());
  }
  /*! \brief Whether this object is a `T` (T::_type_key) or derives from it. */
  template <typename T>
  bool IsInstance() const {
    return detail::IsInstance(handle(), T::_type_key);
  }

 protected:
  void* handle() const { return const_cast<void*>(static_cast<const void*>(this)); }
};

/*! \brief A counted reference to an object (nullable). */
class ObjectRef {
 public:
  /*! \brief The object type this reference holds. */
  using ContainerType = Object;
  /*! \brief Whether a null reference is allowed (always, in this API). */
  static constexpr bool _type_is_nullable = true;

  ObjectRef() = default;
  /*! \brief Wraps `ref` as is (used by Downcast after its type check). */
  ObjectRef(detail::UncheckedTag, ObjectRef ref) : data_(ref.release()) {}
  ObjectRef(const ObjectRef& other) : data_(other.data_) { Retain(); }
  ObjectRef(ObjectRef&& other) noexcept : data_(other.data_) { other.data_ = nullptr; }
  ObjectRef& operator=(const ObjectRef& other) {
    ObjectRef(other).swap(*this);
    return *this;
  }
  ObjectRef& operator=(ObjectRef&& other) noexcept {
    ObjectRef(std::move(other)).swap(*this);
    return *this;
  }
  ~ObjectRef() { reset(); }

  /*! \brief Takes over one reference the caller owns on the object handle `handle`. */
  static ObjectRef FromOwnedHandle(void* handle) {
    ObjectRef r;
    r.data_ = handle;
    return r;
  }
  /*! \brief Adds a reference to `handle` (borrowed) and holds it. */
  static ObjectRef FromBorrowedHandle(void* handle) {
    ObjectRef r;
    r.data_ = handle;
    r.Retain();
    return r;
  }

  /*! \brief Whether an object is held. */
  bool defined() const { return data_ != nullptr; }
  /*! \brief The object (its handle), or nullptr. */
  const Object* get() const { return static_cast<const Object*>(data_); }
  /*! \brief The object; throws on a null reference. */
  const Object* operator->() const { return static_cast<const Object*>(checked_handle()); }
  /*! \brief Whether both refer to the same object. */
  bool same_as(const ObjectRef& other) const { return data_ == other.data_; }
  bool operator==(const ObjectRef& other) const { return data_ == other.data_; }
  bool operator!=(const ObjectRef& other) const { return data_ != other.data_; }
  bool operator<(const ObjectRef& other) const { return data_ < other.data_; }
  bool operator==(std::nullptr_t) const { return data_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return data_ != nullptr; }
  /*! \brief The object's reference count (0 when null). */
  int use_count() const {
    return data_ == nullptr ? 0 : reinterpret_cast<const int32_t*>(data_)[1];
  }
  /*! \brief Whether this is the only reference. */
  bool unique() const { return use_count() == 1; }
  /*! \brief Drops the reference. */
  void reset() {
    if (data_ != nullptr) {
      void* h = data_;
      data_ = nullptr;
      TVMObjectFree(h);
    }
  }
  /*! \brief The object as a `T` (T::_type_key), or nullptr when it is none. */
  template <typename T>
  const T* as() const {
    if (data_ == nullptr || !detail::IsInstance(data_, T::_type_key)) return nullptr;
    return static_cast<const T*>(data_);
  }
  void swap(ObjectRef& other) noexcept { std::swap(data_, other.data_); }

  /*! \brief The object handle (C ABI), borrowed. */
  void* handle() const { return data_; }
  /*! \brief The object handle; throws tvm::Error on a null reference. */
  void* checked_handle() const {
    if (data_ == nullptr) throw Error("use of a null (undefined) ObjectRef");
    return data_;
  }
  /*! \brief Gives up the reference without dropping it; returns the handle. */
  void* release() {
    void* h = data_;
    data_ = nullptr;
    return h;
  }

 protected:
  void Retain() {
    if (data_ != nullptr) TVMObjectRetain(data_);
  }
  void* data_ = nullptr;
};

/*! \brief Hash of an ObjectRef by object identity. */
struct ObjectPtrHash {
  size_t operator()(const ObjectRef& a) const { return std::hash<void*>()(a.handle()); }
};

/*! \brief Equality of ObjectRefs by object identity. */
struct ObjectPtrEqual {
  bool operator()(const ObjectRef& a, const ObjectRef& b) const { return a.same_as(b); }
};

namespace detail {

/*! \brief Throws unless `ref` is null (and `T` nullable) or holds a `T::ContainerType`. */
template <typename T>
inline void CheckObjectType(const ObjectRef& ref) {
  using C = typename T::ContainerType;
  if (!ref.defined()) {
    if (!T::_type_is_nullable) {
      throw Error(std::string("expected ") + C::_type_key + " but got None");
    }
    return;
  }
  if (!IsInstance(ref.handle(), C::_type_key)) {
    throw Error(std::string("expected ") + C::_type_key + " but got " +
                TypeIndex2Key(TypeIndexOf(ref.handle())));
  }
}

/*! \brief Wraps a reference as a `T` without checking its type. */
template <typename T>
inline T UncheckedCast(ObjectRef ref) {
  return T(UncheckedTag(), std::move(ref));
}

/*! \brief The object handle in a value the runtime returned (an owned reference). */
inline void* OwnedObjectFromValue(TVMValue v, int code, const char* expected) {
  switch (code) {
    case kTVMNullptr:
      return nullptr;
    case kTVMObjectHandle:
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
      return v.v_handle;
    case kTVMNDArrayHandle:
      return NDArrayToObject(v.v_handle);
    default:
      throw Error(std::string("expected ") + expected + " but got " + ArgTypeCode2Str(code));
  }
}

/*! \brief A global function's handle, looked up once and kept (nullptr when absent). */
inline TVMFunctionHandle GlobalHandle(const char* name) {
  TVMFunctionHandle f = nullptr;
  ThrowLastError(TVMFuncGetGlobal(name, &f), "TVMFuncGetGlobal");
  if (f == nullptr) throw Error(std::string("global function ") + name + " is not registered");
  return f;
}

/*! \brief Packs an object reference as a call argument. */
template <typename T>
inline void PackObjectArg(const T& ref, TVMValue* v, int* code) {
  void* h = ref.handle();
  constexpr int static_code = T::ContainerType::_arg_type_code;
  *code = h == nullptr ? kTVMNullptr : static_code >= 0 ? static_code : ObjectArgCode(h);
  v->v_handle = *code == kTVMNDArrayHandle ? ObjectToNDArray(h) : h;
}

/*!
 * \brief Calls a runtime global function (looked up by name and cached by the caller through
 * `cache`) with raw arguments; returns its object result as an owned reference.
 */
inline ObjectRef CallGlobalForObject(const char* name, TVMValue* args, int* codes, int n) {
  TVMFunctionHandle f = GlobalHandle(name);
  TVMValue ret;
  int ret_code = kTVMNullptr;
  int rc = TVMFuncCall(f, args, codes, n, &ret, &ret_code);
  TVMFuncFree(f);
  ThrowLastError(rc, name);
  return ObjectRef::FromOwnedHandle(OwnedObjectFromValue(ret, ret_code, "an object"));
}

/*! \brief Calls a runtime global function that returns an integer. */
inline int64_t CallGlobalForInt(const char* name, TVMValue* args, int* codes, int n) {
  TVMFunctionHandle f = GlobalHandle(name);
  TVMValue ret;
  int ret_code = kTVMNullptr;
  int rc = TVMFuncCall(f, args, codes, n, &ret, &ret_code);
  TVMFuncFree(f);
  ThrowLastError(rc, name);
  if (ret_code != kDLInt && ret_code != kTVMArgBool) {
    throw Error(std::string(name) + ": expected int but got " + ArgTypeCode2Str(ret_code));
  }
  return ret.v_int64;
}

}  // namespace detail

/*! \brief `ref` as a `T`; throws tvm::Error when the object is not a `T`. */
template <typename T, typename U = ObjectRef>
inline T Downcast(const U& ref) {
  detail::CheckObjectType<T>(ref);
  return detail::UncheckedCast<T>(ref);
}

}  // namespace runtime

using runtime::Downcast;
using runtime::Object;
using runtime::ObjectRef;

}  // namespace tvm

/*! \brief Declares the constructor Downcast uses in a class derived from ObjectRef. */
#define TVMRT_OBJECT_REF_CTOR(Class, Base)                         \
  Class(::tvm::runtime::detail::UncheckedTag tag, ::tvm::runtime::ObjectRef ref) \
      : Base(tag, std::move(ref)) {}

#endif  // TVM_RUNTIME_OBJECT_H_

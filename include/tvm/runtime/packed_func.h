/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * PackedFunc (a counted reference to a runtime function, called with TVMFuncCall),
 * TypedPackedFunc<R(Args...)>, TVMArgs/TVMArgValue (borrowed arguments) and TVMRetValue (an
 * owned value), with their conversions. A C++ callable becomes a runtime function through
 * TVMFuncCreateFromCFunc; a C++ exception thrown in it becomes the call's error
 * (TVMAPISetLastError) and, on the calling side, a tvm::Error with the runtime's message.
 */
#ifndef TVM_RUNTIME_PACKED_FUNC_H_
#define TVM_RUNTIME_PACKED_FUNC_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/object.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

class TVMArgs;
class TVMArgValue;
class TVMRetValue;
class PackedFunc;
template <typename FType>
class TypedPackedFunc;

/*! \brief The function object. */
class PackedFuncObj : public Object {
 public:
  static constexpr const char* _type_key = "runtime.PackedFunc";
  static constexpr int _arg_type_code = kTVMPackedFuncHandle;
};

namespace detail {

template <typename T>
struct IsTypedPackedFunc : std::false_type {};
template <typename F>
struct IsTypedPackedFunc<TypedPackedFunc<F>> : std::true_type {};

template <typename T>
constexpr bool kIsObjectRef = std::is_base_of<ObjectRef, T>::value;

/*! \brief Whether a type converts to and from packed values as an integer. */
template <typename T>
constexpr bool kIsInt = std::is_integral<T>::value && !std::is_same<T, bool>::value;

}  // namespace detail

/*!
 * \brief A value and its type code, with the conversions every packed value has. Base of
 * TVMArgValue (borrowed) and TVMRetValue (owned).
 */
class TVMPODValue_ {
 public:
  /*! \brief The type code (TVMArgTypeCode or DLDataTypeCode). */
  int type_code() const { return type_code_; }
  /*! \brief The raw value. */
  const TVMValue& value() const { return value_; }

  /*! \brief As an integer (int or bool values). */
  operator int64_t() const {
    if (type_code_ != kDLInt && type_code_ != kTVMArgBool) Mismatch("int");
    return value_.v_int64;
  }
  /*! \brief As an unsigned integer (int or bool values). */
  operator uint64_t() const { return static_cast<uint64_t>(operator int64_t()); }
  /*! \brief As an int (int or bool values); throws when the value does not fit. */
  operator int() const {
    int64_t v = operator int64_t();
    if (v < INT32_MIN || v > INT32_MAX) {
      throw Error("value " + std::to_string(v) + " does not fit in int");
    }
    return static_cast<int>(v);
  }
  /*! \brief As a bool (int or bool values). */
  operator bool() const {
    if (type_code_ != kDLInt && type_code_ != kTVMArgBool) Mismatch("bool");
    return value_.v_int64 != 0;
  }
  /*! \brief As a floating point number (float or int values). */
  operator double() const {
    if (type_code_ == kDLInt) return static_cast<double>(value_.v_int64);
    if (type_code_ != kDLFloat) Mismatch("float");
    return value_.v_float64;
  }
  /*! \brief As an opaque handle (handle, tensor or null values). */
  operator void*() const {
    switch (type_code_) {
      case kTVMNullptr:
        return nullptr;
      case kTVMOpaqueHandle:
      case kTVMDLTensorHandle:
      case kTVMNDArrayHandle:
        return value_.v_handle;
      default:
        Mismatch("handle");
    }
  }
  /*! \brief As a DLTensor* (tensor, NDArray or null values); borrowed. */
  operator DLTensor*() const {
    switch (type_code_) {
      case kTVMNullptr:
        return nullptr;
      case kTVMDLTensorHandle:
      case kTVMNDArrayHandle:
        return static_cast<DLTensor*>(value_.v_handle);
      default:
        Mismatch("ArrayHandle");
    }
  }
  /*! \brief As a device. */
  operator DLDevice() const {
    if (type_code_ != kDLDevice) Mismatch("DLDevice");
    return value_.v_device;
  }
  /*! \brief As a data type (a type value or its name). */
  operator DLDataType() const {
    if (type_code_ == kTVMStr) return String2DLDataType(value_.v_str);
    if (type_code_ != kTVMDataType) Mismatch("DLDataType");
    return value_.v_type;
  }
  /*! \brief As a data type (a type value or its name). */
  operator DataType() const { return DataType(operator DLDataType()); }
  /*! \brief As a std::string (str, bytes or String values). */
  operator std::string() const {
    switch (type_code_) {
      case kTVMStr:
        return std::string(value_.v_str);
      case kTVMBytes: {
        const TVMByteArray* b = static_cast<const TVMByteArray*>(value_.v_handle);
        return std::string(b->data, b->size);
      }
      case kTVMObjectHandle:
        if (value_.v_handle != nullptr &&
            detail::IsInstance(value_.v_handle, StringObj::_type_key)) {
          const StringObj* s = static_cast<const StringObj*>(value_.v_handle);
          return std::string(s->data(), static_cast<size_t>(s->size()));
        }
        break;
      default:
        break;
    }
    Mismatch("str");
  }
  /*! \brief As an object reference of type T (checked); adds a reference. */
  template <typename T, typename std::enable_if<detail::kIsObjectRef<T>, int>::type = 0>
  operator T() const {
    return AsObjectRef<T>();
  }
  /*! \brief As a typed function. */
  template <typename F>
  operator TypedPackedFunc<F>() const;

  /*! \brief As an object reference of type T (checked); adds a reference. */
  template <typename T>
  T AsObjectRef() const {
    using C = typename T::ContainerType;
    void* h = nullptr;
    switch (type_code_) {
      case kTVMNullptr:
        break;
      case kTVMObjectHandle:
      case kTVMModuleHandle:
      case kTVMPackedFuncHandle:
        h = value_.v_handle;
        break;
      case kTVMNDArrayHandle:
        h = detail::NDArrayToObject(value_.v_handle);
        break;
      case kTVMObjectRValueRefArg:
        h = *static_cast<void**>(value_.v_handle);
        break;
      case kTVMStr:
      case kTVMBytes:
        if (std::is_same<C, StringObj>::value || std::is_same<C, Object>::value) {
          return Downcast<T>(ObjectRef(String(operator std::string())));
        }
        Mismatch(C::_type_key);
      default:
        Mismatch(C::_type_key);
    }
    return Downcast<T>(ObjectRef::FromBorrowedHandle(h));
  }

 protected:
  TVMPODValue_() { value_.v_int64 = 0; }
  TVMPODValue_(TVMValue value, int type_code) : value_(value), type_code_(type_code) {}

  [[noreturn]] void Mismatch(const char* expected) const {
    throw Error(std::string("expected ") + expected + " but got " +
                detail::ArgTypeCode2Str(type_code_));
  }

  TVMValue value_;
  int type_code_ = kTVMNullptr;
};

/*! \brief One argument of a packed call (borrowed: valid during the call). */
class TVMArgValue : public TVMPODValue_ {
 public:
  TVMArgValue() = default;
  TVMArgValue(TVMValue value, int type_code) : TVMPODValue_(value, type_code) {}
};

/*! \brief The arguments of a packed call (borrowed: valid during the call). */
class TVMArgs {
 public:
  const TVMValue* values;
  const int* type_codes;
  int num_args;
  TVMArgs(const TVMValue* values, const int* type_codes, int num_args)
      : values(values), type_codes(type_codes), num_args(num_args) {}
  /*! \brief The number of arguments. */
  int size() const { return num_args; }
  /*! \brief Argument `i`; throws tvm::Error when there are not that many. */
  TVMArgValue operator[](int i) const {
    if (i < 0 || i >= num_args) {
      throw Error("not enough arguments: asked for argument " + std::to_string(i) + " of " +
                  std::to_string(num_args));
    }
    return TVMArgValue(values[i], type_codes[i]);
  }
};

/*! \brief A value owned by C++: a function's result, or what a C++ function returns. */
class TVMRetValue : public TVMPODValue_ {
 public:
  TVMRetValue() = default;
  TVMRetValue(const TVMRetValue& other) : TVMPODValue_() { Assign(other); }
  TVMRetValue(TVMRetValue&& other) noexcept : TVMPODValue_() { MoveFrom(std::move(other)); }
  ~TVMRetValue() { Clear(); }
  template <typename T, typename = typename std::enable_if<!std::is_same<
                            typename std::decay<T>::type, TVMRetValue>::value>::type>
  TVMRetValue(T&& value) : TVMPODValue_() {  // NOLINT(runtime/explicit)
    *this = std::forward<T>(value);
  }

  /*! \brief Takes over a value a C call returned (its reference, its string). */
  static TVMRetValue FromCReturn(TVMValue value, int type_code) {
    TVMRetValue rv;
    switch (type_code) {
      case kTVMStr:
        rv.SetString(value.v_str, std::strlen(value.v_str), kTVMStr);
        break;
      case kTVMBytes: {
        const TVMByteArray* b = static_cast<const TVMByteArray*>(value.v_handle);
        rv.SetString(b->data, b->size, kTVMBytes);
        break;
      }
      default:
        rv.value_ = value;
        rv.type_code_ = type_code;
        break;
    }
    return rv;
  }

  TVMRetValue& operator=(const TVMRetValue& other) {
    if (this != &other) {
      Clear();
      Assign(other);
    }
    return *this;
  }
  TVMRetValue& operator=(TVMRetValue&& other) noexcept {
    if (this != &other) {
      Clear();
      MoveFrom(std::move(other));
    }
    return *this;
  }
  TVMRetValue& operator=(const TVMArgValue& other) {
    TVMRetValue copy;
    copy.value_ = other.value();
    copy.type_code_ = other.type_code();
    // Borrowed: take a reference / a copy of what it points to.
    switch (other.type_code()) {
      case kTVMStr:
      case kTVMBytes:
        return *this = std::string(other);
      case kTVMObjectHandle:
      case kTVMModuleHandle:
      case kTVMPackedFuncHandle:
        TVMObjectRetain(other.value().v_handle);
        break;
      case kTVMNDArrayHandle:
        TVMObjectRetain(detail::NDArrayToObject(other.value().v_handle));
        break;
      case kTVMObjectRValueRefArg:
        return *this = other.AsObjectRef<ObjectRef>();
      default:
        break;
    }
    return *this = std::move(copy);
  }
  TVMRetValue& operator=(std::nullptr_t) {
    Clear();
    return *this;
  }
  template <typename T, typename std::enable_if<detail::kIsInt<T>, int>::type = 0>
  TVMRetValue& operator=(T v) {
    Clear();
    type_code_ = kDLInt;
    value_.v_int64 = static_cast<int64_t>(v);
    return *this;
  }
  TVMRetValue& operator=(bool v) {
    Clear();
    type_code_ = kDLInt;
    value_.v_int64 = v ? 1 : 0;
    return *this;
  }
  template <typename T,
            typename std::enable_if<std::is_floating_point<T>::value, int>::type = 0>
  TVMRetValue& operator=(T v) {
    Clear();
    type_code_ = kDLFloat;
    value_.v_float64 = static_cast<double>(v);
    return *this;
  }
  TVMRetValue& operator=(void* v) {
    Clear();
    type_code_ = v == nullptr ? kTVMNullptr : kTVMOpaqueHandle;
    value_.v_handle = v;
    return *this;
  }
  TVMRetValue& operator=(DLDevice v) {
    Clear();
    type_code_ = kDLDevice;
    value_.v_device = v;
    return *this;
  }
  TVMRetValue& operator=(DLDataType v) {
    Clear();
    type_code_ = kTVMDataType;
    value_.v_type = v;
    return *this;
  }
  TVMRetValue& operator=(const DataType& v) { return *this = DLDataType(v); }
  TVMRetValue& operator=(const std::string& v) {
    Clear();
    SetString(v.data(), v.size(), kTVMStr);
    return *this;
  }
  TVMRetValue& operator=(const char* v) { return *this = std::string(v); }
  TVMRetValue& operator=(const String& v) { return *this = std::string(v); }
  TVMRetValue& operator=(const TVMByteArray& v) {
    Clear();
    SetString(v.data, v.size, kTVMBytes);
    return *this;
  }
  template <typename T, typename std::enable_if<detail::kIsObjectRef<T> &&
                                                    !std::is_same<T, String>::value,
                                                int>::type = 0>
  TVMRetValue& operator=(T ref) {
    Clear();
    void* h = ref.release();
    if (h == nullptr) return *this;
    constexpr int static_code = T::ContainerType::_arg_type_code;
    type_code_ = static_code >= 0 ? static_code : detail::ObjectArgCode(h);
    value_.v_handle = type_code_ == kTVMNDArrayHandle ? detail::ObjectToNDArray(h) : h;
    return *this;
  }
  template <typename F>
  TVMRetValue& operator=(const TypedPackedFunc<F>& f);

  /*! \brief The value as call arguments see it (borrowed from this TVMRetValue). */
  void AsArg(TVMValue* value, int* type_code) const {
    *value = value_;
    *type_code = type_code_;
  }
  /*! \brief Hands the value and its ownership to C (strings are not supported). */
  void MoveToCHost(TVMValue* ret_value, int* ret_type_code) {
    if (type_code_ == kTVMStr || type_code_ == kTVMBytes) {
      throw Error("TVMRetValue::MoveToCHost cannot hand over a string");
    }
    *ret_value = value_;
    *ret_type_code = type_code_;
    type_code_ = kTVMNullptr;
  }

 private:
  void SetString(const char* data, size_t size, int code) {
    str_.assign(data, size);
    type_code_ = code;
    Sync();
  }
  // Points the value at this object's own string storage.
  void Sync() {
    if (type_code_ == kTVMStr) {
      value_.v_str = str_.c_str();
    } else if (type_code_ == kTVMBytes) {
      bytes_.data = str_.data();
      bytes_.size = str_.size();
      value_.v_handle = &bytes_;
    }
  }
  void Assign(const TVMRetValue& other) {
    value_ = other.value_;
    type_code_ = other.type_code_;
    str_ = other.str_;
    Sync();
    Retain();
  }
  void MoveFrom(TVMRetValue&& other) {
    value_ = other.value_;
    type_code_ = other.type_code_;
    str_ = std::move(other.str_);
    other.type_code_ = kTVMNullptr;
    Sync();
  }
  void* ObjectHandle() const {
    switch (type_code_) {
      case kTVMObjectHandle:
      case kTVMModuleHandle:
      case kTVMPackedFuncHandle:
        return value_.v_handle;
      case kTVMNDArrayHandle:
        return detail::NDArrayToObject(value_.v_handle);
      default:
        return nullptr;
    }
  }
  void Retain() {
    if (void* h = ObjectHandle()) TVMObjectRetain(h);
  }
  void Clear() {
    if (void* h = ObjectHandle()) TVMObjectFree(h);
    type_code_ = kTVMNullptr;
    value_.v_int64 = 0;
    str_.clear();
  }

  std::string str_;
  TVMByteArray bytes_{nullptr, 0};
};

namespace detail {

/*! \brief Converts a packed value to `T`. */
template <typename T>
inline T ValueAs(const TVMPODValue_& v) {
  using U = typename std::decay<T>::type;
  if constexpr (std::is_same<U, TVMArgValue>::value) {
    return TVMArgValue(v.value(), v.type_code());
  } else if constexpr (std::is_same<U, TVMRetValue>::value) {
    TVMRetValue rv;
    rv = TVMArgValue(v.value(), v.type_code());
    return rv;
  } else if constexpr (std::is_same<U, bool>::value) {
    return v.operator bool();
  } else if constexpr (std::is_same<U, int>::value) {
    return v.operator int();
  } else if constexpr (std::is_integral<U>::value || std::is_enum<U>::value) {
    return static_cast<U>(v.operator int64_t());
  } else if constexpr (std::is_floating_point<U>::value) {
    return static_cast<U>(v.operator double());
  } else if constexpr (kIsObjectRef<U>) {
    return v.template AsObjectRef<U>();
  } else if constexpr (IsTypedPackedFunc<U>::value) {
    return U(TVMArgValue(v.value(), v.type_code()));
  } else {
    return v.operator U();
  }
}

/*! \brief Packs call arguments into values and type codes. */
class ArgPacker {
 public:
  ArgPacker(TVMValue* values, int* codes) : values_(values), codes_(codes) {}

  template <typename T, typename std::enable_if<kIsInt<T>, int>::type = 0>
  void operator()(size_t i, T v) const {
    values_[i].v_int64 = static_cast<int64_t>(v);
    codes_[i] = kDLInt;
  }
  void operator()(size_t i, bool v) const {
    values_[i].v_int64 = v ? 1 : 0;
    codes_[i] = kDLInt;
  }
  template <typename T,
            typename std::enable_if<std::is_floating_point<T>::value, int>::type = 0>
  void operator()(size_t i, T v) const {
    values_[i].v_float64 = static_cast<double>(v);
    codes_[i] = kDLFloat;
  }
  void operator()(size_t i, std::nullptr_t) const {
    values_[i].v_handle = nullptr;
    codes_[i] = kTVMNullptr;
  }
  void operator()(size_t i, void* v) const {
    values_[i].v_handle = v;
    codes_[i] = v == nullptr ? kTVMNullptr : kTVMOpaqueHandle;
  }
  void operator()(size_t i, DLTensor* v) const {
    values_[i].v_handle = v;
    codes_[i] = v == nullptr ? kTVMNullptr : kTVMDLTensorHandle;
  }
  void operator()(size_t i, const DLTensor* v) const { (*this)(i, const_cast<DLTensor*>(v)); }
  void operator()(size_t i, const char* v) const {
    values_[i].v_str = v;
    codes_[i] = kTVMStr;
  }
  void operator()(size_t i, const std::string& v) const { (*this)(i, v.c_str()); }
  void operator()(size_t i, const String& v) const { (*this)(i, v.c_str()); }
  void operator()(size_t i, const TVMByteArray& v) const {
    values_[i].v_handle = const_cast<TVMByteArray*>(&v);
    codes_[i] = kTVMBytes;
  }
  void operator()(size_t i, DLDevice v) const {
    values_[i].v_device = v;
    codes_[i] = kDLDevice;
  }
  void operator()(size_t i, DLDataType v) const {
    values_[i].v_type = v;
    codes_[i] = kTVMDataType;
  }
  void operator()(size_t i, const DataType& v) const { (*this)(i, DLDataType(v)); }
  void operator()(size_t i, const TVMArgValue& v) const {
    values_[i] = v.value();
    codes_[i] = v.type_code();
  }
  void operator()(size_t i, const TVMRetValue& v) const { v.AsArg(&values_[i], &codes_[i]); }
  template <typename T, typename std::enable_if<kIsObjectRef<T> && !std::is_same<T, String>::value,
                                                int>::type = 0>
  void operator()(size_t i, const T& v) const {
    PackObjectArg(v, &values_[i], &codes_[i]);
  }
  template <typename F>
  void operator()(size_t i, const TypedPackedFunc<F>& f) const {
    (*this)(i, f.packed());
  }

 private:
  TVMValue* values_;
  int* codes_;
};

/*! \brief The C function every C++-defined PackedFunc runs through. */
inline int CppFuncTrampoline(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                             void* resource_handle) {
  try {
    auto* f = static_cast<std::function<void(TVMArgs, TVMRetValue*)>*>(resource_handle);
    TVMRetValue rv;
    (*f)(TVMArgs(args, type_codes, num_args), &rv);
    if (rv.type_code() != kTVMNullptr) {
      TVMValue v;
      int code;
      rv.AsArg(&v, &code);
      // The runtime copies strings and adds its own reference to objects.
      if (TVMCFuncSetReturn(ret, &v, &code, 1) != 0) return -1;
    }
    return 0;
  } catch (const std::exception& e) {
    TVMAPISetLastError(e.what());
    return -1;
  } catch (...) {
    TVMAPISetLastError("unknown C++ exception in a PackedFunc");
    return -1;
  }
}

/*! \brief Deletes a C++ PackedFunc's callable when the runtime drops the function. */
inline void CppFuncFinalizer(void* resource_handle) {
  delete static_cast<std::function<void(TVMArgs, TVMRetValue*)>*>(resource_handle);
}

}  // namespace detail

/*! \brief A counted reference to a runtime function (nullable). */
class PackedFunc : public ObjectRef {
 public:
  using ContainerType = PackedFuncObj;
  /*! \brief The C++ signature of a packed function body. */
  using FType = std::function<void(TVMArgs args, TVMRetValue* rv)>;

  PackedFunc() = default;
  PackedFunc(std::nullptr_t) {}  // NOLINT(runtime/explicit)
  TVMRT_OBJECT_REF_CTOR(PackedFunc, ObjectRef)
  /*! \brief A runtime function that runs `body` (callable as body(TVMArgs, TVMRetValue*)). */
  template <typename TCallable,
            typename = typename std::enable_if<
                std::is_convertible<TCallable, FType>::value &&
                !std::is_base_of<ObjectRef, typename std::decay<TCallable>::type>::value>::type>
  explicit PackedFunc(TCallable body) {
    auto* resource = new FType(std::move(body));
    TVMFunctionHandle h = nullptr;
    int rc = TVMFuncCreateFromCFunc(detail::CppFuncTrampoline, resource,
                                    detail::CppFuncFinalizer, &h);
    if (rc != 0) {
      delete resource;
      detail::ThrowLastError(rc, "TVMFuncCreateFromCFunc");
    }
    data_ = h;
  }

  /*! \brief Takes over the reference a function handle carries. */
  static PackedFunc FromOwnedHandle(TVMFunctionHandle handle) {
    return PackedFunc(detail::UncheckedTag(), ObjectRef::FromOwnedHandle(handle));
  }

  /*! \brief Calls the function; throws tvm::Error with the runtime's message on failure. */
  template <typename... Args>
  TVMRetValue operator()(Args&&... args) const {
    constexpr size_t n = sizeof...(Args);
    TVMValue values[n > 0 ? n : 1];
    int codes[n > 0 ? n : 1];
    Pack(detail::ArgPacker(values, codes), std::index_sequence_for<Args...>(),
         std::forward<Args>(args)...);
    return Call(values, codes, static_cast<int>(n));
  }
  /*! \brief Calls the function with already packed arguments. */
  void CallPacked(TVMArgs args, TVMRetValue* rv) const {
    *rv = Call(const_cast<TVMValue*>(args.values), const_cast<int*>(args.type_codes),
               args.num_args);
  }

 private:
  template <size_t... I, typename... Args>
  static void Pack(const detail::ArgPacker& p, std::index_sequence<I...>, Args&&... args) {
    (p(I, std::forward<Args>(args)), ...);
  }
  TVMRetValue Call(TVMValue* values, int* codes, int n) const {
    if (data_ == nullptr) throw Error("call of a null PackedFunc");
    TVMValue ret;
    ret.v_int64 = 0;
    int ret_code = kTVMNullptr;
    detail::ThrowLastError(TVMFuncCall(data_, values, codes, n, &ret, &ret_code), "TVMFuncCall");
    return TVMRetValue::FromCReturn(ret, ret_code);
  }
};

namespace detail {

template <typename T>
struct function_signature : function_signature<decltype(&T::operator())> {};
template <typename C, typename R, typename... Args>
struct function_signature<R (C::*)(Args...) const> {
  using FType = R(Args...);
};
template <typename C, typename R, typename... Args>
struct function_signature<R (C::*)(Args...)> {
  using FType = R(Args...);
};
template <typename R, typename... Args>
struct function_signature<R (*)(Args...)> {
  using FType = R(Args...);
};
template <typename R, typename... Args>
struct function_signature<R(Args...)> {
  using FType = R(Args...);
};

/*! \brief Converts argument `i` for a typed function named `name`, naming both on failure. */
template <typename T>
inline T TypedArg(const TVMArgs& args, int i, const std::string& name) {
  try {
    return ValueAs<T>(args[i]);
  } catch (const Error& e) {
    throw Error("In function " + name + ": error while converting argument " +
                std::to_string(i) + ": " + e.what());
  }
}

template <typename R, typename... Args, typename F, size_t... I>
inline void CallTyped(const F& f, const std::string& name, const TVMArgs& args,
                      TVMRetValue* rv, std::index_sequence<I...>) {
  if (args.size() != static_cast<int>(sizeof...(Args))) {
    throw Error("Function " + name + " expects " + std::to_string(sizeof...(Args)) +
                " arguments but " + std::to_string(args.size()) + " were given");
  }
  if constexpr (std::is_void<R>::value) {
    f(TypedArg<typename std::decay<Args>::type>(args, static_cast<int>(I), name)...);
  } else {
    *rv = f(TypedArg<typename std::decay<Args>::type>(args, static_cast<int>(I), name)...);
  }
}

}  // namespace detail

/*! \brief A PackedFunc with a C++ signature. */
template <typename R, typename... Args>
class TypedPackedFunc<R(Args...)> {
 public:
  using TSelf = TypedPackedFunc<R(Args...)>;

  TypedPackedFunc() = default;
  TypedPackedFunc(std::nullptr_t) {}                          // NOLINT(runtime/explicit)
  TypedPackedFunc(PackedFunc packed) : packed_(std::move(packed)) {}  // NOLINT
  TypedPackedFunc(const TVMRetValue& v) : packed_(v.AsObjectRef<PackedFunc>()) {}  // NOLINT
  TypedPackedFunc(const TVMArgValue& v) : packed_(v.AsObjectRef<PackedFunc>()) {}  // NOLINT
  /*! \brief Wraps a C++ callable (lambda, function) as a runtime function. */
  template <typename F,
            typename = typename std::enable_if<
                std::is_convertible<F, std::function<R(Args...)>>::value &&
                !std::is_base_of<ObjectRef, typename std::decay<F>::type>::value &&
                !detail::IsTypedPackedFunc<typename std::decay<F>::type>::value>::type>
  TypedPackedFunc(const F& f) : TypedPackedFunc(f, "<anonymous>") {}  // NOLINT
  /*! \brief As above; `name` appears in argument errors. */
  template <typename F>
  TypedPackedFunc(const F& f, std::string name) {
    packed_ = PackedFunc([f, name](TVMArgs args, TVMRetValue* rv) {
      detail::CallTyped<R, Args...>(f, name, args, rv, std::index_sequence_for<Args...>());
    });
  }

  /*! \brief Calls the function and converts its result. */
  R operator()(Args... args) const {
    if constexpr (std::is_void<R>::value) {
      packed_(std::forward<Args>(args)...);
    } else {
      TVMRetValue rv = packed_(std::forward<Args>(args)...);
      return detail::ValueAs<R>(rv);
    }
  }
  /*! \brief The underlying PackedFunc. */
  const PackedFunc& packed() const { return packed_; }
  operator PackedFunc() const { return packed_; }
  bool operator==(std::nullptr_t) const { return packed_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return packed_ != nullptr; }

 private:
  PackedFunc packed_;
};

template <typename F>
inline TVMPODValue_::operator TypedPackedFunc<F>() const {
  return TypedPackedFunc<F>(AsObjectRef<PackedFunc>());
}

template <typename F>
inline TVMRetValue& TVMRetValue::operator=(const TypedPackedFunc<F>& f) {
  return *this = f.packed();
}

}  // namespace runtime

using runtime::PackedFunc;
using runtime::TVMArgs;
using runtime::TVMArgValue;
using runtime::TVMRetValue;
using runtime::TypedPackedFunc;

}  // namespace tvm

#endif  // TVM_RUNTIME_PACKED_FUNC_H_

/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * String: the runtime's immutable string object (runtime.String), read in place.
 */
#ifndef TVM_RUNTIME_CONTAINER_STRING_H_
#define TVM_RUNTIME_CONTAINER_STRING_H_

#include <tvm/runtime/object.h>

#include <cstring>
#include <functional>
#include <ostream>
#include <string>

namespace tvm {
namespace runtime {

/*! \brief The payload of a String object: a data pointer and a size after the header. */
class StringObj : public Object {
 public:
  static constexpr const char* _type_key = "runtime.String";
  static constexpr int _arg_type_code = kTVMObjectHandle;
  /*! \brief The bytes (NUL-terminated). */
  const char* data() const { return Payload().data; }
  /*! \brief The length in bytes. */
  uint64_t size() const { return Payload().size; }

 private:
  struct Layout {
    const char* data;
    uint64_t size;
  };
  const Layout& Payload() const {
    return *reinterpret_cast<const Layout*>(reinterpret_cast<const char*>(this) +
                                            detail::kObjectHeaderBytes);
  }
};

/*! \brief A reference to an immutable string object; never null once constructed. */
class String : public ObjectRef {
 public:
  using ContainerType = StringObj;
  static constexpr bool _type_is_nullable = false;
  TVMRT_OBJECT_REF_CTOR(String, ObjectRef)

  /*! \brief The empty string. */
  String() : String("", 0) {}
  String(const char* s) : String(s, std::strlen(s)) {}  // NOLINT(runtime/explicit)
  String(const std::string& s) : String(s.data(), s.size()) {}  // NOLINT(runtime/explicit)
  /*! \brief From `size` bytes at `data` (may hold NULs). */
  String(const char* data, size_t size) {
    TVMByteArray bytes{data, size};
    TVMValue v;
    v.v_handle = &bytes;
    int code = kTVMBytes;
    ObjectRef r = detail::CallGlobalForObject("runtime.String", &v, &code, 1);
    detail::CheckObjectType<String>(r);
    data_ = r.release();
  }

  /*! \brief The bytes (NUL-terminated). */
  const char* c_str() const { return get()->data(); }
  /*! \brief The bytes. */
  const char* data() const { return get()->data(); }
  /*! \brief The length in bytes. */
  size_t size() const { return static_cast<size_t>(get()->size()); }
  /*! \brief The length in bytes. */
  size_t length() const { return size(); }
  /*! \brief Whether it is empty. */
  bool empty() const { return size() == 0; }
  /*! \brief The byte at `i` (unchecked). */
  char at(size_t i) const {
    if (i >= size()) throw Error("String index " + std::to_string(i) + " out of range");
    return data()[i];
  }
  /*! \brief Compares bytewise: <0, 0 or >0. */
  int compare(const String& other) const { return std::string(*this).compare(std::string(other)); }
  int compare(const std::string& other) const { return std::string(*this).compare(other); }
  int compare(const char* other) const { return std::string(*this).compare(other); }
  /*! \brief The string object. */
  const StringObj* get() const { return static_cast<const StringObj*>(checked_handle()); }
  /*! \brief A std::string copy. */
  operator std::string() const { return std::string(data(), size()); }

  /*! \brief Whether the value can be a String. */
  static bool CanConvertFrom(int code) { return code == kTVMStr || code == kTVMBytes; }
};

inline bool operator==(const String& a, const String& b) { return a.compare(b) == 0; }
inline bool operator!=(const String& a, const String& b) { return a.compare(b) != 0; }
inline bool operator<(const String& a, const String& b) { return a.compare(b) < 0; }
inline bool operator==(const String& a, const std::string& b) { return a.compare(b) == 0; }
inline bool operator==(const std::string& a, const String& b) { return b.compare(a) == 0; }
inline bool operator!=(const String& a, const std::string& b) { return a.compare(b) != 0; }
inline bool operator!=(const std::string& a, const String& b) { return b.compare(a) != 0; }
inline bool operator==(const String& a, const char* b) { return a.compare(b) == 0; }
inline bool operator==(const char* a, const String& b) { return b.compare(a) == 0; }
inline bool operator!=(const String& a, const char* b) { return a.compare(b) != 0; }
inline bool operator!=(const char* a, const String& b) { return b.compare(a) != 0; }
inline std::string operator+(const String& a, const std::string& b) { return std::string(a) + b; }
inline std::string operator+(const std::string& a, const String& b) { return a + std::string(b); }
inline std::string operator+(const String& a, const char* b) { return std::string(a) + b; }
inline std::string operator+(const char* a, const String& b) { return a + std::string(b); }

inline std::ostream& operator<<(std::ostream& os, const String& s) {
  return os.write(s.data(), static_cast<std::streamsize>(s.size()));
}

}  // namespace runtime

using runtime::String;

}  // namespace tvm

namespace std {
template <>
struct hash<::tvm::runtime::String> {
  size_t operator()(const ::tvm::runtime::String& s) const {
    return std::hash<std::string>()(std::string(s));
  }
};
}  // namespace std

#endif  // TVM_RUNTIME_CONTAINER_STRING_H_

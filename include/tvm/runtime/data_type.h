/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * DataType: a value type over DLDataType, with its string form ("float32", "int8x4", ...).
 */
#ifndef TVM_RUNTIME_DATA_TYPE_H_
#define TVM_RUNTIME_DATA_TYPE_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/logging.h>

#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>

namespace tvm {
namespace runtime {

/*! \brief A scalar or vector element type (DLDataType with helpers). */
class DataType {
 public:
  /*! \brief The type codes (DLPack's, plus TVM's handle). */
  enum TypeCode {
    kInt = kDLInt,
    kUInt = kDLUInt,
    kFloat = kDLFloat,
    kHandle = TVMArgTypeCode::kTVMOpaqueHandle,
    kBFloat = kDLBfloat,
    kCustomBegin = 129
  };
  /*! \brief The void type (handle, 0 bits). */
  DataType() : data_{static_cast<uint8_t>(kHandle), 0, 0} {}
  /*! \brief From DLPack's type. */
  explicit DataType(DLDataType dtype) : data_(dtype) {}
  /*! \brief From code, bits and lanes. */
  DataType(int code, int bits, int lanes) {
    data_.code = static_cast<uint8_t>(code);
    data_.bits = static_cast<uint8_t>(bits);
    data_.lanes = static_cast<uint16_t>(lanes);
  }
  /*! \brief The type code. */
  int code() const { return static_cast<int>(data_.code); }
  /*! \brief Bits per lane. */
  int bits() const { return static_cast<int>(data_.bits); }
  /*! \brief Number of lanes. */
  int lanes() const { return static_cast<int>(data_.lanes); }
  /*! \brief Bytes of one element (all lanes), rounded up. */
  int bytes() const { return (bits() * lanes() + 7) / 8; }
  /*! \brief One lane. */
  bool is_scalar() const { return lanes() == 1; }
  /*! \brief A 1-bit unsigned integer. */
  bool is_bool() const { return code() == kUInt && bits() == 1; }
  /*! \brief A float type. */
  bool is_float() const { return code() == kFloat; }
  /*! \brief A 16-bit float. */
  bool is_float16() const { return is_float() && bits() == 16; }
  /*! \brief A bfloat type. */
  bool is_bfloat16() const { return code() == kBFloat && bits() == 16; }
  /*! \brief A signed integer type. */
  bool is_int() const { return code() == kInt; }
  /*! \brief An unsigned integer type. */
  bool is_uint() const { return code() == kUInt; }
  /*! \brief An opaque handle (non-void). */
  bool is_handle() const { return code() == kHandle && !is_void(); }
  /*! \brief The void type. */
  bool is_void() const { return code() == kHandle && bits() == 0 && lanes() == 0; }
  /*! \brief More than one lane. */
  bool is_vector() const { return lanes() > 1; }
  /*! \brief The same type with `lanes` lanes. */
  DataType with_lanes(int lanes) const { return DataType(code(), bits(), lanes); }
  /*! \brief The same type with `bits` bits. */
  DataType with_bits(int bits) const { return DataType(code(), bits, lanes()); }
  /*! \brief One lane of this type. */
  DataType element_of() const { return with_lanes(1); }
  bool operator==(const DataType& other) const {
    return data_.code == other.data_.code && data_.bits == other.data_.bits &&
           data_.lanes == other.data_.lanes;
  }
  bool operator!=(const DataType& other) const { return !operator==(other); }
  /*! \brief DLPack's type. */
  operator DLDataType() const { return data_; }

  static DataType Int(int bits, int lanes = 1) { return DataType(kInt, bits, lanes); }
  static DataType UInt(int bits, int lanes = 1) { return DataType(kUInt, bits, lanes); }
  static DataType Float(int bits, int lanes = 1) { return DataType(kFloat, bits, lanes); }
  static DataType BFloat(int bits, int lanes = 1) { return DataType(kBFloat, bits, lanes); }
  static DataType Bool(int lanes = 1) { return DataType::UInt(1, lanes); }
  static DataType Handle(int bits = 64, int lanes = 1) { return DataType(kHandle, bits, lanes); }
  static DataType Void() { return DataType(kHandle, 0, 0); }

 private:
  DLDataType data_;
};

/*! \brief The name of a type code ("int", "uint", "float", "handle", "bfloat"). */
inline const char* DLDataTypeCode2Str(DLDataTypeCode code) {
  switch (static_cast<int>(code)) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case DataType::kHandle:
      return "handle";
    case kDLBfloat:
      return "bfloat";
    default:
      throw Error("unknown type code " + std::to_string(static_cast<int>(code)));
  }
}

/*! \brief The string form of a type ("float32", "int8x4", "bool", "void"). */
inline std::string DLDataType2String(DLDataType t) {
  if (t.bits == 1 && t.lanes == 1 && t.code == kDLUInt) return "bool";
  if (t.code == DataType::kHandle && t.bits == 0 && t.lanes == 0) return "void";
  std::string s = DLDataTypeCode2Str(static_cast<DLDataTypeCode>(t.code));
  if (t.code == DataType::kHandle) return s;
  s += std::to_string(static_cast<int>(t.bits));
  if (t.lanes != 1) s += "x" + std::to_string(static_cast<int>(t.lanes));
  return s;
}

/*! \brief Parses a type name; throws tvm::Error on an unknown one. */
inline DLDataType String2DLDataType(const std::string& s) {
  DLDataType t;
  t.bits = 32;
  t.lanes = 1;
  if (s.empty() || s == "void") {
    t.code = DataType::kHandle;
    t.bits = 0;
    t.lanes = 0;
    return t;
  }
  if (s == "bool") {
    t.code = kDLUInt;
    t.bits = 1;
    return t;
  }
  const char* p = s.c_str();
  struct Prefix {
    const char* name;
    int code;
    int bits;
  };
  static const Prefix prefixes[] = {{"int", kDLInt, 32},          {"uint", kDLUInt, 32},
                                    {"float", kDLFloat, 32},      {"bfloat", kDLBfloat, 16},
                                    {"handle", DataType::kHandle, 64}};
  bool found = false;
  for (const Prefix& pre : prefixes) {
    size_t n = std::strlen(pre.name);
    if (s.compare(0, n, pre.name) == 0) {
      t.code = static_cast<uint8_t>(pre.code);
      t.bits = static_cast<uint8_t>(pre.bits);
      p += n;
      found = true;
      break;
    }
  }
  if (!found) throw Error("unknown data type '" + s + "'");
  char* end = nullptr;
  if (*p >= '0' && *p <= '9') {
    t.bits = static_cast<uint8_t>(std::strtoul(p, &end, 10));
    p = end;
  }
  if (*p == 'x') {
    t.lanes = static_cast<uint16_t>(std::strtoul(p + 1, &end, 10));
    p = end;
  }
  if (*p != '\0') throw Error("unknown data type '" + s + "'");
  return t;
}

inline std::ostream& operator<<(std::ostream& os, DLDataType t) {
  return os << DLDataType2String(t);
}

inline std::ostream& operator<<(std::ostream& os, const DataType& t) {
  return os << DLDataType2String(t);
}

}  // namespace runtime

using DataType = runtime::DataType;

}  // namespace tvm

#endif  // TVM_RUNTIME_DATA_TYPE_H_

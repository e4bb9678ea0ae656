/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * ShapeTuple: the runtime's immutable tuple of int64 dimensions (runtime.ShapeTuple), read in
 * place.
 */
#ifndef TVM_RUNTIME_CONTAINER_SHAPE_TUPLE_H_
#define TVM_RUNTIME_CONTAINER_SHAPE_TUPLE_H_

#include <tvm/runtime/object.h>

#include <initializer_list>
#include <ostream>
#include <vector>

namespace tvm {
namespace runtime {

/*! \brief The payload of a ShapeTuple object: a data pointer and a size after the header. */
class ShapeTupleObj : public Object {
 public:
  static constexpr const char* _type_key = "runtime.ShapeTuple";
  static constexpr int _arg_type_code = kTVMObjectHandle;
  /*! \brief The dimensions. */
  const int64_t* data() const { return Payload().data; }
  /*! \brief The number of dimensions. */
  uint64_t size() const { return Payload().size; }

 private:
  struct Layout {
    const int64_t* data;
    uint64_t size;
  };
  const Layout& Payload() const {
    return *reinterpret_cast<const Layout*>(reinterpret_cast<const char*>(this) +
                                            detail::kObjectHeaderBytes);
  }
};

/*! \brief A reference to an immutable shape; never null once constructed. */
class ShapeTuple : public ObjectRef {
 public:
  using ContainerType = ShapeTupleObj;
  using index_type = int64_t;
  static constexpr bool _type_is_nullable = false;
  TVMRT_OBJECT_REF_CTOR(ShapeTuple, ObjectRef)

  /*! \brief The empty shape (rank 0). */
  ShapeTuple() : ShapeTuple(std::vector<int64_t>()) {}
  ShapeTuple(std::initializer_list<int64_t> dims)  // NOLINT(runtime/explicit)
      : ShapeTuple(std::vector<int64_t>(dims)) {}
  ShapeTuple(const std::vector<int64_t>& dims) {  // NOLINT(runtime/explicit)
    std::vector<TVMValue> values(dims.size());
    std::vector<int> codes(dims.size(), kDLInt);
    for (size_t i = 0; i < dims.size(); ++i) values[i].v_int64 = dims[i];
    ObjectRef r = detail::CallGlobalForObject("runtime.ShapeTuple", values.data(), codes.data(),
                                              static_cast<int>(dims.size()));
    detail::CheckObjectType<ShapeTuple>(r);
    data_ = r.release();
  }
  /*! \brief From the range [begin, end). */
  template <typename It>
  ShapeTuple(It begin, It end) : ShapeTuple(std::vector<int64_t>(begin, end)) {}

  /*! \brief The shape object. */
  const ShapeTupleObj* get() const { return static_cast<const ShapeTupleObj*>(checked_handle()); }
  /*! \brief The dimensions. */
  const int64_t* data() const { return get()->data(); }
  /*! \brief The rank. */
  size_t size() const { return static_cast<size_t>(get()->size()); }
  /*! \brief Whether the rank is 0. */
  bool empty() const { return size() == 0; }
  /*! \brief Dimension `i` (unchecked). */
  int64_t operator[](size_t i) const { return data()[i]; }
  /*! \brief Dimension `i`; throws tvm::Error when out of range. */
  int64_t at(size_t i) const {
    if (i >= size()) {
      throw Error("ShapeTuple index " + std::to_string(i) + " out of range (size " +
                  std::to_string(size()) + ")");
    }
    return data()[i];
  }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size(); }
  int64_t front() const { return at(0); }
  int64_t back() const { return at(size() - 1); }
  /*! \brief The dimensions as a vector. */
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }
};

inline std::ostream& operator<<(std::ostream& os, const ShapeTuple& shape) {
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  return os << ']';
}

}  // namespace runtime

using runtime::ShapeTuple;

}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_SHAPE_TUPLE_H_

/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Array<T>: the runtime's array of objects (runtime.Array), read and built through the
 * runtime's global functions. Changing an array builds a new one (copy on write).
 */
#ifndef TVM_RUNTIME_CONTAINER_ARRAY_H_
#define TVM_RUNTIME_CONTAINER_ARRAY_H_

#include <tvm/runtime/object.h>

#include <initializer_list>
#include <iterator>
#include <vector>

namespace tvm {
namespace runtime {

/*! \brief The array object. */
class ArrayNode : public Object {
 public:
  static constexpr const char* _type_key = "Array";
  static constexpr int _arg_type_code = kTVMObjectHandle;
};

/*! \brief A reference to an array of `T` (an ObjectRef type); never null once constructed. */
template <typename T>
class Array : public ObjectRef {
  static_assert(std::is_base_of<ObjectRef, T>::value, "Array<T> needs an ObjectRef type T");

 public:
  using ContainerType = ArrayNode;
  using value_type = T;
  static constexpr bool _type_is_nullable = false;
  TVMRT_OBJECT_REF_CTOR(Array, ObjectRef)

  /*! \brief An iterator yielding elements by value. */
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = T;
    iterator(const Array* array, int64_t index) : array_(array), index_(index) {}
    T operator*() const { return (*array_)[static_cast<size_t>(index_)]; }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++index_;
      return old;
    }
    iterator& operator--() {
      --index_;
      return *this;
    }
    iterator operator+(difference_type n) const { return iterator(array_, index_ + n); }
    difference_type operator-(const iterator& o) const { return index_ - o.index_; }
    bool operator==(const iterator& o) const { return index_ == o.index_; }
    bool operator!=(const iterator& o) const { return index_ != o.index_; }

   private:
    const Array* array_;
    int64_t index_;
  };
  using const_iterator = iterator;

  /*! \brief An empty array. */
  Array() : Array(std::vector<T>()) {}
  Array(std::initializer_list<T> items) : Array(std::vector<T>(items)) {}  // NOLINT
  Array(const std::vector<T>& items) {  // NOLINT(runtime/explicit)
    std::vector<TVMValue> values(items.size());
    std::vector<int> codes(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      detail::PackObjectArg(items[i], &values[i], &codes[i]);
    }
    ObjectRef r = detail::CallGlobalForObject("runtime.Array", values.data(), codes.data(),
                                              static_cast<int>(items.size()));
    detail::CheckObjectType<Array>(r);
    data_ = r.release();
  }
  /*! \brief From the range [begin, end). */
  template <typename It>
  Array(It begin, It end) : Array(std::vector<T>(begin, end)) {}
  /*! \brief `n` copies of `value`. */
  Array(size_t n, const T& value) : Array(std::vector<T>(n, value)) {}

  /*! \brief The number of elements. */
  size_t size() const {
    TVMValue v;
    int code = kTVMObjectHandle;
    v.v_handle = checked_handle();
    return static_cast<size_t>(detail::CallGlobalForInt("runtime.ArraySize", &v, &code, 1));
  }
  /*! \brief Whether it has no elements. */
  bool empty() const { return size() == 0; }
  /*! \brief Element `i`; throws tvm::Error when out of range or not a `T`. */
  T operator[](size_t i) const {
    TVMValue v[2];
    int codes[2] = {kTVMObjectHandle, kDLInt};
    v[0].v_handle = checked_handle();
    v[1].v_int64 = static_cast<int64_t>(i);
    return Downcast<T>(detail::CallGlobalForObject("runtime.ArrayGetItem", v, codes, 2));
  }
  /*! \brief Element `i`. */
  T at(size_t i) const { return (*this)[i]; }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size() - 1]; }
  iterator begin() const { return iterator(this, 0); }
  iterator end() const { return iterator(this, static_cast<int64_t>(size())); }

  /*! \brief The elements as a vector. */
  std::vector<T> ToVector() const {
    std::vector<T> out;
    size_t n = size();
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back((*this)[i]);
    return out;
  }
  /*! \brief Appends an element (builds a new array). */
  void push_back(const T& item) {
    std::vector<T> items = ToVector();
    items.push_back(item);
    *this = Array(items);
  }
  /*! \brief Replaces element `i` (builds a new array). */
  void Set(size_t i, const T& item) {
    std::vector<T> items = ToVector();
    if (i >= items.size()) throw Error("Array index " + std::to_string(i) + " out of range");
    items[i] = item;
    *this = Array(items);
  }
  /*! \brief Removes the last element (builds a new array). */
  void pop_back() {
    std::vector<T> items = ToVector();
    if (items.empty()) throw Error("pop_back on an empty Array");
    items.pop_back();
    *this = Array(items);
  }
  /*! \brief Removes every element. */
  void clear() { *this = Array(); }
};

}  // namespace runtime

using runtime::Array;

}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_ARRAY_H_

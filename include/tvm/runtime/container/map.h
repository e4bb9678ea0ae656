/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Map<K, V>: the runtime's map of objects (runtime.Map), read and built through the runtime's
 * global functions. Changing a map builds a new one (copy on write).
 */
#ifndef TVM_RUNTIME_CONTAINER_MAP_H_
#define TVM_RUNTIME_CONTAINER_MAP_H_

#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/object.h>

#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

/*! \brief The map object. */
class MapNode : public Object {
 public:
  static constexpr const char* _type_key = "Map";
  static constexpr int _arg_type_code = kTVMObjectHandle;
};

/*! \brief A reference to a map from `K` to `V` (ObjectRef types); never null once built. */
template <typename K, typename V>
class Map : public ObjectRef {
  static_assert(std::is_base_of<ObjectRef, K>::value, "Map<K, V> needs an ObjectRef type K");
  static_assert(std::is_base_of<ObjectRef, V>::value, "Map<K, V> needs an ObjectRef type V");

 public:
  using ContainerType = MapNode;
  using key_type = K;
  using mapped_type = V;
  using value_type = std::pair<K, V>;
  static constexpr bool _type_is_nullable = false;
  TVMRT_OBJECT_REF_CTOR(Map, ObjectRef)

  /*! \brief An iterator over a snapshot of the entries. */
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::pair<K, V>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;
    iterator(std::shared_ptr<const std::vector<value_type>> items, size_t index)
        : items_(std::move(items)), index_(index) {}
    const value_type& operator*() const { return (*items_)[index_]; }
    const value_type* operator->() const { return &(*items_)[index_]; }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++index_;
      return old;
    }
    bool operator==(const iterator& o) const { return index_ == o.index_; }
    bool operator!=(const iterator& o) const { return index_ != o.index_; }

   private:
    std::shared_ptr<const std::vector<value_type>> items_;
    size_t index_;
  };
  using const_iterator = iterator;

  /*! \brief An empty map. */
  Map() : Map(std::vector<std::pair<K, V>>()) {}
  Map(std::initializer_list<std::pair<K, V>> items)  // NOLINT(runtime/explicit)
      : Map(std::vector<std::pair<K, V>>(items)) {}
  Map(const std::vector<std::pair<K, V>>& items) {  // NOLINT(runtime/explicit)
    std::vector<TVMValue> values(items.size() * 2);
    std::vector<int> codes(items.size() * 2);
    for (size_t i = 0; i < items.size(); ++i) {
      detail::PackObjectArg(items[i].first, &values[2 * i], &codes[2 * i]);
      detail::PackObjectArg(items[i].second, &values[2 * i + 1], &codes[2 * i + 1]);
    }
    ObjectRef r = detail::CallGlobalForObject("runtime.Map", values.data(), codes.data(),
                                              static_cast<int>(values.size()));
    detail::CheckObjectType<Map>(r);
    data_ = r.release();
  }
  template <typename Hash, typename Equal>
  Map(const std::unordered_map<K, V, Hash, Equal>& m)  // NOLINT(runtime/explicit)
      : Map(std::vector<std::pair<K, V>>(m.begin(), m.end())) {}

  /*! \brief The number of entries. */
  size_t size() const {
    TVMValue v;
    int code = kTVMObjectHandle;
    v.v_handle = checked_handle();
    return static_cast<size_t>(detail::CallGlobalForInt("runtime.MapSize", &v, &code, 1));
  }
  /*! \brief Whether it has no entries. */
  bool empty() const { return size() == 0; }
  /*! \brief 1 when `key` is present, else 0. */
  size_t count(const K& key) const {
    TVMValue v[2];
    int codes[2] = {kTVMObjectHandle, kTVMObjectHandle};
    v[0].v_handle = checked_handle();
    detail::PackObjectArg(key, &v[1], &codes[1]);
    return static_cast<size_t>(detail::CallGlobalForInt("runtime.MapCount", v, codes, 2));
  }
  /*! \brief The value of `key`; throws tvm::Error when absent. */
  V at(const K& key) const {
    TVMValue v[2];
    int codes[2] = {kTVMObjectHandle, kTVMObjectHandle};
    v[0].v_handle = checked_handle();
    detail::PackObjectArg(key, &v[1], &codes[1]);
    return Downcast<V>(detail::CallGlobalForObject("runtime.MapGetItem", v, codes, 2));
  }
  /*! \brief The value of `key`; throws tvm::Error when absent. */
  V operator[](const K& key) const { return at(key); }
  /*! \brief The entries (in the runtime's order). */
  std::vector<std::pair<K, V>> items() const {
    TVMValue v;
    int code = kTVMObjectHandle;
    v.v_handle = checked_handle();
    Array<ObjectRef> flat = Downcast<Array<ObjectRef>>(
        detail::CallGlobalForObject("runtime.MapItems", &v, &code, 1));
    std::vector<ObjectRef> all = flat.ToVector();
    std::vector<std::pair<K, V>> out;
    for (size_t i = 0; i + 1 < all.size(); i += 2) {
      out.emplace_back(Downcast<K>(all[i]), Downcast<V>(all[i + 1]));
    }
    return out;
  }
  /*! \brief The first entry (of a snapshot taken now). */
  iterator begin() const {
    return iterator(std::make_shared<const std::vector<value_type>>(items()), 0);
  }
  /*! \brief Past the last entry. */
  iterator end() const { return iterator(nullptr, size()); }
  /*! \brief The entry of `key`, or end(). */
  iterator find(const K& key) const {
    auto all = std::make_shared<const std::vector<value_type>>(items());
    for (size_t i = 0; i < all->size(); ++i) {
      if (Equal((*all)[i].first, key)) return iterator(all, i);
    }
    return end();
  }
  /*! \brief Sets `key` to `value` (builds a new map). */
  void Set(const K& key, const V& value) {
    std::vector<std::pair<K, V>> all = items();
    bool found = false;
    for (auto& kv : all) {
      if (Equal(kv.first, key)) {
        kv.second = value;
        found = true;
      }
    }
    if (!found) all.emplace_back(key, value);
    *this = Map(all);
  }
  /*! \brief Removes `key` (builds a new map). */
  void erase(const K& key) {
    std::vector<std::pair<K, V>> all = items(), kept;
    for (auto& kv : all) {
      if (!Equal(kv.first, key)) kept.push_back(kv);
    }
    *this = Map(kept);
  }

 private:
  // Keys compare as the runtime compares them: strings by content, other objects by identity.
  static bool Equal(const K& a, const K& b) {
    if (a.same_as(b)) return true;
    const StringObj* sa = a.template as<StringObj>();
    const StringObj* sb = b.template as<StringObj>();
    return sa != nullptr && sb != nullptr && sa->size() == sb->size() &&
           std::memcmp(sa->data(), sb->data(), static_cast<size_t>(sa->size())) == 0;
  }
};

}  // namespace runtime

using runtime::Map;

}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_MAP_H_

/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Registry: the runtime's global functions (TVMFuncGetGlobal, TVMFuncRegisterGlobal, ...) and
 * TVM_REGISTER_GLOBAL("name").set_body(...) / .set_body_typed(...), which registers a C++
 * function with the runtime when the program (or shared library) starts.
 */
#ifndef TVM_RUNTIME_REGISTRY_H_
#define TVM_RUNTIME_REGISTRY_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/packed_func.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tvm {
namespace runtime {

/*! \brief A global function being registered (or looked up). */
class Registry {
 public:
  /*! \brief Registers `f` under this entry's name. */
  Registry& set_body(PackedFunc f) {
    detail::ThrowLastError(
        TVMFuncRegisterGlobal(name_.c_str(), f.checked_handle(), can_override_ ? 1 : 0),
        "TVMFuncRegisterGlobal");
    return *this;
  }
  /*! \brief Registers a callable body(TVMArgs, TVMRetValue*). */
  template <typename TCallable,
            typename = typename std::enable_if<
                std::is_convertible<TCallable, PackedFunc::FType>::value &&
                !std::is_base_of<ObjectRef, TCallable>::value>::type>
  Registry& set_body(TCallable f) {
    return set_body(PackedFunc(std::move(f)));
  }
  /*! \brief Registers a C++ function or lambda with a fixed signature. */
  template <typename FLambda>
  Registry& set_body_typed(FLambda f) {
    using FType = typename detail::function_signature<FLambda>::FType;
    return set_body(TypedPackedFunc<FType>(std::move(f), name_).packed());
  }
  /*! \brief Registers a member function `f` of T, called on the first argument. */
  template <typename T, typename R, typename... Args>
  Registry& set_body_method(R (T::*f)(Args...) const) {
    return set_body_typed([f](T self, Args... args) -> R { return (self.*f)(args...); });
  }

  /*!
   * \brief An entry for `name`: set_body registers it (replacing an existing function only
   * when `override`). The entry lives for the rest of the program.
   */
  static Registry& Register(const std::string& name, bool override = false) {
    Cache& cache = GetCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.registries.push_back(std::unique_ptr<Registry>(new Registry(name, override)));
    return *cache.registries.back();
  }
  /*! \brief Removes the global function `name`; false when there was none. */
  static bool Remove(const std::string& name) {
    if (Get(name) == nullptr) return false;
    detail::ThrowLastError(TVMFuncRemoveGlobal(name.c_str()), "TVMFuncRemoveGlobal");
    return true;
  }
  /*!
   * \brief The global function `name`, or nullptr. The pointer stays valid for the rest of
   * the program (a later registration under the name gives a new pointer).
   */
  static const PackedFunc* Get(const std::string& name) {
    TVMFunctionHandle h = nullptr;
    detail::ThrowLastError(TVMFuncGetGlobal(name.c_str(), &h), "TVMFuncGetGlobal");
    if (h == nullptr) return nullptr;
    PackedFunc f = PackedFunc::FromOwnedHandle(h);
    Cache& cache = GetCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto& slot = cache.entries[name];
    if (slot == nullptr || !slot->same_as(f)) {
      if (slot != nullptr) cache.retired.push_back(std::move(slot));
      slot = std::make_unique<PackedFunc>(std::move(f));
    }
    return slot.get();
  }
  /*! \brief The names of all global functions. */
  static std::vector<String> ListNames() {
    int n = 0;
    const char** names = nullptr;
    detail::ThrowLastError(TVMFuncListGlobalNames(&n, &names), "TVMFuncListGlobalNames");
    std::vector<std::string> copied(names, names + n);
    return std::vector<String>(copied.begin(), copied.end());
  }

 private:
  Registry(std::string name, bool can_override)
      : name_(std::move(name)), can_override_(can_override) {}
  struct Cache {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<PackedFunc>> entries;
    std::vector<std::unique_ptr<PackedFunc>> retired;
    std::vector<std::unique_ptr<Registry>> registries;
  };
  // Never destroyed: pointers from Get stay valid through static destruction.
  static Cache& GetCache() {
    static Cache* cache = new Cache();
    return *cache;
  }

  std::string name_;
  bool can_override_;
};

}  // namespace runtime
}  // namespace tvm

#ifndef TVM_ATTRIBUTE_UNUSED
#if defined(__GNUC__) || defined(__clang__)
#define TVM_ATTRIBUTE_UNUSED __attribute__((unused))
#else
#define TVM_ATTRIBUTE_UNUSED
#endif
#endif
#ifndef TVM_STR_CONCAT
#define TVM_STR_CONCAT_(x, y) x##y
#define TVM_STR_CONCAT(x, y) TVM_STR_CONCAT_(x, y)
#endif

#define TVM_FUNC_REG_VAR_DEF static TVM_ATTRIBUTE_UNUSED ::tvm::runtime::Registry& __mk_##TVM

/*!
 * \brief Registers a global function at start-up:
 *   TVM_REGISTER_GLOBAL("my.add").set_body_typed([](int a, int b) { return a + b; });
 */
#define TVM_REGISTER_GLOBAL(OpName) \
  TVM_STR_CONCAT(TVM_FUNC_REG_VAR_DEF, __COUNTER__) = ::tvm::runtime::Registry::Register(OpName)

#endif  // TVM_RUNTIME_REGISTRY_H_

/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Module: a counted reference to a runtime module (TVMModLoadFromFile, TVMModGetFunction,
 * TVMModImport). operator-> gives the ModuleNode, whose methods ask the runtime.
 */
#ifndef TVM_RUNTIME_MODULE_H_
#define TVM_RUNTIME_MODULE_H_

#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/object.h>
#include <tvm/runtime/packed_func.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tvm {
namespace runtime {

class Module;

/*! \brief A runtime module. Never constructed here: a `ModuleNode*` is the module's handle. */
class ModuleNode : public Object {
 public:
  static constexpr const char* _type_key = "runtime.Module";
  static constexpr int _arg_type_code = kTVMModuleHandle;

  /*! \brief The function `name` (of this module, or of its imports too), or a null one. */
  PackedFunc GetFunction(const std::string& name, bool query_imports = false) const {
    TVMFunctionHandle f = nullptr;
    detail::ThrowLastError(TVMModGetFunction(handle(), name.c_str(), query_imports ? 1 : 0, &f),
                           "TVMModGetFunction");
    return PackedFunc::FromOwnedHandle(f);
  }
  /*! \brief Whether the module (or an import, with query_imports) has function `name`. */
  bool ImplementsFunction(const std::string& name, bool query_imports = false) const {
    return GetFunction(name, query_imports) != nullptr;
  }
  /*! \brief Adds `other` to this module's imports. */
  inline void Import(Module other) const;
  /*! \brief The module kind ("library", "GraphExecutor", ...); valid for the program's life. */
  const char* type_key() const {
    static std::mutex mutex;
    static std::set<std::string>* keys = new std::set<std::string>();
    std::string key = Call("runtime.ModuleGetTypeKey");
    std::lock_guard<std::mutex> lock(mutex);
    return keys->insert(key).first->c_str();
  }
  /*! \brief The module's format ("so", ...). */
  std::string GetFormat() const { return Call("runtime.ModuleGetFormat"); }
  /*! \brief The module's source in `format`, when it keeps one. */
  std::string GetSource(const std::string& format = "") const {
    return Call("runtime.ModuleGetSource", format);
  }
  /*! \brief Saves the module to `file_name` in `format`. */
  void SaveToFile(const std::string& file_name, const std::string& format) const {
    Call("runtime.ModuleSaveToFile", file_name, format);
  }
  /*! \brief The imported modules. */
  inline std::vector<Module> imports() const;

 private:
  template <typename... Args>
  TVMRetValue Call(const char* global, Args&&... args) const {
    TVMFunctionHandle f = detail::GlobalHandle(global);
    PackedFunc func = PackedFunc::FromOwnedHandle(f);
    TVMValue self;
    self.v_handle = handle();
    return func(TVMArgValue(self, kTVMModuleHandle), std::forward<Args>(args)...);
  }
};

/*! \brief A counted reference to a runtime module (nullable). */
class Module : public ObjectRef {
 public:
  using ContainerType = ModuleNode;
  Module() = default;
  TVMRT_OBJECT_REF_CTOR(Module, ObjectRef)

  /*! \brief Loads a module from a file; the format comes from the extension when empty. */
  static Module LoadFromFile(const std::string& file_name, const std::string& format = "") {
    TVMModuleHandle h = nullptr;
    detail::ThrowLastError(TVMModLoadFromFile(file_name.c_str(), format.c_str(), &h),
                           "TVMModLoadFromFile");
    return FromOwnedHandle(h);
  }
  /*! \brief Takes over the reference a module handle carries. */
  static Module FromOwnedHandle(TVMModuleHandle handle) {
    return Module(detail::UncheckedTag(), ObjectRef::FromOwnedHandle(handle));
  }

  /*! \brief The function `name` (of this module, or of its imports too), or a null one. */
  PackedFunc GetFunction(const std::string& name, bool query_imports = false) const {
    return operator->()->GetFunction(name, query_imports);
  }
  /*! \brief Adds `other` to this module's imports. */
  void Import(Module other) const { operator->()->Import(std::move(other)); }
  /*! \brief The module; throws tvm::Error on a null Module. */
  ModuleNode* operator->() const { return static_cast<ModuleNode*>(checked_handle()); }
  /*! \brief The module, or nullptr. */
  ModuleNode* get() const { return static_cast<ModuleNode*>(data_); }
};

inline void ModuleNode::Import(Module other) const {
  detail::ThrowLastError(TVMModImport(handle(), other.checked_handle()), "TVMModImport");
}

inline std::vector<Module> ModuleNode::imports() const {
  int64_t n = Call("runtime.ModuleImportsSize");
  std::vector<Module> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(Call("runtime.ModuleGetImport", i));
  return out;
}

/*! \brief Names of the functions and symbols the runtime gives meaning to. */
namespace symbol {
constexpr const char* tvm_module_main = "__tvm_main__";
constexpr const char* tvm_module_ctx = "__tvm_module_ctx";
constexpr const char* tvm_dev_mblob = "__tvm_dev_mblob";
constexpr const char* tvm_set_device = "__tvm_set_device";
}  // namespace symbol

}  // namespace runtime
}  // namespace tvm

#endif  // TVM_RUNTIME_MODULE_H_

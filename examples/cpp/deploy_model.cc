// Deploys a TVM-compiled model from C++ using only the C API headers, with small RAII
// wrappers of this example's own (no TVM C++ headers).
//
//   deploy_model_cpp MODEL.so [INPUT_NAME]
#include <tvm/runtime/c_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(int ret, const char* what) {
  if (ret != 0) throw std::runtime_error(std::string(what) + ": " + TVMGetLastError());
}

struct ArrayDeleter {
  void operator()(DLTensor* t) const { TVMArrayFree(t); }
};
using Array = std::unique_ptr<DLTensor, ArrayDeleter>;

class Function {
 public:
  explicit Function(TVMFunctionHandle h) : h_(h) {
    if (!h_) throw std::runtime_error("missing function");
  }
  Function(Function&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  ~Function() {
    if (h_) TVMFuncFree(h_);
  }

  // Calls with already packed arguments; returns the value and its type code.
  std::pair<TVMValue, int> operator()(std::vector<TVMValue> args, std::vector<int> codes) const {
    TVMValue ret;
    int code = kTVMNullptr;
    check(TVMFuncCall(h_, args.data(), codes.data(), static_cast<int>(args.size()), &ret, &code),
          "TVMFuncCall");
    return {ret, code};
  }

 private:
  TVMFunctionHandle h_;
};

class Module {
 public:
  explicit Module(TVMModuleHandle h) : h_(h) {}
  static Module Load(const std::string& path) {
    TVMModuleHandle h = nullptr;
    check(TVMModLoadFromFile(path.c_str(), "so", &h), "TVMModLoadFromFile");
    return Module(h);
  }
  Module(Module&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module() {
    if (h_) TVMModFree(h_);
  }
  Function Get(const char* name) const {
    TVMFunctionHandle f = nullptr;
    check(TVMModGetFunction(h_, name, 0, &f), "TVMModGetFunction");
    return Function(f);
  }

 private:
  TVMModuleHandle h_;
};

TVMValue Int(int64_t v) {
  TVMValue x;
  x.v_int64 = v;
  return x;
}

TVMValue Handle(void* p) {
  TVMValue x;
  x.v_handle = p;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.so [INPUT_NAME]\n", argv[0]);
    return 2;
  }
  std::string input = argc > 2 ? argv[2] : "data";
  try {
    Module lib = Module::Load(argv[1]);
    TVMValue dev;
    dev.v_device.device_type = kDLCPU;
    dev.v_device.device_id = 0;
    auto created = lib.Get("default")({dev}, {kDLDevice});
    if (created.second != kTVMModuleHandle) throw std::runtime_error("factory gave no module");
    Module gmod(created.first.v_handle);

    TVMValue name;
    name.v_str = input.c_str();
    int64_t index = gmod.Get("get_input_index")({name}, {kTVMStr}).first.v_int64;
    if (index < 0) throw std::runtime_error("no input named " + input);
    Array in(static_cast<DLTensor*>(gmod.Get("get_input")({Int(index)}, {kDLInt}).first.v_handle));
    int64_t n = 1;
    for (int i = 0; i < in->ndim; ++i) n *= in->shape[i];
    DLTensor* raw = nullptr;
    check(TVMArrayAlloc(in->shape, in->ndim, kDLFloat, 32, 1, kDLCPU, 0, &raw), "TVMArrayAlloc");
    Array x(raw);
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(x->data)[i] = std::sin(i * 0.1);
    gmod.Get("set_input")({name, Handle(x.get())}, {kTVMStr, kTVMNDArrayHandle});
    gmod.Get("run")({}, {});
    int64_t outputs = gmod.Get("get_num_outputs")({}, {}).first.v_int64;
    Function get_output = gmod.Get("get_output");
    for (int64_t o = 0; o < outputs; ++o) {
      Array out(static_cast<DLTensor*>(get_output({Int(o)}, {kDLInt}).first.v_handle));
      int64_t m = 1;
      std::printf("output %lld shape (", static_cast<long long>(o));
      for (int i = 0; i < out->ndim; ++i) {
        m *= out->shape[i];
        std::printf(i ? ", %lld" : "%lld", static_cast<long long>(out->shape[i]));
      }
      std::printf(")\n");
      if (out->dtype.code == kDLFloat && out->dtype.bits == 32) {
        const float* v = static_cast<const float*>(out->data);
        int64_t best = 0;
        for (int64_t i = 0; i < m; ++i) {
          if (v[i] > v[best]) best = i;
          if (i < 10) std::printf("  [%lld] %.6f\n", static_cast<long long>(i), v[i]);
        }
        std::printf("  argmax %lld\n", static_cast<long long>(best));
      }
      // 64-bit FNV-1a over every output byte, as the C example prints.
      const auto* bytes = static_cast<const unsigned char*>(out->data);
      const size_t nbytes = static_cast<size_t>(m) * ((out->dtype.bits * out->dtype.lanes + 7) / 8);
      unsigned long long h = 1469598103934665603ULL;
      for (size_t i = 0; i < nbytes; ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
      std::printf("  fnv1a %016llx\n", h);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

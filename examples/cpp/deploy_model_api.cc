// Deploys a TVM-compiled model with TVM's own C++ API (tvm/runtime/module.h, ndarray.h, ...),
// written exactly as against Apache TVM. tvm-runtime-rs provides these headers header-only
// over its C ABI, so the program links against libtvm_runtime.so's C symbols alone.
//
//   deploy_model_api MODEL.so [INPUT_NAME]
#include <tvm/runtime/logging.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <cmath>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.so [INPUT_NAME]\n", argv[0]);
    return 2;
  }
  std::string input = argc > 2 ? argv[2] : "data";
  try {
    DLDevice dev{kDLCPU, 0};
    tvm::runtime::Module lib = tvm::runtime::Module::LoadFromFile(argv[1]);
    tvm::runtime::Module gmod = lib.GetFunction("default")(dev);
    tvm::runtime::PackedFunc set_input = gmod.GetFunction("set_input");
    tvm::runtime::PackedFunc get_input = gmod.GetFunction("get_input");
    tvm::runtime::PackedFunc get_output = gmod.GetFunction("get_output");
    tvm::runtime::PackedFunc run = gmod.GetFunction("run");

    int index = gmod.GetFunction("get_input_index")(input);
    ICHECK_GE(index, 0) << "no input named " << input;
    tvm::runtime::NDArray in = get_input(index);
    tvm::runtime::NDArray x = tvm::runtime::NDArray::Empty(in.Shape(), in.DataType(), dev);
    int64_t n = 1;
    for (int64_t d : x.Shape()) n *= d;
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(x->data)[i] = std::sin(i * 0.1);
    set_input(input, x);
    run();

    int outputs = gmod.GetFunction("get_num_outputs")();
    for (int o = 0; o < outputs; ++o) {
      tvm::runtime::NDArray out = get_output(o);
      int64_t m = 1;
      std::printf("output %d shape (", o);
      for (int i = 0; i < out->ndim; ++i) {
        m *= out->shape[i];
        std::printf(i ? ", %lld" : "%lld", static_cast<long long>(out->shape[i]));
      }
      std::printf(")\n");
      if (out.DataType() == tvm::runtime::DataType::Float(32)) {
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
      const size_t nbytes = static_cast<size_t>(m) * out.DataType().bytes();
      unsigned long long h = 1469598103934665603ULL;
      for (size_t i = 0; i < nbytes; ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
      std::printf("  fnv1a %016llx\n", h);
    }
  } catch (const tvm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

// A shared library of C++ functions registered with TVM_REGISTER_GLOBAL: loading it into a
// process that runs the runtime (here Python's tvm, see from_python.py) makes them global
// functions there.
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdint>
#include <string>

namespace {

// Scales a float32 tensor in place; returns its element count.
int64_t ScaleInPlace(tvm::runtime::NDArray a, double factor) {
  ICHECK_EQ(static_cast<int>(a->dtype.code), static_cast<int>(kDLFloat)) << "scale expects a float32 tensor";
  ICHECK_EQ(static_cast<int>(a->dtype.bits), 32) << "scale expects a float32 tensor";
  int64_t n = 1;
  for (int64_t d : a.Shape()) n *= d;
  float* data = static_cast<float*>(a->data);
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(data[i] * factor);
  return n;
}

}  // namespace

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.add").set_body_typed([](int64_t a, int64_t b) {
  return a + b;
});

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.scale").set_body_typed(ScaleInPlace);

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.greet").set_body_typed([](std::string name) {
  return "hello, " + name;
});

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.sum_args")
    .set_body([](tvm::runtime::TVMArgs args, tvm::runtime::TVMRetValue* rv) {
      double total = 0;
      for (int i = 0; i < args.size(); ++i) total += args[i].operator double();
      *rv = total;
    });

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.call_back")
    .set_body_typed([](tvm::runtime::PackedFunc f, int64_t x) -> int64_t {
      int64_t y = f(x);
      return y * 10;
    });

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.make_shape").set_body_typed([](int64_t a, int64_t b) {
  return tvm::runtime::ShapeTuple({a, b});
});

TVM_REGISTER_GLOBAL("tvmrt_cpp_ext.fail").set_body_typed([](std::string why) -> int {
  LOG(FATAL) << "failing on purpose: " << why;
  return 0;
});

// Bad use of the C++ API: every case must end in a tvm::Error with a clear message, never a
// crash. Cases where TVM's own headers crash (a null handle) run only on tvm-runtime-rs'
// headers (TVMRT_CPP_API) and print "skipped: ..." elsewhere.
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>
#include <string>

#include "common.h"

using namespace tvm::runtime;  // NOLINT(build/namespaces)

int main(int argc, char** argv) {
  std::string dir = FixtureDir(argc, argv);
  DLDevice dev{kDLCPU, 0};
  Module mod = Module::LoadFromFile(dir + "/add_dynamic.so");
  NDArray a = NDArray::Empty({4}, DLDataType{kDLFloat, 32, 1}, dev);

  // A missing file, a missing function, a missing global.
  EXPECT_ERROR(Module::LoadFromFile(dir + "/no_such_model.so"), "no_such_model.so");
  EXPECT(mod.GetFunction("no_such_kernel") == nullptr);
  EXPECT(Registry::Get("tvmrt_cpp_test.no_such_global") == nullptr);

  // Failed conversions of return values.
  TVMRetValue str;
  str = std::string("not a number");
  EXPECT_ERROR(int x = str; (void)x, "expected int but got str");
  EXPECT_ERROR(double x = str; (void)x, "expected float but got str");
  TVMRetValue num;
  num = 7;
  EXPECT_ERROR(std::string s = num; (void)s, "but got int");
  EXPECT_ERROR(NDArray n = num; (void)n, "but got int");
  TVMRetValue holds_module;
  holds_module = mod;
  EXPECT_ERROR(NDArray n = holds_module; (void)n, "");

  // A typed function called with the wrong types or count.
  TypedPackedFunc<int(int, int)> add([](int x, int y) { return x + y; });
  PackedFunc untyped = add;
  EXPECT_ERROR(untyped("one", 2), "expected int but got str");
  EXPECT_ERROR(untyped(a, 2), "");
  EXPECT_ERROR(untyped(1), "");

  // A kernel called with the wrong number of arguments or a tensor of the wrong dtype. (Not a
  // non-tensor argument: TVM-compiled kernels read every argument as a DLTensor before they
  // check its type code, so passing them a Module or an int is undefined behaviour inside the
  // kernel on either runtime; the reference survived it only while the bytes behind its
  // ModuleNode happened to read as a null strides pointer.)
  PackedFunc kernel = mod.GetFunction("add_float32");
  EXPECT_ERROR(kernel(a, a), "");
  NDArray ints = NDArray::Empty({4}, DLDataType{kDLInt, 32, 1}, dev);
  EXPECT_ERROR(kernel(a, a, ints), "float32");

  // The wrong object type behind a reference.
  ObjectRef as_object = a;
  EXPECT_ERROR(Downcast<Module>(as_object), "runtime.Module");
  EXPECT_ERROR(Downcast<Array<String>>(as_object), "Array");

  // A C++ exception inside a function comes back as the call's error.
  Registry::Register("tvmrt_cpp_test.fail", true).set_body([](TVMArgs, TVMRetValue*) {
    LOG(FATAL) << "boom from C++";
  });
  EXPECT_ERROR((*Registry::Get("tvmrt_cpp_test.fail"))(), "boom from C++");

  // Out-of-range and absent items.
  Array<String> names{"a"};
  EXPECT_ERROR(names[3], "");
  Map<String, String> m{{"k", "v"}};
  EXPECT_ERROR(m.at("absent"), "");
  ShapeTuple shape{1, 2};
  EXPECT_ERROR(shape.at(5), "");
  Optional<String> none;
  EXPECT_ERROR(none.value(), "");
  std::printf("bad_use: common cases ok\n");

#ifdef TVMRT_CPP_API
  // Null references: TVM's headers dereference these and crash.
  Module null_mod;
  NDArray null_array;
  PackedFunc null_func;
  EXPECT_ERROR(null_mod->GetFunction("f"), "null");
  EXPECT_ERROR(null_mod.GetFunction("f"), "null");
  EXPECT_ERROR(null_mod.Import(mod), "null");
  EXPECT_ERROR(mod.Import(null_mod), "null");
  EXPECT_ERROR(int ndim = null_array->ndim; (void)ndim, "null");
  EXPECT_ERROR(null_array.CopyFrom(a), "null");
  EXPECT_ERROR(a.CopyFrom(null_array), "null");
  EXPECT_ERROR(null_array.Shape(), "null");
  EXPECT_ERROR(null_func(1, 2), "null PackedFunc");
  EXPECT_ERROR(mod.GetFunction("no_such_kernel")(a), "null PackedFunc");
  EXPECT_ERROR(Registry::Register("tvmrt_cpp_test.null").set_body(null_func), "null");
  // Clear messages for the cases above.
  EXPECT_ERROR(Downcast<Module>(as_object), "expected runtime.Module but got runtime.NDArray");
  EXPECT_ERROR(untyped("one", 2), "error while converting argument 0");
  EXPECT_ERROR(untyped(1), "expects 2 arguments but 1 were given");
  EXPECT_ERROR(NDArray n = holds_module; (void)n, "expected runtime.NDArray but got runtime.Module");
  EXPECT_ERROR(Module::LoadFromFile(dir + "/add_dynamic.so", "no_such_format"), "no_such_format");
  // Registering a taken name without override.
  Registry::Register("tvmrt_cpp_test.taken").set_body_typed([]() { return 1; });
  EXPECT_ERROR(Registry::Register("tvmrt_cpp_test.taken").set_body_typed([]() { return 2; }),
               "tvmrt_cpp_test.taken");
  std::printf("bad_use: null references ok\n");
#else
  std::printf("skipped: null-reference cases (TVM's own headers crash on them)\n");
#endif
  std::printf("bad_use: ok\n");
  return 0;
}

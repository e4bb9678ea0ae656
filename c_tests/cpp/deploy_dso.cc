// Loads TVM-compiled kernel libraries (DSO modules) and calls their functions, the way TVM's
// deployment guide does: Module::LoadFromFile, GetFunction, NDArray::Empty, f(a, b, c).
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>
#include <cstdint>

#include "common.h"

using tvm::runtime::DataType;
using tvm::runtime::Module;
using tvm::runtime::NDArray;
using tvm::runtime::PackedFunc;
using tvm::runtime::TypedPackedFunc;

int main(int argc, char** argv) {
  std::string dir = FixtureDir(argc, argv);
  DLDevice dev{kDLCPU, 0};

  Module mod = Module::LoadFromFile(dir + "/add_dynamic.so");
  PackedFunc add = mod.GetFunction("add_float32");
  ICHECK(add != nullptr) << "add_float32 is missing";
  const int64_t n = 10;
  NDArray a = NDArray::Empty({n}, DLDataType{kDLFloat, 32, 1}, dev);
  NDArray b = NDArray::Empty({n}, DLDataType{kDLFloat, 32, 1}, dev);
  NDArray c = NDArray::Empty({n}, DLDataType{kDLFloat, 32, 1}, dev);
  for (int64_t i = 0; i < n; ++i) {
    static_cast<float*>(a->data)[i] = static_cast<float>(i) * 0.5f;
    static_cast<float*>(b->data)[i] = static_cast<float>(i * i);
  }
  add(a, b, c);
  std::printf("add_float32:");
  for (int64_t i = 0; i < n; ++i) {
    float v = static_cast<float*>(c->data)[i];
    EXPECT(v == static_cast<float>(i) * 0.5f + static_cast<float>(i * i));
    std::printf(" %g", v);
  }
  std::printf("\n");

  // The same kernel through raw DLTensor pointers, as the C API passes them.
  DLTensor* ta = const_cast<DLTensor*>(a.operator->());
  DLTensor* tc = const_cast<DLTensor*>(c.operator->());
  add(ta, ta, tc);
  EXPECT(static_cast<float*>(c->data)[4] == 4.0f);

  // A typed view of another kernel of the same library.
  TypedPackedFunc<void(NDArray, NDArray, NDArray)> add_i32 = mod.GetFunction("add_int32");
  NDArray x = NDArray::Empty({4}, DataType::Int(32), dev);
  NDArray y = NDArray::Empty({4}, DataType::Int(32), dev);
  NDArray z = NDArray::Empty({4}, DataType::Int(32), dev);
  int32_t xs[4] = {1, -2, 300, 7}, ys[4] = {10, 20, -30, 1 << 20}, zs[4] = {0, 0, 0, 0};
  x.CopyFromBytes(xs, sizeof(xs));
  y.CopyFromBytes(ys, sizeof(ys));
  add_i32(x, y, z);
  z.CopyToBytes(zs, sizeof(zs));
  std::printf("add_int32: %d %d %d %d\n", zs[0], zs[1], zs[2], zs[3]);
  for (int i = 0; i < 4; ++i) EXPECT(zs[i] == xs[i] + ys[i]);

  // operator-> to the module, a missing function, and imports.
  EXPECT(mod->GetFunction("no_such_kernel") == nullptr);
  EXPECT(mod.GetFunction("myadd", true) == nullptr);
  Module fixed = Module::LoadFromFile(dir + "/add_static.so", "so");
  mod.Import(fixed);
  PackedFunc myadd = mod.GetFunction("myadd", true);
  EXPECT(myadd != nullptr);
  EXPECT(mod.GetFunction("myadd", false) == nullptr);
  NDArray p = NDArray::Empty({1024}, DLDataType{kDLFloat, 32, 1}, dev);
  NDArray q = NDArray::Empty({1024}, DLDataType{kDLFloat, 32, 1}, dev);
  NDArray r = NDArray::Empty({1024}, DLDataType{kDLFloat, 32, 1}, dev);
  double sum = 0;
  for (int i = 0; i < 1024; ++i) {
    static_cast<float*>(p->data)[i] = static_cast<float>(i);
    static_cast<float*>(q->data)[i] = 1.0f;
  }
  myadd(p, q, r);
  for (int i = 0; i < 1024; ++i) sum += static_cast<float*>(r->data)[i];
  std::printf("myadd through an import: sum %.1f\n", sum);
  EXPECT(sum == 1024.0 * 1023.0 / 2 + 1024.0);
  std::printf("module type %s, %d import(s)\n", mod->type_key(),
              static_cast<int>(mod->imports().size()));
  std::printf("deploy_dso: ok\n");
  return 0;
}

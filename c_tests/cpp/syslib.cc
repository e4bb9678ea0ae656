// The system library: a TVM-compiled object linked into this program registers its kernels at
// start-up, and runtime.SystemLib serves them as a module (no shared library to load).
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>

#include "common.h"

int main() {
  const tvm::runtime::PackedFunc* syslib = tvm::runtime::Registry::Get("runtime.SystemLib");
  ICHECK(syslib != nullptr) << "runtime.SystemLib is missing";
  tvm::runtime::Module mod = (*syslib)();
  tvm::runtime::PackedFunc myadd = mod.GetFunction("myadd");
  ICHECK(myadd != nullptr) << "the system library has no myadd: was the object linked in?";
  DLDevice dev{kDLCPU, 0};
  DLDataType f32{kDLFloat, 32, 1};
  tvm::runtime::NDArray a = tvm::runtime::NDArray::Empty({1024}, f32, dev);
  tvm::runtime::NDArray b = tvm::runtime::NDArray::Empty({1024}, f32, dev);
  tvm::runtime::NDArray c = tvm::runtime::NDArray::Empty({1024}, f32, dev);
  for (int i = 0; i < 1024; ++i) {
    static_cast<float*>(a->data)[i] = static_cast<float>(i % 17);
    static_cast<float*>(b->data)[i] = static_cast<float>(i) * 0.25f;
  }
  myadd(a, b, c);
  double sum = 0;
  for (int i = 0; i < 1024; ++i) {
    EXPECT(static_cast<float*>(c->data)[i] ==
           static_cast<float>(i % 17) + static_cast<float>(i) * 0.25f);
    sum += static_cast<float*>(c->data)[i];
  }
  std::printf("syslib myadd: sum %.2f\n", sum);
  std::printf("syslib: ok\n");
  return 0;
}

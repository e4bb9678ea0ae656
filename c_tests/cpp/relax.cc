// Runs Relax executables with the C++ API: vm_load_executable, vm_initialization, then the
// function by name (static and dynamic batch MLPs from scripts/build_fixtures.py).
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common.h"

using tvm::runtime::Module;
using tvm::runtime::NDArray;
using tvm::runtime::PackedFunc;

static void RunMlp(const std::string& path, int64_t n) {
  DLDevice dev{kDLCPU, 0};
  Module ex = Module::LoadFromFile(path);
  Module vm = ex.GetFunction("vm_load_executable")();
  const int kPooledAllocator = 2;
  vm.GetFunction("vm_initialization")(static_cast<int>(kDLCPU), 0, kPooledAllocator);
  PackedFunc main_fn = vm.GetFunction("main");
  ICHECK(main_fn != nullptr) << "the executable has no main";

  NDArray x = NDArray::Empty({n, 64}, DLDataType{kDLFloat, 32, 1}, dev);
  std::vector<float> host(static_cast<size_t>(n * 64));
  for (size_t i = 0; i < host.size(); ++i) host[i] = std::sin(i * 0.1f + static_cast<float>(n));
  x.CopyFromBytes(host.data(), host.size() * sizeof(float));
  NDArray y = main_fn(x);
  EXPECT(y.Shape().size() == 2 && y.Shape()[0] == n && y.Shape()[1] == 10);
  std::vector<float> out(static_cast<size_t>(n * 10));
  y.CopyToBytes(out.data(), out.size() * sizeof(float));
  std::printf("%s, n=%lld:\n", path.substr(path.rfind('/') + 1).c_str(),
              static_cast<long long>(n));
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0;
    std::printf(" ");
    for (int c = 0; c < 10; ++c) {
      float v = out[static_cast<size_t>(r * 10 + c)];
      sum += v;
      std::printf(" %.5f", v);
    }
    std::printf("\n");
    EXPECT(std::fabs(sum - 1.0) < 1e-4);  // softmax rows
  }
}

int main(int argc, char** argv) {
  std::string dir = FixtureDir(argc, argv);
  RunMlp(dir + "/relax_mlp.so", 4);
  RunMlp(dir + "/relax_mlp_dyn.so", 1);
  RunMlp(dir + "/relax_mlp_dyn.so", 3);
  std::printf("relax: ok\n");
  return 0;
}

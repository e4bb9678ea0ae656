// Runs graph-executor models the way TVM's deployment guide does: the library's "default"
// factory gives the executor module, then set_input / run / get_output.
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/module.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common.h"

using tvm::runtime::Map;
using tvm::runtime::Module;
using tvm::runtime::NDArray;
using tvm::runtime::PackedFunc;
using tvm::runtime::String;

static void RunModel(const std::string& path, std::vector<int64_t> in_shape) {
  DLDevice dev{kDLCPU, 0};
  Module lib = Module::LoadFromFile(path);
  Module gmod = lib.GetFunction("default")(dev);
  PackedFunc set_input = gmod.GetFunction("set_input");
  PackedFunc get_input_index = gmod.GetFunction("get_input_index");
  PackedFunc get_output = gmod.GetFunction("get_output");
  PackedFunc get_num_outputs = gmod.GetFunction("get_num_outputs");
  PackedFunc run = gmod.GetFunction("run");
  ICHECK(set_input != nullptr && run != nullptr && get_output != nullptr);

  NDArray x = NDArray::Empty(tvm::runtime::ShapeTuple(in_shape), DLDataType{kDLFloat, 32, 1}, dev);
  int64_t n = 1;
  for (int64_t d : x.Shape()) n *= d;
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(x->data)[i] = std::sin(i * 0.1f);
  int index = get_input_index("data");
  ICHECK_EQ(index, 0);
  set_input("data", x);
  run();
  int outputs = get_num_outputs();
  std::printf("%s: %d output(s)\n", path.substr(path.rfind('/') + 1).c_str(), outputs);
  for (int o = 0; o < outputs; ++o) {
    NDArray y = get_output(o);
    std::printf("  output %d shape [", o);
    for (size_t i = 0; i < y.Shape().size(); ++i) {
      std::printf(i ? ", %lld" : "%lld", static_cast<long long>(y.Shape()[i]));
    }
    std::printf("] %s\n ", tvm::runtime::DLDataType2String(y->dtype).c_str());
    std::vector<float> host(static_cast<size_t>(y.Shape()[1]));
    y.CopyToBytes(host.data(), host.size() * sizeof(float));
    for (float v : host) std::printf(" %.5f", v);
    std::printf("\n  argmax %d\n",
                static_cast<int>(std::max_element(host.begin(), host.end()) - host.begin()));
    // get_output into a caller's array gives the same values.
    NDArray into = NDArray::Empty(y.Shape(), y.DataType(), dev);
    get_output(o, into);
    std::vector<float> again(host.size());
    into.CopyToBytes(again.data(), again.size() * sizeof(float));
    EXPECT(again == host);
  }
  // The parameters the library carries (a Map<String, NDArray>), in name order.
  PackedFunc get_params = lib.GetFunction("get_graph_params");
  if (get_params != nullptr) {
    Map<String, NDArray> params = get_params();
    std::vector<std::pair<std::string, std::string>> rows;
    for (auto kv : params) {
      std::string shape;
      for (int64_t d : kv.second.Shape()) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      rows.emplace_back(std::string(kv.first), shape);
    }
    std::sort(rows.begin(), rows.end());
    std::printf("  %d param(s):", static_cast<int>(params.size()));
    for (auto& r : rows) std::printf(" %s[%s]", r.first.c_str(), r.second.c_str());
    std::printf("\n");
    for (auto& r : rows) EXPECT(params.count(String(r.first)) == 1);
  }
}

int main(int argc, char** argv) {
  std::string dir = FixtureDir(argc, argv);
  RunModel(dir + "/mlp.so", {1, 64});
  RunModel(dir + "/conv.so", {1, 3, 32, 32});
  std::printf("graph: ok\n");
  return 0;
}

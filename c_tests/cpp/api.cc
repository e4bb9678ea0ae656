// NDArray copies and views, containers, typed functions, the registry, DataType and logging:
// the C++ API as deployment code uses it, with results printed for comparison between runtimes.
#include <tvm/runtime/container/array.h>
#include <tvm/runtime/container/map.h>
#include <tvm/runtime/container/optional.h>
#include <tvm/runtime/container/shape_tuple.h>
#include <tvm/runtime/container/string.h>
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/device_api.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/ndarray.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

using namespace tvm::runtime;  // NOLINT(build/namespaces)

static void NDArrays() {
  DLDevice dev{kDLCPU, 0};
  NDArray a = NDArray::Empty({2, 3}, DataType::Float(32), dev);
  float src[6] = {1, 2, 3, 4, 5, 6};
  a.CopyFromBytes(src, sizeof(src));
  EXPECT(a.Shape().size() == 2 && a.Shape()[0] == 2 && a.Shape()[1] == 3);
  EXPECT(a.DataType() == DataType::Float(32));
  EXPECT(a->ndim == 2 && a->dtype.bits == 32 && a->device.device_type == kDLCPU);
  EXPECT(a.IsContiguous());

  NDArray b = NDArray::Empty({2, 3}, DLDataType{kDLFloat, 32, 1}, dev);
  b.CopyFrom(a);
  NDArray c = NDArray::Empty({2, 3}, DLDataType{kDLFloat, 32, 1}, dev);
  b.CopyTo(c);
  NDArray d = c.CopyTo(dev);
  float out[6] = {0};
  d.CopyToBytes(out, sizeof(out));
  EXPECT(std::memcmp(out, src, sizeof(src)) == 0);
  std::printf("copies: %g %g %g %g %g %g\n", out[0], out[1], out[2], out[3], out[4], out[5]);

  // A DLTensor the caller owns, as a source and a destination.
  float raw[6] = {0};
  int64_t shape[2] = {2, 3};
  DLTensor t;
  t.data = raw;
  t.device = dev;
  t.ndim = 2;
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  a.CopyTo(&t);
  EXPECT(raw[5] == 6.0f);
  raw[0] = 42.0f;
  b.CopyFrom(&t);
  EXPECT(static_cast<float*>(b->data)[0] == 42.0f);

  // A view: same memory, another shape.
  NDArray v = a.CreateView({3, 2}, a->dtype);
  EXPECT(v->data == a->data);
  EXPECT(v.Shape()[0] == 3 && v.Shape()[1] == 2);
  static_cast<float*>(v->data)[1] = -1.0f;
  EXPECT(static_cast<float*>(a->data)[1] == -1.0f);
  std::printf("view: shape [%lld, %lld]\n", static_cast<long long>(v->shape[0]),
              static_cast<long long>(v->shape[1]));

  // DLPack out and back in: the memory is shared, the references are counted.
  DLManagedTensor* managed = a.ToDLPack();
  EXPECT(managed->dl_tensor.data == a->data);
  NDArray back = NDArray::FromDLPack(managed);
  EXPECT(back->data == a->data && back.Shape()[1] == 3);
  std::printf("dlpack: round trip shares memory\n");

  // The object behind the reference.
  tvm::runtime::ObjectRef as_object = a;
  EXPECT(as_object->GetTypeKey() == "runtime.NDArray");
  EXPECT(as_object.as<tvm::runtime::StringObj>() == nullptr);
  EXPECT(Downcast<NDArray>(as_object).same_as(a));

  // use_count follows copies.
  NDArray e = NDArray::Empty({1}, DataType::Int(64), dev);
  EXPECT(e.use_count() == 1);
  {
    NDArray f = e;
    EXPECT(e.use_count() == 2);
  }
  EXPECT(e.use_count() == 1);

  // Device memory through the DeviceAPI.
  DeviceAPI* api = DeviceAPI::Get(dev);
  void* mem = api->AllocDataSpace(dev, 256, kAllocAlignment, DataType::Float(32));
  EXPECT(mem != nullptr && reinterpret_cast<uintptr_t>(mem) % kAllocAlignment == 0);
  api->FreeDataSpace(dev, mem);
  api->StreamSync(dev, nullptr);
  TVMRetValue exist;
  api->GetAttr(dev, kExist, &exist);
  EXPECT(static_cast<int>(exist) == 1);
}

static void Containers() {
  String s = "hello";
  EXPECT(s.size() == 5 && s == "hello" && std::string(s) == "hello");
  EXPECT(s != "world" && String("abc") < String("abd"));
  std::string joined = s + std::string(" world");
  std::printf("string: %s (%d)\n", joined.c_str(), static_cast<int>(joined.size()));

  ShapeTuple shape{2, 3, 4};
  EXPECT(shape.size() == 3 && shape[2] == 4 && shape.back() == 4);
  int64_t prod = 1;
  for (int64_t d : shape) prod *= d;
  std::printf("shape_tuple: %d dims, %lld elements\n", static_cast<int>(shape.size()),
              static_cast<long long>(prod));

  Array<String> names{"a", "bb", "ccc"};
  names.push_back("dddd");
  EXPECT(names.size() == 4);
  std::printf("array:");
  for (String n : names) std::printf(" %s", n.c_str());
  std::printf("\n");
  EXPECT(names[1] == "bb");

  Array<ShapeTuple> shapes{ShapeTuple({1}), ShapeTuple({1, 2})};
  EXPECT(shapes[1].size() == 2);

  Map<String, ShapeTuple> m{{"x", ShapeTuple({1, 2})}, {"y", ShapeTuple({3})}};
  EXPECT(m.size() == 2 && m.count("x") == 1 && m.count("z") == 0);
  EXPECT(m["x"].size() == 2 && m.at("y")[0] == 3);
  m.Set("z", ShapeTuple({7, 7, 7}));
  EXPECT(m.size() == 3 && m["z"].size() == 3);
  std::printf("map: %d entries, z has %d dims\n", static_cast<int>(m.size()),
              static_cast<int>(m["z"].size()));

  Optional<String> none;
  Optional<String> some = String("x");
  EXPECT(!none.defined() && some.defined() && some.value() == "x");
  EXPECT(none.value_or("fallback") == "fallback");

  // Containers through a runtime function and back.
  const PackedFunc* size = Registry::Get("runtime.ArraySize");
  EXPECT(size != nullptr);
  int64_t n = (*size)(names);
  EXPECT(n == 4);
}

static void Functions() {
  // A C++ lambda as a runtime function, called through the runtime.
  PackedFunc sum([](TVMArgs args, TVMRetValue* rv) {
    double total = 0;
    for (int i = 0; i < args.size(); ++i) total += args[i].operator double();
    *rv = total;
  });
  double total = sum(1, 2.5, 3);
  EXPECT(total == 6.5);

  TypedPackedFunc<int(int, int)> add([](int a, int b) { return a + b; });
  EXPECT(add(40, 2) == 42);
  TypedPackedFunc<std::string(std::string, int)> repeat([](std::string s, int k) {
    std::string out;
    for (int i = 0; i < k; ++i) out += s;
    return out;
  });
  std::string rep = repeat("ab", 3);
  EXPECT(rep == "ababab");
  // A typed function seen as a packed one, and the other way round.
  PackedFunc packed = add;
  int r = packed(1, 2);
  EXPECT(r == 3);
  TypedPackedFunc<double(PackedFunc, double)> apply(
      [](PackedFunc f, double x) -> double { return f(x, x); });
  double applied = apply(sum, 1.25);
  EXPECT(applied == 2.5);

  // Registry: register, look up, call, list, remove.
  Registry::Register("tvmrt_cpp_test.mul").set_body_typed([](int64_t a, int64_t b) {
    return a * b;
  });
  Registry::Register("tvmrt_cpp_test.concat").set_body([](TVMArgs args, TVMRetValue* rv) {
    std::string out;
    for (int i = 0; i < args.size(); ++i) out += args[i].operator std::string();
    *rv = out;
  });
  Registry::Register("tvmrt_cpp_test.first_dim")
      .set_body_typed([](NDArray a) -> int64_t { return a->shape[0]; });
  const PackedFunc* mul = Registry::Get("tvmrt_cpp_test.mul");
  EXPECT(mul != nullptr);
  int64_t product = (*mul)(6, 7);
  std::string cat = (*Registry::Get("tvmrt_cpp_test.concat"))("a", std::string("b"), String("c"));
  NDArray arr = NDArray::Empty({5, 2}, DataType::Float(32), DLDevice{kDLCPU, 0});
  int64_t dim = (*Registry::Get("tvmrt_cpp_test.first_dim"))(arr);
  std::printf("registry: mul %lld, concat %s, first_dim %lld\n",
              static_cast<long long>(product), cat.c_str(), static_cast<long long>(dim));
  EXPECT(product == 42 && cat == "abc" && dim == 5);
  bool listed = false;
  for (const auto& name : Registry::ListNames()) listed |= name == "tvmrt_cpp_test.mul";
  EXPECT(listed);
  EXPECT(Registry::Remove("tvmrt_cpp_test.mul"));
  EXPECT(Registry::Get("tvmrt_cpp_test.mul") == nullptr);
  EXPECT(!Registry::Remove("tvmrt_cpp_test.mul"));

  // Return values: conversions and ownership.
  TVMRetValue rv = (*Registry::Get("tvmrt_cpp_test.concat"))("x", "y");
  TVMRetValue copy = rv;
  EXPECT(copy.type_code() == kTVMStr && copy.operator std::string() == "xy");
  TVMRetValue num;
  num = 3;
  int64_t as_int = num;
  double as_double = num;
  EXPECT(as_int == 3 && as_double == 3.0);
  TVMRetValue dt;
  dt = DataType::Float(16);
  EXPECT(dt.operator DataType() == DataType::Float(16));
}

static void DataTypes() {
  EXPECT(DLDataType2String(DataType::Float(32)) == "float32");
  EXPECT(DLDataType2String(DataType::Int(8, 4)) == "int8x4");
  EXPECT(DLDataType2String(DataType::Bool()) == "bool");
  DataType t(String2DLDataType("uint16"));
  EXPECT(t.is_uint() && t.bits() == 16 && t.lanes() == 1 && t.bytes() == 2);
  EXPECT(DataType(String2DLDataType("float16x8")) == DataType::Float(16, 8));
  std::printf("data types: float32 int8x4 bool uint16 float16x8\n");
}

static void Logging() {
  bool thrown = false;
  try {
    LOG(FATAL) << "fatal " << 42;
  } catch (const tvm::Error& e) {
    thrown = std::string(e.what()).find("fatal 42") != std::string::npos;
  }
  EXPECT(thrown);
  thrown = false;
  try {
    int two = 2;
    ICHECK_EQ(two, 3) << "two is not three";
  } catch (const tvm::Error& e) {
    thrown = std::string(e.what()).find("two is not three") != std::string::npos;
  }
  EXPECT(thrown);
  thrown = false;
  try {
    CHECK(1 + 1 == 3) << "arithmetic";
  } catch (const tvm::runtime::Error& e) {
    thrown = std::string(e.what()).find("arithmetic") != std::string::npos;
  }
  EXPECT(thrown);
  int value = 5;
  int* pv = &value;
  int* checked = ICHECK_NOTNULL(pv);
  EXPECT(checked == pv);
  LOG_IF(INFO, false) << "never printed";
  CHECK_LT(1, 2) << "not printed";
  ICHECK(true);
  ICHECK_NE(1, 2);
  ICHECK_GE(2, 2);
  LOG(INFO) << "an info line on stderr";
  LOG(WARNING) << "a warning line on stderr";
  std::printf("logging: LOG(FATAL) and failed checks throw tvm::Error\n");
}

int main() {
  NDArrays();
  Containers();
  Functions();
  DataTypes();
  Logging();
  std::printf("api: ok\n");
  return 0;
}

/*
 * Tests the simaccel plugin through the C API of an unmodified runtime.
 *   test_plugin load   PLUGIN.so  - registers with TVMDeviceLoadPlugin(path)
 *   test_plugin env    PLUGIN.so  - relies on TVM_DEVICE_PLUGINS (set by the caller)
 *   test_plugin global PLUGIN.so  - registers a `device_api.simaccel` PackedFunc
 * then allocates on the device, copies both ways, loads a "simk" module from a file, runs
 * its kernels, and (mode load) checks that bad plugins are refused with clear errors.
 *   test_plugin graph  PLUGIN.so ADD.so - loads the plugin, then runs a graph executor graph
 * with nodes on simaccel and on the CPU: ADD.so is a TVM-compiled CPU library with
 * myadd(A, B, C), float32[1024] (the add_static fixture).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/device_plugin.h>

static int failures = 0;
#define EXPECT(cond, what)                                          \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, \
              __LINE__, what, TVMGetLastError());                   \
      failures++;                                                   \
    }                                                               \
  } while (0)
#define OK(call) EXPECT((call) == 0, #call)

enum { SIM = 40, N = 1000 };

static const TVMDevicePlugin* g_table;

static int device_api_simaccel(TVMValue* args, int* codes, int n, TVMRetValueHandle ret,
                               void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  TVMValue v;
  int code = kTVMOpaqueHandle;
  v.v_handle = (void*)g_table;
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

static TVMValue call1(const char* global, TVMValue* args, int* codes, int n, int* ret_code) {
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  ret.v_int64 = 0;
  OK(TVMFuncGetGlobal(global, &f));
  EXPECT(f != NULL, global);
  if (f) {
    OK(TVMFuncCall(f, args, codes, n, &ret, ret_code));
    TVMFuncFree(f);
  }
  return ret;
}

static DLTensor* sim_array(int64_t n) {
  DLTensor* t = NULL;
  OK(TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, SIM, 0, &t));
  return t;
}

static void bad_plugins(void) {
  TVMDevicePlugin bad = *g_table;
  bad.abi_version = 99;
  EXPECT(TVMDeviceRegisterPlugin(&bad) != 0, "wrong ABI version refused");
  EXPECT(strstr(TVMGetLastError(), "ABI version 99") != NULL, "message names the version");
  bad = *g_table;
  EXPECT(TVMDeviceRegisterPlugin(&bad) != 0, "taken device type refused");
  EXPECT(strstr(TVMGetLastError(), "already taken") != NULL, "message says taken");
  bad.device_type = 5;
  bad.name = "other";
  EXPECT(TVMDeviceRegisterPlugin(&bad) != 0, "device type outside the extension range");
  EXPECT(strstr(TVMGetLastError(), "extension range") != NULL, "message names the range");
  bad.device_type = 41;
  bad.copy_data = NULL;
  EXPECT(TVMDeviceRegisterPlugin(&bad) != 0, "missing required function refused");
  EXPECT(strstr(TVMGetLastError(), "copy_data") != NULL, "message names copy_data");
  bad = *g_table;
  bad.struct_size = 8;
  EXPECT(TVMDeviceRegisterPlugin(&bad) != 0, "short struct refused");
  EXPECT(TVMDeviceLoadPlugin("/nonexistent/plugin.so") != 0, "missing plugin file");
  EXPECT(strstr(TVMGetLastError(), "/nonexistent/plugin.so") != NULL, "message names the file");
}

/* A graph over float32[1024]: x and y go to simaccel (__copy), sim_add and sim_relu run
 * there, the result comes back (__copy) and the TVM-compiled myadd adds w on the CPU. */
static const char kMixedGraph[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"y\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"w\", \"inputs\": []},"
    "{\"op\": \"tvm_op\", \"name\": \"x_sim\", \"attrs\": {\"func_name\": \"__copy\","
    " \"num_inputs\": \"1\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
    " \"inputs\": [[0, 0, 0]]},"
    "{\"op\": \"tvm_op\", \"name\": \"y_sim\", \"attrs\": {\"func_name\": \"__copy\","
    " \"num_inputs\": \"1\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
    " \"inputs\": [[1, 0, 0]]},"
    "{\"op\": \"tvm_op\", \"name\": \"s\", \"attrs\": {\"func_name\": \"sim_add\","
    " \"num_inputs\": \"2\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
    " \"inputs\": [[3, 0, 0], [4, 0, 0]]},"
    "{\"op\": \"tvm_op\", \"name\": \"r\", \"attrs\": {\"func_name\": \"sim_relu\","
    " \"num_inputs\": \"1\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
    " \"inputs\": [[5, 0, 0]]},"
    "{\"op\": \"tvm_op\", \"name\": \"r_cpu\", \"attrs\": {\"func_name\": \"__copy\","
    " \"num_inputs\": \"1\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
    " \"inputs\": [[6, 0, 0]]},"
    "{\"op\": \"tvm_op\", \"name\": \"out\", \"attrs\": {\"func_name\": \"myadd\","
    " \"num_inputs\": \"2\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
    " \"inputs\": [[7, 0, 0], [2, 0, 0]]}],"
    "\"arg_nodes\": [0, 1, 2], \"heads\": [[8, 0, 0]],"
    "\"attrs\": {"
    "\"dltype\": [\"list_str\", [\"float32\", \"float32\", \"float32\", \"float32\","
    " \"float32\", \"float32\", \"float32\", \"float32\", \"float32\"]],"
    "\"storage_id\": [\"list_int\", [0, 1, 2, 3, 4, 5, 6, 7, 8]],"
    "\"shape\": [\"list_shape\", [[1024], [1024], [1024], [1024], [1024], [1024], [1024],"
    " [1024], [1024]]],"
    "\"device_index\": [\"list_int\", [1, 1, 1, 40, 40, 40, 40, 1, 1]]},"
    "\"node_row_ptr\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}";

/* Calls a module function; returns the value (and its code in *code). */
static TVMValue mod_call(TVMModuleHandle m, const char* name, TVMValue* args, int* codes, int n,
                         int* code) {
  TVMFunctionHandle f = NULL;
  TVMValue ret;
  ret.v_int64 = 0;
  OK(TVMModGetFunction(m, name, 0, &f));
  EXPECT(f != NULL, name);
  if (f) {
    OK(TVMFuncCall(f, args, codes, n, &ret, code));
    TVMFuncFree(f);
  }
  return ret;
}

/* Mode graph: nodes on simaccel and on the CPU in one graph executor. */
static int mixed_graph(const char* plugin, const char* add_lib) {
  enum { M = 1024 };
  OK(TVMDeviceLoadPlugin(plugin));
  const char* path = "simaccel_graph.simk";
  FILE* fp = fopen(path, "w");
  fputs("sim_add\nsim_relu\n", fp);
  fclose(fp);
  TVMModuleHandle lib = NULL, sim = NULL;
  OK(TVMModLoadFromFile(add_lib, "so", &lib));
  OK(TVMModLoadFromFile(path, "simk", &sim));
  remove(path);
  if (!lib || !sim) return 1;
  /* Placed entirely on simaccel, a graph of the CPU library's kernel is refused (its code
   * would read device handles as host pointers), not run into a crash. */
  static const char kCpuOnly[] =
      "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
      "{\"op\": \"null\", \"name\": \"w\", \"inputs\": []},"
      "{\"op\": \"tvm_op\", \"name\": \"out\", \"attrs\": {\"func_name\": \"myadd\","
      " \"num_inputs\": \"2\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"},"
      " \"inputs\": [[0, 0, 0], [1, 0, 0]]}],"
      "\"arg_nodes\": [0, 1], \"heads\": [[2, 0, 0]], \"attrs\": {"
      "\"dltype\": [\"list_str\", [\"float32\", \"float32\", \"float32\"]],"
      "\"storage_id\": [\"list_int\", [0, 1, 2]],"
      "\"shape\": [\"list_shape\", [[1024], [1024], [1024]]]},"
      "\"node_row_ptr\": [0, 1, 2, 3]}";
  {
    TVMFunctionHandle create = NULL;
    OK(TVMFuncGetGlobal("tvm.graph_executor.create", &create));
    TVMValue a[4], r;
    int c[4] = {kTVMStr, kTVMModuleHandle, kDLInt, kDLInt}, rc = 0;
    a[0].v_str = kCpuOnly;
    a[1].v_handle = lib;
    a[2].v_int64 = SIM;
    a[3].v_int64 = 0;
    EXPECT(TVMFuncCall(create, a, c, 4, &r, &rc) != 0, "CPU code on simaccel data is refused");
    EXPECT(strstr(TVMGetLastError(), "only CPU code") != NULL, "the error says why");
    TVMFuncFree(create);
  }
  /* The executor finds sim_add/sim_relu among the library's imports. */
  OK(TVMModImport(lib, sim));

  TVMValue a[6];
  int c[6], rc = 0;
  a[0].v_str = kMixedGraph;
  c[0] = kTVMStr;
  a[1].v_handle = lib;
  c[1] = kTVMModuleHandle;
  a[2].v_int64 = kDLCPU;
  a[3].v_int64 = 0;
  a[4].v_int64 = SIM;
  a[5].v_int64 = 0;
  c[2] = c[3] = c[4] = c[5] = kDLInt;
  TVMValue g = call1("tvm.graph_executor.create", a, c, 6, &rc);
  EXPECT(rc == kTVMModuleHandle, "graph executor over cpu(0) and simaccel(0)");
  if (rc != kTVMModuleHandle) return 1;
  TVMModuleHandle gmod = g.v_handle;

  static float x[M], y[M], w[M], out[M];
  for (int i = 0; i < M; ++i) {
    x[i] = (float)(i % 17) - 8.0f;
    y[i] = (float)(i % 5) - 2.5f;
    w[i] = 0.25f * (float)i;
  }
  const char* names[3] = {"x", "y", "w"};
  float* host[3] = {x, y, w};
  int64_t shape = M;
  for (int k = 0; k < 3; ++k) {
    DLTensor* t = NULL;
    OK(TVMArrayAlloc(&shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &t));
    OK(TVMArrayCopyFromBytes(t, host[k], sizeof(x)));
    a[0].v_str = names[k];
    c[0] = kTVMStr;
    a[1].v_handle = t;
    c[1] = kTVMNDArrayHandle;
    mod_call(gmod, "set_input", a, c, 2, &rc);
    TVMArrayFree(t);
  }
  for (int rep = 0; rep < 3; ++rep) mod_call(gmod, "run", NULL, NULL, 0, &rc);
  a[0].v_int64 = 0;
  c[0] = kDLInt;
  TVMValue o = mod_call(gmod, "get_output", a, c, 1, &rc);
  DLTensor* ot = (DLTensor*)o.v_handle;
  EXPECT(rc == kTVMNDArrayHandle && ot->device.device_type == kDLCPU, "output on the CPU");
  OK(TVMArrayCopyToBytes(ot, out, sizeof(out)));
  TVMArrayFree(ot);
  int good = 1;
  for (int i = 0; i < M; ++i) {
    float s = x[i] + y[i];
    if (out[i] != (s > 0 ? s : 0) + w[i]) good = 0;
  }
  /* sim_add and sim_relu refuse tensors that are not on simaccel, so a good result also
   * shows the executor placed their entries on the device. */
  EXPECT(good, "relu(x + y) on simaccel, + w on the CPU");
  TVMModFree(gmod);
  TVMModFree(sim);
  TVMModFree(lib);
  printf("simaccel plugin (graph): %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s load|env|global PLUGIN.so\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cannot open %s: %s\n", argv[2], dlerror());
    return 1;
  }
  g_table = ((TVMDevicePluginInitFunc)dlsym(lib, "TVMDevicePluginInit"))();
  if (strcmp(mode, "graph") == 0) {
    if (argc < 4) {
      fprintf(stderr, "usage: %s graph PLUGIN.so ADD.so\n", argv[0]);
      return 2;
    }
    return mixed_graph(argv[2], argv[3]);
  }

  if (strcmp(mode, "load") == 0) {
    OK(TVMDeviceLoadPlugin(argv[2]));
  } else if (strcmp(mode, "global") == 0) {
    TVMFunctionHandle f = NULL;
    OK(TVMFuncCreateFromCFunc(device_api_simaccel, NULL, NULL, &f));
    OK(TVMFuncRegisterGlobal("device_api.simaccel", f, 0));
    TVMFuncFree(f);
  }

  /* Names resolve both ways. */
  TVMValue a[3];
  int c[3], rc;
  a[0].v_int64 = SIM;
  c[0] = kDLInt;
  TVMValue name = call1("runtime.DeviceTypeToName", a, c, 1, &rc);
  EXPECT(rc == kTVMStr && strcmp(name.v_str, "simaccel") == 0, "DeviceTypeToName(40)");
  a[0].v_str = "simaccel";
  c[0] = kTVMStr;
  TVMValue ty = call1("runtime.DeviceNameToType", a, c, 1, &rc);
  EXPECT(ty.v_int64 == SIM, "DeviceNameToType(simaccel)");
  a[0].v_int64 = SIM;
  a[1].v_int64 = 0;
  a[2].v_int64 = 0; /* kExist */
  c[0] = c[1] = c[2] = kDLInt;
  TVMValue exist = call1("runtime.GetDeviceAttr", a, c, 3, &rc);
  EXPECT(rc == kDLInt && exist.v_int64 == 1, "simaccel(0) exists");

  /* Memory: allocate, copy in, copy device to device, copy out. */
  float host[N], back[N];
  for (int i = 0; i < N; ++i) host[i] = (float)i - 500.0f;
  DLTensor* x = sim_array(N);
  DLTensor* y = sim_array(N);
  DLTensor* z = sim_array(N);
  OK(TVMArrayCopyFromBytes(x, host, sizeof(host)));
  OK(TVMArrayCopyFromTo(x, y, NULL));
  OK(TVMArrayCopyToBytes(y, back, sizeof(back)));
  EXPECT(memcmp(host, back, sizeof(host)) == 0, "round trip through the device");

  /* A module file in the plugin's own format; its kernels run on device tensors. */
  const char* path = "simaccel_test.simk";
  FILE* fp = fopen(path, "w");
  fputs("sim_add\nsim_relu\n", fp);
  fclose(fp);
  TVMModuleHandle mod = NULL;
  OK(TVMModLoadFromFile(path, "simk", &mod));
  TVMFunctionHandle add = NULL, relu = NULL, mul = NULL;
  OK(TVMModGetFunction(mod, "sim_add", 0, &add));
  OK(TVMModGetFunction(mod, "sim_relu", 0, &relu));
  OK(TVMModGetFunction(mod, "sim_mul", 0, &mul));
  EXPECT(add && relu && mul == NULL, "module functions (sim_mul not in this module)");
  TVMValue args[3];
  int codes[3] = {kTVMNDArrayHandle, kTVMNDArrayHandle, kTVMNDArrayHandle};
  args[0].v_handle = x;
  args[1].v_handle = y;
  args[2].v_handle = z;
  OK(TVMFuncCall(add, args, codes, 3, a, &rc));
  args[0].v_handle = z;
  args[1].v_handle = z;
  OK(TVMFuncCall(relu, args, codes, 2, a, &rc));
  OK(TVMArrayCopyToBytes(z, back, sizeof(back)));
  int good = 1;
  for (int i = 0; i < N; ++i) {
    float want = 2 * host[i] > 0 ? 2 * host[i] : 0;
    if (back[i] != want) good = 0;
  }
  EXPECT(good, "relu(x + y) computed on the device");

  /* A failing plugin call surfaces with the plugin's message and context. */
  DLTensor* huge = NULL;
  int64_t big = (int64_t)1 << 30;
  EXPECT(TVMArrayAlloc(&big, 1, kDLFloat, 32, 1, SIM, 0, &huge) != 0, "huge allocation fails");
  EXPECT(strstr(TVMGetLastError(), "out of device memory") != NULL, "plugin message kept");
  EXPECT(strstr(TVMGetLastError(), "simaccel") != NULL, "context names the plugin");
  /* A kernel given CPU tensors refuses them. */
  DLTensor* cpu = NULL;
  int64_t n = N;
  OK(TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, kDLCPU, 0, &cpu));
  args[0].v_handle = cpu;
  args[1].v_handle = z;
  EXPECT(TVMFuncCall(relu, args, codes, 2, a, &rc) != 0, "kernel refuses CPU tensors");

  if (strcmp(mode, "load") == 0) bad_plugins();

  /* The runtime keeps working. */
  OK(TVMArrayCopyFromBytes(cpu, host, sizeof(host)));
  TVMArrayFree(cpu);
  TVMFuncFree(add);
  TVMFuncFree(relu);
  TVMModFree(mod);
  TVMArrayFree(x);
  TVMArrayFree(y);
  TVMArrayFree(z);
  remove(path);
  printf("simaccel plugin (%s): %s\n", mode, failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}

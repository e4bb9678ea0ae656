/*
 * The static deploy program of issue 32: the bundled mlp compiled as a system library
 * (mlp_syslib.o, from build_model.py), its graph and weights compiled in (mlp_model.h), and the
 * runtime's `minimal` static library (system libraries only, the graph executor, no threads).
 * Runs the model once on a fixed input and compares the output with what the reference runtime
 * computed for it; exits 1 on a wrong output or an error.
 *
 *   static_mlp            (prints the ten outputs and "static_mlp: output matches")
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#include "mlp_model.h"

#define CHECK(call)                                                 \
  do {                                                              \
    if ((call) != 0) {                                              \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError()); \
      return 1;                                                     \
    }                                                               \
  } while (0)

/* Calls module function `name` with the given arguments; the result (if any) in *ret. */
static int call(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes, int n,
                TVMValue* ret, int* ret_code) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(mod, name, 0, &f) != 0 || f == NULL) {
    fprintf(stderr, "the graph executor has no %s: %s\n", name, f ? "" : TVMGetLastError());
    return 1;
  }
  int rc = TVMFuncCall(f, args, codes, n, ret, ret_code);
  if (rc != 0) fprintf(stderr, "%s failed: %s\n", name, TVMGetLastError());
  TVMFuncFree(f);
  return rc;
}

int main(void) {
  TVMValue ret, args[4];
  int ret_code = 0, codes[4];

  /* The system library: the model's kernels registered themselves at start-up. */
  TVMFunctionHandle f = NULL;
  CHECK(TVMFuncGetGlobal("runtime.SystemLib", &f));
  if (!f) {
    fprintf(stderr, "runtime.SystemLib is missing\n");
    return 1;
  }
  CHECK(TVMFuncCall(f, NULL, NULL, 0, &ret, &ret_code));
  TVMModuleHandle lib = ret.v_handle;
  CHECK(TVMFuncFree(f));

  /* tvm.graph_executor.create(graph_json, lib, device_type, device_id) */
  CHECK(TVMFuncGetGlobal("tvm.graph_executor.create", &f));
  if (!f) {
    fprintf(stderr, "tvm.graph_executor.create is missing\n");
    return 1;
  }
  args[0].v_str = mlp_graph_json;
  codes[0] = kTVMStr;
  args[1].v_handle = lib;
  codes[1] = kTVMModuleHandle;
  args[2].v_int64 = kDLCPU;
  codes[2] = kDLInt;
  args[3].v_int64 = 0;
  codes[3] = kDLInt;
  CHECK(TVMFuncCall(f, args, codes, 4, &ret, &ret_code));
  TVMModuleHandle gmod = ret.v_handle;
  CHECK(TVMFuncFree(f));

  TVMByteArray params = {(const char*)mlp_params, sizeof(mlp_params)};
  args[0].v_handle = &params;
  codes[0] = kTVMBytes;
  if (call(gmod, "load_params", args, codes, 1, &ret, &ret_code)) return 1;

  float input[64], output[10];
  memcpy(input, mlp_input, sizeof(input));
  int64_t in_shape[2] = {1, 64}, out_shape[2] = {1, 10};
  DLTensor x = {input, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, in_shape, NULL, 0};
  DLTensor y = {output, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, out_shape, NULL, 0};

  args[0].v_str = "data";
  codes[0] = kTVMStr;
  args[1].v_handle = &x;
  codes[1] = kTVMDLTensorHandle;
  if (call(gmod, "set_input", args, codes, 2, &ret, &ret_code)) return 1;
  if (call(gmod, "run", NULL, NULL, 0, &ret, &ret_code)) return 1;
  for (int i = 0; i < 10; ++i) output[i] = NAN;
  args[0].v_int64 = 0;
  codes[0] = kDLInt;
  args[1].v_handle = &y;
  codes[1] = kTVMDLTensorHandle;
  if (call(gmod, "get_output", args, codes, 2, &ret, &ret_code)) return 1;

  int bad = 0;
  for (int i = 0; i < 10; ++i) {
    float want = mlp_expected[i];
    int ok = fabsf(output[i] - want) <= 1e-12f + 1e-5f * fabsf(want);
    printf("output[%d] = %.7g (reference %.7g)%s\n", i, output[i], want, ok ? "" : "  WRONG");
    bad += !ok;
  }
  CHECK(TVMModFree(gmod));
  CHECK(TVMModFree(lib));
  if (bad) {
    fprintf(stderr, "static_mlp: %d of 10 outputs differ from the reference\n", bad);
    return 1;
  }
  printf("static_mlp: output matches the reference\n");
  return 0;
}

/*
 * Deploys a TVM-compiled model through the C API only: load the library, create the graph
 * executor from its factory, set the input, run, read the outputs.
 *
 *   deploy_model MODEL.so [INPUT_NAME]
 *
 * The input gets deterministic values (sin of the element index) so that two runtimes can be
 * compared by their printed output, which ends with an FNV-1a hash of every output byte.
 */
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    if ((call) != 0) {                                                           \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
              TVMGetLastError());                                                \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* 64-bit FNV-1a hash of a byte range. */
static unsigned long long fnv1a(const void* data, size_t n) {
  const unsigned char* p = (const unsigned char*)data;
  unsigned long long h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

/* Calls a module function with the given arguments and returns the value. */
static TVMValue call(TVMFunctionHandle f, TVMValue* args, int* codes, int n, int* ret_code) {
  TVMValue ret;
  CHECK(TVMFuncCall(f, args, codes, n, &ret, ret_code));
  return ret;
}

static TVMFunctionHandle get_func(TVMModuleHandle mod, const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "the module has no function %s\n", name);
    exit(1);
  }
  return f;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.so [INPUT_NAME]\n", argv[0]);
    return 2;
  }
  const char* input_name = argc > 2 ? argv[2] : "data";
  TVMModuleHandle lib = NULL;
  CHECK(TVMModLoadFromFile(argv[1], "so", &lib));

  /* lib["default"](cpu(0)) gives the executor module. */
  TVMFunctionHandle factory = get_func(lib, "default");
  TVMValue arg;
  int code = kDLDevice, ret_code = 0;
  arg.v_device.device_type = kDLCPU;
  arg.v_device.device_id = 0;
  TVMValue rv = call(factory, &arg, &code, 1, &ret_code);
  if (ret_code != kTVMModuleHandle) {
    fprintf(stderr, "factory returned type code %d, not a module\n", ret_code);
    return 1;
  }
  TVMModuleHandle gmod = rv.v_handle;
  TVMFunctionHandle set_input = get_func(gmod, "set_input");
  TVMFunctionHandle get_input = get_func(gmod, "get_input");
  TVMFunctionHandle run = get_func(gmod, "run");
  TVMFunctionHandle get_output = get_func(gmod, "get_output");
  TVMFunctionHandle get_num_outputs = get_func(gmod, "get_num_outputs");
  TVMFunctionHandle get_input_index = get_func(gmod, "get_input_index");

  /* Find the input's shape through the executor's own input tensor. */
  arg.v_str = input_name;
  code = kTVMStr;
  TVMValue idx = call(get_input_index, &arg, &code, 1, &ret_code);
  if (idx.v_int64 < 0) {
    fprintf(stderr, "the model has no input named %s\n", input_name);
    return 1;
  }
  arg.v_int64 = idx.v_int64;
  code = kDLInt;
  TVMValue in = call(get_input, &arg, &code, 1, &ret_code);
  DLTensor* in_t = (DLTensor*)in.v_handle;
  int64_t n = 1;
  for (int i = 0; i < in_t->ndim; ++i) n *= in_t->shape[i];
  if (in_t->dtype.code != kDLFloat || in_t->dtype.bits != 32) {
    fprintf(stderr, "this example feeds float32 inputs only\n");
    return 1;
  }
  DLTensor* x = NULL;
  CHECK(TVMArrayAlloc(in_t->shape, in_t->ndim, kDLFloat, 32, 1, kDLCPU, 0, &x));
  for (int64_t i = 0; i < n; ++i) ((float*)x->data)[i] = (float)sin((double)i * 0.1);

  TVMValue args[2];
  int codes[2];
  args[0].v_str = input_name;
  codes[0] = kTVMStr;
  args[1].v_handle = x;
  codes[1] = kTVMNDArrayHandle;
  call(set_input, args, codes, 2, &ret_code);
  call(run, NULL, NULL, 0, &ret_code);

  TVMValue nout = call(get_num_outputs, NULL, NULL, 0, &ret_code);
  for (int64_t o = 0; o < nout.v_int64; ++o) {
    arg.v_int64 = o;
    code = kDLInt;
    TVMValue out = call(get_output, &arg, &code, 1, &ret_code);
    DLTensor* t = (DLTensor*)out.v_handle;
    int64_t m = 1;
    printf("output %lld shape (", (long long)o);
    for (int i = 0; i < t->ndim; ++i) {
      m *= t->shape[i];
      printf(i ? ", %lld" : "%lld", (long long)t->shape[i]);
    }
    printf(")\n");
    if (t->dtype.code == kDLFloat && t->dtype.bits == 32) {
      const float* v = (const float*)t->data;
      int64_t best = 0;
      for (int64_t i = 0; i < m; ++i) {
        if (v[i] > v[best]) best = i;
        if (i < 10) printf("  [%lld] %.6f\n", (long long)i, v[i]);
      }
      printf("  argmax %lld\n", (long long)best);
    }
    printf("  fnv1a %016llx\n", fnv1a(t->data, (size_t)m * ((t->dtype.bits * t->dtype.lanes + 7) / 8)));
    CHECK(TVMArrayFree(t));
  }
  CHECK(TVMArrayFree(in_t));
  CHECK(TVMArrayFree(x));
  CHECK(TVMFuncFree(set_input));
  CHECK(TVMFuncFree(get_input));
  CHECK(TVMFuncFree(run));
  CHECK(TVMFuncFree(get_output));
  CHECK(TVMFuncFree(get_num_outputs));
  CHECK(TVMFuncFree(get_input_index));
  CHECK(TVMFuncFree(factory));
  CHECK(TVMModFree(gmod));
  CHECK(TVMModFree(lib));
  return 0;
}

/*
 * Host side of a TVM-style CUDA library for the CUDA backend tests: packed functions that
 * look their kernels up through TVMBackendGetFuncFromEnv (as TVM's generated host code does)
 * and launch them with the kernel arguments followed by the launch parameters. The test
 * compiles this file together with a generated definition of __tvm_dev_mblob (the serialised
 * cuda module).
 */
#include <stdint.h>

#include <tvm/runtime/c_backend_api.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT void* __tvm_module_ctx = NULL;
EXPORT int (*__TVMFuncCall)(TVMFunctionHandle, TVMValue*, int*, int, TVMValue*, int*) = NULL;
EXPORT void (*__TVMAPISetLastError)(const char*) = NULL;
EXPORT int (*__TVMBackendGetFuncFromEnv)(void*, const char*, TVMFunctionHandle*) = NULL;

static int set_device(const DLTensor* t) {
  static TVMFunctionHandle f = NULL;
  if (f == NULL && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "__tvm_set_device", &f) != 0)
    return -1;
  TVMValue v[2], rv;
  int c[2] = {kTVMArgInt, kTVMArgInt}, rc;
  v[0].v_int64 = t->device.device_type;
  v[1].v_int64 = t->device.device_id;
  return __TVMFuncCall(f, v, c, 2, &rv, &rc);
}

static int check_tensors(TVMValue* args, int* codes, int n, int want) {
  if (n != want) {
    __TVMAPISetLastError("host function: wrong number of arguments");
    return -1;
  }
  for (int i = 0; i < n; ++i) {
    if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
      __TVMAPISetLastError("host function: expects tensors");
      return -1;
    }
  }
  (void)args;
  return 0;
}

/* vadd(a, b, c): c = a + b, 1-D float32 tensors on one CUDA device. */
EXPORT int vadd(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* rh) {
  (void)ret;
  (void)ret_code;
  (void)rh;
  if (check_tensors(args, codes, n, 3) != 0) return -1;
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* c = (DLTensor*)args[2].v_handle;
  if (set_device(a) != 0) return -1;
  static TVMFunctionHandle k = NULL;
  if (k == NULL && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "vadd_kernel", &k) != 0)
    return -1;
  int64_t len = a->shape[0];
  TVMValue v[6], rv;
  int tc[6] = {kTVMOpaqueHandle, kTVMOpaqueHandle, kTVMOpaqueHandle,
               kTVMArgInt,       kTVMArgInt,       kTVMArgInt};
  int rc;
  v[0].v_handle = (char*)a->data + a->byte_offset;
  v[1].v_handle = (char*)b->data + b->byte_offset;
  v[2].v_handle = (char*)c->data + c->byte_offset;
  v[3].v_int64 = len;
  v[4].v_int64 = (len + 127) / 128; /* blockIdx.x */
  v[5].v_int64 = 128;               /* threadIdx.x */
  return __TVMFuncCall(k, v, tc, 6, &rv, &rc);
}

/* scale(x, s): x *= s in place, through dynamic shared memory. */
EXPORT int scale(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* rh) {
  (void)ret;
  (void)ret_code;
  (void)rh;
  if (n != 2 || (codes[0] != kTVMDLTensorHandle && codes[0] != kTVMNDArrayHandle) ||
      codes[1] != kTVMArgFloat) {
    __TVMAPISetLastError("scale: expects (tensor, float)");
    return -1;
  }
  DLTensor* x = (DLTensor*)args[0].v_handle;
  if (set_device(x) != 0) return -1;
  static TVMFunctionHandle k = NULL;
  if (k == NULL && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "scale_shared", &k) != 0)
    return -1;
  int64_t len = x->shape[0];
  TVMValue v[6], rv;
  int tc[6] = {kTVMOpaqueHandle, kTVMArgFloat, kTVMArgInt, kTVMArgInt, kTVMArgInt, kTVMArgInt};
  int rc;
  v[0].v_handle = (char*)x->data + x->byte_offset;
  v[1].v_float64 = args[1].v_float64;
  v[2].v_int64 = len;
  v[3].v_int64 = (len + 63) / 64; /* blockIdx.x */
  v[4].v_int64 = 64;              /* threadIdx.x */
  v[5].v_int64 = 64 * 4;          /* dynamic shared memory bytes */
  return __TVMFuncCall(k, v, tc, 6, &rv, &rc);
}

/*
 * A DSO module shaped like what TVM's code generator emits, loaded by test_module through
 * TVMModLoadFromFile: exported backend packed functions, the entry-name symbol
 * __tvm_main__, the module context __tvm_module_ctx, and the __TVM* function-pointer slots the
 * runtime fills in at load time. One function also calls the runtime directly, through an
 * undefined symbol resolved at dlopen time (this library is not linked to the runtime).
 */
#include <stdint.h>
#include <string.h>

#include <tvm/runtime/c_backend_api.h>

#define FIXTURE_EXPORT __attribute__((visibility("default")))

FIXTURE_EXPORT void* __tvm_module_ctx = NULL;
FIXTURE_EXPORT int (*__TVMFuncCall)(TVMFunctionHandle, TVMValue*, int*, int, TVMValue*,
                                    int*) = NULL;
FIXTURE_EXPORT void (*__TVMAPISetLastError)(const char*) = NULL;
FIXTURE_EXPORT int (*__TVMBackendGetFuncFromEnv)(void*, const char*, TVMFunctionHandle*) = NULL;
FIXTURE_EXPORT void* (*__TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = NULL;
FIXTURE_EXPORT int (*__TVMBackendFreeWorkspace)(int, int, void*) = NULL;
FIXTURE_EXPORT int (*__TVMBackendParallelLaunch)(FTVMParallelLambda, void*, int) = NULL;
FIXTURE_EXPORT int (*__TVMBackendParallelBarrier)(int, TVMParallelGroupEnv*) = NULL;
FIXTURE_EXPORT const char __tvm_main__[] = "fixture_add";

/* fixture_add(int a, int b) -> a + b */
FIXTURE_EXPORT int fixture_add(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                               void* rh) {
  (void)rh;
  if (n != 2 || codes[0] != kTVMArgInt || codes[1] != kTVMArgInt) {
    __TVMAPISetLastError("fixture_add: expects two ints");
    return -1;
  }
  ret->v_int64 = args[0].v_int64 + args[1].v_int64;
  *ret_code = kTVMArgInt;
  return 0;
}

/* Always fails with a known message. */
FIXTURE_EXPORT int fixture_fail(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                                void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)ret_code;
  (void)rh;
  __TVMAPISetLastError("fixture_fail: failing on purpose");
  return -1;
}

/* fixture_call_env(name: str, x: int) -> the function `name` (from the imports or the global
 * registry) applied to x. */
FIXTURE_EXPORT int fixture_call_env(TVMValue* args, int* codes, int n, TVMValue* ret,
                                    int* ret_code, void* rh) {
  (void)rh;
  if (n != 2 || codes[0] != kTVMStr) {
    __TVMAPISetLastError("fixture_call_env: expects (str, value)");
    return -1;
  }
  TVMFunctionHandle f = NULL;
  if (__TVMBackendGetFuncFromEnv(__tvm_module_ctx, args[0].v_str, &f) != 0) return -1;
  return __TVMFuncCall(f, args + 1, codes + 1, 1, ret, ret_code);
}

/* Workspace through the context slot and through the directly linked symbol. */
FIXTURE_EXPORT int fixture_workspace(TVMValue* args, int* codes, int n, TVMValue* ret,
                                     int* ret_code, void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  (void)rh;
  char* a = __TVMBackendAllocWorkspace(kDLCPU, 0, 1000, kDLFloat, 32);
  char* b = TVMBackendAllocWorkspace(kDLCPU, 0, 3000, kDLFloat, 32);
  if (a == NULL || b == NULL) {
    __TVMAPISetLastError("fixture_workspace: allocation failed");
    return -1;
  }
  memset(a, 1, 1000);
  memset(b, 2, 3000);
  if (TVMBackendFreeWorkspace(kDLCPU, 0, b) != 0) return -1;
  if (__TVMBackendFreeWorkspace(kDLCPU, 0, a) != 0) return -1;
  ret->v_int64 = 4000;
  *ret_code = kTVMArgInt;
  return 0;
}

static int fixture_lambda(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  __atomic_fetch_add((int*)cdata, 1, __ATOMIC_SEQ_CST);
  return __TVMBackendParallelBarrier(task_id, penv);
}

/* Runs a parallel launch with num_task = 0 and returns the number of tasks that ran. */
FIXTURE_EXPORT int fixture_parallel(TVMValue* args, int* codes, int n, TVMValue* ret,
                                    int* ret_code, void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  (void)rh;
  int count = 0;
  if (__TVMBackendParallelLaunch(fixture_lambda, &count, 0) != 0) return -1;
  ret->v_int64 = count;
  *ret_code = kTVMArgInt;
  return 0;
}

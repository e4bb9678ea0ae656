/*
 * One executable holding a TVM-compiled system-lib object and the runtime's static library:
 * the object registers its functions at start-up (TVMBackendRegisterSystemLibSymbol), and
 * runtime.SystemLib serves them as a module — no dlopen, no shared library.
 *
 *   syslib_demo            (runs myadd on 1024 floats and checks the sum)
 */
#include <stdio.h>
#include <stdlib.h>
#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    if ((call) != 0) {                                                                \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError());                   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(void) {
  TVMFunctionHandle system_lib = NULL;
  CHECK(TVMFuncGetGlobal("runtime.SystemLib", &system_lib));
  if (!system_lib) {
    fprintf(stderr, "runtime.SystemLib is missing\n");
    return 1;
  }
  TVMValue ret;
  int ret_code = 0;
  CHECK(TVMFuncCall(system_lib, NULL, NULL, 0, &ret, &ret_code));
  TVMModuleHandle mod = ret.v_handle;
  TVMFunctionHandle myadd = NULL;
  CHECK(TVMModGetFunction(mod, "myadd", 0, &myadd));
  if (!myadd) {
    fprintf(stderr, "the system library has no myadd: was the object linked in?\n");
    return 1;
  }
  enum { N = 1024 };
  int64_t shape[1] = {N};
  DLTensor *a, *b, *c;
  CHECK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &a));
  CHECK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &b));
  CHECK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &c));
  for (int i = 0; i < N; ++i) {
    ((float*)a->data)[i] = (float)i;
    ((float*)b->data)[i] = 0.5f * (float)i;
  }
  TVMValue args[3];
  int codes[3] = {kTVMNDArrayHandle, kTVMNDArrayHandle, kTVMNDArrayHandle};
  args[0].v_handle = a;
  args[1].v_handle = b;
  args[2].v_handle = c;
  CHECK(TVMFuncCall(myadd, args, codes, 3, &ret, &ret_code));
  for (int i = 0; i < N; ++i) {
    float want = (float)i + 0.5f * (float)i;
    if (((float*)c->data)[i] != want) {
      fprintf(stderr, "mismatch at %d: %f != %f\n", i, ((float*)c->data)[i], want);
      return 1;
    }
  }
  printf("syslib: myadd from the statically linked system library is correct\n");
  CHECK(TVMArrayFree(a));
  CHECK(TVMArrayFree(b));
  CHECK(TVMArrayFree(c));
  CHECK(TVMFuncFree(myadd));
  CHECK(TVMModFree(mod));
  CHECK(TVMFuncFree(system_lib));
  return 0;
}

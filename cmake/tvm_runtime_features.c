/*
 * Prints the Cargo features the library it is linked against was built with, one per line
 * (the global function runtime.BuiltFeatures, an Array of Strings). The CMake build runs it
 * after cargo, so the installed package (tvmFeatures.cmake, tvm_runtime.pc) reports what the
 * library has, not what was asked for.
 */
#include <stdio.h>

#include <tvm/runtime/c_runtime_api.h>

static int call1(const char* name, TVMValue* args, int* codes, int n, TVMValue* ret, int* code) {
  TVMFunctionHandle f = NULL;
  if (TVMFuncGetGlobal(name, &f) != 0 || f == NULL) {
    fprintf(stderr, "tvm_runtime_features: no global function %s: %s\n", name, TVMGetLastError());
    return -1;
  }
  int rc = TVMFuncCall(f, args, codes, n, ret, code);
  TVMFuncFree(f);
  if (rc != 0) fprintf(stderr, "tvm_runtime_features: %s failed: %s\n", name, TVMGetLastError());
  return rc;
}

int main(void) {
  TVMValue arr, r;
  int code = 0;
  if (call1("runtime.BuiltFeatures", NULL, NULL, 0, &arr, &code) != 0) return 1;
  if (code != kTVMObjectHandle) {
    fprintf(stderr, "tvm_runtime_features: runtime.BuiltFeatures returned type code %d\n", code);
    return 1;
  }
  int codes[2] = {kTVMObjectHandle, kDLInt};
  TVMValue args[2];
  args[0].v_handle = arr.v_handle;
  if (call1("runtime.ArraySize", args, codes, 1, &r, &code) != 0) return 1;
  int64_t n = r.v_int64;
  for (int64_t i = 0; i < n; ++i) {
    args[1].v_int64 = i;
    if (call1("runtime.ArrayGetItem", args, codes, 2, &r, &code) != 0) return 1;
    if (code == kTVMStr) {
      printf("%s\n", r.v_str);
      continue;
    }
    TVMValue s = r, out;
    int sc = kTVMObjectHandle;
    if (call1("runtime.GetFFIString", &s, &sc, 1, &out, &code) != 0 || code != kTVMStr) return 1;
    printf("%s\n", out.v_str);
    TVMObjectFree(s.v_handle);
  }
  TVMObjectFree(arr.v_handle);
  return 0;
}

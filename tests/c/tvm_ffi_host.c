/*
 * A plain C host (classic c_runtime_api.h only) running libraries compiled by TVM v0.27: the TE
 * kernel `add` of add.so, and `main` of the Relax models mlp.so, mlp_dyn.so and const.so
 * through the Relax VM's PackedFunc interface. Inputs come from the raw NAME.KEY.bin files of
 * scripts/build_ffi_fixtures.py; outputs are written to OUT/NAME.KEY.bin for a byte compare.
 *
 *   tvm_ffi_host FIXTURE_DIR OUT_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

static const char* dir;
static const char* out_dir;

#define CHECK(x)                                                              \
  do {                                                                        \
    if ((x) != 0) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, TVMGetLastError()); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static DLTensor* load_array(const char* name, const char* key, int ndim, const int64_t* shape) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.%s.bin", dir, name, key);
  DLTensor* t;
  CHECK(TVMArrayAlloc(shape, ndim, kDLFloat, 32, 1, kDLCPU, 0, &t));
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
  FILE* f = fopen(path, "rb");
  if (!f || fread(t->data, 4, n, f) != n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  return t;
}

static void save_array(const char* name, const char* key, const DLTensor* t) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.%s.bin", out_dir, name, key);
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(t->data, 4, n, f) != n) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
  printf("%s.%s written\n", name, key);
}

static TVMModuleHandle load_module(const char* name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.so", dir, name);
  TVMModuleHandle m;
  CHECK(TVMModLoadFromFile(path, "so", &m));
  return m;
}

static void run_add(void) {
  int64_t n = 37;
  TVMModuleHandle m = load_module("add");
  TVMFunctionHandle f;
  CHECK(TVMModGetFunction(m, "add", 0, &f));
  DLTensor* x = load_array("add", "x", 1, &n);
  DLTensor* y = load_array("add", "y", 1, &n);
  DLTensor* z;
  CHECK(TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, kDLCPU, 0, &z));
  TVMValue v[3];
  int c[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, kTVMDLTensorHandle};
  v[0].v_handle = x;
  v[1].v_handle = y;
  v[2].v_handle = z;
  TVMValue rv;
  int rc;
  CHECK(TVMFuncCall(f, v, c, 3, &rv, &rc));
  save_array("add", "z", z);
  /* A wrong shape: the kernel's own check, as a classic error. */
  int64_t four = 4;
  DLTensor* bad;
  CHECK(TVMArrayAlloc(&four, 1, kDLFloat, 32, 1, kDLCPU, 0, &bad));
  v[2].v_handle = bad;
  if (TVMFuncCall(f, v, c, 3, &rv, &rc) == 0) {
    fprintf(stderr, "a wrong shape was accepted\n");
    exit(1);
  }
  printf("wrong shape refused: %.60s\n", TVMGetLastError());
  TVMArrayFree(x);
  TVMArrayFree(y);
  TVMArrayFree(z);
  TVMArrayFree(bad);
  CHECK(TVMFuncFree(f));
  CHECK(TVMModFree(m));
}

/* Calls f with the given arguments and returns the result (an object handle or nothing). */
static TVMValue call(TVMFunctionHandle f, TVMValue* v, int* c, int n, int* code) {
  TVMValue rv;
  CHECK(TVMFuncCall(f, v, c, n, &rv, code));
  return rv;
}

static void run_relax(const char* name, int nargs, const char** keys, const int64_t (*shapes)[2],
                      const char* result) {
  TVMModuleHandle exec = load_module(name);
  TVMFunctionHandle load_exec, init, main_fn;
  CHECK(TVMModGetFunction(exec, "vm_load_executable", 0, &load_exec));
  int code;
  TVMValue vm = call(load_exec, NULL, NULL, 0, &code);
  CHECK(TVMModGetFunction(vm.v_handle, "vm_initialization", 0, &init));
  TVMValue iv[3];
  int ic[3] = {kDLInt, kDLInt, kDLInt};
  iv[0].v_int64 = kDLCPU; /* device type, device id, allocator (2 = pooled) */
  iv[1].v_int64 = 0;
  iv[2].v_int64 = 2;
  call(init, iv, ic, 3, &code);
  CHECK(TVMModGetFunction(vm.v_handle, "main", 0, &main_fn));
  TVMValue v[8];
  int c[8];
  DLTensor* in[8];
  for (int i = 0; i < nargs; i++) {
    in[i] = load_array(name, keys[i], 2, shapes[i]);
    v[i].v_handle = in[i];
    c[i] = kTVMNDArrayHandle;
  }
  TVMValue out = call(main_fn, v, c, nargs, &code);
  if (code != kTVMNDArrayHandle) {
    fprintf(stderr, "%s: main returned type code %d\n", name, code);
    exit(1);
  }
  save_array(name, result, (DLTensor*)out.v_handle);
  CHECK(TVMArrayFree((TVMArrayHandle)out.v_handle));
  for (int i = 0; i < nargs; i++) TVMArrayFree(in[i]);
  CHECK(TVMFuncFree(main_fn));
  CHECK(TVMFuncFree(init));
  CHECK(TVMModFree(vm.v_handle));
  CHECK(TVMFuncFree(load_exec));
  CHECK(TVMModFree(exec));
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: tvm_ffi_host FIXTURE_DIR OUT_DIR\n");
    return 2;
  }
  dir = argv[1];
  out_dir = argv[2];
  run_add();
  const char* mlp_keys[] = {"x", "w1", "w2"};
  const int64_t mlp_shapes[][2] = {{4, 16}, {16, 32}, {32, 8}};
  run_relax("mlp", 3, mlp_keys, mlp_shapes, "y");
  const char* dyn_keys[] = {"x5", "w1", "w2"};
  const int64_t dyn_shapes[][2] = {{5, 16}, {16, 32}, {32, 8}};
  run_relax("mlp_dyn", 3, dyn_keys, dyn_shapes, "y5");
  const char* dyn2_keys[] = {"x2", "w1", "w2"};
  const int64_t dyn2_shapes[][2] = {{2, 16}, {16, 32}, {32, 8}};
  run_relax("mlp_dyn", 3, dyn2_keys, dyn2_shapes, "y2");
  const char* const_keys[] = {"x"};
  const int64_t const_shapes[][2] = {{3, 16}};
  run_relax("const", 1, const_keys, const_shapes, "y");
  return 0;
}

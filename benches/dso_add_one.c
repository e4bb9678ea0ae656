/*
 * A hand-written DSO module in the shape TVM's code generator emits for
 *
 *     A = te.placeholder((1,), "float32"); B = te.placeholder((1,), "float32")
 *     C = te.compute((1,), lambda i: A[i] + B[i]); tvm.build(..., name="myadd")
 *
 * i.e. a backend packed function `myadd(A, B, C)` (TVMBackendPackedCFunc) with the argument
 * checks MakePackedAPI inserts (argument count, type codes, ndim, dtype, shape, strides,
 * device), plus the `__tvm_module_ctx` and `__TVMAPISetLastError` context slots the runtime
 * fills when it loads the library.
 *
 * benches/bench.c uses it (kernel_call.dso.*, module_load.dso) so that the kernel-call and
 * module-load benchmarks have a number even when no TVM-compiled fixture (add_one.so) exists.
 * It is not linked against the runtime: like TVM output, it reaches it only through the
 * context slots.
 */
#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT void* __tvm_module_ctx = NULL;
EXPORT void (*__TVMAPISetLastError)(const char*) = NULL;

static int error(const char* msg) {
  if (__TVMAPISetLastError) __TVMAPISetLastError(msg);
  return -1;
}

static int is_array_code(int c) {
  return c == kTVMDLTensorHandle || c == kTVMNDArrayHandle || c == kTVMOpaqueHandle ||
         c == kTVMNullptr;
}

static inline __attribute__((always_inline)) int check_tensor(const DLTensor* t, const char* what) {
  (void)what;
  if (t == NULL) return error("myadd: argument is NULL, expected a DLTensor");
  if (t->ndim != 1) return error("myadd: ndim mismatch, expected 1");
  if (!(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1))
    return error("myadd: dtype mismatch, expected float32");
  if (t->shape[0] != 1) return error("myadd: shape mismatch, expected (1,)");
  if (t->strides != NULL && t->strides[0] != 1)
    return error("myadd: expected a compact array");
  if (t->byte_offset != 0) return error("myadd: byte_offset must be 0");
  if (t->device.device_type != kDLCPU) return error("myadd: expected a CPU array");
  return 0;
}

EXPORT int myadd(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                 int* out_ret_tcode, void* resource_handle) {
  (void)resource_handle;
  if (num_args != 3) return error("myadd: num_args should be 3");
  if (!is_array_code(type_codes[0]) || !is_array_code(type_codes[1]) ||
      !is_array_code(type_codes[2]))
    return error("myadd: expected DLTensor arguments");
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* c = (DLTensor*)args[2].v_handle;
  if (check_tensor(a, "A") || check_tensor(b, "B") || check_tensor(c, "C")) return -1;
  if (b->device.device_id != a->device.device_id || c->device.device_id != a->device.device_id)
    return error("myadd: arguments on different devices");
  ((float*)c->data)[0] = ((const float*)a->data)[0] + ((const float*)b->data)[0];
  out_ret_value->v_int64 = 0;
  *out_ret_tcode = kTVMNullptr;
  return 0;
}

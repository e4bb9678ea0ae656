/*
 * NDArrays: TVMArrayAlloc (dtypes, shapes, devices, error paths), TVMArrayFree,
 * TVMArrayCopyFromBytes / TVMArrayCopyToBytes, TVMArrayCopyFromTo, TVMArrayGetTypeIndex,
 * DLPack exchange (TVMArrayToDLPack, TVMArrayFromDLPack, TVMDLManagedTensorCallDeleter)
 * and the runtime.TVMArrayCreateView global.
 */
#include "check.h"

/* kDLBool (= 6) is named only in DLPack >= 0.8 headers; the number is used either way. */
#ifdef TVMRT_HAVE_DL_BOOL
#define CODE_DL_BOOL ((int)kDLBool)
#else
#define CODE_DL_BOOL 6
#endif

static int is_aligned(const void* p, size_t a) { return ((uintptr_t)p % a) == 0; }

static TVMArrayHandle alloc_1d(int64_t n, int code, int bits) {
  TVMArrayHandle h = NULL;
  int64_t shape[1] = {n};
  CHECK_OK(TVMArrayAlloc(shape, 1, code, bits, 1, kDLCPU, 0, &h));
  return h;
}

static void test_alloc_layout(void) {
  int64_t shape[3] = {2, 3, 4};
  TVMArrayHandle a = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 3, kDLFloat, 32, 1, kDLCPU, 0, &a));
  CHECK(a != NULL);
  if (a == NULL) return;
  CHECK_EQ(a->ndim, 3);
  CHECK(a->shape != NULL && a->shape != shape); /* the runtime owns a copy */
  CHECK(a->shape[0] == 2 && a->shape[1] == 3 && a->shape[2] == 4);
  CHECK_EQ(a->dtype.code, kDLFloat);
  CHECK_EQ(a->dtype.bits, 32);
  CHECK_EQ(a->dtype.lanes, 1);
  CHECK_EQ(a->device.device_type, kDLCPU);
  CHECK_EQ(a->device.device_id, 0);
  CHECK(a->strides == NULL); /* compact */
  CHECK_EQ(a->byte_offset, 0);
  CHECK(a->data != NULL);
  CHECK(is_aligned(a->data, 64)); /* kAllocAlignment */
  shape[0] = 99;
  CHECK_EQ(a->shape[0], 2);
  /* The whole buffer is usable. */
  memset(a->data, 0xab, 2 * 3 * 4 * 4);
  unsigned t = 0;
  CHECK_OK(TVMArrayGetTypeIndex(a, &t));
  CHECK_EQ(t, 2); /* runtime.NDArray */
  CHECK_OK(TVMArrayFree(a));
}

static void check_dtype_ok(int code, int bits, int lanes, size_t elem_bytes) {
  int64_t shape[2] = {3, 5};
  TVMArrayHandle a = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 2, code, bits, lanes, kDLCPU, 0, &a));
  CHECK_MSG(a != NULL, "dtype code %d bits %d lanes %d", code, bits, lanes);
  if (a == NULL) return;
  CHECK(a->dtype.code == code && a->dtype.bits == bits && a->dtype.lanes == lanes);
  CHECK(is_aligned(a->data, 64));
  if (elem_bytes) {
    /* Round-trip the exact byte size through CopyFrom/ToBytes. */
    size_t n = 15 * elem_bytes;
    unsigned char* in = malloc(n);
    unsigned char* out = malloc(n);
    for (size_t i = 0; i < n; ++i) in[i] = (unsigned char)(i * 7 + 1);
    memset(out, 0, n);
    CHECK_OK(TVMArrayCopyFromBytes(a, in, n));
    CHECK_OK(TVMArrayCopyToBytes(a, out, n));
    CHECK_MSG(memcmp(in, out, n) == 0, "dtype code %d bits %d lanes %d", code, bits, lanes);
    free(in);
    free(out);
  }
  CHECK_OK(TVMArrayFree(a));
}

static void test_dtypes(void) {
  check_dtype_ok(kDLInt, 8, 1, 1);
  check_dtype_ok(kDLInt, 16, 1, 2);
  check_dtype_ok(kDLInt, 32, 1, 4);
  check_dtype_ok(kDLInt, 64, 1, 8);
  check_dtype_ok(kDLUInt, 8, 1, 1);
  check_dtype_ok(kDLUInt, 64, 1, 8);
  check_dtype_ok(kDLFloat, 16, 1, 2);
  check_dtype_ok(kDLFloat, 32, 1, 4);
  check_dtype_ok(kDLFloat, 64, 1, 8);
  check_dtype_ok(kDLBfloat, 16, 1, 2);
  check_dtype_ok(kDLFloat, 32, 4, 16); /* vector lanes */
  check_dtype_ok(kDLInt, 8, 16, 16);
  check_dtype_ok(kDLOpaqueHandle, 64, 1, 8);
  /* Sub-byte types are not packed: an element takes ceil(bits * lanes / 8) bytes.
   * bool: uint1 (TVM's boolean), int1, DLPack's kDLBool (8 bits). */
  check_dtype_ok(kDLUInt, 1, 1, 1);
  check_dtype_ok(kDLInt, 1, 1, 1);
  check_dtype_ok(CODE_DL_BOOL, 8, 1, 1);
  check_dtype_ok(kDLInt, 4, 1, 1);
  check_dtype_ok(kDLUInt, 4, 1, 1);
  check_dtype_ok(kDLInt, 4, 2, 1);
  check_dtype_ok(kDLUInt, 1, 4, 1);
}

static void test_alloc_errors(void) {
  int64_t shape[2] = {2, 3};
  TVMArrayHandle a = NULL;
  /* bits not a multiple of 8 (other than the 1/4-bit integer cases), or not a power of 2. */
  CHECK_FAIL(TVMArrayAlloc(shape, 2, kDLFloat, 33, 1, kDLCPU, 0, &a));
  CHECK_FAIL(TVMArrayAlloc(shape, 2, kDLFloat, 4, 1, kDLCPU, 0, &a));
  CHECK_FAIL(TVMArrayAlloc(shape, 2, kDLInt, 7, 1, kDLCPU, 0, &a));
  CHECK_FAIL(TVMArrayAlloc(shape, 2, kDLInt, 24, 1, kDLCPU, 0, &a));
  /* lanes 0. */
  CHECK_FAIL(TVMArrayAlloc(shape, 2, kDLFloat, 32, 0, kDLCPU, 0, &a));
  /* Unknown device type; a device API that is not built in (named in the message). */
  CHECK_FAIL(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, UNKNOWN_DEVICE, 0, &a));
  if (!cuda_present())
    CHECK_FAIL_MSG(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCUDA, 0, &a), "cuda");
  /* Negative dimension (the reference fails with std::bad_alloc). */
  int64_t neg[2] = {-1, 3};
  CHECK_FAIL(TVMArrayAlloc(neg, 2, kDLFloat, 32, 1, kDLCPU, 0, &a));
  /* An allocation that cannot be satisfied (2^50 float32 = 4 PiB). */
  int64_t huge[1] = {(int64_t)1 << 50};
  CHECK_FAIL(TVMArrayAlloc(huge, 1, kDLFloat, 32, 1, kDLCPU, 0, &a));
}

static void test_alloc_edge_shapes(void) {
  TVMArrayHandle a = NULL;
  /* Scalar: ndim 0, one element. */
  CHECK_OK(TVMArrayAlloc(NULL, 0, kDLInt, 32, 1, kDLCPU, 0, &a));
  if (a) {
    CHECK_EQ(a->ndim, 0);
    CHECK(a->data != NULL);
    int32_t v = 12345, w = 0;
    CHECK_OK(TVMArrayCopyFromBytes(a, &v, 4));
    CHECK_OK(TVMArrayCopyToBytes(a, &w, 4));
    CHECK_EQ(w, 12345);
    CHECK_FAIL(TVMArrayCopyToBytes(a, &w, 0));
    CHECK_OK(TVMArrayFree(a));
  }
  /* Zero-sized dimension: zero bytes. */
  int64_t zero[2] = {0, 5};
  a = NULL;
  CHECK_OK(TVMArrayAlloc(zero, 2, kDLFloat, 32, 1, kDLCPU, 0, &a));
  if (a) {
    CHECK_EQ(a->shape[0], 0);
    char dummy[4];
    CHECK_OK(TVMArrayCopyFromBytes(a, dummy, 0));
    CHECK_OK(TVMArrayCopyToBytes(a, dummy, 0));
    CHECK_FAIL(TVMArrayCopyToBytes(a, dummy, 4));
    CHECK_OK(TVMArrayFree(a));
  }
  /* The CPU accepts any device id (reference behaviour). */
  int64_t one[1] = {4};
  a = NULL;
  CHECK_OK(TVMArrayAlloc(one, 1, kDLFloat, 32, 1, kDLCPU, 5, &a));
  if (a) {
    CHECK_EQ(a->device.device_id, 5);
    CHECK_OK(TVMArrayFree(a));
  }
}

static void test_copy_bytes(void) {
  TVMArrayHandle a = alloc_1d(4, kDLFloat, 32);
  float in[5] = {1.5f, -2.0f, 3.25f, 4.0f, 99.0f};
  float out[5] = {0, 0, 0, 0, 0};
  CHECK_OK(TVMArrayCopyFromBytes(a, in, 16));
  CHECK(memcmp(a->data, in, 16) == 0);
  CHECK_OK(TVMArrayCopyToBytes(a, out, 16));
  CHECK(memcmp(out, in, 16) == 0);
  CHECK(out[4] == 0.0f); /* nothing written past the array */

  /* Size mismatches in either direction fail and leave both sides untouched. */
  float other[5] = {7, 7, 7, 7, 7};
  CHECK_FAIL(TVMArrayCopyFromBytes(a, other, 12));
  CHECK_FAIL(TVMArrayCopyFromBytes(a, other, 20));
  CHECK_FAIL(TVMArrayCopyFromBytes(a, other, 0));
  CHECK(memcmp(a->data, in, 16) == 0);
  float out2[5] = {0, 0, 0, 0, 0};
  CHECK_FAIL(TVMArrayCopyToBytes(a, out2, 12));
  CHECK_FAIL(TVMArrayCopyToBytes(a, out2, 20));
  CHECK(out2[0] == 0.0f && out2[3] == 0.0f);
  CHECK_OK(TVMArrayFree(a));
}

static void test_copy_from_to(void) {
  TVMArrayHandle a = alloc_1d(4, kDLFloat, 32);
  TVMArrayHandle b = alloc_1d(4, kDLFloat, 32);
  TVMArrayHandle c = alloc_1d(5, kDLFloat, 32);
  TVMArrayHandle d = alloc_1d(4, kDLInt, 32);
  float in[4] = {1, 2, 3, 4};
  CHECK_OK(TVMArrayCopyFromBytes(a, in, 16));
  CHECK_OK(TVMArrayCopyFromTo(a, b, NULL));
  CHECK(memcmp(b->data, in, 16) == 0);
  /* float32[4] -> int32[4]: the reference copies the bits (only the byte sizes must agree);
   * this runtime refuses a copy between different data types (a documented difference). The
   * reference has no runtime.BuiltFeatures. */
  TVMFunctionHandle features = NULL;
  int ours = TVMFuncGetGlobal("runtime.BuiltFeatures", &features) == 0 && features != NULL;
  if (features != NULL) TVMFuncFree(features);
  if (ours) {
    CHECK_FAIL(TVMArrayCopyFromTo(a, d, NULL));
    CHECK(strstr(TVMGetLastError(), "data types differ") != NULL);
  } else {
    CHECK_OK(TVMArrayCopyFromTo(a, d, NULL));
    CHECK(memcmp(d->data, in, 16) == 0);
  }
  /* Size mismatch. */
  CHECK_FAIL(TVMArrayCopyFromTo(a, c, NULL));
  CHECK_FAIL(TVMArrayCopyFromTo(c, a, NULL));
  /* A DLTensor that is not an NDArray works as a destination too. */
  float host[4] = {0, 0, 0, 0};
  int64_t shape[1] = {4};
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = host;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype = a->dtype;
  t.shape = shape;
  CHECK_OK(TVMArrayCopyFromTo(a, &t, NULL));
  CHECK(memcmp(host, in, 16) == 0);
  /* The CPU ignores the stream argument. */
  memset(host, 0, sizeof(host));
  CHECK_OK(TVMArrayCopyFromTo(a, &t, (TVMStreamHandle)(intptr_t)0x1234));
  CHECK(memcmp(host, in, 16) == 0);
  /* Unknown device type on one side; a device API that is not built in. */
  t.device.device_type = UNKNOWN_DEVICE;
  CHECK_FAIL(TVMArrayCopyFromTo(a, &t, NULL));
  t.device.device_type = kDLCUDA;
  if (!cuda_present()) CHECK_FAIL(TVMArrayCopyFromTo(a, &t, NULL));
  CHECK_OK(TVMArrayFree(a));
  CHECK_OK(TVMArrayFree(b));
  CHECK_OK(TVMArrayFree(c));
  CHECK_OK(TVMArrayFree(d));
}

/* ---- DLPack ---- */

static float ext_buffer[64] __attribute__((aligned(64)));
static int64_t ext_shape[2] = {4, 4};
static int ext_deleter_calls;
static DLManagedTensor* ext_deleter_arg;
static void ext_deleter(DLManagedTensor* self) {
  ext_deleter_calls++;
  ext_deleter_arg = self;
}

static void init_external(DLManagedTensor* m, void* data, uint64_t byte_offset) {
  memset(m, 0, sizeof(*m));
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.device.device_id = 0;
  m->dl_tensor.ndim = 2;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = ext_shape;
  m->dl_tensor.byte_offset = byte_offset;
  m->manager_ctx = (void*)(intptr_t)0x77;
  m->deleter = ext_deleter;
}

static void test_to_dlpack(void) {
  int64_t shape[2] = {2, 3};
  TVMArrayHandle a = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 2, kDLInt, 16, 1, kDLCPU, 0, &a));
  DLManagedTensor* m = NULL;
  CHECK_OK(TVMArrayToDLPack(a, &m));
  CHECK(m != NULL);
  if (m == NULL) return;
  CHECK_PTR_EQ(m->dl_tensor.data, a->data);
  CHECK_EQ(m->dl_tensor.ndim, 2);
  CHECK(m->dl_tensor.shape != NULL && m->dl_tensor.shape[0] == 2 && m->dl_tensor.shape[1] == 3);
  CHECK(m->dl_tensor.dtype.code == kDLInt && m->dl_tensor.dtype.bits == 16 &&
        m->dl_tensor.dtype.lanes == 1);
  CHECK_EQ(m->dl_tensor.device.device_type, kDLCPU);
  CHECK_EQ(m->dl_tensor.byte_offset, 0);
  CHECK(m->deleter != NULL);
  /* The DLPack tensor keeps the data alive after the NDArray handle is freed. */
  int16_t vals[6] = {1, 2, 3, 4, 5, 6};
  CHECK_OK(TVMArrayCopyFromBytes(a, vals, sizeof(vals)));
  CHECK_OK(TVMArrayFree(a));
  CHECK(memcmp(m->dl_tensor.data, vals, sizeof(vals)) == 0);

  /* Round trip: FromDLPack takes ownership of m; same data, no copy. */
  TVMArrayHandle b = NULL;
  CHECK_OK(TVMArrayFromDLPack(m, &b));
  CHECK(b != NULL);
  if (b) {
    CHECK_PTR_EQ(b->data, m->dl_tensor.data);
    unsigned t = 0;
    CHECK_OK(TVMArrayGetTypeIndex(b, &t));
    CHECK_EQ(t, 2);
    int16_t back[6] = {0};
    CHECK_OK(TVMArrayCopyToBytes(b, back, sizeof(back)));
    CHECK(memcmp(back, vals, sizeof(vals)) == 0);
    CHECK_OK(TVMArrayFree(b)); /* calls m's deleter, which releases the original */
  }

  /* Two exports are independent; each deleter releases one reference. */
  a = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 2, kDLInt, 16, 1, kDLCPU, 0, &a));
  DLManagedTensor *m1 = NULL, *m2 = NULL;
  CHECK_OK(TVMArrayToDLPack(a, &m1));
  CHECK_OK(TVMArrayToDLPack(a, &m2));
  CHECK(m1 != NULL && m2 != NULL && m1 != m2);
  CHECK_OK(TVMArrayFree(a));
  if (m1) TVMDLManagedTensorCallDeleter(m1);
  if (m2) {
    memset(m2->dl_tensor.data, 0, 12); /* still valid */
    TVMDLManagedTensorCallDeleter(m2);
  }
}

static void test_from_dlpack(void) {
  DLManagedTensor m;
  init_external(&m, ext_buffer, 0);
  ext_deleter_calls = 0;
  TVMArrayHandle h = NULL;
  CHECK_OK(TVMArrayFromDLPack(&m, &h));
  CHECK(h != NULL);
  if (h == NULL) return;
  CHECK_PTR_EQ(h->data, ext_buffer);
  CHECK_EQ(h->ndim, 2);
  CHECK(h->shape[0] == 4 && h->shape[1] == 4);
  CHECK(h->dtype.code == kDLFloat && h->dtype.bits == 32);
  CHECK_EQ(ext_deleter_calls, 0);
  /* Writes through the NDArray land in the external buffer. */
  float vals[16];
  for (int i = 0; i < 16; ++i) vals[i] = (float)i;
  CHECK_OK(TVMArrayCopyFromBytes(h, vals, sizeof(vals)));
  CHECK(memcmp(ext_buffer, vals, sizeof(vals)) == 0);

  /* Retain/free through the object API counts like any reference. */
  TVMValue r;
  int rc = -1;
  TVMValue arg = val_handle(h);
  int code = kTVMNDArrayHandle;
  CHECK_OK(TVMCbArgToReturn(&arg, &code)); /* +1 reference */
  CHECK_EQ(code, kTVMNDArrayHandle);
  CHECK_OK(TVMArrayFree(h));
  CHECK_EQ(ext_deleter_calls, 0);
  (void)r;
  (void)rc;
  CHECK_OK(TVMArrayFree((TVMArrayHandle)arg.v_handle));
  /* The deleter runs exactly once, with the managed tensor that was passed in. */
  CHECK_EQ(ext_deleter_calls, 1);
  CHECK_PTR_EQ(ext_deleter_arg, &m);

  /* An aligned byte_offset is kept. */
  init_external(&m, ext_buffer, 64);
  ext_deleter_calls = 0;
  h = NULL;
  CHECK_OK(TVMArrayFromDLPack(&m, &h));
  if (h) {
    CHECK_PTR_EQ(h->data, ext_buffer);
    CHECK_EQ(h->byte_offset, 64);
    CHECK_OK(TVMArrayFree(h));
  }
  CHECK_EQ(ext_deleter_calls, 1);

  /* Misaligned data (or data + byte_offset) is rejected; the caller keeps ownership (the
   * deleter is not called). */
  init_external(&m, (char*)ext_buffer + 4, 0);
  ext_deleter_calls = 0;
  CHECK_FAIL(TVMArrayFromDLPack(&m, &h));
  init_external(&m, ext_buffer, 4);
  CHECK_FAIL(TVMArrayFromDLPack(&m, &h));
  /* Non-compact strides are rejected. */
  int64_t strides[2] = {8, 1};
  init_external(&m, ext_buffer, 0);
  m.dl_tensor.strides = strides;
  CHECK_FAIL(TVMArrayFromDLPack(&m, &h));
  CHECK_EQ(ext_deleter_calls, 0);

  /* Compact strides spelled out are accepted. */
  int64_t compact[2] = {4, 1};
  init_external(&m, ext_buffer, 0);
  m.dl_tensor.strides = compact;
  h = NULL;
  CHECK_OK(TVMArrayFromDLPack(&m, &h));
  if (h) CHECK_OK(TVMArrayFree(h));
  CHECK_EQ(ext_deleter_calls, 1);

  /* TVMDLManagedTensorCallDeleter just calls the deleter. */
  init_external(&m, ext_buffer, 0);
  ext_deleter_calls = 0;
  TVMDLManagedTensorCallDeleter(&m);
  CHECK_EQ(ext_deleter_calls, 1);
  CHECK_PTR_EQ(ext_deleter_arg, &m);
}

static void test_create_view(void) {
  TVMFunctionHandle view = NULL;
  CHECK_OK(TVMFuncGetGlobal("runtime.TVMArrayCreateView", &view));
  if (view == NULL) {
    check_skip("test_ndarray", NULL, "view checks (runtime.TVMArrayCreateView is not registered)");
    return;
  }
  TVMArrayHandle a = alloc_1d(12, kDLFloat, 32);
  float in[12];
  for (int i = 0; i < 12; ++i) in[i] = (float)i;
  CHECK_OK(TVMArrayCopyFromBytes(a, in, sizeof(in)));

  TVMValue sa[2] = {val_int(3), val_int(4)};
  int sc[2] = {kTVMArgInt, kTVMArgInt};
  TVMValue sr;
  int src = -1;
  CHECK_OK(call_global("runtime.ShapeTuple", sa, sc, 2, &sr, &src));
  TVMObjectHandle shape34 = sr.v_handle;

  /* v0.16 takes (array, shape); v0.20 takes (array, shape, dtype, relative_byte_offset). */
  TVMValue va[4];
  int vc[4];
  va[0] = val_handle(a), vc[0] = kTVMNDArrayHandle;
  va[1] = val_handle(shape34), vc[1] = kTVMObjectHandle;
  va[2].v_type = a->dtype, vc[2] = kTVMDataType;
  va[3] = val_int(0), vc[3] = kTVMArgInt;
  TVMValue r;
  int rc = -1;
  int status = TVMFuncCall(view, va, vc, 2, &r, &rc);
  int nargs = 2;
  if (status != 0) {
    nargs = 4;
    status = TVMFuncCall(view, va, vc, 4, &r, &rc);
  }
  CHECK_OK(status);
  CHECK_EQ(rc, kTVMNDArrayHandle);
  if (status == 0 && rc == kTVMNDArrayHandle) {
    TVMArrayHandle v = r.v_handle;
    CHECK(v != a);
    CHECK_EQ(v->ndim, 2);
    CHECK(v->shape[0] == 3 && v->shape[1] == 4);
    CHECK_PTR_EQ((char*)v->data + v->byte_offset, (char*)a->data + a->byte_offset);
    /* The view shares memory and keeps the base alive. */
    CHECK_OK(TVMArrayFree(a));
    a = NULL;
    float out[12];
    CHECK_OK(TVMArrayCopyToBytes(v, out, sizeof(out)));
    CHECK(memcmp(out, in, sizeof(in)) == 0);
    CHECK_OK(TVMArrayFree(v));
  }
  if (a) CHECK_OK(TVMArrayFree(a));

  /* A view larger than the base fails. */
  TVMArrayHandle small = alloc_1d(4, kDLFloat, 32);
  va[0] = val_handle(small);
  CHECK_FAIL(TVMFuncCall(view, va, vc, nargs, &r, &rc));
  CHECK_OK(TVMArrayFree(small));
  CHECK_OK(TVMObjectFree(shape34));
  CHECK_OK(TVMFuncFree(view));
}

int main(void) {
  test_alloc_layout();
  test_dtypes();
  test_alloc_errors();
  test_alloc_edge_shapes();
  test_copy_bytes();
  test_copy_from_to();
  test_to_dlpack();
  test_from_dlpack();
  test_create_view();
  return check_summary("test_ndarray");
}

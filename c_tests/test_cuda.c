/*
 * CUDA through the C API, as a TVM client program uses it: device attributes, allocation,
 * copies every way (host, cuda, cuda_host pinned memory, cuda_managed, device to device), streams,
 * workspaces and the errors of a bad device id. Where the runtime has no CUDA device (no
 * driver, no GPU, or a build without `cuda`), it checks that kExist says so and reports the
 * rest as skipped (a failure under TVMRT_REQUIRE_CUDA=1).
 */
#include "check.h"

static DLDevice cuda(int id) {
  DLDevice d;
  d.device_type = kDLCUDA;
  d.device_id = id;
  return d;
}

static DLDataType f32(void) {
  DLDataType t;
  t.code = kDLFloat;
  t.bits = 32;
  t.lanes = 1;
  return t;
}

/* runtime.GetDeviceAttr(device_type, id, kind): the return code and value. */
static int device_attr(int type, int id, int kind, TVMValue* r, int* rc) {
  TVMValue a[3];
  int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt};
  a[0] = val_int(type), a[1] = val_int(id), a[2] = val_int(kind);
  return call_global("runtime.GetDeviceAttr", a, c, 3, r, rc);
}

static void test_attributes(void) {
  TVMValue r;
  int rc = -1;
  /* kMaxThreadsPerBlock (1), kWarpSize (2), kMaxSharedMemoryPerBlock (3). */
  CHECK_OK(device_attr(kDLCUDA, 0, 1, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK(r.v_int64 >= 256);
  CHECK_OK(device_attr(kDLCUDA, 0, 2, &r, &rc));
  CHECK_EQ(r.v_int64, 32);
  CHECK_OK(device_attr(kDLCUDA, 0, 3, &r, &rc));
  CHECK(r.v_int64 >= 16384);
  /* kComputeVersion (4) is "major.minor"; kDeviceName (5) a non-empty string. */
  CHECK_OK(device_attr(kDLCUDA, 0, 4, &r, &rc));
  CHECK_EQ(rc, kTVMStr);
  if (rc == kTVMStr) CHECK(strchr(r.v_str, '.') != NULL);
  CHECK_OK(device_attr(kDLCUDA, 0, 5, &r, &rc));
  CHECK_EQ(rc, kTVMStr);
  if (rc == kTVMStr) CHECK(r.v_str[0] != '\0');
  /* kMultiProcessorCount (7). */
  CHECK_OK(device_attr(kDLCUDA, 0, 7, &r, &rc));
  CHECK(r.v_int64 > 0);
  /* A device id past the last device: kExist is 0, other attributes fail. */
  CHECK_OK(device_attr(kDLCUDA, 4096, 0, &r, &rc));
  CHECK_EQ(r.v_int64, 0);
  CHECK_FAIL(device_attr(kDLCUDA, 4096, 1, &r, &rc));
}

static void test_alloc_and_copies(void) {
  enum { N = 4099 };
  static float in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = (float)i * 0.25f - 7.0f;
  int64_t shape[1] = {N};
  TVMArrayHandle d1 = NULL, d2 = NULL, pinned = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &d1));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &d2));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDAHost, 0, &pinned));
  if (d1 == NULL || d2 == NULL || pinned == NULL) return;
  CHECK_EQ(d1->device.device_type, kDLCUDA);
  CHECK(d1->data != NULL);
  /* host -> cuda -> cuda -> host. */
  CHECK_OK(TVMArrayCopyFromBytes(d1, in, sizeof(in)));
  CHECK_OK(TVMArrayCopyFromTo(d1, d2, NULL));
  memset(out, 0, sizeof(out));
  CHECK_OK(TVMArrayCopyToBytes(d2, out, sizeof(out)));
  CHECK(memcmp(in, out, sizeof(in)) == 0);
  /* cuda -> pinned host memory, read directly once synchronised. */
  CHECK_OK(TVMArrayCopyFromTo(d2, pinned, NULL));
  CHECK_OK(TVMSynchronize(kDLCUDA, 0, NULL));
  CHECK(memcmp(in, pinned->data, sizeof(in)) == 0);
  /* A byte count that does not match the array fails. */
  CHECK_FAIL(TVMArrayCopyFromBytes(d1, in, sizeof(in) - 4));
  CHECK_FAIL(TVMArrayCopyToBytes(d1, out, sizeof(out) + 4));

  /* TVMDeviceCopyDataFromTo between a plain host tensor and device memory. */
  void* raw = NULL;
  CHECK_OK(TVMDeviceAllocDataSpace(cuda(0), sizeof(in), 256, f32(), &raw));
  CHECK(raw != NULL);
  if (raw != NULL) {
    DLTensor h, d;
    memset(&h, 0, sizeof(h));
    h.data = in;
    h.device.device_type = kDLCPU;
    h.ndim = 1;
    h.dtype = f32();
    h.shape = shape;
    d = h;
    d.data = raw;
    d.device = cuda(0);
    CHECK_OK(TVMDeviceCopyDataFromTo(&h, &d, NULL));
    memset(out, 0, sizeof(out));
    h.data = out;
    CHECK_OK(TVMDeviceCopyDataFromTo(&d, &h, NULL));
    CHECK(memcmp(in, out, sizeof(in)) == 0);
    CHECK_OK(TVMDeviceFreeDataSpace(cuda(0), raw));
  }
  /* Managed memory (cuda_managed, 13): written through the API, read from the host. */
  TVMArrayHandle managed = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDAManaged, 0, &managed));
  if (managed != NULL) {
    CHECK_OK(TVMArrayCopyFromTo(d1, managed, NULL));
    CHECK_OK(TVMSynchronize(kDLCUDA, 0, NULL));
    CHECK(memcmp(in, managed->data, sizeof(in)) == 0);
    CHECK_OK(TVMArrayFree(managed));
  }
  CHECK_OK(TVMArrayFree(d1));
  CHECK_OK(TVMArrayFree(d2));
  CHECK_OK(TVMArrayFree(pinned));
}

static void test_streams(void) {
  enum { N = 1 << 16 };
  static float in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = (float)(i % 977);
  int64_t shape[1] = {N};
  TVMStreamHandle s1 = NULL, s2 = NULL;
  CHECK_OK(TVMStreamCreate(kDLCUDA, 0, &s1));
  CHECK_OK(TVMStreamCreate(kDLCUDA, 0, &s2));
  CHECK(s1 != NULL && s2 != NULL && s1 != s2);
  TVMArrayHandle a = NULL, b = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &a));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &b));
  if (a != NULL && b != NULL) {
    CHECK_OK(TVMArrayCopyFromBytes(a, in, sizeof(in)));
    /* A device-to-device copy on s1; s2 waits for s1, then the result is read. */
    CHECK_OK(TVMArrayCopyFromTo(a, b, s1));
    CHECK_OK(TVMStreamStreamSynchronize(kDLCUDA, 0, s1, s2));
    CHECK_OK(TVMSynchronize(kDLCUDA, 0, s2));
    /* The thread's current stream: set, used by a copy, synchronised, reset. */
    CHECK_OK(TVMSetStream(kDLCUDA, 0, s2));
    CHECK_OK(TVMSynchronize(kDLCUDA, 0, NULL));
    CHECK_OK(TVMSetStream(kDLCUDA, 0, NULL));
    memset(out, 0, sizeof(out));
    CHECK_OK(TVMArrayCopyToBytes(b, out, sizeof(out)));
    CHECK(memcmp(in, out, sizeof(in)) == 0);
  }
  if (a) CHECK_OK(TVMArrayFree(a));
  if (b) CHECK_OK(TVMArrayFree(b));
  CHECK_OK(TVMStreamFree(kDLCUDA, 0, s1));
  CHECK_OK(TVMStreamFree(kDLCUDA, 0, s2));
}

static void test_workspace(void) {
  /* Workspaces of several sizes, freed in reverse order, twice (the second round reuses). */
  for (int round = 0; round < 2; ++round) {
    void* w[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; ++i) {
      w[i] = TVMBackendAllocWorkspace(kDLCUDA, 0, (uint64_t)4096 << i, kDLFloat, 32);
      CHECK(w[i] != NULL);
    }
    for (int i = 3; i >= 0; --i)
      if (w[i] != NULL) CHECK_EQ(TVMBackendFreeWorkspace(kDLCUDA, 0, w[i]), 0);
  }
}

static void test_bad_device(void) {
  int64_t shape[1] = {16};
  TVMArrayHandle a = NULL;
  void* p = NULL;
  CHECK_FAIL(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 4096, &a));
  CHECK_FAIL(TVMDeviceAllocDataSpace(cuda(4096), 64, 64, f32(), &p));
  CHECK_FAIL(TVMStreamCreate(kDLCUDA, 4096, &p));
}

int main(void) {
  if (!cuda_present()) {
    TVMValue r;
    int rc = -1;
    /* Without a device, kExist answers 0 rather than failing. */
    CHECK_OK(device_attr(kDLCUDA, 0, 0, &r, &rc));
    CHECK_EQ(r.v_int64, 0);
    check_skip("test_cuda", "TVMRT_REQUIRE_CUDA", "no CUDA device (runtime.GetDeviceAttr kExist is 0)");
    return check_summary("test_cuda");
  }
  test_attributes();
  test_alloc_and_copies();
  test_streams();
  test_workspace();
  test_bad_device();
  return check_summary("test_cuda");
}

/*
 * Device API: TVMDeviceAllocDataSpace, TVMDeviceAllocDataSpaceWithScope,
 * TVMDeviceFreeDataSpace, TVMDeviceCopyDataFromTo, streams (TVMStreamCreate, TVMStreamFree,
 * TVMSetStream, TVMSynchronize, TVMStreamStreamSynchronize) and the runtime.GetDeviceAttr
 * global, on the CPU and on device types that are unknown or not built in.
 */
#include "check.h"

static DLDevice cpu(int id) {
  DLDevice d;
  d.device_type = kDLCPU;
  d.device_id = id;
  return d;
}
static DLDevice dev(int type) {
  DLDevice d;
  d.device_type = (DLDeviceType)type;
  d.device_id = 0;
  return d;
}
static DLDataType dtype(int code, int bits, int lanes) {
  DLDataType t;
  t.code = (uint8_t)code;
  t.bits = (uint8_t)bits;
  t.lanes = (uint16_t)lanes;
  return t;
}

static void test_alloc_free(void) {
  static const size_t sizes[] = {1, 7, 64, 100, 4096, 1 << 20};
  static const size_t aligns[] = {8, 64, 128, 256, 4096};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    for (size_t j = 0; j < sizeof(aligns) / sizeof(aligns[0]); ++j) {
      void* p = NULL;
      CHECK_OK(TVMDeviceAllocDataSpace(cpu(0), sizes[i], aligns[j], dtype(kDLFloat, 32, 1), &p));
      CHECK(p != NULL);
      CHECK_MSG(((uintptr_t)p % aligns[j]) == 0, "%p not aligned to %zu", p, aligns[j]);
      if (p) {
        memset(p, 0x5a, sizes[i]);
        CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), p));
      }
    }
  }
  /* Zero bytes is a valid request; the result is freed like any other. */
  void* p = NULL;
  CHECK_OK(TVMDeviceAllocDataSpace(cpu(0), 0, 64, dtype(kDLFloat, 32, 1), &p));
  CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), p));
  /* Freeing NULL is fine. */
  CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), NULL));
  /* The CPU accepts any device id. */
  p = NULL;
  CHECK_OK(TVMDeviceAllocDataSpace(cpu(3), 32, 64, dtype(kDLInt, 8, 1), &p));
  CHECK(p != NULL);
  CHECK_OK(TVMDeviceFreeDataSpace(cpu(3), p));

  /* Alignments that are not a power of two (0 included: posix_memalign semantics). */
  CHECK_FAIL(TVMDeviceAllocDataSpace(cpu(0), 100, 3, dtype(kDLFloat, 32, 1), &p));
  CHECK_FAIL(TVMDeviceAllocDataSpace(cpu(0), 100, 48, dtype(kDLFloat, 32, 1), &p));
  CHECK_FAIL(TVMDeviceAllocDataSpace(cpu(0), 100, 0, dtype(kDLFloat, 32, 1), &p));
  /* More than any machine has (on 32-bit targets: all but 64 bytes of the address space). */
#if SIZE_MAX > 0xFFFFFFFFu
  CHECK_FAIL(TVMDeviceAllocDataSpace(cpu(0), (size_t)1 << 60, 64, dtype(kDLFloat, 32, 1), &p));
#else
  CHECK_FAIL(TVMDeviceAllocDataSpace(cpu(0), SIZE_MAX - 63, 64, dtype(kDLFloat, 32, 1), &p));
#endif
  /* Unknown device type; a device API that is not built in. */
  CHECK_FAIL(TVMDeviceAllocDataSpace(dev(UNKNOWN_DEVICE), 100, 64, dtype(kDLFloat, 32, 1), &p));
  CHECK_FAIL(TVMDeviceFreeDataSpace(dev(UNKNOWN_DEVICE), NULL));
  if (!cuda_present())
    CHECK_FAIL_MSG(TVMDeviceAllocDataSpace(dev(kDLCUDA), 100, 64, dtype(kDLFloat, 32, 1), &p),
                   "cuda");
}

static void test_alloc_with_scope(void) {
  int64_t shape[2] = {3, 5};
  void* p = NULL;
  CHECK_OK(TVMDeviceAllocDataSpaceWithScope(cpu(0), 2, shape, dtype(kDLFloat, 32, 1), NULL, &p));
  CHECK(p != NULL);
  CHECK(((uintptr_t)p % 64) == 0);
  if (p) {
    memset(p, 1, 3 * 5 * 4);
    CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), p));
  }
  p = NULL;
  CHECK_OK(
      TVMDeviceAllocDataSpaceWithScope(cpu(0), 2, shape, dtype(kDLFloat, 64, 2), "global", &p));
  CHECK(p != NULL);
  if (p) {
    memset(p, 1, 3 * 5 * 16);
    CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), p));
  }
  /* Scalar (ndim 0). */
  p = NULL;
  CHECK_OK(TVMDeviceAllocDataSpaceWithScope(cpu(0), 0, NULL, dtype(kDLInt, 64, 1), "global", &p));
  CHECK(p != NULL);
  if (p) {
    memset(p, 1, 8);
    CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), p));
  }
  /* Other scopes are not supported by the CPU. */
  CHECK_FAIL_MSG(
      TVMDeviceAllocDataSpaceWithScope(cpu(0), 2, shape, dtype(kDLFloat, 32, 1), "texture", &p),
      "texture");
  CHECK_FAIL(TVMDeviceAllocDataSpaceWithScope(cpu(0), 2, shape, dtype(kDLFloat, 32, 1),
                                              "tvmrt.no.such.scope", &p));
  /* Negative extent. */
  int64_t neg[1] = {-5};
  CHECK_FAIL(TVMDeviceAllocDataSpaceWithScope(cpu(0), 1, neg, dtype(kDLFloat, 32, 1), "global", &p));
  /* Unknown device. */
  CHECK_FAIL(TVMDeviceAllocDataSpaceWithScope(dev(UNKNOWN_DEVICE), 2, shape, dtype(kDLFloat, 32, 1),
                                              NULL, &p));
}

static void host_tensor(DLTensor* t, void* data, int64_t* shape, int ndim, uint64_t offset) {
  memset(t, 0, sizeof(*t));
  t->data = data;
  t->device = cpu(0);
  t->ndim = ndim;
  t->dtype = dtype(kDLFloat, 32, 1);
  t->shape = shape;
  t->byte_offset = offset;
}

static void test_copy(void) {
  float src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float dst[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t shape4[1] = {4};
  int64_t shape3[1] = {3};
  int64_t shape22[2] = {2, 2};
  DLTensor from, to;
  host_tensor(&from, src, shape4, 1, 0);
  host_tensor(&to, dst, shape4, 1, 0);
  CHECK_OK(TVMDeviceCopyDataFromTo(&from, &to, NULL));
  CHECK(memcmp(dst, src, 16) == 0);
  CHECK(dst[4] == 0);

  /* byte_offset on both sides; shapes may differ if the sizes agree. */
  memset(dst, 0, sizeof(dst));
  host_tensor(&from, src, shape22, 2, 4 * sizeof(float));
  host_tensor(&to, dst, shape4, 1, 2 * sizeof(float));
  CHECK_OK(TVMDeviceCopyDataFromTo(&from, &to, NULL));
  CHECK(dst[0] == 0 && dst[1] == 0 && dst[2] == 5 && dst[3] == 6 && dst[4] == 7 && dst[5] == 8);
  CHECK(dst[6] == 0);

  /* Into device memory from TVMDeviceAllocDataSpace and back. */
  void* mem = NULL;
  CHECK_OK(TVMDeviceAllocDataSpace(cpu(0), 16, 64, dtype(kDLFloat, 32, 1), &mem));
  host_tensor(&from, src, shape4, 1, 0);
  host_tensor(&to, mem, shape4, 1, 0);
  CHECK_OK(TVMDeviceCopyDataFromTo(&from, &to, NULL));
  memset(dst, 0, sizeof(dst));
  DLTensor back;
  host_tensor(&back, dst, shape4, 1, 0);
  CHECK_OK(TVMDeviceCopyDataFromTo(&to, &back, NULL));
  CHECK(memcmp(dst, src, 16) == 0);
  CHECK_OK(TVMDeviceFreeDataSpace(cpu(0), mem));

  /* Size mismatch. */
  host_tensor(&from, src, shape4, 1, 0);
  host_tensor(&to, dst, shape3, 1, 0);
  CHECK_FAIL(TVMDeviceCopyDataFromTo(&from, &to, NULL));
  /* Unknown device type on either side. */
  host_tensor(&to, dst, shape4, 1, 0);
  to.device = dev(UNKNOWN_DEVICE);
  CHECK_FAIL(TVMDeviceCopyDataFromTo(&from, &to, NULL));
  CHECK_FAIL(TVMDeviceCopyDataFromTo(&to, &from, NULL));
  to.device = dev(kDLCUDA);
  if (!cuda_present()) CHECK_FAIL_MSG(TVMDeviceCopyDataFromTo(&from, &to, NULL), "cuda");
}

static void test_streams(void) {
  TVMStreamHandle s = (TVMStreamHandle)(intptr_t)1;
  /* The CPU has no streams: create gives NULL, everything else is a successful no-op. */
  CHECK_OK(TVMStreamCreate(kDLCPU, 0, &s));
  CHECK(s == NULL);
  CHECK_OK(TVMSetStream(kDLCPU, 0, s));
  CHECK_OK(TVMSynchronize(kDLCPU, 0, s));
  CHECK_OK(TVMStreamStreamSynchronize(kDLCPU, 0, s, NULL));
  CHECK_OK(TVMStreamFree(kDLCPU, 0, s));
  CHECK_OK(TVMSynchronize(kDLCPU, 0, NULL));
  CHECK_OK(TVMSetStream(kDLCPU, 0, NULL));
  /* Any CPU device id. */
  s = (TVMStreamHandle)(intptr_t)1;
  CHECK_OK(TVMStreamCreate(kDLCPU, 5, &s));
  CHECK(s == NULL);
  CHECK_OK(TVMSynchronize(kDLCPU, 5, NULL));

  /* Unknown device type: every stream call fails. */
  CHECK_FAIL(TVMStreamCreate(UNKNOWN_DEVICE, 0, &s));
  CHECK_FAIL(TVMStreamFree(UNKNOWN_DEVICE, 0, NULL));
  CHECK_FAIL(TVMSetStream(UNKNOWN_DEVICE, 0, NULL));
  CHECK_FAIL(TVMSynchronize(UNKNOWN_DEVICE, 0, NULL));
  CHECK_FAIL(TVMStreamStreamSynchronize(UNKNOWN_DEVICE, 0, NULL, NULL));
  /* A device API that is not built in (or has no device here). */
  if (!cuda_present()) {
    CHECK_FAIL_MSG(TVMStreamCreate(kDLCUDA, 0, &s), "cuda");
    CHECK_FAIL(TVMSynchronize(kDLCUDA, 0, NULL));
  }
}

static void test_device_attr(void) {
  TVMValue a[3];
  int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt};
  TVMValue r;
  int rc = -1;
  /* kExist (0): 1 for the CPU, 0 for a device API that is not built in or has no device. */
  a[0] = val_int(kDLCPU), a[1] = val_int(0), a[2] = val_int(0);
  CHECK_OK(call_global("runtime.GetDeviceAttr", a, c, 3, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK_EQ(r.v_int64, 1);
  const int cuda = cuda_present();
  a[0] = val_int(kDLCUDA);
  CHECK_OK(call_global("runtime.GetDeviceAttr", a, c, 3, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK_EQ(r.v_int64, cuda);
  /* An unknown device type is an error even for kExist. */
  a[0] = val_int(UNKNOWN_DEVICE);
  CHECK_FAIL(call_global("runtime.GetDeviceAttr", a, c, 3, &r, &rc));
  /* An attribute the CPU does not have (kWarpSize = 2) comes back as None. */
  a[0] = val_int(kDLCPU), a[2] = val_int(2);
  CHECK_OK(call_global("runtime.GetDeviceAttr", a, c, 3, &r, &rc));
  CHECK_EQ(rc, kTVMNullptr);
  /* Other attributes of an absent device API fail (test_cuda checks them on a device). */
  a[0] = val_int(kDLCUDA);
  if (!cuda) CHECK_FAIL(call_global("runtime.GetDeviceAttr", a, c, 3, &r, &rc));

  /* __tvm_set_device on the CPU is a no-op. */
  a[0] = val_int(kDLCPU), a[1] = val_int(0);
  CHECK_OK(call_global("__tvm_set_device", a, c, 2, &r, &rc));
}

int main(void) {
  test_alloc_free();
  test_alloc_with_scope();
  test_copy();
  test_streams();
  test_device_attr();
  return check_summary("test_device");
}

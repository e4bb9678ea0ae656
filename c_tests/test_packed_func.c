/*
 * Packed functions: TVMFuncCreateFromCFunc (resource handle, finalizer), TVMFuncCall with
 * every argument type code, TVMCFuncSetReturn for every return kind, TVMCbArgToReturn,
 * TVMFuncFree, and the global registry (TVMFuncRegisterGlobal, TVMFuncGetGlobal,
 * TVMFuncListGlobalNames, TVMFuncRemoveGlobal), plus TVMByteArrayFree on returned bytes.
 */
#include "check.h"

/* Type code 15: kTVMArgBool in TVM >= 0.17 headers, kTVMExtBegin in v0.16 headers. Both
 * runtimes pass a value with this code through calls, returns and TVMCbArgToReturn as a
 * plain 64-bit value, so the suite uses the number and runs the checks on both. */
#ifdef TVMRT_HAVE_ARG_BOOL
#define CODE_BOOL ((int)kTVMArgBool)
#else
#define CODE_BOOL 15
#endif

/* ---------------------------------------------------------------- callbacks */

#define MAX_SEEN 20
static struct {
  int calls;
  int num_args;
  int codes[MAX_SEEN];
  TVMValue values[MAX_SEEN];
  void* resource;
} seen;

/* Records what it was called with; sets no return value. */
static int record_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)ret;
  seen.calls++;
  seen.num_args = n;
  seen.resource = rh;
  for (int i = 0; i < n && i < MAX_SEEN; ++i) {
    seen.codes[i] = codes[i];
    seen.values[i] = args[i];
  }
  return 0;
}

/* Returns its first argument unchanged through TVMCFuncSetReturn. */
static int echo_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)rh;
  if (n < 1) return 0;
  return TVMCFuncSetReturn(ret, args, codes, 1);
}

/* Sums two integer arguments. */
static int add_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)rh;
  if (n != 2 || codes[0] != kTVMArgInt || codes[1] != kTVMArgInt) {
    TVMAPISetLastError("add_cb: expects two ints");
    return -1;
  }
  TVMValue v = val_int(args[0].v_int64 + args[1].v_int64);
  int c = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

/* Returns a constant taken from its resource handle. */
static int const_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  TVMValue v = val_int((int64_t)(intptr_t)rh);
  int c = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

static int fail_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)rh;
  TVMAPISetLastError("tvmrt: failure raised by the C callback");
  return -1;
}

/* Sets the return value twice: first to its argument, then to the integer 7. */
static int set_twice_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)rh;
  if (n >= 1 && TVMCFuncSetReturn(ret, args, codes, 1) != 0) return -1;
  TVMValue v = val_int(7);
  int c = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &v, &c, 1);
}

/* Calls TVMCFuncSetReturn with num_ret = 2 and records the outcome. */
static int bad_num_ret_rc;
static int bad_num_ret_has_msg;
static int bad_num_ret_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  (void)rh;
  TVMValue v[2];
  int c[2] = {kTVMArgInt, kTVMArgInt};
  v[0] = val_int(1);
  v[1] = val_int(2);
  TVMAPISetLastError("");
  bad_num_ret_rc = TVMCFuncSetReturn(ret, v, c, 2);
  const char* e = TVMGetLastError();
  bad_num_ret_has_msg = e != NULL && e[0] != '\0';
  return 0;
}

/* args[0]: a function handle, args[1]: int. Returns args[0](args[1], 100) + 1 (a nested call). */
static int nested_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* rh) {
  (void)rh;
  if (n != 2 || codes[0] != kTVMPackedFuncHandle || codes[1] != kTVMArgInt) {
    TVMAPISetLastError("nested_cb: bad arguments");
    return -1;
  }
  TVMValue a[2];
  int c[2] = {kTVMArgInt, kTVMArgInt};
  a[0] = args[1];
  a[1] = val_int(100);
  TVMValue r;
  int rc;
  if (TVMFuncCall(args[0].v_handle, a, c, 2, &r, &rc) != 0) return -1;
  if (rc != kTVMArgInt) {
    TVMAPISetLastError("nested_cb: inner call did not return an int");
    return -1;
  }
  r.v_int64 += 1;
  return TVMCFuncSetReturn(ret, &r, &rc, 1);
}

static void count_finalizer(void* rh) { (*(int*)rh)++; }

static TVMFunctionHandle make_func(TVMPackedCFunc fn, void* rh, TVMPackedCFuncFinalizer fin) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncCreateFromCFunc(fn, rh, fin, &f));
  CHECK(f != NULL);
  return f;
}

/* ---------------------------------------------------------------- NDArray with an observable
 * lifetime: built from a DLManagedTensor whose deleter counts its calls. */

static float dl_buffer[16] __attribute__((aligned(64)));
static int64_t dl_shape[1] = {16};
static int dl_deleter_calls;
static void dl_counting_deleter(DLManagedTensor* self) {
  (void)self;
  dl_deleter_calls++;
}
static DLManagedTensor dl_managed;

static TVMArrayHandle make_observed_ndarray(void) {
  memset(&dl_managed, 0, sizeof(dl_managed));
  dl_managed.dl_tensor.data = dl_buffer;
  dl_managed.dl_tensor.device.device_type = kDLCPU;
  dl_managed.dl_tensor.device.device_id = 0;
  dl_managed.dl_tensor.ndim = 1;
  dl_managed.dl_tensor.dtype.code = kDLFloat;
  dl_managed.dl_tensor.dtype.bits = 32;
  dl_managed.dl_tensor.dtype.lanes = 1;
  dl_managed.dl_tensor.shape = dl_shape;
  dl_managed.deleter = dl_counting_deleter;
  dl_deleter_calls = 0;
  TVMArrayHandle h = NULL;
  CHECK_OK(TVMArrayFromDLPack(&dl_managed, &h));
  return h;
}

static TVMModuleHandle make_system_lib(void) {
  TVMValue r;
  int rc = -1;
  CHECK_OK(call_global("runtime.SystemLib", NULL, NULL, 0, &r, &rc));
  CHECK_EQ(rc, kTVMModuleHandle);
  return r.v_handle;
}

/* Calls f with one argument. */
static int call1(TVMFunctionHandle f, TVMValue a, int code, TVMValue* r, int* rc) {
  *rc = -1;
  return TVMFuncCall(f, &a, &code, 1, r, rc);
}

/* ---------------------------------------------------------------- tests */

static void test_create_call_finalize(void) {
  int fin = 0;
  TVMFunctionHandle f = make_func(record_cb, &fin, count_finalizer);
  unsigned tindex = 999;
  CHECK_OK(TVMObjectGetTypeIndex(f, &tindex));
  CHECK_EQ(tindex, 7); /* runtime.PackedFunc */

  /* Zero arguments, NULL arrays. */
  memset(&seen, 0, sizeof(seen));
  TVMValue r;
  int rc = -1;
  CHECK_OK(TVMFuncCall(f, NULL, NULL, 0, &r, &rc));
  CHECK_EQ(seen.calls, 1);
  CHECK_EQ(seen.num_args, 0);
  CHECK_PTR_EQ(seen.resource, &fin);
  /* No return value set: kTVMNullptr. */
  CHECK_EQ(rc, kTVMNullptr);

  /* The finalizer runs once, after the last reference goes. */
  CHECK_OK(TVMObjectRetain(f));
  CHECK_OK(TVMFuncFree(f));
  CHECK_EQ(fin, 0);
  CHECK_OK(TVMFuncCall(f, NULL, NULL, 0, &r, &rc)); /* still alive */
  CHECK_EQ(seen.calls, 2);
  CHECK_OK(TVMFuncFree(f));
  CHECK_EQ(fin, 1);

  /* Without a finalizer the resource handle is passed through as is. */
  TVMFunctionHandle g = make_func(record_cb, (void*)(intptr_t)0x1234, NULL);
  CHECK_OK(TVMFuncCall(g, NULL, NULL, 0, &r, &rc));
  CHECK_PTR_EQ(seen.resource, (void*)(intptr_t)0x1234);
  CHECK_OK(TVMFuncFree(g));

  /* Freeing NULL is a no-op. */
  CHECK_OK(TVMFuncFree(NULL));
}

static void test_functional_calls(void) {
  TVMFunctionHandle add = make_func(add_cb, NULL, NULL);
  TVMValue a[2] = {val_int(40), val_int(2)};
  int c[2] = {kTVMArgInt, kTVMArgInt};
  TVMValue r;
  int rc = -1;
  CHECK_OK(TVMFuncCall(add, a, c, 2, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK_EQ(r.v_int64, 42);

  /* Errors from the callback: non-zero return, message preserved. */
  TVMFunctionHandle fail = make_func(fail_cb, NULL, NULL);
  CHECK_FAIL_MSG(TVMFuncCall(fail, a, c, 2, &r, &rc), "failure raised by the C callback");
  /* A callee that rejects its arguments. */
  c[1] = kTVMArgFloat;
  CHECK_FAIL_MSG(TVMFuncCall(add, a, c, 2, &r, &rc), "add_cb: expects two ints");

  /* Nested call from inside a callback. */
  TVMFunctionHandle nested = make_func(nested_cb, NULL, NULL);
  TVMValue na[2] = {val_handle(add), val_int(5)};
  int nc[2] = {kTVMPackedFuncHandle, kTVMArgInt};
  CHECK_OK(TVMFuncCall(nested, na, nc, 2, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK_EQ(r.v_int64, 106);
  /* An error in the inner call surfaces through both levels. */
  na[0] = val_handle(fail);
  CHECK_FAIL_MSG(TVMFuncCall(nested, na, nc, 2, &r, &rc), "failure raised by the C callback");

  CHECK_OK(TVMFuncFree(nested));
  CHECK_OK(TVMFuncFree(fail));
  CHECK_OK(TVMFuncFree(add));
}

static void test_argument_codes(void) {
  TVMFunctionHandle rec = make_func(record_cb, NULL, NULL);
  TVMFunctionHandle other = make_func(echo_cb, NULL, NULL);
  TVMObjectHandle str_obj = make_string("an object");
  TVMModuleHandle mod = make_system_lib();
  int64_t shape[1] = {3};
  TVMArrayHandle nd = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &nd));
  DLTensor plain;
  memset(&plain, 0, sizeof(plain));
  static const char bytes_data[] = {'a', '\0', 'b', 'c'};
  TVMByteArray bytes = {bytes_data, sizeof(bytes_data)};
  void* rvalue_slot = str_obj;

  TVMValue a[16];
  int c[16];
  int n = 0;
  a[n] = val_int(-42), c[n++] = kTVMArgInt;                          /* 0 */
  a[n] = val_float(3.25), c[n++] = kTVMArgFloat;                     /* 1 */
  a[n] = val_handle((void*)(intptr_t)0xdeadbee0), c[n++] = kTVMOpaqueHandle; /* 2 */
  a[n] = val_handle(NULL), c[n++] = kTVMNullptr;                     /* 3 */
  a[n].v_type.code = kDLFloat, a[n].v_type.bits = 16, a[n].v_type.lanes = 4;
  c[n++] = kTVMDataType;                                             /* 4 */
  a[n].v_device.device_type = kDLCPU, a[n].v_device.device_id = 3;
  c[n++] = kDLDevice;                                                /* 5 */
  a[n] = val_handle(&plain), c[n++] = kTVMDLTensorHandle;            /* 6 */
  a[n] = val_handle(str_obj), c[n++] = kTVMObjectHandle;             /* 7 */
  a[n] = val_handle(mod), c[n++] = kTVMModuleHandle;                 /* 8 */
  a[n] = val_handle(other), c[n++] = kTVMPackedFuncHandle;           /* 9 */
  a[n] = val_str("a string"), c[n++] = kTVMStr;                      /* 10 */
  a[n] = val_handle(&bytes), c[n++] = kTVMBytes;                     /* 11 */
  a[n] = val_handle(nd), c[n++] = kTVMNDArrayHandle;                 /* 12 */
  a[n] = val_handle(&rvalue_slot), c[n++] = kTVMObjectRValueRefArg;  /* 13 */
  a[n] = val_int(1), c[n++] = CODE_BOOL;                             /* 14 */

  memset(&seen, 0, sizeof(seen));
  TVMValue r;
  int rc = -1;
  CHECK_OK(TVMFuncCall(rec, a, c, n, &r, &rc));
  CHECK_EQ(seen.num_args, n);
  /* The callee sees the caller's type codes and values unchanged. */
  for (int i = 0; i < n; ++i) CHECK_MSG(seen.codes[i] == c[i], "arg %d: code %d, expected %d", i, seen.codes[i], c[i]);
  CHECK_EQ(seen.values[0].v_int64, -42);
  CHECK(seen.values[1].v_float64 == 3.25);
  CHECK_PTR_EQ(seen.values[2].v_handle, (void*)(intptr_t)0xdeadbee0);
  CHECK_EQ(seen.values[4].v_type.code, kDLFloat);
  CHECK_EQ(seen.values[4].v_type.bits, 16);
  CHECK_EQ(seen.values[4].v_type.lanes, 4);
  CHECK_EQ(seen.values[5].v_device.device_type, kDLCPU);
  CHECK_EQ(seen.values[5].v_device.device_id, 3);
  CHECK_PTR_EQ(seen.values[6].v_handle, &plain);
  CHECK_PTR_EQ(seen.values[7].v_handle, str_obj);
  CHECK_PTR_EQ(seen.values[8].v_handle, mod);
  CHECK_PTR_EQ(seen.values[9].v_handle, other);
  if (seen.codes[10] == kTVMStr) CHECK_STREQ(seen.values[10].v_str, "a string");
  {
    const TVMByteArray* b =
        seen.codes[11] == kTVMBytes ? (const TVMByteArray*)seen.values[11].v_handle : NULL;
    CHECK(b != NULL && b->size == 4 && memcmp(b->data, bytes_data, 4) == 0);
  }
  CHECK_PTR_EQ(seen.values[12].v_handle, nd);
  CHECK_PTR_EQ(seen.values[13].v_handle, &rvalue_slot);
  CHECK_PTR_EQ(rvalue_slot, str_obj); /* passing an rvalue ref to a C callee moves nothing */
  CHECK_EQ(seen.values[14].v_int64, 1);
  CHECK_EQ(rc, kTVMNullptr);

  CHECK_OK(TVMArrayFree(nd));
  CHECK_OK(TVMModFree(mod));
  CHECK_OK(TVMObjectFree(str_obj));
  CHECK_OK(TVMFuncFree(other));
  CHECK_OK(TVMFuncFree(rec));
}

static void check_dtype_string(TVMFunctionHandle echo, uint8_t code, uint8_t bits, uint16_t lanes,
                               const char* expected) {
  TVMValue a, r;
  a.v_type.code = code;
  a.v_type.bits = bits;
  a.v_type.lanes = lanes;
  int rc = -1;
  CHECK_OK(call1(echo, a, kTVMDataType, &r, &rc));
  /* A returned DataType crosses the C API as its string form (kTVMStr). */
  CHECK_EQ(rc, kTVMStr);
  if (rc == kTVMStr) CHECK_STREQ(r.v_str, expected);
}

static void test_return_kinds(void) {
  TVMFunctionHandle echo = make_func(echo_cb, NULL, NULL);
  TVMValue r;
  int rc;

  CHECK_OK(call1(echo, val_int(-7), kTVMArgInt, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK_EQ(r.v_int64, -7);
  CHECK_OK(call1(echo, val_int(INT64_MIN), kTVMArgInt, &r, &rc));
  CHECK(r.v_int64 == INT64_MIN);

  CHECK_OK(call1(echo, val_float(-0.5), kTVMArgFloat, &r, &rc));
  CHECK_EQ(rc, kTVMArgFloat);
  CHECK(r.v_float64 == -0.5);

  CHECK_OK(call1(echo, val_handle((void*)(intptr_t)0x5000), kTVMOpaqueHandle, &r, &rc));
  CHECK_EQ(rc, kTVMOpaqueHandle);
  CHECK_PTR_EQ(r.v_handle, (void*)(intptr_t)0x5000);

  CHECK_OK(call1(echo, val_handle(NULL), kTVMNullptr, &r, &rc));
  CHECK_EQ(rc, kTVMNullptr);

  /* A NULL object handle comes back as kTVMNullptr. */
  CHECK_OK(call1(echo, val_handle(NULL), kTVMObjectHandle, &r, &rc));
  CHECK_EQ(rc, kTVMNullptr);

  CHECK_OK(call1(echo, val_int(1), CODE_BOOL, &r, &rc));
  CHECK_EQ(rc, CODE_BOOL);
  CHECK_EQ(r.v_int64, 1);

  /* DataType -> string. */
  check_dtype_string(echo, kDLFloat, 32, 1, "float32");
  check_dtype_string(echo, kDLFloat, 16, 1, "float16");
  check_dtype_string(echo, kDLFloat, 64, 1, "float64");
  check_dtype_string(echo, kDLFloat, 32, 4, "float32x4");
  check_dtype_string(echo, kDLInt, 8, 1, "int8");
  check_dtype_string(echo, kDLInt, 32, 1, "int32");
  check_dtype_string(echo, kDLInt, 64, 1, "int64");
  check_dtype_string(echo, kDLInt, 4, 1, "int4");
  check_dtype_string(echo, kDLInt, 1, 1, "int1");
  check_dtype_string(echo, kDLUInt, 8, 1, "uint8");
  check_dtype_string(echo, kDLUInt, 32, 1, "uint32");
  check_dtype_string(echo, kDLUInt, 1, 1, "bool"); /* uint1 is bool */
  check_dtype_string(echo, kDLBfloat, 16, 1, "bfloat16");
  check_dtype_string(echo, kDLOpaqueHandle, 64, 1, "handle");
  check_dtype_string(echo, kDLOpaqueHandle, 0, 0, ""); /* bits 0: void -> "" */
  /* An unknown type code cannot be printed: the call fails. */
  {
    TVMValue a;
    a.v_type.code = 99;
    a.v_type.bits = 32;
    a.v_type.lanes = 1;
    CHECK_FAIL(call1(echo, a, kTVMDataType, &r, &rc));
  }

  /* Device. */
  {
    TVMValue a;
    a.v_device.device_type = kDLCPU;
    a.v_device.device_id = 3;
    CHECK_OK(call1(echo, a, kDLDevice, &r, &rc));
    CHECK_EQ(rc, kDLDevice);
    CHECK_EQ(r.v_device.device_type, kDLCPU);
    CHECK_EQ(r.v_device.device_id, 3);
  }

  /* A plain DLTensor handle is returned as the same borrowed pointer. */
  {
    DLTensor t;
    memset(&t, 0, sizeof(t));
    CHECK_OK(call1(echo, val_handle(&t), kTVMDLTensorHandle, &r, &rc));
    CHECK_EQ(rc, kTVMDLTensorHandle);
    CHECK_PTR_EQ(r.v_handle, &t);
  }

  /* Strings are copied into runtime storage (valid until the next call on this thread). */
  {
    char buf[16];
    strcpy(buf, "hello str");
    CHECK_OK(call1(echo, val_str(buf), kTVMStr, &r, &rc));
    CHECK_EQ(rc, kTVMStr);
    if (rc == kTVMStr) {
      CHECK_STREQ(r.v_str, "hello str");
      CHECK(r.v_str != buf);
    }
    CHECK_OK(call1(echo, val_str(""), kTVMStr, &r, &rc));
    CHECK_EQ(rc, kTVMStr);
    if (rc == kTVMStr) CHECK_STREQ(r.v_str, "");
  }

  /* Bytes come back as a TVMByteArray* (runtime storage), embedded NULs kept. */
  {
    static const char data[] = {'x', '\0', 'y', '\0', 'z'};
    TVMByteArray in = {data, sizeof(data)};
    CHECK_OK(call1(echo, val_handle(&in), kTVMBytes, &r, &rc));
    CHECK_EQ(rc, kTVMBytes);
    if (rc == kTVMBytes) {
      TVMByteArray* out = (TVMByteArray*)r.v_handle;
      CHECK(out != NULL && out != &in);
      CHECK_EQ(out->size, sizeof(data));
      CHECK(memcmp(out->data, data, sizeof(data)) == 0);
      /* Freeing the runtime's own return slot is a successful no-op. */
      CHECK_OK(TVMByteArrayFree(out));
    }
    TVMByteArray empty = {data, 0};
    CHECK_OK(call1(echo, val_handle(&empty), kTVMBytes, &r, &rc));
    CHECK_EQ(rc, kTVMBytes);
    if (rc == kTVMBytes) CHECK_EQ(((TVMByteArray*)r.v_handle)->size, 0);
  }

  /* Objects: same handle, one new reference owned by the caller. */
  {
    TVMObjectHandle s = make_string("echoed");
    CHECK_OK(call1(echo, val_handle(s), kTVMObjectHandle, &r, &rc));
    CHECK_EQ(rc, kTVMObjectHandle);
    CHECK_PTR_EQ(r.v_handle, s);
    if (rc == kTVMObjectHandle && r.v_handle == s) CHECK_OK(TVMObjectFree(r.v_handle));
    /* Still alive: read it back. */
    TVMValue a = val_handle(s), r2;
    int c = kTVMObjectHandle, rc2 = -1;
    CHECK_OK(call_global("runtime.GetFFIString", &a, &c, 1, &r2, &rc2));
    CHECK_EQ(rc2, kTVMStr);
    if (rc2 == kTVMStr) CHECK_STREQ(r2.v_str, "echoed");

    /* An rvalue reference argument is copied into the return value (the slot keeps its
     * reference); the result is a normal owned object handle. */
    void* slot = s;
    CHECK_OK(call1(echo, val_handle(&slot), kTVMObjectRValueRefArg, &r, &rc));
    CHECK_EQ(rc, kTVMObjectHandle);
    CHECK_PTR_EQ(r.v_handle, s);
    CHECK_PTR_EQ(slot, s);
    if (rc == kTVMObjectHandle && r.v_handle == s) CHECK_OK(TVMObjectFree(r.v_handle));
    CHECK_OK(TVMObjectFree(s));
  }

  /* Packed functions: same handle, new reference (observed through the finalizer). */
  {
    int fin = 0;
    TVMFunctionHandle f = make_func(record_cb, &fin, count_finalizer);
    CHECK_OK(call1(echo, val_handle(f), kTVMPackedFuncHandle, &r, &rc));
    CHECK_EQ(rc, kTVMPackedFuncHandle);
    CHECK_PTR_EQ(r.v_handle, f);
    CHECK_OK(TVMFuncFree(f));
    CHECK_EQ(fin, 0);
    TVMFunctionHandle echoed = (rc == kTVMPackedFuncHandle && r.v_handle == f) ? r.v_handle : NULL;
    if (echoed) {
      CHECK_OK(TVMFuncCall(echoed, NULL, NULL, 0, &r, &rc)); /* still alive */
      CHECK_OK(TVMFuncFree(echoed));
    }
    CHECK_EQ(fin, 1);

    /* Passed as a generic object: v0.16 keeps kTVMObjectHandle, v0.20 normalises the
     * return code to kTVMPackedFuncHandle. Either way the handle and ownership agree. */
    fin = 0;
    f = make_func(record_cb, &fin, count_finalizer);
    CHECK_OK(call1(echo, val_handle(f), kTVMObjectHandle, &r, &rc));
    CHECK_MSG(rc == kTVMObjectHandle || rc == kTVMPackedFuncHandle, "code %d", rc);
    CHECK_PTR_EQ(r.v_handle, f);
    if (r.v_handle == f) CHECK_OK(TVMObjectFree(r.v_handle));
    CHECK_EQ(fin, 0);
    CHECK_OK(TVMFuncFree(f));
    CHECK_EQ(fin, 1);
  }

  /* Modules: same handle, new reference. */
  {
    TVMModuleHandle m = make_system_lib();
    CHECK_OK(call1(echo, val_handle(m), kTVMModuleHandle, &r, &rc));
    CHECK_EQ(rc, kTVMModuleHandle);
    CHECK_PTR_EQ(r.v_handle, m);
    if (rc == kTVMModuleHandle && r.v_handle == m) CHECK_OK(TVMModFree(r.v_handle));
    /* As a generic object: kTVMObjectHandle (v0.16) or kTVMModuleHandle (v0.20). */
    CHECK_OK(call1(echo, val_handle(m), kTVMObjectHandle, &r, &rc));
    CHECK_MSG(rc == kTVMObjectHandle || rc == kTVMModuleHandle, "code %d", rc);
    CHECK_PTR_EQ(r.v_handle, m);
    if (r.v_handle == m) CHECK_OK(TVMObjectFree(r.v_handle));
    CHECK_OK(TVMModFree(m));
  }

  /* NDArrays: same DLTensor handle, new reference (observed through the DLPack deleter). */
  {
    TVMArrayHandle nd = make_observed_ndarray();
    CHECK_OK(call1(echo, val_handle(nd), kTVMNDArrayHandle, &r, &rc));
    CHECK_EQ(rc, kTVMNDArrayHandle);
    CHECK_PTR_EQ(r.v_handle, nd);
    CHECK_OK(TVMArrayFree(nd));
    CHECK_EQ(dl_deleter_calls, 0);
    if (rc == kTVMNDArrayHandle && r.v_handle == nd) {
      CHECK_PTR_EQ(((DLTensor*)r.v_handle)->data, dl_buffer);
      CHECK_OK(TVMArrayFree((TVMArrayHandle)r.v_handle));
    }
    CHECK_EQ(dl_deleter_calls, 1);
  }

  CHECK_OK(TVMFuncFree(echo));
}

static void test_set_return_rules(void) {
  TVMValue r;
  int rc;
  /* Setting the return value twice: the second wins and the first is released. */
  {
    int fin = 0;
    TVMFunctionHandle victim = make_func(record_cb, &fin, count_finalizer);
    TVMFunctionHandle twice = make_func(set_twice_cb, NULL, NULL);
    CHECK_OK(call1(twice, val_handle(victim), kTVMPackedFuncHandle, &r, &rc));
    CHECK_EQ(rc, kTVMArgInt);
    CHECK_EQ(r.v_int64, 7);
    CHECK_OK(TVMFuncFree(victim));
    CHECK_EQ(fin, 1);
    CHECK_OK(TVMFuncFree(twice));
  }
  /* num_ret must be 1. */
  {
    TVMFunctionHandle bad = make_func(bad_num_ret_cb, NULL, NULL);
    bad_num_ret_rc = 0;
    CHECK_OK(TVMFuncCall(bad, NULL, NULL, 0, &r, &rc));
    CHECK_EQ(bad_num_ret_rc, -1);
    CHECK(bad_num_ret_has_msg);
    CHECK_OK(TVMFuncFree(bad));
  }
}

static void test_cb_arg_to_return(void) {
  TVMValue v;
  int code;

  /* POD values are left as they are. */
  v = val_int(77), code = kTVMArgInt;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kTVMArgInt);
  CHECK_EQ(v.v_int64, 77);
  v = val_float(1.5), code = kTVMArgFloat;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kTVMArgFloat);
  CHECK(v.v_float64 == 1.5);
  v = val_handle((void*)(intptr_t)0x40), code = kTVMOpaqueHandle;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kTVMOpaqueHandle);
  CHECK_PTR_EQ(v.v_handle, (void*)(intptr_t)0x40);
  v = val_handle(NULL), code = kTVMNullptr;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kTVMNullptr);
  v = val_int(1), code = CODE_BOOL;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, CODE_BOOL);
  CHECK_EQ(v.v_int64, 1);
  v.v_type.code = kDLInt, v.v_type.bits = 8, v.v_type.lanes = 2, code = kTVMDataType;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kTVMDataType);
  CHECK(v.v_type.code == kDLInt && v.v_type.bits == 8 && v.v_type.lanes == 2);
  v.v_device.device_type = kDLCPU, v.v_device.device_id = 2, code = kDLDevice;
  CHECK_OK(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kDLDevice);
  CHECK(v.v_device.device_type == kDLCPU && v.v_device.device_id == 2);
  {
    DLTensor t;
    memset(&t, 0, sizeof(t));
    v = val_handle(&t), code = kTVMDLTensorHandle;
    CHECK_OK(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMDLTensorHandle);
    CHECK_PTR_EQ(v.v_handle, &t);
  }

  /* Strings and bytes cannot be turned into an owned return value: error, untouched. */
  v = val_str("nope"), code = kTVMStr;
  CHECK_FAIL(TVMCbArgToReturn(&v, &code));
  CHECK_EQ(code, kTVMStr);
  {
    TVMByteArray b = {"ab", 2};
    v = val_handle(&b), code = kTVMBytes;
    CHECK_FAIL(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMBytes);
  }

  /* Reference-counted handles gain one reference owned by the caller. */
  {
    int fin = 0;
    TVMFunctionHandle f = make_func(record_cb, &fin, count_finalizer);
    v = val_handle(f), code = kTVMPackedFuncHandle;
    CHECK_OK(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMPackedFuncHandle);
    CHECK_PTR_EQ(v.v_handle, f);
    CHECK_OK(TVMFuncFree(f));
    CHECK_EQ(fin, 0);
    if (v.v_handle == f) CHECK_OK(TVMFuncFree(v.v_handle));
    CHECK_EQ(fin, 1);
  }
  {
    TVMObjectHandle s = make_string("cb");
    v = val_handle(s), code = kTVMObjectHandle;
    CHECK_OK(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMObjectHandle);
    CHECK_PTR_EQ(v.v_handle, s);
    if (v.v_handle == s) CHECK_OK(TVMObjectFree(v.v_handle));

    /* An rvalue reference is moved: the slot is emptied, the result owns the reference. */
    void* slot = s;
    v = val_handle(&slot), code = kTVMObjectRValueRefArg;
    CHECK_OK(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMObjectHandle);
    CHECK_PTR_EQ(v.v_handle, s);
    CHECK(slot == NULL);
    if (v.v_handle == s) CHECK_OK(TVMObjectFree(v.v_handle)); /* the only reference left */
  }
  {
    TVMModuleHandle m = make_system_lib();
    v = val_handle(m), code = kTVMModuleHandle;
    CHECK_OK(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMModuleHandle);
    CHECK_PTR_EQ(v.v_handle, m);
    if (v.v_handle == m) CHECK_OK(TVMModFree(v.v_handle));
    CHECK_OK(TVMModFree(m));
  }
  {
    TVMArrayHandle nd = make_observed_ndarray();
    v = val_handle(nd), code = kTVMNDArrayHandle;
    CHECK_OK(TVMCbArgToReturn(&v, &code));
    CHECK_EQ(code, kTVMNDArrayHandle);
    CHECK_PTR_EQ(v.v_handle, nd);
    CHECK_OK(TVMArrayFree(nd));
    CHECK_EQ(dl_deleter_calls, 0);
    if (v.v_handle == nd) CHECK_OK(TVMArrayFree((TVMArrayHandle)v.v_handle));
    CHECK_EQ(dl_deleter_calls, 1);
  }
}

static int count_name(const char* name) {
  int n = -1;
  const char** names = NULL;
  CHECK_OK(TVMFuncListGlobalNames(&n, &names));
  CHECK(n > 0 && names != NULL);
  int hits = 0;
  for (int i = 0; i < n; ++i) {
    if (names[i] != NULL && strcmp(names[i], name) == 0) hits++;
  }
  return hits;
}

static void test_global_registry(void) {
  const char* name = "tvmrt_test.packed_func.global";
  TVMFunctionHandle g = (TVMFunctionHandle)(intptr_t)1;
  /* Missing name: success and NULL. */
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK(g == NULL);
  CHECK_EQ(count_name(name), 0);
  /* NULL name: an error, not a crash (the reference fails building a std::string). */
  CHECK_FAIL(TVMFuncGetGlobal(NULL, &g));

  int fin = 0;
  TVMFunctionHandle f1 = make_func(const_cb, (void*)(intptr_t)11, NULL);
  TVMFunctionHandle f2 = make_func(const_cb, (void*)(intptr_t)22, NULL);
  TVMFunctionHandle f3 = make_func(record_cb, &fin, count_finalizer);

  CHECK_OK(TVMFuncRegisterGlobal(name, f1, 0));
  CHECK_EQ(count_name(name), 1);
  CHECK_EQ(count_name("runtime.String"), 1);
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK(g != NULL);
  /* The registry hands out the registered function object itself (a new reference). */
  CHECK_PTR_EQ(g, f1);
  TVMValue r;
  int rc = -1;
  CHECK_OK(TVMFuncCall(g, NULL, NULL, 0, &r, &rc));
  CHECK_EQ(rc, kTVMArgInt);
  CHECK_EQ(r.v_int64, 11);
  CHECK_OK(TVMFuncFree(g));
  /* The registry keeps its own reference: the caller's handle may go. */
  CHECK_OK(TVMFuncFree(f1));
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK_OK(TVMFuncCall(g, NULL, NULL, 0, &r, &rc));
  CHECK_EQ(r.v_int64, 11);
  CHECK_OK(TVMFuncFree(g));

  /* Registering an existing name without override fails and names the function. */
  CHECK_FAIL_MSG(TVMFuncRegisterGlobal(name, f2, 0), name);
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK_OK(TVMFuncCall(g, NULL, NULL, 0, &r, &rc));
  CHECK_EQ(r.v_int64, 11); /* unchanged */
  CHECK_OK(TVMFuncFree(g));

  /* With override it replaces the entry. */
  CHECK_OK(TVMFuncRegisterGlobal(name, f2, 1));
  CHECK_EQ(count_name(name), 1);
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK_OK(TVMFuncCall(g, NULL, NULL, 0, &r, &rc));
  CHECK_EQ(r.v_int64, 22);
  CHECK_OK(TVMFuncFree(g));
  CHECK_OK(TVMFuncFree(f2));

  /* A registered function is not finalized while registered. */
  CHECK_OK(TVMFuncRegisterGlobal(name, f3, 1));
  CHECK_OK(TVMFuncFree(f3));
  CHECK_EQ(fin, 0);

  /* Remove: gone from lookup and listing; removing again still succeeds. */
  CHECK_OK(TVMFuncRemoveGlobal(name));
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK(g == NULL);
  CHECK_EQ(count_name(name), 0);
  CHECK_OK(TVMFuncRemoveGlobal(name));
  CHECK_OK(TVMFuncRemoveGlobal("tvmrt_test.never.registered"));
  /* Reference: a removed or overridden entry is leaked, never finalized; ours releases it.
   * So `fin` may be 0 or 1 here, never more. */
  CHECK(fin <= 1);

  /* Registration after removal works again without override. */
  TVMFunctionHandle f4 = make_func(const_cb, (void*)(intptr_t)44, NULL);
  CHECK_OK(TVMFuncRegisterGlobal(name, f4, 0));
  CHECK_OK(TVMFuncGetGlobal(name, &g));
  CHECK_OK(TVMFuncCall(g, NULL, NULL, 0, &r, &rc));
  CHECK_EQ(r.v_int64, 44);
  CHECK_OK(TVMFuncFree(g));
  CHECK_OK(TVMFuncFree(f4));
  CHECK_OK(TVMFuncRemoveGlobal(name));

  /* The list is a stable snapshot until the next listing on this thread. */
  int n1 = 0, n2 = 0;
  const char** names = NULL;
  CHECK_OK(TVMFuncListGlobalNames(&n1, &names));
  CHECK_OK(TVMFuncListGlobalNames(&n2, &names));
  CHECK_EQ(n1, n2);
  for (int i = 0; i < n2; ++i) CHECK(names[i] != NULL && names[i][0] != '\0');
}

/*
 * A global of a feature the build left out (rpc on deploy and minimal): success and NULL, as
 * for any missing name, and the last error names the feature. With the feature: found.
 */
static void test_global_of_a_left_out_feature(void) {
  TVMFunctionHandle g = NULL;
  CHECK_OK(TVMFuncGetGlobal("rpc.Connect", &g));
  if (has_feature("rpc")) {
    CHECK(g != NULL);
    if (g != NULL) TVMFuncFree(g);
    return;
  }
  CHECK(g == NULL);
  CHECK_CONTAINS(TVMGetLastError(), "built without `rpc`");
}

int main(void) {
  test_create_call_finalize();
  test_functional_calls();
  test_argument_codes();
  test_return_kinds();
  test_set_return_rules();
  test_cb_arg_to_return();
  test_global_registry();
  test_global_of_a_left_out_feature();
  return check_summary("test_packed_func");
}

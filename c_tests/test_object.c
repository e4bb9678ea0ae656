/*
 * Object system: TVMObjectTypeKey2Index, TVMObjectTypeIndex2Key, TVMObjectDerivedFrom,
 * TVMObjectGetTypeIndex, TVMObjectRetain, TVMObjectFree, and the runtime containers reached
 * through global functions (runtime.String / GetFFIString, runtime.Array / ArraySize /
 * ArrayGetItem, runtime.Map / MapSize / MapGetItem / MapCount / MapItems,
 * runtime.ShapeTuple / GetShapeTupleSize / GetShapeTupleElem, runtime.ObjectPtrHash).
 */
#include "check.h"

/* Static type indices shared by TVM v0.16 and v0.20 (TypeIndex in object.h). */
enum {
  kIdxObject = 0,
  kIdxModule = 1,
  kIdxNDArray = 2,
  kIdxString = 3,
  kIdxArray = 4,
  kIdxMap = 5,
  kIdxShapeTuple = 6,
  kIdxPackedFunc = 7,
};

static int fin_calls;
static void count_fin(void* rh) {
  (void)rh;
  fin_calls++;
}
static int noop_cb(TVMValue* a, int* c, int n, TVMRetValueHandle r, void* rh) {
  (void)a;
  (void)c;
  (void)n;
  (void)r;
  (void)rh;
  return 0;
}

static unsigned type_index_of(TVMObjectHandle h) {
  unsigned t = 0xffffffffu;
  CHECK_OK(TVMObjectGetTypeIndex(h, &t));
  return t;
}

/* Calls global `name` with the arguments; expects success and returns the result. */
static TVMValue callg(const char* name, TVMValue* a, int* c, int n, int expect_code) {
  TVMValue r;
  r.v_int64 = 0;
  int rc = -1;
  int status = call_global(name, a, c, n, &r, &rc);
  CHECK_MSG(status == 0, "%s failed: %s", name, TVMGetLastError());
  CHECK_MSG(status != 0 || rc == expect_code, "%s returned type code %d, expected %d", name, rc,
            expect_code);
  if (status != 0 || rc != expect_code) r.v_handle = NULL;
  return r;
}

static int64_t obj_int_call(const char* name, TVMObjectHandle obj) {
  TVMValue a = val_handle(obj);
  int c = kTVMObjectHandle;
  return callg(name, &a, &c, 1, kTVMArgInt).v_int64;
}

static void test_type_keys(void) {
  static const struct {
    const char* key;
    unsigned index;
  } known[] = {
      {"runtime.Module", kIdxModule},   {"runtime.NDArray", kIdxNDArray},
      {"runtime.String", kIdxString},   {"Array", kIdxArray},
      {"Map", kIdxMap},                 {"runtime.ShapeTuple", kIdxShapeTuple},
      {"runtime.PackedFunc", kIdxPackedFunc},
  };
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); ++i) {
    unsigned idx = 0xffffffffu;
    CHECK_OK(TVMObjectTypeKey2Index(known[i].key, &idx));
    CHECK_MSG(idx == known[i].index, "%s -> %u, expected %u", known[i].key, idx, known[i].index);
    char* key = NULL;
    CHECK_OK(TVMObjectTypeIndex2Key(known[i].index, &key));
    CHECK_STREQ(key, known[i].key);
    free(key); /* the key is malloc'ed for the caller */
  }
  /* Index 0 prints as runtime.Object ... */
  char* key = NULL;
  CHECK_OK(TVMObjectTypeIndex2Key(kIdxObject, &key));
  CHECK_STREQ(key, "runtime.Object");
  free(key);
  /* ... but the root key is not in the key -> index table (reference behaviour). */
  unsigned idx = 777;
  CHECK_FAIL_MSG(TVMObjectTypeKey2Index("runtime.Object", &idx), "runtime.Object");
  /* Array and Map are registered without the "runtime." prefix. */
  CHECK_FAIL(TVMObjectTypeKey2Index("runtime.Array", &idx));
  CHECK_FAIL(TVMObjectTypeKey2Index("runtime.Map", &idx));
  /* Unknown keys fail and name the key; out is untouched. */
  idx = 777;
  CHECK_FAIL_MSG(TVMObjectTypeKey2Index("tvmrt.NoSuchType", &idx), "tvmrt.NoSuchType");
  CHECK_EQ(idx, 777);
  CHECK_FAIL(TVMObjectTypeKey2Index("", &idx));
  /* Unknown indices fail. */
  key = NULL;
  CHECK_FAIL(TVMObjectTypeIndex2Key(100000, &key));
  CHECK_FAIL(TVMObjectTypeIndex2Key(0xffffffffu, &key));
  free(key);
}

static void test_derived_from(void) {
  int d = -1;
  for (unsigned i = 0; i <= kIdxPackedFunc; ++i) {
    d = -1;
    CHECK_OK(TVMObjectDerivedFrom(i, kIdxObject, &d));
    CHECK_MSG(d == 1, "%u derives from Object: %d", i, d);
    d = -1;
    CHECK_OK(TVMObjectDerivedFrom(i, i, &d));
    CHECK_EQ(d, 1);
  }
  CHECK_OK(TVMObjectDerivedFrom(kIdxObject, kIdxString, &d));
  CHECK_EQ(d, 0);
  CHECK_OK(TVMObjectDerivedFrom(kIdxNDArray, kIdxModule, &d));
  CHECK_EQ(d, 0);
  CHECK_OK(TVMObjectDerivedFrom(kIdxMap, kIdxArray, &d));
  CHECK_EQ(d, 0);
  CHECK_OK(TVMObjectDerivedFrom(kIdxPackedFunc, kIdxString, &d));
  CHECK_EQ(d, 0);
  /* An unknown child index is an error ... */
  CHECK_FAIL(TVMObjectDerivedFrom(100000, kIdxObject, &d));
  /* ... but a parent index above the child answers 0 without looking it up (reference:
   * children always have larger indices than their parents). */
  d = -1;
  CHECK_OK(TVMObjectDerivedFrom(kIdxString, 100000, &d));
  CHECK_EQ(d, 0);
}

static void test_retain_free(void) {
  /* NULL is accepted by both. */
  CHECK_OK(TVMObjectRetain(NULL));
  CHECK_OK(TVMObjectFree(NULL));
  /* Type index of NULL is an error. */
  unsigned t = 0;
  CHECK_FAIL(TVMObjectGetTypeIndex(NULL, &t));

  /* Reference counting observed through a packed function's finalizer. */
  TVMFunctionHandle f = NULL;
  fin_calls = 0;
  CHECK_OK(TVMFuncCreateFromCFunc(noop_cb, NULL, count_fin, &f));
  CHECK_EQ(type_index_of(f), kIdxPackedFunc);
  for (int i = 0; i < 5; ++i) CHECK_OK(TVMObjectRetain(f));
  for (int i = 0; i < 5; ++i) CHECK_OK(TVMObjectFree(f));
  CHECK_EQ(fin_calls, 0);
  CHECK_OK(TVMObjectFree(f)); /* the creation reference */
  CHECK_EQ(fin_calls, 1);
}

static void test_string(void) {
  TVMObjectHandle s = make_string("hello, world");
  CHECK(s != NULL);
  CHECK_EQ(type_index_of(s), kIdxString);
  int d = 0;
  CHECK_OK(TVMObjectDerivedFrom(type_index_of(s), kIdxObject, &d));
  CHECK_EQ(d, 1);
  TVMValue a = val_handle(s);
  int c = kTVMObjectHandle;
  TVMValue r = callg("runtime.GetFFIString", &a, &c, 1, kTVMStr);
  CHECK_STREQ(r.v_str, "hello, world");

  TVMObjectHandle e = make_string("");
  a = val_handle(e);
  r = callg("runtime.GetFFIString", &a, &c, 1, kTVMStr);
  CHECK_STREQ(r.v_str, "");
  CHECK_OK(TVMObjectFree(e));

  /* GetFFIString needs a String. */
  TVMValue bad = val_int(3);
  int badc = kTVMArgInt;
  TVMValue rr;
  int rrc;
  CHECK_FAIL(call_global("runtime.GetFFIString", &bad, &badc, 1, &rr, &rrc));
  /* ObjectPtrHash is the object's address. */
  a = val_handle(s);
  r = callg("runtime.ObjectPtrHash", &a, &c, 1, kTVMArgInt);
  CHECK(r.v_int64 == (int64_t)(intptr_t)s);

  /* Retain/Free on a container object. */
  CHECK_OK(TVMObjectRetain(s));
  CHECK_OK(TVMObjectFree(s));
  r = callg("runtime.GetFFIString", &a, &c, 1, kTVMStr);
  CHECK_STREQ(r.v_str, "hello, world");
  CHECK_OK(TVMObjectFree(s));
}

static void test_array(void) {
  TVMObjectHandle s0 = make_string("zero");
  TVMObjectHandle s1 = make_string("one");
  TVMArrayHandle nd = NULL;
  int64_t shape[1] = {2};
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLInt, 32, 1, kDLCPU, 0, &nd));

  TVMValue a[3] = {val_handle(s0), val_handle(s1), val_handle(nd)};
  int c[3] = {kTVMObjectHandle, kTVMObjectHandle, kTVMNDArrayHandle};
  TVMObjectHandle arr = callg("runtime.Array", a, c, 3, kTVMObjectHandle).v_handle;
  CHECK(arr != NULL);
  CHECK_EQ(type_index_of(arr), kIdxArray);
  CHECK_EQ(obj_int_call("runtime.ArraySize", arr), 3);

  /* Elements come back as the same objects, each a new owned reference. */
  TVMValue ga[2] = {val_handle(arr), val_int(1)};
  int gc[2] = {kTVMObjectHandle, kTVMArgInt};
  TVMValue r = callg("runtime.ArrayGetItem", ga, gc, 2, kTVMObjectHandle);
  CHECK_PTR_EQ(r.v_handle, s1);
  if (r.v_handle) CHECK_OK(TVMObjectFree(r.v_handle));
  /* An NDArray element comes back as an NDArray handle (its DLTensor*). */
  ga[1] = val_int(2);
  r = callg("runtime.ArrayGetItem", ga, gc, 2, kTVMNDArrayHandle);
  CHECK_PTR_EQ(r.v_handle, nd);
  if (r.v_handle) CHECK_OK(TVMArrayFree((TVMArrayHandle)r.v_handle));

  /* The array holds its own references. */
  CHECK_OK(TVMObjectFree(s0));
  CHECK_OK(TVMObjectFree(s1));
  CHECK_OK(TVMArrayFree(nd));
  ga[1] = val_int(0);
  r = callg("runtime.ArrayGetItem", ga, gc, 2, kTVMObjectHandle);
  if (r.v_handle) {
    TVMValue sa = val_handle(r.v_handle);
    int sc = kTVMObjectHandle;
    TVMValue sr = callg("runtime.GetFFIString", &sa, &sc, 1, kTVMStr);
    CHECK_STREQ(sr.v_str, "zero");
    CHECK_OK(TVMObjectFree(r.v_handle));
  }

  /* Out-of-range and negative indices fail. */
  TVMValue rr;
  int rrc;
  ga[1] = val_int(3);
  CHECK_FAIL(call_global("runtime.ArrayGetItem", ga, gc, 2, &rr, &rrc));
  ga[1] = val_int(-1);
  CHECK_FAIL(call_global("runtime.ArrayGetItem", ga, gc, 2, &rr, &rrc));

  /* Nested and empty arrays. */
  TVMObjectHandle empty = callg("runtime.Array", NULL, NULL, 0, kTVMObjectHandle).v_handle;
  CHECK_EQ(obj_int_call("runtime.ArraySize", empty), 0);
  TVMValue na[2] = {val_handle(arr), val_handle(empty)};
  int nc[2] = {kTVMObjectHandle, kTVMObjectHandle};
  TVMObjectHandle nested = callg("runtime.Array", na, nc, 2, kTVMObjectHandle).v_handle;
  CHECK_EQ(obj_int_call("runtime.ArraySize", nested), 2);
  CHECK_OK(TVMObjectFree(empty));
  CHECK_OK(TVMObjectFree(arr));
  ga[0] = val_handle(nested);
  ga[1] = val_int(0);
  r = callg("runtime.ArrayGetItem", ga, gc, 2, kTVMObjectHandle);
  CHECK_EQ(type_index_of(r.v_handle), kIdxArray);
  CHECK_EQ(obj_int_call("runtime.ArraySize", r.v_handle), 3);
  if (r.v_handle) CHECK_OK(TVMObjectFree(r.v_handle));

  /* ArraySize of a non-array object fails. */
  TVMObjectHandle s = make_string("not an array");
  TVMValue sa = val_handle(s);
  int sc = kTVMObjectHandle;
  CHECK_FAIL(call_global("runtime.ArraySize", &sa, &sc, 1, &rr, &rrc));
  CHECK_OK(TVMObjectFree(s));
  CHECK_OK(TVMObjectFree(nested));
}

static void test_map(void) {
  TVMObjectHandle k1 = make_string("k1");
  TVMObjectHandle v1 = make_string("v1");
  TVMObjectHandle v2 = make_string("v2");
  /* Keys may be String objects or plain strings (converted to String). */
  TVMValue a[4] = {val_handle(k1), val_handle(v1), val_str("k2"), val_handle(v2)};
  int c[4] = {kTVMObjectHandle, kTVMObjectHandle, kTVMStr, kTVMObjectHandle};
  TVMObjectHandle map = callg("runtime.Map", a, c, 4, kTVMObjectHandle).v_handle;
  CHECK(map != NULL);
  CHECK_EQ(type_index_of(map), kIdxMap);
  CHECK_EQ(obj_int_call("runtime.MapSize", map), 2);

  /* Lookup by content: a str argument or another String object with the same text. */
  TVMValue ga[2] = {val_handle(map), val_str("k1")};
  int gc[2] = {kTVMObjectHandle, kTVMStr};
  TVMValue r = callg("runtime.MapGetItem", ga, gc, 2, kTVMObjectHandle);
  CHECK_PTR_EQ(r.v_handle, v1);
  if (r.v_handle) CHECK_OK(TVMObjectFree(r.v_handle));
  TVMObjectHandle k2_again = make_string("k2");
  ga[1] = val_handle(k2_again);
  gc[1] = kTVMObjectHandle;
  r = callg("runtime.MapGetItem", ga, gc, 2, kTVMObjectHandle);
  CHECK_PTR_EQ(r.v_handle, v2);
  if (r.v_handle) CHECK_OK(TVMObjectFree(r.v_handle));

  /* MapCount: 1 for present, 0 for absent. */
  r = callg("runtime.MapCount", ga, gc, 2, kTVMArgInt);
  CHECK_EQ(r.v_int64, 1);
  ga[1] = val_str("absent");
  gc[1] = kTVMStr;
  r = callg("runtime.MapCount", ga, gc, 2, kTVMArgInt);
  CHECK_EQ(r.v_int64, 0);
  /* MapGetItem of an absent key fails. */
  TVMValue rr;
  int rrc;
  CHECK_FAIL(call_global("runtime.MapGetItem", ga, gc, 2, &rr, &rrc));

  /* MapItems: an Array [k, v, k, v] in some order. */
  TVMValue ia = val_handle(map);
  int ic = kTVMObjectHandle;
  TVMObjectHandle items = callg("runtime.MapItems", &ia, &ic, 1, kTVMObjectHandle).v_handle;
  CHECK_EQ(type_index_of(items), kIdxArray);
  CHECK_EQ(obj_int_call("runtime.ArraySize", items), 4);
  int found_v1 = 0, found_v2 = 0;
  for (int i = 1; i < 4; i += 2) {
    TVMValue ea[2] = {val_handle(items), val_int(i)};
    int ec[2] = {kTVMObjectHandle, kTVMArgInt};
    TVMValue e = callg("runtime.ArrayGetItem", ea, ec, 2, kTVMObjectHandle);
    if (e.v_handle == v1) found_v1++;
    if (e.v_handle == v2) found_v2++;
    if (e.v_handle) CHECK_OK(TVMObjectFree(e.v_handle));
  }
  CHECK(found_v1 == 1 && found_v2 == 1);
  CHECK_OK(TVMObjectFree(items));

  /* An odd number of arguments is an error; an empty map is fine. */
  CHECK_FAIL(call_global("runtime.Map", a, c, 3, &rr, &rrc));
  TVMObjectHandle empty = callg("runtime.Map", NULL, NULL, 0, kTVMObjectHandle).v_handle;
  CHECK_EQ(obj_int_call("runtime.MapSize", empty), 0);
  CHECK_OK(TVMObjectFree(empty));

  CHECK_OK(TVMObjectFree(k2_again));
  CHECK_OK(TVMObjectFree(k1));
  CHECK_OK(TVMObjectFree(v1));
  CHECK_OK(TVMObjectFree(v2));
  CHECK_OK(TVMObjectFree(map));
}

static void test_shape_tuple(void) {
  TVMValue a[3] = {val_int(2), val_int(3), val_int(-4)};
  int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt};
  TVMObjectHandle st = callg("runtime.ShapeTuple", a, c, 3, kTVMObjectHandle).v_handle;
  CHECK(st != NULL);
  CHECK_EQ(type_index_of(st), kIdxShapeTuple);
  CHECK_EQ(obj_int_call("runtime.GetShapeTupleSize", st), 3);
  for (int i = 0; i < 3; ++i) {
    TVMValue ea[2] = {val_handle(st), val_int(i)};
    int ec[2] = {kTVMObjectHandle, kTVMArgInt};
    TVMValue e = callg("runtime.GetShapeTupleElem", ea, ec, 2, kTVMArgInt);
    CHECK_EQ(e.v_int64, a[i].v_int64);
  }
  TVMValue ea[2] = {val_handle(st), val_int(3)};
  int ec[2] = {kTVMObjectHandle, kTVMArgInt};
  TVMValue rr;
  int rrc;
  CHECK_FAIL(call_global("runtime.GetShapeTupleElem", ea, ec, 2, &rr, &rrc));
  CHECK_OK(TVMObjectFree(st));

  TVMObjectHandle empty = callg("runtime.ShapeTuple", NULL, NULL, 0, kTVMObjectHandle).v_handle;
  CHECK_EQ(obj_int_call("runtime.GetShapeTupleSize", empty), 0);
  CHECK_OK(TVMObjectFree(empty));
}

static void test_other_handles(void) {
  /* Modules and NDArrays report their static indices too. */
  TVMValue r;
  int rc = -1;
  CHECK_OK(call_global("runtime.SystemLib", NULL, NULL, 0, &r, &rc));
  CHECK_EQ(rc, kTVMModuleHandle);
  CHECK_EQ(type_index_of(r.v_handle), kIdxModule);
  CHECK_OK(TVMModFree(r.v_handle));

  int64_t shape[1] = {1};
  TVMArrayHandle nd = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &nd));
  unsigned t = 0;
  CHECK_OK(TVMArrayGetTypeIndex(nd, &t));
  CHECK_EQ(t, kIdxNDArray);
  CHECK_OK(TVMArrayFree(nd));
}

int main(void) {
  test_type_keys();
  test_derived_from();
  test_retain_free();
  test_string();
  test_array();
  test_map();
  test_shape_tuple();
  test_other_handles();
  return check_summary("test_object");
}

/*
 * Runs a function of a Relax VM executable (a library built with relax.build and
 * export_library) through the C ABI only, the way TVM's Python VirtualMachine does:
 * vm_load_executable, vm_initialization(kDLCPU, 0, pooled), then the function by name.
 *
 *   deploy_relax LIB.so FUNCTION [INPUT.npy ...] [--expect OUTPUT.npy ...]
 *
 * Inputs are .npy files (float32/float64/int32/int64/bool, C order). Every output (tuples are
 * walked depth first) is printed with its dtype, shape, an FNV-1a hash of its bytes and its
 * first values. With --expect, each output must equal the next file byte for byte (a
 * ShapeTuple output is compared with an int64 .npy); the exit status is 1 otherwise.
 */
#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#define MAX_ARGS 16

static void die(const char* what) {
  fprintf(stderr, "deploy_relax: %s: %s\n", what, TVMGetLastError());
  exit(2);
}

typedef struct {
  DLDataType dtype;
  int ndim;
  int64_t shape[8];
  size_t nbytes;
  char* data;
} Npy;

static int read_npy(const char* path, Npy* out) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "deploy_relax: cannot open %s\n", path);
    return -1;
  }
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] != 1) {
    fprintf(stderr, "deploy_relax: %s is not a version-1 .npy file\n", path);
    fclose(f);
    return -1;
  }
  size_t hlen = pre[8] | (pre[9] << 8);
  char* h = calloc(hlen + 1, 1);
  if (fread(h, 1, hlen, f) != hlen) {
    fclose(f);
    free(h);
    return -1;
  }
  const char* d = strstr(h, "'descr': '");
  const char* s = strstr(h, "'shape': (");
  if (!d || !s || !strstr(h, "'fortran_order': False")) {
    fprintf(stderr, "deploy_relax: %s: unsupported header %s\n", path, h);
    fclose(f);
    free(h);
    return -1;
  }
  d += 10;
  DLDataType t;
  t.lanes = 1;
  size_t elem;
  if (!strncmp(d, "<f4", 3)) {
    t.code = kDLFloat, t.bits = 32, elem = 4;
  } else if (!strncmp(d, "<f8", 3)) {
    t.code = kDLFloat, t.bits = 64, elem = 8;
  } else if (!strncmp(d, "<i4", 3)) {
    t.code = kDLInt, t.bits = 32, elem = 4;
  } else if (!strncmp(d, "<i8", 3)) {
    t.code = kDLInt, t.bits = 64, elem = 8;
  } else if (!strncmp(d, "|b1", 3)) {
    t.code = kDLUInt, t.bits = 1, elem = 1; /* TVM's bool */
  } else {
    fprintf(stderr, "deploy_relax: %s: unsupported dtype %.3s\n", path, d);
    fclose(f);
    free(h);
    return -1;
  }
  out->dtype = t;
  out->ndim = 0;
  out->nbytes = elem;
  for (s += 10; *s && *s != ')';) {
    char* end;
    long long v = strtoll(s, &end, 10);
    if (end == s) {
      s++;
      continue;
    }
    if (out->ndim == 8) break;
    out->shape[out->ndim++] = v;
    out->nbytes *= (size_t)v;
    s = end;
  }
  free(h);
  out->data = malloc(out->nbytes ? out->nbytes : 1);
  size_t got = fread(out->data, 1, out->nbytes, f);
  fclose(f);
  if (got != out->nbytes) {
    fprintf(stderr, "deploy_relax: %s: truncated data\n", path);
    return -1;
  }
  return 0;
}

static uint32_t fnv1a(const unsigned char* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static TVMFunctionHandle global(const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMFuncGetGlobal(name, &f) != 0 || !f) die(name);
  return f;
}

static char** expect_files;
static int num_expect, next_expect, mismatches;

static void check_expect(const char* label, const void* data, size_t nbytes) {
  if (!expect_files) return;
  if (next_expect >= num_expect) {
    printf("%s: MISMATCH (more outputs than --expect files)\n", label);
    mismatches++;
    return;
  }
  Npy e;
  if (read_npy(expect_files[next_expect++], &e) != 0) exit(2);
  if (e.nbytes != nbytes || memcmp(e.data, data, nbytes) != 0) {
    printf("%s: MISMATCH with %s\n", label, expect_files[next_expect - 1]);
    mismatches++;
  }
  free(e.data);
}

static void print_tensor(const char* label, DLTensor* t) {
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  size_t elem = (t->dtype.bits * t->dtype.lanes + 7) / 8;
  size_t nbytes = n * elem;
  unsigned char* buf = malloc(nbytes ? nbytes : 1);
  if (TVMArrayCopyToBytes(t, buf, nbytes) != 0) die("TVMArrayCopyToBytes");
  const char* kind = t->dtype.code == kDLFloat ? "float" : t->dtype.code == kDLInt ? "int"
                                                 : t->dtype.bits == 1 ? "bool" : "uint";
  printf("%s: %s", label, kind);
  if (t->dtype.bits != 1) printf("%d", t->dtype.bits);
  printf(" [");
  for (int i = 0; i < t->ndim; i++) printf(i ? ", %lld" : "%lld", (long long)t->shape[i]);
  printf("] fnv1a=%08x first:", fnv1a(buf, nbytes));
  for (size_t i = 0; i < n && i < 4; i++) {
    if (t->dtype.code == kDLFloat && t->dtype.bits == 32) printf(" %.9g", ((float*)buf)[i]);
    else if (t->dtype.code == kDLFloat && t->dtype.bits == 64) printf(" %.17g", ((double*)buf)[i]);
    else if (t->dtype.bits == 64) printf(" %lld", (long long)((int64_t*)buf)[i]);
    else if (t->dtype.bits == 32) printf(" %d", ((int32_t*)buf)[i]);
    else printf(" %u", buf[i]);
  }
  printf("\n");
  check_expect(label, buf, nbytes);
  free(buf);
}

/* Prints one returned value; frees it. */
static void print_value(const char* label, TVMValue v, int code) {
  if (code == kTVMNDArrayHandle) {
    print_tensor(label, (DLTensor*)v.v_handle);
    TVMArrayFree((TVMArrayHandle)v.v_handle);
    return;
  }
  if (code != kTVMObjectHandle) {
    printf("%s: a value of type code %d\n", label, code);
    return;
  }
  unsigned idx;
  char* key = NULL;
  if (TVMObjectGetTypeIndex(v.v_handle, &idx) != 0 || TVMObjectTypeIndex2Key(idx, &key) != 0)
    die("object type");
  TVMValue a[2], r;
  int c[2] = {kTVMObjectHandle, kDLInt}, rc;
  a[0].v_handle = v.v_handle;
  if (!strcmp(key, "Array")) {
    if (TVMFuncCall(global("runtime.ArraySize"), a, c, 1, &r, &rc) != 0) die("ArraySize");
    int64_t n = r.v_int64;
    for (int64_t i = 0; i < n; i++) {
      a[1].v_int64 = i;
      TVMValue item;
      int item_code;
      if (TVMFuncCall(global("runtime.ArrayGetItem"), a, c, 2, &item, &item_code) != 0)
        die("ArrayGetItem");
      char sub[256];
      snprintf(sub, sizeof sub, "%s[%lld]", label, (long long)i);
      print_value(sub, item, item_code);
    }
  } else if (!strcmp(key, "runtime.ShapeTuple")) {
    if (TVMFuncCall(global("runtime.GetShapeTupleSize"), a, c, 1, &r, &rc) != 0)
      die("GetShapeTupleSize");
    int64_t n = r.v_int64, dims[8];
    printf("%s: shape (", label);
    for (int64_t i = 0; i < n && i < 8; i++) {
      a[1].v_int64 = i;
      if (TVMFuncCall(global("runtime.GetShapeTupleElem"), a, c, 2, &r, &rc) != 0)
        die("GetShapeTupleElem");
      dims[i] = r.v_int64;
      printf(i ? ", %lld" : "%lld", (long long)dims[i]);
    }
    printf(")\n");
    check_expect(label, dims, (size_t)(n < 8 ? n : 8) * sizeof(int64_t));
  } else {
    printf("%s: a %s object\n", label, key);
  }
  TVMObjectFree(v.v_handle);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIB.so FUNCTION [INPUT.npy ...] [--expect OUTPUT.npy ...]\n",
            argv[0]);
    return 2;
  }
  int num_inputs = 0;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--expect")) {
      expect_files = argv + i + 1;
      num_expect = argc - i - 1;
      break;
    }
    num_inputs++;
  }
  if (num_inputs > MAX_ARGS) {
    fprintf(stderr, "deploy_relax: at most %d inputs\n", MAX_ARGS);
    return 2;
  }

  TVMModuleHandle exec, vm;
  TVMFunctionHandle f;
  TVMValue rv, args[MAX_ARGS];
  int rc, codes[MAX_ARGS];
  if (TVMModLoadFromFile(argv[1], "so", &exec) != 0) die("load");
  if (TVMModGetFunction(exec, "vm_load_executable", 0, &f) != 0 || !f)
    die("vm_load_executable (not a Relax executable?)");
  if (TVMFuncCall(f, NULL, NULL, 0, &rv, &rc) != 0 || rc != kTVMModuleHandle)
    die("vm_load_executable");
  vm = rv.v_handle;
  TVMFuncFree(f);

  /* one (device type, device id, allocator) triplet per device; 2 = pooled allocator */
  int64_t init[3] = {kDLCPU, 0, 2};
  for (int i = 0; i < 3; i++) args[i].v_int64 = init[i], codes[i] = kDLInt;
  if (TVMModGetFunction(vm, "vm_initialization", 0, &f) != 0 || !f) die("vm_initialization");
  if (TVMFuncCall(f, args, codes, 3, &rv, &rc) != 0) die("vm_initialization");
  TVMFuncFree(f);

  TVMArrayHandle inputs[MAX_ARGS];
  for (int i = 0; i < num_inputs; i++) {
    Npy n;
    if (read_npy(argv[3 + i], &n) != 0) return 2;
    if (TVMArrayAlloc(n.shape, n.ndim, n.dtype.code, n.dtype.bits, n.dtype.lanes, kDLCPU, 0,
                      &inputs[i]) != 0)
      die("TVMArrayAlloc");
    if (TVMArrayCopyFromBytes(inputs[i], n.data, n.nbytes) != 0) die("TVMArrayCopyFromBytes");
    free(n.data);
    args[i].v_handle = inputs[i];
    codes[i] = kTVMNDArrayHandle;
  }

  if (TVMModGetFunction(vm, argv[2], 0, &f) != 0) die(argv[2]);
  if (!f) {
    fprintf(stderr, "deploy_relax: the executable has no function %s\n", argv[2]);
    return 2;
  }
  if (TVMFuncCall(f, args, codes, num_inputs, &rv, &rc) != 0) die(argv[2]);
  print_value("output", rv, rc);
  if (expect_files && next_expect != num_expect) {
    printf("MISMATCH: %d outputs, %d --expect files\n", next_expect, num_expect);
    mismatches++;
  }

  TVMFuncFree(f);
  for (int i = 0; i < num_inputs; i++) TVMArrayFree(inputs[i]);
  TVMModFree(vm);
  TVMModFree(exec);
  if (expect_files) printf("%s\n", mismatches ? "DIFFERENT from the expected outputs"
                                              : "equal to the expected outputs, bit for bit");
  return mismatches ? 1 : 0;
}

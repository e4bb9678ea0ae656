/*
 * Runs one call of a compiled fixture through the C API only and writes every output as a
 * .npy file, so that two runtimes can be compared byte for byte by the same program
 * (scripts/cross_ref_runtime.sh links it once, then runs it with TVM's libtvm_runtime.so and
 * with ours through LD_LIBRARY_PATH).
 *
 *   fixture_outputs graph LIB.so OUTDIR NAME=INPUT.npy ...
 *       lib["default"](cpu(0)), set_input(NAME, ...) for each input, run, get_output(i)
 *   fixture_outputs relax LIB.so OUTDIR FUNCTION INPUT.npy ...
 *       vm_load_executable, vm_initialization(cpu, pooled), FUNCTION(inputs in order)
 *
 * Outputs go to OUTDIR/output_<i>.npy: a graph's outputs in order; a Relax function's result
 * walked depth first (tuples flattened), a ShapeTuple written as an int64 vector. Inputs:
 * version-1 .npy, little-endian, C order, float16/32/64, int8/16/32/64, uint8, bool.
 * Prints one line per output (dtype, shape, FNV-1a of the bytes) and the wall time of the
 * call(s) on stderr. Exit status 0, or 2 on any error.
 */
#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tvm/runtime/c_runtime_api.h>

#define MAX_INPUTS 16
#define MAX_DIMS 8

static void die(const char* what) {
  fprintf(stderr, "fixture_outputs: %s: %s\n", what, TVMGetLastError());
  exit(2);
}

typedef struct {
  DLDataType dtype;
  int ndim;
  int64_t shape[MAX_DIMS];
  size_t nbytes;
  char* data;
} Npy;

/* .npy type strings, both ways: TVM's bool is uint1 stored one byte per element. */
static const struct {
  const char* descr;
  uint8_t code, bits;
} kTypes[] = {
    {"<f2", kDLFloat, 16}, {"<f4", kDLFloat, 32}, {"<f8", kDLFloat, 64}, {"|i1", kDLInt, 8},
    {"<i2", kDLInt, 16},   {"<i4", kDLInt, 32},   {"<i8", kDLInt, 64},   {"|u1", kDLUInt, 8},
    {"<u2", kDLUInt, 16},  {"<u4", kDLUInt, 32},  {"<u8", kDLUInt, 64},  {"|b1", kDLUInt, 1},
};

static size_t elem_bytes(DLDataType t) { return ((size_t)t.bits * t.lanes + 7) / 8; }

static void read_npy(const char* path, Npy* out) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fixture_outputs: cannot open %s\n", path);
    exit(2);
  }
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] != 1) {
    fprintf(stderr, "fixture_outputs: %s is not a version-1 .npy file\n", path);
    exit(2);
  }
  size_t hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
  char* h = calloc(hlen + 1, 1);
  if (!h || fread(h, 1, hlen, f) != hlen) {
    fprintf(stderr, "fixture_outputs: %s: truncated header\n", path);
    exit(2);
  }
  const char* d = strstr(h, "'descr': '");
  const char* s = strstr(h, "'shape': (");
  if (!d || !s || !strstr(h, "'fortran_order': False")) {
    fprintf(stderr, "fixture_outputs: %s: unsupported header %s\n", path, h);
    exit(2);
  }
  d += 10;
  size_t k = 0, nt = sizeof kTypes / sizeof kTypes[0];
  while (k < nt && strncmp(d, kTypes[k].descr, 3) != 0) k++;
  if (k == nt) {
    fprintf(stderr, "fixture_outputs: %s: unsupported dtype %.3s\n", path, d);
    exit(2);
  }
  out->dtype.code = kTypes[k].code;
  out->dtype.bits = kTypes[k].bits;
  out->dtype.lanes = 1;
  out->ndim = 0;
  out->nbytes = elem_bytes(out->dtype);
  for (s += 10; *s && *s != ')';) {
    char* end;
    long long v = strtoll(s, &end, 10);
    if (end == s) {
      s++;
      continue;
    }
    if (out->ndim == MAX_DIMS) {
      fprintf(stderr, "fixture_outputs: %s: more than %d dimensions\n", path, MAX_DIMS);
      exit(2);
    }
    out->shape[out->ndim++] = v;
    out->nbytes *= (size_t)v;
    s = end;
  }
  free(h);
  out->data = malloc(out->nbytes ? out->nbytes : 1);
  if (!out->data || fread(out->data, 1, out->nbytes, f) != out->nbytes) {
    fprintf(stderr, "fixture_outputs: %s: truncated data\n", path);
    exit(2);
  }
  fclose(f);
}

static uint64_t fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static const char* out_dir;
static int num_outputs;

/* Writes OUTDIR/output_<n>.npy (version 1.0, header padded to 64 bytes). */
static void write_npy(DLDataType t, int ndim, const int64_t* shape, const void* data,
                      size_t nbytes) {
  const char* descr = NULL;
  for (size_t k = 0; k < sizeof kTypes / sizeof kTypes[0]; k++)
    if (kTypes[k].code == t.code && kTypes[k].bits == t.bits && t.lanes == 1)
      descr = kTypes[k].descr;
  if (!descr) {
    fprintf(stderr, "fixture_outputs: output %d: dtype code %d bits %d lanes %d unsupported\n",
            num_outputs, t.code, t.bits, t.lanes);
    exit(2);
  }
  char header[512];
  int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
  for (int i = 0; i < ndim; i++)
    len += snprintf(header + len, sizeof header - (size_t)len, i ? " %lld," : "%lld,",
                    (long long)shape[i]);
  if (ndim > 1) len--; /* (4,) keeps its comma, (4, 10) does not */
  len += snprintf(header + len, sizeof header - (size_t)len, "), }");
  int total = 10 + len + 1;
  int pad = (64 - total % 64) % 64;
  char path[4096];
  snprintf(path, sizeof path, "%s/output_%d.npy", out_dir, num_outputs);
  FILE* f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "fixture_outputs: cannot write %s\n", path);
    exit(2);
  }
  unsigned hl = (unsigned)(len + pad + 1);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                           (unsigned char)(hl >> 8)};
  fwrite(pre, 1, 10, f);
  fwrite(header, 1, (size_t)len, f);
  for (int i = 0; i < pad; i++) fputc(' ', f);
  fputc('\n', f);
  if (nbytes && fwrite(data, 1, nbytes, f) != nbytes) {
    fprintf(stderr, "fixture_outputs: short write to %s\n", path);
    exit(2);
  }
  fclose(f);
  printf("output_%d: %s (", num_outputs, descr);
  for (int i = 0; i < ndim; i++) printf(i ? ", %lld" : "%lld", (long long)shape[i]);
  printf("%s) fnv1a %016llx\n", ndim == 1 ? "," : "", (unsigned long long)fnv1a(data, nbytes));
  num_outputs++;
}

static void write_tensor(DLTensor* t) {
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  size_t nbytes = n * elem_bytes(t->dtype);
  unsigned char* buf = malloc(nbytes ? nbytes : 1);
  if (!buf) exit(2);
  if (TVMArrayCopyToBytes(t, buf, nbytes) != 0) die("TVMArrayCopyToBytes");
  write_npy(t->dtype, t->ndim, t->shape, buf, nbytes);
  free(buf);
}

static TVMFunctionHandle global(const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMFuncGetGlobal(name, &f) != 0 || !f) die(name);
  return f;
}

static TVMFunctionHandle mod_func(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(m, name, 0, &f) != 0) die(name);
  if (!f) {
    fprintf(stderr, "fixture_outputs: the module has no function %s\n", name);
    exit(2);
  }
  return f;
}

/* Writes one Relax return value (tensors, tuples of them, shape tuples); frees it. */
static void write_value(TVMValue v, int code) {
  if (code == kTVMNDArrayHandle) {
    write_tensor((DLTensor*)v.v_handle);
    TVMArrayFree((TVMArrayHandle)v.v_handle);
    return;
  }
  if (code != kTVMObjectHandle) {
    fprintf(stderr, "fixture_outputs: output %d: a value of type code %d\n", num_outputs, code);
    exit(2);
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
      write_value(item, item_code);
    }
  } else if (!strcmp(key, "runtime.ShapeTuple")) {
    if (TVMFuncCall(global("runtime.GetShapeTupleSize"), a, c, 1, &r, &rc) != 0)
      die("GetShapeTupleSize");
    int64_t n = r.v_int64, dims[MAX_DIMS];
    if (n > MAX_DIMS) {
      fprintf(stderr, "fixture_outputs: a shape of %lld dimensions\n", (long long)n);
      exit(2);
    }
    for (int64_t i = 0; i < n; i++) {
      a[1].v_int64 = i;
      if (TVMFuncCall(global("runtime.GetShapeTupleElem"), a, c, 2, &r, &rc) != 0)
        die("GetShapeTupleElem");
      dims[i] = r.v_int64;
    }
    DLDataType i64 = {kDLInt, 64, 1};
    write_npy(i64, 1, &n, dims, (size_t)n * sizeof(int64_t));
  } else {
    fprintf(stderr, "fixture_outputs: output %d: a %s object\n", num_outputs, key);
    exit(2);
  }
  TVMObjectFree(v.v_handle);
}

static TVMArrayHandle load_input(const char* path) {
  Npy n;
  TVMArrayHandle a;
  read_npy(path, &n);
  if (TVMArrayAlloc(n.shape, n.ndim, n.dtype.code, n.dtype.bits, n.dtype.lanes, kDLCPU, 0, &a) !=
      0)
    die("TVMArrayAlloc");
  if (TVMArrayCopyFromBytes(a, n.data, n.nbytes) != 0) die("TVMArrayCopyFromBytes");
  free(n.data);
  return a;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_graph(TVMModuleHandle lib, int argc, char** argv) {
  TVMValue a[2], rv;
  int c[2], rc;
  a[0].v_device.device_type = kDLCPU;
  a[0].v_device.device_id = 0;
  c[0] = kDLDevice;
  TVMFunctionHandle factory = mod_func(lib, "default");
  if (TVMFuncCall(factory, a, c, 1, &rv, &rc) != 0) die("default");
  if (rc != kTVMModuleHandle) {
    fprintf(stderr, "fixture_outputs: default() returned type code %d\n", rc);
    return 2;
  }
  TVMModuleHandle gmod = rv.v_handle;
  TVMFunctionHandle set_input = mod_func(gmod, "set_input");
  TVMFunctionHandle run = mod_func(gmod, "run");
  TVMFunctionHandle get_output = mod_func(gmod, "get_output");
  TVMFunctionHandle get_num_outputs = mod_func(gmod, "get_num_outputs");
  TVMArrayHandle inputs[MAX_INPUTS];
  for (int i = 0; i < argc; i++) {
    char* eq = strchr(argv[i], '=');
    if (!eq) {
      fprintf(stderr, "fixture_outputs: graph inputs are NAME=FILE.npy, not %s\n", argv[i]);
      return 2;
    }
    *eq = 0;
    inputs[i] = load_input(eq + 1);
    a[0].v_str = argv[i];
    c[0] = kTVMStr;
    a[1].v_handle = inputs[i];
    c[1] = kTVMNDArrayHandle;
    if (TVMFuncCall(set_input, a, c, 2, &rv, &rc) != 0) die("set_input");
  }
  double t0 = now();
  if (TVMFuncCall(run, NULL, NULL, 0, &rv, &rc) != 0) die("run");
  fprintf(stderr, "fixture_outputs: run %.3f ms\n", 1e3 * (now() - t0));
  if (TVMFuncCall(get_num_outputs, NULL, NULL, 0, &rv, &rc) != 0) die("get_num_outputs");
  int64_t n = rv.v_int64;
  for (int64_t o = 0; o < n; o++) {
    a[0].v_int64 = o;
    c[0] = kDLInt;
    if (TVMFuncCall(get_output, a, c, 1, &rv, &rc) != 0) die("get_output");
    write_tensor((DLTensor*)rv.v_handle);
    TVMArrayFree((TVMArrayHandle)rv.v_handle);
  }
  for (int i = 0; i < argc; i++) TVMArrayFree(inputs[i]);
  TVMFuncFree(set_input);
  TVMFuncFree(run);
  TVMFuncFree(get_output);
  TVMFuncFree(get_num_outputs);
  TVMFuncFree(factory);
  TVMModFree(gmod);
  return 0;
}

static int run_relax(TVMModuleHandle exec, const char* func, int argc, char** argv) {
  TVMValue rv, a[MAX_INPUTS];
  int rc, c[MAX_INPUTS];
  TVMFunctionHandle f = mod_func(exec, "vm_load_executable");
  if (TVMFuncCall(f, NULL, NULL, 0, &rv, &rc) != 0 || rc != kTVMModuleHandle)
    die("vm_load_executable");
  TVMFuncFree(f);
  TVMModuleHandle vm = rv.v_handle;
  /* (device type, device id, allocator) per device; allocator 2 = pooled */
  int64_t init[3] = {kDLCPU, 0, 2};
  for (int i = 0; i < 3; i++) a[i].v_int64 = init[i], c[i] = kDLInt;
  f = mod_func(vm, "vm_initialization");
  if (TVMFuncCall(f, a, c, 3, &rv, &rc) != 0) die("vm_initialization");
  TVMFuncFree(f);
  TVMArrayHandle inputs[MAX_INPUTS];
  for (int i = 0; i < argc; i++) {
    inputs[i] = load_input(argv[i]);
    a[i].v_handle = inputs[i];
    c[i] = kTVMNDArrayHandle;
  }
  f = mod_func(vm, func);
  double t0 = now();
  if (TVMFuncCall(f, a, c, argc, &rv, &rc) != 0) die(func);
  fprintf(stderr, "fixture_outputs: %s %.3f ms\n", func, 1e3 * (now() - t0));
  write_value(rv, rc);
  TVMFuncFree(f);
  for (int i = 0; i < argc; i++) TVMArrayFree(inputs[i]);
  TVMModFree(vm);
  return 0;
}

int main(int argc, char** argv) {
  int graph = argc >= 4 && !strcmp(argv[1], "graph");
  int relax = argc >= 5 && !strcmp(argv[1], "relax");
  if (!graph && !relax) {
    fprintf(stderr,
            "usage: %s graph LIB.so OUTDIR NAME=INPUT.npy ...\n"
            "       %s relax LIB.so OUTDIR FUNCTION INPUT.npy ...\n",
            argv[0], argv[0]);
    return 2;
  }
  int first = graph ? 4 : 5;
  if (argc - first > MAX_INPUTS) {
    fprintf(stderr, "fixture_outputs: at most %d inputs\n", MAX_INPUTS);
    return 2;
  }
  out_dir = argv[3];
  TVMModuleHandle lib;
  if (TVMModLoadFromFile(argv[2], "so", &lib) != 0) die("load");
  int status = graph ? run_graph(lib, argc - first, argv + first)
                     : run_relax(lib, argv[4], argc - first, argv + first);
  TVMModFree(lib);
  return status;
}

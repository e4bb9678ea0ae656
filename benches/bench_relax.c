/*
 * Relax VM benchmark: one process loads a Relax executable (relax.build + export_library),
 * creates and initialises a VM (CPU, pooled allocator), calls one function repeatedly and
 * prints machine-readable lines. scripts/bench_relax.sh runs this same binary alternately on
 * TVM's reference libtvm_runtime.so and on ours (LD_LIBRARY_PATH) and joins the results.
 *
 *   bench_relax LIB.so FUNCTION [INPUT.npy ...] [--runs N] [--batch-ms T] [--calls N]
 *               [--load-only]
 *
 * --calls N runs exactly N untimed calls after the first (no batches): for counting
 * instructions under `valgrind --tool=callgrind --instr-atstart=no`, where the phases are
 * dumped separately (load+init, first call, the N calls) when callgrind.h is available.
 * --load-only stops after load+init (no call).
 *
 * Output lines:
 *   LOAD_INIT_MS x   TVMModLoadFromFile + vm_load_executable + vm_initialization + the
 *                    function's lookup
 *   FIRST_CALL_MS x  the first call (page faults, pools filling)
 *   CALL_US x        one line per timed batch: the mean time of one call in a batch of calls
 *                    lasting about T ms (default 20; at least one call), the returned value
 *                    freed after each call
 *   MAXRSS_KB x      peak resident set size of the process (getrusage)
 *   CHECK hash       FNV-1a of every returned tensor's bytes (both runtimes must agree)
 */
#define _POSIX_C_SOURCE 200809L
#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <tvm/runtime/c_runtime_api.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

#define MAX_ARGS 8
#define CHECK(call)                                                                \
  do {                                                                             \
    if ((call) != 0) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,         \
              TVMGetLastError());                                                  \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A C-order little-endian .npy (float32/float64/int32/int64/bool) into a new CPU array. */
static TVMArrayHandle load_npy(const char* path) {
  FILE* f = fopen(path, "rb");
  unsigned char pre[10];
  if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) || pre[6] != 1) {
    fprintf(stderr, "%s: not a version-1 .npy file\n", path);
    exit(1);
  }
  size_t hlen = pre[8] | (pre[9] << 8);
  char* h = calloc(hlen + 1, 1);
  if (fread(h, 1, hlen, f) != hlen) exit(1);
  const char* d = strstr(h, "'descr': '");
  const char* s = strstr(h, "'shape': (");
  if (!d || !s) exit(1);
  d += 10;
  int code, bits;
  size_t n = 1;
  if (!strncmp(d, "<f4", 3)) code = kDLFloat, bits = 32, n = 4;
  else if (!strncmp(d, "<f8", 3)) code = kDLFloat, bits = 64, n = 8;
  else if (!strncmp(d, "<i4", 3)) code = kDLInt, bits = 32, n = 4;
  else if (!strncmp(d, "<i8", 3)) code = kDLInt, bits = 64, n = 8;
  else if (!strncmp(d, "|b1", 3)) code = kDLUInt, bits = 1, n = 1;
  else {
    fprintf(stderr, "%s: unsupported dtype\n", path);
    exit(1);
  }
  int64_t shape[8];
  int ndim = 0;
  for (s += 10; *s && *s != ')' && ndim < 8;) {
    char* end;
    long long v = strtoll(s, &end, 10);
    if (end == s) {
      s++;
      continue;
    }
    shape[ndim++] = v;
    n *= (size_t)v;
    s = end;
  }
  free(h);
  char* data = malloc(n ? n : 1);
  if (fread(data, 1, n, f) != n) exit(1);
  fclose(f);
  TVMArrayHandle a;
  CHECK(TVMArrayAlloc(shape, ndim, code, bits, 1, kDLCPU, 0, &a));
  CHECK(TVMArrayCopyFromBytes(a, data, n));
  free(data);
  return a;
}

static uint32_t fnv1a(uint32_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/* Hashes (when h != NULL) and frees a returned value: a tensor or a tuple of them. */
static void consume(TVMValue v, int code, uint32_t* h) {
  if (code == kTVMNDArrayHandle) {
    if (h) {
      DLTensor* t = v.v_handle;
      size_t n = (t->dtype.bits * t->dtype.lanes + 7) / 8;
      for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
      unsigned char* buf = malloc(n ? n : 1);
      CHECK(TVMArrayCopyToBytes(t, buf, n));
      *h = fnv1a(*h, buf, n);
      free(buf);
    }
    CHECK(TVMArrayFree(v.v_handle));
  } else if (code == kTVMObjectHandle) {
    if (h) {
      static TVMFunctionHandle size_f, get_f;
      if (!size_f) {
        CHECK(TVMFuncGetGlobal("runtime.ArraySize", &size_f));
        CHECK(TVMFuncGetGlobal("runtime.ArrayGetItem", &get_f));
      }
      TVMValue a[2], r;
      int c[2] = {kTVMObjectHandle, kDLInt}, rc;
      a[0].v_handle = v.v_handle;
      if (TVMFuncCall(size_f, a, c, 1, &r, &rc) == 0) { /* not an Array: not hashed */
        for (int64_t i = 0, n = r.v_int64; i < n; i++) {
          TVMValue item;
          int item_code;
          a[1].v_int64 = i;
          CHECK(TVMFuncCall(get_f, a, c, 2, &item, &item_code));
          consume(item, item_code, h);
        }
      }
    }
    CHECK(TVMObjectFree(v.v_handle));
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIB.so FUNCTION [INPUT.npy ...] [--runs N] [--batch-ms T]\n",
            argv[0]);
    return 2;
  }
  int runs = 10, nin = 0;
  long calls = -1;
  int load_only = 0;
  double batch_ms = 20;
  const char* inputs[MAX_ARGS];
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--batch-ms") && i + 1 < argc) batch_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--load-only")) load_only = 1;
    else if (nin < MAX_ARGS) inputs[nin++] = argv[i];
  }
  TVMValue args[MAX_ARGS], rv;
  int codes[MAX_ARGS], rc;
  for (int i = 0; i < nin; i++) {
    args[i].v_handle = load_npy(inputs[i]);
    codes[i] = kTVMNDArrayHandle;
  }

  /* Process start-up stays out of the timing: the reference builds its global function
   * registry in static constructors when the library is loaded, ours on the first lookup. */
  TVMFunctionHandle warm;
  CHECK(TVMFuncGetGlobal("runtime.ModuleLoadFromFile", &warm));
  CALLGRIND_START_INSTRUMENTATION;
  double t0 = now_ms();
  TVMModuleHandle exec, vm;
  TVMFunctionHandle load, init, f;
  CHECK(TVMModLoadFromFile(argv[1], "so", &exec));
  CHECK(TVMModGetFunction(exec, "vm_load_executable", 0, &load));
  CHECK(TVMFuncCall(load, NULL, NULL, 0, &rv, &rc));
  vm = rv.v_handle;
  CHECK(TVMModGetFunction(vm, "vm_initialization", 0, &init));
  TVMValue iv[3];
  int ic[3] = {kDLInt, kDLInt, kDLInt};
  iv[0].v_int64 = kDLCPU, iv[1].v_int64 = 0, iv[2].v_int64 = 2; /* pooled */
  CHECK(TVMFuncCall(init, iv, ic, 3, &rv, &rc));
  CHECK(TVMModGetFunction(vm, argv[2], 0, &f));
  if (!f) {
    fprintf(stderr, "no function %s\n", argv[2]);
    return 1;
  }
  printf("LOAD_INIT_MS %.4f\n", now_ms() - t0);
  CALLGRIND_DUMP_STATS_AT("load_init");
  if (load_only) return 0;

  t0 = now_ms();
  CHECK(TVMFuncCall(f, args, codes, nin, &rv, &rc));
  double first = now_ms() - t0;
  printf("FIRST_CALL_MS %.4f\n", first);
  uint32_t h = 2166136261u;
  consume(rv, rc, &h);
  CALLGRIND_DUMP_STATS_AT("first_call");
  if (calls >= 0) {
    for (long i = 0; i < calls; i++) {
      CHECK(TVMFuncCall(f, args, codes, nin, &rv, &rc));
      consume(rv, rc, NULL);
    }
    CALLGRIND_DUMP_STATS_AT("calls");
    printf("CALLS %ld\n", calls);
    printf("CHECK %08x\n", h);
    return 0;
  }

  /* calibrate the batch size on a few calls (unless one call already fills a batch) */
  long batch = 1;
  if (first < batch_ms) {
    t0 = now_ms();
    for (int i = 0; i < 3; i++) {
      CHECK(TVMFuncCall(f, args, codes, nin, &rv, &rc));
      consume(rv, rc, NULL);
    }
    double per = (now_ms() - t0) / 3;
    batch = per > 0 ? (long)(batch_ms / per) : 1000;
    if (batch < 1) batch = 1;
  }
  for (int r = 0; r < runs; r++) {
    t0 = now_ms();
    for (long i = 0; i < batch; i++) {
      CHECK(TVMFuncCall(f, args, codes, nin, &rv, &rc));
      consume(rv, rc, NULL);
    }
    printf("CALL_US %.4f\n", (now_ms() - t0) * 1e3 / batch);
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("MAXRSS_KB %ld\n", ru.ru_maxrss);
  printf("CHECK %08x\n", h);

  TVMFuncFree(f);
  TVMFuncFree(init);
  TVMFuncFree(load);
  for (int i = 0; i < nin; i++) TVMArrayFree(args[i].v_handle);
  TVMModFree(vm);
  TVMModFree(exec);
  return 0;
}

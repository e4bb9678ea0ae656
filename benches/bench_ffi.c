/*
 * tvm-ffi kernels through the classic ABI: the cost of calling a kernel compiled by TVM 0.27
 * (tvm-ffi, converted argument by argument) against the same computation compiled by TVM 0.16
 * (classic), both through TVMFuncCall on this runtime.
 *
 *   bench_ffi CLASSIC.so CLASSIC_FUNC FFI.so FFI_FUNC [N]
 *
 * Both functions compute C = A + B over float32[N] (default N = 1, so the call dominates).
 * Alternates the two over 51 repetitions of 20,000 calls each (fewer for large N: about the
 * same time per repetition, a few ms at N = 1, so that on a loaded
 * machine some repetitions run without being descheduled) and prints, for each, the median
 * and the minimum over repetitions of the mean ns per call, and the two ratios (tvm-ffi /
 * classic). On a shared machine the minimum is the steadier figure.
 *
 * Then the same two kernels alone, called directly through their symbols (`CLASSIC_FUNC`,
 * `__tvm_ffi_FFI_FUNC`) with the arguments already in each ABI's form, as a C program would
 * without any runtime, alternated the same way: the part of the ratio that is the kernels'
 * own (TVM 0.27's kernel checks each argument's tvm-ffi type index; TVM 0.16's its type code).
 *
 * With BENCH_FFI_CALLS=K in the environment it makes K calls of each instead, once, through
 * two functions of their own (calls_classic, calls_ffi) and prints nothing else: the form to
 * run under `valgrind --tool=callgrind`, whose inclusive instruction counts of the two
 * functions divided by K are the instructions per call (scripts/bench_callgrind.sh does this).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tvm/runtime/c_runtime_api.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

typedef struct {
  TVMFunctionHandle f;
  TVMValue v[3];
  int c[3];
} kernel;

static int load(kernel* k, const char* path, const char* func, DLTensor** t) {
  TVMModuleHandle m;
  if (TVMModLoadFromFile(path, "so", &m) || TVMModGetFunction(m, func, 0, &k->f) || !k->f) {
    fprintf(stderr, "bench_ffi: %s:%s: %s\n", path, func, TVMGetLastError());
    return 1;
  }
  for (int i = 0; i < 3; i++) {
    k->v[i].v_handle = t[i];
    k->c[i] = kTVMNDArrayHandle;
  }
  return 0;
}

static double time_calls(kernel* k, long iters) {
  TVMValue rv;
  int rc;
  double t0 = now_ns();
  for (long i = 0; i < iters; i++) {
    if (TVMFuncCall(k->f, k->v, k->c, 3, &rv, &rc)) {
      fprintf(stderr, "bench_ffi: call failed: %s\n", TVMGetLastError());
      exit(1);
    }
  }
  return (now_ns() - t0) / iters;
}

/* Sorts the per-repetition means and prints the medians, the minima and their ratios. */
static void report(int64_t n, const char* what, double* a, double* b, int reps) {
  qsort(a, reps, sizeof(double), cmp);
  qsort(b, reps, sizeof(double), cmp);
  printf("N=%lld%s median: classic %.1f ns/call, tvm-ffi %.1f ns/call, ratio %.2f; "
         "min: classic %.1f, tvm-ffi %.1f, ratio %.2f\n",
         (long long)n, what, a[reps / 2], b[reps / 2], b[reps / 2] / a[reps / 2], a[0], b[0],
         b[0] / a[0]);
}

/* The kernels' own signatures: TVM 0.16's TVMBackendPackedCFunc and TVM 0.27's
 * TVMFFISafeCallType over 16-byte TVMFFIAny values. */
typedef int (*classic_kernel)(TVMValue*, int*, int, TVMValue*, int*, void*);
typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  void* v_ptr;
} ffi_any;
typedef int (*ffi_kernel)(void*, const ffi_any*, int32_t, ffi_any*);
enum { FFI_DLTENSOR_PTR = 7 };

static double time_classic_kernel(classic_kernel f, TVMValue* v, int* c, long iters) {
  TVMValue rv;
  int rc;
  double t0 = now_ns();
  for (long i = 0; i < iters; i++) {
    if (f(v, c, 3, &rv, &rc, NULL)) {
      fprintf(stderr, "bench_ffi: the classic kernel failed\n");
      exit(1);
    }
  }
  return (now_ns() - t0) / iters;
}

static double time_ffi_kernel(ffi_kernel f, const ffi_any* a, long iters) {
  double t0 = now_ns();
  for (long i = 0; i < iters; i++) {
    ffi_any result = {0, 0, NULL}; /* None: what the caller must pass */
    if (f(NULL, a, 3, &result)) {
      fprintf(stderr, "bench_ffi: the tvm-ffi kernel failed\n");
      exit(1);
    }
  }
  return (now_ns() - t0) / iters;
}

static void* kernel_symbol(const char* path, const char* name) {
  /* The library is loaded already (by the runtime); this takes another reference. */
  void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  void* f = h ? dlsym(h, name) : NULL;
  if (!f) {
    fprintf(stderr, "bench_ffi: %s: no symbol %s\n", path, name);
    exit(1);
  }
  return f;
}

/* Kept out of line and apart (noipa: not merged as identical) so that callgrind reports each
 * kernel's calls as a function of its own. */
__attribute__((noipa)) static void calls_classic(kernel* k, long iters) {
  time_calls(k, iters);
  __asm__ volatile("" ::: "memory"); /* no tail call: the function stays in the profile */
}
__attribute__((noipa)) static void calls_ffi(kernel* k, long iters) {
  time_calls(k, iters);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: bench_ffi CLASSIC.so CLASSIC_FUNC FFI.so FFI_FUNC [N]\n");
    return 2;
  }
  int64_t n = argc > 5 ? atoll(argv[5]) : 1;
  DLTensor* t[3];
  for (int i = 0; i < 3; i++) {
    if (TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, kDLCPU, 0, &t[i])) return 1;
    for (int64_t j = 0; j < n; j++) ((float*)t[i]->data)[j] = (float)(i + j);
  }
  kernel classic, ffi;
  if (load(&classic, argv[1], argv[2], t) || load(&ffi, argv[3], argv[4], t)) return 1;
  const char* calls = getenv("BENCH_FFI_CALLS");
  if (calls) {
    long k = atol(calls);
    calls_classic(&classic, k);
    calls_ffi(&ffi, k);
    printf("N=%lld calls %ld each\n", (long long)n, k);
    return 0;
  }
  enum { REPS = 51 };
  long iters = 20000 / (1 + n / 64);
  if (iters < 50) iters = 50;
  double a[REPS], b[REPS];
  time_calls(&classic, iters / 10);
  time_calls(&ffi, iters / 10);
  for (int r = 0; r < REPS; r++) {
    a[r] = time_calls(&classic, iters);
    b[r] = time_calls(&ffi, iters);
  }
  report(n, "", a, b, REPS);

  char ffi_name[256];
  snprintf(ffi_name, sizeof ffi_name, "__tvm_ffi_%s", argv[4]);
  classic_kernel ck = (classic_kernel)kernel_symbol(argv[1], argv[2]);
  ffi_kernel fk = (ffi_kernel)kernel_symbol(argv[3], ffi_name);
  TVMValue cv[3];
  int cc[3];
  ffi_any fa[3];
  for (int i = 0; i < 3; i++) {
    cv[i].v_handle = t[i];
    cc[i] = kTVMDLTensorHandle;
    fa[i] = (ffi_any){FFI_DLTENSOR_PTR, 0, t[i]};
  }
  time_classic_kernel(ck, cv, cc, iters / 10);
  time_ffi_kernel(fk, fa, iters / 10);
  for (int r = 0; r < REPS; r++) {
    a[r] = time_classic_kernel(ck, cv, cc, iters);
    b[r] = time_ffi_kernel(fk, fa, iters);
  }
  report(n, " kernels alone (no runtime)", a, b, REPS);
  return 0;
}

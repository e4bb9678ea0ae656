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
 * With BENCH_FFI_CALLS=K in the environment it makes K calls of each instead, once, through
 * two functions of their own (calls_classic, calls_ffi) and prints nothing else: the form to
 * run under `valgrind --tool=callgrind`, whose inclusive instruction counts of the two
 * functions divided by K are the instructions per call (scripts/bench_callgrind.sh does this).
 */
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
  qsort(a, REPS, sizeof(double), cmp);
  qsort(b, REPS, sizeof(double), cmp);
  printf("N=%lld median: classic %.1f ns/call, tvm-ffi %.1f ns/call, ratio %.2f; "
         "min: classic %.1f, tvm-ffi %.1f, ratio %.2f\n",
         (long long)n, a[REPS / 2], b[REPS / 2], b[REPS / 2] / a[REPS / 2], a[0], b[0],
         b[0] / a[0]);
  return 0;
}

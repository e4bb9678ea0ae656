/*
 * Model benchmark: one process loads a graph library, creates its executor, runs it, and
 * prints machine-readable lines. scripts/bench_models.sh runs this same binary alternately on
 * TVM's reference libtvm_runtime.so and on ours (LD_LIBRARY_PATH) and joins the results.
 *
 *   bench_model MODEL.so [--runs N] [--warmup W] [--input NAME]
 *   bench_model MODEL.so --app-threads T [--seconds S] [--warmup W] [--input NAME]
 *
 * With --app-threads, T application threads each run their own executor (created one after
 * another from the same loaded library on the main thread) in a loop for S seconds (default
 * 3), all starting together after W warm-up runs each, and the program prints instead:
 *   MT_RUN_MS x        one line per run() of any thread (each thread's first 65536)
 *   MT_THREAD_RUNS i n the number of runs thread i completed (a starved thread shows here)
 *   MT_WALL_S x        the measured wall time
 *   CHECK hash         as below, for every thread's output (all must agree)
 *
 * Output lines:
 *   LOAD_CREATE_MS x   TVMModLoadFromFile + default(cpu(0)) + the executor's functions
 *   FIRST_RUN_MS x     the first run() (page faults on weights, workspace pools filling)
 *   RUN_MS x           one line per timed run() after the warm-up
 *   RUN_CPU_MS x       the CPU time all of the process's threads spent in that run()
 *   SET_INPUT_NS x     set_input of the input tensor (median of 50)
 *   MAXRSS_KB x        peak resident set size of the process (getrusage)
 *   CHECK hash         FNV-1a of output 0 (both runtimes must agree)
 */
#define _POSIX_C_SOURCE 200809L
#include <dlpack/dlpack.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                               \
  do {                                                                            \
    if ((call) != 0) {                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,        \
              TVMGetLastError());                                                 \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU time of every thread of the process (spinning and working alike). */
static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static TVMFunctionHandle get_func(TVMModuleHandle mod, const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  if (!f) {
    fprintf(stderr, "the module has no function %s\n", name);
    exit(1);
  }
  return f;
}

static TVMValue call(TVMFunctionHandle f, TVMValue* args, int* codes, int n) {
  TVMValue ret;
  int ret_code = 0;
  CHECK(TVMFuncCall(f, args, codes, n, &ret, &ret_code));
  return ret;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static unsigned long long output_hash(TVMFunctionHandle get_output) {
  TVMValue arg;
  int code = kDLInt;
  arg.v_int64 = 0;
  DLTensor* out = (DLTensor*)call(get_output, &arg, &code, 1).v_handle;
  int64_t m = 1;
  for (int i = 0; i < out->ndim; ++i) m *= out->shape[i];
  const unsigned char* p = (const unsigned char*)out->data;
  unsigned long long h = 1469598103934665603ULL;
  for (int64_t i = 0; i < m * ((out->dtype.bits * out->dtype.lanes + 7) / 8); ++i) {
    h = (h ^ p[i]) * 1099511628211ULL;
  }
  CHECK(TVMArrayFree(out));
  return h;
}

/* One application thread of the multi-model mode: its own executor and input. */
typedef struct {
  TVMModuleHandle gmod;
  TVMFunctionHandle set_input, run, get_output;
  DLTensor* x;
  const char* input_name;
  int warmup;
  double seconds;
  double* lat; /* run() times in ms */
  int cap, n;
  long runs;
  unsigned long long hash;
} Worker;

static pthread_barrier_t g_start;

static void* worker_main(void* p) {
  Worker* w = (Worker*)p;
  TVMValue args[2];
  int codes[2] = {kTVMStr, kTVMNDArrayHandle};
  args[0].v_str = w->input_name;
  args[1].v_handle = w->x;
  call(w->set_input, args, codes, 2);
  for (int i = 0; i < w->warmup + 1; ++i) call(w->run, NULL, NULL, 0);
  pthread_barrier_wait(&g_start);
  double end = now_ms() + w->seconds * 1e3;
  for (;;) {
    double a = now_ms();
    if (a >= end) break;
    call(w->run, NULL, NULL, 0);
    w->runs++;
    if (w->n < w->cap) w->lat[w->n++] = now_ms() - a;
  }
  w->hash = output_hash(w->get_output);
  return NULL;
}

static int multi_model(TVMModuleHandle lib, const char* input_name, int nthreads, double seconds,
                       int warmup) {
  TVMFunctionHandle factory = get_func(lib, "default");
  Worker* ws = (Worker*)calloc((size_t)nthreads, sizeof(Worker));
  pthread_t* th = (pthread_t*)calloc((size_t)nthreads, sizeof(pthread_t));
  if (!ws || !th) return 1;
  for (int t = 0; t < nthreads; ++t) {
    Worker* w = &ws[t];
    TVMValue arg;
    int code = kDLDevice;
    arg.v_device.device_type = kDLCPU;
    arg.v_device.device_id = 0;
    w->gmod = call(factory, &arg, &code, 1).v_handle;
    w->set_input = get_func(w->gmod, "set_input");
    w->run = get_func(w->gmod, "run");
    w->get_output = get_func(w->gmod, "get_output");
    TVMFunctionHandle get_input = get_func(w->gmod, "get_input");
    arg.v_str = input_name;
    code = kTVMStr;
    DLTensor* in_t = (DLTensor*)call(get_input, &arg, &code, 1).v_handle;
    CHECK(TVMArrayAlloc(in_t->shape, in_t->ndim, kDLFloat, 32, 1, kDLCPU, 0, &w->x));
    int64_t n = 1;
    for (int i = 0; i < in_t->ndim; ++i) n *= in_t->shape[i];
    for (int64_t i = 0; i < n; ++i) ((float*)w->x->data)[i] = (float)sin((double)i * 0.1);
    CHECK(TVMArrayFree(in_t));
    CHECK(TVMFuncFree(get_input));
    w->input_name = input_name;
    w->warmup = warmup;
    w->seconds = seconds;
    w->cap = 1 << 16;
    w->lat = (double*)malloc(sizeof(double) * (size_t)w->cap);
    if (!w->lat) return 1;
  }
  pthread_barrier_init(&g_start, NULL, (unsigned)nthreads + 1);
  for (int t = 0; t < nthreads; ++t) {
    if (pthread_create(&th[t], NULL, worker_main, &ws[t]) != 0) {
      fprintf(stderr, "cannot start application thread %d\n", t);
      return 1;
    }
  }
  pthread_barrier_wait(&g_start);
  double t0 = now_ms();
  for (int t = 0; t < nthreads; ++t) pthread_join(th[t], NULL);
  printf("MT_WALL_S %.4f\n", (now_ms() - t0) / 1e3);
  for (int t = 0; t < nthreads; ++t) {
    Worker* w = &ws[t];
    for (int i = 0; i < w->n; ++i) printf("MT_RUN_MS %.3f\n", w->lat[i]);
    printf("MT_THREAD_RUNS %d %ld\n", t, w->runs);
    printf("CHECK %016llx\n", w->hash);
    free(w->lat);
    CHECK(TVMArrayFree(w->x));
    CHECK(TVMFuncFree(w->set_input));
    CHECK(TVMFuncFree(w->run));
    CHECK(TVMFuncFree(w->get_output));
    CHECK(TVMModFree(w->gmod));
  }
  pthread_barrier_destroy(&g_start);
  CHECK(TVMFuncFree(factory));
  CHECK(TVMModFree(lib));
  free(ws);
  free(th);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.so [--runs N | --app-threads T [--seconds S]] [--warmup W] [--input NAME]\n", argv[0]);
    return 2;
  }
  int runs = 10, warmup = 2, app_threads = 0;
  double seconds = 3;
  const char* input_name = "data";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--input")) input_name = argv[i + 1];
    else if (!strcmp(argv[i], "--app-threads")) app_threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else {
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }

  double t0 = now_ms();
  TVMModuleHandle lib = NULL;
  CHECK(TVMModLoadFromFile(argv[1], "so", &lib));
  if (app_threads > 0) return multi_model(lib, input_name, app_threads, seconds, warmup);
  TVMFunctionHandle factory = get_func(lib, "default");
  TVMValue arg;
  int code = kDLDevice;
  arg.v_device.device_type = kDLCPU;
  arg.v_device.device_id = 0;
  TVMModuleHandle gmod = call(factory, &arg, &code, 1).v_handle;
  TVMFunctionHandle set_input = get_func(gmod, "set_input");
  TVMFunctionHandle get_input = get_func(gmod, "get_input");
  TVMFunctionHandle run = get_func(gmod, "run");
  TVMFunctionHandle get_output = get_func(gmod, "get_output");
  double t1 = now_ms();
  printf("LOAD_CREATE_MS %.3f\n", t1 - t0);

  arg.v_str = input_name;
  code = kTVMStr;
  DLTensor* in_t = (DLTensor*)call(get_input, &arg, &code, 1).v_handle;
  DLTensor* x = NULL;
  CHECK(TVMArrayAlloc(in_t->shape, in_t->ndim, kDLFloat, 32, 1, kDLCPU, 0, &x));
  int64_t n = 1;
  for (int i = 0; i < in_t->ndim; ++i) n *= in_t->shape[i];
  for (int64_t i = 0; i < n; ++i) ((float*)x->data)[i] = (float)sin((double)i * 0.1);
  TVMValue args[2];
  int codes[2] = {kTVMStr, kTVMNDArrayHandle};
  args[0].v_str = input_name;
  args[1].v_handle = x;

  double si[50];
  for (int i = 0; i < 50; ++i) {
    double a = now_ms();
    call(set_input, args, codes, 2);
    si[i] = (now_ms() - a) * 1e6;
  }
  qsort(si, 50, sizeof(double), cmp_double);
  printf("SET_INPUT_NS %.1f\n", si[25]);

  double a = now_ms();
  call(run, NULL, NULL, 0);
  printf("FIRST_RUN_MS %.3f\n", now_ms() - a);
  for (int i = 0; i < warmup; ++i) call(run, NULL, NULL, 0);
  for (int i = 0; i < runs; ++i) {
    double c = cpu_ms();
    a = now_ms();
    call(run, NULL, NULL, 0);
    printf("RUN_MS %.3f\n", now_ms() - a);
    printf("RUN_CPU_MS %.3f\n", cpu_ms() - c);
  }

  arg.v_int64 = 0;
  code = kDLInt;
  DLTensor* out = (DLTensor*)call(get_output, &arg, &code, 1).v_handle;
  int64_t m = 1;
  for (int i = 0; i < out->ndim; ++i) m *= out->shape[i];
  const unsigned char* p = (const unsigned char*)out->data;
  unsigned long long h = 1469598103934665603ULL;
  for (int64_t i = 0; i < m * ((out->dtype.bits * out->dtype.lanes + 7) / 8); ++i) {
    h = (h ^ p[i]) * 1099511628211ULL;
  }
  printf("CHECK %016llx\n", h);

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("MAXRSS_KB %ld\n", ru.ru_maxrss);

  CHECK(TVMArrayFree(out));
  CHECK(TVMArrayFree(in_t));
  CHECK(TVMArrayFree(x));
  CHECK(TVMFuncFree(set_input));
  CHECK(TVMFuncFree(get_input));
  CHECK(TVMFuncFree(run));
  CHECK(TVMFuncFree(get_output));
  CHECK(TVMFuncFree(factory));
  CHECK(TVMModFree(gmod));
  CHECK(TVMModFree(lib));
  return 0;
}

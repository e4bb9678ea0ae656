/*
 * Runtime micro-benchmarks for libtvm_runtime.so (classic TVM C ABI).
 *
 * Plain C99 against TVM's own headers (c_runtime_api.h, c_backend_api.h): the same binary runs
 * against TVM's reference runtime and against ours; the dynamic linker picks the library
 * (LD_LIBRARY_PATH), scripts/bench.sh runs it once per runtime and joins the results.
 *
 *   bench [--fixtures DIR] [--kernel PATH] [--dso PATH] [--reps N] [--rep-ms MS]
 *         [--only NAME[,NAME...]]
 *
 *   --fixtures DIR  TVM-compiled fixture libraries (default $TVMRT_CACHE/fixtures, else
 *                   $HOME/.cache/tvm-runtime-rs/fixtures): add_one.so (function myadd) for the
 *                   kernel-call benchmark, the largest *.so there for the module-load one.
 *   --kernel PATH   the TVM-compiled library with myadd (default DIR/add_one.so); also the
 *                   module-load subject when DIR holds no *.so.
 *   --dso PATH      a hand-written DSO module in the shape TVM's code generator emits
 *                   (benches/dso_add_one.c, built by scripts/bench.sh) exporting myadd: the
 *                   kernel-call and module-load benchmarks also run on it, so both have a
 *                   number even when no TVM-compiled fixture exists.
 *   --reps N        measured repetitions per benchmark (default 7, or $BENCH_REPS)
 *   --rep-ms MS     target wall time of one repetition in ms (default 20, or $BENCH_REP_MS)
 *   --only LIST     run only the benchmarks whose name starts with one of the listed prefixes
 *   --calls K       no timing: run each selected benchmark's body once with K operations (or
 *                   $BENCH_CALLS), the form to run under `valgrind --tool=callgrind`, whose
 *                   inclusive count of the body function (body_packed_call, ...) is then the
 *                   instructions of K operations (scripts/bench_callgrind.sh)
 *
 * Method: per benchmark, calibrate an iteration count so that one repetition lasts about
 * --rep-ms (this doubles as warm-up), run one more warm-up repetition, then --reps timed
 * repetitions with clock_gettime(CLOCK_MONOTONIC) around the whole loop; the result is the
 * median over repetitions of the per-repetition mean ns/op.
 *
 * Output (stdout), one line per result, machine-readable:
 *   RESULT <name> <ns_per_op>
 *   INFO <key> <value...>        (runtime path, fixture names, ...)
 *   SKIP <name> <reason...>
 * Anything else (errors) goes to stderr. Exit status 0 unless a benchmark failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

/* ------------------------------------------------------------------------------------------ */
/* Harness                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef int (*bench_fn)(void* ctx, uint64_t iters); /* runs iters ops; 0 on success */

static int g_reps = 7;
static double g_rep_ms = 20.0;
static const char* g_only = NULL;
static uint64_t g_calls = 0; /* --calls: one untimed run of K operations per benchmark */
static int g_failed = 0;

static volatile uint64_t g_sink; /* defeats dead-code elimination of results */

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int selected(const char* name) {
  if (!g_only) return 1;
  const char* p = g_only;
  while (*p) {
    const char* e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n > 0 && strncmp(name, p, n) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

static void fail(const char* name, const char* what) {
  const char* err = TVMGetLastError();
  fprintf(stderr, "bench %s: %s failed: %s\n", name, what, err ? err : "(no TVM error)");
  g_failed = 1;
}

/* Times fn; prints RESULT name ns/op. Returns the ns/op (negative on failure). */
static double run_bench(const char* name, bench_fn fn, void* ctx) {
  if (!selected(name)) return -1.0;
  if (g_calls > 0) {
    if (fn(ctx, g_calls) != 0) {
      fail(name, "benchmark body");
      return -1.0;
    }
    printf("CALLS %s %llu\n", name, (unsigned long long)g_calls);
    fflush(stdout);
    return 0.0;
  }
  const double target_ns = g_rep_ms * 1e6;
  /* Calibration (and warm-up): double the batch until it takes >= 1/8 of a repetition.
   * Done twice, keeping the faster estimate, so that one-off costs of the first calls
   * (thread start-up, page faults, lazy initialisation) do not shrink the batch. */
  double per_op = 0.0;
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t n = 1;
    double est;
    for (;;) {
      double t0 = now_ns();
      if (fn(ctx, n) != 0) {
        fail(name, "benchmark body");
        return -1.0;
      }
      double dt = now_ns() - t0;
      est = dt / (double)n;
      if (dt >= target_ns / 8 || n >= (1ull << 40)) break;
      n *= 2;
    }
    if (pass == 0 || est < per_op) per_op = est;
  }
  uint64_t iters = (uint64_t)(target_ns / (per_op > 0.01 ? per_op : 0.01));
  if (iters < 1) iters = 1;
  /* One full-length warm-up repetition. */
  if (fn(ctx, iters) != 0) {
    fail(name, "benchmark body");
    return -1.0;
  }
  double* means = (double*)malloc(sizeof(double) * (size_t)g_reps);
  for (int r = 0; r < g_reps; ++r) {
    double t0 = now_ns();
    int rc = fn(ctx, iters);
    double dt = now_ns() - t0;
    if (rc != 0) {
      fail(name, "benchmark body");
      free(means);
      return -1.0;
    }
    means[r] = dt / (double)iters;
  }
  qsort(means, (size_t)g_reps, sizeof(double), cmp_double);
  double med = (g_reps % 2) ? means[g_reps / 2]
                            : 0.5 * (means[g_reps / 2 - 1] + means[g_reps / 2]);
  printf("RESULT %s %.3f\n", name, med);
  fprintf(stderr, "  %-32s %14.3f ns/op  (min %.3f, max %.3f, %llu iters x %d reps)\n", name,
          med, means[0], means[g_reps - 1], (unsigned long long)iters, g_reps);
  fflush(stdout);
  free(means);
  return med;
}

static void skip(const char* name, const char* why) {
  if (!selected(name)) return;
  printf("SKIP %s %s\n", name, why);
  fprintf(stderr, "  %-32s skipped: %s\n", name, why);
  fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */
/* 1. Packed C -> C call                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Body of the packed function: returns args[0] + 1 as an int through TVMCFuncSetReturn. */
static int echo_plus_one(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                         void* resource_handle) {
  (void)resource_handle;
  TVMValue v;
  int tc = kTVMArgInt;
  v.v_int64 = (num_args > 0 && type_codes[0] == kTVMArgInt) ? args[0].v_int64 + 1 : 0;
  return TVMCFuncSetReturn(ret, &v, &tc, 1);
}

typedef struct {
  TVMFunctionHandle f;
} call_ctx;

static int body_packed_call(void* p, uint64_t iters) {
  call_ctx* c = (call_ctx*)p;
  TVMValue arg, ret;
  int arg_tc = kTVMArgInt, ret_tc;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < iters; ++i) {
    arg.v_int64 = (int64_t)i;
    if (TVMFuncCall(c->f, &arg, &arg_tc, 1, &ret, &ret_tc) != 0) return -1;
    acc += (uint64_t)ret.v_int64;
  }
  g_sink = acc;
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 2. TVMFuncGetGlobal + TVMFuncFree                                                           */
/* ------------------------------------------------------------------------------------------ */

static const char* const kGlobalName = "tvmrt_bench.echo_plus_one";

static int body_get_global(void* p, uint64_t iters) {
  (void)p;
  for (uint64_t i = 0; i < iters; ++i) {
    TVMFunctionHandle h = NULL;
    if (TVMFuncGetGlobal(kGlobalName, &h) != 0 || h == NULL) return -1;
    if (TVMFuncFree(h) != 0) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 3. TVMArrayAlloc + TVMArrayFree, float32[16]                                                */
/* ------------------------------------------------------------------------------------------ */

static int body_array_alloc_free(void* p, uint64_t iters) {
  (void)p;
  const int64_t shape[1] = {16};
  for (uint64_t i = 0; i < iters; ++i) {
    TVMArrayHandle a = NULL;
    if (TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &a) != 0) return -1;
    if (TVMArrayFree(a) != 0) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 4. TVMBackendAllocWorkspace + TVMBackendFreeWorkspace, 4 KB                                 */
/* ------------------------------------------------------------------------------------------ */

static int body_workspace(void* p, uint64_t iters) {
  (void)p;
  for (uint64_t i = 0; i < iters; ++i) {
    void* w = TVMBackendAllocWorkspace(kDLCPU, 0, 4096, kDLFloat, 32);
    if (w == NULL) return -1;
    if (TVMBackendFreeWorkspace(kDLCPU, 0, w) != 0) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 5. TVMBackendParallelLaunch fork-join                                                       */
/* ------------------------------------------------------------------------------------------ */

static int lambda_empty(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)task_id;
  (void)penv;
  (void)cdata;
  return 0;
}

static int lambda_barrier(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)cdata;
  return TVMBackendParallelBarrier(task_id, penv);
}

/* Records the team size the runtime picks for num_task = 0. */
static int lambda_count(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)task_id;
  *(volatile int32_t*)cdata = penv->num_task;
  return 0;
}

static int body_launch_empty(void* p, uint64_t iters) {
  (void)p;
  for (uint64_t i = 0; i < iters; ++i)
    if (TVMBackendParallelLaunch(lambda_empty, NULL, 0) != 0) return -1;
  return 0;
}

static int body_launch_barrier(void* p, uint64_t iters) {
  (void)p;
  for (uint64_t i = 0; i < iters; ++i)
    if (TVMBackendParallelLaunch(lambda_barrier, NULL, 0) != 0) return -1;
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 6. Host copy: TVMArrayCopyFromTo vs memcpy, 16 MB                                           */
/* ------------------------------------------------------------------------------------------ */

#define COPY_ELEMS (4 * 1024 * 1024) /* float32 -> 16 MiB */

typedef struct {
  TVMArrayHandle src, dst;
  size_t nbytes;
} copy_ctx;

static int body_array_copy(void* p, uint64_t iters) {
  copy_ctx* c = (copy_ctx*)p;
  for (uint64_t i = 0; i < iters; ++i)
    if (TVMArrayCopyFromTo(c->src, c->dst, NULL) != 0) return -1;
  return 0;
}

static int body_memcpy(void* p, uint64_t iters) {
  copy_ctx* c = (copy_ctx*)p;
  for (uint64_t i = 0; i < iters; ++i) {
    memcpy(c->dst->data, c->src->data, c->nbytes);
    __asm__ __volatile__("" ::: "memory"); /* keep every copy */
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 7. Call into a compiled kernel: myadd(A, B, C), float32[1]                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  TVMFunctionHandle f;
  TVMValue args[3];
  int codes[3];
} kernel_ctx;

static int body_kernel_call(void* p, uint64_t iters) {
  kernel_ctx* c = (kernel_ctx*)p;
  for (uint64_t i = 0; i < iters; ++i) {
    TVMValue ret;
    int ret_tc;
    /* Handle arguments are passed by reference, not moved: the arrays stay as they are. */
    if (TVMFuncCall(c->f, c->args, c->codes, 3, &ret, &ret_tc) != 0) return -1;
  }
  return 0;
}

/* Loads path, fetches myadd, checks C = A + B once, then times calls with both handle type
 * codes. tag names the module in the result names (kernel_call.<tag>.<code>). */
static void bench_kernel(const char* tag, const char* path) {
  char n_dl[160], n_nd[160];
  snprintf(n_dl, sizeof n_dl, "kernel_call.%s.dltensor", tag);
  snprintf(n_nd, sizeof n_nd, "kernel_call.%s.ndarray", tag);
  if (!selected(n_dl) && !selected(n_nd)) return;

  TVMModuleHandle mod = NULL;
  TVMFunctionHandle f = NULL;
  TVMArrayHandle arr[3] = {NULL, NULL, NULL};
  const int64_t shape[1] = {1};
  if (TVMModLoadFromFile(path, "so", &mod) != 0) {
    fail(n_dl, "TVMModLoadFromFile");
    return;
  }
  if (TVMModGetFunction(mod, "myadd", 0, &f) != 0 || f == NULL) {
    fail(n_dl, "TVMModGetFunction(myadd)");
    TVMModFree(mod);
    return;
  }
  for (int i = 0; i < 3; ++i) {
    if (TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &arr[i]) != 0) {
      fail(n_dl, "TVMArrayAlloc");
      goto out;
    }
  }
  ((float*)arr[0]->data)[0] = 1.5f;
  ((float*)arr[1]->data)[0] = 2.25f;
  ((float*)arr[2]->data)[0] = 0.0f;

  kernel_ctx c;
  c.f = f;
  for (int i = 0; i < 3; ++i) c.args[i].v_handle = arr[i];

  for (int k = 0; k < 2; ++k) {
    const char* name = k == 0 ? n_dl : n_nd;
    int code = k == 0 ? kTVMDLTensorHandle : kTVMNDArrayHandle;
    if (!selected(name)) continue;
    for (int i = 0; i < 3; ++i) c.codes[i] = code;
    ((float*)arr[2]->data)[0] = 0.0f;
    if (body_kernel_call(&c, 1) != 0) {
      fail(name, "TVMFuncCall(myadd)");
      continue;
    }
    float got = ((float*)arr[2]->data)[0];
    if (got != 3.75f) {
      /* Timed anyway (the call path is what is measured), but say so loudly. */
      fprintf(stderr, "bench %s: WARNING: myadd(1.5, 2.25) gave %g, expected A + B = 3.75\n",
              name, (double)got);
      printf("INFO %s.unexpected_result %g\n", name, (double)got);
    }
    run_bench(name, body_kernel_call, &c);
  }
out:
  for (int i = 0; i < 3; ++i)
    if (arr[i]) TVMArrayFree(arr[i]);
  TVMFuncFree(f);
  TVMModFree(mod);
}

/* ------------------------------------------------------------------------------------------ */
/* 8. Module load time                                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const char* path;
} load_ctx;

static int body_mod_load(void* p, uint64_t iters) {
  load_ctx* c = (load_ctx*)p;
  for (uint64_t i = 0; i < iters; ++i) {
    TVMModuleHandle m = NULL;
    if (TVMModLoadFromFile(c->path, "so", &m) != 0) return -1;
    if (TVMModFree(m) != 0) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Fixture discovery                                                                           */
/* ------------------------------------------------------------------------------------------ */

static int is_file(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Largest regular *.so file in dir smaller than below bytes, or 0 if none; written to out. */
static int largest_so(const char* dir, long long below, char* out, size_t out_len,
                      long long* size) {
  DIR* d = opendir(dir);
  if (!d) return 0;
  struct dirent* e;
  long long best = -1;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".so") != 0) continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if ((long long)st.st_size > best && (long long)st.st_size < below) {
      best = (long long)st.st_size;
      snprintf(out, out_len, "%s", p);
    }
  }
  closedir(d);
  if (size) *size = best;
  return best >= 0;
}

static const char* base_name(const char* p) {
  const char* s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* ------------------------------------------------------------------------------------------ */

static void usage(void) {
  fprintf(stderr,
          "usage: bench [--fixtures DIR] [--kernel PATH] [--dso PATH] [--reps N] "
          "[--rep-ms MS] [--only NAME[,NAME...]] [--calls K]\n");
  exit(2);
}

int main(int argc, char** argv) {
  char fixtures[4096] = "";
  const char* dso = NULL;
  const char* kernel = NULL;
  const char* env;
  if ((env = getenv("BENCH_REPS")) != NULL) g_reps = atoi(env);
  if ((env = getenv("BENCH_REP_MS")) != NULL) g_rep_ms = atof(env);
  if ((env = getenv("BENCH_CALLS")) != NULL) g_calls = strtoull(env, NULL, 10);
  if ((env = getenv("TVMRT_CACHE")) != NULL && *env)
    snprintf(fixtures, sizeof fixtures, "%s/fixtures", env);
  else if ((env = getenv("HOME")) != NULL)
    snprintf(fixtures, sizeof fixtures, "%s/.cache/tvm-runtime-rs/fixtures", env);
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--fixtures") && i + 1 < argc)
      snprintf(fixtures, sizeof fixtures, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--kernel") && i + 1 < argc)
      kernel = argv[++i];
    else if (!strcmp(argv[i], "--dso") && i + 1 < argc)
      dso = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      g_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rep-ms") && i + 1 < argc)
      g_rep_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      g_only = argv[++i];
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      g_calls = strtoull(argv[++i], NULL, 10);
    else
      usage();
  }
  if (g_reps < 1) g_reps = 1;
  if (g_rep_ms <= 0) g_rep_ms = 20.0;

  /* Which libtvm_runtime.so did the dynamic linker give us? */
  Dl_info info;
  if (dladdr((void*)&TVMFuncCall, &info) && info.dli_fname) {
    char real[4096];
    printf("INFO runtime %s\n", realpath(info.dli_fname, real) ? real : info.dli_fname);
  }
  printf("INFO reps %d\nINFO rep_ms %g\n", g_reps, g_rep_ms);
  fflush(stdout);

  /* 1. packed C -> C call */
  call_ctx cc = {NULL};
  if (TVMFuncCreateFromCFunc(echo_plus_one, NULL, NULL, &cc.f) != 0) {
    fail("packed_call", "TVMFuncCreateFromCFunc");
    return 1;
  }
  {
    TVMValue a, r;
    int atc = kTVMArgInt, rtc = -1;
    a.v_int64 = 41;
    if (TVMFuncCall(cc.f, &a, &atc, 1, &r, &rtc) != 0 || rtc != kTVMArgInt || r.v_int64 != 42) {
      fail("packed_call", "sanity call (expected int 42)");
      return 1;
    }
  }
  run_bench("packed_call", body_packed_call, &cc);

  /* 2. TVMFuncGetGlobal + TVMFuncFree of an existing name */
  if (TVMFuncRegisterGlobal(kGlobalName, cc.f, 1) != 0)
    fail("get_global_free", "TVMFuncRegisterGlobal");
  else
    run_bench("get_global_free", body_get_global, NULL);

  /* 3. TVMArrayAlloc + TVMArrayFree */
  run_bench("array_alloc_free", body_array_alloc_free, NULL);

  /* 4. workspace */
  run_bench("workspace_4k", body_workspace, NULL);

  /* 5. parallel launch */
  if (selected("parallel_launch")) {
    volatile int32_t team = -1;
    if (TVMBackendParallelLaunch(lambda_count, (void*)&team, 0) == 0)
      printf("INFO parallel_team_size %d\n", (int)team);
  }
  run_bench("parallel_launch", body_launch_empty, NULL);
  run_bench("parallel_launch_barrier", body_launch_barrier, NULL);

  /* 6. host copy */
  if (selected("array_copy_16m") || selected("memcpy_16m")) {
    copy_ctx c = {NULL, NULL, (size_t)COPY_ELEMS * sizeof(float)};
    const int64_t shape[1] = {COPY_ELEMS};
    if (TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &c.src) != 0 ||
        TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &c.dst) != 0) {
      fail("array_copy_16m", "TVMArrayAlloc");
    } else {
      float* s = (float*)c.src->data;
      for (size_t i = 0; i < COPY_ELEMS; ++i) s[i] = (float)i;
      memset(c.dst->data, 0, c.nbytes); /* fault the pages in */
      if (TVMArrayCopyFromTo(c.src, c.dst, NULL) != 0 ||
          memcmp(c.src->data, c.dst->data, c.nbytes) != 0) {
        fail("array_copy_16m", "TVMArrayCopyFromTo (sanity)");
      } else {
        printf("INFO copy_bytes %zu\n", c.nbytes);
        /* Interleave so both see the same machine state; memcpy first and last. */
        run_bench("memcpy_16m", body_memcpy, &c);
        run_bench("array_copy_16m", body_array_copy, &c);
      }
    }
    if (c.src) TVMArrayFree(c.src);
    if (c.dst) TVMArrayFree(c.dst);
  }

  /* 7. kernel call */
  char kpath[4096], path[4096];
  if (kernel)
    snprintf(kpath, sizeof kpath, "%s", kernel);
  else
    snprintf(kpath, sizeof kpath, "%s/add_one.so", fixtures);
  int have_kernel = is_file(kpath);
  if (have_kernel) {
    printf("INFO kernel_fixture %s\n", kpath);
    bench_kernel("add_one", kpath);
  } else {
    skip("kernel_call.add_one.dltensor", "no TVM-compiled add_one.so (fixtures dir or --kernel)");
    skip("kernel_call.add_one.ndarray", "no TVM-compiled add_one.so (fixtures dir or --kernel)");
  }
  if (dso) {
    if (is_file(dso))
      bench_kernel("dso", dso);
    else
      skip("kernel_call.dso.dltensor", "hand-written DSO not found");
  }

  /* 8. module load: the largest fixture library, and the hand-written DSO */
  long long sz = 0;
  struct stat kst;
  /* The largest library there that loads as a module (a directory of fixtures may also hold
   * plain shared libraries, e.g. device plugins): the first one that fails is reported and
   * the next smaller one tried. */
  long long below = (long long)(~0ull >> 1);
  int have_lib;
  while ((have_lib = largest_so(fixtures, below, path, sizeof path, &sz)) != 0) {
    TVMModuleHandle m = NULL;
    if (TVMModLoadFromFile(path, "so", &m) == 0) {
      TVMModFree(m);
      break;
    }
    const char* err = TVMGetLastError();
    printf("INFO module_load_not_a_module %s\n", path);
    fprintf(stderr, "bench: %s does not load as a module, trying the next one: %.200s\n", path,
            err ? err : "");
    below = sz;
  }
  if (!have_lib && have_kernel && stat(kpath, &kst) == 0) {
    snprintf(path, sizeof path, "%s", kpath);
    sz = (long long)kst.st_size;
    have_lib = 1;
  }
  if (have_lib) {
    char name[4200];
    snprintf(name, sizeof name, "module_load.%s", base_name(path));
    printf("INFO module_load_fixture %s %lld\n", path, sz);
    load_ctx lc = {path};
    run_bench(name, body_mod_load, &lc);
  } else {
    skip("module_load.fixture", "no *.so in the fixtures dir and no --kernel library");
  }
  if (dso && is_file(dso)) {
    load_ctx lc = {dso};
    run_bench("module_load.dso", body_mod_load, &lc);
  }

  TVMFuncFree(cc.f);
  return g_failed ? 1 : 0;
}

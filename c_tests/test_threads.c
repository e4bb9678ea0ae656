/*
 * Concurrency: 8 threads at once registering, looking up and calling packed functions,
 * creating objects, allocating and copying arrays, using workspaces and parallel launches,
 * raising errors, and sharing one function object (concurrent retain/free/call).
 * Thread-local results (returned strings, last error) must not leak between threads.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "check.h"

#define NUM_THREADS 8
#define ITERATIONS 40

static pthread_barrier_t start_line;
static TVMFunctionHandle shared_func;
static int shared_calls;
static int shared_fin;

static int shared_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle rv, void* rh) {
  (void)rh;
  __atomic_fetch_add(&shared_calls, 1, __ATOMIC_SEQ_CST);
  if (n != 1 || codes[0] != kTVMArgInt) return -1;
  TVMValue v = val_int(args[0].v_int64 * 2);
  int c = kTVMArgInt;
  return TVMCFuncSetReturn(rv, &v, &c, 1);
}
static void shared_finalizer(void* rh) {
  (void)rh;
  __atomic_fetch_add(&shared_fin, 1, __ATOMIC_SEQ_CST);
}

/* Adds the resource handle (the thread number) to its argument. */
static int own_cb(TVMValue* args, int* codes, int n, TVMRetValueHandle rv, void* rh) {
  if (n != 1 || codes[0] != kTVMArgInt) return -1;
  TVMValue v = val_int(args[0].v_int64 + (int64_t)(intptr_t)rh);
  int c = kTVMArgInt;
  return TVMCFuncSetReturn(rv, &v, &c, 1);
}

static int par_count_lambda(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  __atomic_fetch_add((int*)cdata, 1, __ATOMIC_SEQ_CST);
  return TVMBackendParallelBarrier(task_id, penv);
}

static void* worker(void* arg) {
  int id = (int)(intptr_t)arg;
  char name[64], text[64], err[64];
  snprintf(name, sizeof(name), "tvmrt_test.thread.%d", id);
  pthread_barrier_wait(&start_line);

  for (int k = 0; k < ITERATIONS; ++k) {
    /* Own global: register (override after the first round), look up, call. */
    TVMFunctionHandle f = NULL;
    CHECK_OK(TVMFuncCreateFromCFunc(own_cb, (void*)(intptr_t)id, NULL, &f));
    CHECK_OK(TVMFuncRegisterGlobal(name, f, k > 0));
    CHECK_OK(TVMFuncFree(f));
    TVMFunctionHandle g = NULL;
    CHECK_OK(TVMFuncGetGlobal(name, &g));
    CHECK(g != NULL);
    if (g) {
      TVMValue a = val_int(1000 * k), r;
      int c = kTVMArgInt, rc = -1;
      CHECK_OK(TVMFuncCall(g, &a, &c, 1, &r, &rc));
      CHECK_EQ(r.v_int64, 1000 * k + id);
      CHECK_OK(TVMFuncFree(g));
    }

    /* The shared function: concurrent retain, call, free. */
    CHECK_OK(TVMObjectRetain(shared_func));
    {
      TVMValue a = val_int(id + k), r;
      int c = kTVMArgInt, rc = -1;
      CHECK_OK(TVMFuncCall(shared_func, &a, &c, 1, &r, &rc));
      CHECK_EQ(r.v_int64, 2 * (id + k));
    }
    CHECK_OK(TVMObjectFree(shared_func));

    /* Strings returned in thread-local storage stay this thread's. */
    snprintf(text, sizeof(text), "thread %d iteration %d", id, k);
    TVMObjectHandle s = make_string(text);
    CHECK(s != NULL);
    if (s) {
      TVMValue a = val_handle(s), r;
      int c = kTVMObjectHandle, rc = -1;
      CHECK_OK(call_global("runtime.GetFFIString", &a, &c, 1, &r, &rc));
      CHECK_EQ(rc, kTVMStr);
      if (rc == kTVMStr) CHECK_STREQ(r.v_str, text);
      CHECK_OK(TVMObjectFree(s));
    }

    /* Arrays. */
    int64_t shape[2] = {4, 8};
    TVMArrayHandle arr = NULL;
    CHECK_OK(TVMArrayAlloc(shape, 2, kDLInt, 32, 1, kDLCPU, 0, &arr));
    if (arr) {
      int32_t in[32], out[32];
      for (int i = 0; i < 32; ++i) in[i] = id * 100000 + k * 100 + i;
      CHECK_OK(TVMArrayCopyFromBytes(arr, in, sizeof(in)));
      CHECK_OK(TVMArrayCopyToBytes(arr, out, sizeof(out)));
      CHECK(memcmp(in, out, sizeof(in)) == 0);
      CHECK_OK(TVMArrayFree(arr));
    }

    /* Workspace. */
    void* w = TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)(256 + id * 64 + k), kDLFloat, 32);
    CHECK(w != NULL);
    if (w) {
      memset(w, id, (size_t)(256 + id * 64 + k));
      CHECK_EQ(TVMBackendFreeWorkspace(kDLCPU, 0, w), 0);
    }

    /* Parallel launch from several application threads at once. */
    if (k % 8 == 0) {
      int count = 0;
      CHECK_OK(TVMBackendParallelLaunch(par_count_lambda, &count, 0));
      CHECK(count >= 1 && count <= 4);
    }

    /* The last error is per thread. */
    snprintf(err, sizeof(err), "error of thread %d round %d", id, k);
    TVMAPISetLastError(err);
    CHECK_STREQ(TVMGetLastError(), err);
    unsigned idx;
    char key[64];
    snprintf(key, sizeof(key), "tvmrt.thread%d.NoSuchType", id);
    CHECK(TVMObjectTypeKey2Index(key, &idx) != 0);
    CHECK_CONTAINS(TVMGetLastError(), key);

    /* The registry listing sees this thread's name. */
    if (k % 10 == 0) {
      int n = 0, hits = 0;
      const char** names = NULL;
      CHECK_OK(TVMFuncListGlobalNames(&n, &names));
      for (int i = 0; i < n; ++i)
        if (strcmp(names[i], name) == 0) hits++;
      CHECK_EQ(hits, 1);
    }
  }
  CHECK_OK(TVMFuncRemoveGlobal(name));
  return NULL;
}

int main(void) {
  setenv("TVM_NUM_THREADS", "4", 0);
  CHECK_OK(TVMFuncCreateFromCFunc(shared_cb, NULL, shared_finalizer, &shared_func));
  CHECK(pthread_barrier_init(&start_line, NULL, NUM_THREADS) == 0);
  pthread_t th[NUM_THREADS];
  for (int i = 0; i < NUM_THREADS; ++i)
    CHECK(pthread_create(&th[i], NULL, worker, (void*)(intptr_t)i) == 0);
  for (int i = 0; i < NUM_THREADS; ++i) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&start_line);

  CHECK_EQ(shared_calls, NUM_THREADS * ITERATIONS);
  CHECK_EQ(shared_fin, 0);
  CHECK_OK(TVMFuncFree(shared_func));
  CHECK_EQ(shared_fin, 1);
  /* Every thread removed its global. */
  for (int i = 0; i < NUM_THREADS; ++i) {
    char name[64];
    snprintf(name, sizeof(name), "tvmrt_test.thread.%d", i);
    TVMFunctionHandle g = (TVMFunctionHandle)(intptr_t)1;
    CHECK_OK(TVMFuncGetGlobal(name, &g));
    CHECK(g == NULL);
  }

  /* runtime.config_threadpool with a CPU id the machine lacks, or a negative one: an error
     (a worker used to panic in CPU_SET and abort the process), and the pool still works. */
  {
    TVMValue a[3] = {val_int(0), val_int(2), val_int(5000)};
    int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt};
    TVMValue r;
    int rc = -1;
    CHECK_FAIL(call_global("runtime.config_threadpool", a, c, 3, &r, &rc));
    a[2] = val_int(-1);
    CHECK_FAIL(call_global("runtime.config_threadpool", a, c, 3, &r, &rc));
    int count = 0;
    CHECK_OK(TVMBackendParallelLaunch(par_count_lambda, &count, 0));
    CHECK(count >= 1 && count <= 4);
  }
  return check_summary("test_threads");
}

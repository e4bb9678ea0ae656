/*
 * Decoder benchmark through the C API: one process loads the decoder fixture of
 * scripts/build_llm_fixtures.py (a Relax executable with `_initialize_effect`, `prefill` and
 * `decode`, weights in an ndarray-cache directory), runs a prefill and greedy decode steps, and
 * prints machine-readable lines. scripts/bench_llm.sh runs this same binary alternately on
 * TVM's reference libtvm_runtime.so and on ours (LD_LIBRARY_PATH) and joins the results.
 *
 *   bench_llm_decode DIR [--gens N] [--tokens N] -- PARAM_NAME ...
 *
 * DIR holds decoder.so and params/; the parameter names are passed in the order `prefill` and
 * `decode` take them (meta.json's param_names). The weights are loaded the way TVM's clients
 * do: vm.builtin.ndarray_cache.load, then vm.builtin.param_array_from_cache_by_name.
 *
 * A generation is a prefill of the prompt 1,2,3 and N (default 64) greedy decode steps; one
 * untimed warm-up generation of 8 steps, then --gens (default 5) timed ones. A step is what a
 * client does per token: the argmax of the last logits on the host, the token copied into
 * the input array, the ShapeTuple of the total length, the `decode` call, and unpacking its
 * (logits, state) result (the logits copied to the host; the previous state released).
 *
 * Output lines:
 *   LOAD_MS x      TVMModLoadFromFile + vm_load_executable + vm_initialization
 *   PARAMS_MS x    ndarray_cache.load + param_array_from_cache_by_name_unpacked
 *   PREFILL_US x   one per generation
 *   STEP_US x      one per timed decode step
 *   TOKENS_PER_S x one per timed generation: N / (time of its N steps)
 *   MAXRSS_KB x    peak resident set size (getrusage)
 *   CHECK hash     FNV-1a of the generated tokens (both runtimes must agree)
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

#define CHECK(call)                                                                \
  do {                                                                             \
    if ((call) != 0) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,         \
              TVMGetLastError());                                                  \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

#define MAX_VOCAB 65536

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static TVMFunctionHandle global(const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK(TVMFuncGetGlobal(name, &f));
  if (!f) {
    fprintf(stderr, "no global function %s\n", name);
    exit(1);
  }
  return f;
}

static TVMFunctionHandle array_size_f, array_get_f, shape_tuple_f;

static int64_t array_size(void* arr) {
  TVMValue a, r;
  int c = kTVMObjectHandle, rc;
  a.v_handle = arr;
  CHECK(TVMFuncCall(array_size_f, &a, &c, 1, &r, &rc));
  return r.v_int64;
}

/* Item i of an Array (a new reference; its type code in *code). */
static void* array_get(void* arr, int64_t i, int* code) {
  TVMValue a[2], r;
  int c[2] = {kTVMObjectHandle, kDLInt};
  a[0].v_handle = arr;
  a[1].v_int64 = i;
  CHECK(TVMFuncCall(array_get_f, a, c, 2, &r, code));
  return r.v_handle;
}

static void release(void* h, int code) {
  if (code == kTVMNDArrayHandle) CHECK(TVMArrayFree(h));
  else if (code == kTVMObjectHandle) CHECK(TVMObjectFree(h));
}

static void* shape_tuple(int64_t n) {
  TVMValue a, r;
  int c = kDLInt, rc;
  a.v_int64 = n;
  CHECK(TVMFuncCall(shape_tuple_f, &a, &c, 1, &r, &rc));
  return r.v_handle;
}

/* The model's state between calls: the argument list (ids, total, state..., params...) and
 * the handles it owns. */
typedef struct {
  TVMValue* args;
  int* codes;
  int nstate, nparams;
  void* result; /* the (logits, state) Array of the last call, or NULL */
  void* state;  /* its state Array */
} Model;

/* Unpacks a (logits, state) result into the argument list; returns the argmax of the last
 * logits row. */
static int take_result(Model* m, TVMValue rv, int rc, float* logits) {
  if (rc != kTVMObjectHandle) {
    fprintf(stderr, "the model did not return a tuple (type code %d)\n", rc);
    exit(1);
  }
  for (int i = 0; i < m->nstate; i++) release(m->args[2 + i].v_handle, m->codes[2 + i]);
  if (m->state) CHECK(TVMObjectFree(m->state));
  if (m->result) CHECK(TVMObjectFree(m->result));
  m->result = rv.v_handle;
  int lc, sc;
  DLTensor* lg = array_get(m->result, 0, &lc);
  m->state = array_get(m->result, 1, &sc);
  if (lc != kTVMNDArrayHandle || sc != kTVMObjectHandle || array_size(m->state) != m->nstate) {
    fprintf(stderr, "unexpected (logits, state) result\n");
    exit(1);
  }
  size_t n = 1;
  for (int i = 0; i < lg->ndim; i++) n *= (size_t)lg->shape[i];
  int64_t vocab = lg->shape[lg->ndim - 1];
  if (n > (size_t)MAX_VOCAB * 64 || vocab < 1 || vocab > MAX_VOCAB) {
    fprintf(stderr, "logits too large\n");
    exit(1);
  }
  CHECK(TVMArrayCopyToBytes(lg, logits, n * 4));
  CHECK(TVMArrayFree(lg));
  const float* last = logits + n - (size_t)vocab;
  int best = 0;
  for (int64_t i = 1; i < vocab; i++)
    if (last[i] > last[best]) best = (int)i;
  for (int i = 0; i < m->nstate; i++)
    m->args[2 + i].v_handle = array_get(m->state, i, &m->codes[2 + i]);
  return best;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s DIR [--gens N] [--tokens N] -- PARAM_NAME ...\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  int gens = 5, tokens = 64, first_name = argc;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--gens") && i + 1 < argc) gens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--")) {
      first_name = i + 1;
      break;
    }
  }
  int nparams = argc - first_name;
  if (nparams <= 0 || tokens < 1 || gens < 1) {
    fprintf(stderr, "need parameter names after --, and positive --gens/--tokens\n");
    return 2;
  }
  char path[4096];
  TVMValue rv;
  int rc;

  /* Process start-up stays out of the timing (see bench_relax.c). */
  array_size_f = global("runtime.ArraySize");
  array_get_f = global("runtime.ArrayGetItem");
  shape_tuple_f = global("runtime.ShapeTuple");

  double t0 = now_us();
  TVMModuleHandle exec, vm;
  TVMFunctionHandle load, init;
  snprintf(path, sizeof path, "%s/decoder.so", dir);
  CHECK(TVMModLoadFromFile(path, "so", &exec));
  CHECK(TVMModGetFunction(exec, "vm_load_executable", 0, &load));
  CHECK(TVMFuncCall(load, NULL, NULL, 0, &rv, &rc));
  vm = rv.v_handle;
  CHECK(TVMModGetFunction(vm, "vm_initialization", 0, &init));
  TVMValue iv[3];
  int ic[3] = {kDLInt, kDLInt, kDLInt};
  iv[0].v_int64 = kDLCPU, iv[1].v_int64 = 0, iv[2].v_int64 = 2; /* pooled */
  CHECK(TVMFuncCall(init, iv, ic, 3, &rv, &rc));
  printf("LOAD_MS %.4f\n", (now_us() - t0) / 1e3);

  t0 = now_us();
  {
    TVMValue a[3];
    int c[3] = {kTVMStr, kDLInt, kDLInt};
    snprintf(path, sizeof path, "%s/params", dir);
    a[0].v_str = path, a[1].v_int64 = kDLCPU, a[2].v_int64 = 0;
    CHECK(TVMFuncCall(global("vm.builtin.ndarray_cache.load"), a, c, 3, &rv, &rc));
  }
  /* Array<String> of the names (the reference has no by_name_unpacked variant). */
  TVMValue* names = calloc((size_t)nparams, sizeof(TVMValue));
  int* name_codes = calloc((size_t)nparams, sizeof(int));
  TVMFunctionHandle string_f = global("runtime.String");
  for (int i = 0; i < nparams; i++) {
    TVMValue a;
    int c = kTVMStr;
    a.v_str = argv[first_name + i];
    CHECK(TVMFuncCall(string_f, &a, &c, 1, &names[i], &name_codes[i]));
  }
  TVMValue list;
  int list_code;
  CHECK(TVMFuncCall(global("runtime.Array"), names, name_codes, nparams, &list, &list_code));
  CHECK(TVMFuncCall(global("vm.builtin.param_array_from_cache_by_name"), &list, &list_code, 1,
                    &rv, &rc));
  CHECK(TVMObjectFree(list.v_handle));
  for (int i = 0; i < nparams; i++) CHECK(TVMObjectFree(names[i].v_handle));
  void* params = rv.v_handle;
  printf("PARAMS_MS %.4f\n", (now_us() - t0) / 1e3);

  TVMFunctionHandle effect_f, prefill_f, decode_f;
  CHECK(TVMModGetFunction(vm, "_initialize_effect", 0, &effect_f));
  CHECK(TVMModGetFunction(vm, "prefill", 0, &prefill_f));
  CHECK(TVMModGetFunction(vm, "decode", 0, &decode_f));
  if (!effect_f || !prefill_f || !decode_f) {
    fprintf(stderr, "the model lacks _initialize_effect, prefill or decode\n");
    return 1;
  }

  float* logits = malloc(sizeof(float) * (size_t)MAX_VOCAB * 64);
  const int32_t prompt[3] = {1, 2, 3};
  int64_t prompt_shape[2] = {1, 3}, one_shape[2] = {1, 1};
  TVMArrayHandle prompt_ids, ids;
  CHECK(TVMArrayAlloc(prompt_shape, 2, kDLInt, 32, 1, kDLCPU, 0, &prompt_ids));
  CHECK(TVMArrayCopyFromBytes(prompt_ids, (void*)prompt, sizeof prompt));
  CHECK(TVMArrayAlloc(one_shape, 2, kDLInt, 32, 1, kDLCPU, 0, &ids));
  uint32_t check = 2166136261u;

  for (int g = -1; g < gens; g++) {
    int steps = g < 0 ? 8 : tokens;
    Model m = {0};
    CHECK(TVMFuncCall(effect_f, NULL, NULL, 0, &rv, &rc));
    m.state = rv.v_handle;
    m.nstate = (int)array_size(m.state);
    m.nparams = nparams;
    int nargs = 2 + m.nstate + nparams;
    m.args = calloc((size_t)nargs, sizeof(TVMValue));
    m.codes = calloc((size_t)nargs, sizeof(int));
    for (int i = 0; i < m.nstate; i++)
      m.args[2 + i].v_handle = array_get(m.state, i, &m.codes[2 + i]);
    for (int i = 0; i < nparams; i++)
      m.args[2 + m.nstate + i].v_handle = array_get(params, i, &m.codes[2 + m.nstate + i]);

    double tp = now_us();
    int64_t total = 3;
    m.args[0].v_handle = prompt_ids, m.codes[0] = kTVMNDArrayHandle;
    m.args[1].v_handle = shape_tuple(total), m.codes[1] = kTVMObjectHandle;
    CHECK(TVMFuncCall(prefill_f, m.args, m.codes, nargs, &rv, &rc));
    CHECK(TVMObjectFree(m.args[1].v_handle));
    int tok = take_result(&m, rv, rc, logits);
    if (g >= 0) printf("PREFILL_US %.3f\n", now_us() - tp);

    double tg = now_us();
    for (int s = 0; s < steps; s++) {
      double ts = now_us();
      int32_t t32 = tok;
      if (g == 0) check = (check ^ (uint32_t)tok) * 16777619u;
      total += 1;
      CHECK(TVMArrayCopyFromBytes(ids, &t32, sizeof t32));
      m.args[0].v_handle = ids, m.codes[0] = kTVMNDArrayHandle;
      m.args[1].v_handle = shape_tuple(total), m.codes[1] = kTVMObjectHandle;
      CHECK(TVMFuncCall(decode_f, m.args, m.codes, nargs, &rv, &rc));
      CHECK(TVMObjectFree(m.args[1].v_handle));
      tok = take_result(&m, rv, rc, logits);
      if (g >= 0) printf("STEP_US %.3f\n", now_us() - ts);
    }
    if (g >= 0) printf("TOKENS_PER_S %.2f\n", steps / ((now_us() - tg) / 1e6));

    for (int i = 0; i < m.nstate; i++) release(m.args[2 + i].v_handle, m.codes[2 + i]);
    for (int i = 0; i < nparams; i++)
      release(m.args[2 + m.nstate + i].v_handle, m.codes[2 + m.nstate + i]);
    if (m.state) CHECK(TVMObjectFree(m.state));
    if (m.result) CHECK(TVMObjectFree(m.result));
    free(m.args);
    free(m.codes);
  }

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("MAXRSS_KB %ld\n", ru.ru_maxrss);
  printf("CHECK %08x\n", check);

  CHECK(TVMArrayFree(ids));
  CHECK(TVMArrayFree(prompt_ids));
  CHECK(TVMObjectFree(params));
  free(logits);
  free(names);
  free(name_codes);
  TVMFuncFree(effect_f);
  TVMFuncFree(prefill_f);
  TVMFuncFree(decode_f);
  TVMFuncFree(init);
  TVMFuncFree(load);
  TVMModFree(vm);
  TVMModFree(exec);
  return 0;
}

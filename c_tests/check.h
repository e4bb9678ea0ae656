/*
 * Minimal assertion helpers for the C conformance suite.
 *
 * Every test file is one executable: it runs its checks, prints one summary line
 * ("<file>: N checks, M failed") and exits non-zero when any check failed.
 * Checks never abort, so one run reports every broken expectation; a failed check
 * prints the file, the line, the expression and, for API calls, TVMGetLastError().
 * The counters are updated atomically so worker threads may use the macros too.
 */
#ifndef TVMRT_C_TESTS_CHECK_H_
#define TVMRT_C_TESTS_CHECK_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

/*
 * Exported by libtvm_runtime.so but declared in no public header (TVM declares them in
 * src/runtime/ndarray.cc and src/runtime/relax_vm/builtin.cc); the prototypes follow those
 * declarations. A header that also declares them must use compatible types.
 */
int TVMArrayGetTypeIndex(TVMArrayHandle handle, unsigned* out_tindex);
int TVMBackendAnyListSetPackedArg(void* anylist, int index, TVMValue* args, int* type_codes,
                                  int arg_offset);
int TVMBackendAnyListResetItem(void* anylist, int index);
int TVMBackendAnyListMoveFromPackedReturn(void* anylist, int index, TVMValue* args,
                                          int* type_codes, int ret_offset);

static int check_total_ = 0;
static int check_failed_ = 0;

static inline void check_count_(int ok) {
  __atomic_fetch_add(&check_total_, 1, __ATOMIC_SEQ_CST);
  if (!ok) __atomic_fetch_add(&check_failed_, 1, __ATOMIC_SEQ_CST);
}

static inline const char* check_last_error_(void) {
  const char* e = TVMGetLastError();
  return e ? e : "(null)";
}

/* A boolean expectation. */
#define CHECK(cond)                                                              \
  do {                                                                           \
    int ok_ = (cond) ? 1 : 0;                                                    \
    check_count_(ok_);                                                           \
    if (!ok_) fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
  } while (0)

/* A boolean expectation with a printf-style explanation on failure. */
#define CHECK_MSG(cond, ...)                                                         \
  do {                                                                               \
    int ok_ = (cond) ? 1 : 0;                                                        \
    check_count_(ok_);                                                               \
    if (!ok_) {                                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);       \
      fprintf(stderr, __VA_ARGS__);                                                  \
      fputc('\n', stderr);                                                           \
    }                                                                                \
  } while (0)

/* Integer equality, printing both sides on failure. */
#define CHECK_EQ(a, b)                                                                   \
  do {                                                                                   \
    long long a_ = (long long)(a), b_ = (long long)(b);                                  \
    CHECK_MSG(a_ == b_, "%lld != %lld", a_, b_);                                         \
  } while (0)

/* Pointer equality. */
#define CHECK_PTR_EQ(a, b)                                                         \
  do {                                                                             \
    const void* a_ = (const void*)(a);                                             \
    const void* b_ = (const void*)(b);                                             \
    CHECK_MSG(a_ == b_, "%p != %p", a_, b_);                                       \
  } while (0)

/* String equality (NULL never equals anything). */
#define CHECK_STREQ(a, b)                                                                \
  do {                                                                                   \
    const char* a_ = (a);                                                                \
    const char* b_ = (b);                                                                \
    CHECK_MSG(a_ != NULL && b_ != NULL && strcmp(a_, b_) == 0, "\"%s\" != \"%s\"",       \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                   \
  } while (0)

/* `hay` is a non-NULL string that contains `needle`. */
#define CHECK_CONTAINS(hay, needle)                                                      \
  do {                                                                                   \
    const char* h_ = (hay);                                                              \
    const char* n_ = (needle);                                                           \
    CHECK_MSG(h_ != NULL && strstr(h_, n_) != NULL, "\"%s\" does not contain \"%s\"",    \
              h_ ? h_ : "(null)", n_);                                                   \
  } while (0)

/* An API call that must return 0; prints TVMGetLastError() otherwise. */
#define CHECK_OK(call)                                                                   \
  do {                                                                                   \
    int rc_ = (call);                                                                    \
    check_count_(rc_ == 0);                                                              \
    if (rc_ != 0)                                                                        \
      fprintf(stderr, "%s:%d: CHECK_OK failed: %s returned %d: %s\n", __FILE__, __LINE__, \
              #call, rc_, check_last_error_());                                          \
  } while (0)

/*
 * An API call that must fail: a return of exactly -1 (what every failing TVM C API call
 * returns) AND a non-empty TVMGetLastError(). The last error is cleared first (set to ""),
 * so a stale message cannot satisfy the check.
 */
#define CHECK_FAIL(call)                                                                 \
  do {                                                                                   \
    TVMAPISetLastError("");                                                              \
    int rc_ = (call);                                                                    \
    const char* e_ = TVMGetLastError();                                                  \
    int ok_ = rc_ == -1 && e_ != NULL && e_[0] != '\0';                                  \
    check_count_(ok_);                                                                   \
    if (!ok_)                                                                            \
      fprintf(stderr, "%s:%d: CHECK_FAIL failed: %s returned %d, last error \"%s\"\n",   \
              __FILE__, __LINE__, #call, rc_, e_ ? e_ : "(null)");                       \
  } while (0)

/* Like CHECK_FAIL, and the message must also contain `needle`. */
#define CHECK_FAIL_MSG(call, needle)                                                     \
  do {                                                                                   \
    CHECK_FAIL(call);                                                                    \
    CHECK_CONTAINS(TVMGetLastError(), needle);                                           \
  } while (0)

/* Prints the summary line and returns the process exit status. */
/*
 * Reports checks that cannot run on this runtime (the C twin of tests/common/skip.rs): prints
 * "skipped: <test>: <why>" and appends it to $TVMRT_SKIP_LOG, which the test command's
 * summary counts. With the environment variable `require` (a TVMRT_REQUIRE_* switch, or NULL
 * for none) set, it is a failed check instead.
 */
static inline void check_skip(const char* test, const char* require, const char* why) {
  if (require != NULL && getenv(require) != NULL && getenv(require)[0] != '\0') {
    check_count_(0);
    fprintf(stderr, "%s: %s is set, but this cannot run: %s\n", test, require, why);
    return;
  }
  printf("skipped: %s: %s\n", test, why);
  const char* log = getenv("TVMRT_SKIP_LOG");
  FILE* f = log != NULL && log[0] != '\0' ? fopen(log, "a") : NULL;
  if (f != NULL) {
    fprintf(f, "skipped: %s: %s\n", test, why);
    fclose(f);
  }
}

/*
 * Whether the runtime under test was built with the Cargo feature `name` (the list that the
 * global function runtime.BuiltFeatures returns). A runtime without that function, the
 * reference, has every feature.
 */
static inline int has_feature(const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMFuncGetGlobal("runtime.BuiltFeatures", &f) != 0 || f == NULL) return 1;
  TVMValue arr, r, args[2];
  int code = 0, codes[2] = {kTVMObjectHandle, kTVMArgInt}, found = 0;
  int rc = TVMFuncCall(f, NULL, NULL, 0, &arr, &code);
  TVMFuncFree(f);
  if (rc != 0 || code != kTVMObjectHandle) {
    fprintf(stderr, "runtime.BuiltFeatures failed: %s\n", check_last_error_());
    exit(2);
  }
  TVMFunctionHandle size = NULL, item = NULL, str = NULL;
  TVMFuncGetGlobal("runtime.ArraySize", &size);
  TVMFuncGetGlobal("runtime.ArrayGetItem", &item);
  TVMFuncGetGlobal("runtime.GetFFIString", &str);
  args[0].v_handle = arr.v_handle;
  int64_t n = 0;
  if (size != NULL && TVMFuncCall(size, args, codes, 1, &r, &code) == 0) n = r.v_int64;
  for (int64_t i = 0; i < n && !found && item != NULL && str != NULL; ++i) {
    args[1].v_int64 = i;
    if (TVMFuncCall(item, args, codes, 2, &r, &code) != 0) break;
    if (code == kTVMStr) {
      found = strcmp(r.v_str, name) == 0;
      continue;
    }
    TVMValue s = r, out;
    int sc = kTVMObjectHandle;
    if (TVMFuncCall(str, &s, &sc, 1, &out, &code) == 0 && code == kTVMStr)
      found = strcmp(out.v_str, name) == 0;
    TVMObjectFree(s.v_handle);
  }
  if (size) TVMFuncFree(size);
  if (item) TVMFuncFree(item);
  if (str) TVMFuncFree(str);
  TVMObjectFree(arr.v_handle);
  return found;
}

/* "test_module::test_dso_module" from __FILE__ and __func__ (for the skip line). */
static inline void check_skip_feature_(const char* file, const char* func, const char* feature) {
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  size_t len = strlen(base);
  if (len > 2 && strcmp(base + len - 2, ".c") == 0) len -= 2;
  char test[256], why[128];
  snprintf(test, sizeof(test), "%.*s::%s", (int)len, base, func);
  snprintf(why, sizeof(why), "this runtime was built without `%s`", feature);
  check_skip(test, NULL, why);
}

/*
 * In a test function: when the runtime under test lacks the Cargo feature (a smaller set such
 * as `--features minimal`), reports the skip with the feature as reason and returns.
 */
#define REQUIRE_FEATURE(feature)                                 \
  do {                                                           \
    if (!has_feature(feature)) {                                 \
      check_skip_feature_(__FILE__, __func__, feature);          \
      return;                                                    \
    }                                                            \
  } while (0)

static inline int check_summary(const char* name) {
  int total = __atomic_load_n(&check_total_, __ATOMIC_SEQ_CST);
  int failed = __atomic_load_n(&check_failed_, __ATOMIC_SEQ_CST);
  printf("%s: %d checks, %d failed\n", name, total, failed);
  fflush(stdout);
  return failed == 0 && total > 0 ? 0 : 1;
}

/*
 * A device type no runtime knows. Not 99: TVM indexes a 36-entry table with the device type
 * before validating it, so types 36..127 read out of bounds in the reference (it crashes or
 * not depending on memory contents); 20 is inside the table and unnamed by DLPack and TVM.
 */
#define UNKNOWN_DEVICE 20

/* ---- small helpers shared by the test files ---- */

/* Looks up a global function; the handle is owned by the caller (TVMFuncFree). */
static inline TVMFunctionHandle get_global(const char* name) {
  TVMFunctionHandle f = NULL;
  int rc = TVMFuncGetGlobal(name, &f);
  if (rc != 0 || f == NULL) {
    fprintf(stderr, "global function %s not found (rc %d): %s\n", name, rc, check_last_error_());
  }
  return f;
}

static inline TVMValue val_int(int64_t v) {
  TVMValue x;
  x.v_int64 = v;
  return x;
}
static inline TVMValue val_float(double v) {
  TVMValue x;
  x.v_float64 = v;
  return x;
}
static inline TVMValue val_handle(void* v) {
  TVMValue x;
  x.v_handle = v;
  return x;
}
static inline TVMValue val_str(const char* v) {
  TVMValue x;
  x.v_str = v;
  return x;
}

/* Calls a global function by name; returns the TVMFuncCall status. */
static inline int call_global(const char* name, TVMValue* args, int* codes, int n, TVMValue* ret,
                       int* ret_code) {
  TVMFunctionHandle f = get_global(name);
  if (f == NULL) return -1;
  int rc = TVMFuncCall(f, args, codes, n, ret, ret_code);
  TVMFuncFree(f);
  return rc;
}

/* Makes a runtime.String object (owned; free with TVMObjectFree), or NULL. */
static inline TVMObjectHandle make_string(const char* s) {
  TVMValue a = val_str(s), r;
  int c = kTVMStr, rc = -1;
  if (call_global("runtime.String", &a, &c, 1, &r, &rc) != 0 || rc != kTVMObjectHandle) {
    fprintf(stderr, "runtime.String failed: %s\n", check_last_error_());
    return NULL;
  }
  return r.v_handle;
}

/*
 * Whether the runtime under test has a usable CUDA device 0 (runtime.GetDeviceAttr kExist).
 * The checks that a missing CUDA backend fails clearly run only where this is 0.
 */
static inline int cuda_present(void) {
  TVMValue a[3], r;
  int c[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt}, rc = -1;
  a[0] = val_int(kDLCUDA), a[1] = val_int(0), a[2] = val_int(0);
  if (call_global("runtime.GetDeviceAttr", a, c, 3, &r, &rc) != 0) return 0;
  return rc == kTVMArgInt && r.v_int64 != 0;
}

#endif /* TVMRT_C_TESTS_CHECK_H_ */

/*
 * Error state: TVMAPISetLastError, TVMGetLastError, TVMGetLastBacktrace, the Python error
 * slot (TVMAPISetLastPythonError, TVMGetLastPythonError, TVMDropLastPythonError) with fake
 * Py_IncRef/Py_DecRef/GIL hooks registered through TVMBackendRegisterEnvCAPI, and
 * TVMThrowLastError (address only).
 */
#include <pthread.h>

#include "check.h"

/* ---- fake Python environment hooks ---- */
static int n_incref, n_decref, n_gil_ensure, n_gil_release;
static int n_gil_bad_state;
static void fake_incref(void* obj) {
  (void)obj;
  n_incref++;
}
static void fake_decref(void* obj) {
  (void)obj;
  n_decref++;
}
/* Shaped like CPython's: PyGILState_STATE (an int enum; 1 is PyGILState_UNLOCKED) out of
 * PyGILState_Ensure, and the same int back into PyGILState_Release. */
static int fake_gil_ensure(void) {
  n_gil_ensure++;
  return 1;
}
static void fake_gil_release(int state) {
  if (state != 1) n_gil_bad_state++;
  n_gil_release++;
}

/* ---- thread-locality ---- */
struct thread_report {
  int initial_is_null_or_empty;
  int python_error_is_null;
  int own_message_ok;
};

static void* error_thread(void* arg) {
  struct thread_report* r = (struct thread_report*)arg;
  const char* e = TVMGetLastError();
  r->initial_is_null_or_empty = (e == NULL || e[0] == '\0');
  r->python_error_is_null = TVMGetLastPythonError() == NULL;
  TVMAPISetLastError("set by the worker thread");
  e = TVMGetLastError();
  r->own_message_ok = e != NULL && strcmp(e, "set by the worker thread") == 0;
  return NULL;
}

static void test_initial_state(void) {
  /* Reference: a thread that never saw an error gets NULL (not ""), and no Python error. */
  CHECK(TVMGetLastError() == NULL);
  CHECK(TVMGetLastPythonError() == NULL);
}

static void test_set_get(void) {
  TVMAPISetLastError("hello");
  CHECK_STREQ(TVMGetLastError(), "hello");
  /* A plain message set through TVMAPISetLastError has no backtrace. */
  CHECK(TVMGetLastBacktrace() == NULL);

  /* Stored verbatim: no prefix, no normalisation, newlines kept. */
  TVMAPISetLastError("ValueError: line one\nline two\n");
  CHECK_STREQ(TVMGetLastError(), "ValueError: line one\nline two\n");

  static char big[8193];
  for (int i = 0; i < 8192; ++i) big[i] = (char)('a' + i % 26);
  big[8192] = '\0';
  TVMAPISetLastError(big);
  CHECK_STREQ(TVMGetLastError(), big);
  CHECK_EQ(strlen(TVMGetLastError()), 8192);

  TVMAPISetLastError("");
  CHECK_STREQ(TVMGetLastError(), "");

  /* The runtime keeps its own copy of the message. */
  char local[32];
  strcpy(local, "transient");
  TVMAPISetLastError(local);
  strcpy(local, "XXXXXXXXX");
  CHECK_STREQ(TVMGetLastError(), "transient");
}

static void test_api_failure_sets_message(void) {
  unsigned idx = 12345;
  CHECK_FAIL_MSG(TVMObjectTypeKey2Index("tvmrt.no.such.Type", &idx), "tvmrt.no.such.Type");
  CHECK_EQ(idx, 12345); /* out untouched on failure */

  /* A later successful call leaves the last error as it was (it is not cleared). */
  char saved[4096];
  strncpy(saved, TVMGetLastError(), sizeof(saved) - 1);
  saved[sizeof(saved) - 1] = '\0';
  CHECK_OK(TVMObjectTypeKey2Index("runtime.String", &idx));
  CHECK_STREQ(TVMGetLastError(), saved);

  /* The backtrace accessor may be NULL (ours) or text (reference); it must not crash. */
  const char* bt = TVMGetLastBacktrace();
  if (bt != NULL) CHECK(strlen(bt) < (size_t)1 << 30);
}

static void test_thread_local(void) {
  TVMAPISetLastError("set by the main thread");
  struct thread_report r;
  memset(&r, 0, sizeof(r));
  pthread_t th;
  CHECK(pthread_create(&th, NULL, error_thread, &r) == 0);
  pthread_join(th, NULL);
  CHECK(r.initial_is_null_or_empty);
  CHECK(r.python_error_is_null);
  CHECK(r.own_message_ok);
  CHECK_STREQ(TVMGetLastError(), "set by the main thread");
}

static void test_env_capi_registration(void) {
  CHECK_OK(TVMBackendRegisterEnvCAPI("PyGILState_Ensure", (void*)fake_gil_ensure));
  CHECK_OK(TVMBackendRegisterEnvCAPI("PyGILState_Release", (void*)fake_gil_release));
  CHECK_OK(TVMBackendRegisterEnvCAPI("Py_IncRef", (void*)fake_incref));
  CHECK_OK(TVMBackendRegisterEnvCAPI("Py_DecRef", (void*)fake_decref));
  /* Registering the same pointer again is fine. */
  CHECK_OK(TVMBackendRegisterEnvCAPI("Py_IncRef", (void*)fake_incref));
  /* Only the five known names are accepted. */
  CHECK_FAIL_MSG(TVMBackendRegisterEnvCAPI("tvmrt_NoSuchEnvAPI", (void*)fake_incref),
                 "tvmrt_NoSuchEnvAPI");
}

static void test_python_error(void) {
  static int fake_py_object_a, fake_py_object_b;
  void* a = &fake_py_object_a;
  void* b = &fake_py_object_b;

  int inc0 = n_incref, dec0 = n_decref;
  TVMAPISetLastPythonError(a);
  CHECK_PTR_EQ(TVMGetLastPythonError(), a);
  CHECK_EQ(n_incref - inc0, 1); /* the runtime holds one reference */
  CHECK_EQ(n_decref - dec0, 0);
  /* Reference: while a Python error is stored, TVMGetLastError returns NULL. */
  CHECK(TVMGetLastError() == NULL);
  /* Reading does not consume it. */
  CHECK_PTR_EQ(TVMGetLastPythonError(), a);

  TVMDropLastPythonError();
  CHECK(TVMGetLastPythonError() == NULL);
  CHECK_EQ(n_incref - inc0, n_decref - dec0); /* reference released */
  /* Reference: after the drop the last error is the empty string. */
  CHECK_STREQ(TVMGetLastError(), "");

  /* Dropping when the last error is not a Python error changes nothing. */
  TVMAPISetLastError("keep me");
  TVMDropLastPythonError();
  CHECK_STREQ(TVMGetLastError(), "keep me");

  /* A new Python error replaces (and releases) the previous one. */
  TVMAPISetLastPythonError(a);
  TVMAPISetLastPythonError(b);
  CHECK_PTR_EQ(TVMGetLastPythonError(), b);
  CHECK_EQ((n_incref - inc0) - (n_decref - dec0), 1);

  /* A plain message replaces it and releases the object. */
  TVMAPISetLastError("plain again");
  CHECK(TVMGetLastPythonError() == NULL);
  CHECK_EQ(n_incref - inc0, n_decref - dec0);
  CHECK_STREQ(TVMGetLastError(), "plain again");

  /* So does an error raised by a failing API call. */
  TVMAPISetLastPythonError(a);
  unsigned idx;
  CHECK(TVMObjectTypeKey2Index("tvmrt.still.no.such.Type", &idx) != 0);
  CHECK(TVMGetLastPythonError() == NULL);
  CHECK_EQ(n_incref - inc0, n_decref - dec0);
  CHECK_CONTAINS(TVMGetLastError(), "tvmrt.still.no.such.Type");

  /* A NULL object is stored without touching reference counts. */
  int inc1 = n_incref;
  TVMAPISetLastPythonError(NULL);
  CHECK(TVMGetLastPythonError() == NULL);
  CHECK_EQ(n_incref, inc1);
  TVMDropLastPythonError();

  /* The Python error slot is per thread too. */
  TVMAPISetLastPythonError(a);
  struct thread_report r;
  memset(&r, 0, sizeof(r));
  pthread_t th;
  CHECK(pthread_create(&th, NULL, error_thread, &r) == 0);
  pthread_join(th, NULL);
  CHECK(r.python_error_is_null);
  CHECK_PTR_EQ(TVMGetLastPythonError(), a);
  TVMDropLastPythonError();

  CHECK_EQ(n_incref - inc0, n_decref - dec0);
  /* Every GIL acquisition is released (ours may not take the GIL at all). */
  CHECK_EQ(n_gil_ensure, n_gil_release);
  CHECK_EQ(n_gil_bad_state, 0); /* the state comes back as the int the hook returned */
}

static void test_throw_last_error_exists(void) {
  /* The reference throws a C++ exception out of TVMThrowLastError, which a C program
   * cannot catch; only check that the symbol is exported. */
  void (*volatile fp)(void) = TVMThrowLastError;
  CHECK(fp != NULL);
}

int main(void) {
  test_initial_state();
  test_set_get();
  test_api_failure_sets_message();
  test_thread_local();
  test_env_capi_registration();
  test_python_error();
  test_throw_last_error_exists();
  return check_summary("test_error");
}

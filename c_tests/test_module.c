/*
 * Modules: TVMModLoadFromFile (a real DSO module built from fixture_module.c, plus error
 * paths), TVMModGetFunction with query_imports 0/1, TVMModImport (including cycles),
 * TVMModFree, and compiled code calling back into the runtime through the context slots.
 */
#include <stdio.h>

#include "check.h"

static const char* fixture = TVMRT_FIXTURE_MODULE;

static int64_t call_ints(TVMFunctionHandle f, int64_t a, int64_t b, int nargs, int* status) {
  TVMValue v[2] = {val_int(a), val_int(b)}, r;
  int c[2] = {kTVMArgInt, kTVMArgInt}, rc = -1;
  *status = TVMFuncCall(f, v, c, nargs, &r, &rc);
  if (*status == 0 && rc != kTVMArgInt) *status = -2;
  return *status == 0 ? r.v_int64 : 0;
}

static int syslib_only(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                       void* rh) {
  (void)args;
  (void)codes;
  (void)n;
  (void)rh;
  ret->v_int64 = 123;
  *ret_code = kTVMArgInt;
  return 0;
}

static int times_ten(TVMValue* args, int* codes, int n, TVMRetValueHandle rv, void* rh) {
  (void)rh;
  if (n != 1 || codes[0] != kTVMArgInt) return -1;
  TVMValue v = val_int(args[0].v_int64 * 10);
  int c = kTVMArgInt;
  return TVMCFuncSetReturn(rv, &v, &c, 1);
}

static const char* module_type_key(TVMModuleHandle m) {
  TVMValue a = val_handle(m), r;
  int c = kTVMModuleHandle, rc = -1;
  if (call_global("runtime.ModuleGetTypeKey", &a, &c, 1, &r, &rc) != 0 || rc != kTVMStr) return NULL;
  return r.v_str;
}

static int64_t imports_size(TVMModuleHandle m) {
  TVMValue a = val_handle(m), r;
  int c = kTVMModuleHandle, rc = -1;
  if (call_global("runtime.ModuleImportsSize", &a, &c, 1, &r, &rc) != 0 || rc != kTVMArgInt)
    return -1;
  return r.v_int64;
}

static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static void test_load_errors(void) {
  TVMModuleHandle m = NULL;
  const char* missing = "/nonexistent/tvmrt_c_tests/missing.so";
  CHECK_FAIL_MSG(TVMModLoadFromFile(missing, "so", &m), missing);
  CHECK_FAIL_MSG(TVMModLoadFromFile(missing, "", &m), missing);

  /* A file that is not a shared library. */
  char path[1024];
  snprintf(path, sizeof(path), "%s/not_a_library.so", TVMRT_SCRATCH_DIR);
  write_file(path, "this is not an ELF file\n");
  CHECK_FAIL_MSG(TVMModLoadFromFile(path, "so", &m), path);
  CHECK_FAIL_MSG(TVMModLoadFromFile(path, "", &m), path);

  /* A format nobody loads: named in the message. */
  char odd[1024];
  snprintf(odd, sizeof(odd), "%s/some_file.tvmrtzzz", TVMRT_SCRATCH_DIR);
  write_file(odd, "x");
  CHECK_FAIL_MSG(TVMModLoadFromFile(odd, "", &m), "tvmrtzzz");
  CHECK_FAIL_MSG(TVMModLoadFromFile(path, "tvmrtzzz", &m), "tvmrtzzz");
  /* No extension and no format. */
  char noext[1024];
  snprintf(noext, sizeof(noext), "%s/no_extension", TVMRT_SCRATCH_DIR);
  write_file(noext, "x");
  CHECK_FAIL(TVMModLoadFromFile(noext, "", &m));

  CHECK_OK(TVMModFree(NULL));
}

static void test_dso_module(void) {
  TVMModuleHandle m = NULL;
  if (!has_feature("dso")) {
    /* Without `dso` a shared library is refused, naming the missing feature. */
    CHECK_FAIL_MSG(TVMModLoadFromFile(fixture, "so", &m), "without `dso`");
    CHECK(m == NULL);
  }
  REQUIRE_FEATURE("dso");
  CHECK_OK(TVMModLoadFromFile(fixture, "so", &m));
  CHECK(m != NULL);
  if (m == NULL) return;
  unsigned t = 0;
  CHECK_OK(TVMObjectGetTypeIndex(m, &t));
  CHECK_EQ(t, 1); /* runtime.Module */
  CHECK_STREQ(module_type_key(m), "library");
  CHECK_EQ(imports_size(m), 0);

  int st = -1;
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMModGetFunction(m, "fixture_add", 0, &f));
  CHECK(f != NULL);
  if (f) {
    CHECK_EQ(call_ints(f, 2, 3, 2, &st), 5);
    CHECK_EQ(st, 0);
    /* Wrong arguments: the function's own error. */
    TVMValue r;
    int rc;
    CHECK_FAIL_MSG(TVMFuncCall(f, NULL, NULL, 0, &r, &rc), "fixture_add: expects two ints");
    CHECK_OK(TVMFuncFree(f));
  }
  /* __tvm_main__ resolves to the entry function it names. */
  f = NULL;
  CHECK_OK(TVMModGetFunction(m, "__tvm_main__", 0, &f));
  CHECK(f != NULL);
  if (f) {
    CHECK_EQ(call_ints(f, 20, 22, 2, &st), 42);
    CHECK_OK(TVMFuncFree(f));
  }
  /* Missing symbols: success and NULL, with or without imports. */
  f = (TVMFunctionHandle)(intptr_t)1;
  CHECK_OK(TVMModGetFunction(m, "tvmrt_no_such_symbol", 0, &f));
  CHECK(f == NULL);
  f = (TVMFunctionHandle)(intptr_t)1;
  CHECK_OK(TVMModGetFunction(m, "tvmrt_no_such_symbol", 1, &f));
  CHECK(f == NULL);

  /* The runtime filled the module's __TVMAPISetLastError slot. */
  f = NULL;
  CHECK_OK(TVMModGetFunction(m, "fixture_fail", 0, &f));
  if (f) {
    TVMValue r;
    int rc;
    CHECK_FAIL_MSG(TVMFuncCall(f, NULL, NULL, 0, &r, &rc), "fixture_fail: failing on purpose");
    CHECK_OK(TVMFuncFree(f));
  }

  /* Workspace (through the slot and through the dynamically resolved symbol) and parallel
   * launch from inside the module. */
  f = NULL;
  CHECK_OK(TVMModGetFunction(m, "fixture_workspace", 0, &f));
  if (f) {
    CHECK_EQ(call_ints(f, 0, 0, 0, &st), 4000);
    CHECK_EQ(st, 0);
    CHECK_OK(TVMFuncFree(f));
  }
  f = NULL;
  CHECK_OK(TVMModGetFunction(m, "fixture_parallel", 0, &f));
  if (f) {
    int64_t n = call_ints(f, 0, 0, 0, &st);
    CHECK_EQ(st, 0);
    CHECK(n >= 1 && n <= 4);
    CHECK_OK(TVMFuncFree(f));
  }

  /* GetFuncFromEnv from inside the module: the global registry ... */
  TVMFunctionHandle g = NULL;
  CHECK_OK(TVMFuncCreateFromCFunc(times_ten, NULL, NULL, &g));
  CHECK_OK(TVMFuncRegisterGlobal("tvmrt_test.module_env", g, 0));
  TVMFunctionHandle call_env = NULL;
  CHECK_OK(TVMModGetFunction(m, "fixture_call_env", 0, &call_env));
  CHECK(call_env != NULL);
  if (call_env) {
    TVMValue a[2] = {val_str("tvmrt_test.module_env"), val_int(6)}, r;
    int c[2] = {kTVMStr, kTVMArgInt}, rc = -1;
    CHECK_OK(TVMFuncCall(call_env, a, c, 2, &r, &rc));
    CHECK_EQ(rc, kTVMArgInt);
    CHECK_EQ(r.v_int64, 60);
    a[0] = val_str("tvmrt_test.module_env_missing");
    CHECK_FAIL_MSG(TVMFuncCall(call_env, a, c, 2, &r, &rc), "tvmrt_test.module_env_missing");
  }

  /* ... and imported modules. */
  CHECK_EQ(TVMBackendRegisterSystemLibSymbol("tvmrt_md_only_in_syslib", (void*)syslib_only), 0);
  TVMValue pa = val_str("tvmrt_md_"), pr;
  int pc = kTVMStr, prc = -1;
  CHECK_OK(call_global("runtime.SystemLib", &pa, &pc, 1, &pr, &prc));
  TVMModuleHandle sys = prc == kTVMModuleHandle ? pr.v_handle : NULL;
  CHECK(sys != NULL);
  if (sys) {
    CHECK_STREQ(module_type_key(sys), "library");
    CHECK_OK(TVMModImport(m, sys));
    CHECK_EQ(imports_size(m), 1);
    f = (TVMFunctionHandle)(intptr_t)1;
    CHECK_OK(TVMModGetFunction(m, "only_in_syslib", 0, &f));
    CHECK(f == NULL); /* not without query_imports */
    f = NULL;
    CHECK_OK(TVMModGetFunction(m, "only_in_syslib", 1, &f));
    CHECK(f != NULL);
    if (f) {
      CHECK_EQ(call_ints(f, 0, 0, 0, &st), 123);
      CHECK_OK(TVMFuncFree(f));
    }
    if (call_env) {
      TVMValue a[2] = {val_str("only_in_syslib"), val_int(0)}, r;
      int c[2] = {kTVMStr, kTVMArgInt}, rc = -1;
      CHECK_OK(TVMFuncCall(call_env, a, c, 2, &r, &rc));
      CHECK_EQ(rc, kTVMArgInt);
      CHECK_EQ(r.v_int64, 123);
    }
    /* Cycles are refused: importing the importer, or a module into itself. */
    CHECK_FAIL(TVMModImport(sys, m));
    CHECK_FAIL(TVMModImport(m, m));
    CHECK_EQ(imports_size(m), 1);
    CHECK_OK(TVMModFree(sys));
  }

  /* Functions keep their module alive. */
  f = NULL;
  CHECK_OK(TVMModGetFunction(m, "fixture_add", 0, &f));
  CHECK_OK(TVMModFree(m));
  if (f) {
    CHECK_EQ(call_ints(f, 1, 1, 2, &st), 2);
    CHECK_EQ(st, 0);
    CHECK_OK(TVMFuncFree(f));
  }
  if (call_env) {
    TVMValue a[2] = {val_str("tvmrt_test.module_env"), val_int(1)}, r;
    int c[2] = {kTVMStr, kTVMArgInt}, rc = -1;
    CHECK_OK(TVMFuncCall(call_env, a, c, 2, &r, &rc));
    CHECK_EQ(r.v_int64, 10);
    CHECK_OK(TVMFuncFree(call_env));
  }
  CHECK_OK(TVMFuncRemoveGlobal("tvmrt_test.module_env"));
  CHECK_OK(TVMFuncFree(g));

  /* Loading again after everything was released works; the format is deduced from the
   * extension too, and the runtime.ModuleLoadFromFile global loads the same way.
   * (Loads of one file share the library's __tvm_module_ctx, which the latest load
   * overwrites, so context-dependent calls are only made above, with a single live load.) */
  m = NULL;
  CHECK_OK(TVMModLoadFromFile(fixture, "", &m));
  if (m) {
    f = NULL;
    CHECK_OK(TVMModGetFunction(m, "fixture_add", 1, &f));
    if (f) {
      CHECK_EQ(call_ints(f, 4, 5, 2, &st), 9);
      CHECK_OK(TVMFuncFree(f));
    }
    CHECK_OK(TVMModFree(m));
  }
  {
    TVMValue a[2] = {val_str(fixture), val_str("so")}, r;
    int c[2] = {kTVMStr, kTVMStr}, rc = -1;
    CHECK_OK(call_global("runtime.ModuleLoadFromFile", a, c, 2, &r, &rc));
    CHECK_EQ(rc, kTVMModuleHandle);
    if (rc == kTVMModuleHandle) {
      f = NULL;
      CHECK_OK(TVMModGetFunction(r.v_handle, "fixture_add", 0, &f));
      if (f) {
        CHECK_EQ(call_ints(f, -4, 5, 2, &st), 1);
        CHECK_OK(TVMFuncFree(f));
      }
      CHECK_OK(TVMModFree(r.v_handle));
    }
  }
}

int main(void) {
  test_load_errors();
  test_dso_module();
  return check_summary("test_module");
}

/* JNI glue for org.tvmrt.Tvm: each native method calls the TVM C API and turns a non-zero
 * return into a RuntimeException carrying TVMGetLastError(). */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <tvm/runtime/c_runtime_api.h>

static void throw_tvm(JNIEnv* env) {
  jclass cls = (*env)->FindClass(env, "java/lang/RuntimeException");
  const char* msg = TVMGetLastError();
  (*env)->ThrowNew(env, cls, msg ? msg : "TVM call failed");
}

JNIEXPORT jlong JNICALL Java_org_tvmrt_Tvm_modLoad(JNIEnv* env, jclass cls, jstring path) {
  (void)cls;
  const char* p = (*env)->GetStringUTFChars(env, path, NULL);
  TVMModuleHandle mod = NULL;
  int r = TVMModLoadFromFile(p, "so", &mod);
  (*env)->ReleaseStringUTFChars(env, path, p);
  if (r != 0) throw_tvm(env);
  return (jlong)(intptr_t)mod;
}

JNIEXPORT jlong JNICALL Java_org_tvmrt_Tvm_modGetFunction(JNIEnv* env, jclass cls, jlong mod,
                                                          jstring name) {
  (void)cls;
  const char* n = (*env)->GetStringUTFChars(env, name, NULL);
  TVMFunctionHandle f = NULL;
  int r = TVMModGetFunction((TVMModuleHandle)(intptr_t)mod, n, 1, &f);
  (*env)->ReleaseStringUTFChars(env, name, n);
  if (r != 0) {
    throw_tvm(env);
  } else if (f == NULL) {
    jclass ex = (*env)->FindClass(env, "java/lang/RuntimeException");
    (*env)->ThrowNew(env, ex, "no such function in the module");
  }
  return (jlong)(intptr_t)f;
}

JNIEXPORT void JNICALL Java_org_tvmrt_Tvm_modFree(JNIEnv* env, jclass cls, jlong mod) {
  (void)cls;
  if (TVMModFree((TVMModuleHandle)(intptr_t)mod) != 0) throw_tvm(env);
}

JNIEXPORT void JNICALL Java_org_tvmrt_Tvm_funcFree(JNIEnv* env, jclass cls, jlong f) {
  (void)cls;
  if (TVMFuncFree((TVMFunctionHandle)(intptr_t)f) != 0) throw_tvm(env);
}

JNIEXPORT void JNICALL Java_org_tvmrt_Tvm_funcCallArrays(JNIEnv* env, jclass cls, jlong f,
                                                         jlongArray arrays) {
  (void)cls;
  jsize n = (*env)->GetArrayLength(env, arrays);
  jlong* hs = (*env)->GetLongArrayElements(env, arrays, NULL);
  TVMValue* vals = (TVMValue*)calloc((size_t)n + 1, sizeof(TVMValue));
  int* codes = (int*)calloc((size_t)n + 1, sizeof(int));
  for (jsize i = 0; i < n; ++i) {
    vals[i].v_handle = (void*)(intptr_t)hs[i];
    codes[i] = kTVMNDArrayHandle;
  }
  TVMValue ret;
  int ret_code = kTVMNullptr;
  int r = TVMFuncCall((TVMFunctionHandle)(intptr_t)f, vals, codes, n, &ret, &ret_code);
  free(vals);
  free(codes);
  (*env)->ReleaseLongArrayElements(env, arrays, hs, JNI_ABORT);
  if (r != 0) throw_tvm(env);
}

JNIEXPORT jlong JNICALL Java_org_tvmrt_Tvm_arrayFromFloats(JNIEnv* env, jclass cls,
                                                           jfloatArray data, jlongArray shape) {
  (void)cls;
  jsize ndim = (*env)->GetArrayLength(env, shape);
  jlong* s = (*env)->GetLongArrayElements(env, shape, NULL);
  int64_t dims[16];
  if (ndim > 16) ndim = 16;
  for (jsize i = 0; i < ndim; ++i) dims[i] = s[i];
  (*env)->ReleaseLongArrayElements(env, shape, s, JNI_ABORT);
  DLTensor* t = NULL;
  if (TVMArrayAlloc(dims, ndim, kDLFloat, 32, 1, kDLCPU, 0, &t) != 0) {
    throw_tvm(env);
    return 0;
  }
  jsize n = (*env)->GetArrayLength(env, data);
  jfloat* d = (*env)->GetFloatArrayElements(env, data, NULL);
  int r = TVMArrayCopyFromBytes(t, d, (size_t)n * sizeof(float));
  (*env)->ReleaseFloatArrayElements(env, data, d, JNI_ABORT);
  if (r != 0) {
    throw_tvm(env);
    TVMArrayFree(t);
    return 0;
  }
  return (jlong)(intptr_t)t;
}

JNIEXPORT jfloatArray JNICALL Java_org_tvmrt_Tvm_arrayToFloats(JNIEnv* env, jclass cls,
                                                               jlong array) {
  (void)cls;
  DLTensor* t = (DLTensor*)(intptr_t)array;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  jfloatArray out = (*env)->NewFloatArray(env, (jsize)n);
  jfloat* d = (*env)->GetFloatArrayElements(env, out, NULL);
  int r = TVMArrayCopyToBytes(t, d, (size_t)n * sizeof(float));
  (*env)->ReleaseFloatArrayElements(env, out, d, 0);
  if (r != 0) throw_tvm(env);
  return out;
}

JNIEXPORT void JNICALL Java_org_tvmrt_Tvm_arrayFree(JNIEnv* env, jclass cls, jlong array) {
  (void)cls;
  if (TVMArrayFree((TVMArrayHandle)(intptr_t)array) != 0) throw_tvm(env);
}

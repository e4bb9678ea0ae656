/*
 * The one symbol that libraries compiled by TVM v0.24+ (the tvm-ffi ABI) import from the
 * process: TVMFFIErrorSetRaisedFromCStrParts. The runtime builds this file into a tiny shared
 * object (build.rs), and loads it RTLD_GLOBAL from memory on the first tvm-ffi library it opens,
 * so that the symbol resolves even when libtvm_runtime.so itself was opened RTLD_LOCAL.
 *
 * Calls made from a library the runtime loaded go to the runtime's handler. Calls from anywhere
 * else (e.g. TVM's own libtvm_ffi.so loaded later, whose calls to its own export may bind here)
 * are passed on to the next definition of the symbol, so the shim never takes it over.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>

typedef int (*tvmrt_handler_t)(const char* kind, const char** parts, int32_t num_parts,
                               void* caller);
typedef void (*ffi_set_raised_t)(const char* kind, const char** parts, int32_t num_parts);

static tvmrt_handler_t handler;

__attribute__((visibility("default"))) void tvmrt_ffi_shim_set_handler(tvmrt_handler_t h) {
  __atomic_store_n(&handler, h, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"))) void TVMFFIErrorSetRaisedFromCStrParts(
    const char* kind, const char** parts, int32_t num_parts) {
  tvmrt_handler_t h = __atomic_load_n(&handler, __ATOMIC_ACQUIRE);
  if (h && h(kind, parts, num_parts, __builtin_return_address(0))) return;
  ffi_set_raised_t next = (ffi_set_raised_t)dlsym(RTLD_NEXT, "TVMFFIErrorSetRaisedFromCStrParts");
  if (next) next(kind, parts, num_parts);
}

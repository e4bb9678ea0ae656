/*
 * tvm-runtime-rs device plugin ABI, version 1.
 *
 * A device plugin adds a device type to an unmodified runtime: the vendor fills one
 * TVMDevicePlugin table and hands it to the runtime in one of three ways:
 *   1. calling TVMDeviceRegisterPlugin(&table) from the application;
 *   2. building a shared library that exports `TVMDevicePluginInit` (returning the table),
 *      loaded by path: TVMDeviceLoadPlugin(path), the global function
 *      `runtime.LoadDevicePlugin(path)`, or the colon-separated list in the environment
 *      variable TVM_DEVICE_PLUGINS (read when a device type is first looked up);
 *   3. registering a PackedFunc named `device_api.<name>` through the normal C API
 *      (TVMFuncRegisterGlobal), returning the table's address as an opaque handle — the way
 *      TVM documents new DeviceAPIs.
 *
 * Rules:
 *   - abi_version must equal TVM_DEVICE_PLUGIN_ABI_VERSION and struct_size must be
 *     sizeof(TVMDevicePlugin) as the plugin was compiled;
 *   - device_type must lie in the extension range: 32 <= device_type < 128 (128 is the RPC
 *     session mask) and must not be taken by another backend;
 *   - every function returns 0 on success; on failure it returns non-zero after calling
 *     TVMAPISetLastError with a message, which the runtime passes on with context;
 *   - the functions marked optional may be NULL: workspace then uses data space, streams
 *     behave as a single queue (create returns NULL, set/free do nothing, sync-from-to
 *     synchronises the source), set_device does nothing;
 *   - `self` is passed back unchanged to every call; the table must stay valid until
 *     `release` (optional) is called, which happens at most once;
 *   - get_attr answers DeviceAttrKind queries (the values of TVM's device_api.h: 0 exist,
 *     1 max threads per block, ..., 16 image pitch alignment) by writing a TVMValue and its
 *     type code (kDLInt, kDLFloat or kTVMStr with a string that lives as long as the
 *     plugin); writing kTVMNullptr means "not available";
 *   - a plugin with a module format (module_format non-NULL) serves modules: blobs inside
 *     TVM-exported libraries under the key `module_format` (the entry's payload is a u64
 *     byte count followed by that many bytes), and files with that extension. load_module
 *     turns the bytes into the plugin's module state; module_get_function returns a
 *     function handle made with TVMFuncCreateFromCFunc (ownership passes to the runtime),
 *     or NULL when the module has no such function; module_free releases the state.
 */
#ifndef TVM_RUNTIME_DEVICE_PLUGIN_H_
#define TVM_RUNTIME_DEVICE_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief The plugin ABI version this header describes. */
#define TVM_DEVICE_PLUGIN_ABI_VERSION 1

/*! \brief The function table a device plugin provides. */
typedef struct TVMDevicePlugin {
  uint32_t abi_version;
  uint32_t struct_size;
  const char* name;
  int32_t device_type;
  void* self;
  int (*get_attr)(void* self, DLDevice dev, int kind, TVMValue* out_value, int* out_type_code);
  int (*set_device)(void* self, DLDevice dev); /* optional */
  int (*alloc_data_space)(void* self, DLDevice dev, size_t nbytes, size_t alignment,
                          DLDataType type_hint, void** out_ptr);
  int (*free_data_space)(void* self, DLDevice dev, void* ptr);
  int (*copy_data)(void* self, const void* from, size_t from_offset, void* to, size_t to_offset,
                   size_t nbytes, DLDevice dev_from, DLDevice dev_to, DLDataType type_hint,
                   TVMStreamHandle stream);
  int (*stream_sync)(void* self, DLDevice dev, TVMStreamHandle stream); /* optional */
  int (*alloc_workspace)(void* self, DLDevice dev, size_t nbytes, DLDataType type_hint,
                         void** out_ptr);                                 /* optional */
  int (*free_workspace)(void* self, DLDevice dev, void* ptr);            /* optional */
  int (*create_stream)(void* self, DLDevice dev, TVMStreamHandle* out);  /* optional */
  int (*free_stream)(void* self, DLDevice dev, TVMStreamHandle stream);  /* optional */
  int (*set_stream)(void* self, DLDevice dev, TVMStreamHandle stream);   /* optional */
  int (*sync_stream_from_to)(void* self, DLDevice dev, TVMStreamHandle src,
                             TVMStreamHandle dst);                       /* optional */
  const char* module_format;                                             /* optional */
  int (*load_module)(void* self, const void* data, size_t size, void** out_module);
  int (*module_get_function)(void* self, void* module, const char* name,
                             TVMFunctionHandle* out);
  void (*module_free)(void* self, void* module);
  void (*release)(void* self); /* optional */
} TVMDevicePlugin;

/*! \brief The symbol a plugin library exports: returns its table. */
typedef const TVMDevicePlugin* (*TVMDevicePluginInitFunc)(void);

/*! \brief Registers a plugin table (copied; `self` and the strings must outlive it). */
TVM_DLL int TVMDeviceRegisterPlugin(const TVMDevicePlugin* plugin);

/*! \brief Loads a plugin library by path and registers the table its TVMDevicePluginInit
 * returns. */
TVM_DLL int TVMDeviceLoadPlugin(const char* path);

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif /* TVM_RUNTIME_DEVICE_PLUGIN_H_ */

/*
 * simaccel: a simulated accelerator as a tvm-runtime-rs device plugin.
 *
 * - Memory: a private arena; device pointers are opaque handles (arena offset + a base that
 *   is not a host address), so nothing outside the plugin can dereference them.
 * - Modules: format "simk", a text list of kernel names, one per line; the kernels are C
 *   functions of this file operating on float32 tensors in the arena: add, mul, relu.
 * - Device type 40, name "simaccel".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/device_plugin.h>

#define SIM_DEVICE_TYPE 40
#define ARENA_SIZE (16u << 20)
#define HANDLE_BASE ((uintptr_t)0x5150000000ull)
#define MAX_BLOCKS 4096

typedef struct {
  size_t offset, size;
  int used;
} Block;

typedef struct {
  unsigned char* arena;
  Block blocks[MAX_BLOCKS];
  int nblocks;
  size_t bytes_used;
  int released;
} Sim;

static Sim g_sim;

static int fail(const char* msg) {
  TVMAPISetLastError(msg);
  return -1;
}

/* Translates a device handle into an arena address, checking bounds. */
static unsigned char* resolve(const void* handle, size_t offset, size_t nbytes) {
  uintptr_t h = (uintptr_t)handle;
  if (h < HANDLE_BASE || h - HANDLE_BASE + offset + nbytes > ARENA_SIZE) return NULL;
  return g_sim.arena + (h - HANDLE_BASE) + offset;
}

static int sim_get_attr(void* self, DLDevice dev, int kind, TVMValue* v, int* code) {
  (void)self;
  *code = kTVMNullptr;
  if (kind == 0) { /* exist */
    v->v_int64 = dev.device_id == 0;
    *code = kDLInt;
  } else if (kind == 1) { /* max threads per block */
    v->v_int64 = 1;
    *code = kDLInt;
  } else if (kind == 5) { /* device name */
    v->v_str = "simaccel";
    *code = kTVMStr;
  } else if (kind == 14) { /* total memory */
    v->v_int64 = ARENA_SIZE;
    *code = kDLInt;
  } else if (kind == 15) { /* available memory */
    v->v_int64 = (int64_t)(ARENA_SIZE - g_sim.bytes_used);
    *code = kDLInt;
  }
  return 0;
}

static int sim_alloc(void* self, DLDevice dev, size_t nbytes, size_t alignment, DLDataType hint,
                     void** out) {
  (void)self;
  (void)hint;
  if (dev.device_id != 0) return fail("simaccel: only device 0 exists");
  if (alignment < 64) alignment = 64;
  size_t need = (nbytes + alignment - 1) / alignment * alignment;
  if (need == 0) need = alignment;
  /* Reuse a free block that fits, else take fresh space at the end. */
  for (int i = 0; i < g_sim.nblocks; ++i) {
    if (!g_sim.blocks[i].used && g_sim.blocks[i].size >= need) {
      g_sim.blocks[i].used = 1;
      g_sim.bytes_used += g_sim.blocks[i].size;
      *out = (void*)(HANDLE_BASE + g_sim.blocks[i].offset);
      return 0;
    }
  }
  size_t end = g_sim.nblocks ? g_sim.blocks[g_sim.nblocks - 1].offset +
                                   g_sim.blocks[g_sim.nblocks - 1].size
                             : 0;
  if (g_sim.nblocks == MAX_BLOCKS || end + need > ARENA_SIZE) {
    return fail("simaccel: out of device memory");
  }
  g_sim.blocks[g_sim.nblocks].offset = end;
  g_sim.blocks[g_sim.nblocks].size = need;
  g_sim.blocks[g_sim.nblocks].used = 1;
  g_sim.nblocks++;
  g_sim.bytes_used += need;
  *out = (void*)(HANDLE_BASE + end);
  return 0;
}

static int sim_free(void* self, DLDevice dev, void* ptr) {
  (void)self;
  (void)dev;
  uintptr_t off = (uintptr_t)ptr - HANDLE_BASE;
  for (int i = 0; i < g_sim.nblocks; ++i) {
    if (g_sim.blocks[i].offset == off && g_sim.blocks[i].used) {
      g_sim.blocks[i].used = 0;
      g_sim.bytes_used -= g_sim.blocks[i].size;
      return 0;
    }
  }
  return fail("simaccel: free of a pointer that is not a live allocation");
}

static int sim_copy(void* self, const void* from, size_t from_off, void* to, size_t to_off,
                    size_t nbytes, DLDevice dev_from, DLDevice dev_to, DLDataType hint,
                    TVMStreamHandle stream) {
  (void)self;
  (void)hint;
  (void)stream;
  const unsigned char* src;
  unsigned char* dst;
  if (dev_from.device_type == SIM_DEVICE_TYPE) {
    src = resolve(from, from_off, nbytes);
  } else if (dev_from.device_type == kDLCPU) {
    src = (const unsigned char*)from + from_off;
  } else {
    return fail("simaccel: copies only between simaccel and cpu");
  }
  if (dev_to.device_type == SIM_DEVICE_TYPE) {
    dst = resolve(to, to_off, nbytes);
  } else if (dev_to.device_type == kDLCPU) {
    dst = (unsigned char*)to + to_off;
  } else {
    return fail("simaccel: copies only between simaccel and cpu");
  }
  if (!src || !dst) return fail("simaccel: copy range outside device memory");
  memmove(dst, src, nbytes);
  return 0;
}

/* ---- modules: kernels are C functions over float32 tensors in the arena ---- */

typedef void (*Kernel)(const float** in, int nin, float* out, int64_t n);

static void k_add(const float** in, int nin, float* out, int64_t n) {
  (void)nin;
  for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] + in[1][i];
}
static void k_mul(const float** in, int nin, float* out, int64_t n) {
  (void)nin;
  for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * in[1][i];
}
static void k_relu(const float** in, int nin, float* out, int64_t n) {
  (void)nin;
  for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] > 0 ? in[0][i] : 0;
}

typedef struct {
  const char* name;
  Kernel fn;
  int nin;
} KernelInfo;

static const KernelInfo kKernels[] = {
    {"sim_add", k_add, 2}, {"sim_mul", k_mul, 2}, {"sim_relu", k_relu, 1}};
enum { NUM_KERNELS = sizeof(kKernels) / sizeof(kKernels[0]) };

typedef struct {
  int enabled[NUM_KERNELS];
} SimModule;

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* The PackedFunc body of every kernel: args are (inputs..., output) tensors on simaccel. */
static int run_kernel(TVMValue* args, int* codes, int nargs, TVMRetValueHandle ret,
                      void* resource) {
  (void)ret;
  const KernelInfo* k = (const KernelInfo*)resource;
  if (nargs != k->nin + 1) return fail("simaccel: wrong number of kernel arguments");
  const float* in[2] = {NULL, NULL};
  DLTensor* out_t = NULL;
  for (int i = 0; i < nargs; ++i) {
    if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
      return fail("simaccel: kernel arguments must be tensors");
    }
    DLTensor* t = (DLTensor*)args[i].v_handle;
    if (t->device.device_type != SIM_DEVICE_TYPE || t->dtype.code != kDLFloat ||
        t->dtype.bits != 32) {
      return fail("simaccel: kernels take float32 tensors on simaccel");
    }
    float* p = (float*)resolve(t->data, t->byte_offset, (size_t)numel(t) * 4);
    if (!p) return fail("simaccel: tensor outside device memory");
    if (i < k->nin) {
      in[i] = p;
    } else {
      out_t = t;
    }
  }
  float* out = (float*)resolve(out_t->data, out_t->byte_offset, (size_t)numel(out_t) * 4);
  k->fn(in, k->nin, out, numel(out_t));
  return 0;
}

static int sim_load_module(void* self, const void* data, size_t size, void** out) {
  (void)self;
  SimModule* m = (SimModule*)calloc(1, sizeof(SimModule));
  const char* p = (const char*)data;
  const char* end = p + size;
  while (p < end) {
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = (size_t)((nl ? nl : end) - p);
    if (len > 0) {
      int found = 0;
      for (int k = 0; k < NUM_KERNELS; ++k) {
        if (strlen(kKernels[k].name) == len && memcmp(kKernels[k].name, p, len) == 0) {
          m->enabled[k] = found = 1;
        }
      }
      if (!found) {
        free(m);
        return fail("simaccel: the module names a kernel this device does not have");
      }
    }
    p += len + 1;
  }
  *out = m;
  return 0;
}

static int sim_module_get_function(void* self, void* module, const char* name,
                                   TVMFunctionHandle* out) {
  (void)self;
  SimModule* m = (SimModule*)module;
  *out = NULL;
  for (int k = 0; k < NUM_KERNELS; ++k) {
    if (m->enabled[k] && strcmp(kKernels[k].name, name) == 0) {
      return TVMFuncCreateFromCFunc(run_kernel, (void*)&kKernels[k], NULL, out);
    }
  }
  return 0;
}

static void sim_module_free(void* self, void* module) {
  (void)self;
  free(module);
}

static void sim_release(void* self) {
  Sim* s = (Sim*)self;
  s->released = 1;
  free(s->arena);
  s->arena = NULL;
}

static TVMDevicePlugin g_table;

/* Fills the table once; shared by the three ways of registering. */
const TVMDevicePlugin* simaccel_table(void) {
  if (!g_sim.arena) g_sim.arena = (unsigned char*)calloc(1, ARENA_SIZE);
  memset(&g_table, 0, sizeof(g_table));
  g_table.abi_version = TVM_DEVICE_PLUGIN_ABI_VERSION;
  g_table.struct_size = sizeof(TVMDevicePlugin);
  g_table.name = "simaccel";
  g_table.device_type = SIM_DEVICE_TYPE;
  g_table.self = &g_sim;
  g_table.get_attr = sim_get_attr;
  g_table.alloc_data_space = sim_alloc;
  g_table.free_data_space = sim_free;
  g_table.copy_data = sim_copy;
  g_table.module_format = "simk";
  g_table.load_module = sim_load_module;
  g_table.module_get_function = sim_module_get_function;
  g_table.module_free = sim_module_free;
  g_table.release = sim_release;
  return &g_table;
}

/* The entry point the runtime looks for when it loads this library by path. */
TVM_DLL const TVMDevicePlugin* TVMDevicePluginInit(void) { return simaccel_table(); }

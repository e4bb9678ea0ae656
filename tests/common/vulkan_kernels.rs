//! Test kernels for the Vulkan backend and the library that packages them as TVM does: GLSL
//! compute shaders compiled with `glslangValidator`, a `vulkan` module written by hand in TVM's
//! binary layout, and a C host library carrying it in `__tvm_dev_mblob`. Shared by
//! `tests/vulkan.rs` and the `vulkan_bench` example.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Test kernels.

pub const VADD: &str = r#"#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Args { layout(offset = 0) int n; layout(offset = 8) float alpha; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < uint(p.n)) c[i] = a[i] + p.alpha * b[i];
}
"#;

pub const VADD_UBO: &str = r#"#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(std140, set = 0, binding = 3) uniform Args { layout(offset = 0) int n; layout(offset = 8) float alpha; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < uint(p.n)) c[i] = a[i] + p.alpha * b[i];
}
"#;

pub const RELU: &str = r#"#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Args { layout(offset = 0) int n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < uint(p.n)) y[i] = max(x[i], 0.0);
}
"#;

/// Per workgroup of 128: the sum of its 128 elements, through shared memory.
pub const REDUCE_PARTIAL: &str = r#"#version 450
layout(local_size_x = 128) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) writeonly buffer P { float part[]; };
layout(push_constant) uniform Args { layout(offset = 0) int n; } p;
shared float s[128];
void main() {
  uint t = gl_LocalInvocationID.x;
  uint i = gl_WorkGroupID.x * 128u + t;
  s[t] = i < uint(p.n) ? a[i] : 0.0;
  barrier();
  for (uint k = 64u; k > 0u; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    barrier();
  }
  if (t == 0u) part[gl_WorkGroupID.x] = s[0];
}
"#;

/// One workgroup: the sum of `m` partial sums.
pub const REDUCE_FINAL: &str = r#"#version 450
layout(local_size_x = 128) in;
layout(std430, set = 0, binding = 0) readonly buffer P { float part[]; };
layout(std430, set = 0, binding = 1) writeonly buffer O { float o[]; };
layout(push_constant) uniform Args { layout(offset = 0) int m; } p;
shared float s[128];
void main() {
  uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint i = t; i < uint(p.m); i += 128u) acc += part[i];
  s[t] = acc;
  barrier();
  for (uint k = 64u; k > 0u; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    barrier();
  }
  if (t == 0u) o[0] = s[0];
}
"#;

/// 64-bit scalars: an int64 count and a float64 factor (8-byte push-constant slots).
pub const VADD64: &str = r#"#version 450
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Args { layout(offset = 0) int64_t n; layout(offset = 8) double alpha; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (int64_t(i) < p.n) c[i] = float(double(a[i]) + p.alpha * double(b[i]));
}
"#;

/// Does nothing (dispatch overhead).
pub const EMPTY: &str = r#"#version 450
layout(local_size_x = 1) in;
layout(std430, set = 0, binding = 0) buffer A { float a[]; };
void main() {}
"#;

/// A scratch folder for shaders and the library.
pub fn tmpdir() -> PathBuf {
    let base = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tvmrt-vk-{}", std::process::id())));
    let d = base.join("vulkan");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// GLSL → SPIR-V words with the entry point named `name`.
pub fn spirv(name: &str, glsl: &str) -> Vec<u32> {
    let dir = tmpdir();
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tag = format!("{name}-{}-{k}", std::process::id());
    let src = dir.join(format!("{tag}.comp"));
    let out = dir.join(format!("{tag}.spv"));
    std::fs::write(&src, glsl).unwrap();
    let o = Command::new("glslangValidator")
        .args([
            "-V",
            "--target-env",
            "vulkan1.0",
            "--source-entrypoint",
            "main",
            "-e",
        ])
        .arg(name)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .expect("glslangValidator (Debian glslang-tools; scripts/setup.sh installs it)");
    assert!(
        o.status.success(),
        "glslangValidator failed for {name}:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(&out)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The `vulkan` module binary, written independently of the runtime's own writer.

pub struct Kernel {
    pub name: &'static str,
    pub glsl: &'static str,
    pub flag: u32,
    /// (code, bits) per argument.
    pub args: &'static [(u8, u8)],
    pub tags: &'static [&'static str],
}

pub const H: (u8, u8) = (3, 64);
pub const I32: (u8, u8) = (0, 32);
pub const FL32: (u8, u8) = (2, 32);
pub const I64: (u8, u8) = (0, 64);
pub const FL64: (u8, u8) = (2, 64);
pub const BT: &[&str] = &["blockIdx.x", "threadIdx.x"];

pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "vadd",
        glsl: VADD,
        flag: 0,
        args: &[H, H, H, I32, FL32],
        tags: BT,
    },
    Kernel {
        name: "vadd_ubo",
        glsl: VADD_UBO,
        flag: 1,
        args: &[H, H, H, I32, FL32],
        tags: BT,
    },
    Kernel {
        name: "relu",
        glsl: RELU,
        flag: 0,
        args: &[H, H, I32],
        tags: BT,
    },
    Kernel {
        name: "reduce_partial",
        glsl: REDUCE_PARTIAL,
        flag: 0,
        args: &[H, H, I32],
        tags: BT,
    },
    Kernel {
        name: "reduce_final",
        glsl: REDUCE_FINAL,
        flag: 0,
        args: &[H, H, I32],
        tags: BT,
    },
    Kernel {
        name: "vadd64",
        glsl: VADD64,
        flag: 0,
        args: &[H, H, H, I64, FL64],
        tags: &["blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"],
    },
    Kernel {
        name: "empty",
        glsl: EMPTY,
        flag: 0,
        args: &[H],
        tags: BT,
    },
];

pub fn w64(o: &mut Vec<u8>, v: u64) {
    o.extend_from_slice(&v.to_le_bytes());
}

pub fn wstr(o: &mut Vec<u8>, s: &str) {
    w64(o, s.len() as u64);
    o.extend_from_slice(s.as_bytes());
}

pub fn vulkan_module_bytes() -> Vec<u8> {
    let mut o = Vec::new();
    wstr(&mut o, "vulkan");
    w64(&mut o, KERNELS.len() as u64);
    for k in KERNELS {
        wstr(&mut o, k.name);
        wstr(&mut o, k.name);
        w64(&mut o, k.args.len() as u64);
        for &(code, bits) in k.args {
            o.extend_from_slice(&[code, bits, 1, 0]);
        }
        w64(&mut o, k.tags.len() as u64);
        for t in k.tags {
            wstr(&mut o, t);
        }
    }
    w64(&mut o, KERNELS.len() as u64);
    for k in KERNELS {
        wstr(&mut o, k.name);
        o.extend_from_slice(&k.flag.to_le_bytes());
        let words = spirv(k.name, k.glsl);
        w64(&mut o, words.len() as u64);
        for w in words {
            o.extend_from_slice(&w.to_le_bytes());
        }
    }
    o
}

/// `__tvm_dev_mblob`: the library, the vulkan module it imports, and the import tree.
pub fn dev_mblob() -> Vec<u8> {
    let mut s = Vec::new();
    w64(&mut s, 3);
    wstr(&mut s, "_lib");
    wstr(&mut s, "vulkan");
    s.extend_from_slice(&vulkan_module_bytes());
    wstr(&mut s, "_import_tree");
    w64(&mut s, 3);
    for v in [0u64, 1, 1] {
        w64(&mut s, v);
    }
    w64(&mut s, 1);
    w64(&mut s, 1);
    let mut b = Vec::new();
    w64(&mut b, s.len() as u64);
    b.extend_from_slice(&s);
    b
}

/// Host code shaped like TVM's: unpacks DLTensors, resolves the kernel through
/// `TVMBackendGetFuncFromEnv` once (cached in a static, as TVM's generated code does) and
/// calls it with the buffers' data pointers, the scalars and the launch parameters.
pub const HOST_C: &str = r#"
#include <stdint.h>
#include <stddef.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } TVMValue;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct { void* data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t* shape;
                 int64_t* strides; uint64_t byte_offset; } DLTensor;
enum { kInt = 0, kFloat = 2, kHandle = 3, kTensor = 7 };

void* __tvm_module_ctx = NULL;
int (*__TVMFuncCall)(void*, TVMValue*, int*, int, TVMValue*, int*) = NULL;
void (*__TVMAPISetLastError)(const char*) = NULL;
int (*__TVMBackendGetFuncFromEnv)(void*, const char*, void**) = NULL;
const char __tvm_main__[] = "vadd_host";

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

static int launch(const char* name, void** cache, TVMValue* v, int* c, int n) {
  if (*cache == NULL && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, name, cache) != 0) return -1;
  TVMValue rv;
  int rc;
  return __TVMFuncCall(*cache, v, c, n, &rv, &rc);
}

static int check(int* codes, int n, int want, const char* who) {
  if (n < want) { __TVMAPISetLastError(who); return -1; }
  for (int i = 0; i < want; ++i)
    if (codes[i] != kTensor) { __TVMAPISetLastError(who); return -1; }
  return 0;
}

static int vadd_impl(const char* kernel, void** cache, TVMValue* args, int* codes, int n) {
  if (check(codes, n, 3, "vadd: expects (A, B, C[, alpha])")) return -1;
  DLTensor* a = args[0].v_handle; DLTensor* b = args[1].v_handle; DLTensor* c = args[2].v_handle;
  double alpha = n > 3 ? args[3].v_float64 : 1.0;
  int64_t len = numel(a);
  TVMValue v[7]; int k[7] = {kHandle, kHandle, kHandle, kInt, kFloat, kInt, kInt};
  v[0].v_handle = a->data; v[1].v_handle = b->data; v[2].v_handle = c->data;
  v[3].v_int64 = len; v[4].v_float64 = alpha; v[5].v_int64 = (len + 63) / 64; v[6].v_int64 = 64;
  return launch(kernel, cache, v, k, 7);
}

int vadd_host(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* rh) {
  static void* f = NULL;
  return vadd_impl("vadd", &f, args, codes, n);
}

int vadd_ubo_host(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* rh) {
  static void* f = NULL;
  return vadd_impl("vadd_ubo", &f, args, codes, n);
}

int relu_host(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* rh) {
  static void* f = NULL;
  if (check(codes, n, 2, "relu: expects (X, Y)")) return -1;
  DLTensor* x = args[0].v_handle; DLTensor* y = args[1].v_handle;
  int64_t len = numel(x);
  TVMValue v[5]; int k[5] = {kHandle, kHandle, kInt, kInt, kInt};
  v[0].v_handle = x->data; v[1].v_handle = y->data; v[2].v_int64 = len;
  v[3].v_int64 = (len + 63) / 64; v[4].v_int64 = 64;
  return launch("relu", &f, v, k, 5);
}

/* sum_host(A, partial, out): two kernels in sequence, the second reading the first's output. */
int sum_host(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* rh) {
  static void* f1 = NULL;
  static void* f2 = NULL;
  if (check(codes, n, 3, "sum: expects (A, partial, out)")) return -1;
  DLTensor* a = args[0].v_handle; DLTensor* p = args[1].v_handle; DLTensor* o = args[2].v_handle;
  int64_t len = numel(a), groups = (len + 127) / 128;
  TVMValue v[5]; int k[5] = {kHandle, kHandle, kInt, kInt, kInt};
  v[0].v_handle = a->data; v[1].v_handle = p->data; v[2].v_int64 = len;
  v[3].v_int64 = groups; v[4].v_int64 = 128;
  if (launch("reduce_partial", &f1, v, k, 5)) return -1;
  v[0].v_handle = p->data; v[1].v_handle = o->data; v[2].v_int64 = groups;
  v[3].v_int64 = 1; v[4].v_int64 = 128;
  return launch("reduce_final", &f2, v, k, 5);
}

/* empty_host(A): the empty kernel on A, one workgroup. */
int empty_host(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* rh) {
  static void* f = NULL;
  if (check(codes, n, 1, "empty: expects (A)")) return -1;
  DLTensor* a = args[0].v_handle;
  TVMValue v[3]; int k[3] = {kHandle, kInt, kInt};
  v[0].v_handle = a->data; v[1].v_int64 = 1; v[2].v_int64 = 1;
  return launch("empty", &f, v, k, 3);
}
"#;

/// Builds the test library once per process and returns its path.
pub fn build_dso() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = tmpdir();
        let blob = dev_mblob();
        let mut c = String::from(HOST_C);
        c.push_str(&format!(
            "const unsigned char __tvm_dev_mblob[{}] = {{",
            blob.len()
        ));
        for (i, b) in blob.iter().enumerate() {
            if i % 32 == 0 {
                c.push('\n');
            }
            c.push_str(&format!("{b},"));
        }
        c.push_str("\n};\n");
        let src = dir.join(format!("vk_kernels-{}.c", std::process::id()));
        std::fs::write(&src, c).unwrap();
        let so = dir.join(format!("vk_kernels-{}.so", std::process::id()));
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let o = Command::new(cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&so)
            .arg(&src)
            .output()
            .expect("a C compiler");
        assert!(
            o.status.success(),
            "compiling the test library failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        so
    })
    .clone()
}

//! Relax VM executables written by TVM v0.22+ rewritten into the classic (v0.16–v0.20) form
//! the Relax VM reads: the bytecode is the same, but the header magic ends in `1E`, a memory
//! scope section follows the function table, constants carry tvm-ffi type indices as tags, and
//! the parameter-cache builtins are called `tensor_cache.*` instead of `ndarray_cache.*`.

use crate::module::blob::BlobReader;
use crate::packed_func::error::{Error, Result};

/// Header magic of classic executables (TVM v0.14–v0.22).
pub const MAGIC_CLASSIC: u64 = 0xD225_DE2F_4214_151D;
/// Header magic of executables from TVM v0.23 on.
pub const MAGIC_V2: u64 = 0xD225_DE2F_4214_151E;
/// Magic of a serialised tensor (`SaveDLTensor`).
const TENSOR_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;

/// Classic constant tags, by the tvm-ffi type index that replaced them.
fn classic_tag(ffi_tag: i32) -> Option<i32> {
    Some(match ffi_tag {
        70 => 0, // Tensor -> NDArray
        5 => 1,  // DataType
        69 => 2, // Shape -> ShapeTuple
        65 => 3, // Str -> String
        1 => 4,  // Int
        3 => 5,  // Float
        _ => return None,
    })
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Copies `n` raw bytes from the reader.
fn copy(r: &mut BlobReader<'_>, out: &mut Vec<u8>, n: usize, what: &str) -> Result<()> {
    out.extend_from_slice(r.read_bytes(n, what)?);
    Ok(())
}

/// The executable's header magic, or `None` when it is too short to have one.
pub fn magic(bytes: &[u8]) -> Option<u64> {
    bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Rewrites a v0.22+ executable into the classic form; a classic one is returned unchanged.
pub fn to_classic(bytes: &[u8], context: &str) -> Result<Vec<u8>> {
    let mut r = BlobReader::new(bytes, context);
    let m = r.read_u64("the executable's magic")?;
    if m == MAGIC_CLASSIC {
        return Ok(bytes.to_vec());
    }
    if m != MAGIC_V2 {
        return Err(Error::value_fmt(format_args!(
            "{context}: not a Relax VM executable of a version this runtime reads: magic \
             {m:#018x} (expected {MAGIC_CLASSIC:#018x} or {MAGIC_V2:#018x})"
        )));
    }
    let mut out = Vec::with_capacity(bytes.len());
    put_u64(&mut out, MAGIC_CLASSIC);
    let version = r.read_blob("the executable's version")?;
    put_str(&mut out, version);
    // Function table: kind, name, start, end, num_args, register file size, parameter names.
    let nfunc = r.read_u64("the number of functions")?;
    if nfunc > r.remaining() as u64 / 44 {
        return Err(Error::value_fmt(format_args!(
            "{context}: the executable's function table is truncated or corrupted"
        )));
    }
    put_u64(&mut out, nfunc);
    for _ in 0..nfunc {
        copy(&mut r, &mut out, 4, "a function kind")?;
        let name = r.read_blob("a function name")?;
        put_str(&mut out, &renamed_builtin(name));
        copy(&mut r, &mut out, 32, "a function's code range and sizes")?;
        let nparams = r.read_u64("the number of parameters")?;
        put_u64(&mut out, nparams);
        for _ in 0..nparams {
            put_str(&mut out, r.read_blob("a parameter name")?);
        }
    }
    // Memory scopes: dropped (classic executables have none; empty on the CPU).
    let nscopes = r.read_u64("the number of memory scopes")?;
    for _ in 0..nscopes {
        r.read_bytes(8, "a memory scope's constant index")?;
        let scope = r.read_blob("a memory scope")?;
        if !scope.is_empty() && scope != b"global" {
            return Err(Error::value_fmt(format_args!(
                "{context}: the executable places a constant in memory scope '{}', which this \
                 runtime does not support",
                String::from_utf8_lossy(scope)
            )));
        }
    }
    let nconst = r.read_u64("the number of constants")?;
    if nconst > r.remaining() as u64 / 4 {
        return Err(Error::value_fmt(format_args!(
            "{context}: the executable's constant pool is truncated or corrupted"
        )));
    }
    put_u64(&mut out, nconst);
    for i in 0..nconst {
        let tag = i32::from_le_bytes(r.read_bytes(4, "a constant tag")?.try_into().expect("4"));
        let classic = classic_tag(tag).ok_or_else(|| {
            Error::value_fmt(format_args!(
                "{context}: constant {i} has type index {tag}, which a Relax executable \
                 constant pool cannot hold"
            ))
        })?;
        out.extend_from_slice(&classic.to_le_bytes());
        match classic {
            0 => copy_tensor(&mut r, &mut out)?,
            1 => copy(&mut r, &mut out, 4, "a data type constant")?,
            2 => {
                let n = r.read_u64("a shape constant's length")?;
                if n > r.remaining() as u64 / 8 {
                    return Err(Error::value_fmt(format_args!(
                        "{context}: shape constant {i} is truncated"
                    )));
                }
                put_u64(&mut out, n);
                copy(&mut r, &mut out, n as usize * 8, "a shape constant")?;
            }
            3 => put_str(&mut out, r.read_blob("a string constant")?),
            _ => copy(&mut r, &mut out, 8, "a scalar constant")?,
        }
    }
    // Code section: instruction offsets and data, unchanged.
    for what in ["the instruction offsets", "the instruction data"] {
        let n = r.read_u64(what)?;
        if n > r.remaining() as u64 / 8 {
            return Err(Error::value_fmt(format_args!(
                "{context}: {what} are truncated"
            )));
        }
        put_u64(&mut out, n);
        copy(&mut r, &mut out, n as usize * 8, what)?;
    }
    Ok(out)
}

/// A serialised tensor: magic, reserved word, device, ndim, dtype, shape, size, data.
fn copy_tensor(r: &mut BlobReader<'_>, out: &mut Vec<u8>) -> Result<()> {
    let magic = r.read_u64("a tensor constant's magic")?;
    if magic != TENSOR_MAGIC {
        return Err(Error::value_fmt(format_args!(
            "{}: a tensor constant has the wrong magic number",
            r.context()
        )));
    }
    put_u64(out, magic);
    copy(r, out, 8 + 8, "a tensor constant's header")?;
    let ndim = r.read_u32("a tensor constant's rank")?;
    out.extend_from_slice(&ndim.to_le_bytes());
    copy(r, out, 4, "a tensor constant's dtype")?;
    if ndim as usize > r.remaining() / 8 {
        return Err(Error::value_fmt(format_args!(
            "{}: a tensor constant is truncated",
            r.context()
        )));
    }
    copy(r, out, ndim as usize * 8, "a tensor constant's shape")?;
    let size = r.read_u64("a tensor constant's size")?;
    if size > r.remaining() as u64 {
        return Err(Error::value_fmt(format_args!(
            "{}: a tensor constant is truncated",
            r.context()
        )));
    }
    put_u64(out, size);
    copy(r, out, size as usize, "a tensor constant's data")
}

/// `vm.builtin.tensor_cache.*` (v0.22+) is `vm.builtin.ndarray_cache.*` in the classic runtime.
fn renamed_builtin(name: &[u8]) -> Vec<u8> {
    const NEW: &[u8] = b"vm.builtin.tensor_cache.";
    const OLD: &[u8] = b"vm.builtin.ndarray_cache.";
    match name.strip_prefix(NEW) {
        Some(rest) => [OLD, rest].concat(),
        None => name.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_exec() -> Vec<u8> {
        let mut b = Vec::new();
        put_u64(&mut b, MAGIC_V2);
        put_str(&mut b, b"0.14");
        put_u64(&mut b, 1);
        b.extend_from_slice(&0i32.to_le_bytes());
        put_str(&mut b, b"vm.builtin.tensor_cache.get");
        for v in [0i64, 0, 1, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        put_u64(&mut b, 0);
        put_u64(&mut b, 1); // one memory scope, on the CPU
        b.extend_from_slice(&0i64.to_le_bytes());
        put_str(&mut b, b"global");
        put_u64(&mut b, 2);
        b.extend_from_slice(&65i32.to_le_bytes());
        put_str(&mut b, b"hi");
        b.extend_from_slice(&1i32.to_le_bytes());
        b.extend_from_slice(&7i64.to_le_bytes());
        put_u64(&mut b, 0); // code offsets
        put_u64(&mut b, 0); // code data
        b
    }

    #[test]
    fn rewrites_header_scopes_tags_and_names() {
        let c = to_classic(&v2_exec(), "t").unwrap();
        assert_eq!(magic(&c), Some(MAGIC_CLASSIC));
        let s = String::from_utf8_lossy(&c);
        assert!(s.contains("vm.builtin.ndarray_cache.get") && !s.contains("global"));
        // Constant tags 65 -> 3 and 1 -> 4.
        let hi = c.windows(2).position(|w| w == b"hi").unwrap();
        assert_eq!(&c[hi - 12..hi - 8], &3i32.to_le_bytes());
        assert_eq!(&c[hi + 2..hi + 6], &4i32.to_le_bytes());
    }

    #[test]
    fn classic_is_unchanged_and_garbage_is_refused() {
        let mut v2 = v2_exec();
        let c = to_classic(&v2, "t").unwrap();
        assert_eq!(to_classic(&c, "t").unwrap(), c);
        for n in 0..v2.len() {
            assert!(to_classic(&v2[..n], "t").is_err() || n == v2.len());
        }
        v2[0] ^= 1;
        let e = to_classic(&v2, "t").unwrap_err();
        assert!(e.message.contains("magic"), "{}", e.message);
    }
}

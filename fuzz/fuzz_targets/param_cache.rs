//! Fuzzes the parameter cache's loader (`vm.builtin.ndarray_cache.load`: `ndarray-cache.json`
//! and the shard files it names). The input is the metadata's text, a NUL byte, then the bytes
//! of the one shard file, `shard.bin`: any input must give arrays or an error, never a crash or
//! an allocation larger than the shard justifies, and both loaders (mapped and copied) must
//! agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;
use tvm_runtime::relax_vm::llm::ndarray_cache::{read_cache_dir, read_cache_dir_copied};
use tvm_runtime::{DLDevice, NDArray};

/// This process's cache directory (rewritten for every input).
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("tvmrt-fuzz-cache-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a temporary directory");
        d
    })
}

/// The bytes of a compact CPU array.
fn bytes(a: &NDArray) -> &[u8] {
    let t = a.dltensor();
    if a.nbytes() == 0 {
        return &[];
    }
    // SAFETY: a live, compact CPU array (the loader makes only those here) holds `nbytes`
    // bytes from its data pointer plus offset, borrowed for as long as `a`.
    unsafe {
        std::slice::from_raw_parts(
            (t.data as *const u8).add(t.byte_offset as usize),
            a.nbytes(),
        )
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(nul) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let (meta, shard) = (&data[..nul], &data[nul + 1..]);
    // The harness stays in its directory (the loader follows `..` as the reference does).
    if meta.windows(2).any(|w| w == b"..") {
        return;
    }
    let d = dir();
    std::fs::write(d.join("ndarray-cache.json"), meta).expect("metadata written");
    std::fs::write(d.join("shard.bin"), shard).expect("shard written");
    let path = d.to_str().expect("a UTF-8 temporary directory");
    let copied = read_cache_dir_copied(path, DLDevice::CPU);
    // SAFETY: nothing changes the files until the next input, and the arrays are dropped
    // before the end of this one.
    let mapped = unsafe { read_cache_dir(path, DLDevice::CPU) };
    match (copied, mapped) {
        (Ok(c), Ok(m)) => {
            assert_eq!(c.len(), m.len());
            for ((n1, a1), (n2, a2)) in c.iter().zip(&m) {
                assert_eq!(n1, n2);
                assert_eq!(a1.shape(), a2.shape());
                assert_eq!(a1.dtype(), a2.dtype());
                assert_eq!(bytes(a1), bytes(a2), "{n1}");
            }
        }
        (Err(_), Err(_)) => {}
        (c, m) => panic!(
            "the loaders disagree: copied {:?}, mapped {:?}",
            c.err(),
            m.err()
        ),
    }
});

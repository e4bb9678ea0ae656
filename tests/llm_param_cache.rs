//! The parameter cache's memory-mapped loading: on the CPU, aligned `raw` records are views
//! into a copy-on-write mapping of their shard (same bytes as the file; writes stay in the
//! process), other records are copied, and the mapping lives exactly as long as the arrays
//! and cache entries that use it. Shards are written here in the `ndarray-cache.json` format.
#![cfg(feature = "llm")]

use std::path::{Path, PathBuf};

use tvm_runtime::relax_vm::llm::ndarray_cache;
use tvm_runtime::{DLDevice, NDArray};

/// [`ndarray_cache::read_cache_dir`] on the CPU.
fn read_dir(dir: &str) -> tvm_runtime::Result<Vec<(String, NDArray)>> {
    // SAFETY: the test's own temporary files, which nothing changes while the arrays live.
    unsafe { ndarray_cache::read_cache_dir(dir, DLDevice::CPU) }
}

/// [`ndarray_cache::load`] on the CPU.
fn load_dir(dir: &str) -> tvm_runtime::Result<usize> {
    // SAFETY: as for `read_dir`.
    unsafe { ndarray_cache::load(dir, DLDevice::CPU) }
}

/// One record: name, shape, format, offset, stored bytes.
struct Rec {
    name: String,
    shape: Vec<i64>,
    format: &'static str,
    offset: usize,
    bytes: Vec<u8>,
}

/// A fresh directory for one test.
fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt-llm-cache-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Deterministic, distinct float32 bytes.
fn f32_bytes(n: usize, seed: f32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (seed + i as f32 * 0.25).to_le_bytes())
        .collect()
}

/// Writes `params_shard_0.bin` and `ndarray-cache.json` (float32 records) into `dir`.
fn write_cache(dir: &Path, recs: &[Rec]) -> PathBuf {
    let len = recs.iter().map(|r| r.offset + r.bytes.len()).max().unwrap();
    let mut shard = vec![0xABu8; len];
    for r in recs {
        shard[r.offset..r.offset + r.bytes.len()].copy_from_slice(&r.bytes);
    }
    let path = dir.join("params_shard_0.bin");
    std::fs::write(&path, &shard).unwrap();
    let records: Vec<serde_json::Value> = recs
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name, "shape": r.shape, "dtype": "float32", "format": r.format,
                "nbytes": r.bytes.len(), "byteOffset": r.offset,
            })
        })
        .collect();
    let meta = serde_json::json!({
        "metadata": {},
        "records": [{
            "dataPath": "params_shard_0.bin", "format": "raw-shard", "nbytes": len,
            "records": records,
        }],
    });
    std::fs::write(dir.join("ndarray-cache.json"), meta.to_string()).unwrap();
    path
}

/// The address ranges of this process's mappings of `path` (from /proc/self/maps).
fn mappings_of(path: &Path) -> Vec<(usize, usize)> {
    let want = std::fs::canonicalize(path).unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(5).map(Path::new) == Some(want.as_path()))
        .map(|l| {
            let (a, b) = l
                .split_whitespace()
                .next()
                .unwrap()
                .split_once('-')
                .unwrap();
            (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            )
        })
        .collect()
}

fn data_addr(a: &NDArray) -> usize {
    let t = a.dltensor();
    t.data as usize + t.byte_offset as usize
}

fn is_mapped_from(a: &NDArray, path: &Path) -> bool {
    let p = data_addr(a);
    mappings_of(path).iter().any(|&(s, e)| s <= p && p < e)
}

fn bytes_of(a: &NDArray) -> Vec<u8> {
    a.to_vec::<f32>()
        .unwrap()
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

/// A shard with an aligned record (offset 0), a misaligned one (offset 1028), an aligned one
/// after it (offset 1088 = 17 × 64) and a bfloat16-encoded one; names prefixed by `tag`.
fn mixed(tag: &str) -> Vec<Rec> {
    let bf16: Vec<u8> = [1.5f32, -2.0, 3.25, 0.0]
        .iter()
        .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    vec![
        Rec {
            name: format!("{tag}.a"),
            shape: vec![16, 16],
            format: "raw",
            offset: 0,
            bytes: f32_bytes(256, 1.0),
        },
        Rec {
            name: format!("{tag}.b"),
            shape: vec![3],
            format: "raw",
            offset: 1028,
            bytes: f32_bytes(3, -7.0),
        },
        Rec {
            name: format!("{tag}.c"),
            shape: vec![4, 4],
            format: "raw",
            offset: 1088,
            bytes: f32_bytes(16, 100.0),
        },
        Rec {
            name: format!("{tag}.d"),
            shape: vec![4],
            format: "f32-to-bf16",
            offset: 1152,
            bytes: bf16,
        },
    ]
}

#[test]
fn aligned_records_are_views_of_the_file_others_are_copies() {
    let dir = tmp_dir("views");
    let recs = mixed("views");
    let shard = write_cache(&dir, &recs);
    let loaded = read_dir(dir.to_str().unwrap()).unwrap();
    assert_eq!(loaded.len(), 4);
    for ((name, arr), r) in loaded.iter().zip(&recs) {
        assert_eq!(name, &r.name);
        assert_eq!(arr.shape(), &r.shape[..]);
        assert_eq!(data_addr(arr) % 64, 0, "{name} is not 64-byte aligned");
        if r.format == "raw" {
            assert_eq!(bytes_of(arr), r.bytes, "{name}: bytes differ from the file");
        }
    }
    assert_eq!(
        loaded[3].1.to_vec::<f32>().unwrap(),
        vec![1.5, -2.0, 3.25, 0.0]
    );
    assert!(is_mapped_from(&loaded[0].1, &shard), "a: not a view");
    assert!(
        !is_mapped_from(&loaded[1].1, &shard),
        "b (misaligned): not copied"
    );
    assert!(is_mapped_from(&loaded[2].1, &shard), "c: not a view");
    assert!(
        !is_mapped_from(&loaded[3].1, &shard),
        "d (bf16): not copied"
    );
    drop(loaded);
    assert!(
        mappings_of(&shard).is_empty(),
        "mapping outlived its arrays"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The safe loader copies every record: nothing maps the file, the arrays are the handles'
/// own (writable from safe code), and a later change to the file does not reach them.
#[test]
fn the_safe_loader_copies_and_maps_nothing() {
    let dir = tmp_dir("copied");
    let recs = mixed("copied");
    let shard = write_cache(&dir, &recs);
    let mut loaded =
        ndarray_cache::read_cache_dir_copied(dir.to_str().unwrap(), DLDevice::CPU).unwrap();
    assert!(
        mappings_of(&shard).is_empty(),
        "the safe loader mapped the shard"
    );
    for ((name, arr), r) in loaded.iter().zip(&recs) {
        assert!(!is_mapped_from(arr, &shard), "{name} is a view of the file");
        if r.format == "raw" {
            assert_eq!(bytes_of(arr), r.bytes, "{name}: bytes differ from the file");
        }
    }
    std::fs::write(
        &shard,
        vec![0u8; std::fs::metadata(&shard).unwrap().len() as usize],
    )
    .unwrap();
    assert_eq!(bytes_of(&loaded[0].1), recs[0].bytes);
    loaded[0].1.copy_from_slice(&[9.5f32; 256]).unwrap();
    assert_eq!(loaded[0].1.to_vec::<f32>().unwrap(), vec![9.5; 256]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn writing_a_loaded_parameter_leaves_the_shard_file_alone() {
    let dir = tmp_dir("cow");
    let recs = mixed("cow");
    let shard = write_cache(&dir, &recs);
    let before = std::fs::read(&shard).unwrap();
    let mut loaded = read_dir(dir.to_str().unwrap()).unwrap();
    assert!(is_mapped_from(&loaded[0].1, &shard));
    // A mapped parameter is memory the array does not own: safe writes are refused.
    let e = loaded[0].1.copy_from_slice(&[9.5f32; 256]).unwrap_err();
    assert!(e.message.contains("does not own"), "{e}");
    // SAFETY: nothing else reads or writes these arrays meanwhile.
    unsafe {
        loaded[0]
            .1
            .copy_from_slice_unchecked(&[9.5f32; 256])
            .unwrap();
        loaded[2]
            .1
            .copy_from_slice_unchecked(&[-1.0f32; 16])
            .unwrap();
    }
    assert_eq!(loaded[0].1.to_vec::<f32>().unwrap(), vec![9.5; 256]);
    // A second load still sees the file's bytes, and so does the file itself.
    let again = read_dir(dir.to_str().unwrap()).unwrap();
    assert_eq!(bytes_of(&again[0].1), recs[0].bytes);
    assert_eq!(bytes_of(&again[2].1), recs[2].bytes);
    drop((loaded, again));
    assert_eq!(
        std::fs::read(&shard).unwrap(),
        before,
        "the shard file changed"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Names of the cache entries a load of `mixed(tag)` publishes.
fn names(tag: &str) -> Vec<String> {
    mixed(tag).into_iter().map(|r| r.name).collect()
}

#[test]
fn mapping_lives_until_the_cache_entry_and_the_last_array_are_gone() {
    // Cache entries removed first, the array later.
    let dir = tmp_dir("order1");
    let recs = mixed("order1");
    let shard = write_cache(&dir, &recs);
    load_dir(dir.to_str().unwrap()).unwrap();
    let a = ndarray_cache::get("order1.a").unwrap();
    assert!(is_mapped_from(&a, &shard));
    for n in names("order1") {
        ndarray_cache::remove(&n);
    }
    assert!(ndarray_cache::get("order1.a").is_none());
    assert!(
        !mappings_of(&shard).is_empty(),
        "unmapped under a live array"
    );
    assert_eq!(bytes_of(&a), recs[0].bytes);
    drop(a);
    assert!(
        mappings_of(&shard).is_empty(),
        "mapping outlived its last array"
    );

    // The array dropped first, the cache entries later.
    let dir2 = tmp_dir("order2");
    let recs2 = mixed("order2");
    let shard2 = write_cache(&dir2, &recs2);
    load_dir(dir2.to_str().unwrap()).unwrap();
    let c = ndarray_cache::get("order2.c").unwrap();
    assert_eq!(bytes_of(&c), recs2[2].bytes);
    drop(c);
    assert!(
        !mappings_of(&shard2).is_empty(),
        "unmapped under a cache entry"
    );
    let a = ndarray_cache::get("order2.a").unwrap();
    assert_eq!(bytes_of(&a), recs2[0].bytes);
    drop(a);
    for n in names("order2") {
        ndarray_cache::remove(&n);
    }
    assert!(
        mappings_of(&shard2).is_empty(),
        "mapping outlived the cache"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&dir2).unwrap();
}

#[test]
fn bad_shards_fail_cleanly_and_leave_nothing_mapped_or_cached() {
    // Truncated shard: its size disagrees with ndarray-cache.json.
    let dir = tmp_dir("trunc");
    let shard = write_cache(&dir, &mixed("trunc"));
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let e = load_dir(dir.to_str().unwrap()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("params_shard_0.bin") && msg.contains("bytes"),
        "unclear error: {msg}"
    );
    assert!(ndarray_cache::get("trunc.a").is_none(), "half-loaded");
    assert!(mappings_of(&shard).is_empty());

    // A record whose size disagrees with its shape.
    let dir2 = tmp_dir("size");
    let mut recs = mixed("size");
    recs[2].shape = vec![4, 5];
    let shard2 = write_cache(&dir2, &recs);
    let e = load_dir(dir2.to_str().unwrap()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("size.c") && msg.contains("nbytes"),
        "unclear error: {msg}"
    );
    assert!(ndarray_cache::get("size.a").is_none(), "half-loaded");
    assert!(mappings_of(&shard2).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&dir2).unwrap();
}

/// A thread serving a remote peer is confined to its work directory: the cache's metadata may
/// not name a shard outside it (`..`, a symbolic link), while shards inside still load and an
/// absolute `dataPath` names a file under the cache directory, as the reference appends it.
#[cfg(feature = "rpc")]
#[test]
fn shards_named_by_the_metadata_stay_in_the_confinement() {
    use std::ffi::CString;
    use tvm_runtime::packed_func::confine::Confinement;
    use tvm_runtime::{ArgValue, Function};

    let root = tmp_dir("confined");
    let secret = tmp_dir("confined-outside").join("secret.bin");
    std::fs::write(&secret, f32_bytes(4, 7.0)).unwrap();
    let load = Function::get_global("vm.builtin.ndarray_cache.load").unwrap();
    let call = |dir: &Path| {
        let d = CString::new(dir.to_str().unwrap()).unwrap();
        let _g = Confinement::dir(&root).enter();
        load.call(&[ArgValue::Str(&d), ArgValue::Int(1), ArgValue::Int(0)])
    };
    let rec = |name: &str| Rec {
        name: name.to_string(),
        shape: vec![4],
        format: "raw",
        offset: 0,
        bytes: f32_bytes(4, 7.0),
    };
    // Inside: loads.
    let inside = root.join("inside");
    std::fs::create_dir_all(&inside).unwrap();
    write_cache(&inside, &[rec("confined.inside")]);
    call(&inside).unwrap();
    assert!(ndarray_cache::get("confined.inside").is_some());
    ndarray_cache::remove("confined.inside");
    // A cache under the root whose one shard is named `data_path`.
    let cache_naming = |sub: &str, name: &str, data_path: &str| {
        let dir = root.join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        write_cache(&dir, &[rec(name)]);
        let meta = std::fs::read_to_string(dir.join("ndarray-cache.json")).unwrap();
        let meta = meta.replace("\"params_shard_0.bin\"", &format!("\"{data_path}\""));
        std::fs::write(dir.join("ndarray-cache.json"), meta).unwrap();
        dir
    };
    // Each way out: refused, nothing cached.
    let escapes = [
        format!(
            "../../{}/secret.bin",
            secret
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
        ),
        "link.bin".to_string(),
    ];
    for (i, data_path) in escapes.iter().enumerate() {
        let dir = cache_naming(&format!("out{i}"), "confined.out", data_path);
        std::os::unix::fs::symlink(&secret, dir.join("link.bin")).unwrap();
        let e = call(&dir).unwrap_err().to_string();
        assert!(e.contains("ndarray_cache.load"), "{data_path}: {e}");
        assert!(ndarray_cache::get("confined.out").is_none(), "{data_path}");
    }
    // An absolute dataPath is under the cache directory (here: not there, so not found).
    let dir = cache_naming("abs", "confined.abs", secret.to_str().unwrap());
    assert!(call(&dir).is_err());
    assert!(ndarray_cache::get("confined.abs").is_none());
    // Unconfined, the same absolute dataPath is still taken under the directory.
    let (sub, file) = (secret.parent().unwrap(), secret.file_name().unwrap());
    let mirror = dir.join(sub.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&mirror).unwrap();
    std::fs::write(mirror.join(file), f32_bytes(4, 1.0)).unwrap();
    let arrays =
        ndarray_cache::read_cache_dir_copied(dir.to_str().unwrap(), DLDevice::CPU).unwrap();
    assert_eq!(bytes_of(&arrays[0].1), f32_bytes(4, 1.0));
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(secret.parent().unwrap());
}

//! Broken libraries are refused before the dynamic loader sees them: truncated at many offsets
//! and with corrupted headers, through the Rust API and the C API, never a crash.
#![cfg(feature = "dso")]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use tvm_runtime::c_api::{error::TVMGetLastError, module::TVMModLoadFromFile};
use tvm_runtime::Module;

/// The bundled x86-64 library (loaded only through [`fixture_dirs::bundled_mlp`]; read as
/// bytes on every target).
const MLP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/mlp.so");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt_elf_{}_{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Loads `path` through the Rust API and through `TVMModLoadFromFile`; both must refuse it
/// with a message naming the file. Returns the message.
fn refused(path: &Path) -> String {
    let p = path.to_str().unwrap();
    let e = match Module::load(p) {
        Ok(_) => panic!("{p} was loaded"),
        Err(e) => e.into_message(),
    };
    assert!(e.contains(p), "the error does not name {p}: {e}");
    let c = CString::new(p).unwrap();
    let mut out = std::ptr::null_mut();
    // SAFETY: valid NUL-terminated strings and an out slot.
    let rc = unsafe { TVMModLoadFromFile(c.as_ptr(), c"so".as_ptr(), &mut out) };
    assert_eq!(rc, -1, "{p} was loaded through the C API");
    // SAFETY: the runtime returns a NUL-terminated string.
    let last = unsafe { CStr::from_ptr(TVMGetLastError()) }.to_string_lossy();
    assert!(last.contains(p), "the C error does not name {p}: {last}");
    e
}

/// Offsets to cut `len` bytes at: every `step` bytes, both sides of every page boundary and
/// the last bytes.
fn cuts(len: usize, step: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..len).step_by(step).collect();
    for page in (4096..len).step_by(4096) {
        v.extend([page - 1, page, page + 1]);
    }
    v.extend([len - 8, len - 1]);
    v.sort();
    v.dedup();
    v
}

fn truncations(img: &[u8], offsets: &[usize], tag: &str) {
    let dir = scratch(tag);
    for &cut in offsets {
        let p = dir.join(format!("cut_{cut}.so"));
        std::fs::write(&p, &img[..cut]).unwrap();
        let e = refused(&p);
        assert!(
            cut < 16 || e.contains("truncated") || e.contains("ELF header"),
            "cut at {cut}: {e}"
        );
        std::fs::remove_file(&p).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bundled_library_loads() {
    let Some(mlp) = fixture_dirs::bundled_mlp() else {
        return;
    };
    let m = Module::load(mlp.to_str().unwrap()).unwrap();
    assert!(m.get_function("default", true).unwrap().is_some());
}

/// A library of another machine, or of the other word size, is refused with an error that
/// names both, on every target (the bundled x86-64 library, its machine set to AArch64 on
/// x86-64).
#[test]
fn a_library_for_another_machine_or_word_size_is_refused() {
    let mut img = std::fs::read(MLP).unwrap();
    let dir = scratch("foreign");
    let p = dir.join("foreign.so");
    let e = if cfg!(target_pointer_width = "32") {
        std::fs::write(&p, &img).unwrap();
        let e = refused(&p);
        assert!(e.contains("64-bit ELF but this process is 32-bit"), "{e}");
        e
    } else {
        let (lib, host) = if cfg!(target_arch = "x86_64") {
            put_u16(&mut img, 18, 183);
            ("AArch64", "x86-64")
        } else if cfg!(target_arch = "aarch64") {
            ("x86-64", "AArch64")
        } else if cfg!(target_arch = "riscv64") {
            ("x86-64", "RISC-V")
        } else {
            ("x86-64", "")
        };
        std::fs::write(&p, &img).unwrap();
        let e = refused(&p);
        assert!(
            e.contains(&format!("the library is built for {lib}")),
            "{e}"
        );
        assert!(e.contains(host), "{e}");
        e
    };
    eprintln!("{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncated_libraries_are_refused() {
    // Cut images are refused before any field of this process's machine is compared (the
    // machine and class come first), so this needs the target's own library.
    let Some(mlp) = fixture_dirs::bundled_mlp() else {
        return;
    };
    let img = std::fs::read(mlp).unwrap();
    let offsets = cuts(img.len(), 37);
    assert!(offsets.len() > 1000, "{}", offsets.len());
    truncations(&img, &offsets, "mlp");
}

#[test]
fn truncated_models_are_refused() {
    let Some(dir) = fixture_dirs::models_dir() else {
        return;
    };
    let img = std::fs::read(dir.join("mobilenet.so")).unwrap();
    // A few dozen cuts spread over the whole file (the weights blob is most of it).
    let offsets: Vec<usize> = (1..24)
        .map(|i| img.len() / 24 * i)
        .chain([img.len() - 1])
        .collect();
    truncations(&img, &offsets, "mobilenet");
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn put_u16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// Offsets of the program headers of an ELF64 little-endian image, with their types.
fn phdrs(img: &[u8]) -> Vec<(usize, u32)> {
    let off = u64_at(img, 32) as usize;
    let n = u16_at(img, 56) as usize;
    (0..n)
        .map(|i| {
            let o = off + i * 56;
            (o, u32::from_le_bytes(img[o..o + 4].try_into().unwrap()))
        })
        .collect()
}

fn first_of(img: &[u8], t: u32) -> usize {
    phdrs(img).iter().find(|p| p.1 == t).unwrap().0
}

/// Offsets of the dynamic entries (tag, value) of the image.
fn dyn_entries(img: &[u8]) -> Vec<(usize, u64)> {
    let d = first_of(img, 2);
    let (off, size) = (u64_at(img, d + 8) as usize, u64_at(img, d + 32) as usize);
    (off..off + size)
        .step_by(16)
        .map(|o| (o, u64_at(img, o)))
        .collect()
}

#[test]
fn corrupted_headers_are_refused() {
    // The edits below are to an ELF64 image of this process's machine.
    let Some(mlp) = fixture_dirs::bundled_mlp() else {
        return;
    };
    let img = std::fs::read(mlp).unwrap();
    assert!(
        img[4] == 2 && img[5] == 1,
        "the bundled library is ELF64 LE"
    );
    let len = img.len() as u64;
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        ("magic", Box::new(|b| b[1] = b'X'), "no ELF header"),
        ("class", Box::new(|b| b[4] = 7), "unknown class"),
        ("class32", Box::new(|b| b[4] = 1), "32-bit"),
        ("order", Box::new(|b| b[5] = 2), "big-endian"),
        ("version", Box::new(|b| b[6] = 9), "ELF version"),
        ("rel", Box::new(|b| put_u16(b, 16, 1)), "object file"),
        ("exec", Box::new(|b| put_u16(b, 16, 2)), "executable"),
        ("type", Box::new(|b| put_u16(b, 16, 77)), "ELF type"),
        ("machine", Box::new(|b| put_u16(b, 18, 8)), "MIPS"),
        (
            "phoff",
            Box::new(move |b| put_u64(b, 32, len - 10)),
            "program header table",
        ),
        (
            "phoff_wrap",
            Box::new(|b| put_u64(b, 32, u64::MAX - 100)),
            "program header table",
        ),
        (
            "phentsize",
            Box::new(|b| put_u16(b, 54, 32)),
            "program header size",
        ),
        (
            "phnum0",
            Box::new(|b| put_u16(b, 56, 0)),
            "no program headers",
        ),
        (
            "phnum_big",
            Box::new(|b| put_u16(b, 56, 5000)),
            "program header table",
        ),
        (
            "shoff",
            Box::new(move |b| put_u64(b, 40, len)),
            "section header table",
        ),
        (
            "load_offset",
            Box::new(move |b| {
                let p = phdrs(b).iter().filter(|p| p.1 == 1).nth(1).unwrap().0;
                put_u64(b, p + 8, len);
            }),
            "covers file bytes",
        ),
        (
            "load_filesz",
            Box::new(|b| {
                let p = first_of(b, 1);
                put_u64(b, p + 32, u64::MAX - 5);
            }),
            "covers file bytes",
        ),
        (
            "load_memsz",
            Box::new(|b| {
                let p = first_of(b, 1);
                put_u64(b, p + 40, 1);
            }),
            "in memory",
        ),
        (
            "load_vaddr_wrap",
            Box::new(|b| {
                let p = first_of(b, 1);
                put_u64(b, p + 16, u64::MAX - 7);
            }),
            "wraps the address space",
        ),
        (
            "load_memsz_wrap",
            Box::new(|b| {
                let p = phdrs(b).iter().filter(|p| p.1 == 1).nth(1).unwrap().0;
                put_u64(b, p + 40, u64::MAX - 7);
            }),
            "wraps the address space",
        ),
        (
            "dynamic_vaddr_wrap",
            Box::new(|b| {
                let p = first_of(b, 2);
                put_u64(b, p + 16, u64::MAX - 8);
            }),
            "dynamic section",
        ),
        (
            "load_align",
            Box::new(|b| {
                let p = phdrs(b).iter().filter(|p| p.1 == 1).nth(1).unwrap().0;
                put_u64(b, p + 48, 0x3000);
            }),
            "alignment",
        ),
        (
            "no_load",
            Box::new(|b| {
                for (p, t) in phdrs(b) {
                    if t == 1 {
                        put_u32(b, p, 0);
                    }
                }
            }),
            "no loadable segment",
        ),
        (
            "no_dynamic",
            Box::new(|b| {
                let p = first_of(b, 2);
                put_u32(b, p, 0);
            }),
            "no dynamic section",
        ),
        (
            "dynamic_outside",
            Box::new(|b| {
                let p = first_of(b, 2);
                put_u64(b, p + 16, 0x7000_0000);
            }),
            "dynamic section",
        ),
        (
            "dynamic_past_end",
            Box::new(move |b| {
                let p = first_of(b, 2);
                put_u64(b, p + 8, len - 16);
            }),
            "covers file bytes",
        ),
        (
            "strtab",
            Box::new(|b| {
                let e = dyn_entries(b).into_iter().find(|e| e.1 == 5).unwrap().0;
                put_u64(b, e + 8, 0x7fff_0000);
            }),
            "DT_STRTAB",
        ),
        (
            "strsz",
            Box::new(|b| {
                let e = dyn_entries(b).into_iter().find(|e| e.1 == 10).unwrap().0;
                put_u64(b, e + 8, 1 << 40);
            }),
            "DT_STRTAB",
        ),
        (
            "symtab",
            Box::new(|b| {
                let e = dyn_entries(b).into_iter().find(|e| e.1 == 6).unwrap().0;
                put_u64(b, e + 8, u64::MAX);
            }),
            "DT_SYMTAB",
        ),
        (
            "init_array",
            Box::new(|b| {
                let e = dyn_entries(b).into_iter().find(|e| e.1 == 25).unwrap().0;
                put_u64(b, e + 8, 0x10_0000);
            }),
            "DT_INIT_ARRAY",
        ),
        (
            "unterminated",
            Box::new(|b| {
                for (o, tag) in dyn_entries(b) {
                    if tag == 0 {
                        put_u64(b, o, 21);
                    }
                }
            }),
            "terminating",
        ),
    ];
    let dir = scratch("corrupt");
    for (name, edit, want) in &cases {
        let mut b = img.clone();
        edit(&mut b);
        assert_ne!(b, img, "{name} changed nothing");
        let p = dir.join(format!("{name}.so"));
        std::fs::write(&p, &b).unwrap();
        let e = refused(&p);
        assert!(e.contains(want), "{name}: expected '{want}' in: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The ELF fuzz target's seeds of segments whose ends overflow: each is refused with what is
/// wrong (and the seed they derive from is accepted by the check).
#[test]
fn the_fuzz_seeds_with_wrapping_segments_are_refused() {
    // The seeds are x86-64 ELF64 images: on another 64-bit target their machine is set to the
    // target's (the check reads headers only); a 32-bit target refuses them for their class.
    let machine: u16 = match std::env::consts::ARCH {
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" => 243,
        arch => {
            skip::report(&format!("the ELF64 fuzz seeds on {arch}"));
            return;
        }
    };
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf");
    let seed = |name: &str| {
        let mut img = std::fs::read(format!("{seeds}/{name}.so")).unwrap();
        put_u16(&mut img, 18, machine);
        img
    };
    tvm_runtime::module::elf_check::check_bytes("tiny.so", &seed("tiny")).unwrap();
    for (name, want) in [
        ("load_vaddr_wrap", "wraps the address space"),
        ("load_memsz_wrap", "wraps the address space"),
        ("dynamic_vaddr_wrap", "dynamic section"),
    ] {
        let e = tvm_runtime::module::elf_check::check_bytes(name, &seed(name)).unwrap_err();
        assert!(e.message.contains(want), "{name}: {}", e.message);
    }
}

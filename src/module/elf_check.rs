//! Checks a shared library's ELF structure before the dynamic loader maps it.
//!
//! The dynamic loader trusts the file: a segment that claims bytes past the end of a truncated
//! file is mapped anyway and the process dies of SIGBUS when the loader touches it. This check
//! reads only the headers (ELF header, program headers, dynamic section) and refuses a file
//! whose class, byte order, type or machine do not fit this process, whose program headers or
//! segments reach past the end of the file, or that has no dynamic section, or whose dynamic
//! section points outside the loaded segments. The error names the file and what is wrong.

use crate::packed_func::error::{Error, Result};
use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;

const ELFCLASS32: u8 = 1;
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const ELFDATA2MSB: u8 = 2;
const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ET_CORE: u16 = 4;
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
/// `e_phnum` value meaning "more program headers than fit the field".
const PN_XNUM: u16 = 0xffff;
/// Largest dynamic section read (a TVM library's is a few hundred bytes).
const MAX_DYNAMIC: u64 = 1 << 20;

/// The ELF machine (`e_machine`) of this process, `None` when not in the table below.
const HOST_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "x86") {
    Some(3)
} else if cfg!(target_arch = "arm") {
    Some(40)
} else if cfg!(any(target_arch = "riscv64", target_arch = "riscv32")) {
    Some(243)
} else if cfg!(any(target_arch = "powerpc64", target_arch = "powerpc")) {
    Some(if cfg!(target_arch = "powerpc64") {
        21
    } else {
        20
    })
} else if cfg!(target_arch = "s390x") {
    Some(22)
} else if cfg!(target_arch = "loongarch64") {
    Some(258)
} else {
    None
};

/// A printable ELF machine.
fn machine_name(m: u16) -> String {
    let name = match m {
        3 => "x86 (i386)",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "s390",
        40 => "ARM (32-bit)",
        62 => "x86-64",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => return format!("machine {m}"),
    };
    format!("{name} (machine {m})")
}

/// Field widths and byte order of one ELF file.
#[derive(Copy, Clone)]
struct Layout {
    is64: bool,
    le: bool,
}

impl Layout {
    fn u16(&self, b: &[u8], off: usize) -> u16 {
        let a = [b[off], b[off + 1]];
        if self.le {
            u16::from_le_bytes(a)
        } else {
            u16::from_be_bytes(a)
        }
    }

    fn u32(&self, b: &[u8], off: usize) -> u32 {
        let a = [b[off], b[off + 1], b[off + 2], b[off + 3]];
        if self.le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    }

    fn u64(&self, b: &[u8], off: usize) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[off..off + 8]);
        if self.le {
            u64::from_le_bytes(a)
        } else {
            u64::from_be_bytes(a)
        }
    }

    /// An address-sized field: 8 bytes in ELF64, 4 in ELF32.
    fn word(&self, b: &[u8], off: usize) -> u64 {
        if self.is64 {
            self.u64(b, off)
        } else {
            u64::from(self.u32(b, off))
        }
    }

    fn ehdr_size(&self) -> usize {
        if self.is64 {
            64
        } else {
            52
        }
    }

    fn phdr_size(&self) -> usize {
        if self.is64 {
            56
        } else {
            32
        }
    }

    fn shdr_size(&self) -> usize {
        if self.is64 {
            64
        } else {
            40
        }
    }

    fn dyn_size(&self) -> usize {
        if self.is64 {
            16
        } else {
            8
        }
    }

    fn phdr(&self, b: &[u8]) -> Phdr {
        if self.is64 {
            Phdr {
                p_type: self.u32(b, 0),
                offset: self.u64(b, 8),
                vaddr: self.u64(b, 16),
                filesz: self.u64(b, 32),
                memsz: self.u64(b, 40),
                align: self.u64(b, 48),
            }
        } else {
            Phdr {
                p_type: self.u32(b, 0),
                offset: u64::from(self.u32(b, 4)),
                vaddr: u64::from(self.u32(b, 8)),
                filesz: u64::from(self.u32(b, 16)),
                memsz: u64::from(self.u32(b, 20)),
                align: u64::from(self.u32(b, 28)),
            }
        }
    }
}

/// The fields of a program header the check uses.
#[derive(Copy, Clone, Debug)]
struct Phdr {
    p_type: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

/// Reads byte ranges of the file (callers check that ranges lie inside it).
trait Source {
    fn len(&self) -> u64;
    fn read(&self, offset: u64, len: u64) -> std::io::Result<Cow<'_, [u8]>>;
}

/// How much of the file's start one read fetches: the ELF header and, in libraries as linkers
/// write them, the program headers, so that the common case costs one system call.
const HEAD: usize = 1024;

/// A file and its length, with the first [`HEAD`] bytes read once (into the structure: no
/// allocation).
struct FileSource {
    file: File,
    len: u64,
    head: [u8; HEAD],
    head_len: usize,
}

impl FileSource {
    fn new(file: File, len: u64) -> std::io::Result<Self> {
        let head_len = len.min(HEAD as u64) as usize;
        let mut src = FileSource {
            file,
            len,
            head: [0u8; HEAD],
            head_len,
        };
        src.file.read_exact_at(&mut src.head[..head_len], 0)?;
        Ok(src)
    }
}

impl Source for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, offset: u64, len: u64) -> std::io::Result<Cow<'_, [u8]>> {
        if let Some(end) = range_end(offset, len, self.head_len as u64) {
            return Ok(Cow::Borrowed(&self.head[offset as usize..end as usize]));
        }
        let mut v = vec![0u8; len as usize];
        self.file.read_exact_at(&mut v, offset)?;
        Ok(Cow::Owned(v))
    }
}

impl Source for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read(&self, offset: u64, len: u64) -> std::io::Result<Cow<'_, [u8]>> {
        Ok(Cow::Borrowed(
            &self[offset as usize..(offset + len) as usize],
        ))
    }
}

/// Checks the ELF file at `path` (see the module documentation); a missing path or one that
/// is not a regular file is refused too. Returns the file, open, and its metadata, for
/// whatever else the loader reads from it.
pub fn check_file(path: &str) -> Result<(File, std::fs::Metadata)> {
    let f = File::open(path)
        .map_err(|e| Error::internal(format!("cannot open module file {path}: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| Error::internal(format!("cannot open module file {path}: {e}")))?;
    if !meta.is_file() {
        return Err(Error::internal(format!(
            "cannot open module file {path}: not a file"
        )));
    }
    let len = meta.len();
    let src = FileSource::new(f, len)
        .map_err(|e| Error::internal(format!("cannot load {path}: read error: {e}")))?;
    check_source(&src).map_err(|what| Error::internal(format!("cannot load {path}: {what}")))?;
    Ok((src.file, meta))
}

/// Checks an ELF image held in memory; `name` is used in the error.
pub fn check_bytes(name: &str, image: &[u8]) -> Result<()> {
    check_source(&image).map_err(|what| Error::internal(format!("cannot load {name}: {what}")))
}

/// `offset + size` when the range lies inside a file of `len` bytes.
fn range_end(offset: u64, size: u64, len: u64) -> Option<u64> {
    offset.checked_add(size).filter(|&end| end <= len)
}

fn check_source(src: &impl Source) -> std::result::Result<(), String> {
    let len = src.len();
    let io = |e: std::io::Error| format!("read error: {e}");
    if len < 16 {
        return Err(format!(
            "not a shared library: the file has {len} bytes, too short for an ELF header"
        ));
    }
    let ident = src.read(0, 16).map_err(io)?;
    if &ident[..4] != b"\x7fELF" {
        return Err("not a shared library (no ELF header)".into());
    }
    let host64 = cfg!(target_pointer_width = "64");
    let is64 = match ident[4] {
        ELFCLASS64 => true,
        ELFCLASS32 => false,
        c => return Err(format!("corrupted ELF header: unknown class {c}")),
    };
    if is64 != host64 {
        return Err(format!(
            "the library is {}-bit ELF but this process is {}-bit",
            if is64 { 64 } else { 32 },
            if host64 { 64 } else { 32 }
        ));
    }
    let le = match ident[5] {
        ELFDATA2LSB => true,
        ELFDATA2MSB => false,
        d => return Err(format!("corrupted ELF header: unknown byte order {d}")),
    };
    if le != cfg!(target_endian = "little") {
        return Err(format!(
            "the library is {}-endian but this process is {}-endian",
            if le { "little" } else { "big" },
            if le { "big" } else { "little" }
        ));
    }
    if ident[6] != 1 {
        return Err(format!(
            "corrupted ELF header: unknown ELF version {}",
            ident[6]
        ));
    }
    let l = Layout { is64, le };
    let eh_size = l.ehdr_size() as u64;
    if len < eh_size {
        return Err(format!(
            "truncated: the file has {len} bytes, the ELF header needs {eh_size}"
        ));
    }
    let eh = src.read(0, eh_size).map_err(io)?;
    let e_type = l.u16(&eh, 16);
    match e_type {
        ET_DYN => {}
        ET_REL => return Err("an object file (ELF type REL), not a shared library".into()),
        ET_EXEC => {
            return Err("an executable (ELF type EXEC), not a shared library".into());
        }
        ET_CORE => return Err("a core dump (ELF type CORE), not a shared library".into()),
        t => return Err(format!("corrupted ELF header: unknown ELF type {t}")),
    }
    let machine = l.u16(&eh, 18);
    if let Some(host) = HOST_MACHINE {
        if machine != host {
            return Err(format!(
                "the library is built for {}, this process runs on {}",
                machine_name(machine),
                machine_name(host)
            ));
        }
    }
    let (phoff, shoff, fields) = if is64 {
        (l.u64(&eh, 32), l.u64(&eh, 40), 54)
    } else {
        (u64::from(l.u32(&eh, 28)), u64::from(l.u32(&eh, 32)), 42)
    };
    let phentsize = l.u16(&eh, fields);
    let phnum = l.u16(&eh, fields + 2);
    let shentsize = l.u16(&eh, fields + 4);
    let shnum = l.u16(&eh, fields + 6);

    // Section headers: the dynamic loader does not read them, but they sit at the end of the
    // file, so a table past the end is the plainest sign of a truncated file.
    if shoff != 0 || shnum != 0 {
        if usize::from(shentsize) != l.shdr_size() {
            return Err(format!(
                "corrupted ELF header: section header size {shentsize}, expected {}",
                l.shdr_size()
            ));
        }
        let size = u64::from(shnum) * u64::from(shentsize);
        if range_end(shoff, size, len).is_none() {
            return Err(format!(
                "truncated or corrupted: the section header table (offset {shoff}, {size} bytes) \
                 reaches past the end of the file ({len} bytes)"
            ));
        }
    }

    if phnum == 0 {
        return Err("corrupted ELF header: no program headers".into());
    }
    if phnum == PN_XNUM {
        return Err("unsupported ELF file: more than 65534 program headers".into());
    }
    if usize::from(phentsize) != l.phdr_size() {
        return Err(format!(
            "corrupted ELF header: program header size {phentsize}, expected {}",
            l.phdr_size()
        ));
    }
    let ph_bytes = u64::from(phnum) * u64::from(phentsize);
    if range_end(phoff, ph_bytes, len).is_none() {
        return Err(format!(
            "truncated or corrupted: the program header table (offset {phoff}, {ph_bytes} bytes) \
             reaches past the end of the file ({len} bytes)"
        ));
    }
    let table = src.read(phoff, ph_bytes).map_err(io)?;
    let phdrs = || {
        table
            .chunks_exact(usize::from(phentsize))
            .map(|b| l.phdr(b))
    };

    let mut dynamic = None;
    let mut any_load = false;
    for (i, p) in phdrs().enumerate() {
        if p.filesz > 0 && range_end(p.offset, p.filesz, len).is_none() {
            return Err(format!(
                "truncated or corrupted: program header {i} (type {}) covers file bytes {}..{} \
                 but the file has {len} bytes",
                p.p_type,
                p.offset,
                p.offset.saturating_add(p.filesz)
            ));
        }
        match p.p_type {
            PT_LOAD => {
                if p.filesz > p.memsz {
                    return Err(format!(
                        "corrupted: loadable segment {i} has {} bytes in the file but only {} \
                         in memory",
                        p.filesz, p.memsz
                    ));
                }
                if p.vaddr.checked_add(p.memsz).is_none() {
                    return Err(format!(
                        "corrupted: loadable segment {i} wraps the address space"
                    ));
                }
                if p.align > 1
                    && (!p.align.is_power_of_two() || p.vaddr.wrapping_sub(p.offset) % p.align != 0)
                {
                    return Err(format!(
                        "corrupted: loadable segment {i} has alignment {:#x} that its offset \
                         {:#x} and address {:#x} do not respect",
                        p.align, p.offset, p.vaddr
                    ));
                }
                any_load = true;
            }
            PT_DYNAMIC => {
                if dynamic.is_some() {
                    return Err("corrupted: more than one dynamic section".into());
                }
                dynamic = Some(p);
            }
            _ => {}
        }
    }
    if !any_load {
        return Err("corrupted: no loadable segment".into());
    }
    let Some(dynamic) = dynamic else {
        return Err("no dynamic section: not a shared library the dynamic loader can open".into());
    };
    // Whether [addr, addr + size) lies in the memory of one loadable segment.
    let mapped = |addr: u64, size: u64| {
        phdrs().any(|p| {
            p.p_type == PT_LOAD
                && addr >= p.vaddr
                && addr
                    .checked_add(size)
                    .is_some_and(|end| end <= p.vaddr + p.memsz)
        })
    };
    let dsz = l.dyn_size() as u64;
    if dynamic.filesz < dsz || dynamic.filesz > MAX_DYNAMIC {
        return Err(format!(
            "corrupted: the dynamic section has {} bytes",
            dynamic.filesz
        ));
    }
    if !mapped(dynamic.vaddr, dynamic.filesz) {
        return Err(format!(
            "corrupted: the dynamic section (address {:#x}, {} bytes) is outside the loadable \
             segments",
            dynamic.vaddr, dynamic.filesz
        ));
    }
    let dyn_bytes = src.read(dynamic.offset, dynamic.filesz).map_err(io)?;
    check_dynamic(&l, &dyn_bytes, &mapped)
}

/// Checks the dynamic entries: a terminating `DT_NULL`, and that the tables the loader reads
/// (string and symbol tables, hash tables, relocations, init and fini arrays) are in loaded
/// memory.
fn check_dynamic(
    l: &Layout,
    bytes: &[u8],
    mapped: &dyn Fn(u64, u64) -> bool,
) -> std::result::Result<(), String> {
    const DT_NULL: u64 = 0;
    // (address tag, size tag or 0, name)
    const TABLES: &[(u64, u64, &str)] = &[
        (4, 0, "DT_HASH"),
        (5, 10, "DT_STRTAB"),
        (6, 0, "DT_SYMTAB"),
        (7, 8, "DT_RELA"),
        (12, 0, "DT_INIT"),
        (13, 0, "DT_FINI"),
        (17, 18, "DT_REL"),
        (23, 2, "DT_JMPREL"),
        (25, 27, "DT_INIT_ARRAY"),
        (26, 28, "DT_FINI_ARRAY"),
        (0x6fff_fef5, 0, "DT_GNU_HASH"),
        (0x6fff_fff0, 0, "DT_VERSYM"),
        (0x6fff_fffc, 0, "DT_VERDEF"),
        (0x6fff_fffe, 0, "DT_VERNEED"),
    ];
    let step = l.dyn_size();
    let half = step / 2;
    // The first value of each tag TABLES names (address or size), by its slot.
    fn slot(tag: u64) -> Option<usize> {
        Some(match tag {
            2 => 0,
            4..=8 => tag as usize - 3,
            10 => 6,
            12 | 13 => tag as usize - 5,
            17 | 18 => tag as usize - 8,
            23 => 11,
            25..=28 => tag as usize - 13,
            0x6fff_fef5 => 16,
            0x6fff_fff0 => 17,
            0x6fff_fffc => 18,
            0x6fff_fffe => 19,
            _ => return None,
        })
    }
    let mut values = [None::<u64>; 20];
    let mut terminated = false;
    for e in bytes.chunks_exact(step) {
        let tag = l.word(e, 0);
        if tag == DT_NULL {
            terminated = true;
            break;
        }
        if let Some(k) = slot(tag) {
            values[k].get_or_insert(l.word(e, half));
        }
    }
    if !terminated {
        return Err("corrupted: the dynamic section has no terminating entry".into());
    }
    let value = |tag: u64| slot(tag).and_then(|k| values[k]);
    for &(tag, size_tag, name) in TABLES {
        let Some(addr) = value(tag) else { continue };
        let size = if size_tag == 0 {
            1
        } else {
            value(size_tag).unwrap_or(0).max(1)
        };
        if !mapped(addr, size) {
            return Err(format!(
                "corrupted: the dynamic entry {name} points at {addr:#x} ({size} bytes), \
                 outside the loadable segments"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mlp() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/models/mlp.so"
        ))
        .unwrap()
    }

    #[test]
    fn accepts_a_tvm_library() {
        check_bytes("mlp.so", &mlp()).unwrap();
    }

    #[test]
    fn refuses_every_truncation() {
        let img = mlp();
        for cut in (0..img.len()).step_by(97).chain([img.len() - 1]) {
            let e = check_bytes("mlp.so", &img[..cut]).unwrap_err();
            assert!(e.message.contains("mlp.so"), "{cut}: {}", e.message);
        }
    }

    #[test]
    fn refuses_a_foreign_machine() {
        let mut img = mlp();
        img[18..20].copy_from_slice(&8u16.to_le_bytes());
        let e = check_bytes("x.so", &img).unwrap_err();
        assert!(e.message.contains("MIPS"), "{}", e.message);
    }
}

//! Checks a shared library's ELF structure before the dynamic loader maps it.
//!
//! The dynamic loader trusts the file: a segment that claims bytes past the end of a truncated
//! file is mapped anyway and the process dies of SIGBUS when the loader touches it. This check
//! reads only the headers (ELF header, program headers, dynamic section) and refuses a file
//! whose class, byte order, type or machine do not fit this process, whose program headers or
//! segments reach past the end of the file, or that has no dynamic section, or whose dynamic
//! section points outside the loaded segments. The error names the file and what is wrong.

use crate::packed_func::error::{Error, Result};
use crate::packed_func::text::owned;
use object::elf;
use object::read::elf::{Dyn as _, FileHeader, ProgramHeader as _};
use object::{Endianness, NativeEndian};
use std::borrow::Cow;
use std::fs::File;
use std::mem::offset_of;
use std::os::unix::fs::FileExt;

/// The ELF header of this process's class and byte order (a library of the other class or
/// byte order is refused first, so its fields read without a byte-order test).
#[cfg(target_pointer_width = "64")]
type Ehdr = elf::FileHeader64<NativeEndian>;
#[cfg(not(target_pointer_width = "64"))]
type Ehdr = elf::FileHeader32<NativeEndian>;
type Phdr = <Ehdr as FileHeader>::ProgramHeader;
type DynEntry = <Ehdr as FileHeader>::Dyn;

/// Largest dynamic section read (a TVM library's is a few hundred bytes).
const MAX_DYNAMIC: u64 = 1 << 20;

/// The ELF machine (`e_machine`) of this process, `None` when not in the table below.
const HOST_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(elf::EM_X86_64)
} else if cfg!(target_arch = "aarch64") {
    Some(elf::EM_AARCH64)
} else if cfg!(target_arch = "x86") {
    Some(elf::EM_386)
} else if cfg!(target_arch = "arm") {
    Some(elf::EM_ARM)
} else if cfg!(any(target_arch = "riscv64", target_arch = "riscv32")) {
    Some(elf::EM_RISCV)
} else if cfg!(target_arch = "powerpc64") {
    Some(elf::EM_PPC64)
} else if cfg!(target_arch = "powerpc") {
    Some(elf::EM_PPC)
} else if cfg!(target_arch = "s390x") {
    Some(elf::EM_S390)
} else if cfg!(target_arch = "loongarch64") {
    Some(elf::EM_LOONGARCH)
} else {
    None
};

/// A printable ELF machine.
fn machine_name(m: u16) -> String {
    let name = match m {
        elf::EM_386 => "x86 (i386)",
        elf::EM_MIPS => "MIPS",
        elf::EM_PPC => "PowerPC",
        elf::EM_PPC64 => "PowerPC64",
        elf::EM_S390 => "s390",
        elf::EM_ARM => "ARM (32-bit)",
        elf::EM_X86_64 => "x86-64",
        elf::EM_AARCH64 => "AArch64",
        elf::EM_RISCV => "RISC-V",
        elf::EM_LOONGARCH => "LoongArch",
        _ => return bad(format_args!("machine {m}")),
    };
    bad(format_args!("{name} (machine {m})"))
}

/// An address-sized field as `u64` (the identity in ELF64, a widening in ELF32).
#[allow(clippy::useless_conversion)]
fn wide(w: <Ehdr as FileHeader>::Word) -> u64 {
    w.into()
}

/// The fields of a program header the check uses.
#[derive(Copy, Clone, Debug)]
struct Segment {
    p_type: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

impl Segment {
    fn of(p: &Phdr, e: NativeEndian) -> Segment {
        Segment {
            p_type: p.p_type(e),
            offset: wide(p.p_offset(e)),
            vaddr: wide(p.p_vaddr(e)),
            filesz: wide(p.p_filesz(e)),
            memsz: wide(p.p_memsz(e)),
            align: wide(p.p_align(e)),
        }
    }
}

/// An error text from `format_args!` (one out-of-line, cold formatting for the many sites).
#[cold]
#[inline(never)]
fn bad(args: std::fmt::Arguments<'_>) -> String {
    std::fmt::format(args)
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
        if range_end(offset, len, self.len).is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                bad(format_args!("bytes {offset}+{len} are outside the file")),
            ));
        }
        let len = usize::try_from(len).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                bad(format_args!("{len} bytes do not fit the address space")),
            )
        })?;
        let mut v = vec![0u8; len];
        self.file.read_exact_at(&mut v, offset)?;
        Ok(Cow::Owned(v))
    }
}

impl Source for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read(&self, offset: u64, len: u64) -> std::io::Result<Cow<'_, [u8]>> {
        let end = range_end(offset, len, Source::len(self)).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                bad(format_args!("bytes {offset}+{len} are outside the image")),
            )
        })?;
        Ok(Cow::Borrowed(&self[offset as usize..end as usize]))
    }
}

/// Checks the ELF file at `path` (see the module documentation); a missing path or one that
/// is not a regular file is refused too. Returns the file, open, and its metadata, for
/// whatever else the loader reads from it.
#[inline(never)]
pub fn check_file(path: &str) -> Result<(File, std::fs::Metadata)> {
    let f = File::open(path)
        .map_err(|e| Error::internal_fmt(format_args!("cannot open module file {path}: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| Error::internal_fmt(format_args!("cannot open module file {path}: {e}")))?;
    if !meta.is_file() {
        return Err(Error::internal_fmt(format_args!(
            "cannot open module file {path}: not a file"
        )));
    }
    let len = meta.len();
    let src = FileSource::new(f, len)
        .map_err(|e| Error::internal_fmt(format_args!("cannot load {path}: read error: {e}")))?;
    check_source(&src)
        .map_err(|what| Error::internal_fmt(format_args!("cannot load {path}: {what}")))?;
    Ok((src.file, meta))
}

/// Checks an ELF image held in memory; `name` is used in the error.
pub fn check_bytes(name: &str, image: &[u8]) -> Result<()> {
    check_source(&image)
        .map_err(|what| Error::internal_fmt(format_args!("cannot load {name}: {what}")))
}

/// `offset + size` when the range lies inside a file of `len` bytes.
fn range_end(offset: u64, size: u64, len: u64) -> Option<u64> {
    offset.checked_add(size).filter(|&end| end <= len)
}

#[inline(never)]
fn check_source(src: &impl Source) -> std::result::Result<(), String> {
    let len = src.len();
    let io = |e: std::io::Error| bad(format_args!("read error: {e}"));
    if len < 16 {
        return Err(bad(format_args!(
            "not a shared library: the file has {len} bytes, too short for an ELF header"
        )));
    }
    let ident = src.read(0, 16).map_err(io)?;
    let field = |offset: usize| ident[offset];
    if ident[..4] != elf::ELFMAG {
        return Err(owned("not a shared library (no ELF header)"));
    }
    let host64 = cfg!(target_pointer_width = "64");
    let is64 = match field(offset_of!(elf::Ident, class)) {
        elf::ELFCLASS64 => true,
        elf::ELFCLASS32 => false,
        c => return Err(bad(format_args!("corrupted ELF header: unknown class {c}"))),
    };
    if is64 != host64 {
        return Err(bad(format_args!(
            "the library is {}-bit ELF but this process is {}-bit",
            if is64 { 64 } else { 32 },
            if host64 { 64 } else { 32 }
        )));
    }
    let e = match field(offset_of!(elf::Ident, data)) {
        elf::ELFDATA2LSB => Endianness::Little,
        elf::ELFDATA2MSB => Endianness::Big,
        d => {
            return Err(bad(format_args!(
                "corrupted ELF header: unknown byte order {d}"
            )))
        }
    };
    if e != Endianness::default() {
        let name = |e| match e {
            Endianness::Little => "little",
            Endianness::Big => "big",
        };
        return Err(bad(format_args!(
            "the library is {}-endian but this process is {}-endian",
            name(e),
            name(Endianness::default())
        )));
    }
    let e = NativeEndian;
    let version = field(offset_of!(elf::Ident, version));
    if version != elf::EV_CURRENT {
        return Err(bad(format_args!(
            "corrupted ELF header: unknown ELF version {version}"
        )));
    }
    let eh_size = std::mem::size_of::<Ehdr>() as u64;
    if len < eh_size {
        return Err(bad(format_args!(
            "truncated: the file has {len} bytes, the ELF header needs {eh_size}"
        )));
    }
    let eh_bytes = src.read(0, eh_size).map_err(io)?;
    let (eh, _) = object::pod::from_bytes::<Ehdr>(&eh_bytes)
        .map_err(|_| owned("corrupted ELF header: unreadable"))?;
    match eh.e_type(e) {
        elf::ET_DYN => {}
        elf::ET_REL => return Err(owned("an object file (ELF type REL), not a shared library")),
        elf::ET_EXEC => {
            return Err(owned("an executable (ELF type EXEC), not a shared library"));
        }
        elf::ET_CORE => return Err(owned("a core dump (ELF type CORE), not a shared library")),
        t => {
            return Err(bad(format_args!(
                "corrupted ELF header: unknown ELF type {t}"
            )))
        }
    }
    let machine = eh.e_machine(e);
    if let Some(host) = HOST_MACHINE {
        if machine != host {
            return Err(bad(format_args!(
                "the library is built for {}, this process runs on {}",
                machine_name(machine),
                machine_name(host)
            )));
        }
    }
    let phoff: u64 = wide(eh.e_phoff(e));
    let shoff: u64 = wide(eh.e_shoff(e));
    let (phentsize, phnum) = (eh.e_phentsize(e), eh.e_phnum(e));
    let (shentsize, shnum) = (eh.e_shentsize(e), eh.e_shnum(e));

    // Section headers: the dynamic loader does not read them, but they sit at the end of the
    // file, so a table past the end is the plainest sign of a truncated file.
    if shoff != 0 || shnum != 0 {
        let want = std::mem::size_of::<<Ehdr as FileHeader>::SectionHeader>();
        if usize::from(shentsize) != want {
            return Err(bad(format_args!(
                "corrupted ELF header: section header size {shentsize}, expected {want}"
            )));
        }
        let size = u64::from(shnum) * u64::from(shentsize);
        if range_end(shoff, size, len).is_none() {
            return Err(bad(format_args!(
                "truncated or corrupted: the section header table (offset {shoff}, {size} bytes) \
                 reaches past the end of the file ({len} bytes)"
            )));
        }
    }

    if phnum == 0 {
        return Err(owned("corrupted ELF header: no program headers"));
    }
    if phnum == elf::PN_XNUM {
        return Err(owned(
            "unsupported ELF file: more than 65534 program headers",
        ));
    }
    if usize::from(phentsize) != std::mem::size_of::<Phdr>() {
        return Err(bad(format_args!(
            "corrupted ELF header: program header size {phentsize}, expected {}",
            std::mem::size_of::<Phdr>()
        )));
    }
    let ph_bytes = u64::from(phnum) * u64::from(phentsize);
    if range_end(phoff, ph_bytes, len).is_none() {
        return Err(bad(format_args!(
            "truncated or corrupted: the program header table (offset {phoff}, {ph_bytes} bytes) \
             reaches past the end of the file ({len} bytes)"
        )));
    }
    let table = src.read(phoff, ph_bytes).map_err(io)?;
    let (table, _) = object::pod::slice_from_bytes::<Phdr>(&table, usize::from(phnum))
        .map_err(|_| owned("corrupted: unreadable program headers"))?;
    let phdrs = || table.iter().map(|p| Segment::of(p, e));

    let mut dynamic = None;
    let mut any_load = false;
    for (i, p) in phdrs().enumerate() {
        if p.filesz > 0 && range_end(p.offset, p.filesz, len).is_none() {
            return Err(bad(format_args!(
                "truncated or corrupted: program header {i} (type {}) covers file bytes {}..{} \
                 but the file has {len} bytes",
                p.p_type,
                p.offset,
                p.offset.saturating_add(p.filesz)
            )));
        }
        match p.p_type {
            elf::PT_LOAD => {
                if p.filesz > p.memsz {
                    return Err(bad(format_args!(
                        "corrupted: loadable segment {i} has {} bytes in the file but only {} \
                         in memory",
                        p.filesz, p.memsz
                    )));
                }
                if p.vaddr.checked_add(p.memsz).is_none() {
                    return Err(bad(format_args!(
                        "corrupted: loadable segment {i} wraps the address space"
                    )));
                }
                if p.align > 1
                    && (!p.align.is_power_of_two() || p.vaddr.wrapping_sub(p.offset) % p.align != 0)
                {
                    return Err(bad(format_args!(
                        "corrupted: loadable segment {i} has alignment {:#x} that its offset \
                         {:#x} and address {:#x} do not respect",
                        p.align, p.offset, p.vaddr
                    )));
                }
                any_load = true;
            }
            elf::PT_DYNAMIC => {
                if dynamic.is_some() {
                    return Err(owned("corrupted: more than one dynamic section"));
                }
                dynamic = Some(p);
            }
            _ => {}
        }
    }
    if !any_load {
        return Err(owned("corrupted: no loadable segment"));
    }
    let Some(dynamic) = dynamic else {
        return Err(owned(
            "no dynamic section: not a shared library the dynamic loader can open",
        ));
    };
    // Whether [addr, addr + size) lies in the memory of one loadable segment.
    let mapped = |addr: u64, size: u64| {
        phdrs().any(|p| {
            p.p_type == elf::PT_LOAD
                && addr >= p.vaddr
                && addr
                    .checked_add(size)
                    .zip(p.vaddr.checked_add(p.memsz))
                    .is_some_and(|(end, seg_end)| end <= seg_end)
        })
    };
    let dsz = std::mem::size_of::<DynEntry>() as u64;
    if dynamic.filesz < dsz || dynamic.filesz > MAX_DYNAMIC {
        return Err(bad(format_args!(
            "corrupted: the dynamic section has {} bytes",
            dynamic.filesz
        )));
    }
    if !mapped(dynamic.vaddr, dynamic.filesz) {
        return Err(bad(format_args!(
            "corrupted: the dynamic section (address {:#x}, {} bytes) is outside the loadable \
             segments",
            dynamic.vaddr, dynamic.filesz
        )));
    }
    let dyn_bytes = src.read(dynamic.offset, dynamic.filesz).map_err(io)?;
    let (entries, _) =
        object::pod::slice_from_bytes::<DynEntry>(&dyn_bytes, (dynamic.filesz / dsz) as usize)
            .map_err(|_| owned("corrupted: unreadable dynamic section"))?;
    check_dynamic(entries, e, &mapped)
}

/// A dynamic entry's tag.
fn tag_of(d: &DynEntry, e: NativeEndian) -> u64 {
    wide(d.d_tag(e))
}

/// Checks the dynamic entries: a terminating `DT_NULL`, and that the tables the loader reads
/// (string and symbol tables, hash tables, relocations, init and fini arrays) are in loaded
/// memory.
fn check_dynamic(
    entries: &[DynEntry],
    e: NativeEndian,
    mapped: &dyn Fn(u64, u64) -> bool,
) -> std::result::Result<(), String> {
    // (address tag, size tag or none, name)
    macro_rules! table {
        ($tag:ident) => {
            (elf::$tag, None, stringify!($tag))
        };
        ($tag:ident, $size:ident) => {
            (elf::$tag, Some(elf::$size), stringify!($tag))
        };
    }
    const TABLES: &[(u32, Option<u32>, &str)] = &[
        table!(DT_HASH),
        table!(DT_STRTAB, DT_STRSZ),
        table!(DT_SYMTAB),
        table!(DT_RELA, DT_RELASZ),
        table!(DT_INIT),
        table!(DT_FINI),
        table!(DT_REL, DT_RELSZ),
        table!(DT_JMPREL, DT_PLTRELSZ),
        table!(DT_INIT_ARRAY, DT_INIT_ARRAYSZ),
        table!(DT_FINI_ARRAY, DT_FINI_ARRAYSZ),
        table!(DT_GNU_HASH),
        table!(DT_VERSYM),
        table!(DT_VERDEF),
        table!(DT_VERNEED),
    ];
    let Some(end) = entries
        .iter()
        .position(|d| tag_of(d, e) == u64::from(elf::DT_NULL))
    else {
        return Err(owned(
            "corrupted: the dynamic section has no terminating entry",
        ));
    };
    let entries = &entries[..end];
    // The first value of a tag, as the loader reads it.
    let value = |tag: u32| {
        entries
            .iter()
            .find(|d| tag_of(d, e) == u64::from(tag))
            .map(|d| wide(d.d_val(e)))
    };
    for &(tag, size_tag, name) in TABLES {
        let Some(addr) = value(tag) else { continue };
        let size = size_tag.and_then(value).unwrap_or(0).max(1);
        if !mapped(addr, size) {
            return Err(bad(format_args!(
                "corrupted: the dynamic entry {name} points at {addr:#x} ({size} bytes), \
                 outside the loadable segments"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled x86-64 `mlp.so`, its machine set to this process's on other 64-bit targets
    /// (the check reads headers only; nothing is loaded); `None` (a skip) on 32-bit targets,
    /// where an ELF64 image is refused for its class first.
    fn mlp() -> Option<Vec<u8>> {
        let mut img = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/models/mlp.so"
        ))
        .unwrap();
        if !cfg!(target_pointer_width = "64") {
            crate::packed_func::test_skip::report(
                "the bundled mlp.so is ELF64, this target is 32-bit",
            );
            return None;
        }
        if let Some(m) = HOST_MACHINE {
            img[18..20].copy_from_slice(&m.to_le_bytes());
        }
        Some(img)
    }

    #[test]
    fn accepts_a_tvm_library() {
        let Some(img) = mlp() else { return };
        check_bytes("mlp.so", &img).unwrap();
    }

    /// The C library this process runs with (ELF32 on armv7), found in `/proc/self/maps`
    /// (qemu-user shows the target's).
    #[test]
    fn accepts_this_process_libc() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let path = maps
            .lines()
            .filter_map(|l| l.split_ascii_whitespace().nth(5))
            .find(|p| p.ends_with("/libc.so.6"))
            .expect("libc.so.6 is mapped");
        let (_file, meta) = check_file(path).unwrap_or_else(|e| panic!("{path}: {}", e.message));
        assert!(meta.len() > 0);
        let img = std::fs::read(path).unwrap();
        check_bytes(path, &img).unwrap();
        // A truncated copy is refused.
        let e = check_bytes(path, &img[..img.len() / 2]).unwrap_err();
        assert!(e.message.contains(path), "{}", e.message);
    }

    #[test]
    fn refuses_every_truncation() {
        let Some(img) = mlp() else { return };
        for cut in (0..img.len()).step_by(97).chain([img.len() - 1]) {
            let e = check_bytes("mlp.so", &img[..cut]).unwrap_err();
            assert!(e.message.contains("mlp.so"), "{cut}: {}", e.message);
        }
    }

    #[test]
    fn refuses_a_foreign_machine() {
        let Some(mut img) = mlp() else { return };
        img[18..20].copy_from_slice(&8u16.to_le_bytes());
        let e = check_bytes("x.so", &img).unwrap_err();
        assert!(e.message.contains("MIPS"), "{}", e.message);
    }
}

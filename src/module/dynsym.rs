//! Symbol lookups in the dynamic symbol tables of a loaded library and its dependencies, read
//! from the images the dynamic loader mapped.
//!
//! `dlsym(handle, name)` searches the library, then its dependencies, and glibc builds an
//! error message for every name it does not find. Loading a TVM library asks for a dozen
//! names, most of them absent (the markers of other ABIs, context slots the code may lack), and
//! the Relax VM asks the kernel library for every builtin before the global registry. A
//! [`Scope`] answers from the hash tables (GNU, else SysV) of the library and of its
//! dependencies, in the loader's breadth-first order, and leaves to `dlsym` whatever it cannot
//! answer exactly as `dlsym` would: versioned, indirect (IFUNC), thread-local, absolute and
//! unique symbols, filter libraries, and dependencies it cannot identify. Every read is checked
//! against the loaded segments of the object it reads.
//!
//! The loaded objects are of this process's ELF class: ELF64 on 64-bit targets, ELF32 on 32-bit
//! ones (armv7), whose dynamic entries, symbols and GNU hash bloom words are pointer-sized.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::num::NonZeroU32;

/// What a scope knows about a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Defined at this address.
    Found(*mut c_void),
    /// Defined nowhere in the scope (`dlsym` would fail).
    Absent,
    /// Not answerable from the tables: ask `dlsym`.
    AskDlsym,
}

/// `struct link_map`'s public head (`<link.h>`).
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
    l_ld: *const c_void,
    l_next: *const LinkMap,
    l_prev: *const LinkMap,
}

// Dynamic tags (`d_tag`, pointer-sized: `Elf64_Sxword` or `Elf32_Sword`).
const DT_NULL: usize = 0;
const DT_NEEDED: usize = 1;
const DT_SONAME: usize = 14;
const DT_HASH: usize = 4;
const DT_STRTAB: usize = 5;
const DT_SYMTAB: usize = 6;
const DT_STRSZ: usize = 10;
const DT_SYMENT: usize = 11;
const DT_GNU_HASH: usize = 0x6fff_fef5;
const DT_VERSYM: usize = 0x6fff_fff0;
const DT_AUXILIARY: usize = 0x7fff_fffd;
const DT_FILTER: usize = 0x7fff_ffff;
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PF_R: u32 = 4;
const SHN_UNDEF: u16 = 0;
const SHN_ABS: u16 = 0xfff1;
const STT_COMMON: u8 = 5;
const STT_TLS: u8 = 6;
const STT_GNU_IFUNC: u8 = 10;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
/// A symbol of this process's ELF class.
#[cfg(target_pointer_width = "64")]
type Sym = libc::Elf64_Sym;
#[cfg(target_pointer_width = "32")]
type Sym = libc::Elf32_Sym;
/// A program header of this process's ELF class (what the loader reports).
#[cfg(target_pointer_width = "64")]
type Phdr = libc::Elf64_Phdr;
#[cfg(target_pointer_width = "32")]
type Phdr = libc::Elf32_Phdr;
const SYM_SIZE: usize = std::mem::size_of::<Sym>();
/// A dynamic entry: tag and value, each pointer-sized.
const DYN_SIZE: usize = 2 * std::mem::size_of::<usize>();
/// A GNU hash bloom word (`Elf64_Addr` or `Elf32_Addr`).
const BLOOM_WORD: usize = std::mem::size_of::<usize>();

/// The loaded, readable address ranges and the dynamic section of one object.
struct Mapped {
    addr: usize,
    dynamic: usize,
    dynamic_len: usize,
    /// Highest unrelocated address of the loadable segments.
    span_end: usize,
    segs: Vec<(usize, usize)>,
}

/// What the loader reports about one object: its segments and dynamic section.
fn mapped_of(info: &libc::dl_phdr_info) -> Mapped {
    let phdrs: &[Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: the loader's program headers of this object, `dlpi_phnum` of them.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
    };
    let addr = info.dlpi_addr as usize;
    let mut m = Mapped {
        addr,
        dynamic: 0,
        dynamic_len: 0,
        span_end: 0,
        segs: Vec::with_capacity(phdrs.len()),
    };
    for p in phdrs {
        let (start, len) = (p.p_vaddr as usize, p.p_memsz as usize);
        match p.p_type {
            PT_LOAD => {
                m.span_end = m.span_end.max(start.saturating_add(len));
                if p.p_flags & PF_R != 0 {
                    let s = addr.wrapping_add(start);
                    m.segs.push((s, s.saturating_add(len)));
                }
            }
            PT_DYNAMIC => {
                m.dynamic = addr.wrapping_add(start);
                m.dynamic_len = len;
            }
            _ => {}
        }
    }
    m
}

/// Calls `f` on each loaded object in the loader's order, under the loader's lock (no object
/// can be unloaded meanwhile), until it returns true.
pub(super) fn each_object(f: &mut dyn FnMut(&libc::dl_phdr_info) -> bool) {
    type Visitor<'a> = &'a mut dyn FnMut(&libc::dl_phdr_info) -> bool;
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the visitor passed below, exclusively ours during the call, and
        // `info` describes a loaded object for the duration of the callback.
        let (f, info) = unsafe { (&mut *(data as *mut Visitor<'_>), &*info) };
        c_int::from(f(info))
    }
    let mut f: Visitor<'_> = f;
    // SAFETY: the callback only reads the loader's data and calls `f`, which does not unwind
    // (it only reads memory and pushes to vectors).
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut f as *mut Visitor<'_> as *mut c_void) };
}

/// The hash table of one object.
enum Hash {
    Gnu {
        nbuckets: NonZeroU32,
        symoffset: u32,
        bloom: usize,
        bloom_mask: usize,
        shift: u32,
        buckets: usize,
        chain: usize,
    },
    Sysv {
        nbucket: NonZeroU32,
        nchain: u32,
        buckets: usize,
        chain: usize,
    },
}

/// One loaded object's dynamic symbol table.
struct Table {
    base: usize,
    segs: Vec<(usize, usize)>,
    symtab: usize,
    strtab: usize,
    strsz: usize,
    versym: usize,
    hash: Hash,
    needed: Vec<usize>,
    soname: Option<usize>,
}

impl Table {
    /// The table of the object `m` describes, `None` when it has none this module can read.
    ///
    /// # Safety
    /// `m` must describe a loaded object (from the loader), which stays loaded while the table
    /// is used.
    unsafe fn new(m: &Mapped) -> Option<Table> {
        let (base, ld) = (m.addr, m.dynamic);
        if ld == 0 || m.dynamic_len < DYN_SIZE {
            return None;
        }
        // The loader may have relocated the address entries in place (glibc does on most
        // targets) or not; an address below the unrelocated span is an offset.
        if base != 0 && base < m.span_end {
            return None;
        }
        let fix = |v: usize| -> usize {
            if v < m.span_end {
                base.wrapping_add(v)
            } else {
                v
            }
        };
        let mut t = Table {
            base,
            segs: m.segs.clone(),
            symtab: 0,
            strtab: 0,
            strsz: 0,
            versym: 0,
            hash: Hash::Sysv {
                nbucket: NonZeroU32::MIN,
                nchain: 0,
                buckets: 0,
                chain: 0,
            },
            needed: Vec::new(),
            soname: None,
        };
        t.seg_end(ld, m.dynamic_len)?;
        if ld % std::mem::align_of::<usize>() != 0 {
            return None;
        }
        // SAFETY: the dynamic section lies (aligned) inside a readable loaded segment
        // (checked above), which stays mapped while the library is loaded.
        let entries = unsafe {
            std::slice::from_raw_parts(ld as *const [usize; 2], m.dynamic_len / DYN_SIZE)
        };
        let (mut gnu, mut sysv) = (0usize, 0usize);
        for &[tag, val] in entries {
            match tag {
                DT_NULL => break,
                DT_NEEDED => t.needed.push(val),
                DT_SONAME => t.soname = Some(val),
                DT_HASH => sysv = fix(val),
                DT_GNU_HASH => gnu = fix(val),
                DT_STRTAB => t.strtab = fix(val),
                DT_SYMTAB => t.symtab = fix(val),
                DT_STRSZ => t.strsz = val,
                DT_SYMENT if val != SYM_SIZE => return None,
                DT_VERSYM => t.versym = fix(val),
                DT_AUXILIARY | DT_FILTER => return None,
                _ => {}
            }
        }
        // The string table ends with a NUL, so every name inside it is terminated.
        if t.symtab == 0 || t.strtab == 0 || t.strsz == 0 || t.seg_end(t.strtab, t.strsz).is_none()
        {
            return None;
        }
        if t.read::<u8>(t.strtab + t.strsz - 1)? != 0 {
            return None;
        }
        if t.needed.iter().chain(&t.soname).any(|&o| o >= t.strsz) {
            return None;
        }
        t.hash = if gnu != 0 {
            let nbuckets: u32 = t.read(gnu)?;
            let symoffset: u32 = t.read(gnu + 4)?;
            let bloom_size: u32 = t.read(gnu + 8)?;
            let shift: u32 = t.read(gnu + 12)?;
            let nbuckets = NonZeroU32::new(nbuckets).filter(|_| bloom_size.is_power_of_two())?;
            let bloom = gnu + 16;
            let buckets = bloom + bloom_size as usize * BLOOM_WORD;
            let chain = buckets + nbuckets.get() as usize * 4;
            t.seg_end(bloom, chain - bloom)?;
            Hash::Gnu {
                nbuckets,
                symoffset,
                bloom,
                bloom_mask: bloom_size as usize - 1,
                shift,
                buckets,
                chain,
            }
        } else if sysv != 0 {
            let nbucket: u32 = t.read(sysv)?;
            let nchain: u32 = t.read(sysv + 4)?;
            let buckets = sysv + 8;
            let chain = buckets + nbucket as usize * 4;
            let nbucket = NonZeroU32::new(nbucket)?;
            t.seg_end(buckets, (nbucket.get() as usize + nchain as usize) * 4)?;
            Hash::Sysv {
                nbucket,
                nchain,
                buckets,
                chain,
            }
        } else {
            return None;
        };
        Some(t)
    }

    /// The end of the loaded segment holding `[addr, addr + len)`, if one does.
    fn seg_end(&self, addr: usize, len: usize) -> Option<usize> {
        let end = addr.checked_add(len)?;
        self.segs
            .iter()
            .find(|&&(s, e)| s <= addr && end <= e)
            .map(|s| s.1)
    }

    /// A value at `addr`, when it lies (aligned) inside a loaded segment.
    fn read<T: Copy>(&self, addr: usize) -> Option<T> {
        if addr % std::mem::align_of::<T>() != 0 {
            return None;
        }
        self.seg_end(addr, std::mem::size_of::<T>())?;
        // SAFETY: the address is aligned and inside a readable loaded segment of the object,
        // which stays mapped while the library holding this table is loaded.
        Some(unsafe { std::ptr::read(addr as *const T) })
    }

    /// The string at `off` in the string table (checked to be inside it when made).
    fn string(&self, off: usize) -> &CStr {
        // SAFETY: `off` is a DT_NEEDED or DT_SONAME offset, checked to lie inside the string
        // table, whose last byte is a NUL (checked when the table was made).
        unsafe { CStr::from_ptr((self.strtab + off) as *const c_char) }
    }

    /// Whether the string at `off` in the string table is `name`.
    fn name_is(&self, off: u32, name: &[u8]) -> bool {
        let off = off as usize;
        if off >= self.strsz || self.strsz - off <= name.len() {
            return false;
        }
        // SAFETY: `[strtab, strtab + strsz)` is inside a loaded segment (checked when the
        // table was made) and `off + name.len() < strsz`.
        let s =
            unsafe { std::slice::from_raw_parts((self.strtab + off) as *const u8, name.len() + 1) };
        &s[..name.len()] == name && s[name.len()] == 0
    }

    /// Symbol `idx` if it is `name`: `Some(answer)` when the search ends here.
    fn check(&self, idx: usize, name: &[u8]) -> Option<Lookup> {
        let Some(sym) = self.read::<Sym>(self.symtab.wrapping_add(idx * SYM_SIZE)) else {
            return Some(Lookup::AskDlsym);
        };
        if !self.name_is(sym.st_name, name) {
            return None;
        }
        let stt = sym.st_info & 0xf;
        let bind = sym.st_info >> 4;
        if sym.st_shndx == SHN_UNDEF
            || (sym.st_value == 0 && sym.st_shndx != SHN_ABS && stt != STT_TLS)
            || (stt > 2 && stt != STT_COMMON && stt != STT_TLS && stt != STT_GNU_IFUNC)
        {
            return None;
        }
        if self.versym != 0 {
            match self.read::<u16>(self.versym.wrapping_add(idx * 2)) {
                Some(v) if v & 0x7fff < 2 => {}
                _ => return Some(Lookup::AskDlsym),
            }
        }
        match bind {
            STB_GLOBAL | STB_WEAK => {}
            0 => return None,
            _ => return Some(Lookup::AskDlsym),
        }
        if stt == STT_TLS || stt == STT_GNU_IFUNC || sym.st_shndx == SHN_ABS {
            return Some(Lookup::AskDlsym);
        }
        Some(Lookup::Found(
            self.base.wrapping_add(sym.st_value as usize) as *mut c_void
        ))
    }

    /// Looks `name` up in this object only.
    fn lookup(&self, name: &[u8]) -> Lookup {
        match self.hash {
            Hash::Gnu {
                nbuckets,
                symoffset,
                bloom,
                bloom_mask,
                shift,
                buckets,
                chain,
            } => {
                let h = object::elf::gnu_hash(name);
                let bits = usize::BITS;
                let Some(word) =
                    self.read::<usize>(bloom + ((h / bits) as usize & bloom_mask) * BLOOM_WORD)
                else {
                    return Lookup::AskDlsym;
                };
                let mask = (1usize << (h % bits)) | (1usize << ((h >> shift) % bits));
                if word & mask != mask {
                    return Lookup::Absent;
                }
                let Some(first) = self.read::<u32>(buckets + (h % nbuckets) as usize * 4) else {
                    return Lookup::AskDlsym;
                };
                if first == 0 {
                    return Lookup::Absent;
                }
                if first < symoffset {
                    return Lookup::AskDlsym;
                }
                let mut idx = first as usize;
                loop {
                    let Some(ch) = self.read::<u32>(chain + (idx - symoffset as usize) * 4) else {
                        return Lookup::AskDlsym;
                    };
                    if (ch ^ h) >> 1 == 0 {
                        if let Some(answer) = self.check(idx, name) {
                            return answer;
                        }
                    }
                    if ch & 1 != 0 {
                        return Lookup::Absent;
                    }
                    idx += 1;
                }
            }
            Hash::Sysv {
                nbucket,
                nchain,
                buckets,
                chain,
            } => {
                let h = object::elf::hash(name);
                let Some(mut idx) = self.read::<u32>(buckets + (h % nbucket) as usize * 4) else {
                    return Lookup::AskDlsym;
                };
                let mut steps = 0u32;
                while idx != 0 {
                    if idx >= nchain || steps > nchain {
                        return Lookup::AskDlsym;
                    }
                    if let Some(answer) = self.check(idx as usize, name) {
                        return answer;
                    }
                    idx = match self.read::<u32>(chain + idx as usize * 4) {
                        Some(n) => n,
                        None => return Lookup::AskDlsym,
                    };
                    steps += 1;
                }
                Lookup::Absent
            }
        }
    }
}

/// The search scope of a library opened with `dlopen`: the library, then its dependencies
/// breadth first, as `dlsym` on its handle searches them.
pub(crate) struct Scope {
    tables: Vec<Table>,
}

// SAFETY: a scope only reads the read-only tables of loaded objects (addresses kept as
// integers); the library owning it keeps them loaded.
unsafe impl Send for Scope {}
// SAFETY: as above; lookups do not mutate.
unsafe impl Sync for Scope {}

fn link_map(handle: *mut c_void) -> Option<*const LinkMap> {
    let mut lm: *const LinkMap = std::ptr::null();
    // SAFETY: `handle` is a live dlopen handle; RTLD_DI_LINKMAP writes one pointer.
    let r = unsafe {
        libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            &mut lm as *mut *const LinkMap as *mut c_void,
        )
    };
    (r == 0 && !lm.is_null()).then_some(lm)
}

impl Scope {
    /// The scope of a library opened with `dlopen` (`handle`); `None` when some object of it
    /// cannot be read here (then `dlsym` answers everything).
    ///
    /// # Safety
    /// `handle` must be a live `dlopen` handle, and the scope must not outlive it.
    #[inline(never)]
    pub(crate) unsafe fn new(handle: *mut c_void) -> Option<Scope> {
        let own = link_map(handle)?;
        // SAFETY: the link map of a loaded object (from dlinfo), loaded while we hold `handle`.
        let (own_base, own_ld) = unsafe { ((*own).l_addr, (*own).l_ld as usize) };
        let is_own = |m: &Mapped| m.addr == own_base && m.dynamic == own_ld;
        let mut own_m = None;
        each_object(&mut |info| {
            if info.dlpi_addr as usize != own_base {
                return false;
            }
            let m = mapped_of(info);
            let found = is_own(&m);
            if found {
                own_m = Some(m);
            }
            found
        });
        // SAFETY: the library's own image, loaded while we hold `handle`.
        let own_table = unsafe { Table::new(&own_m?) }?;
        if own_table.needed.is_empty() {
            // No dependencies: the library is the whole scope.
            return Some(Scope {
                tables: vec![own_table],
            });
        }
        // Every loaded object with its file name and DT_SONAME, read under the loader's lock:
        // the loader binds a DT_NEEDED entry to the first loaded object of that name.
        struct Named {
            m: Mapped,
            name: CString,
            soname: Option<CString>,
        }
        let mut objects = Vec::with_capacity(16);
        each_object(&mut |info| {
            let m = mapped_of(info);
            let name = if info.dlpi_name.is_null() {
                CString::default()
            } else {
                // SAFETY: the loader's NUL-terminated name of a loaded object.
                unsafe { CStr::from_ptr(info.dlpi_name) }.to_owned()
            };
            // SAFETY: `m` describes a loaded object, which cannot be unloaded while the loader
            // runs this callback; the table is dropped before it returns.
            let soname =
                unsafe { Table::new(&m) }.and_then(|t| t.soname.map(|o| t.string(o).to_owned()));
            objects.push(Named { m, name, soname });
            false
        });
        let own_k = objects.iter().position(|o| is_own(&o.m))?;
        // Breadth first from the library, as the loader orders its search list.
        let mut order = vec![own_k];
        let mut tables = vec![own_table];
        let mut i = 0;
        while let Some(t) = tables.get(i) {
            let needed: Vec<CString> = t.needed.iter().map(|&o| t.string(o).to_owned()).collect();
            for name in needed {
                let (k, o) = objects
                    .iter()
                    .enumerate()
                    .find(|(_, o)| o.name == name || o.soname.as_ref() == Some(&name))?;
                if !order.contains(&k) {
                    order.push(k);
                    // SAFETY: a dependency of the library, which keeps it loaded.
                    tables.push(unsafe { Table::new(&o.m) }?);
                }
            }
            i += 1;
        }
        Some(Scope { tables })
    }

    /// What `dlsym(handle, name)` would answer: the first definition in the scope.
    pub(crate) fn lookup(&self, name: &str) -> Lookup {
        for t in &self.tables {
            match t.lookup(name.as_bytes()) {
                Lookup::Absent => continue,
                other => return other,
            }
        }
        Lookup::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &str) -> *mut c_void {
        let c = std::ffi::CString::new(path).unwrap();
        // SAFETY: a NUL-terminated path.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        assert!(!h.is_null());
        h
    }

    fn dlsym(h: *mut c_void, name: &str) -> *mut c_void {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: a live handle and a NUL-terminated name.
        unsafe { libc::dlsym(h, c.as_ptr()) }
    }

    /// Every answer the scope gives agrees with dlsym's, for names defined in the library,
    /// in its dependencies (libm, libc), and nowhere.
    #[test]
    fn agrees_with_dlsym() {
        if !cfg!(target_arch = "x86_64") {
            crate::packed_func::test_skip::report("the bundled mlp.so is x86-64");
            return;
        }
        let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/mlp.so");
        let h = open(lib);
        // SAFETY: `h` stays open until the end of the test.
        let scope = unsafe { Scope::new(h) }.expect("the scope of mlp.so is readable");
        assert!(
            scope.tables.len() >= 2,
            "libm and its dependencies are in the scope"
        );
        let names = [
            "__tvm_dev_mblob",
            "__tvm_module_ctx",
            "__TVMAPISetLastError",
            "__tvm_ffi__library_bin",
            "vm.builtin.alloc_storage",
            "tvmgen_default_fused_nn_softmax",
            "__truncsfhf2",
            "expf",
            "malloc",
            "strlen",
            "",
            "no_such_symbol_anywhere",
        ];
        let mut found = 0;
        for n in names {
            let want = dlsym(h, n);
            match scope.lookup(n) {
                Lookup::Found(p) => {
                    assert_eq!(p, want, "{n}");
                    found += 1;
                }
                Lookup::Absent => assert!(want.is_null(), "{n}: dlsym finds it"),
                Lookup::AskDlsym => {}
            }
        }
        assert!(found >= 4, "the library's own symbols are found");
        // Misses are answered here, without dlsym (the point of the tables).
        for n in [
            "vm.builtin.alloc_storage",
            "__tvm_ffi__library_bin",
            "no_such_symbol_anywhere",
        ] {
            assert_eq!(scope.lookup(n), Lookup::Absent, "{n}");
        }
        assert!(matches!(scope.lookup("__tvm_dev_mblob"), Lookup::Found(_)));
        assert_eq!(scope.tables[0].lookup(b"malloc"), Lookup::Absent);
        // SAFETY: opened above; the scope is not used after this.
        unsafe { libc::dlclose(h) };
    }

    /// The same on the target's libm, on every target (ELF32 tables on armv7): its own
    /// symbols, its dependency libc's, and names defined nowhere.
    #[test]
    fn agrees_with_dlsym_on_libm() {
        let h = open("libm.so.6");
        // SAFETY: `h` stays open until the end of the test.
        let scope = unsafe { Scope::new(h) }.expect("the scope of libm is readable");
        assert!(scope.tables.len() >= 2, "libc is in libm's scope");
        let mut found = 0;
        for n in [
            "expf",
            "sqrt",
            "malloc",
            "strlen",
            "__tvm_module_ctx",
            "",
            "no_such_symbol_anywhere",
        ] {
            let want = dlsym(h, n);
            match scope.lookup(n) {
                Lookup::Found(p) => {
                    assert_eq!(p, want, "{n}");
                    found += 1;
                }
                Lookup::Absent => assert!(want.is_null(), "{n}: dlsym finds it"),
                Lookup::AskDlsym => {}
            }
        }
        // glibc's symbols are versioned (left to dlsym); what the tables answer is misses.
        eprintln!("libm: {found} of the names answered from the tables");
        for n in ["__tvm_module_ctx", "no_such_symbol_anywhere"] {
            assert_eq!(scope.lookup(n), Lookup::Absent, "{n}");
        }
        assert_eq!(scope.tables[0].lookup(b"malloc"), Lookup::Absent);
        // SAFETY: opened above; the scope is not used after this.
        unsafe { libc::dlclose(h) };
    }
}

//! The CPU device: aligned host memory, memcpy copies, a thread-local workspace pool.

use super::{DeviceApi, DeviceAttr, Stream};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU};
use crate::packed_func::value::RetValue;
use crate::sync::Instant;
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

/// Copies `nbytes` of host memory between two byte offsets (memmove semantics), refusing
/// NULL pointers: the copy of every backend whose memory is host memory.
///
/// # Safety
/// `from + from_offset` and `to + to_offset` must address `nbytes` valid bytes.
pub unsafe fn host_copy(
    from: *const c_void,
    from_offset: u64,
    to: *mut c_void,
    to_offset: u64,
    nbytes: usize,
) -> Result<()> {
    if from.is_null() || to.is_null() {
        return Err(Error::value("copy with a NULL data pointer"));
    }
    // SAFETY: caller contract: both ranges are valid; they may overlap only if the caller
    // aliased them, so use memmove semantics.
    unsafe {
        std::ptr::copy(
            (from as *const u8).add(from_offset as usize),
            (to as *mut u8).add(to_offset as usize),
            nbytes,
        )
    };
    Ok(())
}

/// The CPU backend.
pub struct CpuDeviceApi;

/// The one CPU backend instance.
pub static CPU: CpuDeviceApi = CpuDeviceApi;

/// Allocates aligned host memory (`alignment` is raised to a power of two ≥ 16).
///
/// Implemented as `malloc` plus manual alignment, with the original pointer and the block's
/// size stored just below the aligned one: glibc's `posix_memalign` takes a slow path for
/// every call, which made small array allocations several times more expensive than
/// `malloc`. Large blocks are taken from `LargeCache` when one fits.
#[inline]
pub fn host_alloc(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    let align = alignment.max(16).next_power_of_two();
    let fail = || {
        Error::new(
            crate::packed_func::ErrorKind::TVMError,
            format!("cpu(0): cannot allocate {nbytes} bytes aligned to {align}"),
        )
    };
    let total = nbytes.max(1).checked_add(align + HEADER).ok_or_else(fail)?;
    if total >= LARGE {
        if let Some((raw, cap)) = LARGE_CACHE.take(total) {
            return Ok(place(raw, cap, align));
        }
    }
    // SAFETY: plain malloc; checked for NULL below.
    let raw = unsafe { libc::malloc(total) };
    if raw.is_null() {
        return Err(fail());
    }
    let p = place(raw, total, align);
    if nbytes >= HUGE_PAGE && !huge_pages_cold() {
        advise_huge_pages(p as usize, nbytes);
    }
    Ok(p)
}

/// Bytes below an aligned block: its size, then the pointer `malloc` returned.
const HEADER: usize = 2 * std::mem::size_of::<usize>();

/// Aligns a payload inside the `cap`-byte malloc block `raw` and writes the header.
fn place(raw: *mut c_void, cap: usize, align: usize) -> *mut c_void {
    let start = raw as usize + HEADER;
    let aligned = (start + align - 1) & !(align - 1);
    // SAFETY: `aligned - HEADER >= raw` and the caller sized the block for the payload, so
    // both header slots lie inside the block.
    unsafe {
        *((aligned - HEADER) as *mut usize) = cap;
        *((aligned - std::mem::size_of::<usize>()) as *mut *mut c_void) = raw;
    }
    aligned as *mut c_void
}

const HUGE_PAGE: usize = 2 << 20;

/// Asks for transparent huge pages over the 2 MiB-aligned part of a large block: weights and
/// activations of real models are tens of megabytes, and filling them 4 KiB page by page
/// spent most of a model's load time in page faults. Advice only; errors (no THP) are ignored.
fn advise_huge_pages(start: usize, len: usize) {
    let (lo, hi) = huge_span(start, len);
    if hi > lo {
        // SAFETY: [lo, hi) lies inside a block this process just allocated; MADV_HUGEPAGE
        // changes how future faults are served, never the contents.
        unsafe { libc::madvise(lo as *mut c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

/// The huge pages that `[start, start + len)` holds whole: `[lo, hi)`, empty when `hi <= lo`.
fn huge_span(start: usize, len: usize) -> (usize, usize) {
    (
        (start + HUGE_PAGE - 1) & !(HUGE_PAGE - 1),
        (start + len) & !(HUGE_PAGE - 1),
    )
}

/// Whether huge pages are slow to fault in here ([`HUGE_UNKNOWN`], [`HUGE_WARM`] or
/// [`HUGE_COLD`]): in virtual
/// machines whose host takes back free memory (virtio-balloon free page reporting), a huge
/// page comes from a large free block that the host has discarded and must provide again
/// page by page, while small pages come from memory in use a moment ago. In one such VM 44 MB
/// of weights took 50–110 ms to fault in as huge pages, 17 ms as small pages, and 2.5 ms as
/// huge pages just freed by the previous process. Known from the start where the kernel
/// reports free huge pages to a balloon device ([`reports_free_huge_pages`]); otherwise set
/// when [`prefault`] times a slow one. Once set, the process asks for small pages only.
static HUGE_PAGES: AtomicU8 = AtomicU8::new(HUGE_UNKNOWN);
/// [`HUGE_PAGES`]: not looked at yet.
const HUGE_UNKNOWN: u8 = 0;
/// [`HUGE_PAGES`]: huge pages are used.
const HUGE_WARM: u8 = 1;
/// [`HUGE_PAGES`]: small pages only.
const HUGE_COLD: u8 = 2;

/// Whether huge pages are slow to fault in here (see [`HUGE_PAGES`]).
fn huge_pages_cold() -> bool {
    match HUGE_PAGES.load(Ordering::Relaxed) {
        HUGE_WARM => false,
        HUGE_COLD => true,
        _ => {
            let cold = reports_free_huge_pages(std::path::Path::new("/sys"));
            let state = if cold { HUGE_COLD } else { HUGE_WARM };
            // A verdict set meanwhile (`prefault` timing a cold page) is kept.
            match HUGE_PAGES.compare_exchange(
                HUGE_UNKNOWN,
                state,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => cold,
                Err(now) => now == HUGE_COLD,
            }
        }
    }
}

/// Whether the kernel under the sysfs tree `sys` hands free huge pages back to the host: free
/// page reporting down to the huge page's order (`page_reporting_order`) and a virtio balloon
/// device that takes reports (feature bit 5, `VIRTIO_BALLOON_F_REPORTING`).
fn reports_free_huge_pages(sys: &std::path::Path) -> bool {
    use crate::packed_func::text::read_file_text;
    let order = read_file_text(&sys.join("module/page_reporting/parameters/page_reporting_order"))
        .and_then(|s| crate::packed_func::text::parse_dec(s.trim_ascii(), u32::MAX));
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let huge_order = (HUGE_PAGE / page).trailing_zeros();
    if order.is_none_or(|o| o > huge_order) {
        return false;
    }
    // The driver's directory entries, read with `opendir`/`readdir` (as `std::fs::read_dir`
    // reads them, without its code in the library for this one use).
    let dir = sys.join("bus/virtio/drivers/virtio_balloon");
    let mut c = dir.as_os_str().as_encoded_bytes().to_vec();
    c.push(0);
    let Ok(c) = std::ffi::CStr::from_bytes_with_nul(&c) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path.
    let stream = unsafe { libc::opendir(c.as_ptr()) };
    if stream.is_null() {
        return false;
    }
    let mut found = false;
    loop {
        // SAFETY: `stream` is open and read by this thread only.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: `readdir` returned an entry whose name is NUL-terminated and which stays
        // valid until the next `readdir` on `stream`; the name is used before that.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        // SAFETY: the bytes are a file name the OS gave.
        let name = unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(name) };
        if read_file_text(&dir.join(name).join("features"))
            .is_some_and(|f| f.as_bytes().get(5) == Some(&b'1'))
        {
            found = true;
            break;
        }
    }
    // SAFETY: `stream` is open and closed once.
    unsafe { libc::closedir(stream) };
    found
}

/// A huge page whose fault takes longer than this is cold (see [`HUGE_PAGES`]): 512 small
/// page faults take about this long in such a VM, a warm huge page a tenth of it.
#[cfg(not(target_os = "emscripten"))]
const COLD_HUGE_PAGE: Duration = Duration::from_millis(1);

/// Faults in a block of host memory from [`host_alloc`] that is about to be written in full
/// (weights read from a file) as huge pages, one system call each, each timed: once one is
/// cold (`HUGE_PAGES`), the rest of the block and later blocks get small pages, all in one
/// call. Where the kernel cannot populate (before Linux 5.14) the writes fault the pages in.
///
/// # Safety
/// `[start, start + len)` must lie inside one block this process allocated and may write.
#[cfg(target_os = "emscripten")]
pub unsafe fn prefault(_start: *mut c_void, _len: usize) {
    // WebAssembly's linear memory has no pages to fault in.
}

/// See the other target's [`prefault`].
///
/// # Safety
/// `[start, start + len)` must lie inside one block this process allocated and may write.
#[cfg(not(target_os = "emscripten"))]
pub unsafe fn prefault(start: *mut c_void, len: usize) {
    let (lo, hi) = huge_span(start as usize, len);
    let mut at = lo;
    while at < hi && !huge_pages_cold() {
        let t = Instant::now();
        // SAFETY: [at, at + HUGE_PAGE) lies inside the caller's block; populating changes no
        // contents.
        if unsafe { libc::madvise(at as *mut c_void, HUGE_PAGE, libc::MADV_POPULATE_WRITE) } != 0 {
            return;
        }
        if t.elapsed() > COLD_HUGE_PAGE {
            HUGE_PAGES.store(HUGE_COLD, Ordering::Relaxed);
        }
        at += HUGE_PAGE;
    }
    if at >= hi {
        return;
    }
    if at > lo {
        // SAFETY: as above, for the rest of the block: small pages from now on.
        unsafe { libc::madvise(at as *mut c_void, hi - at, libc::MADV_NOHUGEPAGE) };
    }
    // Small pages in one call when the block is fresh; a block used before (its first page
    // resident) is left alone, since populating pages already there costs about as much.
    let mut resident = 0u8;
    // SAFETY: `at` is page-aligned inside the caller's block; one page's status byte.
    let known = unsafe { libc::mincore(at as *mut c_void, 1, &mut resident) } == 0;
    if known && resident & 1 == 0 {
        // SAFETY: as above.
        unsafe { libc::madvise(at as *mut c_void, hi - at, libc::MADV_POPULATE_WRITE) };
    }
}

/// Blocks at least this large are kept for reuse when freed: glibc's initial mmap threshold,
/// so that every block glibc would map fresh (and return to the system at `free`) is kept.
/// With 1 MiB, the weights of 128 KiB–1 MiB (most of resnet18's convolutions) got fresh,
/// zeroed pages at every load of the same model: 1,505 page faults per load after the first
/// against 721 (the library's own pages) now and for the reference.
const LARGE: usize = 128 << 10;
/// Most bytes the cache holds.
const CACHE_BYTES: usize = 256 << 20;
/// How long a cached block waits for reuse before it goes back to the system.
const CACHE_AGE: Duration = Duration::from_secs(5);

/// Freed large blocks kept for the next allocation that fits them.
///
/// Loading and freeing the same model again and again (a server reloading a model, a test
/// loop) otherwise gets fresh pages from the kernel for every copy of the weights, and the
/// page faults and zeroing cost more than the copy itself; the reference runtime gets its
/// freed buffers back from glibc's heap. Bounded ([`CACHE_BYTES`]); blocks unused for
/// [`CACHE_AGE`] are released at the next free.
struct LargeCache {
    blocks: std::sync::Mutex<Vec<(usize, *mut c_void, Instant)>>,
}

// SAFETY: the cached pointers are owned by the cache (no other reference exists) and are
// only handed out under the mutex.
unsafe impl Sync for LargeCache {}

static LARGE_CACHE: LargeCache = LargeCache {
    blocks: std::sync::Mutex::new(Vec::new()),
};

impl LargeCache {
    /// A cached block of at least `total` bytes and at most a quarter more: (raw, cap).
    fn take(&self, total: usize) -> Option<(*mut c_void, usize)> {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let limit = total.saturating_add(total / 4);
        let mut best: Option<usize> = None;
        for (i, &(cap, _, _)) in blocks.iter().enumerate() {
            if cap >= total && cap <= limit && best.is_none_or(|b| blocks[b].0 > cap) {
                best = Some(i);
            }
        }
        best.map(|i| {
            let (cap, raw, _) = blocks.swap_remove(i);
            (raw, cap)
        })
    }

    /// Keeps a freed block, or returns it when it does not fit in the cache.
    fn put(&self, raw: *mut c_void, cap: usize) -> Option<*mut c_void> {
        let now = Instant::now();
        let mut release = Vec::new();
        let kept = {
            let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
            blocks.retain(|&(_, p, t)| {
                let keep = now.duration_since(t) < CACHE_AGE;
                if !keep {
                    release.push(p);
                }
                keep
            });
            let held: usize = blocks.iter().map(|b| b.0).sum();
            if held + cap <= CACHE_BYTES {
                blocks.push((cap, raw, now));
                true
            } else {
                false
            }
        };
        for p in release {
            // SAFETY: expired blocks came from malloc and left the cache above.
            unsafe { libc::free(p) };
        }
        (!kept).then_some(raw)
    }
}

/// Frees what [`host_alloc`] returned.
///
/// # Safety
/// `p` must come from `host_alloc` and not be freed twice.
#[inline(always)]
pub unsafe fn host_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: caller contract: the two words below `p` hold the block's size and original
    // pointer.
    let (cap, raw) = unsafe {
        (
            *((p as usize - HEADER) as *const usize),
            *((p as usize - std::mem::size_of::<usize>()) as *const *mut c_void),
        )
    };
    let raw = if cap >= LARGE {
        match LARGE_CACHE.put(raw, cap) {
            Some(raw) => raw,
            None => return,
        }
    } else {
        raw
    };
    // SAFETY: `raw` came from malloc and is not cached.
    unsafe { libc::free(raw) }
}

const PAGE: usize = 4096;

/// One thread's cache of workspace blocks: free blocks by size, and the sizes of live ones.
struct WorkspacePool {
    free: Vec<(usize, *mut c_void)>,
    live: Vec<(*mut c_void, usize)>,
}

impl Drop for WorkspacePool {
    fn drop(&mut self) {
        for &(_, p) in &self.free {
            // SAFETY: pooled blocks came from host_alloc and are owned by the pool.
            unsafe { host_free(p) };
        }
    }
}

thread_local! {
    static POOL: RefCell<WorkspacePool> = const {
        RefCell::new(WorkspacePool { free: Vec::new(), live: Vec::new() })
    };
}

/// Most blocks a thread keeps for reuse.
const POOL_KEEP: usize = 16;

/// Takes a workspace block from this thread's pool (best fit among cached blocks).
pub fn workspace_alloc(nbytes: usize) -> Result<*mut c_void> {
    let size = nbytes
        .max(1)
        .checked_next_multiple_of(PAGE)
        .ok_or_else(|| {
            Error::value_fmt(format_args!(
                "a workspace of {nbytes} bytes is more than can be allocated"
            ))
        })?;
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        // Workspaces are taken and returned in stack order, so the block freed last usually
        // fits exactly; otherwise take the smallest one large enough.
        if let Some(&(s, p)) = pool.free.last() {
            if s == size {
                pool.free.pop();
                pool.live.push((p, s));
                return Ok(p);
            }
        }
        let mut best: Option<usize> = None;
        for (i, &(s, _)) in pool.free.iter().enumerate() {
            if s >= size && best.is_none_or(|b| pool.free[b].0 > s) {
                best = Some(i);
            }
        }
        let (s, p) = match best {
            Some(i) => pool.free.swap_remove(i),
            None => (
                size,
                host_alloc(size, crate::packed_func::tensor::ALLOC_ALIGNMENT)?,
            ),
        };
        pool.live.push((p, s));
        Ok(p)
    })
}

/// Returns a workspace block to this thread's pool. Only pointers found among this thread's
/// live blocks are touched, so any other pointer is an error rather than a bad free.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn workspace_free(p: *mut c_void) -> Result<()> {
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        // Workspaces are freed in reverse order of allocation: search from the back.
        let pos = pool
            .live
            .iter()
            .rposition(|&(q, _)| q == p)
            .ok_or_else(|| {
                Error::value_fmt(format_args!(
                    "TVMBackendFreeWorkspace: {p:p} is not a live workspace of this thread \
                 (double free, or freed on another thread)"
                ))
            })?;
        let (_, s) = pool.live.swap_remove(pos);
        if pool.free.len() < POOL_KEEP {
            pool.free.push((s, p));
        } else {
            // SAFETY: the block came from host_alloc and is no longer live.
            unsafe { host_free(p) };
        }
        Ok(())
    })
}

#[cfg(target_os = "emscripten")]
fn total_memory() -> i64 {
    // The most a 32-bit WebAssembly memory can grow to.
    4 << 30
}

#[cfg(not(target_os = "emscripten"))]
fn total_memory() -> i64 {
    // SAFETY: sysinfo fills the zeroed struct.
    unsafe {
        let mut info: libc::sysinfo = std::mem::zeroed();
        if libc::sysinfo(&mut info) == 0 {
            info.totalram as i64 * info.mem_unit as i64
        } else {
            -1
        }
    }
}

impl DeviceApi for CpuDeviceApi {
    fn set_device(&self, _dev: DLDevice) -> Result<()> {
        Ok(())
    }

    fn get_attr(&self, _dev: DLDevice, kind: DeviceAttr) -> Result<RetValue> {
        Ok(match kind {
            DeviceAttr::Exist => RetValue::Int(1),
            DeviceAttr::TotalGlobalMemory => RetValue::Int(total_memory()),
            _ => RetValue::Null,
        })
    }

    #[inline]
    fn alloc_data_space(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        host_alloc(nbytes, alignment)
    }

    #[inline]
    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: the C contract: ptr came from alloc_data_space.
        unsafe { host_free(ptr) };
        Ok(())
    }

    unsafe fn copy_data(
        &self,
        from: *const c_void,
        from_offset: u64,
        to: *mut c_void,
        to_offset: u64,
        nbytes: usize,
        dev_from: DLDevice,
        dev_to: DLDevice,
        _type_hint: DLDataType,
        _stream: Stream,
    ) -> Result<()> {
        if dev_from.device_type != DL_CPU || dev_to.device_type != DL_CPU {
            return Err(Error::value_fmt(format_args!(
                "the CPU backend cannot copy from {} to {}",
                super::describe(dev_from),
                super::describe(dev_to)
            )));
        }
        // SAFETY: forwarded caller contract.
        unsafe { host_copy(from, from_offset, to, to_offset, nbytes) }
    }

    unsafe fn stream_sync(&self, _dev: DLDevice, _stream: Stream) -> Result<()> {
        Ok(())
    }

    fn alloc_workspace(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        workspace_alloc(nbytes)
    }

    unsafe fn free_workspace(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        workspace_free(ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_page_reporting_to_a_balloon_is_recognised() {
        let root = std::env::temp_dir().join(format!("tvmrt_sysfs_{}", std::process::id()));
        let order = root.join("module/page_reporting/parameters");
        let balloon = root.join("bus/virtio/drivers/virtio_balloon/virtio0");
        std::fs::create_dir_all(&order).unwrap();
        std::fs::create_dir_all(&balloon).unwrap();
        let set = |o: &str, features: &str| {
            std::fs::write(order.join("page_reporting_order"), o).unwrap();
            std::fs::write(balloon.join("features"), features).unwrap();
        };
        set("9\n", "0110010100000000\n");
        assert!(reports_free_huge_pages(&root));
        // Only blocks larger than a huge page are reported.
        set("11\n", "0110010100000000\n");
        assert!(!reports_free_huge_pages(&root));
        // A balloon without the reporting feature.
        set("9\n", "0110000100000000\n");
        assert!(!reports_free_huge_pages(&root));
        // No balloon at all, or no page reporting.
        std::fs::remove_dir_all(root.join("bus")).unwrap();
        assert!(!reports_free_huge_pages(&root));
        std::fs::remove_dir_all(&root).unwrap();
        assert!(!reports_free_huge_pages(&root));
    }

    #[test]
    fn prefault_makes_a_fresh_block_resident() {
        let n = 7 << 20;
        // SAFETY: a private anonymous mapping, checked below; unmapped at the end.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let page = 4096;
        let mut status = vec![0u8; n / page];
        // SAFETY: the mapping's pages, one status byte each.
        let resident = |status: &mut Vec<u8>| unsafe {
            assert_eq!(libc::mincore(p, n, status.as_mut_ptr()), 0);
            status.iter().filter(|&&b| b & 1 == 1).count()
        };
        assert_eq!(resident(&mut status), 0, "a fresh mapping has no pages yet");
        // SAFETY: the mapping is this test's, writable.
        unsafe { prefault(p, n) };
        // SAFETY: the mapping's first page, to learn whether the kernel populates at all.
        if unsafe { libc::madvise(p, page, libc::MADV_POPULATE_WRITE) } != 0 {
            crate::packed_func::test_skip::report(
                "this kernel cannot populate (MADV_POPULATE_WRITE)",
            );
        } else if resident(&mut status) == 0 {
            // qemu-user answers madvise without passing the advice on.
            crate::packed_func::test_skip::report(
                "MADV_POPULATE_WRITE succeeded without populating (an emulator)",
            );
        } else {
            // Every page of the 2 MiB-aligned span inside the mapping.
            let lo = (p as usize).next_multiple_of(HUGE_PAGE) - p as usize;
            let hi = ((p as usize + n) & !(HUGE_PAGE - 1)) - p as usize;
            resident(&mut status);
            assert!(status[lo / page..hi / page].iter().all(|&b| b & 1 == 1));
        }
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, n) };
    }

    #[test]
    fn prefault_keeps_what_the_block_holds() {
        // Not 2 MiB-aligned and not a multiple of it: a head and a tail outside the huge
        // pages, both left to ordinary faults.
        let n = (7 << 20) + 12_345;
        let p = host_alloc(n, 64).unwrap() as *mut u8;
        // SAFETY: `n` bytes just allocated.
        let block = unsafe { std::slice::from_raw_parts_mut(p, n) };
        for (i, b) in block.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // SAFETY: the block just allocated.
        unsafe { prefault(p as *mut c_void, n) };
        assert!(block.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        // SAFETY: from host_alloc, freed once.
        unsafe { host_free(p as *mut c_void) };
    }

    #[test]
    fn workspace_reuse_and_errors() {
        let a = workspace_alloc(100).unwrap();
        assert_eq!(a as usize % 64, 0);
        workspace_free(a).unwrap();
        let b = workspace_alloc(200).unwrap();
        assert_eq!(a, b, "a freed block is reused");
        assert!(workspace_free(a).is_ok());
        assert!(workspace_free(a).is_err(), "double free is detected");
    }

    #[test]
    fn large_blocks_are_reused_aligned_and_bounded() {
        // An unusual size, so that no other test's block fits it.
        let n = (3 << 20) + 12_345;
        let a = host_alloc(n, 256).unwrap();
        assert_eq!(a as usize % 256, 0);
        // SAFETY: `a` holds n bytes.
        unsafe { std::ptr::write_bytes(a as *mut u8, 7, n) };
        // SAFETY: from host_alloc, freed once.
        unsafe { host_free(a) };
        let b = host_alloc(n - 100, 128).unwrap();
        assert_eq!(b as usize % 128, 0);
        // SAFETY: the header words below any host_alloc block.
        let (raw_a, raw_b) = unsafe {
            (
                *((a as usize - 8) as *const usize),
                *((b as usize - 8) as *const usize),
            )
        };
        assert_eq!(raw_a, raw_b, "the freed block is reused");
        // SAFETY: `b` holds n - 100 bytes; the block is the cached one, now re-aligned.
        unsafe { std::ptr::write_bytes(b as *mut u8, 1, n - 100) };
        let c = host_alloc(n, 64).unwrap();
        assert_ne!(b, c);
        // SAFETY: both from host_alloc, freed once each.
        unsafe {
            host_free(b);
            host_free(c);
        }
        // A mid-sized block (a convolution's weights) is kept too.
        let m = (200 << 10) + 4_321;
        let a = host_alloc(m, 64).unwrap();
        // SAFETY: from host_alloc, freed once.
        unsafe { host_free(a) };
        let b = host_alloc(m, 64).unwrap();
        assert_eq!(a, b, "the freed mid-sized block is reused");
        // SAFETY: from host_alloc, freed once.
        unsafe { host_free(b) };
        // A block far larger than the request is not handed out for it.
        let big = host_alloc(64 << 20, 64).unwrap();
        // SAFETY: from host_alloc.
        unsafe { host_free(big) };
        let small = host_alloc(2 << 20, 64).unwrap();
        assert_ne!(small, big);
        // More than the cache holds is freed, not kept.
        let huge = host_alloc(CACHE_BYTES + 1, 64).unwrap();
        // SAFETY: from host_alloc.
        unsafe { host_free(huge) };
        assert!(LARGE_CACHE.take(CACHE_BYTES + 1 + 64 + HEADER).is_none());
        // SAFETY: from host_alloc.
        unsafe { host_free(small) };
    }
}

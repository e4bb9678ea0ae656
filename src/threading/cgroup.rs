//! `std::thread::available_parallelism` on Linux, rewritten over bytes: std's version brings
//! `PathBuf`, buffered line reading and `fs::exists` into the library (about 20 KB) for its
//! cgroup quota. The same files are read in the same order and every rule of std's version
//! (`sys/thread/unix.rs` of Rust 1.95) is kept, down to which malformed input ends a search.
//! Paths are kept as bytes plus the components `std::path::Path` would see; a path is opened
//! in its normalised form, which names the same file as std's spelling of it wherever std
//! would have found one (both keep `..`; std's spelling only differs by `.` and repeated or
//! trailing `/` after directories).

use crate::packed_func::text::read_file_text;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The logical CPUs this process may use: the affinity mask's count `affinity` (`None` when
/// `sched_getaffinity` failed) capped by the cgroup quota, else the online CPUs; 1 where std
/// gives an error.
pub(super) fn available_parallelism(affinity: Option<usize>) -> usize {
    let quota = quota().max(1);
    if let Some(n) = affinity.map(|n| n.min(quota)).filter(|&n| n > 0) {
        return n;
    }
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } {
        -1 | 0 => 1,
        n => (n as usize).min(quota),
    }
}

/// A path's components as `Path::components` gives them on Unix: whether it has a root, and
/// the others (`.` only as the first of a relative path).
struct Parts<'a>(bool, Vec<&'a [u8]>);

fn parts(p: &[u8]) -> Parts<'_> {
    let root = p.first() == Some(&b'/');
    let mut v = Vec::new();
    for (i, c) in p.split(|&b| b == b'/').enumerate() {
        if !c.is_empty() && (c != b"." || (i == 0 && !root)) {
            v.push(c);
        }
    }
    Parts(root, v)
}

impl Parts<'_> {
    /// `Path::starts_with`.
    fn starts_with(&self, prefix: &Parts<'_>) -> bool {
        (self.0 == prefix.0 || (!prefix.0 && prefix.1.is_empty())) && self.1.starts_with(&prefix.1)
    }

    /// The path, normalised (`/` for the root alone).
    fn join(&self) -> Vec<u8> {
        let mut s = Vec::new();
        if self.0 {
            s.push(b'/');
        }
        for (i, c) in self.1.iter().enumerate() {
            if i > 0 {
                s.push(b'/');
            }
            s.extend_from_slice(c);
        }
        s
    }

    /// The path with `name` appended, to open.
    fn file(&self, name: &str) -> Vec<u8> {
        push(&self.join(), name.as_bytes())
    }
}

/// `PathBuf::push` on Unix.
fn push(base: &[u8], p: &[u8]) -> Vec<u8> {
    if p.first() == Some(&b'/') {
        return p.to_vec();
    }
    let mut v = base.to_vec();
    if v.last().is_some_and(|&c| c != b'/') {
        v.push(b'/');
    }
    v.extend_from_slice(p);
    v
}

fn path(p: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(p))
}

/// `fs::exists(p)` is `Ok(true)`.
fn exists(p: &[u8]) -> bool {
    let Ok(c) = std::ffi::CString::new(p) else {
        return false;
    };
    // SAFETY: a zeroed stat is a valid buffer for stat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer of the right type.
    unsafe { libc::stat(c.as_ptr(), &mut st) == 0 }
}

/// The cgroup CPU quota in whole CPUs, `usize::MAX` when there is none or it cannot be read.
fn quota() -> usize {
    let Ok(buf) = std::fs::read("/proc/self/cgroup") else {
        return usize::MAX;
    };
    // This process's place in the hierarchy: the last v1 line with the `cpu` controller, or
    // else the last v2 line; a matching line without a path empties it again (std's
    // fold).
    let mut found: Option<(&[u8], bool)> = None;
    for line in buf.split(|&c| c == b'\n') {
        let mut fields = line.splitn(3, |&c| c == b':');
        let v1 = match fields.nth(1) {
            Some(b"") => false,
            Some(c) if std::str::from_utf8(c).is_ok_and(|c| c.split(',').any(|c| c == "cpu")) => {
                true
            }
            _ => continue,
        };
        if found.is_some() && !v1 {
            continue;
        }
        found = fields.last().map(|p| (&p[1..], v1));
    }
    match found {
        Some((group, true)) => quota_v1(group),
        Some((group, false)) => quota_v2(group),
        None => usize::MAX,
    }
}

/// The smallest `limit / period` of `cpu.max` from the group up to `/sys/fs/cgroup`.
fn quota_v2(group: &[u8]) -> usize {
    const MOUNT: &[u8] = b"/sys/fs/cgroup";
    let raw = push(MOUNT, group);
    if !exists(&push(&raw, b"cgroup.controllers")) {
        return usize::MAX;
    }
    let mount = parts(MOUNT);
    let mut p = parts(&raw);
    let mut quota = usize::MAX;
    while p.starts_with(&mount) {
        if let Some(text) = read_file_text(path(&p.file("cpu.max"))) {
            let Some(line) = text.lines().next() else {
                break;
            };
            let mut f = line.split(' ');
            let (Some(limit), Some(period)) = (f.next(), f.next()) else {
                break;
            };
            if let (Ok(limit), Ok(period)) = (limit.parse::<usize>(), period.parse::<usize>()) {
                if let Some(q) = limit.checked_div(period) {
                    quota = quota.min(q);
                }
            }
        }
        p.1.pop();
    }
    quota
}

/// The smallest `cfs_quota_us / cfs_period_us` from the group up to the first of the usual
/// `cpu` mounts (or the one `/proc/self/mountinfo` names) that holds the group.
fn quota_v1(group: &[u8]) -> usize {
    for mount in [&b"/sys/fs/cgroup/cpu"[..], b"/sys/fs/cgroup/cpu,cpuacct"] {
        if let Some(q) = quota_v1_at(mount, group) {
            return q;
        }
    }
    find_mountpoint(group)
        .and_then(|(mount, group)| quota_v1_at(&mount, &group))
        .unwrap_or(usize::MAX)
}

/// [`quota_v1`] under one mount; `None` when the group is not there.
fn quota_v1_at(mount: &[u8], group: &[u8]) -> Option<usize> {
    let raw = push(mount, group);
    if !exists(&raw) {
        return None;
    }
    let mount = parts(mount);
    let mut p = parts(&raw);
    let mut quota = usize::MAX;
    while p.starts_with(&mount) {
        let read = |name| {
            read_file_text(path(&p.file(name)))?
                .trim_ascii()
                .parse::<usize>()
                .ok()
        };
        if let (Some(limit), Some(period)) = (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us")) {
            if let Some(q) = limit.checked_div(period) {
                quota = quota.min(q);
            }
        }
        p.1.pop();
    }
    Some(quota)
}

/// The mount point of a v1 cgroup file system with the `cpu` controller whose root holds
/// `group`, and `group` relative to it.
fn find_mountpoint(group: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let data = std::fs::read("/proc/self/mountinfo").ok()?;
    let g = parts(group);
    for line in data.split_inclusive(|&b| b == b'\n') {
        let line = std::str::from_utf8(line).ok()?.trim_ascii();
        let mut items = line.split(' ');
        let sub = items.nth(3)?;
        let mount_point = items.next()?;
        let opts = items.next_back()?;
        let fs_type = items.nth_back(1)?;
        if fs_type != "cgroup" || !opts.split(',').any(|o| o == "cpu") {
            continue;
        }
        let sub = parts(sub.as_bytes());
        if !sub.0 {
            return None;
        }
        let sub = Parts(false, sub.1);
        if !g.starts_with(&sub) {
            continue;
        }
        // `strip_prefix`'s rest as a path: rooted only when nothing was stripped.
        let rest = Parts(g.0 && sub.1.is_empty(), g.1[sub.1.len()..].to_vec());
        return Some((mount_point.as_bytes().to_vec(), rest.join()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Component, PathBuf};

    const PATHS: &[&str] = &[
        "",
        "/",
        "//",
        ".",
        "./",
        "./a",
        "a",
        "a/",
        "a/./b",
        "a//b/",
        "/a/./b/.",
        "/a/../b",
        "..",
        "../a",
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/",
        "sys/fs/cgroup",
        "/sys//fs/./cgroup/x",
        "/sys/fs/cgroupx",
        "/sys/fs",
        "./sys/fs/cgroup",
    ];

    fn std_parts(p: &str) -> Vec<Vec<u8>> {
        Path::new(p)
            .components()
            .filter(|c| *c != Component::RootDir)
            .map(|c| c.as_os_str().as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn paths_follow_std() {
        for &a in PATHS {
            let pa = parts(a.as_bytes());
            assert_eq!(pa.0, Path::new(a).has_root(), "{a}");
            assert_eq!(pa.1, std_parts(a), "{a}");
            assert_eq!(
                path(&pa.join()).components().collect::<Vec<_>>(),
                Path::new(a).components().collect::<Vec<_>>(),
                "{a}"
            );
            for &b in PATHS {
                let pb = parts(b.as_bytes());
                assert_eq!(pa.starts_with(&pb), Path::new(a).starts_with(b), "{a} {b}");
                let mut p = PathBuf::from(a);
                p.push(b);
                assert_eq!(
                    push(a.as_bytes(), b.as_bytes()),
                    p.as_os_str().as_bytes(),
                    "{a} {b}"
                );
            }
        }
    }

    #[test]
    fn matches_std_here() {
        // SAFETY: as in `physical_cores`.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as in `physical_cores`.
        let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } == 0;
        // SAFETY: a filled set.
        let count = unsafe { libc::CPU_COUNT(&set) } as usize;
        let std = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(available_parallelism(ok.then_some(count)), std);
        assert_eq!(
            available_parallelism(None).min(std),
            std.min(available_parallelism(None))
        );
    }
}

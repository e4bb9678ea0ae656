//! Unpacking of archives a client uploaded (`.tar` libraries): only regular files and
//! directories under relative names are written. Symbolic and hard links, device nodes, FIFOs,
//! sparse files, absolute names and `..` are refused with an error naming the member, so an
//! archive cannot write or read outside its directory (GNU tar follows a symlink member of an
//! earlier archive, and hard links read any file of the server).

use crate::packed_func::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

fn err(archive: &Path, msg: impl std::fmt::Display) -> Error {
    let name = archive.file_name().map_or_else(
        || archive.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Error::value_fmt(format_args!("RPC server: archive {name}: {msg}"))
}

/// Empties `dest` (whatever is there, links included, is removed, never followed) and creates
/// it as a fresh directory.
fn fresh_dir(archive: &Path, dest: &Path) -> Result<()> {
    if let Ok(m) = std::fs::symlink_metadata(dest) {
        let r = if m.is_dir() {
            std::fs::remove_dir_all(dest)
        } else {
            std::fs::remove_file(dest)
        };
        r.map_err(|e| err(archive, format!("cannot clear {}: {e}", dest.display())))?;
    }
    std::fs::create_dir(dest)
        .map_err(|e| err(archive, format!("cannot create {}: {e}", dest.display())))
}

/// The member's name as a relative path of plain components, or why not.
fn member_path(raw: &Path) -> std::result::Result<PathBuf, &'static str> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err("its name contains '..'"),
            Component::RootDir | Component::Prefix(_) => return Err("its name is absolute"),
        }
    }
    if out.as_os_str().is_empty() {
        return Err("its name is empty");
    }
    Ok(out)
}

/// Creates the directories of `rel` under `dest`, refusing to pass through anything that is not
/// a real directory (a link left by an earlier member cannot exist, but this does not rely on
/// it).
fn make_dirs(dest: &Path, rel: &Path) -> std::io::Result<()> {
    let mut cur = dest.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", cur.display()),
                ))
            }
            Err(_) => std::fs::create_dir(&cur)?,
        }
    }
    Ok(())
}

/// Unpacks the tar archive `archive` into the directory `dest` (created fresh; what was there is
/// removed). Returns the regular files written, in archive order.
pub fn unpack(archive: &Path, dest: &Path) -> Result<Vec<PathBuf>> {
    let file = File::open(archive).map_err(|e| err(archive, format!("cannot open: {e}")))?;
    fresh_dir(archive, dest)?;
    let mut ar = tar::Archive::new(file);
    let entries = ar
        .entries()
        .map_err(|e| err(archive, format!("not a tar archive: {e}")))?;
    let mut written = Vec::new();
    // Bounded: each round reads one member of a finite file.
    for entry in entries {
        let mut entry = entry.map_err(|e| err(archive, format!("corrupted: {e}")))?;
        let raw = entry
            .path()
            .map_err(|e| err(archive, format!("bad member name: {e}")))?
            .into_owned();
        let shown = raw.display().to_string();
        let refuse = |why: &str| {
            err(
                archive,
                format!(
                    "member '{shown}' refused: {why} (archives may hold only regular files and \
                     directories under relative names)"
                ),
            )
        };
        let kind = entry.header().entry_type();
        let what = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Directory => {
                None
            }
            tar::EntryType::XGlobalHeader => continue,
            tar::EntryType::Symlink => Some("it is a symbolic link"),
            tar::EntryType::Link => Some("it is a hard link"),
            tar::EntryType::Char => Some("it is a character device"),
            tar::EntryType::Block => Some("it is a block device"),
            tar::EntryType::Fifo => Some("it is a FIFO"),
            tar::EntryType::GNUSparse => Some("it is a sparse file"),
            _ => Some("its entry type is not supported"),
        };
        if let Some(why) = what {
            return Err(refuse(why));
        }
        let rel = member_path(&raw).map_err(refuse)?;
        let target = dest.join(&rel);
        if kind == tar::EntryType::Directory {
            make_dirs(dest, &rel).map_err(|e| refuse(&e.to_string()))?;
            continue;
        }
        if let Some(parent) = rel.parent() {
            make_dirs(dest, parent).map_err(|e| refuse(&e.to_string()))?;
        }
        // A later member of the same name replaces an earlier file (as tar does); a directory
        // is not replaced.
        if let Ok(m) = std::fs::symlink_metadata(&target) {
            if m.is_dir() {
                return Err(refuse("a directory of that name exists"));
            }
            std::fs::remove_file(&target).map_err(|e| refuse(&e.to_string()))?;
        }
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&target)
            .map_err(|e| refuse(&format!("cannot create it: {e}")))?;
        std::io::copy(&mut entry, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| refuse(&format!("cannot write it: {e}")))?;
        written.push(target);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tvmrt-archive-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A one-member archive whose header is written by hand (the `tar` crate's builder refuses
    /// the hostile names these tests need).
    fn member(name: &[u8], kind: u8, link: &[u8], data: &[u8]) -> Vec<u8> {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_entry_type(tar::EntryType::new(kind));
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        let mut out = h.as_bytes().to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    fn archive(members: &[Vec<u8>]) -> Vec<u8> {
        let mut out: Vec<u8> = members.concat();
        out.extend_from_slice(&[0u8; 1024]);
        out
    }

    fn unpack_bytes(dir: &Path, bytes: &[u8]) -> Result<Vec<PathBuf>> {
        let a = dir.join("lib.tar");
        std::fs::write(&a, bytes).unwrap();
        unpack(&a, &dir.join("lib.objs"))
    }

    #[test]
    fn regular_files_and_directories_unpack() {
        let d = tmp("ok");
        let bytes = archive(&[
            member(b"a.o", b'0', b"", b"AAAA"),
            member(b"sub/", b'5', b"", b""),
            member(b"./sub/b.o", b'0', b"", b"BB"),
        ]);
        let files = unpack_bytes(&d, &bytes).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(std::fs::read(d.join("lib.objs/a.o")).unwrap(), b"AAAA");
        assert_eq!(std::fs::read(d.join("lib.objs/sub/b.o")).unwrap(), b"BB");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn hostile_members_are_refused_by_name() {
        let d = tmp("hostile");
        for (name, kind, link, why) in [
            (&b"evil"[..], b'2', &b"/tmp"[..], "symbolic link"),
            (b"pw", b'1', b"/etc/passwd", "hard link"),
            (b"tty", b'3', b"", "character device"),
            (b"disk", b'4', b"", "block device"),
            (b"pipe", b'6', b"", "FIFO"),
            (b"/tmp/tvmrt-abs.o", b'0', b"", "absolute"),
            (b"../up.o", b'0', b"", "'..'"),
            (b"a/../../up.o", b'0', b"", "'..'"),
        ] {
            let bytes = archive(&[
                member(b"ok.o", b'0', b"", b"x"),
                member(name, kind, link, b""),
            ]);
            let e = unpack_bytes(&d, &bytes).unwrap_err();
            let shown = String::from_utf8_lossy(name);
            assert!(e.message.contains(why), "{shown}: {e}");
            assert!(e.message.contains(&format!("'{shown}'")), "{e}");
            let objs = d.join("lib.objs");
            for entry in std::fs::read_dir(&objs).unwrap() {
                let m = std::fs::symlink_metadata(entry.unwrap().path()).unwrap();
                assert!(m.is_file() || m.is_dir(), "{shown}: left {m:?}");
            }
        }
        assert!(!d.join("up.o").exists());
        assert!(!Path::new("/tmp/tvmrt-abs.o").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_link_at_the_destination_is_replaced_not_followed() {
        let d = tmp("dest-link");
        let outside = tmp("dest-link-outside");
        std::os::unix::fs::symlink(&outside, d.join("lib.objs")).unwrap();
        let bytes = archive(&[member(b"a.o", b'0', b"", b"A")]);
        unpack_bytes(&d, &bytes).unwrap();
        assert!(std::fs::symlink_metadata(d.join("lib.objs"))
            .unwrap()
            .is_dir());
        assert!(!outside.join("a.o").exists());
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn garbage_is_an_error() {
        let d = tmp("garbage");
        let e = unpack_bytes(&d, &[0x41; 700]).unwrap_err();
        assert!(e.message.contains("lib.tar"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

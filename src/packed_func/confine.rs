//! Path confinement for globals that open or write files.
//!
//! While an RPC session serves a call it sets a confinement root for the serving thread (its
//! work directory); every global that takes a path resolves it through [`resolve`], which then
//! keeps it inside that root: relative paths are taken from the root, absolute paths must lie in
//! it, `..` is refused and symbolic links may not lead out. Without a root (plain C, Python or
//! Rust use) paths are used as given. Confinement is defence in depth: a client allowed to load
//! a library it uploaded runs its own code on the server anyway. Only a build with `rpc` serves
//! remote calls; without it there is nothing to confine and paths are always used as given.

#[cfg(feature = "rpc")]
use super::error::Error;
use super::error::Result;
#[cfg(feature = "rpc")]
use std::cell::RefCell;
use std::path::PathBuf;
#[cfg(feature = "rpc")]
use std::path::{Component, Path};

#[cfg(feature = "rpc")]
/// What the serving thread is confined to.
#[derive(Clone, Debug)]
enum Root {
    /// Paths must resolve inside this (canonical) directory.
    Dir(PathBuf),
    /// The session has no usable work directory: every path is refused, for this reason.
    Deny(String),
    /// A remote call without a server environment (no work directory): paths are used as
    /// given, but the thread still serves a remote peer.
    Open,
}

#[cfg(feature = "rpc")]
thread_local! {
    static ROOT: RefCell<Option<Root>> = const { RefCell::new(None) };
}

#[cfg(feature = "rpc")]
/// Restores the previous confinement of the thread when dropped.
#[must_use = "the confinement ends when the guard is dropped"]
pub struct Guard {
    prev: Option<Root>,
}

#[cfg(feature = "rpc")]
impl Drop for Guard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        ROOT.with(|r| *r.borrow_mut() = prev);
    }
}

#[cfg(feature = "rpc")]
/// A confinement, worked out once (e.g. per session) and entered for each call.
#[derive(Clone, Debug)]
pub struct Confinement(Root);

#[cfg(feature = "rpc")]
impl Confinement {
    /// Paths must stay inside `dir`. An unusable directory (missing, not a directory) confines
    /// to nothing: every path is refused.
    pub fn dir(dir: &Path) -> Self {
        Confinement(match dir.canonicalize() {
            Ok(d) if d.is_dir() => Root::Dir(d),
            Ok(_) => Root::Deny(format!(
                "the work directory {} is not a directory",
                dir.display()
            )),
            Err(e) => Root::Deny(format!(
                "the work directory {} is unusable: {e}",
                dir.display()
            )),
        })
    }

    /// Every path is refused (a session whose work directory is unknown); `why` goes into the
    /// error.
    pub fn deny(why: impl Into<String>) -> Self {
        Confinement(Root::Deny(why.into()))
    }

    /// Paths are used as given, but the thread serves a remote peer (a session without a server
    /// environment, hence without a work directory).
    pub fn open() -> Self {
        Confinement(Root::Open)
    }

    /// Applies to the calling thread until the guard drops.
    pub fn enter(&self) -> Guard {
        Guard {
            prev: ROOT.with(|r| r.borrow_mut().replace(self.0.clone())),
        }
    }
}

#[cfg(feature = "rpc")]
/// The calling thread's confinement directory, if any.
pub fn root() -> Option<PathBuf> {
    ROOT.with(|r| match &*r.borrow() {
        Some(Root::Dir(d)) => Some(d.clone()),
        _ => None,
    })
}

#[cfg(feature = "rpc")]
/// Whether the calling thread serves a remote peer (confined or not): globals refuse there what
/// only a local caller may do (e.g. take a raw table pointer).
pub fn remote() -> bool {
    ROOT.with(|r| r.borrow().is_some())
}

#[cfg(feature = "rpc")]
/// Whether the calling thread's paths are confined.
pub fn active() -> bool {
    ROOT.with(|r| matches!(&*r.borrow(), Some(Root::Dir(_) | Root::Deny(_))))
}

#[cfg(feature = "rpc")]
/// Resolves `path`, given to `what` (the global's name, for errors), for opening or writing a
/// file: as given when the thread is not confined, else inside the confinement root (refused
/// when it would leave it). The file itself need not exist; its directory must.
pub fn resolve(path: &str, what: &str) -> Result<PathBuf> {
    ROOT.with(|r| match &*r.borrow() {
        None | Some(Root::Open) => Ok(PathBuf::from(path)),
        Some(Root::Deny(why)) => Err(refused(path, what, why)),
        Some(Root::Dir(root)) => resolve_in(root, path).map_err(|why| refused(path, what, why)),
    })
}

#[cfg(feature = "rpc")]
/// [`resolve`] for callers that need a string path.
pub fn resolve_str(path: &str, what: &str) -> Result<String> {
    if !active() {
        return Ok(path.to_string());
    }
    let p = resolve(path, what)?;
    p.to_str().map(str::to_string).ok_or_else(|| {
        Error::value_fmt(format_args!(
            "{what}: path '{path}' does not resolve to UTF-8 inside the work directory"
        ))
    })
}

#[cfg(feature = "rpc")]
fn refused(path: &str, what: &str, why: &str) -> Error {
    Error::value_fmt(format_args!(
        "{what}: refused path '{path}': {why} (over RPC, files must stay inside the session's \
         work directory)"
    ))
}

#[cfg(feature = "rpc")]
/// `path` inside the canonical directory `root`, or why not.
fn resolve_in(root: &Path, path: &str) -> std::result::Result<PathBuf, &'static str> {
    if path.is_empty() {
        return Err("empty path");
    }
    if path.contains('\0') {
        return Err("NUL byte");
    }
    let p = Path::new(path);
    if p.components().any(|c| c == Component::ParentDir) {
        return Err("'..' is not allowed");
    }
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    };
    // The deepest part of the path that exists decides where it leads: canonicalising it
    // follows every symbolic link, and the parts after it do not exist yet.
    let mut existing = full.as_path();
    let mut rest = Vec::new();
    loop {
        if std::fs::symlink_metadata(existing).is_ok() {
            break;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return Err("no part of it exists"),
        }
    }
    let real = existing
        .canonicalize()
        .map_err(|_| "it goes through a dangling symbolic link")?;
    if !real.starts_with(root) {
        return Err(if p.is_absolute() && !full.starts_with(root) {
            "it is outside the work directory"
        } else {
            "a symbolic link leads out of the work directory"
        });
    }
    Ok(rest.into_iter().rev().fold(real, |acc, n| acc.join(n)))
}

/// Without `rpc` no thread serves a remote peer: no confinement directory.
#[cfg(not(feature = "rpc"))]
pub fn root() -> Option<PathBuf> {
    None
}

/// Without `rpc` no thread serves a remote peer.
#[cfg(not(feature = "rpc"))]
pub fn remote() -> bool {
    false
}

/// Without `rpc` paths are never confined.
#[cfg(not(feature = "rpc"))]
pub fn active() -> bool {
    false
}

/// Without `rpc` paths are used as given.
#[cfg(not(feature = "rpc"))]
pub fn resolve(path: &str, _what: &str) -> Result<PathBuf> {
    Ok(PathBuf::from(path))
}

/// Without `rpc` paths are used as given.
#[cfg(not(feature = "rpc"))]
pub fn resolve_str(path: &str, _what: &str) -> Result<String> {
    Ok(path.to_string())
}

#[cfg(all(test, feature = "rpc"))]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tvmrt-confine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn unconfined_paths_are_used_as_given() {
        assert_eq!(
            resolve("/etc/passwd", "t").unwrap(),
            PathBuf::from("/etc/passwd")
        );
        assert_eq!(resolve("../x", "t").unwrap(), PathBuf::from("../x"));
    }

    #[test]
    fn confined_paths_stay_inside() {
        let root = tmp("inside");
        let out = tmp("outside");
        std::fs::write(root.join("a.bin"), b"x").unwrap();
        std::os::unix::fs::symlink(&out, root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("a.bin"), root.join("in")).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        let real = root.canonicalize().unwrap();
        {
            let _g = Confinement::dir(&root).enter();
            assert_eq!(resolve("a.bin", "t").unwrap(), real.join("a.bin"));
            assert_eq!(
                resolve("sub/new.bin", "t").unwrap(),
                real.join("sub/new.bin")
            );
            let abs = root.join("new.bin");
            assert_eq!(
                resolve(abs.to_str().unwrap(), "t").unwrap(),
                real.join("new.bin")
            );
            assert_eq!(resolve("in", "t").unwrap(), real.join("a.bin"));
            for (bad, why) in [
                ("/etc/passwd", "outside the work directory"),
                ("../x", "'..'"),
                ("sub/../../x", "'..'"),
                ("out/new.bin", "symbolic link leads out"),
                ("out", "symbolic link leads out"),
                ("", "empty path"),
            ] {
                let e = resolve(bad, "t.global").unwrap_err();
                assert!(e.message.contains(why), "{bad}: {e}");
                assert!(e.message.contains("t.global"), "{e}");
            }
            {
                let _inner = Confinement::deny("no work directory").enter();
                assert!(resolve("a.bin", "t").is_err());
            }
            assert!(resolve("a.bin", "t").is_ok());
        }
        assert!(!active() && !remote());
        {
            let _open = Confinement::open().enter();
            assert!(remote() && !active());
            assert_eq!(resolve("../x", "t").unwrap(), PathBuf::from("../x"));
        }
        assert_eq!(resolve("../x", "t").unwrap(), PathBuf::from("../x"));
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn dangling_links_are_refused() {
        let root = tmp("dangling");
        std::os::unix::fs::symlink("/nonexistent/tvmrt", root.join("d")).unwrap();
        let _g = Confinement::dir(&root).enter();
        let e = resolve("d", "t").unwrap_err();
        assert!(e.message.contains("dangling"), "{e}");
        drop(_g);
        std::fs::remove_dir_all(&root).unwrap();
    }
}

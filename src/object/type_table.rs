//! The type table: type keys to indices with parents, static entries as in the reference.

use crate::packed_func::error::{Error, Result};
use crate::packed_func::text::{push, push_dec};
use std::sync::{LazyLock, RwLock};

/// `runtime.Object`.
pub const TYPE_OBJECT: u32 = 0;
/// `runtime.Module`.
pub const TYPE_MODULE: u32 = 1;
/// `runtime.NDArray`.
pub const TYPE_NDARRAY: u32 = 2;
/// `runtime.String`.
pub const TYPE_STRING: u32 = 3;
/// `Array`.
pub const TYPE_ARRAY: u32 = 4;
/// `Map`.
pub const TYPE_MAP: u32 = 5;
/// `runtime.ShapeTuple`.
pub const TYPE_SHAPE_TUPLE: u32 = 6;
/// `runtime.PackedFunc`.
pub const TYPE_PACKED_FUNC: u32 = 7;
/// First index past the static ones; dynamic types count up from here.
pub const STATIC_INDEX_END: u32 = 10;

struct TypeInfo {
    name: String,
    parent: u32,
}

struct Table {
    infos: Vec<Option<TypeInfo>>,
}

impl Table {
    /// The index of a key, searched in registration order (a program registers tens of
    /// types, so a scan costs less code than a hash table and not more time). Index 0 has a
    /// name but, as in the reference, no key lookup.
    fn find(&self, key: &str) -> Option<u32> {
        self.infos
            .iter()
            .skip(1)
            .position(|i| i.as_ref().is_some_and(|i| i.name == key))
            .map(|i| i as u32 + 1)
    }
}

static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(|| {
    let statics = [
        "runtime.Object",
        "runtime.Module",
        "runtime.NDArray",
        "runtime.String",
        "Array",
        "Map",
        "runtime.ShapeTuple",
        "runtime.PackedFunc",
        "runtime.disco.DRef",
        "runtime.RPCObjectRef",
    ];
    let mut t = Table { infos: Vec::new() };
    for name in statics {
        t.infos.push(Some(TypeInfo {
            name: name.to_string(),
            parent: 0,
        }));
    }
    RwLock::new(t)
});

/// Registers a type key under a parent index (or returns its index if known).
pub fn register_dynamic(key: &str, parent: u32) -> u32 {
    let mut t = TABLE.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = t.find(key) {
        return i;
    }
    let index = t.infos.len() as u32;
    t.infos.push(Some(TypeInfo {
        name: key.to_string(),
        parent,
    }));
    index
}

/// The table, read-locked (one out-of-line copy of the lazy start and the lock).
#[inline(never)]
fn read() -> std::sync::RwLockReadGuard<'static, Table> {
    TABLE.read().unwrap_or_else(|e| e.into_inner())
}

/// The index of a type key.
pub fn type_key_to_index(key: &str) -> Result<u32> {
    let t = read();
    t.find(key).ok_or_else(|| {
        Error::value_fmt(format_args!(
            "Cannot find type {key}: no object type with this key is registered"
        ))
    })
}

/// The key of a type index.
pub fn type_index_to_key(index: u32) -> Result<String> {
    let t = read();
    match t.infos.get(index as usize) {
        Some(Some(info)) => Ok(info.name.clone()),
        _ => Err(Error::value_fmt(format_args!("Unknown type index {index}"))),
    }
}

/// Whether `child` is `parent` or derives from it.
pub fn derived_from(child: u32, parent: u32) -> Result<bool> {
    if child == parent {
        return Ok(true);
    }
    if child < parent {
        return Ok(false);
    }
    let t = read();
    if (child as usize) >= t.infos.len() {
        return Err(Error::value_fmt(format_args!("Unknown type index {child}")));
    }
    let mut c = child;
    while c > parent {
        match t.infos.get(c as usize) {
            Some(Some(info)) if c != 0 => c = info.parent,
            _ => break,
        }
    }
    Ok(c == parent)
}

/// A printable dump of the table (`runtime.DumpTypeTable`): one line per type with at least
/// `min_children` children.
pub fn dump(min_children: i64) -> String {
    let t = read();
    let mut children = vec![0i64; t.infos.len()];
    for info in t.infos.iter().skip(1).flatten() {
        if let Some(c) = children.get_mut(info.parent as usize) {
            *c += 1;
        }
    }
    let mut out = String::new();
    for (i, (info, &n)) in t.infos.iter().zip(&children).enumerate() {
        if let Some(info) = info {
            if i != 0 && n >= min_children {
                let parent = match t.infos.get(info.parent as usize) {
                    Some(Some(p)) => p.name.as_str(),
                    _ => "?",
                };
                // "[{i}] {name}\tparent={parent}\tnum_children={n}\n", piece by piece: `i`
                // is a type index (a u32) and `n` a count of them, never negative.
                push(&mut out, "[");
                push_dec(&mut out, i as u32);
                push(&mut out, "] ");
                push(&mut out, &info.name);
                push(&mut out, "\tparent=");
                push(&mut out, parent);
                push(&mut out, "\tnum_children=");
                push_dec(&mut out, n as u32);
                push(&mut out, "\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line reads `[{i}] {name}\tparent={parent}\tnum_children={n}`.
    #[test]
    fn dump_lines_have_the_reference_shape() {
        let child = register_dynamic("test.type_table.DumpChild", 0);
        let text = dump(0);
        let line =
            format!("[{child}] test.type_table.DumpChild\tparent=runtime.Object\tnum_children=0");
        assert!(text.lines().any(|l| l == line), "{text}");
        assert!(text.ends_with('\n'));
        let root = dump(1);
        assert!(!root.contains("DumpChild"), "{root}");
    }
}

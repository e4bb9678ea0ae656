//! The containers bindings see: String, Array, Map and ShapeTuple.
//!
//! String and ShapeTuple keep the reference's payload layout (a data pointer and a size
//! first) so that code reading them in place finds what it expects.

use super::{ObjectRef, TYPE_ARRAY, TYPE_MAP, TYPE_SHAPE_TUPLE, TYPE_STRING};
use std::collections::HashMap;
use std::ffi::c_char;

/// An immutable string (`runtime.String`).
#[repr(C)]
pub struct StringObj {
    data: *const c_char,
    size: u64,
    storage: Box<[u8]>,
}

// SAFETY: `data` points into the owned, immutable `storage`.
unsafe impl Send for StringObj {}
// SAFETY: as above.
unsafe impl Sync for StringObj {}

// SAFETY: TYPE_STRING is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for StringObj {
    crate::object_type!("runtime.String", static TYPE_STRING);
}

impl StringObj {
    /// A new string object from bytes (kept NUL-terminated for C readers).
    pub fn from_bytes(bytes: &[u8]) -> ObjectRef {
        let mut v = Vec::with_capacity(bytes.len() + 1);
        v.extend_from_slice(bytes);
        v.push(0);
        let storage = v.into_boxed_slice();
        ObjectRef::new(StringObj {
            data: storage.as_ptr() as *const c_char,
            size: bytes.len() as u64,
            storage,
        })
    }

    /// A new string object.
    pub fn new_ref(s: &str) -> ObjectRef {
        Self::from_bytes(s.as_bytes())
    }

    /// The bytes, without the terminator.
    pub fn as_bytes(&self) -> &[u8] {
        &self.storage[..self.size as usize]
    }

    /// The text (lossy views are never needed: construction takes `&str` or checked bytes).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("<non-UTF-8 string>")
    }
}

/// An array of objects (`Array`); entries may be null.
pub struct ArrayObj {
    /// The entries.
    pub items: Vec<Option<ObjectRef>>,
}

// SAFETY: TYPE_ARRAY is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for ArrayObj {
    crate::object_type!("Array", static TYPE_ARRAY);
}

impl ArrayObj {
    /// A new array object.
    pub fn new_ref(items: Vec<Option<ObjectRef>>) -> ObjectRef {
        ObjectRef::new(ArrayObj { items })
    }
}

/// Map key: strings compare by content, everything else by identity (as the reference).
#[derive(Clone, PartialEq, Eq, Hash)]
enum MapKey {
    Str(Vec<u8>),
    Ptr(usize),
}

fn map_key(o: &ObjectRef) -> MapKey {
    match o.downcast_ref::<StringObj>() {
        Some(s) => MapKey::Str(s.as_bytes().to_vec()),
        None => MapKey::Ptr(o.as_ptr() as usize),
    }
}

/// A map from objects to objects (`Map`), iterated in insertion order.
#[derive(Default)]
pub struct MapObj {
    entries: Vec<(ObjectRef, Option<ObjectRef>)>,
    /// Keys are the program's own strings and objects (a fast non-keyed hash: no SipHash and
    /// random keys in the library for this table).
    index: HashMap<MapKey, usize, rustc_hash::FxBuildHasher>,
}

// SAFETY: TYPE_MAP is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for MapObj {
    crate::object_type!("Map", static TYPE_MAP);
}

impl MapObj {
    /// Inserts or replaces an entry.
    pub fn insert(&mut self, k: ObjectRef, v: Option<ObjectRef>) {
        use std::collections::hash_map::Entry;
        match self.index.entry(map_key(&k)) {
            Entry::Occupied(e) => {
                if let Some(entry) = self.entries.get_mut(*e.get()) {
                    entry.1 = v;
                }
            }
            Entry::Vacant(e) => {
                e.insert(self.entries.len());
                self.entries.push((k, v));
            }
        }
    }

    /// Looks a key up.
    pub fn get(&self, k: &ObjectRef) -> Option<&Option<ObjectRef>> {
        let &i = self.index.get(&map_key(k))?;
        self.entries.get(i).map(|e| &e.1)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &(ObjectRef, Option<ObjectRef>)> {
        self.entries.iter()
    }
}

/// A tuple of dimensions (`runtime.ShapeTuple`).
#[repr(C)]
pub struct ShapeTupleObj {
    data: *const i64,
    size: u64,
    storage: Box<[i64]>,
}

// SAFETY: `data` points into the owned, immutable `storage`.
unsafe impl Send for ShapeTupleObj {}
// SAFETY: as above.
unsafe impl Sync for ShapeTupleObj {}

// SAFETY: TYPE_SHAPE_TUPLE is a static index of the type table that no other payload type uses.
unsafe impl crate::object::ObjectType for ShapeTupleObj {
    crate::object_type!("runtime.ShapeTuple", static TYPE_SHAPE_TUPLE);
}

impl ShapeTupleObj {
    /// A new shape tuple object.
    pub fn new_ref(dims: &[i64]) -> ObjectRef {
        let storage: Box<[i64]> = dims.into();
        ObjectRef::new(ShapeTupleObj {
            data: storage.as_ptr(),
            size: storage.len() as u64,
            storage,
        })
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.storage
    }
}

//! Objects: the reference-counted header every runtime object starts with, the type table,
//! and the containers (String, Array, Map, ShapeTuple).
//!
//! The header has the reference's layout (`uint32_t type_index; int32_t ref_counter;
//! void (*deleter)(Object*)`), so an object handle handed to C is a pointer to it, and an
//! NDArray's `DLTensor` sits right after it.

pub mod containers;
mod functions;
pub mod type_table;

use crate::sync::atomic::{AtomicI32, Ordering};
use std::ptr::NonNull;

pub use type_table::{
    derived_from, type_index_to_key, type_key_to_index, TYPE_ARRAY, TYPE_MAP, TYPE_MODULE,
    TYPE_NDARRAY, TYPE_OBJECT, TYPE_PACKED_FUNC, TYPE_SHAPE_TUPLE, TYPE_STRING,
};

/// The common header of every object (`tvm::runtime::Object` layout).
#[repr(C)]
pub struct Object {
    type_index: u32,
    ref_count: AtomicI32,
    deleter: Option<unsafe extern "C" fn(*mut Object)>,
}

/// A Rust type that can live in an object cell.
///
/// # Safety
/// `type_index` must return an index that no other Rust type returns, so that a cell's type
/// index identifies the Rust type of its payload: [`ObjectRef::downcast_ref`] reads the payload
/// as `Self` on the strength of it. Implement it with `unsafe impl` and a `// SAFETY:` comment
/// saying why the index is this type's alone; [`object_type!`](crate::object_type) writes the
/// items.
///
/// Safe code cannot claim an index, so it cannot read one object type as another:
/// ```compile_fail,E0200
/// use tvm_runtime::object::ObjectType;
/// struct Fake(u64);
/// impl ObjectType for Fake {
///     const TYPE_KEY: &'static str = "runtime.String";
///     fn type_index() -> u32 { tvm_runtime::object::TYPE_STRING }
/// }
/// ```
pub unsafe trait ObjectType: Send + Sync + Sized + 'static {
    /// The type key (e.g. `"runtime.String"`).
    const TYPE_KEY: &'static str;
    /// The type index (static, or allocated on first use).
    fn type_index() -> u32;
}

/// The items of an [`ObjectType`] implementation, inside an `unsafe impl` the use site writes
/// (so the claim that the index is the type's alone is made, and justified, there): a static
/// index, or a dynamic one registered under a parent type index on first use.
///
/// ```
/// use tvm_runtime::object::{ObjectRef, ObjectType};
/// struct Counter(u64);
/// // SAFETY: the key is new, so the type table hands this payload type an index of its own.
/// unsafe impl ObjectType for Counter {
///     tvm_runtime::object_type!("doc.Counter", parent tvm_runtime::object::TYPE_OBJECT);
/// }
/// assert_eq!(ObjectRef::new(Counter(7)).downcast_ref::<Counter>().map(|c| c.0), Some(7));
/// ```
#[macro_export]
macro_rules! object_type {
    ($key:expr, static $index:expr) => {
        const TYPE_KEY: &'static str = $key;
        #[inline(always)]
        fn type_index() -> u32 {
            $index
        }
    };
    ($key:expr, parent $parent:expr) => {
        const TYPE_KEY: &'static str = $key;
        #[inline]
        fn type_index() -> u32 {
            static INDEX: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
            *INDEX.get_or_init(|| $crate::object::type_table::register_dynamic($key, $parent))
        }
    };
}

/// An object header followed by its payload.
#[repr(C)]
pub struct ObjCell<T> {
    header: Object,
    pub(crate) value: T,
}

unsafe extern "C" fn delete_cell<T>(p: *mut Object) {
    // A payload whose drop panics must not unwind into C (that aborts): the panic ends
    // here, and whatever the drop did not release stays allocated.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the deleter is only installed by `ObjectRef::new::<T>`, which boxed an
        // `ObjCell<T>`; it runs once, when the count drops to zero.
        drop(unsafe { Box::from_raw(p as *mut ObjCell<T>) });
    }));
}

impl Object {
    /// The type index stored in the header.
    #[inline(always)]
    pub fn type_index(&self) -> u32 {
        self.type_index
    }

    /// The current reference count.
    pub fn ref_count(&self) -> i32 {
        self.ref_count.load(Ordering::Relaxed)
    }

    /// Whether the caller's reference is the only one. The acquire fence orders the accesses
    /// made through references dropped on other threads (their release decrement) before the
    /// caller's, as `Arc::get_mut` does.
    #[inline]
    pub fn is_unique(&self) -> bool {
        let unique = self.ref_count.load(Ordering::Relaxed) == 1;
        crate::sync::atomic::fence(Ordering::Acquire);
        unique
    }

    /// Adds one reference.
    #[inline(always)]
    pub fn inc_ref(&self) {
        self.ref_count.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference, deleting the object when it was the last.
    ///
    /// # Safety
    /// `p` must point to a live object on which the caller owns one reference.
    #[inline(always)]
    pub unsafe fn dec_ref(p: *mut Object) {
        // SAFETY: the caller guarantees `p` is live.
        let obj = unsafe { &*p };
        if obj.ref_count.fetch_sub(1, Ordering::Release) == 1 {
            // SAFETY: the count reached zero: nobody else holds the object.
            unsafe { Object::delete(p) };
        }
    }

    /// Deletes an object whose last reference was just dropped. Out of line: inlined, this
    /// was a load and a call at each of the runtime's many drop sites.
    ///
    /// # Safety
    /// `p` must point to an object whose count has just reached zero.
    #[inline(never)]
    unsafe fn delete(p: *mut Object) {
        // SAFETY: the caller guarantees `p` is live until deleted here.
        let obj = unsafe { &*p };
        // Acquire the other owners' releases before deleting: an acquire load of the count
        // (rather than `fence(Acquire)`, equivalent, free on x86) so that ThreadSanitizer,
        // which does not model fences, sees the ordering too (std's `Arc` does the same).
        obj.ref_count.load(Ordering::Acquire);
        if let Some(d) = obj.deleter {
            // SAFETY: the count reached zero: nobody else holds the object.
            unsafe { d(p) };
        }
    }
}

/// An owning, reference-counted pointer to any object.
pub struct ObjectRef(NonNull<Object>);

// SAFETY: every payload type is Send + Sync (ObjectType bound) and the count is atomic.
unsafe impl Send for ObjectRef {}
// SAFETY: as above.
unsafe impl Sync for ObjectRef {}

impl ObjectRef {
    /// Puts a payload into a new object with one reference.
    pub fn new<T: ObjectType>(value: T) -> ObjectRef {
        let cell = Box::new(ObjCell {
            header: Object {
                type_index: T::type_index(),
                ref_count: AtomicI32::new(1),
                deleter: Some(delete_cell::<T>),
            },
            value,
        });
        ObjectRef(NonNull::from(Box::leak(cell)).cast())
    }

    /// Takes over one reference the caller owns.
    ///
    /// # Safety
    /// `p` must be NULL or point to a live object on which the caller owns a reference.
    pub unsafe fn from_raw(p: *mut Object) -> Option<ObjectRef> {
        NonNull::new(p).map(ObjectRef)
    }

    /// Adds a reference to an object the caller only borrows.
    ///
    /// # Safety
    /// `p` must be NULL or point to a live object.
    pub unsafe fn from_borrowed(p: *mut Object) -> Option<ObjectRef> {
        let r = NonNull::new(p)?;
        // SAFETY: the caller guarantees the object is live.
        unsafe { r.as_ref() }.inc_ref();
        Some(ObjectRef(r))
    }

    /// [`ObjectRef::from_borrowed`] for a pointer known to be non-null.
    ///
    /// # Safety
    /// `p` must point to a live object.
    pub(crate) unsafe fn from_borrowed_live(p: *mut Object) -> ObjectRef {
        // SAFETY: the caller guarantees the object is live (so `p` is non-null).
        let r = unsafe { NonNull::new_unchecked(p) };
        // SAFETY: as above.
        unsafe { r.as_ref() }.inc_ref();
        ObjectRef(r)
    }

    /// A new reference to an object whose count may already have reached zero: `None` when it
    /// has (the object is being deleted and must not be revived).
    ///
    /// # Safety
    /// `p` must point to an object whose memory is still allocated: if its deleter has started,
    /// the caller must know it has not returned (for example, because the payload's drop takes a
    /// lock the caller holds).
    pub unsafe fn try_upgrade(p: NonNull<Object>) -> Option<ObjectRef> {
        // SAFETY: the caller guarantees the memory is allocated; the count is atomic.
        let obj = unsafe { p.as_ref() };
        let mut c = obj.ref_count.load(Ordering::Relaxed);
        while c > 0 {
            match obj.ref_count.compare_exchange_weak(
                c,
                c + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(ObjectRef(p)),
                Err(now) => c = now,
            }
        }
        None
    }

    /// Gives up ownership: the returned pointer carries one reference.
    pub fn into_raw(self) -> *mut Object {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The raw pointer, still owned by `self`.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut Object {
        self.0.as_ptr()
    }

    /// The header.
    #[inline(always)]
    pub fn header(&self) -> &Object {
        // SAFETY: we hold a reference, so the object is live.
        unsafe { self.0.as_ref() }
    }

    /// The type index.
    #[inline(always)]
    pub fn type_index(&self) -> u32 {
        self.header().type_index
    }

    /// The type key.
    pub fn type_key(&self) -> String {
        type_index_to_key(self.type_index()).unwrap_or_else(|_| "<unknown>".into())
    }

    /// The payload, when the object holds a `T`.
    #[inline(always)]
    pub fn downcast_ref<T: ObjectType>(&self) -> Option<&T> {
        if self.type_index() == T::type_index() {
            // SAFETY: the type index identifies the payload type (ObjectType contract).
            Some(unsafe { &(*(self.0.as_ptr() as *const ObjCell<T>)).value })
        } else {
            None
        }
    }

    /// The payload as a `T`, its type not checked.
    ///
    /// # Safety
    /// The object's payload must be a `T`.
    pub(crate) unsafe fn downcast_unchecked<T: ObjectType>(&self) -> &T {
        // SAFETY: the caller guarantees the payload type.
        unsafe { &(*(self.0.as_ptr() as *const ObjCell<T>)).value }
    }

    /// Whether two references point to the same object.
    pub fn same_as(&self, other: &ObjectRef) -> bool {
        self.0 == other.0
    }
}

impl Clone for ObjectRef {
    #[inline(always)]
    fn clone(&self) -> Self {
        self.header().inc_ref();
        ObjectRef(self.0)
    }
}

impl Drop for ObjectRef {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { Object::dec_ref(self.0.as_ptr()) }
    }
}

impl std::fmt::Debug for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:p}", self.type_key(), self.0.as_ptr())
    }
}

/// Offset of the payload inside an [`ObjCell`], for payloads aligned to 8 bytes (an NDArray:
/// its `DLTensor` holds a `u64`): the header's size rounded up to 8, 16 bytes on every target
/// (the header alone is 12 bytes on 32-bit ones).
pub const PAYLOAD_OFFSET: usize = std::mem::size_of::<Object>().next_multiple_of(8);

/// The payload pointer of a cell holding `T`, from the object pointer.
///
/// # Safety
/// `p` must point to a live `ObjCell<T>`.
pub unsafe fn payload_ptr<T>(p: *mut Object) -> *mut T {
    // SAFETY: caller guarantees the layout; `value` follows the header.
    unsafe { std::ptr::addr_of_mut!((*(p as *mut ObjCell<T>)).value) }
}

/// Registers this room's global functions.
pub(crate) fn register(r: &mut crate::packed_func::registry::Registrar) {
    functions::register(r);
}

/// Model checks of the reference count (the `loom` feature, `scripts/loom.sh`): the
/// real `ObjectRef` on loom's atomics; the payload's cell reports a deletion that is not
/// ordered after another owner's last use.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;

    struct Payload(UnsafeCell<u32>);

    // SAFETY: only one thread writes the cell; the reference count orders the deleter's read
    // after it (which loom checks).
    unsafe impl Sync for Payload {}

    // SAFETY: the key is new, so the type table hands this payload type an index of its own.
    unsafe impl ObjectType for Payload {
        crate::object_type!("test.LoomPayload", parent TYPE_OBJECT);
    }

    impl Drop for Payload {
        fn drop(&mut self) {
            // SAFETY: the deleter runs once every owner is done.
            self.0.with(|p| assert_eq!(unsafe { *p }, 1));
        }
    }

    #[test]
    fn loom_the_last_owner_deletes_after_every_other_use() {
        crate::sync::model(|| {
            let a = ObjectRef::new(Payload(UnsafeCell::new(0)));
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                let c = b.clone();
                let payload = c.downcast_ref::<Payload>().unwrap();
                // SAFETY: this thread is the only writer.
                payload.0.with_mut(|p| unsafe { *p = 1 });
                drop(b);
                drop(c);
            });
            drop(a);
            t.join().unwrap();
        });
    }
    #[test]
    fn loom_a_unique_owner_sees_what_dropped_owners_did() {
        crate::sync::model(|| {
            let a = ObjectRef::new(Payload(UnsafeCell::new(0)));
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                let payload = b.downcast_ref::<Payload>().unwrap();
                // SAFETY: this thread is the only writer while `b` lives.
                payload.0.with_mut(|p| unsafe { *p = 1 });
            });
            if a.header().is_unique() {
                // The other owner is gone: its write is ordered before this one.
                let payload = a.downcast_ref::<Payload>().unwrap();
                // SAFETY: the only reference.
                payload.0.with_mut(|p| unsafe { *p = 1 });
            }
            t.join().unwrap();
        });
    }
}

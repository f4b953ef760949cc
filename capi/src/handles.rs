//! Checked handles: the one typed layer between the C caller's opaque
//! pointers and the library's objects.
//!
//! Every object handed to C lives in a table of its kind. The pointer the
//! caller holds is not an address but an encoded triple: the slot's
//! *generation* (bits 32..64), its *index* (bits 8..28) and the *kind tag*
//! (bits 0..8, always odd, so no aligned real pointer is ever mistaken for
//! a handle). Freeing a handle empties its slot and bumps the generation,
//! so a double free, a use after free or a handle of another kind is
//! answered with `FC_ERR_INVALID_HANDLE` and a message, never undefined
//! behaviour.
//!
//! Lookups clone the object's `Arc`: an object freed by one thread while
//! another is inside a call on it lives until that call returns, and is
//! destroyed by whichever thread lets go of it last.
//!
//! Cost of a lookup: one uncontended read lock of the slot, the generation
//! compare and one reference-count increment (measured by `fc-bench
//! --steps`, row `handle_lookup`).

use std::sync::{Arc, Mutex, OnceLock, RwLock};

use ::fc_graph::{Error, Result};

/// Slots per segment (segments are allocated on first use).
const SEGMENT: usize = 1024;
/// Segments per table: up to `SEGMENT * SEGMENTS` (1 Mi) live handles per kind.
const SEGMENTS: usize = 1024;
const INDEX_BITS: u32 = 20;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// One kind of handle: the C type it is exposed as, its tag and its table.
pub(crate) trait Kind: Sized + Send + Sync + 'static {
    /// The opaque C struct (from the header) the handle points to.
    type C;
    /// The kind's tag: odd, distinct per kind.
    const TAG: u8;
    /// The C type's name, for messages.
    const NAME: &'static str;
    /// The kind's table.
    fn table() -> &'static Table<Self>;
}

/// Every kind's tag and name, for "a handle of another kind" messages.
const KINDS: &[(u8, &str)] = &[
    (0xC1, "fc_cuda_ctx"),
    (0xC3, "fc_buffer"),
    (0xC5, "fc_graph"),
    (0xC7, "fc_module"),
    (0xC9, "fc_kernel"),
    (0xCB, "fc_graph_cache"),
    (0xCD, "fc_buckets"),
];

/// The tag of the kind named `name` (each `Kind` impl takes its tag from here).
pub(crate) const fn tag_of(name: &str) -> u8 {
    let mut i = 0;
    while i < KINDS.len() {
        if const_str_eq(KINDS[i].1, name) {
            return KINDS[i].0;
        }
        i += 1;
    }
    panic!("unknown handle kind")
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

struct Entry<T> {
    /// The generation of the slot's current (or next) occupant; never 0.
    generation: u32,
    object: Option<Arc<T>>,
}

struct Slot<T> {
    entry: RwLock<Entry<T>>,
}

/// The objects of one kind.
pub(crate) struct Table<T> {
    segments: [OnceLock<Box<[Slot<T>]>>; SEGMENTS],
    /// Free indices (LIFO) and the first never-used index.
    free: Mutex<(Vec<u32>, u32)>,
}

impl<T> Table<T> {
    pub(crate) const fn new() -> Table<T> {
        Table { segments: [const { OnceLock::new() }; SEGMENTS], free: Mutex::new((Vec::new(), 0)) }
    }

    /// Handles of this kind alive now.
    pub(crate) fn live(&self) -> usize {
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.1 as usize - free.0.len()
    }

    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        let (seg, off) = (index as usize / SEGMENT, index as usize % SEGMENT);
        self.segments.get(seg)?.get().map(|s| &s[off])
    }

    fn slot_or_init(&self, index: u32) -> &Slot<T> {
        let (seg, off) = (index as usize / SEGMENT, index as usize % SEGMENT);
        let segment = self.segments[seg].get_or_init(|| {
            (0..SEGMENT).map(|_| Slot { entry: RwLock::new(Entry { generation: 1, object: None }) }).collect()
        });
        &segment[off]
    }
}

fn encode(generation: u32, index: u32, tag: u8) -> usize {
    ((u64::from(generation) << 32) | (u64::from(index) << 8) | u64::from(tag)) as usize
}

/// (generation, index, tag) of a handle value.
fn decode(h: usize) -> (u32, u32, u8) {
    let v = h as u64;
    ((v >> 32) as u32, ((v >> 8) & INDEX_MASK) as u32, v as u8)
}

fn write<T>(slot: &Slot<T>) -> std::sync::RwLockWriteGuard<'_, Entry<T>> {
    slot.entry.write().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(slot: &Slot<T>) -> std::sync::RwLockReadGuard<'_, Entry<T>> {
    slot.entry.read().unwrap_or_else(|p| p.into_inner())
}

/// Stores `object` and returns its new handle.
pub(crate) fn insert<K: Kind>(object: K) -> Result<*mut K::C> {
    let table = K::table();
    let index = {
        let mut free = table.free.lock().unwrap_or_else(|p| p.into_inner());
        match free.0.pop() {
            Some(i) => i,
            None if (free.1 as usize) < SEGMENT * SEGMENTS => {
                free.1 += 1;
                free.1 - 1
            }
            None => {
                return Err(Error::invalid(format!(
                    "too many live {} handles ({}): free some first",
                    K::NAME,
                    SEGMENT * SEGMENTS
                )))
            }
        }
    };
    let mut entry = write(table.slot_or_init(index));
    entry.object = Some(Arc::new(object));
    Ok(encode(entry.generation, index, K::TAG) as *mut K::C)
}

/// Why `h` (named `what` in messages) is not a live handle of kind `K`.
fn refusal<K: Kind>(h: usize, what: &str) -> Error {
    let (_, _, tag) = decode(h);
    if tag != K::TAG {
        if let Some((_, name)) = KINDS.iter().find(|(t, _)| *t == tag) {
            return Error::InvalidHandle(format!("{what} ({h:#x}) is an {name} handle, not an {}", K::NAME));
        }
        return Error::InvalidHandle(format!("{what} ({h:#x}) is not a handle made by this library"));
    }
    Error::InvalidHandle(format!(
        "{what} ({h:#x}) is an {} handle that was already freed (use after free or double free)",
        K::NAME
    ))
}

/// The live object behind `h`; NULL is an invalid argument, anything else
/// that is not a live handle of this kind an invalid handle.
pub(crate) fn get<K: Kind>(h: *const K::C, what: &str) -> Result<Arc<K>> {
    let raw = h as usize;
    if raw == 0 {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    let (generation, index, tag) = decode(raw);
    if tag == K::TAG {
        if let Some(slot) = K::table().slot(index) {
            let entry = read(slot);
            if entry.generation == generation {
                if let Some(object) = &entry.object {
                    return Ok(object.clone());
                }
            }
        }
    }
    Err(refusal::<K>(raw, what))
}

/// Removes the object behind `h` from its table and returns it (the caller
/// drops it, destroying it unless another thread's call still holds it).
pub(crate) fn remove<K: Kind>(h: *mut K::C, what: &str) -> Result<Arc<K>> {
    let raw = h as usize;
    if raw == 0 {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    let (generation, index, tag) = decode(raw);
    let table = K::table();
    if tag == K::TAG {
        if let Some(slot) = table.slot(index) {
            let mut entry = write(slot);
            if entry.generation == generation {
                if let Some(object) = entry.object.take() {
                    entry.generation = entry.generation.wrapping_add(1).max(1);
                    drop(entry);
                    table.free.lock().unwrap_or_else(|p| p.into_inner()).0.push(index);
                    return Ok(object);
                }
            }
        }
    }
    Err(refusal::<K>(raw, what))
}

/// Implements [`Kind`] for `$t`, exposed as the C type `$c`.
macro_rules! handle_kind {
    ($t:ty => $c:ty, $name:literal) => {
        impl $crate::handles::Kind for $t {
            type C = $c;
            const TAG: u8 = $crate::handles::tag_of($name);
            const NAME: &'static str = $name;
            fn table() -> &'static $crate::handles::Table<Self> {
                static TABLE: $crate::handles::Table<$t> = $crate::handles::Table::new();
                &TABLE
            }
        }
    };
}
pub(crate) use handle_kind;

#[cfg(test)]
mod tests {
    use super::*;

    struct A(u32);
    struct B;
    enum CA {}
    enum CB {}
    handle_kind!(A => CA, "fc_module");
    handle_kind!(B => CB, "fc_kernel");

    #[test]
    fn handles_round_trip_and_are_never_aligned_pointers() {
        let before = B::table().live();
        let hb = insert(B).unwrap();
        assert_eq!(B::table().live(), before + 1);
        remove::<B>(hb, "b").unwrap();
        assert_eq!(B::table().live(), before);
        let h = insert(A(7)).unwrap();
        assert_eq!((h as usize) & 1, 1, "tags are odd");
        assert_eq!(get::<A>(h, "a").unwrap().0, 7);
        let again = get::<A>(h, "a").unwrap();
        assert_eq!(Arc::strong_count(&again), 2, "the table and this lookup");
        drop(again);
        assert_eq!(remove::<A>(h, "a").unwrap().0, 7);
    }

    #[test]
    fn double_free_and_use_after_free_are_refused() {
        let h = insert(A(1)).unwrap();
        remove::<A>(h, "a").unwrap();
        let e = remove::<A>(h, "a").err().unwrap();
        assert!(matches!(e, Error::InvalidHandle(ref m) if m.contains("already freed")), "{e}");
        let e = get::<A>(h, "a").err().unwrap();
        assert!(matches!(e, Error::InvalidHandle(_)), "{e}");
        // The slot is reused with a new generation: the stale handle stays dead.
        let h2 = insert(A(2)).unwrap();
        assert_ne!(h as usize, h2 as usize);
        assert!(get::<A>(h, "a").is_err());
        assert_eq!(get::<A>(h2, "a").unwrap().0, 2);
        remove::<A>(h2, "a").unwrap();
    }

    #[test]
    fn wrong_kinds_null_and_foreign_pointers_are_named() {
        let h = insert(A(3)).unwrap();
        let as_b = h as usize as *const CB;
        let e = get::<B>(as_b, "kernel").err().unwrap();
        assert!(e.to_string().contains("is an fc_module handle, not an fc_kernel"), "{e}");
        let e = get::<A>(std::ptr::null(), "module").err().unwrap();
        assert!(matches!(e, Error::InvalidArgument(ref m) if m == "module is NULL"), "{e}");
        let local = 5u64;
        let e = get::<A>((&local as *const u64).cast(), "module").err().unwrap();
        assert!(e.to_string().contains("not a handle made by this library"), "{e}");
        let forged = encode(1, (SEGMENT * SEGMENTS - 1) as u32, A::TAG) as *const CA;
        assert!(matches!(get::<A>(forged, "module"), Err(Error::InvalidHandle(_))));
        remove::<A>(h, "a").unwrap();
    }

    #[test]
    fn a_freed_object_lives_until_the_last_call_returns() {
        let h = insert(A(9)).unwrap();
        let in_flight = get::<A>(h, "a").unwrap();
        let removed = remove::<A>(h, "a").unwrap();
        drop(removed);
        assert_eq!(in_flight.0, 9, "still alive for the call that holds it");
        assert_eq!(Arc::strong_count(&in_flight), 1);
    }

    #[test]
    fn concurrent_insert_lookup_remove() {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..2000u32 {
                        let h = insert(A(t * 100_000 + i)).unwrap();
                        assert_eq!(get::<A>(h, "a").unwrap().0, t * 100_000 + i);
                        remove::<A>(h, "a").unwrap();
                        assert!(get::<A>(h, "a").is_err());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}

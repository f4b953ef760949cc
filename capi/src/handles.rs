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
//! A slot holds its entry in an `arc_swap::ArcSwapOption`: a lookup takes a
//! guard on the entry without locking (arc-swap's thread-local fast path;
//! no shared reference count is touched), so an object freed by one thread
//! while another is inside a call on it lives until that call returns, and
//! is destroyed by whichever thread lets go of it last. A free swaps the
//! entry out with a compare-and-swap, so of two racing frees exactly one
//! succeeds.
//!
//! Cost: `fc-bench --steps`, row `handle_check` (an export's whole C-ABI
//! overhead against the Rust call it wraps).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::{ArcSwapOption, Guard};

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

/// A live object and the generation its handle carries.
pub(crate) struct Entry<T> {
    generation: u32,
    object: T,
}

impl<T> std::ops::Deref for Entry<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.object
    }
}

struct Slot<T> {
    current: ArcSwapOption<Entry<T>>,
    /// The generation of the slot's current (or next) occupant; never 0.
    generation: AtomicU32,
}

/// A looked-up object, valid for as long as the guard is held (the length
/// of one call).
pub(crate) struct Live<T> {
    guard: Guard<Option<Arc<Entry<T>>>>,
}

impl<T> std::ops::Deref for Live<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &*self.guard {
            Some(entry) => &entry.object,
            // `get` only hands out guards it saw holding an entry.
            None => unreachable!("a Live guard always holds an entry"),
        }
    }
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
            (0..SEGMENT).map(|_| Slot { current: ArcSwapOption::empty(), generation: AtomicU32::new(1) }).collect()
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
    // The index came off the free list (or is new): no other thread stores
    // into this slot until it is freed again.
    let slot = table.slot_or_init(index);
    let generation = slot.generation.load(Ordering::Acquire);
    slot.current.store(Some(Arc::new(Entry { generation, object })));
    Ok(encode(generation, index, K::TAG) as *mut K::C)
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
#[inline]
pub(crate) fn get<K: Kind>(h: *const K::C, what: &str) -> Result<Live<K>> {
    match lookup::<K>(h as usize) {
        Some(live) => Ok(live),
        None => Err(not_live::<K>(h as usize, what)),
    }
}

/// The hot path of [`get`]: no error is built here (errors are large, and
/// every call of the C ABI goes through this).
#[inline]
fn lookup<K: Kind>(raw: usize) -> Option<Live<K>> {
    let (generation, index, tag) = decode(raw);
    if tag != K::TAG {
        return None; // NULL too: its tag is 0
    }
    let guard = K::table().slot(index)?.current.load();
    matches!(&*guard, Some(entry) if entry.generation == generation).then_some(Live { guard })
}

/// Why `raw` is not a live handle of kind `K` (NULL included).
#[cold]
#[inline(never)]
fn not_live<K: Kind>(raw: usize, what: &str) -> Error {
    if raw == 0 {
        return Error::invalid(format!("{what} is NULL"));
    }
    refusal::<K>(raw, what)
}

/// Removes the object behind `h` from its table and returns it (the caller
/// drops it, destroying it unless another thread's call still holds it).
pub(crate) fn remove<K: Kind>(h: *mut K::C, what: &str) -> Result<Arc<Entry<K>>> {
    let raw = h as usize;
    if raw == 0 {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    let (generation, index, tag) = decode(raw);
    let table = K::table();
    if tag == K::TAG {
        if let Some(slot) = table.slot(index) {
            let current = slot.current.load_full();
            if let Some(entry) = current.as_ref().filter(|e| e.generation == generation) {
                let previous = slot.current.compare_and_swap(&current, None);
                // Only the thread whose swap took this very entry out frees it.
                if matches!(&*previous, Some(p) if Arc::ptr_eq(p, entry)) {
                    slot.generation.store(generation.wrapping_add(1).max(1), Ordering::Release);
                    table.free.lock().unwrap_or_else(|p| p.into_inner()).0.push(index);
                    return Ok(entry.clone());
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
        assert_eq!(again.0, 7);
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
        struct Dropped(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        struct D(#[allow(dead_code)] Dropped);
        enum CD {}
        handle_kind!(D => CD, "fc_graph");
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let h = insert(D(Dropped(flag.clone()))).unwrap();
        let in_flight = get::<D>(h, "d").unwrap();
        drop(remove::<D>(h, "d").unwrap());
        assert!(get::<D>(h, "d").is_err(), "freed for every new lookup");
        assert!(!flag.load(Ordering::SeqCst), "still alive for the call that holds it");
        drop(in_flight);
        assert!(flag.load(Ordering::SeqCst), "destroyed when the last call lets go");
    }

    #[test]
    fn racing_frees_succeed_once() {
        for _ in 0..200 {
            let h = insert(A(1)).unwrap() as usize;
            let wins: usize = (0..4)
                .map(|_| std::thread::spawn(move || remove::<A>(h as *mut CA, "a").is_ok() as usize))
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap())
                .sum();
            assert_eq!(wins, 1);
        }
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

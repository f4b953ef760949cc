//! Checked handles: the one typed layer between the C caller's opaque
//! pointers and the library's objects.
//!
//! Every object handed to C lives in a table of its kind. The pointer the
//! caller holds is not an address but an encoded triple: the slot's
//! *generation* (bits 28..64), its *index* (bits 8..28) and the *kind tag*
//! (bits 0..8, always odd, so no aligned real pointer is ever mistaken for
//! a handle). Freeing a handle empties its slot and bumps the generation,
//! so a double free, a use after free or a handle of another kind is
//! answered with `FC_ERR_INVALID_HANDLE` and a message, never undefined
//! behaviour.
//!
//! Handles never alias: a slot whose generation reaches [`GEN_MAX`]
//! (2^36 - 1 frees of that one slot) is retired instead of reused, so no
//! (index, generation) pair is ever handed out twice. At 10^8 alloc/free
//! cycles a second on one slot, retiring one slot takes 11 minutes and
//! retiring all 2^20 slots of a table (which then answers "too many live
//! handles" instead of aliasing) 22 years; at the measured 7.5 * 10^6
//! cycles a second of one CPU, 300 years.
//!
//! A slot holds a pointer to its entry. A lookup protects the entry with a
//! hazard pointer (module `hazard`: one store, one light fence and one
//! load on this thread's own record, no shared counter), so an object
//! freed by one thread while another is inside a call on it lives until
//! that call lets go of it, and is destroyed at the end of the next C call
//! that finds it unprotected (normally that very call). A free takes the
//! entry out with a compare-and-swap, so of two racing frees exactly one
//! succeeds.
//!
//! Orderings: an insert writes the entry (object and generation), then
//! stores its pointer into the slot with release; a lookup's confirming
//! load is an acquire load, so what it confirms is initialised. A lookup
//! resolves a handle only if the entry it confirmed carries the handle's
//! generation: an entry's generation never changes, and a slot's next
//! occupant gets the next generation (written under the `free` lock,
//! before the index is free again), so a stale handle never resolves to
//! the slot's new object, whatever the interleaving. A segment of slots
//! is published by a release store (under the `free` lock) before any
//! index in it is handed out, and read with acquire loads.
//!
//! Checked by Miri and AddressSanitizer (the tests below) and by loom
//! (`scripts/loom.sh`: the models at the end of this module).
//!
//! Cost: `fc-bench --steps`, row `handle_check` (an export's whole C-ABI
//! overhead against the Rust call it wraps); `tests::lookup_cost` times the
//! same shape of call without a GPU.

use std::ptr::{self, NonNull};

use super::error::{Error, Result};
use super::hazard::{self, Hazard};
use super::sync::{AtomicPtr, AtomicU64, Mutex, Ordering};

/// Slots per segment (segments are allocated on first use); 2 under loom.
const SEGMENT: usize = if cfg!(loom) { 2 } else { 1024 };
/// Segments per table: up to `SEGMENT * SEGMENTS` (1 Mi) live handles per
/// kind; 2 under loom (4 handles: a model's tables are small).
const SEGMENTS: usize = if cfg!(loom) { 2 } else { 1024 };
const INDEX_BITS: u32 = 20;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// Where the generation starts in a handle value (after the tag and index).
const GEN_SHIFT: u32 = 8 + INDEX_BITS;
/// The largest generation (36 bits); a slot that reaches it is retired.
const GEN_MAX: u64 = u64::MAX >> GEN_SHIFT;
const _: () = assert!(SEGMENT * SEGMENTS == 1 << INDEX_BITS || cfg!(loom));
const _: () = assert!(usize::BITS == 64, "handles are 64-bit values");

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

/// A live object and the generation its handle carries (never changed
/// while the entry is in its slot).
pub(crate) struct Entry<T> {
    generation: u64,
    object: T,
}

struct Slot<T> {
    /// The live entry (a leaked box), or NULL.
    current: AtomicPtr<Entry<T>>,
    /// The generation of the slot's current (or next) occupant, 1..=GEN_MAX;
    /// written only by the thread that owns the slot's index (the one that
    /// took it off the free list, or freed its entry).
    generation: AtomicU64,
}

/// A looked-up object, valid for as long as it is held (the length of one
/// call, on the calling thread).
pub(crate) struct Live<T> {
    entry: NonNull<Entry<T>>,
    _hazard: Hazard,
}

impl<T> std::ops::Deref for Live<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the hazard protects the entry from being destroyed until
        // this Live is dropped.
        unsafe { &self.entry.as_ref().object }
    }
}

/// An object taken out of its table by [`remove`]: the freeing call may
/// still use it; dropping it destroys the object, or leaves that to the
/// end of the call that still holds it.
pub(crate) struct Removed<T: Send + Sync + 'static> {
    entry: NonNull<Entry<T>>,
}

impl<T: Send + Sync + 'static> std::ops::Deref for Removed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: only this Removed may retire the entry, and it does so
        // when dropped.
        unsafe { &self.entry.as_ref().object }
    }
}

impl<T: Send + Sync + 'static> Drop for Removed<T> {
    fn drop(&mut self) {
        /// Frees an `Entry<T>` made by `insert`.
        unsafe fn destroy<T>(p: NonNull<()>) {
            // SAFETY: `p` is the leaked box of an `Entry<T>` (see `insert`),
            // retired once.
            drop(unsafe { Box::from_raw(p.cast::<Entry<T>>().as_ptr()) });
        }
        // SAFETY: `remove` took the entry out of its slot, and only this
        // Removed retires it; `T: Send + Sync`, so any thread may drop it.
        unsafe { hazard::retire(self.entry.cast(), destroy::<T>) };
    }
}

/// `SEGMENT` slots, allocated together.
type Segment<T> = [Slot<T>; SEGMENT];

/// The objects of one kind.
pub(crate) struct Table<T> {
    /// Each segment NULL until its first slot is taken, then a leaked box,
    /// never changed or freed: stored (release) under the `free` lock by
    /// the insert that takes its first slot, before any handle names it.
    segments: [AtomicPtr<Segment<T>>; SEGMENTS],
    free: Mutex<Free>,
}

/// Which slots of a table are free.
struct Free {
    /// Free indices (LIFO).
    list: Vec<u32>,
    /// The first never-used index.
    next: u32,
    /// Slots retired at the end of their generations (never reused).
    retired: u32,
}

impl<T> Table<T> {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Table<T> {
        Table {
            segments: [const { AtomicPtr::new(ptr::null_mut()) }; SEGMENTS],
            free: Mutex::new(Free { list: Vec::new(), next: 0, retired: 0 }),
        }
    }

    /// Under loom: the same, made at run time (loom's atomics are not const).
    #[cfg(loom)]
    pub(crate) fn new() -> Table<T> {
        Table {
            segments: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            free: Mutex::new(Free { list: Vec::new(), next: 0, retired: 0 }),
        }
    }

    /// Handles of this kind alive now.
    pub(crate) fn live(&self) -> usize {
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        (free.next - free.retired) as usize - free.list.len()
    }

    /// Tests: sets the generation the next occupant of the free slot
    /// `index` gets (to force a slot to the end of its generations).
    #[cfg(all(test, not(loom)))]
    fn set_next_generation(&self, index: u32, generation: u64) {
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        assert!(free.list.contains(&index), "slot {index} is not free");
        self.slot(index).expect("a used slot").generation.store(generation, Ordering::Release);
    }

    /// The slot `index` names, if its segment was made (an index of a
    /// handle value is below `SEGMENT * SEGMENTS`, so neither index below
    /// needs a bounds check outside loom).
    #[inline]
    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        let (seg, off) = (index as usize / SEGMENT, index as usize % SEGMENT);
        // Acquire: pairs with the release store that published the segment.
        let segment = self.segments.get(seg)?.load(Ordering::Acquire);
        // SAFETY: NULL or a leaked box, never freed (see `segments`).
        unsafe { segment.as_ref() }.map(|s| &s[off])
    }

    /// Makes the segment of `index` when it starts one: `index` is the
    /// first never-used index, taken under the `free` lock, which the
    /// caller holds (`_locked`), so one thread makes each segment.
    fn make_segment(&self, index: u32, _locked: &mut Free) {
        let (seg, off) = (index as usize / SEGMENT, index as usize % SEGMENT);
        if off == 0 {
            let segment: Box<Segment<T>> = Box::new(std::array::from_fn(|_| Slot {
                current: AtomicPtr::new(ptr::null_mut()),
                generation: AtomicU64::new(1),
            }));
            self.segments[seg].store(Box::into_raw(segment), Ordering::Release);
        }
    }
}

fn encode(generation: u64, index: u32, tag: u8) -> usize {
    debug_assert!((1..=GEN_MAX).contains(&generation) && u64::from(index) <= INDEX_MASK);
    ((generation << GEN_SHIFT) | (u64::from(index) << 8) | u64::from(tag)) as usize
}

/// (generation, index, tag) of a handle value.
fn decode(h: usize) -> (u64, u32, u8) {
    let v = h as u64;
    (v >> GEN_SHIFT, ((v >> 8) & INDEX_MASK) as u32, v as u8)
}

/// A handle value as the C pointer type: an address-free pointer (no
/// provenance; it is never dereferenced, only decoded).
fn as_handle<C>(v: usize) -> *mut C {
    ptr::null_mut::<u8>().wrapping_add(v).cast()
}

/// Stores `object` and returns its new handle.
pub(crate) fn insert<K: Kind>(object: K) -> Result<*mut K::C> {
    let table = K::table();
    let index = {
        let mut free = table.free.lock().unwrap_or_else(|p| p.into_inner());
        match free.list.pop() {
            Some(i) => i,
            None if (free.next as usize) < SEGMENT * SEGMENTS => {
                let index = free.next;
                table.make_segment(index, &mut free);
                free.next += 1;
                index
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
    let Some(slot) = table.slot(index) else { unreachable!("the segment of a used index is made") };
    let generation = slot.generation.load(Ordering::Acquire);
    let entry = Box::into_raw(Box::new(Entry { generation, object }));
    slot.current.store(entry, Ordering::Release);
    Ok(as_handle(encode(generation, index, K::TAG)))
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
/// every call of the C ABI goes through this). Always inlined: returned
/// through memory, a `Live` costs more than the lookup's own work.
#[inline(always)]
fn lookup<K: Kind>(raw: usize) -> Option<Live<K>> {
    let (slot, hazard, seen) = announce_slot::<K>(raw)?;
    hazard::fence();
    confirm_entry(raw, slot, hazard, seen)
}

/// A handle whose entry this thread has announced as in use, not yet
/// confirmed: [`get_all!`] announces every handle of a call, fences once,
/// then confirms each (one fence per call instead of one per handle).
pub(crate) struct Announced<K: Kind> {
    raw: usize,
    /// The slot, the hazard announcing what it held, and that pointer;
    /// None for a handle that names no slot of this kind (NULL included).
    seen: Option<(&'static Slot<K>, Hazard, *mut Entry<K>)>,
}

/// Announces the entry `h` names; see [`Announced`].
#[inline]
pub(crate) fn announce<K: Kind>(h: *const K::C) -> Announced<K> {
    announce_raw(h as usize)
}

#[inline]
fn announce_raw<K: Kind>(raw: usize) -> Announced<K> {
    Announced { raw, seen: announce_slot(raw) }
}

/// The slot `raw` names (None: no slot of this kind, NULL included), a
/// hazard announcing the entry it holds, and that entry (step H1 of
/// `hazard`'s argument).
#[inline(always)]
fn announce_slot<K: Kind>(raw: usize) -> Option<(&'static Slot<K>, Hazard, *mut Entry<K>)> {
    let (_, index, tag) = decode(raw);
    if tag != K::TAG {
        return None; // NULL's tag is 0
    }
    let slot = K::table().slot(index)?;
    let hazard = Hazard::new();
    let p = slot.current.load(Ordering::Relaxed);
    hazard.announce(p);
    Some((slot, hazard, p))
}

/// After the fence: the live entry `raw` names, if the slot still holds
/// the entry `seen` announced (or one confirmed after it) and that entry's
/// generation is the handle's.
#[inline(always)]
fn confirm_entry<K: Kind>(raw: usize, slot: &Slot<K>, hazard: Hazard, seen: *mut Entry<K>) -> Option<Live<K>> {
    let entry = NonNull::new(hazard.confirm(&slot.current, seen))?;
    let (generation, _, _) = decode(raw);
    // SAFETY: the hazard protects the entry; its generation never changes.
    (unsafe { entry.as_ref() }.generation == generation).then_some(Live { entry, _hazard: hazard })
}

impl<K: Kind> Announced<K> {
    /// After `hazard::fence()`: the live object (named `what` in errors),
    /// as [`get`] returns it.
    #[inline]
    pub(crate) fn confirm(self, what: &str) -> Result<Live<K>> {
        let raw = self.raw;
        self.confirm_live().ok_or_else(|| not_live::<K>(raw, what))
    }

    #[inline]
    fn confirm_live(self) -> Option<Live<K>> {
        let (slot, hazard, seen) = self.seen?;
        confirm_entry(self.raw, slot, hazard, seen)
    }
}

/// Looks up several handles with one fence: `get_all!(name: Kind = handle,
/// "what"; ...)` binds each `name` to its [`Live`] object, or returns the
/// first refusal, in the order given (as `get` one after another would).
macro_rules! get_all {
    ($($name:ident : $kind:ty = $h:expr, $what:expr);+ $(;)?) => {
        $(let $name = $crate::handles::announce::<$kind>($h);)+
        $crate::hazard::fence();
        $(let $name = $name.confirm($what)?;)+
    };
}
pub(crate) use get_all;

/// Why `raw` is not a live handle of kind `K` (NULL included).
#[cold]
#[inline(never)]
fn not_live<K: Kind>(raw: usize, what: &str) -> Error {
    if raw == 0 {
        return Error::invalid(format!("{what} is NULL"));
    }
    refusal::<K>(raw, what)
}

/// Removes the object behind `h` from its table and returns it; dropping
/// that destroys the object (or, while another thread's call still holds
/// it, leaves that to the end of such a call).
pub(crate) fn remove<K: Kind>(h: *mut K::C, what: &str) -> Result<Removed<K>> {
    let raw = h as usize;
    if raw == 0 {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    let live = lookup::<K>(raw).ok_or_else(|| refusal::<K>(raw, what))?;
    let (generation, index, _) = decode(raw);
    let table = K::table();
    let slot = table.slot(index).ok_or_else(|| refusal::<K>(raw, what))?;
    // Only the thread whose swap takes this very entry out frees it (our
    // hazard keeps its address from being reused meanwhile).
    let entry = live.entry;
    if slot.current.compare_exchange(entry.as_ptr(), ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(refusal::<K>(raw, what));
    }
    let mut free = table.free.lock().unwrap_or_else(|p| p.into_inner());
    if generation < GEN_MAX {
        slot.generation.store(generation + 1, Ordering::Release);
        free.list.push(index);
    } else {
        // Retired: never on the free list again, so no later handle can
        // equal one of its old ones.
        free.retired += 1;
    }
    drop(free);
    drop(live); // our own hazard must not keep the entry parked
    Ok(Removed { entry })
}

/// At the end of every C call (see `hazard::after_call`).
#[inline]
pub(crate) fn after_call() {
    hazard::after_call();
}

/// Implements [`Kind`] for `$t`, exposed as the C type `$c`.
macro_rules! handle_kind {
    ($t:ty => $c:ty, $name:literal) => {
        impl $crate::handles::Kind for $t {
            type C = $c;
            const TAG: u8 = $crate::handles::tag_of($name);
            const NAME: &'static str = $name;
            fn table() -> &'static $crate::handles::Table<Self> {
                $crate::sync::global! {
                    fn table() -> &'static $crate::handles::Table<$t> {
                        $crate::handles::Table::new()
                    }
                }
                table()
            }
        }
    };
}
pub(crate) use handle_kind;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

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
    fn a_slot_at_the_end_of_its_generations_is_retired_not_wrapped() {
        // A kind of its own: no other test takes slots off this table.
        struct W(u32);
        enum CW {}
        handle_kind!(W => CW, "fc_buffer");
        let first = insert(W(1)).unwrap();
        let (gen, index, _) = decode(first as usize);
        assert_eq!(gen, 1);
        remove::<W>(first, "w").unwrap();
        // 2^36 - 2 frees of this slot later: its next occupant gets the
        // last generation.
        W::table().set_next_generation(index, GEN_MAX);
        let last = insert(W(2)).unwrap();
        assert_eq!(decode(last as usize), (GEN_MAX, index, W::TAG), "the LIFO free list reuses the slot");
        assert_eq!(get::<W>(last, "w").unwrap().0, 2);
        assert!(get::<W>(first, "w").is_err(), "the first handle stays dead");
        let live = W::table().live();
        remove::<W>(last, "w").unwrap();
        assert_eq!(W::table().live(), live - 1, "a retired slot holds no live handle");
        // With a wrapping generation the slot would now hand out `first`
        // again (generation 1) or generation 0; instead it is retired.
        let next = insert(W(3)).unwrap();
        let (next_gen, next_index, _) = decode(next as usize);
        assert_ne!(next_index, index, "a retired slot is never reused");
        assert_eq!(next_gen, 1);
        assert_ne!(next as usize, first as usize);
        assert_ne!(next as usize, last as usize);
        for stale in [first, last] {
            let e = get::<W>(stale, "w").err().unwrap();
            assert!(e.to_string().contains("already freed"), "{e}");
            assert!(remove::<W>(stale, "w").is_err());
        }
        assert_eq!(get::<W>(next, "w").unwrap().0, 3);
        remove::<W>(next, "w").unwrap();
        // The generation field holds the largest generation whole.
        let h = encode(GEN_MAX, INDEX_MASK as u32, W::TAG);
        assert_eq!(h, usize::MAX - 0xFF + usize::from(W::TAG));
        assert_eq!(decode(h), (GEN_MAX, INDEX_MASK as u32, W::TAG));
        assert_eq!(GEN_MAX, (1 << 36) - 1);
    }

    #[test]
    fn wrong_kinds_null_and_foreign_pointers_are_named() {
        let h = insert(A(3)).unwrap();
        let as_b = h.cast::<CB>();
        let e = get::<B>(as_b, "kernel").err().unwrap();
        assert!(e.to_string().contains("is an fc_module handle, not an fc_kernel"), "{e}");
        let e = get::<A>(std::ptr::null(), "module").err().unwrap();
        assert!(matches!(e, Error::Lib(::fc_graph::Error::InvalidArgument(ref m)) if m == "module is NULL"), "{e}");
        let local = 5u64;
        let e = get::<A>((&local as *const u64).cast(), "module").err().unwrap();
        assert!(e.to_string().contains("not a handle made by this library"), "{e}");
        let forged = as_handle::<CA>(encode(1, (SEGMENT * SEGMENTS - 1) as u32, A::TAG));
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
        // Freed on another thread while this one's call holds it.
        let raw = h as usize;
        std::thread::scope(|s| {
            s.spawn(move || {
                drop(remove::<D>(as_handle::<CD>(raw), "d").unwrap());
                after_call();
            });
        });
        assert!(get::<D>(h, "d").is_err(), "freed for every new lookup");
        assert!(!flag.load(Ordering::SeqCst), "still alive for the call that holds it");
        after_call(); // this thread still holds it: nothing is destroyed
        assert!(!flag.load(Ordering::SeqCst), "still alive for the call that holds it");
        drop(in_flight);
        after_call();
        // Destroyed by this call's `after_call`, or (other tests of this
        // binary call `after_call` on their threads) by one that took it off
        // the parked list just before and destroys it outside the lock.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !flag.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            std::thread::yield_now();
        }
        assert!(flag.load(Ordering::SeqCst), "destroyed at the end of the call that let go");
        // Without a racing call, a free destroys at once.
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let h = insert(D(Dropped(flag.clone()))).unwrap();
        drop(remove::<D>(h, "d").unwrap());
        assert!(flag.load(Ordering::SeqCst), "destroyed by the free");
    }

    #[test]
    fn get_all_confirms_in_order_with_one_fence() {
        fn two(a: *const CA, b: *const CB) -> Result<u32> {
            get_all!(x: A = a, "first"; _y: B = b, "second");
            Ok(x.0)
        }
        let (ha, hb) = (insert(A(5)).unwrap(), insert(B).unwrap());
        assert_eq!(two(ha, hb).unwrap(), 5);
        // Each refusal names its handle; the first bad one in order wins.
        let e = two(std::ptr::null(), hb as *const CB).err().unwrap();
        assert!(e.to_string().contains("first is NULL"), "{e}");
        let e = two(ha, ha.cast::<CB>()).err().unwrap();
        assert!(e.to_string().contains("second") && e.to_string().contains("not an fc_kernel"), "{e}");
        remove::<B>(hb, "b").unwrap();
        let e = two(ha, hb).err().unwrap();
        assert!(e.to_string().contains("second") && e.to_string().contains("already freed"), "{e}");
        remove::<A>(ha, "a").unwrap();
        let e = two(ha, hb).err().unwrap();
        assert!(e.to_string().contains("first") && e.to_string().contains("already freed"), "{e}");
    }

    #[test]
    fn more_lookups_than_hazard_slots_at_once() {
        let handles: Vec<_> = (0..20).map(|i| insert(A(100 + i)).unwrap()).collect();
        let lives: Vec<_> = handles.iter().map(|&h| get::<A>(h, "a").unwrap()).collect();
        for (i, live) in lives.iter().enumerate() {
            assert_eq!(live.0, 100 + i as u32);
        }
        drop(lives);
        for h in handles {
            remove::<A>(h, "a").unwrap();
        }
    }

    #[test]
    fn exited_threads_records_are_reused() {
        let h = insert(A(9)).unwrap() as usize;
        let lookups = |n: usize| {
            for _ in 0..n {
                std::thread::spawn(move || assert_eq!(get::<A>(as_handle::<CA>(h), "a").unwrap().0, 9)).join().unwrap();
            }
        };
        lookups(4);
        let records = super::hazard::record_count();
        lookups(if cfg!(miri) { 70 } else { 200 });
        // Other tests of this binary run threads meanwhile: allow for them.
        assert!(super::hazard::record_count() <= records + 64, "records grow with threads that exited");
        remove::<A>(as_handle::<CA>(h), "a").unwrap();
    }

    #[test]
    fn lookups_while_a_thread_exits() {
        // A thread-local destructor registered before the library's runs
        // after it (destructors run in reverse order of registration).
        struct AtExit(usize);
        impl Drop for AtExit {
            fn drop(&mut self) {
                let h = as_handle::<CA>(self.0);
                let a = get::<A>(h, "a").unwrap();
                let b = get::<A>(h, "a").unwrap();
                assert_eq!(a.0 + b.0, 22);
                drop((a, b));
                after_call();
            }
        }
        thread_local! {
            static AT_EXIT: std::cell::Cell<Option<AtExit>> = const { std::cell::Cell::new(None) };
        }
        let h = insert(A(11)).unwrap() as usize;
        std::thread::spawn(move || {
            AT_EXIT.with(|c| c.set(Some(AtExit(h))));
            assert_eq!(get::<A>(as_handle::<CA>(h), "a").unwrap().0, 11);
        })
        .join()
        .unwrap();
        remove::<A>(as_handle::<CA>(h), "a").unwrap();
    }

    #[test]
    fn storm_of_lookups_and_frees_destroys_each_object_once() {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        static MADE: AtomicUsize = AtomicUsize::new(0);
        static DESTROYED: AtomicUsize = AtomicUsize::new(0);
        struct Canary {
            alive: AtomicBool,
            value: usize,
        }
        impl Drop for Canary {
            fn drop(&mut self) {
                assert!(self.alive.swap(false, Ordering::SeqCst), "destroyed twice");
                DESTROYED.fetch_add(1, Ordering::SeqCst);
            }
        }
        enum CC {}
        handle_kind!(Canary => CC, "fc_buckets");
        // Handles shared by all threads through one array: each thread
        // replaces some, looks up others (which may be freed under it).
        let shared: Arc<Vec<std::sync::atomic::AtomicUsize>> = Arc::new(
            (0..16)
                .map(|i| {
                    MADE.fetch_add(1, Ordering::SeqCst);
                    AtomicUsize::new(insert(Canary { alive: AtomicBool::new(true), value: i }).unwrap() as usize)
                })
                .collect(),
        );
        // Miri runs the same storm, smaller (it is ~10^4 times slower).
        let (threads, rounds) = if cfg!(miri) { (3, 60) } else { (6, 50_000usize) };
        let threads: Vec<_> = (0..threads)
            .map(|t| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    for i in 0..rounds {
                        let at = (i * 7 + t) % shared.len();
                        let h = shared[at].load(Ordering::SeqCst);
                        if i % 5 == t % 5 {
                            MADE.fetch_add(1, Ordering::SeqCst);
                            let new = insert(Canary { alive: AtomicBool::new(true), value: at }).unwrap() as usize;
                            let old = shared[at].swap(new, Ordering::SeqCst);
                            remove::<Canary>(as_handle::<CC>(old), "c").unwrap();
                        } else if i % 2 == 0 {
                            if let Ok(live) = get::<Canary>(as_handle::<CC>(h), "c") {
                                assert!(live.alive.load(Ordering::SeqCst), "used after destruction");
                                assert_eq!(live.value, at);
                            }
                        } else {
                            let next = (at + 1) % shared.len();
                            let h2 = shared[next].load(Ordering::SeqCst);
                            let both = || -> Result<(bool, bool)> {
                                get_all!(x: Canary = as_handle::<CC>(h), "x"; y: Canary = as_handle::<CC>(h2), "y");
                                assert_eq!((x.value, y.value), (at, next));
                                Ok((x.alive.load(Ordering::SeqCst), y.alive.load(Ordering::SeqCst)))
                            };
                            if let Ok(alive) = both() {
                                assert_eq!(alive, (true, true), "used after destruction");
                            }
                        }
                        after_call();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for h in shared.iter() {
            remove::<Canary>(as_handle::<CC>(h.load(Ordering::SeqCst)), "c").unwrap();
        }
        // Parked ones go with the next call that finds them unprotected:
        // this thread's, or that of a test running beside this one (which
        // parks objects of its own, so the parked count is not compared).
        for _ in 0..10_000 {
            after_call();
            if DESTROYED.load(Ordering::SeqCst) == MADE.load(Ordering::SeqCst) {
                break;
            }
            std::thread::yield_now();
        }
        assert_eq!(DESTROYED.load(Ordering::SeqCst), MADE.load(Ordering::SeqCst), "each object destroyed once");
    }

    #[test]
    fn racing_frees_succeed_once() {
        for _ in 0..if cfg!(miri) { 4 } else { 200 } {
            let h = insert(A(1)).unwrap() as usize;
            let wins: usize = (0..4)
                .map(|_| std::thread::spawn(move || remove::<A>(as_handle::<CA>(h), "a").is_ok() as usize))
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap())
                .sum();
            assert_eq!(wins, 1);
        }
    }

    /// An export shaped like `fc_buffer_size` (`value` over a lookup
    /// wrapper like `buffer::buffer`), for [`lookup_cost`] and instruction
    /// counts (`valgrind --tool=callgrind --toggle-collect='*probe_export*'`).
    #[inline(never)]
    extern "C" fn probe_export(h: *const CA) -> u32 {
        crate::value(0, || Ok(probe_get(h, "a")?.0))
    }

    fn probe_get(h: *const CA, what: &str) -> Result<Live<A>> {
        get::<A>(h, what)
    }

    /// CPU cost of one checked lookup as the C ABI makes it (`value`:
    /// catch_unwind, lookup, deref, release, `after_call`), in ns per call:
    /// `cargo test --release -p fcgraph-capi --lib lookup_cost -- --ignored --nocapture`
    /// (`LOOKUP_COST_BLOCKS=N`: blocks of 100,000 calls, 50 by default).
    #[test]
    #[ignore = "a microbenchmark: run it on purpose, in release"]
    fn lookup_cost() {
        let h = insert(A(7)).unwrap();
        const BATCH: usize = 100_000;
        let blocks_run = std::env::var("LOOKUP_COST_BLOCKS").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
        let mut best = f64::MAX;
        let mut blocks = Vec::new();
        for _ in 0..blocks_run {
            let t0 = std::time::Instant::now();
            for _ in 0..BATCH {
                std::hint::black_box(probe_export(std::hint::black_box(h)));
            }
            let ns = t0.elapsed().as_nanos() as f64 / BATCH as f64;
            best = best.min(ns);
            blocks.push(ns);
        }
        blocks.sort_by(f64::total_cmp);
        println!("lookup_cost: best {best:.2} ns, median {:.2} ns per call", blocks[blocks.len() / 2]);
        remove::<A>(h, "a").unwrap();
    }

    #[test]
    fn concurrent_insert_lookup_remove() {
        let (threads, rounds) = if cfg!(miri) { (3, 30) } else { (8, 2000u32) };
        let threads: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..rounds {
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

/// Loom models of the table (`scripts/loom.sh`): a lookup racing a free
/// and the slot's reuse, and two frees racing, over every interleaving of
/// the real code (tables of 4 slots under loom). An object's value is a
/// loom cell that its `Drop` overwrites: loom reports a read not ordered
/// before that write.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::model;
    use loom::cell::UnsafeCell;

    const DESTROYED: u64 = u64::MAX;

    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// How many objects the current execution of each model destroyed (a
    /// model's executions run one after another; each resets its count).
    static DROPS_REUSE: AtomicUsize = AtomicUsize::new(0);
    static DROPS_RACING: AtomicUsize = AtomicUsize::new(0);

    /// A value, and its model's count of destroyed objects.
    struct Object(UnsafeCell<u64>, &'static AtomicUsize);

    // SAFETY: shared references only read the cell; `Drop` (with `&mut`)
    // writes it, and loom checks that every read is ordered before that.
    unsafe impl Sync for Object {}

    impl Object {
        fn value(&self) -> u64 {
            // SAFETY: the read loom checks.
            self.0.with(|v| unsafe { *v })
        }
    }

    impl Drop for Object {
        fn drop(&mut self) {
            self.0.with_mut(|v| {
                // SAFETY: the write loom checks against every read.
                let v = unsafe { &mut *v };
                assert_ne!(*v, DESTROYED, "an object was destroyed twice");
                *v = DESTROYED;
            });
            self.1.fetch_add(1, Relaxed);
        }
    }

    enum CObject {}
    handle_kind!(Object => CObject, "fc_module");

    fn handle(raw: usize) -> *mut CObject {
        as_handle(raw)
    }

    /// A reader looks up the first handle while the main thread frees it
    /// and inserts a second object, which takes the same slot with the next
    /// generation: the stale handle resolves to the first object (alive) or
    /// to nothing, never to the second.
    #[test]
    fn loom_handles_lookup_free_reuse() {
        model("handles lookup/free/reuse", None, || {
            DROPS_REUSE.store(0, Relaxed);
            let first = insert(Object(UnsafeCell::new(1), &DROPS_REUSE)).expect("insert") as usize;
            let reader = loom::thread::spawn(move || {
                match get::<Object>(handle(first), "h") {
                    Ok(live) => assert_eq!(live.value(), 1, "a stale handle resolved to another object"),
                    Err(e) => assert!(e.to_string().contains("already freed"), "{e}"),
                }
                after_call();
            });
            drop(remove::<Object>(handle(first), "h").expect("the first free"));
            let second = insert(Object(UnsafeCell::new(2), &DROPS_REUSE)).expect("insert") as usize;
            assert_eq!(decode(second).1, decode(first).1, "the slot is reused");
            assert_ne!(second, first, "with the next generation");
            after_call();
            reader.join().expect("the reader");
            assert!(get::<Object>(handle(first), "h").is_err(), "the stale handle stays dead");
            assert_eq!(get::<Object>(handle(second), "h").expect("the live handle").value(), 2);
            drop(remove::<Object>(handle(second), "h").expect("the second free"));
            after_call();
            assert_eq!(DROPS_REUSE.load(Relaxed), 2, "each object destroyed once");
        });
    }

    /// Two threads free the same handle: exactly one succeeds, and the
    /// object is destroyed once, after the loser's lookup let go of it.
    #[test]
    fn loom_handles_racing_frees() {
        model("handles racing frees", None, || {
            DROPS_RACING.store(0, Relaxed);
            let h = insert(Object(UnsafeCell::new(3), &DROPS_RACING)).expect("insert") as usize;
            let other = loom::thread::spawn(move || {
                let won = remove::<Object>(handle(h), "h").map(|o| assert_eq!(o.value(), 3)).is_ok();
                after_call();
                won
            });
            let won = remove::<Object>(handle(h), "h").map(|o| assert_eq!(o.value(), 3)).is_ok();
            after_call();
            let other_won = other.join().expect("the other free");
            assert!(won != other_won, "exactly one free succeeds");
            after_call();
            assert_eq!(DROPS_RACING.load(Relaxed), 1, "destroyed once");
        });
    }
}

//! Hazard pointers: how a C call keeps the object behind a handle alive
//! while another thread frees the handle, without touching any counter
//! that other threads share.
//!
//! Every thread owns a [`Record`] of [`HAZARDS`] slots, published in one
//! global, append-only list. To use an object, a thread writes its address
//! into a free slot of its record, fences, and reads the table slot again:
//! if the address is still there, no free can destroy the object until the
//! slot is cleared. That is one store, one light fence and one load per
//! lookup, and one store when the call lets go; a call that looks up
//! several handles announces them all and fences once.
//!
//! A free takes the object out of its table, runs the heavy fence, and
//! reads every record. (The two fences are module `fences`: on Linux the
//! light one is only a compiler fence and the heavy one the system call
//! membarrier(2); elsewhere both are SeqCst fences. The argument below is
//! written for SeqCst fences; `fences` shows how the pair takes their
//! place.) An object nobody protects is destroyed at once, by the freeing
//! thread. One that another thread's call still protects is parked, and is
//! destroyed at the end of the next C call, on any thread, that finds it
//! unprotected: normally the end of the very call that held it.
//!
//! A thread takes a record on its first lookup and gives it back when it
//! exits, for the next new thread to reuse. Calls made while the thread
//! exits (from a pthread key destructor or a C++ `thread_local`
//! destructor, after Rust's thread-locals are gone) take a record for the
//! one lookup and give it back when the call lets go; so do lookups beyond
//! a thread's [`HAZARDS`] at once.
//!
//! # Why it is correct (the orderings, step by step)
//!
//! Names: `src` is the table slot a lookup reads (`Slot::current`), `h` a
//! hazard slot, `p` the object. "S" is the single total order of all
//! SeqCst fences; the rule used is C++20 [atomics.order]/4: if an atomic
//! write W is sequenced before SeqCst fence X, SeqCst fence Y is sequenced
//! before a read R of the same atomic, and X precedes Y in S, then R reads
//! W or a write later than W in that atomic's modification order.
//!
//! A holder (lookup, [`Hazard::announce`] / [`fence`] / [`Hazard::confirm`]):
//! - H1 `h.store(p, Release)` (p read from `src` just before, any order);
//! - H2 SeqCst fence F_h (the light fence);
//! - H3 `q = src.load(Acquire)`; if `q != p`, back to H1 with `q`; else it
//!   uses `*p` (reads only: the object's own fields, e.g. the generation);
//! - H4 `h.store(null or the next object, Release)` when it lets go; every
//!   store to any hazard slot is a release store (H1, H4).
//!
//! A reclaimer (`handles::remove` then [`retire`]):
//! - R1 takes `p` out of `src` (compare-and-swap; every place a lookup
//!   reads `p` from), before R2 in program order;
//! - R2 SeqCst fence F_r (the heavy fence);
//! - R3 reads every slot of every record with Acquire loads; destroys `p`
//!   only if none holds `p`, else parks it, and a later scan R3' (in
//!   [`reclaim`], at the end of a call) retries, with no fence of its own.
//!
//! Claim: when R3 destroys `p`, every use of `*p` under a hazard happens
//! before the destruction. Take a holder whose H3 confirmed `p`. Either:
//! - F_r precedes F_h in S. R1 is sequenced before F_r and H3 after F_h,
//!   so H3 reads R1's write or a later one: not `p` from the entry that R1
//!   took out. (If the address `p` was freed and reused by a new object
//!   stored into `src` later, H3 confirms that new object, which is then
//!   the `p` of this argument for the new object's own reclaimer; the
//!   generation check in `handles` tells the two apart.) So this case
//!   cannot confirm the retired object.
//! - F_h precedes F_r in S. H1 is sequenced before F_h and R3's load of
//!   `h` after F_r, so R3 reads H1's `p` (then it parks, does not destroy)
//!   or a later store to `h`: an H1 or H4 of the same holder, all release
//!   stores sequenced after its use of `*p`. R3's acquire load reading it
//!   synchronizes with it, so the use happens before R3, hence before the
//!   destruction. This is why H1 must be a release store: a relaxed
//!   re-announce (the bug Miri found) leaves R3 unordered with the use.
//!   A later store by another thread that took the record over is ordered
//!   after the holder's too: the holder cleared its slots (H4) before its
//!   release store of `owned = false`, which the next owner's acquire CAS
//!   reads.
//!
//! A later scan R3' destroys `p` only if it finds no slot holding `p`.
//! R3 happens before R3' (R3 is sequenced before the push of `p` under
//! the `parked` mutex, R3' after taking it). A holder that confirmed `p`
//! did so through the second case above (the first cannot confirm `p`; nor
//! can a lookup that starts later: `p` is out of `src`, and its address is
//! not reused while it is parked), so R3 read H1's `p` or a later store
//! to `h`; by read-read coherence R3' reads the same store or a later one,
//! and finding no `p` it reads a later one: a release store sequenced after
//! the use (or made after the holder let the record go), so the use
//! happens before R3' as above. (R3' walks every record R3 walked: the
//! list only grows at its head, and R3' reads the head after R3 did.) No
//! fence is needed for that.
//!
//! The records R3 walks: a record is initialised, then published by a
//! release CAS on `RECORDS` (and its `next` written before that CAS); the
//! walk starts with an acquire load of `RECORDS`. The holder's record was
//! published before its H1 (it took the record first), so by the same
//! fence rule, if F_h precedes F_r in S the walk reads that CAS or a later
//! one; later CASes are read-modify-writes, which continue the release
//! sequence, so the walk reaches the holder's record, initialised.
//!
//! Records and slots: a record is held by one thread at a time (`owned`,
//! taken with an acquire CAS, given back with a release store after its
//! slots are cleared), and a slot by one [`Hazard`] at a time
//! (`Record::used`, a plain cell only the owning thread touches; the
//! `owned` hand-over orders one owner's accesses before the next's).
//! `parked_count` is read relaxed after each call only as a hint: a stale
//! 0 delays a destruction to a later call, never makes one early (the
//! scan decides, under the mutex).
//!
//! The fast path of a lookup reads one thread-local (this thread's record)
//! and writes only its own record; letting go and `after_call` read no
//! thread-local (unless something is parked).
//!
//! Checked by `scripts/miri.sh` (Miri's data-race and Stacked Borrows
//! checks over this module's and `handles`'s tests, several schedules), by
//! loom (`scripts/loom.sh`: every interleaving of a lookup, a free and a
//! reclaim, with the models at the end of this module and of `handles`)
//! and by AddressSanitizer (`scripts/asan-handles.sh`). Miri and loom run
//! the symmetric pair of fences (they cannot make the system call).
//!
//! Why not a crate: `arc-swap` (the previous implementation) takes two
//! atomic read-modify-writes per lookup (its debt slot and the payback);
//! `haphazard` takes a record operation per hazard pointer; epoch schemes
//! (`crossbeam-epoch`, `seize`) destroy a freed object at some later
//! collection, while a C caller expects `fc_buffer_free` to release the
//! device memory by the end of the call that last used it. On an H200
//! host, one lookup with release as the C ABI makes it costs 18-20 ns with
//! arc-swap and 10.6-12 ns with this module (GPU runs 35-36, `handle_ab`).
//! Since then the success path of an export carries no error value, reads
//! one thread-local and runs no fence instruction: 72 instructions per
//! `fc_buffer_size`-shaped call instead of 96 (callgrind,
//! `handles::tests::lookup_cost`).

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use crate::fences;
use crate::sync::{global, thread_local, AtomicBool, AtomicPtr, AtomicUsize, Mutex, Ordering};

/// Hazard slots per thread record (a call looks up at most a few handles).
/// At most 8 (`Record::used` is a `u8` bit set) and a power of two; 2 under
/// loom, where every slot a scan reads is a point where threads may switch.
const HAZARDS: usize = if cfg!(loom) { 2 } else { 8 };
const _: () = assert!(HAZARDS <= 8 && HAZARDS.is_power_of_two());

/// One thread's hazard slots.
struct Record {
    hazards: [AtomicPtr<()>; HAZARDS],
    /// Which slots a [`Hazard`] holds (bit i: slot i). Read and written only
    /// by the thread that owns the record, so a plain cell: ownership passes
    /// from one thread to the next through `owned` (a release store, then
    /// an acquire compare-and-swap), and scans never read it.
    used: Cell<u8>,
    /// Whether a thread (or a single exiting-thread lookup) holds the record.
    owned: AtomicBool,
    /// The next record of the global list; set before the record is
    /// published, never changed after.
    next: AtomicPtr<Record>,
}

/// The state every thread shares: the records and the parked objects.
struct Domain {
    /// The head of the list of every record ever made (records are never
    /// freed).
    records: AtomicPtr<Record>,
    parked: Mutex<Vec<Parked>>,
    /// How many objects are parked (read without the lock after every call).
    parked_count: AtomicUsize,
}

global! {
    fn domain() -> &'static Domain {
        Domain {
            records: AtomicPtr::new(ptr::null_mut()),
            parked: Mutex::new(Vec::new()),
            parked_count: AtomicUsize::new(0),
        }
    }
}

/// Every record, newest first.
fn records() -> impl Iterator<Item = &'static Record> {
    let mut next = domain().records.load(Ordering::Acquire);
    std::iter::from_fn(move || {
        // SAFETY: records are leaked boxes, never freed; the list only grows
        // at its head, and `next` is written before a record is published.
        let record = unsafe { next.as_ref() }?;
        next = record.next.load(Ordering::Acquire);
        Some(record)
    })
}

/// A record no one holds (or a new one), now held by the caller.
fn acquire_record() -> &'static Record {
    for record in records() {
        if !record.owned.load(Ordering::Relaxed)
            && record.owned.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            return record;
        }
    }
    let record: &'static Record = Box::leak(Box::new(Record {
        hazards: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        used: Cell::new(0),
        owned: AtomicBool::new(true),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    let head = &domain().records;
    let mut next = head.load(Ordering::Relaxed);
    loop {
        record.next.store(next, Ordering::Relaxed);
        match head.compare_exchange_weak(
            next,
            record as *const Record as *mut Record,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return record,
            Err(now) => next = now,
        }
    }
}

/// This thread's record (NULL until its first lookup). No `Drop`, so it
/// stays readable while the thread's other thread-locals are destroyed.
struct Local(Cell<*const Record>);

impl Local {
    fn record(&self) -> Option<&'static Record> {
        // SAFETY: NULL or a record, and records are never freed.
        unsafe { self.0.get().as_ref() }
    }
}

/// Gives the thread's record back when the thread exits.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        // Under loom, a model that failed drops its threads' locals while
        // unwinding, outside the model, where loom's cells cannot be read.
        #[cfg(loom)]
        if std::thread::panicking() {
            return;
        }
        let _ = LOCAL.try_with(|local| {
            if let Some(record) = local.record() {
                local.0.set(ptr::null());
                // A slot still in use (a call that never returned) keeps
                // the record out of reuse.
                if record.used.get() == 0 {
                    record.owned.store(false, Ordering::Release);
                }
            }
        });
    }
}

thread_local! {
    static LOCAL: Local = const { Local(Cell::new(ptr::null())) };
    static EXIT: ExitGuard = const { ExitGuard };
}

/// One hazard slot held by this thread: what it protects cannot be
/// destroyed until the hazard is dropped. Not `Send`: the slot belongs to
/// this thread's record.
pub(crate) struct Hazard {
    /// The record the slot is in (a reference to the whole record, so the
    /// slot, `used` and `owned` are all reachable from it).
    record: &'static Record,
    /// The slot's index in `record.hazards`, which is also its bit in
    /// `record.used`, or [`ALONE`]: the slot is the last of a record taken
    /// for this hazard alone (an exiting thread, or all of the thread's
    /// slots in use).
    bit: u8,
    _not_send: PhantomData<*const ()>,
}

const ALONE: u8 = u8::MAX;

impl Hazard {
    /// A free hazard slot of this thread: one thread-local read, then the
    /// thread's own record.
    #[inline]
    pub(crate) fn new() -> Hazard {
        if let Ok(Some(record)) = LOCAL.try_with(Local::record) {
            let used = record.used.get();
            let bit = (!used).trailing_zeros();
            if (bit as usize) < HAZARDS {
                record.used.set(used | 1 << bit);
                return Hazard { record, bit: bit as u8, _not_send: PhantomData };
            }
        }
        Hazard::new_slow()
    }

    /// [`Hazard::new`] for a thread's first lookup, an exiting thread, or
    /// all slots in use.
    #[cold]
    #[inline(never)]
    fn new_slow() -> Hazard {
        let first = LOCAL.try_with(|local| {
            if local.record().is_some() {
                return false; // all slots in use
            }
            // Registers the record's return at thread exit; an exiting
            // thread keeps no record.
            if EXIT.try_with(|_| ()).is_err() {
                return false;
            }
            fences::decide();
            local.0.set(acquire_record());
            true
        });
        if matches!(first, Ok(true)) {
            return Hazard::new();
        }
        Hazard { record: acquire_record(), bit: ALONE, _not_send: PhantomData }
    }

    /// This hazard's slot.
    #[inline]
    fn slot(&self) -> &'static AtomicPtr<()> {
        // `% HAZARDS` maps ALONE to the last slot (HAZARDS is a power of
        // two, so this is a mask, and the index needs no bounds check).
        &self.record.hazards[usize::from(self.bit) % HAZARDS]
    }

    /// Announces `p` (read from a source) without the fence: a batch of
    /// lookups announces each, then calls [`fence`] once, then
    /// [`Hazard::confirm`]s each.
    ///
    /// A release store (step H1 of the module doc): a reclaimer whose scan
    /// reads this value is ordered after every use this thread made of
    /// what the slot protected before.
    #[inline]
    pub(crate) fn announce<T>(&self, p: *mut T) {
        self.slot().store(p.cast(), Ordering::Release);
    }

    /// After [`announce`](Hazard::announce)`(seen)` and a [`fence`]: the
    /// pointer `src` holds now, protected as by [`Hazard::protect`].
    #[inline]
    pub(crate) fn confirm<T>(&self, src: &AtomicPtr<T>, seen: *mut T) -> *mut T {
        let now = src.load(Ordering::Acquire);
        if now == seen {
            return now;
        }
        self.protect_from(src, now)
    }

    /// The pointer `src` holds now, protected by this hazard until it is
    /// dropped or protects another (NULL: nothing to protect). The tests'
    /// and models' entry; lookups announce and confirm.
    #[cfg(test)]
    pub(crate) fn protect<T>(&self, src: &AtomicPtr<T>) -> *mut T {
        self.protect_from(src, src.load(Ordering::Relaxed))
    }

    /// [`Hazard::protect`], starting from `p`, read from `src`.
    #[inline]
    fn protect_from<T>(&self, src: &AtomicPtr<T>, mut p: *mut T) -> *mut T {
        loop {
            self.announce(p);
            self::fence();
            let now = src.load(Ordering::Acquire);
            if now == p {
                return p;
            }
            p = now;
        }
    }
}

/// Between announcing hazards and confirming them (step H2 of the module
/// doc): `fences::light`. Pairs with the heavy fence in `retire` (R2):
/// either its scan sees an announced slot, or the confirming load sees the
/// object gone.
#[inline]
pub(crate) fn fence() {
    fences::light();
}

impl Drop for Hazard {
    #[inline]
    fn drop(&mut self) {
        // H4: release, like every store to a slot.
        self.slot().store(ptr::null_mut(), Ordering::Release);
        if self.bit == ALONE {
            self.record.owned.store(false, Ordering::Release);
        } else {
            self.record.used.set(self.record.used.get() & !(1 << self.bit));
        }
    }
}

/// An object taken out of its table, waiting until no call protects it.
struct Parked {
    ptr: NonNull<()>,
    destroy: unsafe fn(NonNull<()>),
}

// SAFETY: parked objects are `Send + Sync` (handle kinds are) and owned by
// the list alone: no table holds them any more.
unsafe impl Send for Parked {}

/// Whether any record protects `p`: step R3, after a fence (R2) or after a
/// scan that came after one (see `reclaim`).
fn protected(p: *mut ()) -> bool {
    records().any(|r| r.hazards.iter().any(|h| h.load(Ordering::Acquire) == p))
}

/// Destroys `ptr` with `destroy` once no call protects it: now, in this
/// thread, when none does.
///
/// # Safety
/// `ptr` was taken out of every place a lookup reads it from before this
/// call, is retired once, and `destroy(ptr)` is sound from any thread.
pub(crate) unsafe fn retire(ptr: NonNull<()>, destroy: unsafe fn(NonNull<()>)) {
    if !fences::heavy() {
        // Never expected (see `fences`): without the fence no scan can
        // tell whether a lookup holds the object, so it is leaked.
        return;
    }
    if !protected(ptr.as_ptr()) {
        // SAFETY: unreachable for new lookups and protected by none.
        unsafe { destroy(ptr) };
        return;
    }
    let d = domain();
    let mut parked = d.parked.lock().unwrap_or_else(|p| p.into_inner());
    parked.push(Parked { ptr, destroy });
    d.parked_count.store(parked.len(), Ordering::Relaxed);
    // Destroyed by the `after_call` of a call that finds it unprotected:
    // this one's, when the holder let go in the meantime.
}

/// At the end of every C call: destroys the parked objects no call
/// protects any more. One relaxed load when nothing is parked (a hint: a
/// stale 0 delays a destruction to a later call, never makes one early).
#[inline]
pub(crate) fn after_call() {
    if domain().parked_count.load(Ordering::Relaxed) != 0 {
        after_call_parked();
    }
}

/// [`after_call`] with objects parked: only a thread that holds no hazard
/// destroys (no object is destroyed inside a call still using others).
#[cold]
#[inline(never)]
fn after_call_parked() {
    let idle = LOCAL.try_with(|l| l.record().is_none_or(|r| r.used.get() == 0)).unwrap_or(true);
    if idle {
        reclaim();
    }
}

fn reclaim() {
    let d = domain();
    let ready: Vec<Parked> = {
        let mut parked = d.parked.lock().unwrap_or_else(|p| p.into_inner());
        // No fence: each parked object's first scan (in `retire`) came after
        // its fence, and happens before this one (the mutex); see the
        // module doc.
        let (ready, keep) = parked.drain(..).partition(|o| !protected(o.ptr.as_ptr()));
        *parked = keep;
        d.parked_count.store(parked.len(), Ordering::Relaxed);
        ready
    };
    for o in ready {
        // SAFETY: parked objects are unreachable for new lookups (see
        // `retire`), and a scan ordered after their first one found none
        // protecting them.
        unsafe { (o.destroy)(o.ptr) };
    }
}

/// Records made so far (tests: exited threads' records are reused).
#[cfg(all(test, not(loom)))]
pub(crate) fn record_count() -> usize {
    records().count()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// The ordering Miri once found broken: a holder uses an object, then
    /// re-announces its slot for another object (not yet fenced, as
    /// `get_all!` does). A reclaimer whose scan reads the re-announcement
    /// destroys the first object at once; that is sound only because the
    /// re-announce is a release store (step H1 of the module doc), which
    /// orders the holder's use before the destruction. With a relaxed
    /// store, Miri reports a data race here under some thread schedules
    /// (`scripts/miri.sh` runs it under 32 seeds; a relaxed H1 failed at
    /// seed 15).
    #[test]
    fn a_re_announce_orders_the_earlier_use_before_a_reclaim() {
        /// Whether the retired object (the one holding 7) was destroyed.
        static DESTROYED: AtomicBool = AtomicBool::new(false);
        unsafe fn destroy(p: NonNull<()>) {
            // SAFETY: `p` is one of the leaked `Box<u64>`s below, destroyed once.
            let b = unsafe { Box::from_raw(p.cast::<u64>().as_ptr()) };
            if *b == 7 {
                DESTROYED.store(true, Ordering::SeqCst);
            }
        }
        let object = NonNull::from(Box::leak(Box::new(7u64)));
        let other = NonNull::from(Box::leak(Box::new(0u64)));
        let src = AtomicPtr::new(object.as_ptr());
        let other_src = AtomicPtr::new(other.as_ptr());
        let re_announced = AtomicBool::new(false);
        let (src, other_src, re_announced) = (&src, &other_src, &re_announced);
        std::thread::scope(|s| {
            let holder = s.spawn(move || {
                let hazard = Hazard::new();
                let p = hazard.protect(src);
                // SAFETY: protected by `hazard`.
                let value = unsafe { *p };
                // Re-announced (relaxed-flag handshake: no other ordering).
                hazard.announce(other_src.load(Ordering::Relaxed));
                re_announced.store(true, Ordering::Relaxed);
                while re_announced.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                drop(hazard);
                value
            });
            while !re_announced.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            assert_eq!(src.swap(ptr::null_mut(), Ordering::AcqRel), object.as_ptr());
            // SAFETY: taken out of `src` above, retired once.
            unsafe { retire(object.cast(), destroy) };
            re_announced.store(false, Ordering::Relaxed);
            assert_eq!(holder.join().unwrap(), 7);
        });
        // Destroyed at once (the slot names `other`) or parked when the scan
        // read the earlier announcement; reclaimed by the next call after
        // the holder let go (this thread's, or one of a test running beside
        // this one, which parks and reclaims objects of its own: the parked
        // count is not this test's to compare).
        for _ in 0..10_000 {
            after_call();
            if DESTROYED.load(Ordering::SeqCst) {
                break;
            }
            std::thread::yield_now();
        }
        assert!(DESTROYED.load(Ordering::SeqCst), "the retired object was destroyed");
        // SAFETY: `other` was never retired; this is its only owner.
        unsafe { destroy(other.cast()) };
    }
}

/// Loom models of the protocol (`scripts/loom.sh`): every interleaving of a
/// lookup and a free, each atomic access of the real code a point where
/// threads may switch, and loads returning any store the memory model
/// allows. An object's value is a loom cell that its destruction writes:
/// loom reports a read not ordered before that write (a use after retire),
/// and a reader that confirmed its hazard asserts it read the live value.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::model;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    const LIVE: u64 = 7;
    const DESTROYED: u64 = 0xDEAD;

    /// A retirable object (freed at the end of its model, so that a read
    /// the protocol fails to order reads a cell loom still tracks).
    struct Object(UnsafeCell<u64>);

    fn object() -> *mut () {
        Box::into_raw(Box::new(Object(UnsafeCell::new(LIVE)))).cast()
    }

    /// The value of the object at `p`.
    fn read(p: *mut ()) -> u64 {
        // SAFETY: `p` is one of `object()`'s, freed only at the model's end;
        // the cell's read is what loom checks.
        unsafe { (*p.cast::<Object>()).0.with(|v| *v) }
    }

    unsafe fn destroy(p: NonNull<()>) {
        // SAFETY: one of `object()`'s, alive until the model's end.
        let object = unsafe { p.cast::<Object>().as_ref() };
        object.0.with_mut(|v| {
            // SAFETY: the cell's write is what loom checks against reads.
            let v = unsafe { &mut *v };
            assert_eq!(*v, LIVE, "an object was destroyed twice");
            *v = DESTROYED;
        });
    }

    fn free_memory(p: *mut ()) {
        // SAFETY: one of `object()`'s, no longer used by any thread.
        drop(unsafe { Box::from_raw(p.cast::<Object>()) });
    }

    /// A reader protects the object and reads it (and then, with
    /// `re_announce`, announces another object in the same slot, as
    /// `get_all!` does before its fence) while the main thread takes the
    /// object out and retires it; everything retired is destroyed by the
    /// time both threads' calls have ended.
    fn protect_vs_retire(re_announce: bool) {
        let (retired, other) = (object(), object());
        let src = Arc::new(AtomicPtr::new(retired));
        let reader = {
            let src = src.clone();
            let other = other as usize;
            loom::thread::spawn(move || {
                let hazard = Hazard::new();
                let p = hazard.protect(&src);
                if !p.is_null() {
                    assert_eq!(read(p), LIVE, "a reader that confirmed its hazard read a destroyed object");
                }
                if re_announce {
                    hazard.announce(ptr::null_mut::<u8>().wrapping_add(other).cast::<()>());
                }
                drop(hazard);
                after_call();
            })
        };
        let taken = src.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: taken out of `src`, the only place a lookup reads it from;
        // retired once.
        unsafe { retire(NonNull::new(taken).expect("the object"), destroy) };
        after_call();
        reader.join().expect("the reader");
        after_call();
        assert_eq!(read(retired), DESTROYED, "the retired object was reclaimed");
        assert_eq!(read(other), LIVE, "an object never retired stays alive");
        free_memory(retired);
        free_memory(other);
    }

    #[test]
    fn loom_hazard_protect_retire() {
        model("hazard protect/retire", None, || protect_vs_retire(false));
    }

    #[test]
    fn loom_hazard_re_announce_retire() {
        model("hazard re-announce/retire", None, || protect_vs_retire(true));
    }
}

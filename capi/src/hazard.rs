//! Hazard pointers: how a C call keeps the object behind a handle alive
//! while another thread frees the handle, without touching any counter
//! that other threads share.
//!
//! Every thread owns a [`Record`] of [`HAZARDS`] slots, published in one
//! global, append-only list. To use an object, a thread writes its address
//! into a free slot of its record, fences, and reads the table slot again:
//! if the address is still there, no free can destroy the object until the
//! slot is cleared. That is one store, one fence and one load per lookup,
//! and one store when the call lets go; a call that looks up several
//! handles announces them all and fences once.
//!
//! A free takes the object out of its table, fences, and reads every
//! record. An object nobody protects is destroyed at once, by the freeing
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
//! - H2 SeqCst fence F_h;
//! - H3 `q = src.load(Acquire)`; if `q != p`, back to H1 with `q`; else it
//!   uses `*p` (reads only: the object's own fields, e.g. the generation);
//! - H4 `h.store(null or the next object, Release)` when it lets go; every
//!   store to any hazard slot is a release store (H1, H4).
//!
//! A reclaimer (`handles::remove` then [`retire`], or [`reclaim`]):
//! - R1 takes `p` out of `src` (compare-and-swap; every place a lookup
//!   reads `p` from), before R2 in program order;
//! - R2 SeqCst fence F_r (in `retire`; `reclaim`'s fence comes after
//!   `retire`'s F_r of the same object: `retire` pushes under the `PARKED`
//!   mutex, `reclaim` takes it, so F_r(retire) happens before, hence
//!   precedes in S, F_r(reclaim));
//! - R3 reads every slot of every record with Acquire loads; destroys `p`
//!   only if none holds `p`, else parks it (and a later R2/R3 retries).
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
//! slots are cleared), and a slot by one [`Hazard`] at a time (`Local::used`,
//! this thread only). `PARKED_COUNT` is read relaxed after each call only
//! as a hint: a stale 0 delays a destruction to a later call, never
//! makes one early (the scan decides, under the mutex, after its fence).
//!
//! Checked by `scripts/miri.sh` (Miri's data-race and Stacked Borrows
//! checks over this module's and `handles`'s tests, several schedules) and
//! by AddressSanitizer (`scripts/asan-handles.sh`).
//!
//! Why not a crate: `arc-swap` (the previous implementation) takes two
//! atomic read-modify-writes per lookup (its debt slot and the payback);
//! `haphazard` takes a record operation per hazard pointer; epoch schemes
//! (`crossbeam-epoch`, `seize`) destroy a freed object at some later
//! collection, while a C caller expects `fc_buffer_free` to release the
//! device memory by the end of the call that last used it. On an H200
//! host, one lookup with release as the C ABI makes it costs 18-20 ns with
//! arc-swap and 10.6-12 ns with this module (GPU runs 35-36, `handle_ab`).

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Hazard slots per thread record (a call looks up at most a few handles).
/// At most 8 (`Local::used` is a `u8` bit set) and a power of two.
const HAZARDS: usize = 8;
const _: () = assert!(HAZARDS <= 8 && HAZARDS.is_power_of_two());

/// One thread's hazard slots.
struct Record {
    hazards: [AtomicPtr<()>; HAZARDS],
    /// Whether a thread (or a single exiting-thread lookup) holds the record.
    owned: AtomicBool,
    /// The next record of the global list; set before the record is
    /// published, never changed after.
    next: AtomicPtr<Record>,
}

/// The head of the list of every record ever made (records are never freed).
static RECORDS: AtomicPtr<Record> = AtomicPtr::new(ptr::null_mut());

/// Every record, newest first.
fn records() -> impl Iterator<Item = &'static Record> {
    let mut next = RECORDS.load(Ordering::Acquire);
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
        hazards: [const { AtomicPtr::new(ptr::null_mut()) }; HAZARDS],
        owned: AtomicBool::new(true),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    let mut head = RECORDS.load(Ordering::Relaxed);
    loop {
        record.next.store(head, Ordering::Relaxed);
        match RECORDS.compare_exchange_weak(
            head,
            record as *const Record as *mut Record,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return record,
            Err(now) => head = now,
        }
    }
}

/// This thread's record and which of its slots are in use. No `Drop`, so
/// it stays readable while the thread's other thread-locals are destroyed.
struct Local {
    record: Cell<*const Record>,
    used: Cell<u8>,
}

/// Gives the thread's record back when the thread exits.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|local| {
            // SAFETY: records are never freed.
            if let Some(record) = unsafe { local.record.get().as_ref() } {
                local.record.set(ptr::null());
                // A slot still in use (a call that never returned) keeps
                // the record out of reuse.
                if local.used.get() == 0 {
                    record.owned.store(false, Ordering::Release);
                }
            }
        });
    }
}

thread_local! {
    static LOCAL: Local = const { Local { record: Cell::new(ptr::null()), used: Cell::new(0) } };
    static EXIT: ExitGuard = const { ExitGuard };
}

/// One hazard slot held by this thread: what it protects cannot be
/// destroyed until the hazard is dropped. Not `Send`: the slot belongs to
/// this thread's record.
pub(crate) struct Hazard {
    /// The record the slot is in (a reference to the whole record, so the
    /// slot and the record's `owned` flag are both reachable from it).
    record: &'static Record,
    /// The slot's index in `record.hazards`, which is also its bit in
    /// `Local::used`, or [`ALONE`]: the slot is the first of a record taken
    /// for this hazard alone (an exiting thread, or all of the thread's
    /// slots in use).
    bit: u8,
    _not_send: PhantomData<*const ()>,
}

const ALONE: u8 = u8::MAX;

impl Hazard {
    /// A free hazard slot of this thread.
    #[inline]
    pub(crate) fn new() -> Hazard {
        let own = LOCAL.try_with(|local| {
            // SAFETY: records are never freed.
            let record = unsafe { local.record.get().as_ref() }?;
            let used = local.used.get();
            let bit = (!used).trailing_zeros() as usize;
            if bit >= HAZARDS {
                return None;
            }
            local.used.set(used | 1 << bit);
            Some(Hazard { record, bit: bit as u8, _not_send: PhantomData })
        });
        match own {
            Ok(Some(hazard)) => hazard,
            _ => Hazard::new_slow(),
        }
    }

    /// [`Hazard::new`] for a thread's first lookup, an exiting thread, or
    /// all slots in use.
    #[cold]
    #[inline(never)]
    fn new_slow() -> Hazard {
        let first = LOCAL.try_with(|local| {
            if !local.record.get().is_null() {
                return false; // all slots in use
            }
            // Registers the record's return at thread exit; an exiting
            // thread keeps no record.
            if EXIT.try_with(|_| ()).is_err() {
                return false;
            }
            local.record.set(acquire_record());
            true
        });
        if first == Ok(true) {
            return Hazard::new();
        }
        Hazard { record: acquire_record(), bit: ALONE, _not_send: PhantomData }
    }

    /// This hazard's slot.
    #[inline]
    fn slot(&self) -> &'static AtomicPtr<()> {
        // `% HAZARDS` maps ALONE to slot 0 (HAZARDS is a power of two, so
        // this is a mask, and the index needs no bounds check).
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
        self.protect(src)
    }

    /// The pointer `src` holds now, protected by this hazard until it is
    /// dropped or protects another (NULL: nothing to protect).
    #[inline]
    pub(crate) fn protect<T>(&self, src: &AtomicPtr<T>) -> *mut T {
        let mut p = src.load(Ordering::Relaxed);
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
/// doc). Pairs with the fence in `retire` / `reclaim` (R2): either their
/// scan sees an announced slot, or the confirming load sees the object
/// gone.
#[inline]
pub(crate) fn fence() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

impl Drop for Hazard {
    #[inline]
    fn drop(&mut self) {
        // H4: release, like every store to a slot.
        self.slot().store(ptr::null_mut(), Ordering::Release);
        if self.bit == ALONE {
            self.record.owned.store(false, Ordering::Release);
        } else {
            let bit = self.bit;
            let _ = LOCAL.try_with(|local| local.used.set(local.used.get() & !(1 << bit)));
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

static PARKED: Mutex<Vec<Parked>> = Mutex::new(Vec::new());
/// How many objects are parked (read without the lock after every call).
static PARKED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Whether any record protects `p`. Call after a SeqCst fence.
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
    fence();
    if !protected(ptr.as_ptr()) {
        // SAFETY: unreachable for new lookups and protected by none.
        unsafe { destroy(ptr) };
        return;
    }
    {
        let mut parked = PARKED.lock().unwrap_or_else(|p| p.into_inner());
        parked.push(Parked { ptr, destroy });
        PARKED_COUNT.store(parked.len(), Ordering::SeqCst);
    }
    // Destroyed by the `after_call` of a call that finds it unprotected:
    // this one's, when the holder let go in the meantime.
}

/// At the end of every C call: destroys the parked objects no call
/// protects any more. One relaxed load when nothing is parked; only a
/// thread that holds no hazard destroys (no object is destroyed inside a
/// call that is still using others).
#[inline]
pub(crate) fn after_call() {
    if PARKED_COUNT.load(Ordering::Relaxed) != 0 && LOCAL.try_with(|l| l.used.get() == 0).unwrap_or(true) {
        reclaim();
    }
}

#[cold]
#[inline(never)]
fn reclaim() {
    let ready: Vec<Parked> = {
        let mut parked = PARKED.lock().unwrap_or_else(|p| p.into_inner());
        fence();
        let (ready, keep) = parked.drain(..).partition(|o| !protected(o.ptr.as_ptr()));
        *parked = keep;
        PARKED_COUNT.store(parked.len(), Ordering::SeqCst);
        ready
    };
    for o in ready {
        // SAFETY: parked objects are unreachable for new lookups (see
        // `retire`), and the scan after the fence found none protecting it.
        unsafe { (o.destroy)(o.ptr) };
    }
}

/// Records made so far (tests: exited threads' records are reused).
#[cfg(test)]
pub(crate) fn record_count() -> usize {
    records().count()
}

#[cfg(test)]
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

//! Locking: a mutex taken over when poisoned ([`lock`]), the recording
//! sink's spin lock ([`SpinLock`]), and [`shim`], the primitives of the
//! state loom model-checks: std's, or loom's when the crate is built with
//! `--cfg loom` (`scripts/loom.sh`), so that loom checks the very code the
//! library runs, not a copy of it.
//!
//! Every mutex of the library guards state that stays consistent across a
//! panic in user code (such as a break function's), so a poisoned mutex is
//! taken over as it is.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

use shim::{AtomicBool, MutPtr, Ordering, UnsafeCell};

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the state loom checks is made of (the recording sink, the capture
/// state and the per-thread break frames): std's atomics, mutex,
/// thread-locals and cell, or loom's under `--cfg loom`. Under loom every
/// atomic operation and every lock is a point where the model may switch
/// threads, loads may return any store the memory model allows, and each
/// access to an [`UnsafeCell`] is checked against every other for a race.
pub(crate) mod shim {
    #[cfg(not(loom))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::thread_local;

    #[cfg(loom)]
    pub(crate) use loom::cell::{MutPtr, UnsafeCell};
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    #[cfg(loom)]
    pub(crate) use loom::sync::{Mutex, MutexGuard};

    /// Locks a [`Mutex`] of the shim, recovering the data if a panicking
    /// thread poisoned it (see [`super::lock`]).
    #[cfg(not(loom))]
    pub(crate) use super::lock;
    /// Locks a [`Mutex`] of the shim (loom's is never poisoned).
    #[cfg(loom)]
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// loom's `thread_local!`, for declarations written as std's with a
    /// `const { .. }` initialiser (loom's macro takes a plain expression).
    #[cfg(loom)]
    macro_rules! loom_thread_local {
        ($($(#[$attr:meta])* static $name:ident: $t:ty = const { $init:expr };)+) => {
            loom::thread_local! {
                $($(#[$attr])* static $name: $t = $init;)+
            }
        };
    }
    #[cfg(loom)]
    pub(crate) use loom_thread_local as thread_local;

    /// A cell whose data its owner hands out by hand ([`super::SpinLock`]):
    /// std's `UnsafeCell` with loom's interface (under loom, loom's, which
    /// checks every access).
    #[cfg(not(loom))]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(data: T) -> UnsafeCell<T> {
            UnsafeCell(std::cell::UnsafeCell::new(data))
        }

        /// A pointer to the data (loom counts it as a mutable access for as
        /// long as it lives).
        #[inline(always)]
        pub(crate) fn get_mut(&self) -> MutPtr<T> {
            MutPtr(self.0.get())
        }
    }

    /// A raw pointer to an [`UnsafeCell`]'s data.
    #[cfg(not(loom))]
    pub(crate) struct MutPtr<T>(*mut T);

    #[cfg(not(loom))]
    impl<T> MutPtr<T> {
        /// The data.
        ///
        /// # Safety
        ///
        /// As dereferencing a `*mut T`: the cell lives, and no other
        /// reference to its data is used meanwhile.
        #[inline(always)]
        #[allow(clippy::mut_from_ref)] // a raw pointer's dereference, as loom's
        pub(crate) unsafe fn deref(&self) -> &mut T {
            // SAFETY: the caller's (see above).
            unsafe { &mut *self.0 }
        }
    }

    /// Lets the thread that holds a lock run (the waiting loop of
    /// [`super::SpinLock`]): under loom, a yield to the model, which then
    /// runs another thread.
    #[cfg(loom)]
    pub(crate) fn relax(_spins: &mut u32) {
        loom::thread::yield_now();
    }

    /// How many times a waiter of [`super::SpinLock`] spins before it
    /// starts yielding its time slice: the lock is held for one push, a few
    /// nanoseconds, so a waiter usually gets it within a few spins; a
    /// holder descheduled meanwhile gets the core back by the yields.
    #[cfg(not(loom))]
    const SPINS: u32 = 16;

    /// Lets the thread that holds a lock run (the waiting loop of
    /// [`super::SpinLock`]): a spin-loop hint for the first [`SPINS`]
    /// rounds, then a yield of the time slice each round.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn relax(spins: &mut u32) {
        if *spins < SPINS {
            *spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A lock for state held a few nanoseconds at a time by many calls (the
/// recording sink: one push per recorded launch): taking it is one atomic
/// compare-exchange (acquire) and releasing it one store (release), where a
/// `Mutex` makes two atomic read-modify-writes (about 7 against 11 ns a
/// lock and release, uncontended, on a 2-core x86 VM); a thread that finds
/// it taken reads the flag until it is free, spinning a few rounds, then
/// yielding to the holder ([`shim::relax`]), and tries again.
///
/// The acquire of the compare-exchange that takes it reads the release
/// store that let it go, so everything one holder wrote to the data
/// happens before the next holder reads it; the flag is `true` from the
/// one successful compare-exchange to that store, so no two threads hold
/// it at once. Both are what loom checks (`loom_` tests of
/// `segment_loom_tests.rs`, over the sink: its cell reports any access to
/// the data not ordered after the previous holder's).
///
/// It has no poisoning: a panic while holding it releases it (the guard's
/// drop), and what it guards stays consistent.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, and one guard exists at
// a time (see the type's docs), so sharing the lock between threads shares
// `T` with one thread at a time: `T: Send` suffices, as for `Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(data: T) -> SpinLock<T> {
        SpinLock { locked: AtomicBool::new(false), data: UnsafeCell::new(data) }
    }

    /// Takes the lock, waiting while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        SpinGuard { lock: self, data: ManuallyDrop::new(self.data.get_mut()) }
    }

    /// Waits for the holder to let go, then takes the lock.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                shim::relax(&mut spins);
            }
            if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
        }
    }

    /// Whether a thread holds the lock now (the loom models check that
    /// every path lets go).
    #[cfg(all(test, loom))]
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

/// The holder of a [`SpinLock`]: the data, and the lock's release when
/// dropped.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Dropped before the release (under loom it marks the cell as in use
    /// while it lives).
    data: ManuallyDrop<MutPtr<T>>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the
        // data exists; the lock (and its cell) outlives the guard.
        unsafe { MutPtr::deref(&self.data) }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` keeps this the only reference.
        unsafe { MutPtr::deref(&self.data) }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// Runs a loom model of `name` over every interleaving (up to
/// `preemption_bound` preemptions when given; `LOOM_MAX_PREEMPTIONS` in the
/// environment overrides it), then prints how many it explored:
/// `loom: NAME: N interleavings, 0 failures` (a failure panics first, with
/// loom's report).
#[cfg(all(test, loom))]
pub(crate) fn model(name: &str, preemption_bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = preemption_bound;
    }
    let counted = runs.clone();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f();
    });
    let bound = builder.preemption_bound.map_or(String::new(), |b| format!(" (at most {b} preemptions)"));
    println!("loom: {name}: {} interleavings{bound}, 0 failures", runs.load(Ordering::Relaxed));
}

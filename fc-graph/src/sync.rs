//! Locking that survives a panic elsewhere: a poisoned mutex is taken over
//! as it is (every mutex of the library guards state that stays consistent
//! across a panic in user code, such as a break function's).

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A lock for state held a few nanoseconds at a time by many calls (the
/// recording sink: one push per recorded launch): taking it is one atomic
/// compare-exchange and releasing it one store, where a `Mutex` makes two
/// atomic read-modify-writes (about 7 against 11 ns a lock and release,
/// uncontended, on a 2-core x86 VM); a thread that finds it taken yields to
/// the holder.
/// It has no poisoning: a panic while holding it releases it (the guard's
/// drop), and what it guards stays consistent.
pub(crate) type SpinLock<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;

//! Locking that survives a panic elsewhere: a poisoned mutex is taken over
//! as it is (every mutex of the library guards state that stays consistent
//! across a panic in user code, such as a break function's).

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

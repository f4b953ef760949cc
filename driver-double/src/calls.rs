//! The calls the double served, as tests read them back: how often each
//! ABI ran, keyed by (symbol, ABI version), and which one ran last; and
//! every `cuGetProcAddress` request, with how many asked above the
//! driver's version. Every driver call counts itself here on its way in,
//! `cuGetProcAddress` logs its requests; the control functions above map
//! the ABI table's indices onto these keys. A leaf: it imports nothing of
//! the double.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One ABI: its symbol and version.
pub type Key = (&'static str, i32);

/// Calls per ABI, and the one called last.
struct Calls {
    counts: Option<HashMap<Key, u32>>,
    last: Option<Key>,
}

static CALLS: Mutex<Calls> = Mutex::new(Calls { counts: None, last: None });

fn calls() -> MutexGuard<'static, Calls> {
    CALLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a call of `name` at ABI `version`.
pub fn called(name: &'static str, version: i32) {
    let mut c = calls();
    let n = c.counts.get_or_insert_with(HashMap::new).entry((name, version)).or_insert(0);
    *n = n.wrapping_add(1);
    c.last = Some((name, version));
}

/// Calls of `name` at ABI `version` so far.
pub fn count(name: &str, version: i32) -> u32 {
    calls().counts.as_ref().and_then(|m| m.get(&(name, version))).copied().unwrap_or(0)
}

/// The ABI called last, if any since the last [`reset_last`].
pub fn last() -> Option<Key> {
    calls().last
}

/// Forgets which ABI ran last.
pub fn reset_last() {
    calls().last = None;
}

/// Every `cuGetProcAddress` request: (symbol, requested version).
static REQUESTS: Mutex<Vec<(String, i32)>> = Mutex::new(Vec::new());
/// Requests above the driver's version.
static OVER: AtomicUsize = AtomicUsize::new(0);

/// Logs a `cuGetProcAddress` request (`over`: above the driver's version).
pub fn requested(name: String, version: i32, over: bool) {
    REQUESTS.lock().unwrap_or_else(|e| e.into_inner()).push((name, version));
    if over {
        OVER.fetch_add(1, Ordering::Relaxed);
    }
}

/// The requests so far.
pub fn requests() -> Vec<(String, i32)> {
    REQUESTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Requests above the driver's version so far.
pub fn over_requests() -> usize {
    OVER.load(Ordering::Relaxed)
}

//! The synchronisation primitives of the handle tables and the hazard
//! pointers: std's, or loom's when the crate is built with `--cfg loom`
//! (`scripts/loom.sh`), so that loom model-checks the very code the library
//! runs, not a copy of it.
//!
//! Under loom, every atomic operation is a point where the model may switch
//! threads, and loads may return any store the memory model allows; the
//! globals made with [`global!`] are fresh for every execution of a model.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::thread_local;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
/// loom's `thread_local!`, for declarations written as std's with a
/// `const { .. }` initialiser (loom's macro takes a plain expression).
#[cfg(loom)]
macro_rules! loom_thread_local {
    ($(static $name:ident: $t:ty = const { $init:expr };)+) => {
        loom::thread_local! {
            $(static $name: $t = $init;)+
        }
    };
}
#[cfg(loom)]
pub(crate) use loom_thread_local as thread_local;

/// `global!(fn name() -> &'static T { init })`: a function returning one
/// process-wide `T`. With std it is a plain `static` (`init` must be a
/// constant expression); under loom a lazy static, made anew for each
/// execution of a model (loom's atomics and mutexes belong to one
/// execution).
macro_rules! global {
    ($(#[$attr:meta])* $vis:vis fn $name:ident() -> &'static $t:ty { $init:expr }) => {
        $(#[$attr])*
        $vis fn $name() -> &'static $t {
            #[cfg(not(loom))]
            {
                static GLOBAL: $t = $init;
                &GLOBAL
            }
            #[cfg(loom)]
            {
                loom::lazy_static! {
                    static ref GLOBAL: $t = $init;
                }
                &GLOBAL
            }
        }
    };
}
pub(crate) use global;

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

//! The gate of a green context: NVIDIA allows a green context to be
//! current on one thread at a time, so the library's calls that push one
//! (see [`crate::driver`]'s binding) pass through its gate one thread at a
//! time. Re-entrant, so nested bindings on one thread do not deadlock.

use std::sync::{Condvar, Mutex};

use crate::sync::lock;

/// Serialises the threads that make one green context current for the
/// library's calls. Re-entrant: a thread that holds it may enter again
/// (a call that binds the context while it is already bound further up).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    free: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// The holding thread (`pthread_self`, usable in thread-exit paths).
    owner: Option<libc::pthread_t>,
    depth: usize,
}

impl Gate {
    /// Waits until no other thread holds the gate, then holds it.
    pub(crate) fn enter(&self) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        let mut s = lock(&self.state);
        loop {
            match s.owner {
                None => {
                    s.owner = Some(me);
                    s.depth = 1;
                    return;
                }
                // On Linux (the only target: the driver is libcuda.so)
                // pthread_t is an integer and pthread_equal is `==`.
                Some(o) if o == me => {
                    s.depth += 1;
                    return;
                }
                Some(_) => s = self.free.wait(s).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    /// Lets go of one [`Gate::enter`] of this thread.
    pub(crate) fn leave(&self) {
        let mut s = lock(&self.state);
        s.depth = s.depth.saturating_sub(1);
        if s.depth == 0 {
            s.owner = None;
            drop(s);
            self.free.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_gate_is_reentrant_on_one_thread_and_exclusive_across_threads() {
        let gate = Arc::new(Gate::default());
        gate.enter();
        gate.enter(); // re-entered on the same thread: no deadlock
        let inside = Arc::new(AtomicUsize::new(0));
        let other = {
            let (gate, inside) = (gate.clone(), inside.clone());
            std::thread::spawn(move || {
                gate.enter();
                inside.store(1, Ordering::SeqCst);
                gate.leave();
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(inside.load(Ordering::SeqCst), 0, "the other thread entered while this one held the gate");
        gate.leave();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(inside.load(Ordering::SeqCst), 0, "still held once");
        gate.leave();
        other.join().expect("the other thread");
        assert_eq!(inside.load(Ordering::SeqCst), 1, "entered once the gate was free");
    }
}

//! The two fences of the hazard-pointer protocol (module `hazard`): the
//! light one every lookup runs between announcing its hazards and
//! confirming them (step H2 there), and the heavy one a free runs before
//! it scans the hazards (step R2). Lookups run only light ones.
//!
//! **Symmetric pair**: both are SeqCst fences. On x86 that is a locked
//! instruction, which waits for the core's pending stores (the hazard just
//! announced): a store, a SeqCst fence and a load take 4.2 ns in a loop on
//! an AMD EPYC development machine, 0.8 ns without the fence, and locked
//! instructions cost more cycles on Intel's cores.
//!
//! **Asymmetric pair** (Linux 4.14 and later, the default where the kernel
//! allows it): the light fence is a compiler fence only, so a lookup runs
//! no fence instruction, and the heavy fence is the system call
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`. Before it returns, every
//! thread of the process has run a full memory barrier (a running one in
//! the interrupt the kernel sends to its CPU, the others in the context
//! switch that runs them again), ordered after the caller's accesses
//! before the call and before its accesses after it. A free pays a few
//! microseconds for it (the driver calls behind a free take longer).
//!
//! Why the protocol stays correct with the asymmetric pair: take a holder
//! thread T (steps H1-H3 of `hazard`) and a free (R1-R3). The kernel's
//! barrier runs in T at some point B of T's program; the compiler fence
//! keeps H1 before H3 in the code, and the CPU orders each of them with B
//! (a full barrier).
//! - B after H1: H1 is visible to the free's scan R3 (which comes after
//!   the call returns), so R3 reads H1's `p` or a later store to the
//!   hazard slot: the second case of `hazard`'s argument.
//! - B before H1, hence before H3: R1 (before the call) is ordered before
//!   B, so H3 reads R1's write or a later one and cannot confirm the
//!   retired object: the first case.
//!
//! B takes the place of the holder's fence F_h and the call that of F_r;
//! the rest of `hazard`'s argument (release stores to the slots, later
//! scans without a fence) is unchanged.
//!
//! **Which pair**: decided once per process, at the first lookup of a
//! thread (the process registers with
//! `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED`). Symmetric when the kernel
//! has no such command or refuses it (an old kernel, a seccomp filter),
//! off Linux, under Miri and loom (which cannot make the call: they check
//! the symmetric pair), and with `FC_HAZARD_FENCES=symmetric` in the
//! environment. The mode starts symmetric and turns asymmetric once, after
//! the registration: a lookup that reads the old mode runs a SeqCst fence,
//! which pairs with either heavy fence (the call orders the caller's
//! accesses as a SeqCst fence would, and [`heavy`] runs one too); a free
//! waits for the decision before it reads the mode, so it makes the call
//! whenever a lookup may have skipped its fence. Should the call ever fail
//! once registered (the kernel documents no such case), [`heavy`] says so
//! and the free leaks the object rather than destroy it unchecked.

use crate::sync::{fence, Ordering};

/// The light fence: between announcing hazards and confirming them.
#[inline]
pub(crate) fn light() {
    #[cfg(all(target_os = "linux", not(miri), not(loom)))]
    if membarrier::active() {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        return;
    }
    fence(Ordering::SeqCst);
}

/// The heavy fence: after taking an object out of its table, before
/// scanning the hazards. False when it could not be made (see the module
/// doc): the object must then not be destroyed.
pub(crate) fn heavy() -> bool {
    fence(Ordering::SeqCst);
    #[cfg(all(target_os = "linux", not(miri), not(loom)))]
    if decide() {
        return membarrier::barrier();
    }
    true
}

/// Decides which pair this process uses (once; later calls only read the
/// decision) and returns whether it is the asymmetric one.
pub(crate) fn decide() -> bool {
    #[cfg(all(target_os = "linux", not(miri), not(loom)))]
    return membarrier::decide();
    #[cfg(not(all(target_os = "linux", not(miri), not(loom))))]
    false
}

#[cfg(all(target_os = "linux", not(miri), not(loom)))]
mod membarrier {
    use std::os::raw::{c_int, c_long};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Once;

    // The commands of membarrier(2) (include/uapi/linux/membarrier.h).
    const QUERY: c_int = 0;
    const PRIVATE_EXPEDITED: c_int = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: c_int = 1 << 4;

    /// Whether the asymmetric pair is in use: set once, inside `DECIDE`,
    /// after the registration succeeded; never cleared.
    static ACTIVE: AtomicBool = AtomicBool::new(false);
    static DECIDE: Once = Once::new();

    fn membarrier(cmd: c_int) -> c_long {
        // SAFETY: membarrier(cmd, flags = 0, cpu_id = 0) reads and writes
        // no memory of this process.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as c_int, 0 as c_int) }
    }

    pub(super) fn decide() -> bool {
        DECIDE.call_once(|| {
            if std::env::var_os("FC_HAZARD_FENCES").is_some_and(|v| v == "symmetric") {
                return;
            }
            let commands = membarrier(QUERY);
            if commands < 0 || commands & c_long::from(PRIVATE_EXPEDITED) == 0 {
                return;
            }
            if membarrier(REGISTER_PRIVATE_EXPEDITED) == 0 {
                ACTIVE.store(true, Ordering::Relaxed);
            }
        });
        // After `call_once` returns, the decision happens before this load.
        ACTIVE.load(Ordering::Relaxed)
    }

    /// A stale `false` only makes a lookup run a SeqCst fence.
    #[inline]
    pub(super) fn active() -> bool {
        ACTIVE.load(Ordering::Relaxed)
    }

    pub(super) fn barrier() -> bool {
        (0..3).any(|_| membarrier(PRIVATE_EXPEDITED) == 0)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    /// On Linux outside Miri the pair is decided once and stays decided;
    /// a heavy fence succeeds with either pair.
    #[test]
    fn the_decision_is_stable_and_heavy_fences_succeed() {
        let first = super::decide();
        assert_eq!(super::decide(), first);
        assert!(super::heavy());
        super::light();
        if cfg!(all(target_os = "linux", not(miri))) && std::env::var_os("FC_HAZARD_FENCES").is_none() {
            println!("hazard fences: {}", if first { "asymmetric (membarrier)" } else { "symmetric" });
        }
    }
}

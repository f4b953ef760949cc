//! Loom's models of the recording sink ([`Sink`]) over its real code: its
//! spin lock, flags and op lists are loom's under `--cfg loom` (see
//! [`crate::sync::shim`]), so every interleaving of the threads below, up to
//! loom's default bound, runs, and every access to the locked op list is
//! checked against the others for a race (loom's cell). Run by
//! `scripts/loom.sh`; each prints `loom: NAME: N interleavings, 0 failures`.
//!
//! Invariants: no launch taken is lost or taken twice (each is in the
//! closed segment exactly once, in its thread's order), a launch the sink
//! refuses is in no segment, and the locks are free when every thread is
//! done.

use loom::sync::Arc;
use loom::thread;

use super::tests::memset;
use super::{Op, Ops, Sink};
use crate::sync::model;

/// The fill addresses of `ops`, in order (each model's ops are fills
/// whose address names the thread and the launch; the break hand-off's
/// models read theirs with it too).
pub(crate) fn dsts(ops: &Ops) -> Vec<u64> {
    ops.list
        .iter()
        .map(|o| match o {
            Op::Memset(m) => m.dst,
            _ => u64::MAX,
        })
        .collect()
}

/// The launch `i` of thread `t`.
fn launch(t: u64, i: u64) -> u64 {
    0x100 * (t + 1) + i
}

/// Every lock of the sink is free.
fn assert_unlocked(sink: &Sink) {
    assert!(sink.is_unlocked(), "a lock of the sink is still held");
}

/// `seen` holds each thread's launches of `taken` once, in that thread's
/// order (threads interleave as they may), and nothing else.
fn assert_each_once_in_order(seen: &[u64], taken: &[Vec<u64>]) {
    for (t, mine) in taken.iter().enumerate() {
        let got: Vec<u64> = seen.iter().copied().filter(|&d| (d >> 8) == t as u64 + 1).collect();
        assert_eq!(&got, mine, "thread {t}'s launches, each once, in order (all: {seen:x?})");
    }
    assert_eq!(seen.len(), taken.iter().map(Vec::len).sum::<usize>(), "nothing else: {seen:x?}");
}

/// Two threads launch into one open segment, two launches each (the
/// second thread on lane 1, so the ops get explicit dependencies), then
/// the recording thread closes it. (The recording thread does not launch
/// meanwhile: loom cannot check a spin lock with two threads waiting on a
/// third at once, its scheduler then alternating the two waiters for ever,
/// tokio-rs/loom#53; each model keeps to one waiter.)
#[test]
fn loom_sink_two_threads_push_into_one_open_segment() {
    model("sink: two threads push into one open segment", None, || {
        let sink = Arc::new(Sink::default());
        sink.open();
        let pushers: Vec<_> = (0..2u64)
            .map(|t| {
                let sink = Arc::clone(&sink);
                thread::spawn(move || {
                    for i in 0..2 {
                        assert!(sink.push(memset(launch(t, i), 1), t as usize), "open: taken");
                    }
                })
            })
            .collect();
        for p in pushers {
            p.join().expect("joined");
        }
        let ops = sink.close().expect("open");
        let taken = vec![vec![launch(0, 0), launch(0, 1)], vec![launch(1, 0), launch(1, 1)]];
        assert_each_once_in_order(&dsts(&ops), &taken);
        // Lane 1's second launch depends on its first, whatever came between.
        let at = |d: u64| dsts(&ops).iter().position(|&x| x == d).expect("recorded") as u32;
        assert_eq!(ops.deps_of(at(launch(1, 1)) as usize).to_vec(), vec![at(launch(1, 0))]);
        assert!(!sink.is_active());
        assert_unlocked(&sink);
    });
}

/// A thread launches while the recording thread closes the segment, opens
/// the next (a break) and closes that too (the recording's end): each
/// launch the sink takes is in exactly one of the two segments, in order;
/// one it refuses (between segments, or after the end) is in neither.
#[test]
fn loom_sink_launches_racing_a_break_and_the_end() {
    model("sink: launches racing a break and the end", None, || {
        let sink = Arc::new(Sink::default());
        sink.open();
        let pusher = {
            let sink = Arc::clone(&sink);
            thread::spawn(move || (0..2).map(|i| launch(0, i)).filter(|&d| sink.push(memset(d, 1), 0)).collect())
        };
        let first = sink.close().expect("open");
        sink.open();
        let second = sink.close().expect("open");
        let taken: Vec<u64> = pusher.join().expect("joined");
        let seen: Vec<u64> = dsts(&first).into_iter().chain(dsts(&second)).collect();
        assert_each_once_in_order(&seen, &[taken]);
        assert!(!sink.push(memset(launch(0, 9), 1), 0), "ended: refused");
        assert_unlocked(&sink);
    });
}

/// A graph built from a segment goes on another thread (its op list handed
/// back, [`Sink::recycle`]) while the recording thread opens the next
/// segment and launches into it: the spare list is touched by one thread
/// at a time, and the segment gets either the handed-back list or a new one.
#[test]
fn loom_sink_a_list_handed_back_while_the_next_segment_opens() {
    model("sink: a list handed back while the next segment opens", None, || {
        let sink = Arc::new(Sink::default());
        let giver = {
            let sink = Arc::clone(&sink);
            thread::spawn(move || sink.recycle(Vec::with_capacity(8)))
        };
        sink.open();
        assert!(sink.push(memset(launch(0, 0), 1), 0));
        let ops = sink.close().expect("open");
        giver.join().expect("joined");
        assert_eq!(dsts(&ops), [launch(0, 0)]);
        let room = ops.list.capacity();
        sink.open();
        let next = sink.close().expect("open");
        assert!(room >= 8 || next.list.capacity() >= 8, "the handed-back list serves one of the two segments");
        assert_unlocked(&sink);
    });
}

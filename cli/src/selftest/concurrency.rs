//! Check 2: the seed test's two-thread concurrency check
//! (`../shared/seeds/test_graph_capture_concurrency.c`). While this thread
//! captures and replays 100 rounds of the seed's layer body on the device,
//! a second thread allocates, synchronizes and frees on another device (or,
//! with one device, in an isolated context of the same device: a primary
//! context shares the device-wide synchronisation of `cuMemFree` with the
//! capturing context, which fc-graph documents as invalidating captures).
//! Every capture must succeed and no allocation or synchronize may be
//! refused; the replays' result must equal the CPU's.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use fc_graph::{CaptureMode, Context};

use super::common::{chain, chain_cpu, download, ensure, expect_exact, upload, Doing, Outcome, Rng, N, PAIRS};
use super::Target;

/// Capture rounds (each: begin, 26 kernels, end + instantiate, launch).
const ROUNDS: usize = 100;
/// Bytes the interfering thread allocates each time (the seed's size).
const SCRATCH: usize = 1 << 20;

/// What the interfering thread saw.
#[derive(Default)]
struct Interference {
    ok: AtomicUsize,
    refused: AtomicUsize,
    first_refusal: Mutex<Option<String>>,
}

impl Interference {
    fn refuse(&self, what: &str, e: fc_graph::Error) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_refusal.lock() {
            first.get_or_insert_with(|| format!("{what}: {e}"));
        }
    }
}

/// The seed's interferer: allocate scratch, wait for its stream, free.
fn interfere(b: &Context, stop: &AtomicBool, started: &Barrier, seen: &Interference) {
    started.wait();
    while !stop.load(Ordering::Relaxed) {
        match b.alloc(SCRATCH) {
            Ok(scratch) => {
                match b.synchronize() {
                    Ok(()) => {
                        seen.ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => seen.refuse("synchronize", e),
                }
                drop(scratch);
            }
            Err(e) => {
                seen.refuse("alloc", e);
                thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

/// Runs the check.
pub fn run(t: &Target) -> Outcome {
    let peer = t.peer_device();
    let a = Context::new(t.device).doing("open the capturing context")?;
    let b = Context::new(peer).doing("open the interfering context")?;
    let where_b =
        if peer == t.device { format!("a second context of device {peer}") } else { format!("device {peer}") };
    let mut rng = Rng::new(0xc0c0 + t.device as u64);
    let (xs, ys) = (rng.floats(N, -1.0, 1.0), rng.floats(N, 0.5, 1.0));
    let x = upload(&a, &xs).doing("upload x")?;
    let y = upload(&a, &ys).doing("upload y")?;
    let z = a.alloc(N * 4).doing("alloc z")?;

    let stop = AtomicBool::new(false);
    let started = Barrier::new(2);
    let seen = Interference::default();
    let mut failures: Vec<String> = Vec::new();
    let joined = thread::scope(|s| {
        let interferer = s.spawn(|| interfere(&b, &stop, &started, &seen));
        started.wait();
        for _ in 0..ROUNDS {
            let round = || -> fc_graph::Result<()> {
                let cap = a.begin_capture(CaptureMode::ThreadLocal)?;
                chain(&a, (&x, &y, &z), PAIRS)?;
                cap.end()?.launch()
            };
            if let Err(e) = round() {
                failures.push(e.to_string());
            }
        }
        stop.store(true, Ordering::Relaxed);
        interferer.join()
    });
    ensure!(joined.is_ok(), "the interfering thread panicked");
    a.synchronize().doing("synchronize after the rounds")?;

    let (ok, refused) = (seen.ok.load(Ordering::Relaxed), seen.refused.load(Ordering::Relaxed));
    let captured = ROUNDS - failures.len();
    ensure!(
        failures.is_empty(),
        "{} of {ROUNDS} capture rounds failed while {where_b} was in use; first: {}",
        failures.len(),
        failures[0]
    );
    if refused > 0 {
        let first = seen.first_refusal.lock().ok().and_then(|f| f.clone()).unwrap_or_default();
        return Err(super::common::Failure(format!(
            "{refused} of the interferer's {} calls on {where_b} were refused; first: {first}",
            ok + refused
        )));
    }
    ensure!(ok > 0, "the interfering thread never completed an allocation: the check proved nothing");

    let mut want = xs;
    chain_cpu(&mut want, &ys, ROUNDS * PAIRS);
    expect_exact("result of the 100 replays vs CPU", &download(&x, N).doing("download the result")?, &want)?;
    Ok(format!(
        "{captured}/{ROUNDS} captures replayed, result == CPU; meanwhile {ok} alloc+sync+free of 1 MiB on {where_b}, 0 refused"
    ))
}

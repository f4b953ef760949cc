//! GPU suite of the graph cache (issue 10, items 3 and 4): a bucketed decode
//! loop against a CPU reference, warm-up, refresh in place and with a new
//! topology, breaks with live values (guarded and held), fallback after
//! failed captures with backoff and recovery, LRU eviction by count and by
//! bytes, re-entry, concurrent hits, node counts and DOT output, and the
//! cost of a hit next to a bare launch. Skips visibly without a GPU.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fc_graph::buckets::{bucket_for, token_buckets, BucketConfig};
use fc_graph::cache::{CacheConfig, Clock, GraphCache, Outcome};
use fc_graph::{CaptureMode, Context, DeviceBuffer, Error};
use fc_graph_tests::{assert_exact, download, ensure, fail, run_gpu_tests, upload, GpuTest, Rng};
use libtest_mimic::Failed;

type TestResult = Result<(), Failed>;

fn main() {
    let t = |name, devices, body| GpuTest { name, devices, body };
    run_gpu_tests(
        "gpu_cache",
        vec![
            t("bucketed_decode_matches_eager", 1, bucketed_decode_matches_eager),
            t("warm_up_runs_once_then_replays", 1, warm_up_runs_once_then_replays),
            t("refresh_updates_in_place_or_reinstantiates", 1, refresh_updates_in_place_or_reinstantiates),
            t("breaks_run_once_per_call_with_the_live_value", 1, breaks_run_once_per_call_with_the_live_value),
            t("failed_captures_fall_back_back_off_and_recover", 1, failed_captures_fall_back_back_off_and_recover),
            t("lru_eviction_by_count", 1, lru_eviction_by_count),
            t("byte_cap_counts_what_the_capture_keeps", 1, byte_cap_counts_what_the_capture_keeps),
            t("re_entry_is_an_error_not_a_deadlock", 1, re_entry_is_an_error_not_a_deadlock),
            t("concurrent_hits_serialise", 1, concurrent_hits_serialise),
            t("node_counts_and_debug_dot", 1, node_counts_and_debug_dot),
            t("hit_costs_about_a_bare_launch", 1, hit_costs_about_a_bare_launch),
        ],
    )
}

const N: usize = 512;

/// Inputs and outputs of the decode-step workload: `out = (x + y) * y` on
/// the first `n` elements.
struct Step {
    ctx: Context,
    x: DeviceBuffer,
    y: DeviceBuffer,
    z: DeviceBuffer,
    out: DeviceBuffer,
    ys: Vec<f32>,
}

impl Step {
    fn new(seed: u64) -> Result<Step, Failed> {
        let ctx = Context::new(0).map_err(fail)?;
        let ys = Rng::new(seed).floats(N);
        let y = upload(&ctx, &ys).map_err(fail)?;
        let (x, z, out) =
            (ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?, ctx.alloc(N * 4).map_err(fail)?);
        Ok(Step { ctx, x, y, z, out, ys })
    }

    fn record(&self, n: usize) -> fc_graph::Result<()> {
        self.ctx.add(&self.x, &self.y, &self.z, n)?;
        self.ctx.mul(&self.z, &self.y, &self.out, n)
    }

    fn cpu(&self, xs: &[f32], n: usize) -> Vec<f32> {
        (0..n).map(|i| (xs[i] + self.ys[i]) * self.ys[i]).collect()
    }

    /// New inputs, output poisoned (NaN) so a step that computed nothing fails.
    fn fresh_inputs(&self, rng: &mut Rng) -> Result<Vec<f32>, Failed> {
        let xs = rng.floats(N);
        self.x.upload(&xs).map_err(fail)?;
        self.out.fill_bytes(0, N * 4, 0xff).map_err(fail)?;
        Ok(xs)
    }

    fn check(&self, what: &str, xs: &[f32], n: usize) -> TestResult {
        self.ctx.synchronize().map_err(fail)?;
        assert_exact(what, &download(&self.out, N).map_err(fail)?[..n], &self.cpu(xs, n))
    }
}

fn config() -> CacheConfig {
    CacheConfig { max_entries: 0, ..CacheConfig::default() }
}

fn bucketed_decode_matches_eager() -> TestResult {
    let s = Step::new(1)?;
    let buckets = token_buckets(&BucketConfig { max_tokens: N, chunk_size: None, ..BucketConfig::default() });
    let cache: GraphCache<usize> = GraphCache::new(&s.ctx, config()).map_err(fail)?;
    let mut rng = Rng::new(2);
    let mut used = std::collections::BTreeSet::new();
    let steps = 2000;
    for step in 0..steps {
        let n = 1 + (rng.next_u64() % N as u64) as usize;
        let b = bucket_for(&buckets, n).ok_or_else(|| fail(format!("no bucket for {n}")))?;
        let xs = s.fresh_inputs(&mut rng)?;
        let o = cache.run(&b, &(), |_| s.record(b)).map_err(fail)?;
        let first = used.insert(b);
        ensure!(o == if first { Outcome::Captured } else { Outcome::Hit }, "step {step}: bucket {b}: {o:?}");
        s.check(&format!("step {step}, n {n}, bucket {b}"), &xs, b)?;
    }
    let st = cache.stats().map_err(fail)?;
    let hit_rate = st.hits as f64 / steps as f64;
    println!(
        "decode loop: {steps} steps, {} buckets used of {}, hit rate {:.3}, {st:?}",
        used.len(),
        buckets.len(),
        hit_rate
    );
    ensure!(st.captures == used.len() as u64 && st.hits + st.misses == steps, "{st:?}");
    ensure!(st.fallbacks == 0 && st.failures == 0 && st.graphs == used.len(), "{st:?}");
    Ok(())
}

fn warm_up_runs_once_then_replays() -> TestResult {
    let s = Step::new(3)?;
    let cache: GraphCache<u32> = GraphCache::new(&s.ctx, CacheConfig { warmup: true, ..config() }).map_err(fail)?;
    let runs = Mutex::new(Vec::new());
    let mut rng = Rng::new(4);
    for call in 0..4 {
        let xs = s.fresh_inputs(&mut rng)?;
        let o = cache
            .run(&1, &(), |rec| {
                runs.lock().unwrap_or_else(|p| p.into_inner()).push((call, rec.is_capturing()));
                s.record(N)
            })
            .map_err(fail)?;
        ensure!(o == if call == 0 { Outcome::WarmedUp } else { Outcome::Hit }, "call {call}: {o:?}");
        s.check(&format!("call {call}"), &xs, N)?;
    }
    let runs = runs.into_inner().unwrap_or_else(|p| p.into_inner());
    ensure!(runs == [(0, false), (0, true)], "the recording ran eagerly, then under capture, on call 0 only: {runs:?}");
    Ok(())
}

fn refresh_updates_in_place_or_reinstantiates() -> TestResult {
    let s = Step::new(5)?;
    let x2 = s.ctx.alloc(N * 4).map_err(fail)?;
    let cache: GraphCache<u32> = GraphCache::new(&s.ctx, config()).map_err(fail)?;
    let which = AtomicUsize::new(0); // 0: read x, 1: read x2
    let extra = AtomicUsize::new(0); // extra `out = out * y` kernels
    let record = |_: &mut fc_graph::cache::Recorder<'_, ()>| -> fc_graph::Result<()> {
        let input = if which.load(Ordering::SeqCst) == 0 { &s.x } else { &x2 };
        s.ctx.add(input, &s.y, &s.z, N)?;
        s.ctx.mul(&s.z, &s.y, &s.out, N)?;
        for _ in 0..extra.load(Ordering::SeqCst) {
            s.ctx.mul(&s.out, &s.y, &s.out, N)?;
        }
        Ok(())
    };
    let mut rng = Rng::new(6);
    let xs = s.fresh_inputs(&mut rng)?;
    let x2s = rng.floats(N);
    x2.upload(&x2s).map_err(fail)?;
    ensure!(cache.run(&9, &(), record).map_err(fail)? == Outcome::Captured, "first call");
    s.check("captured", &xs, N)?;

    // Same topology, another input buffer: updated in place.
    which.store(1, Ordering::SeqCst);
    ensure!(cache.run(&9, &(), record).map_err(fail)? == Outcome::Hit, "not invalidated: still the old graph");
    s.check("stale hit reads x", &xs, N)?;
    ensure!(cache.invalidate(&9).map_err(fail)?, "key 9 is known");
    s.out.fill_bytes(0, N * 4, 0xff).map_err(fail)?;
    ensure!(cache.run(&9, &(), record).map_err(fail)? == Outcome::Refreshed, "refresh");
    s.check("refreshed reads x2", &x2s, N)?;
    let st = cache.stats().map_err(fail)?;
    let in_place = fc_graph::driver().map_err(fail)?.cuGraphExecUpdate.is_some();
    if in_place {
        ensure!(st.updates == 1 && st.reinstantiations == 0, "update in place expected: {st:?}");
    } else {
        println!("[note] driver without cuGraphExecUpdate: the refresh re-instantiated");
        ensure!(st.reinstantiations == 1, "{st:?}");
    }
    ensure!(st.captures == 1, "a refresh is not a new capture: {st:?}");

    // Another topology: the segment is instantiated anew.
    extra.store(2, Ordering::SeqCst);
    cache.invalidate_all().map_err(fail)?;
    s.out.fill_bytes(0, N * 4, 0xff).map_err(fail)?;
    ensure!(cache.run(&9, &(), record).map_err(fail)? == Outcome::Refreshed, "second refresh");
    s.ctx.synchronize().map_err(fail)?;
    let want: Vec<f32> = s.cpu(&x2s, N).iter().zip(&s.ys).map(|(v, y)| v * y * y).collect();
    assert_exact("three more kernels", &download(&s.out, N).map_err(fail)?, &want)?;
    let st2 = cache.stats().map_err(fail)?;
    ensure!(st2.reinstantiations == st.reinstantiations + 1, "{st2:?}");
    ensure!(cache.node_count(&9).map_err(fail)? == Some(4), "4 kernels after the refresh");
    Ok(())
}

/// `out = (x + y + addend[live]) * y`, the addend added in a break; the
/// break also adds 1 to a counter, so the counter tells how often it ran.
fn breaks_run_once_per_call_with_the_live_value() -> TestResult {
    for warmup in [false, true] {
        let s = Step::new(7)?;
        let mut rng = Rng::new(8);
        let addend_vals: Vec<Vec<f32>> = (0..3).map(|_| rng.floats(N)).collect();
        let addends: Arc<Vec<DeviceBuffer>> =
            Arc::new(addend_vals.iter().map(|v| upload(&s.ctx, v)).collect::<Result<_, _>>().map_err(fail)?);
        let counter = Arc::new(upload(&s.ctx, &vec![0.0f32; N]).map_err(fail)?);
        let ones = Arc::new(upload(&s.ctx, &vec![1.0f32; N]).map_err(fail)?);
        let z = Arc::new(s.ctx.alloc(N * 4).map_err(fail)?);
        let cache: GraphCache<u8, usize> = GraphCache::new(&s.ctx, CacheConfig { warmup, ..config() }).map_err(fail)?;
        let lives = [0usize, 1, 2, 1, 0];
        for (call, &live) in lives.iter().enumerate() {
            if call == 3 {
                cache.invalidate(&0).map_err(fail)?;
            }
            let xs = s.fresh_inputs(&mut rng)?;
            let o = cache
                .run(&0, &live, |rec| {
                    let ctx = rec.context();
                    ctx.add(&s.x, &s.y, &z, N)?;
                    let (zb, addends, counter, ones) = (z.clone(), addends.clone(), counter.clone(), ones.clone());
                    rec.brk(move |ctx, live: &usize| {
                        ctx.add(&zb, &addends[*live], &zb, N)?;
                        ctx.add(&counter, &ones, &counter, N)
                    })?;
                    ctx.mul(&z, &s.y, &s.out, N)
                })
                .map_err(fail)?;
            let want_o = match (call, warmup) {
                (0, false) => Outcome::Captured,
                (0, true) => Outcome::WarmedUp,
                (3, _) => Outcome::Refreshed,
                _ => Outcome::Hit,
            };
            ensure!(o == want_o, "warmup {warmup}, call {call}: {o:?}, want {want_o:?}");
            s.ctx.synchronize().map_err(fail)?;
            let want: Vec<f32> = (0..N).map(|i| (xs[i] + s.ys[i] + addend_vals[live][i]) * s.ys[i]).collect();
            assert_exact(
                &format!("warmup {warmup}, call {call}, live {live}"),
                &download(&s.out, N).map_err(fail)?,
                &want,
            )?;
        }
        let runs = download(&counter, N).map_err(fail)?;
        ensure!(
            runs.iter().all(|&c| c == lives.len() as f32),
            "warmup {warmup}: the break ran {} times in {} calls (breaks must not run at capture time)",
            runs[0],
            lives.len()
        );
    }
    Ok(())
}

/// A clock the test moves by hand.
fn manual_clock() -> (Clock, Arc<Mutex<Duration>>) {
    let base = Instant::now();
    let offset = Arc::new(Mutex::new(Duration::ZERO));
    let o = offset.clone();
    (Arc::new(move || base + *o.lock().unwrap_or_else(|p| p.into_inner())), offset)
}

fn failed_captures_fall_back_back_off_and_recover() -> TestResult {
    let s = Step::new(11)?;
    let (clock, offset) = manual_clock();
    let cfg = CacheConfig {
        fail_threshold: 2,
        backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(4),
        ..config()
    };
    let cache: GraphCache<u32> = GraphCache::with_clock(&s.ctx, cfg, clock).map_err(fail)?;
    // Not capturable while `fail_left` > 0: a stream synchronisation (refused
    // under capture, fine eagerly), as a library with a hidden sync would do.
    let fail_left = AtomicU32::new(3);
    let record = |rec: &mut fc_graph::cache::Recorder<'_, ()>| -> fc_graph::Result<()> {
        s.record(N)?;
        if rec.is_capturing() && fail_left.load(Ordering::SeqCst) > 0 {
            fail_left.fetch_sub(1, Ordering::SeqCst);
            rec.context().synchronize()?;
        }
        Ok(())
    };
    let mut rng = Rng::new(12);
    let advance = |d: Duration| *offset.lock().unwrap_or_else(|p| p.into_inner()) += d;
    let script: [(Duration, Outcome); 6] = [
        (Duration::ZERO, Outcome::EagerAfterFailure),
        (Duration::ZERO, Outcome::EagerAfterFailure), // second failure: back off 1 s
        (Duration::from_millis(999), Outcome::EagerBackoff),
        (Duration::from_millis(1), Outcome::EagerAfterFailure), // third failure: back off 2 s
        (Duration::from_millis(1999), Outcome::EagerBackoff),
        (Duration::from_millis(1), Outcome::Captured),
    ];
    for (call, (wait, want)) in script.into_iter().enumerate() {
        advance(wait);
        let xs = s.fresh_inputs(&mut rng)?;
        let o = cache.run(&3, &(), record).map_err(fail)?;
        ensure!(o == want, "call {call}: {o:?}, want {want:?}");
        s.check(&format!("call {call} ({o:?})"), &xs, N)?;
        if o == Outcome::EagerAfterFailure {
            let why = cache.last_failure(&3).map_err(fail)?.map(|e| e.to_string()).unwrap_or_default();
            ensure!(why.contains("cannot synchronize while this context is capturing"), "call {call}: {why}");
        }
    }
    let xs = s.fresh_inputs(&mut rng)?;
    ensure!(cache.run(&3, &(), record).map_err(fail)? == Outcome::Hit, "recovered");
    s.check("hit after recovery", &xs, N)?;
    let st = cache.stats().map_err(fail)?;
    ensure!((st.failures, st.fallbacks, st.captures, st.hits) == (3, 5, 1, 1), "{st:?}");
    ensure!(cache.last_failure(&3).map_err(fail)?.is_none(), "cleared by the success");
    ensure!(!s.ctx.capture_open(), "no capture left open");
    Ok(())
}

fn lru_eviction_by_count() -> TestResult {
    let s = Step::new(13)?;
    let cache: GraphCache<usize> = GraphCache::new(&s.ctx, CacheConfig { max_entries: 2, ..config() }).map_err(fail)?;
    let mut rng = Rng::new(14);
    let script = [
        (64, Outcome::Captured),
        (128, Outcome::Captured),
        (64, Outcome::Hit),
        (256, Outcome::Captured), // evicts 128
        (64, Outcome::Hit),
        (128, Outcome::Captured), // evicts 256
        (256, Outcome::Captured), // evicts 64
    ];
    for (call, (n, want)) in script.into_iter().enumerate() {
        let xs = s.fresh_inputs(&mut rng)?;
        let o = cache.run(&n, &(), |_| s.record(n)).map_err(fail)?;
        ensure!(o == want, "call {call} (n {n}): {o:?}, want {want:?}");
        s.check(&format!("call {call}"), &xs, n)?;
    }
    let st = cache.stats().map_err(fail)?;
    ensure!((st.entries, st.evictions, st.captures, st.hits) == (2, 3, 5, 2), "{st:?}");
    ensure!(cache.remove(&256).map_err(fail)? && !cache.remove(&256).map_err(fail)?, "remove once");
    cache.clear().map_err(fail)?;
    ensure!(cache.stats().map_err(fail)?.entries == 0, "cleared");
    Ok(())
}

/// A recording that keeps a capture-pool buffer alive: the entry's bytes
/// are that buffer's block; a byte cap evicts the least recently used.
fn byte_cap_counts_what_the_capture_keeps() -> TestResult {
    let s = Step::new(15)?;
    let cache: GraphCache<usize> =
        GraphCache::new(&s.ctx, CacheConfig { max_bytes: 3 * N * 4 / 2, ..config() }).map_err(fail)?;
    let kept = Mutex::new(Vec::new());
    let mut rng = Rng::new(16);
    for (call, key) in [1usize, 2, 2, 1].into_iter().enumerate() {
        let xs = s.fresh_inputs(&mut rng)?;
        cache
            .run(&key, &(), |rec| {
                let ctx = rec.context();
                let tmp = ctx.alloc(N * 4)?;
                ctx.add(&s.x, &s.y, &tmp, N)?;
                ctx.mul(&tmp, &s.y, &s.out, N)?;
                if rec.is_capturing() {
                    kept.lock().unwrap_or_else(|p| p.into_inner()).push(tmp);
                }
                Ok(())
            })
            .map_err(fail)?;
        s.check(&format!("call {call}"), &xs, N)?;
        let st = cache.stats().map_err(fail)?;
        ensure!(st.bytes == N * 4 && st.entries == 1, "call {call}: one 2 KiB entry fits, two do not: {st:?}");
    }
    let st = cache.stats().map_err(fail)?;
    ensure!((st.captures, st.hits, st.evictions) == (3, 1, 2), "{st:?}");
    Ok(())
}

fn re_entry_is_an_error_not_a_deadlock() -> TestResult {
    let s = Step::new(17)?;
    let cache: GraphCache<u32> = GraphCache::new(&s.ctx, config()).map_err(fail)?;
    let e = cache
        .run(&1, &(), |_| {
            s.record(N)?;
            cache.stats().map(drop)
        })
        .err()
        .ok_or_else(|| fail("a recording that calls its cache must fail"))?;
    ensure!(matches!(e, Error::CaptureState(ref m) if m.contains("called from inside one of its own calls")), "{e}");
    let st = cache.stats().map_err(fail)?;
    ensure!(st.failures == 1 && st.graphs == 0, "the capture failed, then the eager run: {st:?}");
    ensure!(!s.ctx.capture_open(), "no capture left open");
    Ok(())
}

/// Four threads replay their own key 200 times each on one context; every
/// replay adds y to the thread's accumulator exactly once.
fn concurrent_hits_serialise() -> TestResult {
    let ctx = Context::new(0).map_err(fail)?;
    let cache: Arc<GraphCache<usize>> = Arc::new(GraphCache::new(&ctx, config()).map_err(fail)?);
    let ones = Arc::new(upload(&ctx, &vec![1.0f32; N]).map_err(fail)?);
    let accs: Vec<Arc<DeviceBuffer>> =
        (0..4).map(|_| upload(&ctx, &vec![0.0f32; N]).map(Arc::new)).collect::<Result<_, _>>().map_err(fail)?;
    let calls = 200;
    std::thread::scope(|sc| -> TestResult {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (cache, acc, ones) = (cache.clone(), accs[t].clone(), ones.clone());
                sc.spawn(move || -> fc_graph::Result<()> {
                    for _ in 0..calls {
                        cache.run(&t, &(), |rec| rec.context().add(&acc, &ones, &acc, N))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| fail("worker panicked"))?.map_err(fail)?;
        }
        Ok(())
    })?;
    ctx.synchronize().map_err(fail)?;
    for (t, acc) in accs.iter().enumerate() {
        let v = download(acc, N).map_err(fail)?;
        ensure!(v.iter().all(|&x| x == calls as f32), "thread {t}: accumulator {} after {calls} calls", v[0]);
    }
    let st = cache.stats().map_err(fail)?;
    ensure!(st.captures == 4 && st.hits == 4 * (calls as u64 - 1), "{st:?}");
    Ok(())
}

fn node_counts_and_debug_dot() -> TestResult {
    let s = Step::new(19)?;
    let mut cap = s.ctx.begin_breakable::<()>(CaptureMode::ThreadLocal).map_err(fail)?;
    s.record(N).map_err(fail)?; // 2 nodes
    cap.brk(&(), |_, _| Ok(())).map_err(fail)?;
    s.ctx.add(&s.x, &s.y, &s.z, N).map_err(fail)?; // 1 node
    cap.brk(&(), |_, _| Ok(())).map_err(fail)?;
    let g = cap.end().map_err(fail)?; // the last segment is empty
    let counts = g.piece_node_counts().map_err(fail)?;
    ensure!(counts == [2, 0, 1, 0, 0], "piece node counts {counts:?}");
    ensure!(g.node_count().map_err(fail)? == 3, "total");
    let dir = std::env::temp_dir().join(format!("fc-cache-dot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let path = dir.join("graph.dot");
    if fc_graph::driver().map_err(fail)?.cuGraphDebugDotPrint.is_none() {
        let e = g.debug_dot(&path).err().ok_or_else(|| fail("no cuGraphDebugDotPrint: must be refused"))?;
        ensure!(matches!(e, Error::Unsupported { .. }), "{e}");
        println!("[note] driver without cuGraphDebugDotPrint");
        return Ok(());
    }
    g.debug_dot(&path).map_err(fail)?;
    let text = std::fs::read_to_string(&path).map_err(fail)?;
    ensure!(text.matches("digraph").count() == 2, "one digraph per non-empty segment:\n{text}");
    ensure!(text.contains("// piece 1: break") && text.contains("// piece 4: segment that recorded no work"), "{text}");
    ensure!(text.contains("// piece 0: segment, 2 nodes") && text.contains("// piece 2: segment, 1 nodes"), "{text}");
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).map_err(fail)?.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    ensure!(leftovers.len() == 1, "temporary files left: {leftovers:?}");
    // File names that a suffix would spoil (found by fuzz/dot_names): the
    // longest a file system takes (255 bytes), and one that is not UTF-8.
    {
        use std::os::unix::ffi::OsStrExt;
        let long = dir.join("d".repeat(251) + ".dot");
        let odd = dir.join(std::ffi::OsStr::from_bytes(b"\xfb\xfe.dot"));
        for p in [&long, &odd] {
            g.debug_dot(p).map_err(|e| fail(format!("{}: {e}", p.display())))?;
            let text = std::fs::read(p).map_err(fail)?;
            ensure!(text.windows(7).filter(|w| w == b"digraph").count() == 2, "{}", p.display());
            std::fs::remove_file(p).map_err(fail)?;
        }
        let leftovers: Vec<_> =
            std::fs::read_dir(&dir).map_err(fail)?.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        ensure!(leftovers.len() == 1, "temporary files left: {leftovers:?}");
    }
    // Through the cache.
    let cache: GraphCache<u8> = GraphCache::new(&s.ctx, config()).map_err(fail)?;
    ensure!(cache.debug_dot(&1, &path).is_err(), "no graph for key 1 yet");
    cache.run(&1, &(), |_| s.record(N)).map_err(fail)?;
    ensure!(cache.node_count(&1).map_err(fail)? == Some(2), "cached graph nodes");
    cache.debug_dot(&1, &path).map_err(fail)?;
    let text = std::fs::read_to_string(&path).map_err(fail)?;
    ensure!(text.matches("digraph").count() == 1, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Informational timing (fc-bench has the real row): a hit replays the
/// same 26-kernel graph as a bare launch; the difference must be small (a
/// loose bound here, so a hit that captured or waited would fail).
fn hit_costs_about_a_bare_launch() -> TestResult {
    let s = Step::new(21)?;
    let chain = |ctx: &Context| -> fc_graph::Result<()> {
        for _ in 0..13 {
            ctx.add(&s.x, &s.y, &s.z, N)?;
            ctx.mul(&s.z, &s.y, &s.x, N)?;
        }
        Ok(())
    };
    let cap = s.ctx.begin_capture(CaptureMode::ThreadLocal).map_err(fail)?;
    chain(&s.ctx).map_err(fail)?;
    let g = cap.end().map_err(fail)?;
    let cache: GraphCache<u64> = GraphCache::new(&s.ctx, config()).map_err(fail)?;
    cache.run(&26, &(), |rec| chain(rec.context())).map_err(fail)?;
    let (mut hit, mut bare) = (Vec::new(), Vec::new());
    for i in 0..2000 {
        let t0 = Instant::now();
        let o = cache.run(&26, &(), |rec| chain(rec.context())).map_err(fail)?;
        let t1 = Instant::now();
        g.launch().map_err(fail)?;
        let t2 = Instant::now();
        ensure!(o == Outcome::Hit, "iteration {i}: {o:?}");
        hit.push((t1 - t0).as_secs_f64() * 1e6);
        bare.push((t2 - t1).as_secs_f64() * 1e6);
        if i % 64 == 63 {
            s.ctx.synchronize().map_err(fail)?;
        }
    }
    s.ctx.synchronize().map_err(fail)?;
    let (h, b) = (median(&mut hit), median(&mut bare));
    println!(
        "hit {h:.3} us, bare launch {b:.3} us, difference {:.3} us ({} build)",
        h - b,
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    ensure!(h - b < 5.0, "a hit costs {:.3} us more than a bare launch", h - b);
    Ok(())
}

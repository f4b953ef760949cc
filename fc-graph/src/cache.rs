//! A keyed graph cache: one call runs the work of a key, from a cached
//! graph when there is one, capturing it when there is none, and eagerly
//! when capturing fails.
//!
//! ```no_run
//! use fc_graph::cache::{CacheConfig, GraphCache, Outcome};
//! use fc_graph::Context;
//! # fn main() -> fc_graph::Result<()> {
//! let ctx = Context::new(0)?;
//! let (x, y) = (ctx.alloc(4096 * 4)?, ctx.alloc(4096 * 4)?);
//! let cache: GraphCache<usize> = GraphCache::new(&ctx, CacheConfig::default())?;
//! for bucket in [16, 32, 16] {
//!     let outcome = cache.run(&bucket, &(), |rec| rec.context().add(&x, &y, &x, bucket))?;
//!     // Captured, Captured, Hit
//! #   let _ = outcome == Outcome::Hit;
//! }
//! # Ok(()) }
//! ```
//!
//! # One call, one execution
//!
//! [`GraphCache::run`] executes the work of `key` exactly once per call,
//! whichever path it takes (its [`Outcome`]):
//!
//! - **Hit**: the key has a ready graph: it is replayed (with the call's
//!   live value, which its breaks receive).
//! - **Captured**: the key has no graph: the recording is captured (with
//!   bounded re-recording when the capture is invalidated, as
//!   [`Context::capture_with_retry`]), instantiated and launched.
//! - **WarmedUp**: as Captured, but with [`CacheConfig::warmup`] the
//!   recording first runs eagerly once (that run is the call's execution;
//!   lazily initialised libraries get to initialise outside the capture),
//!   then it is captured and instantiated for later calls, not launched.
//! - **Refreshed**: the key was invalidated ([`GraphCache::invalidate`]):
//!   the recording is captured again and the existing executable updated in
//!   place (`cuGraphExecUpdate`; segments whose topology changed, or every
//!   segment on drivers without in-place update, are instantiated anew),
//!   then launched.
//! - **EagerAfterFailure**: capturing failed: the recording ran eagerly
//!   instead (or the warm-up already ran it), so the caller's result is
//!   right. [`GraphCache::last_failure`] tells why.
//! - **EagerBackoff**: the key is backing off after failures: the
//!   recording ran eagerly without trying to capture.
//!
//! The recording therefore runs eagerly and under capture and must queue
//! the same work in both (it must not branch on [`Recorder::is_capturing`]
//! in ways that change the results). Breaks ([`Recorder::brk`]) run their function right
//! away when the recording runs eagerly; under a cache capture they are
//! only recorded (not run at capture time, unlike a plain capture, so that
//! capturing has no effect beyond recording) and run at each replay with
//! that replay's live value.
//!
//! # Failures: bounded retries, backoff, no latch
//!
//! A capture *attempt* records up to [`CacheConfig::max_tries`] times while
//! the capture is invalidated. After [`CacheConfig::fail_threshold`]
//! consecutive failed attempts a key runs eagerly for a backoff period
//! ([`CacheConfig::backoff`], doubling after each further failure up to
//! [`CacheConfig::max_backoff`]); the first call after the period tries to
//! capture again. A success resets the key's failures and backoff. A key
//! never stops trying for good; `invalidate` also ends its backoff.
//!
//! # Eviction
//!
//! Least recently used entries (an entry is a key the cache knows: with a
//! graph, or only with failure state) are dropped while the cache holds
//! more than [`CacheConfig::max_entries`] entries or more than
//! [`CacheConfig::max_bytes`] bytes (0: no limit). The entry of the running
//! call is never evicted by its own call, so one entry larger than
//! `max_bytes` stays until another call needs the room. Eviction drops the
//! graph (its executables are destroyed; launches in flight finish first).
//!
//! **Bytes of an entry**: the capture-pool bytes its capture left in use,
//! i.e. memory the recording allocated while capturing and still keeps
//! alive when the capture ends (outputs stored in its own state). The graph
//! addresses that memory at every replay, so it is what a cached graph pins
//! beyond the driver's own (unmeasurable) executable memory. Buffers
//! allocated and freed inside the recording count 0: their pool memory goes
//! back to the pool for later captures of the context, which is safe
//! because one context's graphs replay in order on its one stream. A
//! refresh adds what the new capture left in use minus what it freed.
//!
//! # Threads
//!
//! A cache serves one context. It may be called from any thread; calls
//! serialise on the cache (a miss holds it while it records, captures and
//! launches; a hit while it launches). A recording or break function that
//! calls back into its own cache gets [`Error::CaptureState`] instead of a
//! deadlock. While a call captures, every piece of work queued on the
//! context's stream is recorded, so threads sharing the context must not
//! queue work meanwhile: give each context one cache and route its work
//! through it. A call that must capture is refused (`CaptureState`) while
//! another capture is open on the context or one of its break functions
//! runs.

use std::collections::HashMap;
use std::hash::Hash;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crate::capture::{break_here, Capture};
use crate::capture_mode::CaptureMode;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::sync::lock;

/// How a [`GraphCache`] captures, retries, backs off and evicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// Most entries kept (0: no limit).
    pub max_entries: usize,
    /// Most bytes kept, summed over the entries (0: no limit); see the
    /// module documentation for what an entry's bytes are.
    pub max_bytes: usize,
    /// Run the recording eagerly once before a key's capture.
    pub warmup: bool,
    /// Recordings per capture attempt while the capture is invalidated (>= 1).
    pub max_tries: u32,
    /// Consecutive failed capture attempts before a key backs off (>= 1).
    pub fail_threshold: u32,
    /// First backoff period; zero: try again at the next call.
    pub backoff: Duration,
    /// Longest backoff period (>= `backoff`).
    pub max_backoff: Duration,
    /// Capture mode of the cache's captures.
    pub mode: CaptureMode,
}

impl Default for CacheConfig {
    /// 256 entries, no byte limit, no warm-up, 3 recordings per attempt,
    /// back off after 3 failed attempts for 100 ms doubling up to 10 s,
    /// THREAD_LOCAL captures.
    fn default() -> Self {
        CacheConfig {
            max_entries: 256,
            max_bytes: 0,
            warmup: false,
            max_tries: 3,
            fail_threshold: 3,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            mode: CaptureMode::ThreadLocal,
        }
    }
}

impl CacheConfig {
    /// Checks the settings: `max_tries` and `fail_threshold` at least 1,
    /// `max_backoff` not below `backoff`.
    pub fn validate(&self) -> Result<()> {
        if self.max_tries == 0 {
            return Err(Error::invalid("graph cache: max_tries must be at least 1"));
        }
        if self.fail_threshold == 0 {
            return Err(Error::invalid("graph cache: fail_threshold must be at least 1"));
        }
        if self.max_backoff < self.backoff {
            return Err(Error::invalid(format!(
                "graph cache: max_backoff ({:?}) is below backoff ({:?})",
                self.max_backoff, self.backoff
            )));
        }
        Ok(())
    }
}

/// How a [`GraphCache::run`] call executed its work (see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Replayed the key's cached graph.
    Hit,
    /// Captured, instantiated and launched a new graph.
    Captured,
    /// Ran the recording eagerly (warm-up), then captured and instantiated.
    WarmedUp,
    /// Re-captured an invalidated key and updated its graph, then launched.
    Refreshed,
    /// Capturing failed; the work ran eagerly.
    EagerAfterFailure,
    /// The key is backing off after failures; the work ran eagerly.
    EagerBackoff,
}

/// Counters of a [`GraphCache`] (since it was made) and its current size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls that found a ready graph and replayed it.
    pub hits: u64,
    /// Every other call (captures, refreshes, eager runs).
    pub misses: u64,
    /// New graphs captured and instantiated.
    pub captures: u64,
    /// Refreshes that updated every segment in place.
    pub updates: u64,
    /// Refreshes that instantiated at least one segment anew.
    pub reinstantiations: u64,
    /// Calls whose work ran eagerly because capturing failed or the key was
    /// backing off.
    pub fallbacks: u64,
    /// Failed capture attempts (captures and refreshes).
    pub failures: u64,
    /// Entries dropped to respect `max_entries` / `max_bytes`.
    pub evictions: u64,
    /// Entries now (keys with a graph or with failure state).
    pub entries: usize,
    /// Entries now holding a graph.
    pub graphs: usize,
    /// Bytes now, summed over the entries.
    pub bytes: usize,
}

// ---------------------------------------------------------------------------
// The policy: GPU-free, driven through `Backend`.

/// What the policy asks of the world: the GPU cache implements it with
/// recordings and launches ([`GraphCache::run`]), callers with recordings
/// of their own (the C API's, held between calls) implement it too
/// ([`GraphCache::run_with`]), the unit tests with a fake.
pub trait Backend<G> {
    /// Checked before a call that needs more than a replay.
    fn check_can_capture(&mut self) -> Result<()>;
    /// Runs the recording eagerly.
    fn eager(&mut self) -> Result<()>;
    /// Captures and instantiates a new graph.
    fn capture(&mut self) -> Result<Built<G>>;
    /// Re-captures into `graph`, updating it.
    fn refresh(&mut self, graph: &mut G) -> Result<Refresh>;
    /// Launches (replays) `graph`.
    fn launch(&mut self, graph: &G) -> Result<()>;
}

/// A graph a capture built, and its bytes.
#[derive(Debug)]
pub struct Built<G> {
    /// The graph.
    pub graph: G,
    /// Capture-pool bytes it keeps in use ([`pool_delta`]).
    pub bytes: usize,
}

/// What a refresh did.
#[derive(Debug, Clone, Copy)]
pub struct Refresh {
    /// Every segment was updated in place.
    pub in_place: bool,
    /// Change of the entry's bytes.
    pub bytes_delta: isize,
}

/// The clock the backoff reads (injectable for tests).
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

struct Entry<G> {
    graph: Option<G>,
    /// Invalidated: the next call refreshes the graph.
    stale: bool,
    /// Consecutive failed capture attempts.
    failures: u32,
    /// The next backoff period to apply.
    next_backoff: Duration,
    /// Runs eagerly until then.
    eager_until: Option<Instant>,
    last_failure: Option<Error>,
    bytes: usize,
    last_used: u64,
}

impl<G> Entry<G> {
    fn new(tick: u64, backoff: Duration) -> Entry<G> {
        Entry {
            graph: None,
            stale: false,
            failures: 0,
            next_backoff: backoff,
            eager_until: None,
            last_failure: None,
            bytes: 0,
            last_used: tick,
        }
    }

    fn reset_failures(&mut self, cfg: &CacheConfig) {
        self.failures = 0;
        self.next_backoff = cfg.backoff;
        self.eager_until = None;
    }
}

/// The cache's state and policy, generic over the graph type.
pub(crate) struct Core<K, G> {
    cfg: CacheConfig,
    clock: Clock,
    entries: HashMap<K, Entry<G>>,
    tick: u64,
    bytes: usize,
    stats: CacheStats,
}

impl<K: Hash + Eq + Clone, G> Core<K, G> {
    pub(crate) fn new(cfg: CacheConfig, clock: Clock) -> Result<Core<K, G>> {
        cfg.validate()?;
        Ok(Core { cfg, clock, entries: HashMap::new(), tick: 0, bytes: 0, stats: CacheStats::default() })
    }

    /// Runs `key`'s work once (see the module documentation).
    pub(crate) fn run(&mut self, key: &K, backend: &mut impl Backend<G>) -> Result<Outcome> {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.entries.get_mut(key) {
            e.last_used = tick;
            if let (Some(g), false) = (&e.graph, e.stale) {
                self.stats.hits += 1;
                return backend.launch(g).map(|()| Outcome::Hit);
            }
        }
        self.stats.misses += 1;
        let result = self.miss(key, tick, backend);
        self.evict(key);
        result
    }

    fn miss(&mut self, key: &K, tick: u64, backend: &mut impl Backend<G>) -> Result<Outcome> {
        backend.check_can_capture()?;
        let cfg = &self.cfg;
        let e = self.entries.entry(key.clone()).or_insert_with(|| Entry::new(tick, cfg.backoff));
        if e.eager_until.is_some_and(|until| (self.clock)() < until) {
            backend.eager()?;
            self.stats.fallbacks += 1;
            return Ok(Outcome::EagerBackoff);
        }
        let mut warmed = false;
        let refreshed = if e.stale { e.graph.as_mut().map(|g| backend.refresh(g)) } else { None };
        let failure = if let Some(refreshed) = refreshed {
            match refreshed {
                Ok(r) => {
                    e.stale = false;
                    e.reset_failures(cfg);
                    e.last_failure = None;
                    let new_bytes = e.bytes.saturating_add_signed(r.bytes_delta);
                    self.bytes = self.bytes - e.bytes + new_bytes;
                    e.bytes = new_bytes;
                    if r.in_place {
                        self.stats.updates += 1;
                    } else {
                        self.stats.reinstantiations += 1;
                    }
                    if let Some(g) = &e.graph {
                        backend.launch(g)?;
                    }
                    return Ok(Outcome::Refreshed);
                }
                Err(err) => {
                    // The graph may be half updated: drop it, capture anew later.
                    e.graph = None;
                    e.stale = false;
                    self.bytes -= e.bytes;
                    e.bytes = 0;
                    err
                }
            }
        } else {
            e.stale = false;
            if cfg.warmup {
                backend.eager()?;
                warmed = true;
            }
            match backend.capture() {
                Ok(built) => {
                    e.reset_failures(cfg);
                    e.last_failure = None;
                    self.bytes = self.bytes - e.bytes + built.bytes;
                    e.bytes = built.bytes;
                    self.stats.captures += 1;
                    let g = e.graph.insert(built.graph);
                    if warmed {
                        return Ok(Outcome::WarmedUp);
                    }
                    return backend.launch(g).map(|()| Outcome::Captured);
                }
                Err(err) => err,
            }
        };
        // A failed attempt: count it, maybe back off, run the work eagerly.
        self.stats.failures += 1;
        e.failures = e.failures.saturating_add(1);
        if e.failures >= cfg.fail_threshold {
            e.eager_until = Some((self.clock)() + e.next_backoff);
            e.next_backoff = (e.next_backoff * 2).min(cfg.max_backoff);
        }
        let note = format!("the graph cache ran the work eagerly after a failed capture: {failure}");
        e.last_failure = Some(failure);
        self.stats.fallbacks += 1;
        if !warmed {
            backend.eager().map_err(|err| err.with_note(&note))?;
        }
        Ok(Outcome::EagerAfterFailure)
    }

    /// Drops least recently used entries (never `keep`) while over a cap.
    fn evict(&mut self, keep: &K) {
        loop {
            let over_count = self.cfg.max_entries > 0 && self.entries.len() > self.cfg.max_entries;
            let over_bytes = self.cfg.max_bytes > 0 && self.bytes > self.cfg.max_bytes;
            if !over_count && !over_bytes {
                return;
            }
            // Over the byte cap only, an entry without bytes frees nothing.
            let victim = self
                .entries
                .iter()
                .filter(|(k, e)| *k != keep && (over_count || e.bytes > 0))
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else { return };
            if let Some(e) = self.entries.remove(&victim) {
                self.bytes -= e.bytes;
                self.stats.evictions += 1;
            }
        }
    }

    /// Marks `key` for a refresh at its next call and ends its backoff;
    /// false when the cache does not know it.
    pub(crate) fn invalidate(&mut self, key: &K) -> bool {
        let cfg = &self.cfg;
        self.entries.get_mut(key).map(|e| invalidate_entry(e, cfg)).is_some()
    }

    /// Invalidates every entry; returns how many there are.
    pub(crate) fn invalidate_all(&mut self) -> usize {
        let cfg = &self.cfg;
        self.entries.values_mut().for_each(|e| invalidate_entry(e, cfg));
        self.entries.len()
    }

    /// Drops `key`'s entry; false when the cache does not know it.
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        match self.entries.remove(key) {
            Some(e) => {
                self.bytes -= e.bytes;
                true
            }
            None => false,
        }
    }

    /// Drops every entry (counters are kept).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.entries.len(),
            graphs: self.entries.values().filter(|e| e.graph.is_some()).count(),
            bytes: self.bytes,
            ..self.stats
        }
    }

    pub(crate) fn graph(&self, key: &K) -> Option<&G> {
        self.entries.get(key).and_then(|e| e.graph.as_ref())
    }

    pub(crate) fn last_failure(&self, key: &K) -> Option<Error> {
        self.entries.get(key).and_then(|e| e.last_failure.clone())
    }

    pub(crate) fn config(&self) -> &CacheConfig {
        &self.cfg
    }
}

fn invalidate_entry<G>(e: &mut Entry<G>, cfg: &CacheConfig) {
    e.stale = e.graph.is_some();
    e.reset_failures(cfg);
}

// ---------------------------------------------------------------------------
// Serialisation with a clear error on re-entry.

/// A mutex that refuses (instead of deadlocking) a thread that already
/// holds it.
pub(crate) struct Exclusive<T> {
    value: Mutex<T>,
    /// The token of the thread holding `value`, or 0.
    owner: AtomicUsize,
}

/// The calling thread's token: the address of a thread-local (never 0).
fn thread_token() -> usize {
    thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.try_with(|t| t as *const u8 as usize).unwrap_or(usize::MAX)
}

pub(crate) struct ExclusiveGuard<'a, T> {
    owner: &'a AtomicUsize,
    guard: MutexGuard<'a, T>,
}

impl<T> std::ops::Deref for ExclusiveGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for ExclusiveGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for ExclusiveGuard<'_, T> {
    fn drop(&mut self) {
        // Cleared before the mutex is released (the guard field drops after).
        self.owner.store(0, Ordering::Relaxed);
    }
}

impl<T> Exclusive<T> {
    pub(crate) fn new(value: T) -> Exclusive<T> {
        Exclusive { value: Mutex::new(value), owner: AtomicUsize::new(0) }
    }

    /// Locks, waiting for other threads; refused when this thread holds it.
    pub(crate) fn lock(&self) -> Result<ExclusiveGuard<'_, T>> {
        let me = thread_token();
        let guard = match self.value.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if self.owner.load(Ordering::Relaxed) == me {
                    return Err(Error::capture_state(
                        "the graph cache was called from inside one of its own calls (a recording or break \
                         function called back into the same cache)",
                    ));
                }
                lock(&self.value)
            }
        };
        self.owner.store(me, Ordering::Relaxed);
        Ok(ExclusiveGuard { owner: &self.owner, guard })
    }
}

// ---------------------------------------------------------------------------
// The GPU cache.

/// What a recording receives: the context to queue work on, whether this
/// run is captured, the call's live value, and breaks.
pub struct Recorder<'a, L> {
    ctx: &'a Context,
    capture: Option<&'a mut Capture<L>>,
    live: &'a L,
}

impl<L> std::fmt::Debug for Recorder<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("ctx", self.ctx).field("capturing", &self.capture.is_some()).finish()
    }
}

impl<'a, L> Recorder<'a, L> {
    /// The cache's context: queue the work on it (or on its raw stream).
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// Whether this run is being captured (else it runs eagerly).
    pub fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// The live value of the call.
    pub fn live(&self) -> &'a L {
        self.live
    }

    /// A break: eagerly, `f` runs now with the call's live value; under
    /// capture it is recorded without running, and runs at every replay
    /// with that replay's live value (see [`Capture::brk`]).
    pub fn brk<F>(&mut self, f: F) -> Result<()>
    where
        F: Fn(&Context, &L) -> Result<()> + Send + Sync + 'static,
    {
        break_here(self.capture.as_deref_mut(), self.ctx, self.live, f)
    }
}

/// A keyed cache of graphs on one context (see the module documentation).
/// `K` is the key, `L` the live value breaks receive at replay.
pub struct GraphCache<K, L = ()> {
    ctx: Context,
    core: Exclusive<Core<K, Graph<L>>>,
}

impl<K, L> std::fmt::Debug for GraphCache<K, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphCache").field("ctx", &self.ctx).finish_non_exhaustive()
    }
}

/// Runs `f` and returns the capture-pool bytes it left in use on `ctx`
/// (negative: freed): what a cached graph pins.
pub fn pool_delta<T>(ctx: &Context, f: impl FnOnce() -> Result<T>) -> Result<(T, isize)> {
    let before = ctx.pool_in_use_bytes();
    let value = f()?;
    let delta = ctx.pool_in_use_bytes() as isize - before as isize;
    Ok((value, delta))
}

/// Refuses a call that must capture while the context cannot begin one.
pub fn check_context(ctx: &Context) -> Result<()> {
    ctx.capture().check_can_begin().map_err(|e| {
        Error::capture_state(format!(
            "the graph cache cannot capture now: {}",
            e.to_string().trim_start_matches("capture state: ")
        ))
    })
}

/// The backend of [`GraphCache::run`]: guarded captures, [`Recorder`].
struct GuardedBackend<'a, L, F> {
    ctx: &'a Context,
    mode: CaptureMode,
    max_tries: u32,
    live: &'a L,
    record: F,
}

impl<L, F> Backend<Graph<L>> for GuardedBackend<'_, L, F>
where
    F: FnMut(&mut Recorder<'_, L>) -> Result<()>,
{
    fn check_can_capture(&mut self) -> Result<()> {
        check_context(self.ctx)
    }

    fn eager(&mut self) -> Result<()> {
        (self.record)(&mut Recorder { ctx: self.ctx, capture: None, live: self.live })
    }

    fn capture(&mut self) -> Result<Built<Graph<L>>> {
        let (ctx, live, record) = (self.ctx, self.live, &mut self.record);
        let (done, delta) = pool_delta(ctx, || {
            ctx.capture_with_retry(self.mode, self.max_tries, |cap: &mut Capture<L>| {
                cap.defer_breaks();
                record(&mut Recorder { ctx, capture: Some(cap), live })
            })
        })?;
        Ok(Built { graph: done.graph, bytes: delta.max(0) as usize })
    }

    fn refresh(&mut self, graph: &mut Graph<L>) -> Result<Refresh> {
        let (ctx, live, record) = (self.ctx, self.live, &mut self.record);
        let ((report, _tries), delta) = pool_delta(ctx, || {
            ctx.update_with_retry(self.mode, self.max_tries, graph, |cap: &mut Capture<L>| {
                cap.defer_breaks();
                record(&mut Recorder { ctx, capture: Some(cap), live })
            })
        })?;
        Ok(Refresh { in_place: report.instantiated == 0, bytes_delta: delta })
    }

    fn launch(&mut self, graph: &Graph<L>) -> Result<()> {
        graph.replay(self.live)
    }
}

impl<K: Hash + Eq + Clone, L> GraphCache<K, L> {
    /// A cache on `ctx` (which it keeps alive). Refused for an invalid
    /// `config` ([`CacheConfig::validate`]).
    pub fn new(ctx: &Context, config: CacheConfig) -> Result<GraphCache<K, L>> {
        Self::with_clock(ctx, config, Arc::new(Instant::now))
    }

    /// As [`GraphCache::new`], with the clock the backoff periods are read
    /// from (for tests).
    pub fn with_clock(ctx: &Context, config: CacheConfig, clock: Clock) -> Result<GraphCache<K, L>> {
        if ctx.lane_index() != 0 {
            return Err(Error::invalid(format!(
                "a graph cache records on the context itself (lane 0), not on lane {}",
                ctx.lane_index()
            )));
        }
        Ok(GraphCache { ctx: ctx.clone(), core: Exclusive::new(Core::new(config, clock)?) })
    }

    /// The context the cache captures and launches on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The settings.
    pub fn config(&self) -> Result<CacheConfig> {
        Ok(self.core.lock()?.config().clone())
    }

    /// Runs `key`'s work once: replays its graph, or captures it (running
    /// `record` eagerly and/or under capture), or runs `record` eagerly; see
    /// the module documentation. `live` is what breaks receive. Errors: the
    /// replay or the eager run failed (a failed *capture* is not an error:
    /// the work runs eagerly), the call re-entered the cache, or the call
    /// had to capture while the context could not begin a capture.
    pub fn run<F>(&self, key: &K, live: &L, record: F) -> Result<Outcome>
    where
        F: FnMut(&mut Recorder<'_, L>) -> Result<()>,
    {
        let mut core = self.core.lock()?;
        let (mode, max_tries) = (core.cfg.mode, core.cfg.max_tries);
        core.run(key, &mut GuardedBackend { ctx: &self.ctx, mode, max_tries, live, record })
    }

    /// [`GraphCache::run`] through a backend of the caller's: how it runs
    /// the work eagerly, records, refreshes and launches (the C API records
    /// through the recording its context holds between calls).
    pub fn run_with(&self, key: &K, backend: &mut impl Backend<Graph<L>>) -> Result<Outcome> {
        self.core.lock()?.run(key, backend)
    }

    /// The capture mode and re-recordings per attempt of its configuration.
    pub fn capture_settings(&self) -> Result<(CaptureMode, u32)> {
        let core = self.core.lock()?;
        Ok((core.cfg.mode, core.cfg.max_tries))
    }

    /// Marks `key`'s graph for a refresh at its next call (re-captured and
    /// updated in place) and ends any backoff of the key. False when the
    /// cache does not know `key`.
    pub fn invalidate(&self, key: &K) -> Result<bool> {
        Ok(self.core.lock()?.invalidate(key))
    }

    /// Invalidates every entry; returns how many there are.
    pub fn invalidate_all(&self) -> Result<usize> {
        Ok(self.core.lock()?.invalidate_all())
    }

    /// Drops `key`'s entry (its graph is destroyed); false when the cache
    /// does not know it.
    pub fn remove(&self, key: &K) -> Result<bool> {
        Ok(self.core.lock()?.remove(key))
    }

    /// Drops every entry; the counters are kept.
    pub fn clear(&self) -> Result<()> {
        self.core.lock()?.clear();
        Ok(())
    }

    /// The counters and the current size.
    pub fn stats(&self) -> Result<CacheStats> {
        Ok(self.core.lock()?.stats())
    }

    /// Why `key`'s last capture attempt failed, if its last attempt failed.
    pub fn last_failure(&self, key: &K) -> Result<Option<Error>> {
        Ok(self.core.lock()?.last_failure(key))
    }

    /// Runs `f` on `key`'s cached graph; `None` when it has none.
    pub fn with_graph<T>(&self, key: &K, f: impl FnOnce(&Graph<L>) -> Result<T>) -> Result<Option<T>> {
        let core = self.core.lock()?;
        core.graph(key).map(f).transpose()
    }

    /// Nodes in `key`'s cached graph ([`Graph::node_count`]).
    pub fn node_count(&self, key: &K) -> Result<Option<usize>> {
        self.with_graph(key, Graph::node_count)
    }

    /// Writes `key`'s cached graph as DOT ([`Graph::debug_dot`]); refused
    /// when the key has no graph.
    pub fn debug_dot(&self, key: &K, path: impl AsRef<Path>) -> Result<()> {
        self.with_graph(key, |g| g.debug_dot(path))?
            .ok_or_else(|| Error::invalid("graph cache: the key has no cached graph"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// A graph stand-in: which capture made it and how often it was updated.
    #[derive(Debug, Clone, PartialEq)]
    struct FakeGraph {
        id: u32,
        version: u32,
    }

    /// Scripted backend: logs every step; failures are injected by count.
    #[derive(Default)]
    struct Fake {
        log: Vec<String>,
        fail_captures: u32,
        fail_refreshes: u32,
        fail_eager: bool,
        refresh_not_in_place: bool,
        refused: bool,
        bytes: usize,
        next_id: u32,
    }

    impl Backend<FakeGraph> for Fake {
        fn check_can_capture(&mut self) -> Result<()> {
            if self.refused {
                return Err(Error::capture_state("refused"));
            }
            Ok(())
        }
        fn eager(&mut self) -> Result<()> {
            self.log.push("eager".into());
            if self.fail_eager {
                return Err(Error::Callback("eager failed".into()));
            }
            Ok(())
        }
        fn capture(&mut self) -> Result<Built<FakeGraph>> {
            self.log.push("capture".into());
            if self.fail_captures > 0 {
                self.fail_captures -= 1;
                return Err(Error::Callback("record function returned 1".into()));
            }
            self.next_id += 1;
            Ok(Built { graph: FakeGraph { id: self.next_id, version: 0 }, bytes: self.bytes })
        }
        fn refresh(&mut self, g: &mut FakeGraph) -> Result<Refresh> {
            self.log.push(format!("refresh {}", g.id));
            if self.fail_refreshes > 0 {
                self.fail_refreshes -= 1;
                return Err(Error::Callback("refresh failed".into()));
            }
            g.version += 1;
            Ok(Refresh { in_place: !self.refresh_not_in_place, bytes_delta: 0 })
        }
        fn launch(&mut self, g: &FakeGraph) -> Result<()> {
            self.log.push(format!("launch {}.{}", g.id, g.version));
            Ok(())
        }
    }

    impl Fake {
        fn take_log(&mut self) -> Vec<String> {
            std::mem::take(&mut self.log)
        }
    }

    /// A clock the test moves by hand.
    #[derive(Clone)]
    struct ManualClock {
        base: Instant,
        offset: Arc<StdMutex<Duration>>,
    }

    impl ManualClock {
        fn new() -> ManualClock {
            ManualClock { base: Instant::now(), offset: Arc::new(StdMutex::new(Duration::ZERO)) }
        }
        fn advance(&self, d: Duration) {
            *self.offset.lock().unwrap() += d;
        }
        fn clock(&self) -> Clock {
            let me = self.clone();
            Arc::new(move || me.base + *me.offset.lock().unwrap())
        }
    }

    fn core(cfg: CacheConfig) -> (Core<u64, FakeGraph>, ManualClock) {
        let clock = ManualClock::new();
        (Core::new(cfg, clock.clock()).unwrap(), clock)
    }

    fn cfg() -> CacheConfig {
        CacheConfig { max_entries: 0, ..CacheConfig::default() }
    }

    #[test]
    fn first_call_captures_and_launches_then_hits() {
        let (mut c, _) = core(cfg());
        let mut b = Fake::default();
        assert_eq!(c.run(&7, &mut b).unwrap(), Outcome::Captured);
        assert_eq!(b.take_log(), ["capture", "launch 1.0"]);
        for _ in 0..3 {
            assert_eq!(c.run(&7, &mut b).unwrap(), Outcome::Hit);
        }
        assert_eq!(b.take_log(), ["launch 1.0", "launch 1.0", "launch 1.0"]);
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.captures, s.fallbacks, s.entries, s.graphs), (3, 1, 1, 0, 1, 1));
    }

    #[test]
    fn warm_up_runs_eagerly_once_and_does_not_launch() {
        let (mut c, _) = core(CacheConfig { warmup: true, ..cfg() });
        let mut b = Fake::default();
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::WarmedUp);
        assert_eq!(b.take_log(), ["eager", "capture"]);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Hit);
        assert_eq!(b.take_log(), ["launch 1.0"]);
        // A failing warm-up is the call's error; nothing is captured.
        b.fail_eager = true;
        assert!(matches!(c.run(&2, &mut b), Err(Error::Callback(_))));
        assert_eq!(b.take_log(), ["eager"]);
        assert_eq!(c.stats().captures, 1);
    }

    #[test]
    fn invalidate_refreshes_in_place_or_reinstantiates() {
        let (mut c, _) = core(cfg());
        let mut b = Fake::default();
        c.run(&1, &mut b).unwrap();
        assert!(c.invalidate(&1));
        assert!(!c.invalidate(&99), "unknown keys are reported");
        b.take_log();
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Refreshed);
        assert_eq!(b.take_log(), ["refresh 1", "launch 1.1"]);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Hit);
        b.refresh_not_in_place = true;
        assert_eq!(c.invalidate_all(), 1);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Refreshed);
        let s = c.stats();
        assert_eq!((s.updates, s.reinstantiations, s.captures), (1, 1, 1));
    }

    #[test]
    fn a_failed_refresh_drops_the_graph_and_runs_eagerly() {
        let (mut c, _) = core(cfg());
        let mut b = Fake::default();
        c.run(&1, &mut b).unwrap();
        c.invalidate(&1);
        b.fail_refreshes = 1;
        b.take_log();
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        assert_eq!(b.take_log(), ["refresh 1", "eager"]);
        assert!(c.last_failure(&1).unwrap().to_string().contains("refresh failed"));
        assert_eq!(c.stats().graphs, 0);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Captured);
        assert_eq!(b.take_log(), ["capture", "launch 2.0"]);
        assert!(c.last_failure(&1).is_none(), "a success clears the failure");
    }

    #[test]
    fn lru_by_count_evicts_the_least_recently_used() {
        let (mut c, _) = core(CacheConfig { max_entries: 2, ..cfg() });
        let mut b = Fake::default();
        c.run(&1, &mut b).unwrap();
        c.run(&2, &mut b).unwrap();
        c.run(&1, &mut b).unwrap(); // 1 is now more recent than 2
        c.run(&3, &mut b).unwrap();
        let s = c.stats();
        assert_eq!((s.entries, s.evictions), (2, 1));
        assert!(c.graph(&1).is_some() && c.graph(&3).is_some() && c.graph(&2).is_none());
        b.take_log();
        assert_eq!(c.run(&2, &mut b).unwrap(), Outcome::Captured, "an evicted key is captured again");
        assert!(c.graph(&1).is_none(), "then 1 was the least recently used");
    }

    #[test]
    fn lru_by_bytes_and_an_oversized_entry_stays() {
        let (mut c, _) = core(CacheConfig { max_bytes: 100, ..cfg() });
        let mut b = Fake { bytes: 60, ..Fake::default() };
        c.run(&1, &mut b).unwrap();
        assert_eq!(c.stats().bytes, 60);
        c.run(&2, &mut b).unwrap();
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (1, 60, 1));
        assert!(c.graph(&2).is_some());
        b.bytes = 500;
        c.run(&3, &mut b).unwrap();
        let s = c.stats();
        assert_eq!((s.entries, s.bytes), (1, 500), "the running call's entry is never evicted");
        assert!(c.graph(&3).is_some());
        // Entries without bytes are not evicted for bytes.
        b.bytes = 0;
        c.run(&4, &mut b).unwrap();
        b.bytes = 10;
        c.run(&5, &mut b).unwrap();
        let s = c.stats();
        assert!(c.graph(&4).is_some() && c.graph(&3).is_none(), "the 500-byte entry goes first");
        assert_eq!((s.entries, s.bytes), (2, 10));
        assert!(c.remove(&5));
        assert!(!c.remove(&5));
        assert_eq!(c.stats().bytes, 0);
        c.clear();
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn failures_back_off_doubling_up_to_the_cap_and_recover() {
        let config = CacheConfig {
            fail_threshold: 2,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            ..cfg()
        };
        let (mut c, clock) = core(config);
        let mut b = Fake { fail_captures: u32::MAX, ..Fake::default() };
        // Below the threshold every call tries, and runs eagerly.
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        assert_eq!(b.take_log(), ["capture", "eager", "capture", "eager"]);
        // Now backing off for 100 ms, then 200, 400, 400.
        for period in [100u64, 200, 400, 400] {
            clock.advance(Duration::from_millis(period - 1));
            assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerBackoff, "period {period}");
            assert_eq!(b.take_log(), ["eager"], "no capture attempt while backing off");
            clock.advance(Duration::from_millis(1));
            assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure, "period {period}");
            assert_eq!(b.take_log(), ["capture", "eager"]);
        }
        // No latch: once capturing works again the key is captured.
        b.fail_captures = 0;
        clock.advance(Duration::from_millis(400));
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Captured);
        let s = c.stats();
        assert_eq!((s.failures, s.fallbacks, s.captures), (6, 10, 1));
        // Failures were reset: a new failure streak starts at the threshold again.
        c.invalidate(&1);
        b.fail_refreshes = 1;
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        b.fail_captures = 1;
        b.take_log();
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        assert_eq!(b.take_log(), ["capture", "eager"]);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerBackoff, "second failure in a row: backoff");
        assert_eq!(b.take_log(), ["eager"]);
        clock.advance(Duration::from_millis(100));
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Captured, "first backoff again 100 ms");
    }

    #[test]
    fn zero_backoff_tries_again_at_the_next_call() {
        let config = CacheConfig { fail_threshold: 1, backoff: Duration::ZERO, max_backoff: Duration::ZERO, ..cfg() };
        let (mut c, _) = core(config);
        let mut b = Fake { fail_captures: 3, ..Fake::default() };
        for _ in 0..3 {
            assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        }
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Captured);
        assert_eq!(b.log.iter().filter(|l| *l == "capture").count(), 4);
    }

    #[test]
    fn invalidate_ends_a_backoff() {
        let config = CacheConfig { fail_threshold: 1, ..cfg() };
        let (mut c, _) = core(config);
        let mut b = Fake { fail_captures: 1, ..Fake::default() };
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerBackoff);
        assert!(c.invalidate(&1));
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::Captured);
    }

    #[test]
    fn a_failed_capture_with_warm_up_does_not_run_the_work_twice() {
        let (mut c, _) = core(CacheConfig { warmup: true, ..cfg() });
        let mut b = Fake { fail_captures: 1, ..Fake::default() };
        assert_eq!(c.run(&1, &mut b).unwrap(), Outcome::EagerAfterFailure);
        assert_eq!(b.take_log(), ["eager", "capture"]);
        assert_eq!(c.stats().fallbacks, 1);
    }

    #[test]
    fn an_eager_failure_after_a_failed_capture_is_the_calls_error() {
        let (mut c, _) = core(cfg());
        let mut b = Fake { fail_captures: 1, fail_eager: true, ..Fake::default() };
        let e = c.run(&1, &mut b).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("eager failed") && m.contains("record function returned 1"), "{m}");
        assert_eq!(c.stats().failures, 1);
    }

    #[test]
    fn refused_calls_change_nothing_but_the_miss_count() {
        let (mut c, _) = core(cfg());
        let mut b = Fake { refused: true, ..Fake::default() };
        assert!(matches!(c.run(&1, &mut b), Err(Error::CaptureState(_))));
        assert!(b.log.is_empty());
        let s = c.stats();
        assert_eq!((s.entries, s.misses, s.failures), (0, 1, 0));
    }

    #[test]
    fn configs_are_validated() {
        assert!(CacheConfig::default().validate().is_ok());
        for bad in [
            CacheConfig { max_tries: 0, ..CacheConfig::default() },
            CacheConfig { fail_threshold: 0, ..CacheConfig::default() },
            CacheConfig {
                backoff: Duration::from_secs(2),
                max_backoff: Duration::from_secs(1),
                ..CacheConfig::default()
            },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidArgument(_))), "{bad:?}");
            assert!(Core::<u64, FakeGraph>::new(bad, Arc::new(Instant::now)).is_err());
        }
    }

    #[test]
    fn re_entry_is_refused_and_other_threads_wait() {
        let x = Arc::new(Exclusive::new(0u32));
        {
            let mut g = x.lock().unwrap();
            *g += 1;
            let e = x.lock().err().unwrap();
            assert!(e.to_string().contains("called from inside one of its own calls"), "{e}");
            let other = {
                let x = x.clone();
                std::thread::spawn(move || {
                    let mut g = x.lock().unwrap();
                    *g += 10;
                })
            };
            std::thread::sleep(Duration::from_millis(50));
            assert!(!other.is_finished(), "another thread waits, it is not refused");
            drop(g);
            other.join().unwrap();
        }
        assert_eq!(*x.lock().unwrap(), 11);
        assert!(x.lock().is_ok(), "released after each call");
    }

    #[test]
    fn a_panicking_holder_does_not_block_the_cache() {
        let x = Arc::new(Exclusive::new(5u32));
        let y = x.clone();
        let _ = std::thread::spawn(move || {
            let _g = y.lock().unwrap();
            panic!("recording panicked");
        })
        .join();
        assert_eq!(*x.lock().unwrap(), 5);
    }
}

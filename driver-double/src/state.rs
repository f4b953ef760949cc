//! The simulated driver's state (one per loaded copy of the library), the
//! lock around it, and [`entry`]: what every driver call goes through.
//!
//! The state owns every object: its tables hold the types of
//! [`crate::objects`], and a fresh state's devices, with their primary
//! contexts and those contexts' legacy streams, are made here. What the
//! driver does with the objects is in the `impl State` blocks of `sim/`
//! and `api/`, above this module.
//!
//! One mutex guards everything: the double is a model, not a fast driver,
//! and one lock makes every call atomic, as the checks below need. Nothing
//! calls back into the client while the lock is held.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use cuda_sys::*;

use crate::calls;
use crate::config::Config;
use crate::handle::{Bad, Kind, Table};
use crate::memory::Memory;
use crate::objects::capture::Capture;
use crate::objects::context::{Ctx, CtxKind, Device, Green, ResourceDesc};
use crate::objects::exec::Exec;
use crate::objects::graph::{Condition, Graph, Node};
use crate::objects::link::Link;
use crate::objects::module::{Func, Module};
use crate::objects::stream::{Event, Stream};
use crate::{report, thread};

/// `CUDA_ERROR_ILLEGAL_STATE` (not in cuda-sys's subset).
pub const CUDA_ERROR_ILLEGAL_STATE: CUresult = 401;
/// `CUDA_ERROR_LOSSY_QUERY`.
pub const CUDA_ERROR_LOSSY_QUERY: CUresult = 34;

/// A driver call's outcome inside the double: `Err` carries the status.
pub type R<T = ()> = Result<T, CUresult>;

/// Everything the simulated driver holds.
pub struct State {
    /// What is simulated.
    pub cfg: Config,
    /// Whether `cuInit` ran.
    pub initialized: bool,
    /// The devices.
    pub devices: Vec<Device>,
    /// Contexts (primary, created, green contexts' `CUcontext`s).
    pub ctxs: Table<Ctx>,
    /// Green contexts.
    pub greens: Table<Green>,
    /// Resource descriptors.
    pub descs: Table<ResourceDesc>,
    /// Streams (each context's legacy stream among them).
    pub streams: Table<Stream>,
    /// Events.
    pub events: Table<Event>,
    /// Modules.
    pub modules: Table<Module>,
    /// Functions of modules.
    pub funcs: Table<Func>,
    /// Graphs (body and child graphs among them).
    pub graphs: Table<Graph>,
    /// Nodes of graphs.
    pub nodes: Table<Node>,
    /// Executable graphs.
    pub execs: Table<Exec>,
    /// Conditional handles.
    pub conditions: Table<Condition>,
    /// Links in progress.
    pub links: Table<Link>,
    /// Device memory (host memory standing in).
    pub memory: Memory,
    /// Capture sequences in progress, by id.
    pub captures: HashMap<u64, Capture>,
    /// The next handle serial, capture id and operation sequence number.
    serial: u64,
    /// The next capture id.
    pub next_capture: u64,
    /// The next operation's sequence number (one timeline for all streams).
    pub next_seq: u64,
    /// The call in progress (for reports).
    pub call: &'static str,
    /// Calls per symbol so far (fault injection counts them).
    pub calls: HashMap<&'static str, u64>,
    /// Kernels run so far, by name.
    pub kernel_runs: HashMap<String, u64>,
}

impl State {
    fn new(cfg: Config) -> State {
        let mut s = State {
            devices: Vec::new(),
            ctxs: Table::new(Kind::Context),
            greens: Table::new(Kind::Green),
            descs: Table::new(Kind::ResourceDesc),
            streams: Table::new(Kind::Stream),
            events: Table::new(Kind::Event),
            modules: Table::new(Kind::Module),
            funcs: Table::new(Kind::Function),
            graphs: Table::new(Kind::Graph),
            nodes: Table::new(Kind::Node),
            execs: Table::new(Kind::Exec),
            conditions: Table::new(Kind::Condition),
            links: Table::new(Kind::Link),
            memory: Memory::default(),
            captures: HashMap::new(),
            serial: 0,
            next_capture: 1,
            next_seq: 1,
            call: "",
            calls: HashMap::new(),
            kernel_runs: HashMap::new(),
            initialized: false,
            cfg,
        };
        s.make_devices();
        s
    }

    /// A new handle serial.
    pub fn serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// Creates the configured devices and their (inactive) primary contexts.
    pub fn make_devices(&mut self) {
        for device in 0..self.cfg.devices {
            let primary = self.new_ctx(device, CtxKind::Primary, false);
            self.devices.push(Device { primary, primary_refs: 0 });
        }
    }

    /// A new context of `device`, with its legacy stream.
    pub fn new_ctx(&mut self, device: usize, kind: CtxKind, active: bool) -> u64 {
        let serial = self.serial();
        let ctx = self.ctxs.insert(serial, Ctx { device, kind, active, legacy: 0 });
        let legacy = self.new_stream(ctx, 0, true);
        if let Ok(c) = self.ctxs.get_mut(ctx) {
            c.legacy = legacy;
        }
        ctx
    }

    /// A new stream of `ctx`.
    pub fn new_stream(&mut self, ctx: u64, flags: u32, legacy: bool) -> u64 {
        let serial = self.serial();
        self.streams.insert(
            serial,
            Stream {
                ctx,
                flags,
                legacy,
                queue: VecDeque::new(),
                last: 0,
                capture: None,
                deps: Vec::new(),
                info_deps: Vec::new(),
                error: None,
            },
        )
    }

    /// Reports a misuse in the call in progress and returns `code`.
    pub fn misuse(&self, code: CUresult, what: impl AsRef<str>) -> CUresult {
        report::misuse(self.call, what.as_ref());
        code
    }

    /// The status for a bad handle: a misuse report (NULL included: the
    /// library must never pass a NULL handle where the driver wants one),
    /// `CUDA_ERROR_INVALID_HANDLE` (`CUDA_ERROR_INVALID_VALUE` for NULL).
    pub fn bad_handle(&self, bad: Bad, kind: Kind, value: u64) -> CUresult {
        let code = if bad == Bad::Null { CUDA_ERROR_INVALID_VALUE } else { CUDA_ERROR_INVALID_HANDLE };
        self.misuse(code, bad.describe(kind, value))
    }
}

/// Looks up a live object in one of the state's tables, or returns the
/// bad-handle status (with its report) from the enclosing function.
#[macro_export]
#[doc(hidden)]
macro_rules! live {
    ($s:expr, $table:ident, $h:expr) => {{
        let h: u64 = $h as u64;
        match $s.$table.get(h) {
            Ok(_) => h,
            Err(bad) => {
                let kind = $s.$table.kind();
                return Err($s.bad_handle(bad, kind, h));
            }
        }
    }};
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The driver version a build of the double answers by default (set by
/// the loadable library's export table: 11040 for the cuda11 build, 13000
/// for the cuda12 one), before any call.
static DEFAULT_VERSION: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(13000);

/// Sets the default driver version of this build (the export table's
/// first call does, before anything reads the configuration).
pub fn set_default_version(v: i32) {
    DEFAULT_VERSION.store(v, std::sync::atomic::Ordering::Relaxed);
}

fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`Config::latency`] in microseconds, readable without the lock.
static LATENCY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn fresh_state() -> State {
    let mut complaints = Vec::new();
    let cfg = Config::from_env(DEFAULT_VERSION.load(std::sync::atomic::Ordering::Relaxed), &mut |c| complaints.push(c));
    report::hook(cfg.exit_on_misuse);
    LATENCY.store(cfg.latency.as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
    for c in complaints {
        report::misuse("configuration", &c);
    }
    State::new(cfg)
}

/// Runs `f` on the state, creating it (from the environment) first.
pub fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    let mut guard = lock();
    let s = guard.get_or_insert_with(fresh_state);
    f(s)
}

/// Sets the configuration before the first call; `false` once the state
/// exists (the configuration is read once).
pub fn configure(version: i32, devices: usize) -> bool {
    let mut guard = lock();
    if guard.is_some() {
        return false;
    }
    let mut s = fresh_state();
    s.cfg.version = version;
    s.cfg.devices = devices;
    s.cfg.cc = crate::config::default_cc(version);
    s.devices.clear();
    s.make_devices();
    *guard = Some(s);
    true
}

/// The calls a driver answers before `cuInit`.
fn before_init(call: &str) -> bool {
    matches!(call, "cuInit" | "cuDriverGetVersion" | "cuGetErrorName" | "cuGetErrorString")
}

/// What every driver call of the double goes through: counts the call (by
/// ABI), takes the lock, refuses it before `cuInit`, injects a configured
/// failure, and runs `f`; a panic inside is reported and answered with
/// `CUDA_ERROR_UNKNOWN` (nothing unwinds into C).
pub fn entry(call: &'static str, version: i32, f: impl FnOnce(&mut State) -> R) -> CUresult {
    calls::called(call, version);
    let latency = LATENCY.load(std::sync::atomic::Ordering::Relaxed);
    if latency > 0 {
        // Yields rather than sleeps: a sleep lasts at least the timer's
        // slack (about 50 microseconds), a call of a real driver less.
        let until = std::time::Instant::now() + std::time::Duration::from_micros(latency);
        while std::time::Instant::now() < until {
            std::thread::yield_now();
        }
    }
    let run = AssertUnwindSafe(|| {
        with(|s| {
            s.call = call;
            if !s.initialized && !before_init(call) {
                return CUDA_ERROR_NOT_INITIALIZED;
            }
            let n = {
                let c = s.calls.entry(call).or_insert(0);
                *c += 1;
                *c
            };
            if let Some(fail) = s.cfg.faults.fail.get(call) {
                if fail.fails(n) {
                    return fail.code;
                }
            }
            match f(s) {
                Ok(()) => CUDA_SUCCESS,
                Err(code) => {
                    if s.cfg.trace {
                        eprintln!("fc-driver-double: trace: {call} -> {code} (thread {})", thread::thread_id());
                    }
                    code
                }
            }
        })
    });
    match catch_unwind(run) {
        Ok(code) => code,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            report::misuse(call, &format!("the double itself panicked: {what}"));
            CUDA_ERROR_UNKNOWN
        }
    }
}

/// A pointer argument the driver writes through: NULL is
/// `CUDA_ERROR_INVALID_VALUE` (the driver checks it), not a misuse.
pub(crate) fn out<'a, T>(p: *mut T) -> R<&'a mut T> {
    // SAFETY: a non-null out-pointer of a driver call points to a writable
    // `T` for the call's duration (the driver API's contract with its
    // caller); the double keeps no reference past the call.
    unsafe { p.as_mut() }.ok_or(CUDA_ERROR_INVALID_VALUE)
}

/// A pointer argument the driver reads: NULL is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn input<'a, T>(p: *const T) -> R<&'a T> {
    // SAFETY: a non-null input pointer of a driver call points to a
    // readable `T` for the call's duration (the driver API's contract).
    unsafe { p.as_ref() }.ok_or(CUDA_ERROR_INVALID_VALUE)
}

/// `n` elements read from `p` (empty for `n == 0`); NULL with `n > 0` is
/// `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn slice<'a, T>(p: *const T, n: usize) -> R<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: a non-null array argument of a driver call holds the `n`
    // elements its count gives (the driver API's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

//! Kernel launches, plain or with programmatic dependent launch (PDL).
//!
//! With PDL (compute capability 9.0+), a kernel launched with the attribute
//! `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` may start while
//! the previous kernel of its stream still runs, as soon as every block of
//! that kernel has executed `griddepcontrol.launch_dependents` (or exited).
//! The early kernel must execute `griddepcontrol.wait`, which returns once
//! the previous kernel has completed and its memory is visible, before it
//! touches memory that kernel reads or writes. Captured into a graph, such a
//! launch leaves a programmatic edge (`CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`)
//! instead of a full one, and replays overlap each kernel's launch with its
//! predecessor: on an H200 a chain of tiny kernels replays about 1.25-1.33x
//! faster. Without the attribute, or on older devices, both instructions do
//! nothing, so a kernel written for PDL is always correct launched plainly.
//!
//! **Built-in kernels: automatic.** Where the device (9.0+) and driver
//! (CUDA 12.3+, the first whose graphs keep programmatic edges, with
//! `cuLaunchKernelEx`) allow it, the context loads the built-ins' sm_90
//! variant (`kernels/elementwise_sm90.ptx`), whose kernels always wait before
//! touching memory, and launches them with PDL. That is safe whatever runs
//! before or after them: before, any kernel (waited for in full); after, a
//! kernel launched without the attribute waits for the built-in's completion
//! as usual. So the speed-up needs nothing from the user, and automatic is
//! the right default.
//!
//! **User kernels: opt in.** Only their authors know whether a kernel waits
//! with `griddepcontrol.wait`; one that does not would race with its
//! predecessor. They opt in per kernel ([`crate::Kernel::set_pdl`]) or per
//! launch ([`LaunchOptions`], [`crate::Kernel::launch_with`]). On a device or
//! driver without PDL the launch is plain (still correct, as above).
//!
//! **Turning it off.** Per context, [`Context::set_pdl`]`(false)`: no launch
//! on that context (built-in or user) uses PDL; [`Context::pdl_enabled`] tells
//! whether built-ins do. Process-wide, `FC_PDL=0` (read once, at the first
//! launch or load that asks): built-ins load their sm_35 variant and no
//! launch uses PDL, exactly the behaviour before PDL existed.
//!
//! **The calling thread's current context.** Every other driver call of
//! the library first makes its context current (and restores the thread's
//! own afterwards). Launches on CUDA 13+ drivers do not: such a driver
//! takes the context from the function and the stream, whatever is current
//! on the thread (GPU run 24 measured it with no context current, with
//! another device's primary context and with an isolated context of the
//! same device, eager and captured: right results, compute-sanitizer
//! clean), and the check cost 10-40 ns of each launch. Should a driver
//! still refuse a launch for the thread's context (`CUDA_ERROR_INVALID_CONTEXT`,
//! `CUDA_ERROR_INVALID_HANDLE` or `CUDA_ERROR_CONTEXT_IS_DESTROYED`), the
//! launch binds the context and is tried once more. `FC_BIND_LAUNCHES=1`
//! (read once) binds before every launch, as on older drivers.

use std::os::raw::c_void;
use std::sync::OnceLock;

use cuda_sys::result::kernel;
use cuda_sys::*;

use crate::context::Context;
use crate::device::Device;
use crate::driver::{driver, ContextBinding};
use crate::error::Result;
use crate::launch_config::LaunchConfig;

/// Environment variable: `0` (or `off`, `false`, `no`) turns PDL off for
/// the whole process.
pub const PDL_ENV: &str = "FC_PDL";

/// Oldest driver API version with PDL in fc-graph: CUDA 12.3, the first
/// whose graphs carry edge data, the form in which a capture keeps a
/// programmatic launch (older drivers JIT the sm_90 PTX but are not used).
pub const PDL_MIN_DRIVER_VERSION: i32 = 12030;

/// Oldest compute capability with `griddepcontrol` (Hopper).
pub const PDL_MIN_COMPUTE_CAPABILITY: (i32, i32) = (9, 0);

/// Options of one kernel launch ([`crate::Kernel::launch_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchOptions {
    /// Launch with programmatic dependent launch where the device, the
    /// driver, `FC_PDL` and the context's switch allow it. Only for kernels
    /// that execute `griddepcontrol.wait` before touching memory their
    /// stream's previous kernel reads or writes.
    pub pdl: bool,
}

impl LaunchOptions {
    /// Options with PDL on.
    pub const PDL: LaunchOptions = LaunchOptions { pdl: true };
    /// Options with PDL off (a plain `cuLaunchKernel`).
    pub const PLAIN: LaunchOptions = LaunchOptions { pdl: false };
}

/// Whether an `FC_PDL` value allows PDL: unset, empty or anything else
/// than `0`/`off`/`false`/`no` (any case, surrounding blanks ignored).
pub fn pdl_env_value_allows(value: Option<&str>) -> bool {
    switch_value(value) != Some(false)
}

/// An on/off environment value: `Some(true)` for `1`/`on`/`true`/`yes`,
/// `Some(false)` for `0`/`off`/`false`/`no` (any case, surrounding blanks
/// ignored), `None` when unset or anything else.
fn switch_value(value: Option<&str>) -> Option<bool> {
    match value?.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// Whether `FC_PDL` allows PDL in this process (read once, then fixed).
pub fn pdl_env_allows() -> bool {
    static ALLOWS: OnceLock<bool> = OnceLock::new();
    *ALLOWS.get_or_init(|| pdl_env_value_allows(std::env::var(PDL_ENV).ok().as_deref()))
}

/// Whether a device of compute capability `cc` under a driver of API
/// version `driver_version`, which has `cuLaunchKernelEx` or not, can
/// launch with PDL as fc-graph does.
pub fn pdl_capable(has_launch_ex: bool, driver_version: i32, cc: (i32, i32)) -> bool {
    has_launch_ex && driver_version >= PDL_MIN_DRIVER_VERSION && cc >= PDL_MIN_COMPUTE_CAPABILITY
}

/// Whether `device` and the loaded driver can launch with PDL (ignores
/// `FC_PDL` and context switches). Engines use it to choose between their
/// own PTX with and without `griddepcontrol`.
pub fn supports_pdl(device: &Device) -> Result<bool> {
    let d = driver()?;
    let has_launch_ex = d.cuLaunchKernelEx.is_some();
    if !has_launch_ex || d.driver_version() < PDL_MIN_DRIVER_VERSION {
        return Ok(false); // no need to ask the device
    }
    Ok(pdl_capable(has_launch_ex, d.driver_version(), device.compute_capability()?))
}

/// Whether the device and driver allow PDL and `FC_PDL` does not forbid it;
/// `false` when the device cannot be asked.
pub(crate) fn pdl_allowed_on(device: &Device) -> bool {
    pdl_env_allows() && supports_pdl(device).unwrap_or(false)
}

// ---------------------------------------------------------------------------
// The per-context switch
// ---------------------------------------------------------------------------

impl Context {
    /// Turns programmatic dependent launch on (the default) or off for
    /// every launch on this context and its clones: built-in kernels, and
    /// user kernels that opted in. Launches already queued or captured keep
    /// what they were launched with. See the [`crate::launch`] module.
    pub fn set_pdl(&self, on: bool) {
        self.kernels().set_pdl_switch(on);
    }

    /// Whether built-in kernels launched on this context now use PDL: the
    /// switch is on, `FC_PDL` allows it, and the device and driver can
    /// (once the built-ins are loaded: their sm_90 variant was loaded).
    pub fn pdl_enabled(&self) -> bool {
        self.kernels().pdl_switch_on()
            && match self.kernels().builtins_use_pdl() {
                Some(loaded) => loaded,
                None => pdl_allowed_on(&self.device()),
            }
    }
}

// ---------------------------------------------------------------------------
// Launching
// ---------------------------------------------------------------------------

/// The launch attribute that asks for PDL.
fn pdl_attribute() -> CUlaunchAttribute {
    let mut value = CUlaunchAttributeValue { pad: [0; 64] };
    value.programmaticStreamSerializationAllowed = 1;
    CUlaunchAttribute { id: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, pad: [0; 4], value }
}

/// Launches `f` on `ctx`'s stream (recorded when it captures), through
/// `cuLaunchKernelEx` with the PDL attribute when `pdl` is set (and the
/// driver has it), else through `cuLaunchKernel`. The caller decides `pdl`
/// (device support, switches, the kernel's consent).
///
/// # Safety
/// `f` is a live function loaded into `ctx`'s context, and `params` is a
/// `cuLaunchKernel` parameter array for it: one pointer per kernel
/// parameter, each to a value of that parameter's size, valid for the call.
pub(crate) unsafe fn launch_kernel(
    ctx: &Context,
    f: CUfunction,
    cfg: &LaunchConfig,
    params: *mut *mut c_void,
    pdl: bool,
) -> Result<()> {
    let d = driver()?;
    let stream = ctx.stream();
    let (g, b) = (cfg.grid, cfg.block);
    let ex = pdl && d.cuLaunchKernelEx.is_some();
    let launch = || -> std::result::Result<(), DriverError> {
        if ex {
            let mut attr = pdl_attribute();
            let config = CUlaunchConfig {
                gridDimX: g.0,
                gridDimY: g.1,
                gridDimZ: g.2,
                blockDimX: b.0,
                blockDimY: b.1,
                blockDimZ: b.2,
                sharedMemBytes: cfg.shared_mem_bytes,
                hStream: stream,
                attrs: &mut attr,
                numAttrs: 1,
            };
            // SAFETY: `config` and its one attribute live across the call;
            // `f` and `params` per this function's contract. The driver has
            // the entry (`ex`), so this is `Some`.
            if let Some(launched) = unsafe { kernel::launch_ex(d, &config, f, params, std::ptr::null_mut()) } {
                return launched;
            }
        }
        // SAFETY: live function and stream of one context; `params` per
        // this function's contract.
        unsafe { kernel::launch(d, f, g, b, cfg.shared_mem_bytes, stream, params, std::ptr::null_mut()) }
    };
    // The failure stays a small value until the end: a launch is the
    // hottest path of a capture, and building an `Error` is not free.
    let launched = (|| -> std::result::Result<(), DriverError> {
        if launches_unbound(d) {
            match launch() {
                Err(e) if refused_for_context(e.code) => {}
                done => return done,
            }
            // The driver wanted the context current after all: bind, retry.
        }
        let _bind = ContextBinding::bind_raw(d, ctx.cuda().raw())?;
        launch()
    })();
    match launched {
        Ok(()) => {
            ctx.recorder().trace().note_kernel(ex);
            Ok(())
        }
        Err(failed) => Err(ctx.failed(failed)),
    }
}

/// Environment variable: `1` (or `on`, `true`, `yes`) makes every launch
/// bind its context first, as on drivers older than CUDA 13.
pub const BIND_LAUNCHES_ENV: &str = "FC_BIND_LAUNCHES";

/// Oldest driver whose launches take the context from the function and
/// stream, whatever context is current on the calling thread.
pub const UNBOUND_LAUNCH_MIN_DRIVER_VERSION: i32 = 13000;

/// Whether launches skip the current-context check (see [`launch_kernel`]'s
/// module docs): a CUDA 13+ driver, and `FC_BIND_LAUNCHES` does not ask
/// for binding. Read once.
fn launches_unbound(d: &Driver) -> bool {
    static UNBOUND: OnceLock<bool> = OnceLock::new();
    *UNBOUND
        .get_or_init(|| unbound_launch_allowed(d.driver_version(), std::env::var(BIND_LAUNCHES_ENV).ok().as_deref()))
}

/// Whether a driver of API version `driver_version`, with `FC_BIND_LAUNCHES`
/// set to `env`, launches without binding the context first.
pub fn unbound_launch_allowed(driver_version: i32, env: Option<&str>) -> bool {
    driver_version >= UNBOUND_LAUNCH_MIN_DRIVER_VERSION && switch_value(env) != Some(true)
}

/// Whether a launch failed because of the calling thread's current context
/// (none, or another one), so that binding ours and launching again may
/// succeed.
fn refused_for_context(res: CUresult) -> bool {
    matches!(res, CUDA_ERROR_INVALID_CONTEXT | CUDA_ERROR_INVALID_HANDLE | CUDA_ERROR_CONTEXT_IS_DESTROYED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fc_pdl_zero_off_false_no_turn_pdl_off() {
        for v in ["0", "off", "OFF", " false ", "No"] {
            assert!(!pdl_env_value_allows(Some(v)), "{v:?}");
        }
        for v in [None, Some(""), Some("1"), Some("on"), Some("yes"), Some("00")] {
            assert!(pdl_env_value_allows(v), "{v:?}");
        }
    }

    #[test]
    fn pdl_needs_hopper_cuda_12_3_and_launch_ex() {
        assert!(pdl_capable(true, 12030, (9, 0)));
        assert!(pdl_capable(true, 13000, (10, 0)));
        assert!(!pdl_capable(true, 12020, (9, 0)), "CUDA 12.2 graphs have no edge data");
        assert!(!pdl_capable(true, 13000, (8, 9)), "Ada has no griddepcontrol");
        assert!(!pdl_capable(false, 13000, (9, 0)), "no cuLaunchKernelEx");
    }

    #[test]
    fn the_attribute_asks_for_programmatic_serialization() {
        let a = pdl_attribute();
        assert_eq!(a.id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        // SAFETY: the union was zeroed through `pad`, then this member set.
        let (set, rest) = unsafe { (a.value.programmaticStreamSerializationAllowed, a.value.pad) };
        assert_eq!(set, 1);
        assert!(rest[4..].iter().all(|&b| b == 0), "the rest of the value is zero");
        assert_eq!(std::mem::size_of::<CUlaunchAttribute>(), 72);
    }

    #[test]
    fn launches_skip_the_context_check_on_cuda_13_unless_asked() {
        assert!(unbound_launch_allowed(13000, None));
        assert!(unbound_launch_allowed(13020, Some("0")));
        assert!(unbound_launch_allowed(13000, Some("")));
        assert!(!unbound_launch_allowed(12090, None), "CUDA 12 drivers bind first");
        for v in ["1", "on", " TRUE ", "yes"] {
            assert!(!unbound_launch_allowed(13000, Some(v)), "{v:?}");
        }
    }

    #[test]
    fn only_context_refusals_are_retried() {
        for res in [CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_CONTEXT_IS_DESTROYED] {
            assert!(refused_for_context(res), "{res}");
        }
        for res in [
            CUDA_SUCCESS,
            CUDA_ERROR_INVALID_VALUE,
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        ] {
            assert!(!refused_for_context(res), "{res}");
        }
    }

    #[test]
    fn launch_options_default_to_plain() {
        assert_eq!(LaunchOptions::default(), LaunchOptions::PLAIN);
    }
}

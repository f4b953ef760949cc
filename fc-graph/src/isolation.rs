//! How an isolated context is isolated: a **green context** where the
//! driver has them (CUDA 12.4+), else a **private context** (`cuCtxCreate`).
//!
//! Both keep other libraries' device-wide synchronisations and captures
//! away from our captures. They differ in speed: a private context is a
//! second context on the device, and while it and another context both have
//! work in flight the GPU time-slices them (a primary + a private context
//! replayed at 0.09x of two streams of one context on an H200); a green
//! context (all the device's SMs) lives inside the primary context and runs
//! beside it at full speed (0.97-1.00x of two streams in the same
//! measurement).
//!
//! The choice ([`choose`]) takes the caller's request ([`IsolationRequest`]:
//! `auto`, `green` or `private`, from [`Context::isolated_with`] or the
//! `FC_ISOLATION` environment variable, read once), the driver's version and
//! whether it has every green-context entry point:
//! - `auto` (the default): green where possible, and private when green is
//!   not available or its creation fails (MPS, a device or configuration
//!   without green contexts): the failure is kept ([`last_green_failure`])
//!   and the context reports [`Isolation::Private`];
//! - `green`: green or an error ([`Error::Unsupported`], or the driver's);
//! - `private`: always `cuCtxCreate` (what the benchmark compares with).
//!
//! A green context "can be current to only one thread at a time" (the
//! driver's documentation): the library serialises the threads that make
//! it current for its own calls with a per-context `Gate` (crate-private), re-entrant on
//! one thread. Callers who make [`Context::raw_context`] current
//! themselves (for cuBLAS) must not do so on two threads at once either.
//!
//! [`Context::isolated_with`]: crate::Context::isolated_with
//! [`Context::raw_context`]: crate::Context::raw_context

use std::sync::{Mutex, OnceLock};

use cuda_sys::result::{context, green, stream};
use cuda_sys::*;

use crate::device::Device;
use crate::driver::CaptureShield;
use crate::error::{Error, Result};

/// Environment variable choosing how [`crate::Context::isolated`] isolates:
/// `auto` (or unset, or empty), `green` or `private`. Read once per process.
pub const ISOLATION_ENV: &str = "FC_ISOLATION";

/// Oldest driver with green contexts (CUDA 12.4).
pub const GREEN_CONTEXT_MIN_DRIVER_VERSION: i32 = 12040;

/// What a context is isolated by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Not isolated: the device's primary context.
    None,
    /// A green context over all the device's SMs (`cuGreenCtxCreate`).
    Green,
    /// A private context (`cuCtxCreate`).
    Private,
}

impl Isolation {
    /// `"none"`, `"green"` or `"private"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::None => "none",
            Isolation::Green => "green",
            Isolation::Private => "private",
        }
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the caller asks an isolated context to be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IsolationRequest {
    /// Green where the driver has green contexts and creating one works,
    /// else private.
    #[default]
    Auto,
    /// Green or an error.
    Green,
    /// Private (`cuCtxCreate`), even where green contexts exist.
    Private,
}

impl IsolationRequest {
    /// Parses a value of `FC_ISOLATION`: `auto`, `green` or `private`
    /// (case and surrounding blanks ignored); unset or empty is `auto`.
    pub fn parse(value: Option<&str>) -> Result<IsolationRequest> {
        let v = value.map(|v| v.trim().to_ascii_lowercase()).unwrap_or_default();
        match v.as_str() {
            "" | "auto" => Ok(IsolationRequest::Auto),
            "green" => Ok(IsolationRequest::Green),
            "private" => Ok(IsolationRequest::Private),
            _ => Err(Error::invalid(format!(
                "{ISOLATION_ENV}={:?}: expected auto, green or private",
                value.unwrap_or_default()
            ))),
        }
    }

    /// The request `FC_ISOLATION` makes (read once per process; a bad value
    /// is an error of every [`crate::Context::isolated`] call).
    pub fn from_env() -> Result<IsolationRequest> {
        static FROM_ENV: OnceLock<Result<IsolationRequest>> = OnceLock::new();
        FROM_ENV.get_or_init(|| IsolationRequest::parse(std::env::var(ISOLATION_ENV).ok().as_deref())).clone()
    }
}

/// What to create for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// A green context; when it cannot be created, a private one if
    /// `fallback`, else the error.
    Green {
        /// Whether a failed green creation falls back to a private context.
        fallback: bool,
    },
    /// A private context.
    Private,
}

/// The plan for `request` on a driver of API version `driver_version` that
/// has (`green_entry_points`) or lacks some of the green-context entry
/// points. `Err` only for [`IsolationRequest::Green`] where green contexts
/// are unavailable.
pub fn choose(request: IsolationRequest, driver_version: i32, green_entry_points: bool) -> Result<Plan> {
    let available = driver_version >= GREEN_CONTEXT_MIN_DRIVER_VERSION && green_entry_points;
    match request {
        IsolationRequest::Private => Ok(Plan::Private),
        IsolationRequest::Auto if available => Ok(Plan::Green { fallback: true }),
        IsolationRequest::Auto => Ok(Plan::Private),
        IsolationRequest::Green if available => Ok(Plan::Green { fallback: false }),
        IsolationRequest::Green => Err(Error::Unsupported {
            feature: "a green context",
            needs: format!(
                "a CUDA 12.4+ driver with cuGreenCtxCreate and its companions; this one is CUDA {}{}",
                crate::features::cuda_version_text(driver_version),
                if green_entry_points { "" } else { " and lacks some of them" }
            ),
        }),
    }
}

/// Whether the driver has every entry point a green context needs
/// (`cuGreenCtxStreamCreate`, CUDA 12.5, is used where present).
pub fn has_green_entry_points(d: &Driver) -> bool {
    d.cuDeviceGetDevResource.is_some()
        && d.cuDevResourceGenerateDesc.is_some()
        && d.cuGreenCtxCreate.is_some()
        && d.cuGreenCtxDestroy.is_some()
        && d.cuCtxFromGreenCtx.is_some()
}

/// The loaded driver's plan for `request`.
pub(crate) fn plan_for(d: &Driver, request: IsolationRequest) -> Result<Plan> {
    choose(request, d.driver_version(), has_green_entry_points(d))
}

static LAST_GREEN_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Why the most recent green-context creation of the process failed and
/// fell back to a private context (`auto`), if one did.
pub fn last_green_failure() -> Option<String> {
    crate::sync::lock(&LAST_GREEN_FAILURE).clone()
}

pub(crate) fn note_green_failure(e: &Error) {
    *crate::sync::lock(&LAST_GREEN_FAILURE) = Some(e.to_string());
}

/// A green context and the `CUcontext` that stands for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GreenCtx {
    pub(crate) green: CUgreenCtx,
    pub(crate) ctx: CUcontext,
    /// The device's primary context, which the green context retains for
    /// its lifetime (NVIDIA's `cuGreenCtxCreate`): memory allocated in the
    /// green context belongs to it (the driver reports it as the owner).
    pub(crate) primary: CUcontext,
}

/// The missing entry point's error.
fn missing(name: &'static str) -> Error {
    Error::Unsupported { feature: "a green context", needs: format!("{name} (CUDA 12.4+)") }
}

/// Creates a green context over all of `device`'s SMs (shielded). Nothing
/// is left behind on failure.
pub(crate) fn create_green(d: &Driver, device: Device) -> Result<GreenCtx> {
    for (name, present) in [
        ("cuDeviceGetDevResource", d.cuDeviceGetDevResource.is_some()),
        ("cuDevResourceGenerateDesc", d.cuDevResourceGenerateDesc.is_some()),
        ("cuGreenCtxCreate", d.cuGreenCtxCreate.is_some()),
        ("cuGreenCtxDestroy", d.cuGreenCtxDestroy.is_some()),
        ("cuCtxFromGreenCtx", d.cuCtxFromGreenCtx.is_some()),
    ] {
        if !present {
            return Err(missing(name));
        }
    }
    let _shield = CaptureShield::raise(d)?;
    let mut resource =
        present(green::device_get_resource(d, device.handle(), CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource")?;
    if resource.type_ != CU_DEV_RESOURCE_TYPE_SM {
        return Err(Error::Unsupported {
            feature: "a green context",
            needs: format!("SM resources of the device (the driver returned resource type {})", resource.type_),
        });
    }
    // SAFETY: one resource, filled by the driver above.
    let desc =
        present(unsafe { green::generate_desc(d, std::slice::from_mut(&mut resource)) }, "cuDevResourceGenerateDesc")?;
    // SAFETY: the descriptor made above, of this device; the flag is the
    // one the driver requires.
    let green =
        present(unsafe { green::create(d, desc, device.handle(), CU_GREEN_CTX_DEFAULT_STREAM) }, "cuGreenCtxCreate")?;
    let found = (|| -> Result<(CUcontext, CUcontext)> {
        // SAFETY: `green` was just created.
        let ctx = present(unsafe { green::context_of(d, green) }, "cuCtxFromGreenCtx")?;
        // The green context holds a reference to the primary context, so
        // this retain and release only read its handle: it is neither
        // created nor torn down here.
        let primary = context::primary_retain(d, device.handle())?;
        // SAFETY: releases the reference taken just above.
        unsafe { context::primary_release(d, device.handle()) }?;
        Ok((ctx, primary))
    })();
    match found {
        Ok((ctx, primary)) => Ok(GreenCtx { green, ctx, primary }),
        Err(e) => {
            // SAFETY: destroys the green context created above, used by nothing.
            let _ = unsafe { green::destroy(d, green) };
            Err(e)
        }
    }
}

/// The result of a green-context entry, or [`missing`] where the driver
/// lacks it.
fn present<T>(called: Option<cuda_sys::result::Result<T>>, name: &'static str) -> Result<T> {
    match called {
        Some(r) => Ok(r?),
        None => Err(missing(name)),
    }
}

/// Destroys a green context (shielded). Its streams and modules must be
/// gone.
pub(crate) fn destroy_green(d: &Driver, green: CUgreenCtx) {
    if d.cuGreenCtxDestroy.is_none() {
        return;
    }
    let _shield = CaptureShield::raise(d);
    // SAFETY: a green context of ours that nothing refers to any more.
    let _ = unsafe { green::destroy(d, green) };
}

/// Creates the library's non-blocking stream of a green context: with
/// `cuGreenCtxStreamCreate` where the driver has it (12.5+), else with
/// `cuStreamCreate` while the green context's `CUcontext` is current on
/// this thread (the caller binds it).
pub(crate) fn green_stream(d: &Driver, green: CUgreenCtx) -> Result<CUstream> {
    // SAFETY: a live green context; the flag is the one the driver
    // requires, priority 0 the default.
    match unsafe { green::stream_create(d, green, CU_STREAM_NON_BLOCKING, 0) } {
        Some(made) => Ok(made?),
        // The green context is current (the caller binds it).
        None => Ok(stream::create(d, CU_STREAM_NON_BLOCKING)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_parses_from_the_environment_value() {
        for (v, want) in [
            (None, IsolationRequest::Auto),
            (Some(""), IsolationRequest::Auto),
            (Some(" auto "), IsolationRequest::Auto),
            (Some("green"), IsolationRequest::Green),
            (Some("GREEN"), IsolationRequest::Green),
            (Some("private"), IsolationRequest::Private),
            (Some(" Private\n"), IsolationRequest::Private),
        ] {
            assert_eq!(IsolationRequest::parse(v).ok(), Some(want), "{v:?}");
        }
        for bad in ["cuCtxCreate", "1", "greenish", "none"] {
            let e = IsolationRequest::parse(Some(bad)).expect_err(bad);
            assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("FC_ISOLATION") && m.contains(bad)), "{e}");
        }
    }

    #[test]
    fn auto_is_green_from_cuda_12_4_with_the_entry_points_and_private_elsewhere() {
        use IsolationRequest::*;
        // (request, driver version, entry points) -> plan
        let cases = [
            (Auto, 13000, true, Some(Plan::Green { fallback: true })),
            (Auto, 12040, true, Some(Plan::Green { fallback: true })),
            (Auto, 12030, true, Some(Plan::Private)),
            (Auto, 11040, false, Some(Plan::Private)),
            (Auto, 13000, false, Some(Plan::Private)),
            (Green, 13000, true, Some(Plan::Green { fallback: false })),
            (Green, 12040, true, Some(Plan::Green { fallback: false })),
            (Green, 12030, true, None),
            (Green, 13000, false, None),
            (Green, 11040, false, None),
            (Private, 13000, true, Some(Plan::Private)),
            (Private, 11040, false, Some(Plan::Private)),
        ];
        for (request, version, entries, want) in cases {
            let got = choose(request, version, entries);
            match want {
                Some(plan) => assert_eq!(got.ok(), Some(plan), "{request:?} {version} {entries}"),
                None => assert!(
                    matches!(&got, Err(Error::Unsupported { needs, .. }) if needs.contains("12.4")),
                    "{request:?} {version} {entries}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn isolation_names() {
        assert_eq!(Isolation::None.to_string(), "none");
        assert_eq!(Isolation::Green.as_str(), "green");
        assert_eq!(Isolation::Private.as_str(), "private");
    }
}

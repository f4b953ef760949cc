//! fc-graph: safe, fast CUDA graph capture and replay.
//!
//! - [`driver`]: the run-time-loaded driver, the context binding and the
//!   capture-mode shield every potentially unsafe call runs under;
//! - [`Device`], [`Context`] (primary context + own stream),
//!   [`DeviceBuffer`] (with the capture [`pool`]);
//! - [`Module`]/[`Kernel`] (user PTX), the built-in add/mul kernels;
//! - [`Capture`] (guard, breaks) and [`Graph`] (segments + breaks, replay
//!   with a live value); [`buckets`] (token buckets and the bucketed runner);

pub mod buckets;
pub mod buffer;
pub mod builtins;
pub mod capture;
pub mod capture_state;
pub mod context;
pub mod device;
pub mod driver;
pub mod error;
pub mod event;
pub mod graph;
pub mod held;
pub mod module;
pub mod pool;
pub mod ptx_params;

pub use buffer::{DeviceBuffer, Origin};
pub use builtins::BinaryOp;
pub use capture::{break_here, Capture, Recaptured};
pub use context::{CaptureMode, Context, ContextKind, LivePtr};
pub use device::Device;
pub use driver::driver;
pub use error::{Error, Result};
pub use event::Event;
pub use graph::{BreakFn, Graph, UpdateReport};
pub use module::{Kernel, KernelArg, LaunchConfig, Module};

/// The library version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

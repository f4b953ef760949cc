//! The driver's objects as data: what the state's tables hold, with the
//! methods that need nothing but the object itself. Nothing here imports
//! the state; what the driver does with them is in `sim/`, above it.

pub mod capture;
pub mod context;
pub mod exec;
pub mod graph;
pub mod link;
pub mod module;
pub mod stream;
pub mod work;

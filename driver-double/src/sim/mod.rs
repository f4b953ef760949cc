//! The simulated driver's behaviour: `impl State` blocks on the objects,
//! one file per area, which the entry points above (`api/`) call. The
//! files import only what is below them (the objects, the state and the
//! leaf modules), never each other: one calls another's behaviour as a
//! method of the state.

pub mod capture;
pub mod context;
pub mod exec;
pub mod graph;
pub mod module;
pub mod stream;
pub mod work;

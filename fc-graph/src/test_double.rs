//! The driver double (`fc_driver_double`, the simulated driver of
//! `driver-double/`) for fc-graph's unit tests on it (the features, the
//! node steps, conditional nodes): cuda-sys's test rig
//! (`cuda-sys/tests/support/rig.rs`), a fresh copy of the double at one
//! driver version, loaded, with a current context, a stream and the
//! element-wise kernels.

#[path = "../../cuda-sys/tests/support/rig.rs"]
pub(crate) mod rig;

pub(crate) use rig::{node_of, Rig};

/// The rig of `driver_version`, its copy of the double in a folder of its
/// own (unit tests have no CARGO_TARGET_TMPDIR), removed with it.
pub(crate) fn load(name: &str, driver_version: i32) -> Rig {
    let dir = std::env::temp_dir().join(format!("fc-graph-{name}-{}-{driver_version}", std::process::id()));
    Rig::in_own_dir(&dir, &format!("fc{name}"), driver_version)
}

//! cuda-sys's driver double (`cuda-sys/tests/support/double.rs`), built and
//! loaded for fc-graph's unit tests (the features and graph-building tests).

use std::path::PathBuf;

use cuda_sys::Driver;

#[path = "../../cuda-sys/tests/support/double.rs"]
pub(crate) mod double;

/// Builds the double of `driver_version` as `lib<name>_<version>.so` in a
/// folder of its own (unit tests have no CARGO_TARGET_TMPDIR; the caller
/// removes it), loads it, and opens its probe.
pub(crate) fn load(name: &str, driver_version: i32) -> (Driver, double::Probe, PathBuf) {
    let dir = std::env::temp_dir().join(format!("fc-graph-{name}-{}-{driver_version}", std::process::id()));
    let path: PathBuf = match double::build(&dir, &format!("fc{name}_{driver_version}"), driver_version) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let probe = double::Probe::open(&path).expect("the double opens");
    let driver = match Driver::load_from(&[path.to_str().expect("utf-8 path")]) {
        Ok(d) => d,
        Err(e) => panic!("the double of {driver_version} should load: {e}"),
    };
    (driver, probe, dir)
}

//! The `fcgraph` binary against a stand-in driver (`stand_in_driver.c`,
//! built here with the host C compiler): two fake devices whose calls all
//! succeed and do nothing. Runs everywhere, CI included:
//!
//! - `info` reports the stand-in's devices, versions and features;
//! - `selftest` fails every check (a driver that computes nothing must not
//!   pass any), reports each failure in the table, never panics, exits 1;
//!
//! Without a C compiler the tests print `[SKIP]` and pass.

use std::path::Path;
use std::process::{Command, Output};

// stand_in(): builds stand_in_driver.c once per test process (shared with
// fc-bench's tests of `--steps`).
#[path = "common/stand_in.rs"]
mod stand_in_build;
use stand_in_build::stand_in;

/// How many optional entry points the driver table has (the stand-in lacks
/// one of them, cuGraphExecUpdate).
fn optional_entry_points() -> usize {
    cuda_sys::functions::FUNCTIONS.iter().filter(|f| !f.required).count()
}

fn fcgraph(lib: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    fcgraph_with(lib, args, 2)
}

fn fcgraph_with(lib: &Path, args: &[&str], devices: usize) -> (Option<i32>, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_fcgraph"))
        .args(args)
        .env("FC_CUDA_LIBRARY", lib)
        .env("FC_STAND_IN_DEVICES", devices.to_string())
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .expect("the fcgraph binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn info_reports_the_stand_in() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph(&lib, &["info"]);
    assert_eq!(code, Some(0), "{out}{err}");
    for want in [
        &format!("fc-graph {}", fc_graph::VERSION)[..],
        lib.to_str().expect("utf-8 path"),
        "CUDA API version      12.8 (12080)",
        "Devices: 2",
        "Stand-in GPU",
        "9.0 (sm_90)",
        "80.0 GiB",
        "70.0 GiB",
        "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f",
        "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let optional = optional_entry_points();
    // The stand-in lacks cuGraphExecUpdate and cuGraphConditionalHandleCreate.
    let present = format!("Optional driver features: {} of {optional} present", optional - 2);
    assert!(out.contains(&present), "missing {present:?} in:\n{out}");
    let row = |entry: &str| out.lines().find(|l| l.contains(entry)).map(str::to_string).unwrap_or_default();
    assert!(row("cuGraphExecUpdate").contains("| no "), "{out}");
    assert!(row("cuGraphConditionalHandleCreate").contains("| no "), "{out}");
    assert!(out.contains("none (a CUDA 12.3+ driver has them)"), "conditional nodes: {out}");
    assert!(row("cuFuncGetParamInfo").contains("| yes "), "{out}");
}

#[test]
fn info_json_is_one_document() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph(&lib, &["--json", "info"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let doc: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON document ({e}): {out}"));
    assert_eq!(doc["fcgraph"]["version"], fc_graph::VERSION);
    assert_eq!(doc["driver"]["library"], lib.display().to_string());
    let devices = doc["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 2, "{out}");
    assert_eq!(doc["features"].as_array().map(Vec::len), Some(optional_entry_points()), "{out}");
    assert_eq!(devices[0]["memory_free_bytes"], 70u64 << 30);
    assert_eq!(devices[0]["compute_capability"], "9.0");
}

#[test]
fn selftest_fails_every_check_on_a_driver_that_does_nothing() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph(&lib, &["selftest"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(!out.contains("panicked") && !err.contains("panicked"), "{out}{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("| FAIL ") || l.contains("| PASS ")).collect();
    assert_eq!(rows.len(), 10, "5 checks x 2 devices:\n{out}");
    assert!(rows.iter().all(|r| r.contains("| FAIL ")), "no check may pass without a working driver:\n{out}");
    for title in [
        "capture + replay == eager",
        "two-thread concurrency (seed test)",
        "foreign GLOBAL capture shield",
        "breakable replay",
        "capture pool reuse",
    ] {
        assert_eq!(rows.iter().filter(|r| r.contains(title)).count(), 2, "{title} on both devices:\n{out}");
    }
    assert!(out.contains("selftest FAILED: 10 of 10 checks failed on 2 devices"), "{out}");

    // One device only, JSON.
    let (code, out, err) = fcgraph(&lib, &["selftest", "--device", "1", "--json"]);
    assert_eq!(code, Some(1), "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    let checks = doc["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 5, "5 checks:\n{out}");
    assert!(checks
        .iter()
        .all(|o| o["device"] == 1 && o["result"] == "fail" && o["detail"].as_str().is_some_and(|d| !d.is_empty())));
    assert_eq!(doc["summary"]["failed"], 5);
    assert_eq!(doc["summary"]["passed"], false);
}

#[test]
fn selftest_on_a_single_device_machine() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph_with(&lib, &["selftest"], 1);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.starts_with("fcgraph selftest") && out.contains("device 0 (Stand-in GPU)\n"), "{out}");
    let rows = out.lines().filter(|l| l.contains("| FAIL ")).count();
    assert_eq!(rows, 5, "{out}");
    assert!(out.contains("selftest FAILED: 5 of 5 checks failed on 1 device ("), "{out}");
    assert!(!out.contains("panicked") && !err.contains("panicked"), "{out}{err}");
}

#[test]
fn selftest_refuses_a_device_that_does_not_exist() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph(&lib, &["selftest", "--device", "2"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.trim(), "fcgraph: device 2 does not exist (2 visible: 0..1)");
    let (code, out, err) = fcgraph(&lib, &["--json", "selftest", "--device", "2"]);
    assert_eq!(code, Some(2));
    assert!(err.is_empty(), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["error"]["code"], "no_such_device");
    assert_eq!(doc["error"]["message"], "device 2 does not exist (2 visible: 0..1)");
}

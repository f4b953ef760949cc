//! The `fcgraph` binary against a stand-in driver (`stand_in_driver.c`,
//! built here with the host C compiler): two fake devices whose calls all
//! succeed and do nothing. Runs everywhere, CI included:
//!
//! - `info` reports the stand-in's devices, versions and features;
//! - `selftest` fails every check (a driver that computes nothing must not
//!   pass any), reports each failure in the table, never panics, exits 1;
//! - `bench --quick` measures every step and prints the table or JSON rows.
//!
//! Without a C compiler the tests print `[SKIP]` and pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SOURCE: &str = include_str!("stand_in_driver.c");

/// Builds the stand-in once per test process; `None` (after a `[SKIP]`
/// line) without a C compiler.
fn stand_in() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fcgraph-stand-in");
            std::fs::create_dir_all(&dir).ok()?;
            let src = dir.join(format!("stand_in_driver.{}.c", std::process::id()));
            std::fs::write(&src, SOURCE).ok()?;
            let lib = dir.join("libcuda-stand-in.so");
            // Built under a name of its own, then renamed: test processes
            // running at once never load a half-written file.
            let tmp = dir.join(format!("libcuda-stand-in.so.{}.tmp", std::process::id()));
            let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
            let compiler = cc::Build::new()
                .cargo_metadata(false)
                .cargo_warnings(false)
                .target(&triple)
                .host(&triple)
                .opt_level(0)
                .try_get_compiler();
            let mut cmd = match compiler {
                Ok(c) => c.to_command(),
                Err(e) => {
                    println!("[SKIP] stand-in driver tests: no C compiler: {e}");
                    return None;
                }
            };
            let status = cmd.args(["-shared", "-fPIC", "-O0", "-Wall", "-o"]).arg(&tmp).arg(&src).status();
            match status {
                Ok(s) if s.success() => std::fs::rename(&tmp, &lib).ok().map(|()| lib),
                other => {
                    println!("[SKIP] stand-in driver tests: compiling the stand-in failed: {other:?}");
                    None
                }
            }
        })
        .clone()
}

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
    let present = format!("Optional driver features: {} of {optional} present", optional - 1);
    assert!(out.contains(&present), "missing {present:?} in:\n{out}");
    let row = |entry: &str| out.lines().find(|l| l.contains(entry)).map(str::to_string).unwrap_or_default();
    assert!(row("cuGraphExecUpdate").contains("| no "), "{out}");
    assert!(row("cuFuncGetParamInfo").contains("| yes "), "{out}");
}

#[test]
fn info_json_is_one_object_per_line() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph(&lib, &["--json", "info"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let objs: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    let of = |t: &str| objs.iter().filter(|o| o["type"] == t).count();
    assert_eq!((of("fcgraph"), of("driver"), of("device"), of("feature")), (1, 1, 2, optional_entry_points()), "{out}");
    let dev = objs.iter().find(|o| o["type"] == "device").expect("device");
    assert_eq!(dev["memory_free_bytes"], 70u64 << 30);
    assert_eq!(dev["compute_capability"], "9.0");
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
    let objs: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(objs.len(), 6, "5 checks + summary:\n{out}");
    assert!(objs[..5]
        .iter()
        .all(|o| o["device"] == 1 && o["result"] == "fail" && o["detail"].as_str().is_some_and(|d| !d.is_empty())));
    assert_eq!(objs[5]["type"], "summary");
    assert_eq!(objs[5]["failed"], 5);
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
}

#[test]
fn bench_measures_every_step() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fcgraph(&lib, &["bench", "--quick"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("fcgraph bench on device 0 (Stand-in GPU)"), "{out}");
    for step in [
        "eager kernel launch, per kernel",
        "graph launch (host side)",
        "capture begin",
        "kernel launch while capturing, per kernel",
        "capture end + instantiate",
    ] {
        let row = out.lines().find(|l| l.contains(step)).unwrap_or_else(|| panic!("no {step} row:\n{out}"));
        assert!(row.contains("| 26 |") && row.matches('x').count() >= 1, "K and a ratio: {row}");
    }

    let (code, out, err) = fcgraph(&lib, &["bench", "--quick", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    for name in
        ["step_eager_per_kernel_fc", "step_eager_per_kernel_bare", "step_graph_launch_fc", "step_graph_launch_bare"]
    {
        let r = rows.iter().find(|r| r["row"] == name).unwrap_or_else(|| panic!("no {name}:\n{out}"));
        assert_eq!(r["kernels"], 26);
        assert!(r["median_us"].as_f64().is_some_and(|m| m >= 0.0), "{r}");
    }
    // The stand-in has no cuGraphExecUpdate: no re-capture + update rows.
    assert!(!rows.iter().any(|r| r["row"].as_str().is_some_and(|n| n.starts_with("step_recapture_update"))), "{out}");
}

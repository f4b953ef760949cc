//! `fc-bench --steps --quick` against the stand-in driver of the CLI's
//! tests (`cli/tests/stand_in_driver.c`, built here with the host C
//! compiler: two fake devices whose calls all succeed and do nothing). Runs
//! everywhere, CI included: every step is measured and printed as JSON rows,
//! or with `--table` as the comparison table. Without a C compiler the test
//! prints `[SKIP]` and passes.

use std::path::Path;
use std::process::Command;

#[path = "../../cli/tests/common/stand_in.rs"]
mod stand_in_build;
use stand_in_build::stand_in;

fn fc_bench(lib: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fc-bench"))
        .args(args)
        .env("FC_CUDA_LIBRARY", lib)
        .env("FC_STAND_IN_DEVICES", "2")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .expect("the fc-bench binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn steps_measure_every_step() {
    let Some(lib) = stand_in() else { return };
    let (code, out, err) = fc_bench(&lib, &["--steps", "--quick", "--table"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("fc-bench --steps on device 0 (Stand-in GPU)"), "{out}");
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

    let (code, out, err) = fc_bench(&lib, &["--steps", "--quick"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let rows: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON row ({e}): {l}"))).collect();
    for name in
        ["step_eager_per_kernel_fc", "step_eager_per_kernel_bare", "step_graph_launch_fc", "step_graph_launch_bare"]
    {
        let r = rows.iter().find(|r| r["row"] == name).unwrap_or_else(|| panic!("no {name}:\n{out}"));
        assert_eq!((r["impl"].as_str(), r["kernels"].as_u64()), (Some("fc"), Some(26)), "{r}");
        assert!(r["median_us"].as_f64().is_some_and(|m| m >= 0.0), "{r}");
        assert!(r["p10_us"].as_f64().is_some() && r["p90_us"].as_f64().is_some() && r["n"].as_u64().is_some(), "{r}");
    }
    // The stand-in has no conditional nodes: no device-side loop rows.
    assert!(!rows.iter().any(|r| r["row"].as_str().is_some_and(|n| n.starts_with("step_while_loop"))), "{out}");
    // The stand-in has no cuGraphExecUpdate: no re-capture + update rows.
    assert!(!rows.iter().any(|r| r["row"].as_str().is_some_and(|n| n.starts_with("step_recapture_update"))), "{out}");
    // --quick leaves out the no-context probe.
    assert!(!rows.iter().any(|r| r["row"] == "probe_no_current_context"), "{out}");
}

#[test]
fn table_needs_steps() {
    let out = Command::new(env!("CARGO_BIN_EXE_fc-bench")).arg("--table").output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "clap refuses --table without --steps");
}

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

/// The rows `fc-bench --steps` emits on the stand-in, in order: (row,
/// kernels, the fields after the common ones). The stand-in has neither
/// in-place update nor conditional nodes, so the update, node-update and
/// device-loop rows are left out; its device has PDL, so both launch
/// modes' rows are there. `ks`: the chain lengths; `probe`: whether the
/// no-context probe runs.
fn stand_in_rows(ks: &[u64], probe: bool) -> Vec<(String, u64, &'static [&'static str])> {
    const PAIRED: &[&str] = &["paired_fc_over_bare", "paired_blocks"];
    const PROBE: &[&str] = &[
        "rc_launch",
        "rc_begin_capture",
        "rc_launch_captured",
        "rc_end_capture",
        "rc_instantiate",
        "rc_graph_launch",
        "rc_sync",
        "pdl",
    ];
    let mut v: Vec<(String, u64, &'static [&'static str])> = Vec::new();
    let pair = |v: &mut Vec<_>, step: &str, k: u64, variants: &[&str]| {
        for var in variants {
            v.push((format!("step_{step}_{var}"), k, &[][..]));
        }
    };
    v.push(("step_ctx_get_current".into(), 1, &[]));
    v.push(("step_capture_mode_exchange_pair".into(), 1, &[]));
    if probe {
        v.push(("probe_no_current_context".into(), 0, PROBE));
    }
    pair(&mut v, "handle_check_2threads", 1, &["fc", "bare"]);
    for &k in ks {
        pair(&mut v, "c_graph_launch", k, &["fc", "bare"]);
    }
    for &k in ks {
        for step in [
            "eager_per_kernel",
            "capture_begin",
            "capture_per_kernel",
            "capture_end_instantiate",
            "capture_launch_sync_destroy",
        ] {
            pair(&mut v, step, k, &["fc", "bare"]);
        }
        pair(&mut v, "graph_launch", k, &["fc", "bare", "bare_with_exchange"]);
        for step in ["table_capture_instantiate_pdl", "table_capture_instantiate_plain", "build_instantiate"] {
            v.push((format!("step_{step}_fc"), k, PAIRED));
            v.push((format!("step_{step}_bare"), k, &[]));
        }
        if k == 26 {
            pair(&mut v, "lanes_replay_pdl", k, &["fc", "bare"]);
            pair(&mut v, "lanes_replay_plain", k, &["fc", "bare"]);
        }
    }
    pair(&mut v, "handle_check", 1, &["fc", "bare"]);
    v
}

/// The rows of `out` as `stand_in_rows` lists them (a timed row's common
/// fields checked here).
fn rows_of(out: &str) -> Vec<(String, u64, Vec<String>)> {
    const COMMON: [&str; 8] = ["impl", "row", "kernels", "median_us", "p10_us", "p90_us", "n", "build"];
    out.lines()
        .map(|l| {
            let r: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON row ({e}): {l}"));
            let keys: Vec<String> = r.keys().cloned().collect();
            let row = r["row"].as_str().expect("a row name").to_string();
            let rest = if row.starts_with("step_") {
                assert_eq!(keys[..COMMON.len()], COMMON, "{l}");
                keys[COMMON.len()..].to_vec()
            } else {
                assert_eq!(keys[..4], ["impl", "row", "kernels", "median_us"], "{l}");
                keys[4..].to_vec()
            };
            (row, r["kernels"].as_u64().expect("kernels"), rest)
        })
        .collect()
}

#[test]
fn steps_rows_come_in_their_order() {
    let Some(lib) = stand_in() else { return };
    for (args, ks, probe) in
        [(&["--steps", "--quick"][..], &[26][..], false), (&["--steps"][..], &[26, 260, 2600][..], true)]
    {
        let (code, out, err) = fc_bench(&lib, args);
        assert_eq!(code, Some(0), "{args:?}: {out}{err}");
        let want: Vec<(String, u64, Vec<String>)> = stand_in_rows(ks, probe)
            .into_iter()
            .map(|(row, k, rest)| (row, k, rest.iter().map(|s| s.to_string()).collect()))
            .collect();
        assert_eq!(rows_of(&out), want, "{args:?}");
    }
}

#[test]
fn table_needs_steps() {
    let out = Command::new(env!("CARGO_BIN_EXE_fc-bench")).arg("--table").output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "clap refuses --table without --steps");
}

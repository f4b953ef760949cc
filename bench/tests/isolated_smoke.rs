//! Smoke tests of `fc-bench --isolated` (bench/src/isolated.rs): without a
//! driver it skips cleanly; with a GPU, `--isolated --quick` prints every
//! `ctx_*` row. `FC_BENCH_BIN` overrides the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

fn run(args: &[&str], envs: &[(&str, &str)]) -> (Output, String, String) {
    let bin =
        std::env::var_os("FC_BENCH_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_fc-bench")), PathBuf::from);
    let mut cmd = Command::new(&bin);
    cmd.args(args).envs(envs.iter().copied());
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    (out, o, e)
}

#[test]
fn isolated_rows_skip_without_a_driver() {
    let (out, stdout, stderr) = run(&["--isolated", "--quick"], &[("FC_CUDA_LIBRARY", "/nonexistent/libcuda.so")]);
    assert!(out.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(stdout.contains("[SKIP] no usable CUDA driver"), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stdout.lines().any(|l| l.starts_with('{')), "no rows without a driver:\n{stdout}");
}

#[test]
fn isolated_rows_when_a_gpu_is_present() {
    if !matches!(fc_graph::Device::count(), Ok(n) if n > 0) {
        eprintln!("[SKIP] isolated_rows_when_a_gpu_is_present: no CUDA device");
        return;
    }
    let (out, stdout, stderr) = run(&["--isolated", "--quick"], &[]);
    assert!(out.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let mut want = vec!["ctx_isolated_memory_bytes".to_string(), "ctx_private_memory_bytes".to_string()];
    for m in ["graph_launch_sync", "eager_enqueue_per_kernel", "capture_instantiate"] {
        want.push(format!("ctx_{m}_primary"));
        want.push(format!("ctx_{m}_isolated"));
    }
    for r in [
        "1ctx_primary",
        "1ctx_isolated",
        "2ctx_primary",
        "2ctx_isolated",
        "2ctx_mixed",
        "1ctx_private",
        "2ctx_mixed_private",
    ] {
        want.push(format!("ctx_replays_per_s_{r}"));
    }
    for w in want {
        let tag = format!("\"row\":\"{w}\"");
        assert!(stdout.lines().any(|l| l.starts_with('{') && l.contains(&tag)), "no {w} row\nstdout:\n{stdout}");
    }
    // The forced private rows are private whatever the driver offers; the
    // mixed rows compare with two streams of one context.
    for w in ["ctx_replays_per_s_1ctx_private", "ctx_replays_per_s_2ctx_mixed_private"] {
        let tag = format!("\"row\":\"{w}\"");
        let line = stdout.lines().find(|l| l.contains(&tag)).unwrap_or_default();
        assert!(line.contains("\"isolation\":\"private\""), "{w}: {line}");
    }
    for w in ["ctx_replays_per_s_2ctx_mixed", "ctx_replays_per_s_2ctx_mixed_private"] {
        let tag = format!("\"row\":\"{w}\"");
        let line = stdout.lines().find(|l| l.contains(&tag)).unwrap_or_default();
        assert!(line.contains("\"ratio_vs_2ctx_primary\":"), "{w}: {line}");
    }
}

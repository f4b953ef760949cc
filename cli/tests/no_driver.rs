//! The `fcgraph` binary without a usable driver (runs everywhere, CI
//! included): every command says so in exactly one sentence and exits 2,
//! with `--json` as exactly one `{"error": ...}` document on stdout;
//! `--version` and `--help` work regardless.

use std::process::{Command, Output};

const MISSING: &str = "/nonexistent/libcuda.so.1";

fn fcgraph(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fcgraph"))
        .args(args)
        .env("FC_CUDA_LIBRARY", MISSING)
        .output()
        .expect("the fcgraph binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_command_says_no_driver_in_one_line_and_exits_2() {
    for args in [&["info"][..], &["selftest"], &["selftest", "--device", "1"]] {
        let out = fcgraph(args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "fcgraph {args:?}: status {:?}\n{stdout}{stderr}", out.status);
        let all: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
        assert_eq!(all.len(), 1, "fcgraph {args:?} must print exactly one line, got:\n{stdout}{stderr}");
        let line = all[0];
        assert!(
            line.starts_with("fcgraph: no CUDA driver library could be opened (tried "),
            "fcgraph {args:?}: {line}"
        );
        assert!(line.contains(MISSING), "the line names the library it tried: {line}");
        assert!(
            line.ends_with("install the NVIDIA driver, or set FC_CUDA_LIBRARY to the driver library's path"),
            "{line}"
        );
        assert_eq!(line.matches("cannot open shared object file").count(), 1, "each reason once: {line}");
        assert!(stdout.is_empty(), "the line goes to stderr: {stdout}");
    }
}

#[test]
fn json_without_a_driver_is_one_error_document_and_exits_2() {
    for args in [&["--json", "info"][..], &["selftest", "--json"], &["--json", "selftest", "--device", "1"]] {
        let out = fcgraph(args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "fcgraph {args:?}: {stdout}{stderr}");
        assert!(stderr.is_empty(), "fcgraph {args:?}: stdout holds the error: {stderr}");
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
        assert_eq!(doc["error"]["code"], "no_driver", "{doc}");
        let msg = doc["error"]["message"].as_str().expect("message");
        assert!(msg.starts_with("no CUDA driver library could be opened") && msg.contains(MISSING), "{msg}");
        assert_eq!(doc.as_object().map(|o| o.len()), Some(1), "only the error: {doc}");
    }
}

#[test]
fn json_usage_errors_keep_the_usage_status() {
    let out = fcgraph(&["--json", "frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_str(&text(&out.stdout)).expect("one JSON document");
    assert_eq!(doc["error"]["code"], "usage", "{doc}");
    assert!(out.stderr.is_empty());
}

#[test]
fn version_prints_the_version() {
    let out = fcgraph(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), format!("fcgraph {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(text(&out.stdout).trim(), format!("fcgraph {}", fc_graph::VERSION));
}

#[test]
fn help_lists_the_commands() {
    let out = fcgraph(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for cmd in ["info", "selftest"] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(&format!("{cmd} "))), "--help lists {cmd}:\n{help}");
    }
    assert!(help.contains("--json"), "{help}");
    let sub = text(&fcgraph(&["selftest", "--help"]).stdout);
    assert!(sub.contains("--device <N>"), "{sub}");
}

#[test]
fn bad_usage_exits_2_without_touching_the_driver() {
    for args in [&["frobnicate"][..], &[], &["selftest", "--device", "x"]] {
        let out = fcgraph(args);
        assert_eq!(out.status.code(), Some(2), "fcgraph {args:?}");
        assert!(
            !text(&out.stderr).contains("fcgraph: no usable CUDA driver"),
            "usage errors come first: {}",
            text(&out.stderr)
        );
    }
}

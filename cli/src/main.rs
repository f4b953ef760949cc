//! `fcgraph`: the command-line tool of fc-graph.
//!
//! - `fcgraph info`: fc-graph's version, the CUDA driver it loaded, each
//!   device, the optional driver features;
//! - `fcgraph selftest [--device N]`: the checks to run before trusting the
//!   library on a machine.
//!
//! (The step benchmark, fc-graph's calls next to the bare driver calls they
//! wrap, is `fc-bench --steps --table` in bench/: the tool links the library
//! crates only.)
//!
//! With `--json` every run prints exactly one JSON document on stdout: the
//! report, or `{"error": {"code": ..., "message": ...}}`, with the same exit
//! status as without it.
//!
//! Exit status: 0 success, 1 a check or a query failed, 2 no usable CUDA
//! driver (one line on stderr says why) or bad usage.

mod format;
mod info;
mod locate;
mod selftest;
mod table;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use fc_graph::Device;
use serde_json::{json, Value};

/// Exit status when a check or a query failed.
const FAILED: u8 = 1;
/// Exit status without a usable driver, or for bad usage (as clap's).
const UNUSABLE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "fcgraph",
    version = fc_graph::VERSION,
    about = "fc-graph's command-line tool: driver and device info, and a self-test",
    after_help = "Exit status: 0 success; 1 a check or query failed; 2 no usable CUDA driver, or bad usage.\n\
                  With --json, stdout holds one JSON document: the report, or {\"error\": {\"code\", \"message\"}}.\n\
                  Environment: FC_CUDA_LIBRARY names the driver library to load instead of libcuda.so.1."
)]
struct Cli {
    /// Print one JSON document (errors included) instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// fc-graph's version and path, the CUDA driver it loaded, each device, and the optional driver features
    Info,
    /// Run the checks to pass before trusting fc-graph on this machine (exit status 1 on any failure)
    Selftest {
        /// Only this device (default: every visible device).
        #[arg(long, value_name = "N")]
        device: Option<usize>,
    },
}

/// Why a command could not run: a stable code (JSON), one line for people,
/// and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stop {
    code: &'static str,
    message: String,
    status: u8,
}

impl Stop {
    /// Prints the reason, as `{"error": ...}` on stdout with `--json`, else
    /// as one `fcgraph: ...` line on stderr; returns the exit status.
    fn report(&self, json: bool) -> ExitCode {
        if json {
            println!("{}", json!({"error": {"code": self.code, "message": self.message}}));
        } else {
            eprintln!("fcgraph: {}", self.message);
        }
        ExitCode::from(self.status)
    }
}

/// No usable driver, in one sentence: what was tried and what to do.
fn no_driver(e: &fc_graph::Error) -> Stop {
    let message = match e {
        // The loader's message names the libraries tried and the next step.
        fc_graph::Error::NoDriver(load) => load.to_string(),
        other => format!("no usable CUDA driver: {other}"),
    };
    Stop { code: "no_driver", message: table::one_line(&message), status: UNUSABLE }
}

/// The devices a command runs on, and how many are visible.
fn devices(only: Option<usize>) -> Result<(Vec<usize>, usize), Stop> {
    let count = Device::count().map_err(|e| no_driver(&e))?;
    let usage = |code, message: String| Stop { code, message, status: UNUSABLE };
    if count == 0 {
        return Err(usage("no_device", "no CUDA device visible (check CUDA_VISIBLE_DEVICES)".to_string()));
    }
    match only {
        Some(n) if n >= count => {
            Err(usage("no_such_device", format!("device {n} does not exist ({count} visible: 0..{})", count - 1)))
        }
        Some(n) => Ok((vec![n], count)),
        None => Ok(((0..count).collect(), count)),
    }
}

fn device_name(i: usize) -> String {
    Device::get(i).and_then(|d| d.name()).unwrap_or_else(|e| format!("name unreadable: {e}"))
}

/// The parsed command line; with `--json` anywhere, clap's own output
/// (usage errors, `--help`, `--version`) becomes one JSON document too.
fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, (Value, i32)> {
    let json = args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json");
    match Cli::try_parse_from(args) {
        Ok(cli) => Ok(cli),
        Err(e) if !json => e.exit(),
        Err(e) => {
            let status = e.exit_code();
            let doc = match e.kind() {
                ErrorKind::DisplayHelp => json!({"help": e.render().to_string()}),
                ErrorKind::DisplayVersion => json!({"version": fc_graph::VERSION}),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
                    json!({"error": {"code": "usage", "message": "a command is required: info or selftest (see --help)"}})
                }
                _ => {
                    let text = e.render().to_string();
                    let first = text.lines().next().unwrap_or("bad usage");
                    json!({"error": {"code": "usage", "message": first.trim_start_matches("error: ")}})
                }
            };
            Err((doc, status))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err((doc, status)) => {
            println!("{doc}");
            return ExitCode::from(u8::try_from(status).unwrap_or(UNUSABLE));
        }
    };
    let driver = match fc_graph::driver() {
        Ok(d) => d,
        Err(e) => return no_driver(&e).report(cli.json),
    };
    match cli.command {
        Command::Info => {
            let info = info::Info::gather(driver);
            if cli.json {
                println!("{}", info.json());
            } else {
                println!("{}", info.text());
            }
            if info.has_errors() {
                ExitCode::from(FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Selftest { device } => run_selftest(device, cli.json),
    }
}

fn run_selftest(only: Option<usize>, json: bool) -> ExitCode {
    let (devices, count) = match devices(only) {
        Ok(d) => d,
        Err(stop) => return stop.report(json),
    };
    if !json {
        let names: Vec<String> = devices.iter().map(|&i| format!("device {i} ({})", device_name(i))).collect();
        println!("fcgraph selftest {}: {}", fc_graph::VERSION, names.join(", "));
    }
    // Progress on a terminal's stderr; stdout keeps the table or the document.
    let progress = std::io::stderr().is_terminal();
    let report = selftest::run(&devices, count, |row| {
        if progress {
            let verdict = if row.passed { "PASS" } else { "FAIL" };
            eprintln!("  device {}: {:<36} {verdict} ({})", row.device, row.title, format::duration(row.time));
        }
    });
    if json {
        println!("{}", report.json());
    } else {
        println!("\n{}", report.text());
    }
    let code = if report.passed() { 0 } else { FAILED };
    if report.abandoned {
        // A check's thread is stuck in the driver: leave without running
        // exit handlers that could wait for it.
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: _exit ends the process at once; nothing after it runs.
        unsafe { libc::_exit(code as i32) };
    }
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn args(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn arguments_parse() {
        let cli = parse(args(&["fcgraph", "selftest", "--device", "1", "--json"])).expect("parses");
        assert!(cli.json);
        assert!(matches!(cli.command, Command::Selftest { device: Some(1) }));
        let cli = parse(args(&["fcgraph", "--json", "info"])).expect("parses");
        assert!(cli.json && matches!(cli.command, Command::Info));
        assert!(Cli::try_parse_from(["fcgraph", "selftest", "--device", "x"]).is_err());
        assert!(Cli::try_parse_from(["fcgraph"]).is_err(), "a command is required");
        assert!(Cli::try_parse_from(["fcgraph", "bench"]).is_err(), "the step benchmark is fc-bench's");
    }

    #[test]
    fn json_usage_errors_are_one_error_document_with_clap_status() {
        let (doc, status) = parse(args(&["fcgraph", "--json", "selftest", "--device", "x"])).expect_err("bad usage");
        assert_eq!(status, 2);
        assert_eq!(doc["error"]["code"], "usage");
        let msg = doc["error"]["message"].as_str().expect("message");
        assert!(msg.contains("--device") && !msg.starts_with("error:") && !msg.contains('\n'), "{msg}");
        let (doc, status) = parse(args(&["fcgraph", "--json", "--version"])).expect_err("version");
        assert_eq!((doc["version"].as_str(), status), (Some(fc_graph::VERSION), 0));
        let (doc, status) = parse(args(&["fcgraph", "--json", "--help"])).expect_err("help");
        assert!(doc["help"].as_str().is_some_and(|h| h.contains("selftest")) && status == 0, "{doc}");
        let (doc, status) = parse(args(&["fcgraph", "--json"])).expect_err("no command");
        assert_eq!((doc["error"]["code"].as_str(), status), (Some("usage"), 2), "{doc}");
    }

    #[test]
    fn no_driver_is_one_line() {
        let e = fc_graph::Error::Cuda {
            call: "cuInit",
            code: 100,
            name: "CUDA_ERROR_NO_DEVICE".into(),
            description: "no CUDA-capable device\nis detected".into(),
        };
        let stop = no_driver(&e);
        assert_eq!((stop.code, stop.status), ("no_driver", UNUSABLE));
        assert_eq!(
            stop.message,
            "no usable CUDA driver: cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
        );
    }
}

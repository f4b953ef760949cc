//! `fcgraph`: the command-line tool of fc-graph.
//!
//! - `fcgraph info`: fc-graph's version, the CUDA driver it loaded, each
//!   device, the optional driver features;
//! - `fcgraph selftest [--device N]`: the checks to run before trusting the
//!   library on a machine;
//! - `fcgraph bench [--quick]`: fc-graph's calls next to the bare driver
//!   calls they wrap.
//!
//! Exit status: 0 success, 1 a check or a query failed, 2 no usable CUDA
//! driver (one line on stderr says why) or bad usage.

mod bench;
mod format;
mod info;
mod locate;
mod selftest;
mod table;

use std::io::{IsTerminal, Write};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fc_bench::steps::{run_steps, StepOutput, StepsConfig};
use fc_graph::Device;

/// Exit status when a check or a query failed.
const FAILED: u8 = 1;
/// Exit status without a usable driver, or for bad usage (as clap's).
const UNUSABLE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "fcgraph",
    version = fc_graph::VERSION,
    about = "fc-graph's command-line tool: driver and device info, a self-test, a step benchmark",
    after_help = "Exit status: 0 success; 1 a check or query failed; 2 no usable CUDA driver, or bad usage.\n\
                  Environment: FC_CUDA_LIBRARY names the driver library to load instead of libcuda.so.1."
)]
struct Cli {
    /// Print JSON objects, one per line, instead of tables.
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
    /// Time fc-graph's calls next to the bare driver calls they wrap (a few seconds)
    Bench {
        /// About a second: a 26-kernel chain only, fewer samples.
        #[arg(long)]
        quick: bool,
        /// The device to measure on.
        #[arg(long, value_name = "N", default_value_t = 0)]
        device: usize,
    },
}

/// The one line printed without a usable driver.
fn no_driver_line(e: &fc_graph::Error) -> String {
    let msg = match e {
        fc_graph::Error::NoDriver(_) => e.to_string(),
        other => format!("no usable CUDA driver: {other}"),
    };
    format!("fcgraph: {}", table::one_line(&msg))
}

/// The devices a command runs on, or the one line saying why there are none.
fn devices(only: Option<usize>) -> Result<(Vec<usize>, usize), String> {
    let count = Device::count().map_err(|e| no_driver_line(&e))?;
    if count == 0 {
        return Err("fcgraph: no CUDA device visible (check CUDA_VISIBLE_DEVICES)".to_string());
    }
    match only {
        Some(n) if n >= count => Err(format!("fcgraph: device {n} does not exist ({count} visible: 0..{})", count - 1)),
        Some(n) => Ok((vec![n], count)),
        None => Ok(((0..count).collect(), count)),
    }
}

fn device_name(i: usize) -> String {
    Device::get(i).and_then(|d| d.name()).unwrap_or_else(|e| format!("name unreadable: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let driver = match fc_graph::driver() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{}", no_driver_line(&e));
            return ExitCode::from(UNUSABLE);
        }
    };
    match cli.command {
        Command::Info => {
            let info = info::Info::gather(driver);
            if cli.json {
                info.json_lines().iter().for_each(|l| println!("{l}"));
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
        Command::Bench { quick, device } => run_bench(device, quick, cli.json),
    }
}

fn run_selftest(only: Option<usize>, json: bool) -> ExitCode {
    let (devices, count) = match devices(only) {
        Ok(d) => d,
        Err(line) => {
            eprintln!("{line}");
            return ExitCode::from(UNUSABLE);
        }
    };
    if !json {
        let names: Vec<String> = devices.iter().map(|&i| format!("device {i} ({})", device_name(i))).collect();
        println!("fcgraph selftest {}: {}", fc_graph::VERSION, names.join(", "));
    }
    let progress = !json && std::io::stderr().is_terminal();
    let report = selftest::run(&devices, count, |row| {
        if json {
            println!("{}", row.json());
        } else if progress {
            let verdict = if row.passed { "PASS" } else { "FAIL" };
            eprintln!("  device {}: {:<36} {verdict} ({})", row.device, row.title, format::duration(row.time));
        }
    });
    if json {
        println!("{}", report.summary_json());
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

fn run_bench(device: usize, quick: bool, json: bool) -> ExitCode {
    if let Err(line) = devices(Some(device)) {
        eprintln!("{line}");
        return ExitCode::from(UNUSABLE);
    }
    let n = 4096;
    let mut cfg = if quick { StepsConfig::quick(device, n) } else { StepsConfig::full(device, n) };
    // fc-bench's investigation of context-free calls is not a comparison.
    cfg.probe_without_context = false;
    let name = format!("device {device} ({})", device_name(device));
    if !json && std::io::stderr().is_terminal() {
        eprintln!("measuring on {name}...");
    }
    let (mut rows, mut pdl) = (Vec::new(), None);
    let measured = panic::catch_unwind(AssertUnwindSafe(|| {
        run_steps(&cfg, &mut |out| match out {
            StepOutput::Row(r) => {
                if json {
                    println!("{}", r.json());
                }
                rows.push(r);
            }
            StepOutput::Pdl(p) => pdl = Some(p),
            StepOutput::Probe(_) => {}
        })
        .map_err(|e| e.to_string())
    }));
    let result = measured.unwrap_or_else(|p| Err(format!("internal error: {}", selftest::panic_message(p.as_ref()))));
    if !json && !rows.is_empty() {
        println!("{}", bench::text(&name, pdl, &bench::lines(&rows)));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fcgraph bench: failed: {}", table::one_line(&e));
            ExitCode::from(FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn arguments_parse() {
        let cli = Cli::try_parse_from(["fcgraph", "selftest", "--device", "1", "--json"]).expect("parses");
        assert!(cli.json);
        assert!(matches!(cli.command, Command::Selftest { device: Some(1) }));
        let cli = Cli::try_parse_from(["fcgraph", "--json", "bench", "--quick"]).expect("parses");
        assert!(cli.json && matches!(cli.command, Command::Bench { quick: true, device: 0 }));
        assert!(Cli::try_parse_from(["fcgraph", "selftest", "--device", "x"]).is_err());
        assert!(Cli::try_parse_from(["fcgraph"]).is_err(), "a command is required");
    }

    #[test]
    fn no_driver_is_one_line() {
        let e = fc_graph::Error::Cuda {
            call: "cuInit",
            code: 100,
            name: "CUDA_ERROR_NO_DEVICE".into(),
            description: "no CUDA-capable device\nis detected".into(),
        };
        assert_eq!(
            no_driver_line(&e),
            "fcgraph: no usable CUDA driver: cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
        );
    }
}

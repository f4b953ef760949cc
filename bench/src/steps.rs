//! Where fc-graph's time goes (`fc-bench --steps`):
//! times each step of the library's launch, capture and replay paths next
//! to the bare driver call it wraps, in the same process on the same
//! stream, alternating, so the difference is the library's own cost. Where
//! the library launches its built-ins with programmatic dependent launch
//! (PDL), the bare calls do too (`cuLaunchKernelEx` with the same
//! attribute, on the same sm_90 PTX).
//!
//! [`run_steps`] hands each finished row to a callback; `fc-bench` prints
//! them as JSON rows (`step_<step>_<fc|bare|...>`), or with `--table` as
//! the table of [`crate::steps_table`].
//!
//! The rows come in families, one module each, measured in this order:
//!
//! | module         | rows (steps)                                                                   | measured    |
//! |----------------|--------------------------------------------------------------------------------|-------------|
//! | `single_calls` | `ctx_get_current`, `capture_mode_exchange_pair`, the no-context probe          | once, first |
//! | `c_abi`        | `handle_check_2threads`, `c_graph_launch` (at each K)                          | once        |
//! | `launch`       | `eager_per_kernel`                                                             | per K       |
//! | `capture`      | `capture_begin`, `capture_per_kernel`, `capture_end_instantiate`               | per K       |
//! | `launch`       | `capture_launch_sync_destroy`, `graph_launch`                                  | per K       |
//! | `update`       | `recapture_update`, `graph_node_count`, `c_recapture_update`                   | per K       |
//! | `table_rows`   | `table_capture_instantiate_*`, `table_recapture_update_*`                      | per K       |
//! | `builder`      | `build_instantiate`, `node_update_*`, `set_params_floor*`, `built_launch_sync` | per K       |
//! | `lanes`        | `lanes_replay_{pdl,plain}`                                                     | K = 26      |
//! | `while_loop`   | `while_loop_32x26`                                                             | K = 26      |
//! | `c_abi`        | `handle_check` (the best of blocks measured after each K)                      | once, last  |
//!
//! They share the rigs of `rigs` (the library's chain beside the bare
//! driver calls; the C ABI's), the timing of `timing` (alternating
//! blocks, paired ratios) and the types of `config` and `rows`.
//! `--rerecord-profile` and `--build-profile` (modules `rerecord_profile`
//! and `build_profile`) run on the same rig.

use fc_graph::Result;

mod build_profile;
mod builder;
mod c_abi;
mod capture;
mod config;
mod lanes;
mod launch;
mod rerecord_profile;
mod rigs;
mod rows;
mod single_calls;
mod table_rows;
mod timing;
mod update;
mod while_loop;

pub use build_profile::build_profile;
pub use config::StepsConfig;
pub use rerecord_profile::rerecord_profile;
pub use rows::{step_label, NoContextProbe, Paired, StepOutput, StepRow, Variant};
pub use timing::paired_ratio;

use rigs::{ChainRun, Rig};

/// What measures one family's rows at one chain length.
type ChainRows = fn(ChainRun, &mut dyn FnMut(StepOutput)) -> Result<()>;

/// A family of rows measured at each chain length.
struct Family {
    /// What the family measures, for errors.
    name: &'static str,
    /// The steps of its rows, in the order it emits them (a family may
    /// leave some out where the driver or the device lacks what they need).
    steps: &'static [&'static str],
    /// The rows' measurement.
    rows: ChainRows,
}

/// The families measured at each chain length K, in this order.
const PER_CHAIN: &[Family] = &[
    Family { name: "eager launch", steps: launch::EAGER_STEPS, rows: launch::eager_rows },
    Family { name: "capture", steps: capture::STEPS, rows: capture::capture_rows },
    Family { name: "graph launch", steps: launch::GRAPH_LAUNCH_STEPS, rows: launch::graph_launch_rows },
    Family { name: "re-capture + update", steps: update::STEPS, rows: update::recapture_rows },
    Family { name: "the table's rows", steps: table_rows::STEPS, rows: table_rows::table_rows },
    Family { name: "recordings", steps: builder::STEPS, rows: builder::builder_rows },
    Family { name: "lanes", steps: lanes::STEPS, rows: lanes::lanes_rows },
    Family { name: "device-side loop", steps: while_loop::STEPS, rows: while_loop::while_rows },
];

/// Measures every step as `cfg` says, handing each row to `out` as soon as
/// it is measured.
pub fn run_steps(cfg: &StepsConfig, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    if cfg.n == 0 || cfg.chains.iter().any(|&(k, iters)| k == 0 || iters == 0) || cfg.single_call_samples == 0 {
        return Err(fc_graph::Error::invalid(
            "steps: n, every K, every iteration count and the sample count must be positive",
        ));
    }
    let d = fc_graph::driver()?;
    let rig = Rig::open(cfg.device, cfg.n)?;
    out(StepOutput::Pdl(rig.pdl.get()));
    checked("single calls", single_calls::STEPS, out, |out| single_calls::rows(cfg, d, &rig, out))?;
    let mut handle_check = c_abi::HandleCheck::new(cfg)?;
    handle_check.measure();
    checked("C ABI", c_abi::STEPS, out, |out| c_abi::rows(cfg, &handle_check, out))?;
    for &(k, iters) in &cfg.chains {
        let at = ChainRun { d, rig: &rig, k, iters };
        for f in PER_CHAIN {
            checked(f.name, f.steps, out, |out| (f.rows)(at, out))?;
        }
        handle_check.measure();
    }
    checked("C ABI handle check", c_abi::HANDLE_CHECK_STEPS, out, |out| {
        handle_check.emit(out);
        Ok(())
    })
}

/// Runs one family's `rows`, handing its output on to `out`; a row of a
/// step that the family's `steps` do not list is an error (after the
/// family's other rows), so that the lists the tests check stay true.
fn checked(
    name: &str,
    steps: &[&str],
    out: &mut dyn FnMut(StepOutput),
    rows: impl FnOnce(&mut dyn FnMut(StepOutput)) -> Result<()>,
) -> Result<()> {
    let mut stray = None;
    rows(&mut |o| {
        if let StepOutput::Row(r) = &o {
            if !steps.contains(&r.step) {
                stray.get_or_insert(r.step);
            }
        }
        out(o)
    })?;
    match stray {
        Some(step) => {
            Err(fc_graph::Error::invalid(format!("steps: the {name} rows include {step}, not in their list")))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step in measurement order, as the families list them.
    fn all_steps() -> Vec<&'static str> {
        let mut v = single_calls::STEPS.to_vec();
        v.extend(c_abi::STEPS);
        v.extend(PER_CHAIN.iter().flat_map(|f| f.steps.iter().copied()));
        v.extend(c_abi::HANDLE_CHECK_STEPS);
        v
    }

    #[test]
    fn the_families_measure_the_steps_in_their_order() {
        // The order of the rows of `fc-bench --steps` (per K: the
        // families from `eager_per_kernel` to `while_loop_32x26`), which
        // bench/report.py and people reading logs expect.
        assert_eq!(
            all_steps(),
            [
                "ctx_get_current",
                "capture_mode_exchange_pair",
                "handle_check_2threads",
                "c_graph_launch",
                "eager_per_kernel",
                "capture_begin",
                "capture_per_kernel",
                "capture_end_instantiate",
                "capture_launch_sync_destroy",
                "graph_launch",
                "recapture_update",
                "graph_node_count",
                "c_recapture_update",
                "table_capture_instantiate_pdl",
                "table_recapture_update_pdl",
                "table_capture_instantiate_plain",
                "table_recapture_update_plain",
                "build_instantiate",
                "node_update_all",
                "node_update_one",
                "node_update_none",
                "set_params_floor",
                "built_launch_sync",
                "node_update_all_plain",
                "set_params_floor_plain",
                "lanes_replay_pdl",
                "lanes_replay_plain",
                "while_loop_32x26",
                "handle_check",
            ]
        );
    }

    #[test]
    fn every_step_has_one_family_and_one_label() {
        let steps = all_steps();
        for s in &steps {
            assert_eq!(steps.iter().filter(|t| *t == s).count(), 1, "{s} is in two families");
            assert!(!step_label(s).is_empty(), "{s} has no label");
        }
        for (s, _) in rows::LABELS {
            assert!(steps.contains(s), "the label of {s} names no family's step");
        }
        assert_eq!(step_label("no_such_step"), "");
    }

    #[test]
    fn a_row_outside_its_familys_list_is_an_error() {
        let row = |step| {
            StepOutput::Row(StepRow {
                step,
                variant: Variant::Fc,
                kernels: 26,
                summary: crate::stats::Summary { median: 1.0, p10: 1.0, p90: 1.0, n: 1 },
                paired: None,
            })
        };
        let mut seen = Vec::new();
        let r = checked("test", &["a"], &mut |o| seen.push(o), |out| {
            out(row("a"));
            out(row("b"));
            out(row("a"));
            Ok(())
        });
        let e = r.expect_err("b is not listed").to_string();
        assert!(e.contains("the test rows include b"), "{e}");
        assert_eq!(seen.len(), 3, "every row is handed on");
        let mut seen = 0;
        checked("test", &["a"], &mut |_| seen += 1, |out| {
            out(row("a"));
            Ok(())
        })
        .expect("a is listed");
        assert_eq!(seen, 1);
    }
}

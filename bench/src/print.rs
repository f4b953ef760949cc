//! How `fc-bench` prints its timed rows (one JSON object on stdout, a human
//! line on stderr), and the two launch modes its single-device rows run in.

use fc_bench::chain::Chain;
use fc_bench::stats::{row_json, Summary, IMPL};
use fc_graph::Result;
use serde_json::{json, Value};

/// How the single-device rows run: the library's default (PDL where the
/// device allows it) or with PDL turned off on the context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode {
    /// Appended to the row names (`""` or `"_nopdl"`).
    suffix: &'static str,
    /// Whether the built-ins launch with PDL.
    pub(crate) pdl: bool,
}

impl Mode {
    /// Emits `row` + suffix with `"pdl"` and the fields of `extra` (a JSON
    /// object) appended; returns the median.
    pub(crate) fn emit(&self, row: &str, kernels: usize, us: &mut [f64], extra: Value) -> f64 {
        let mut fields = json!({"pdl": self.pdl});
        if let (Some(map), Value::Object(more)) = (fields.as_object_mut(), extra) {
            map.extend(more);
        }
        emit_row_with(&format!("{row}{}", self.suffix), kernels, us, fields)
    }
}

/// Runs `f` in the default mode, then with PDL off on the context (rows
/// `<row>_nopdl`); when the default is already plain, the `_nopdl` rows of
/// `rows` are emitted as skipped.
pub(crate) fn in_both_modes(c: &Chain, k: usize, rows: &[&str], mut f: impl FnMut(Mode) -> Result<()>) -> Result<()> {
    let pdl = c.ctx.pdl_enabled();
    f(Mode { suffix: "", pdl })?;
    if !pdl {
        for row in rows {
            let skipped = "PDL unavailable here: the default rows are plain";
            println!("{}", json!({"impl": IMPL, "row": format!("{row}_nopdl"), "kernels": k, "skipped": skipped}));
        }
        return Ok(());
    }
    c.ctx.set_pdl(false);
    let off = f(Mode { suffix: "_nopdl", pdl: false });
    c.ctx.set_pdl(true);
    off
}

/// Sorts `us`, prints its row with the fields of `extra` (a JSON object)
/// appended, and returns the median.
pub(crate) fn emit_row_with(row: &str, kernels: usize, us: &mut [f64], extra: Value) -> f64 {
    let s = Summary::of(us);
    print_row(row, kernels, &s, extra);
    s.median
}

/// One JSON row of the common schema on stdout, the fields of `extra` (a
/// JSON object) appended, and its human line on stderr.
pub(crate) fn print_row(row: &str, kernels: usize, s: &Summary, extra: Value) {
    println!("{}", row_json(row, kernels, s, extra));
    log_row(row, kernels, s);
}

/// The human line of a row, on stderr.
pub(crate) fn log_row(row: &str, kernels: usize, s: &Summary) {
    let Summary { median, p10, p90, n } = *s;
    eprintln!("[fc] {row:<26} K={kernels:<5} median {median:10.3} us  (p10 {p10:10.3}, p90 {p90:10.3}, n={n})");
}

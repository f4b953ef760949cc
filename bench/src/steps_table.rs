//! `fc-bench --steps --table`: each step of fc-graph next to the bare
//! driver calls it wraps, in this process, alternating, on two streams of
//! one CUDA context (the measurement is [`crate::steps`]), as a table for
//! people (Markdown layout, so a log pastes into docs as is).

use comfy_table::{presets, CellAlignment, Table};

use crate::stats::Summary;
use crate::steps::{step_label, StepRow, Variant};

/// Microseconds with three decimals below 100, one above.
pub fn micros(us: f64) -> String {
    if us.abs() < 100.0 {
        format!("{us:.3}")
    } else {
        format!("{us:.1}")
    }
}

/// One line of the table: a step at one chain length.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The step's row stem (`eager_per_kernel`).
    pub step: &'static str,
    /// Chain length K.
    pub kernels: usize,
    /// fc-graph's timing, if measured.
    pub fc: Option<Summary>,
    /// The bare driver calls' timing.
    pub bare: Option<Summary>,
    /// The bare calls with the shield's two mode exchanges around them.
    pub bare_with_exchange: Option<Summary>,
    /// The bare re-capture + update that keeps the re-captured graph.
    pub bare_keep_new: Option<Summary>,
}

/// Groups rows into lines by (step, K), in first-seen order.
pub fn lines(rows: &[StepRow]) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    for r in rows {
        let pos = match out.iter().position(|l| l.step == r.step && l.kernels == r.kernels) {
            Some(p) => p,
            None => {
                out.push(Line {
                    step: r.step,
                    kernels: r.kernels,
                    fc: None,
                    bare: None,
                    bare_with_exchange: None,
                    bare_keep_new: None,
                });
                out.len() - 1
            }
        };
        let line = &mut out[pos];
        match r.variant {
            Variant::Fc => line.fc = Some(r.summary),
            Variant::Bare | Variant::BareOnly => line.bare = Some(r.summary),
            Variant::BareWithExchange => line.bare_with_exchange = Some(r.summary),
            Variant::BareKeepNew => line.bare_keep_new = Some(r.summary),
        }
    }
    out
}

fn median_range(s: &Summary) -> String {
    format!("{} ({}–{})", micros(s.median), micros(s.p10), micros(s.p90))
}

/// The comparison table, with a heading naming the device and whether the
/// kernels launch with programmatic dependent launch (PDL).
pub fn text(device: &str, pdl: Option<bool>, lines: &[Line]) -> String {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN).set_header([
        "step",
        "K",
        "fc-graph µs",
        "bare driver µs",
        "fc − bare µs",
        "fc / bare",
    ]);
    for i in 1..6 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut notes = Vec::new();
    for l in lines {
        let label = match step_label(l.step) {
            "" => l.step.to_string(),
            s => s.to_string(),
        };
        let (diff, ratio) = match (&l.fc, &l.bare) {
            (Some(f), Some(b)) => (
                format!("{:+.3}", f.median - b.median),
                if b.median > 0.0 { format!("{:.2}x", f.median / b.median) } else { "-".into() },
            ),
            _ => ("-".into(), "-".into()),
        };
        t.add_row([
            label,
            l.kernels.to_string(),
            l.fc.as_ref().map_or("-".into(), median_range),
            l.bare.as_ref().map_or("-".into(), median_range),
            diff,
            ratio,
        ]);
        if let (Some(w), Some(b)) = (&l.bare_with_exchange, &l.bare) {
            notes.push(format!(
                "graph launch, K={}: the bare launch between the shield's two mode exchanges takes {} µs ({:+.3} µs)",
                l.kernels,
                micros(w.median),
                w.median - b.median
            ));
        }
        if let (Some(w), Some(b)) = (&l.bare_keep_new, &l.bare) {
            notes.push(format!(
                "re-capture + update, K={}: bare calls that keep the re-captured graph and destroy the replaced one take {} µs ({:+.3} µs)",
                l.kernels,
                micros(w.median),
                w.median - b.median
            ));
        }
    }
    let launches = match pdl {
        Some(true) => "kernels launch with PDL on both sides (cuLaunchKernelEx)",
        Some(false) => "kernels launch without PDL on both sides (cuLaunchKernel)",
        None => "",
    };
    let mut out = vec![
        format!("fc-bench --steps on {device}: host-side µs per call, median (p10–p90)"),
        format!(
            "fc-graph and the bare driver calls alternate in one process (two streams of one CUDA context){}{launches}",
            if launches.is_empty() { "" } else { "; " }
        ),
        String::new(),
        t.to_string(),
    ];
    if !notes.is_empty() {
        out.push(String::new());
        out.extend(notes);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(median: f64) -> Summary {
        Summary { median, p10: median * 0.9, p90: median * 1.2, n: 10 }
    }

    fn row(step: &'static str, variant: Variant, kernels: usize, median: f64) -> StepRow {
        StepRow { step, variant, kernels, summary: s(median), paired: None }
    }

    #[test]
    fn rows_pair_up_by_step_and_k() {
        let rows = vec![
            row("ctx_get_current", Variant::BareOnly, 1, 0.02),
            row("eager_per_kernel", Variant::Fc, 26, 3.6),
            row("eager_per_kernel", Variant::Bare, 26, 3.5),
            row("eager_per_kernel", Variant::Fc, 2600, 3.4),
            row("eager_per_kernel", Variant::Bare, 2600, 3.3),
            row("graph_launch", Variant::Fc, 26, 2.2),
            row("graph_launch", Variant::Bare, 26, 2.1),
            row("graph_launch", Variant::BareWithExchange, 26, 2.15),
        ];
        let ls = lines(&rows);
        assert_eq!(ls.len(), 4);
        assert_eq!((ls[0].step, ls[0].fc, ls[0].bare), ("ctx_get_current", None, Some(s(0.02))));
        assert_eq!((ls[1].kernels, ls[1].fc, ls[1].bare), (26, Some(s(3.6)), Some(s(3.5))));
        assert_eq!(ls[2].kernels, 2600);
        assert_eq!(ls[3].bare_with_exchange, Some(s(2.15)));
    }

    #[test]
    fn micro_seconds() {
        assert_eq!(micros(3.5213), "3.521");
        assert_eq!(micros(-0.04), "-0.040");
        assert_eq!(micros(6512.44), "6512.4");
    }

    #[test]
    fn table_shows_difference_and_ratio() {
        let ls =
            lines(&[row("eager_per_kernel", Variant::Fc, 26, 3.6), row("eager_per_kernel", Variant::Bare, 26, 3.0)]);
        let text = text("device 0 (NVIDIA H200)", Some(true), &ls);
        assert!(text.starts_with("fc-bench --steps on device 0 (NVIDIA H200)"), "{text}");
        assert!(text.contains("kernels launch with PDL on both sides"), "{text}");
        let line = text.lines().find(|l| l.contains("eager kernel launch, per kernel")).expect("row");
        assert!(line.contains("3.600 (3.240–4.320)"), "{line}");
        assert!(line.contains("+0.600") && line.contains("1.20x"), "{line}");
    }

    #[test]
    fn bare_only_rows_have_no_comparison() {
        let text = text("d", None, &lines(&[row("capture_mode_exchange_pair", Variant::BareOnly, 1, 0.05)]));
        let line = text.lines().find(|l| l.contains("the shield")).expect("row");
        let cells: Vec<&str> = line.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(cells[1..], ["1", "-", "0.050 (0.045–0.060)", "-", "-"], "{line}");
    }
}

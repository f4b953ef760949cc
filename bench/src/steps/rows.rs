//! What `fc-bench --steps` hands out: its rows (`step_<step><suffix>`,
//! one per step, chain length and implementation), the no-context probe
//! and the steps' labels for the table.

use cuda_sys::CUresult;
use serde_json::json;

use crate::stats::{no_extra, round, row_json, Summary, IMPL};

/// Which implementation a row timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// fc-graph's call.
    Fc,
    /// The bare driver call(s) fc-graph's call wraps.
    Bare,
    /// The bare call between two capture-mode exchanges (what the shield adds).
    BareWithExchange,
    /// A single driver call with no fc-graph counterpart.
    BareOnly,
    /// Re-capture + update by bare calls that keep the re-captured graph
    /// as the executable's source and destroy the replaced one (as
    /// fc-graph's `end_update` did in runs 18-30), instead of destroying the
    /// re-captured graph right after the update ([`Variant::Bare`], and
    /// fc-graph since run 31).
    BareKeepNew,
}

impl Variant {
    /// The suffix of the row name (`_fc`, `_bare`, ...; none for [`Variant::BareOnly`]).
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Fc => "_fc",
            Variant::Bare => "_bare",
            Variant::BareWithExchange => "_bare_with_exchange",
            Variant::BareOnly => "",
            Variant::BareKeepNew => "_bare_keep_new",
        }
    }
}

/// One measured row: microseconds per sample.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    /// The step, e.g. `eager_per_kernel` (see [`step_label`]).
    pub step: &'static str,
    /// Library or bare driver calls.
    pub variant: Variant,
    /// Chain length K (1 for single calls).
    pub kernels: usize,
    /// The samples' statistics, in microseconds.
    pub summary: Summary,
    /// On the fc row of a pair timed in alternating blocks: fc / bare
    /// over adjacent blocks ([`paired_ratio`](super::paired_ratio)).
    pub paired: Option<Paired>,
}

/// fc / bare of a row pair timed in alternating blocks, block by block:
/// the median over block pairs of (fc block median / bare block median).
/// Adjacent blocks see the same state of the host, so a change of the
/// host's speed during the row (seen in GPU run 53) weighs on both sides
/// of each pair alike, where the ratio of the two rows' medians takes
/// whichever state most of each side's rounds fell into.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// The median of the block pairs' ratios.
    pub ratio: f64,
    /// Block pairs.
    pub blocks: usize,
}

impl StepRow {
    /// The row name of the JSON schema: `step_<step><suffix>`.
    pub fn row_name(&self) -> String {
        format!("step_{}{}", self.step, self.variant.suffix())
    }

    /// The row as one JSON object (the schema `bench/report.py` reads).
    pub fn json(&self) -> String {
        let extra = match self.paired {
            Some(p) => json!({ "paired_fc_over_bare": round(p.ratio, 4), "paired_blocks": p.blocks }),
            None => no_extra(),
        };
        row_json(&self.row_name(), self.kernels, &self.summary, extra)
    }
}

/// Result codes of the hot-path calls made with no context current on the
/// thread (0 = success; -1 = not attempted because an earlier call failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoContextProbe {
    /// `cuLaunchKernel`.
    pub launch: CUresult,
    /// `cuStreamBeginCapture`.
    pub begin_capture: CUresult,
    /// `cuLaunchKernel` into the capture.
    pub launch_captured: CUresult,
    /// `cuStreamEndCapture`.
    pub end_capture: CUresult,
    /// `cuGraphInstantiateWithFlags`.
    pub instantiate: i64,
    /// `cuGraphLaunch`.
    pub graph_launch: i64,
    /// `cuStreamSynchronize`.
    pub sync: CUresult,
    /// Whether the rig's bare launches used PDL.
    pub pdl: bool,
}

impl NoContextProbe {
    /// The probe as its JSON row (`probe_no_current_context`).
    pub fn json(&self) -> String {
        json!({"impl": IMPL, "row": "probe_no_current_context", "kernels": 0, "median_us": null,
               "rc_launch": self.launch, "rc_begin_capture": self.begin_capture,
               "rc_launch_captured": self.launch_captured, "rc_end_capture": self.end_capture,
               "rc_instantiate": self.instantiate, "rc_graph_launch": self.graph_launch, "rc_sync": self.sync,
               "pdl": self.pdl})
        .to_string()
    }
}

/// What [`run_steps`](super::run_steps) hands its callback, in measurement order.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutput {
    /// First: whether the built-ins (and so the bare launches) use
    /// programmatic dependent launch on this device.
    Pdl(bool),
    /// A finished row.
    Row(StepRow),
    /// The no-context probe's result.
    Probe(NoContextProbe),
}

/// Each step's one-line description, for tables (see [`step_label`]).
pub(super) const LABELS: &[(&str, &str)] = &[
    ("ctx_get_current", "cuCtxGetCurrent (the context check before each call)"),
    ("capture_mode_exchange_pair", "two cuThreadExchangeStreamCaptureMode (the shield)"),
    ("eager_per_kernel", "eager kernel launch, per kernel"),
    ("capture_begin", "capture begin"),
    ("capture_per_kernel", "kernel launch while capturing, per kernel"),
    ("capture_end_instantiate", "capture end + instantiate"),
    ("capture_launch_sync_destroy", "capture + instantiate + launch + sync + destroy"),
    ("graph_launch", "graph launch (host side)"),
    ("handle_check", "C ABI handle check: fc_buffer_size vs DeviceBuffer::size, per call"),
    ("handle_check_2threads", "the same, two threads on one handle at once, per call and thread"),
    ("c_graph_launch", "graph launch through the C ABI (fc_graph_launch) vs bare"),
    ("recapture_update", "re-capture + in-place update (cuGraphExecUpdate) + one graph destroy"),
    ("c_recapture_update", "the same re-capture + update through the C ABI vs bare"),
    ("graph_node_count", "cuGraphGetNodes, count only, of a K-node graph"),
    ("table_capture_instantiate_pdl", "the table's capture_instantiate, PDL on both sides"),
    ("table_capture_instantiate_plain", "the table's capture_instantiate, plain launches on both sides"),
    ("table_recapture_update_pdl", "the table's recapture_update, PDL on both sides"),
    ("table_recapture_update_plain", "the table's recapture_update, plain launches on both sides"),
    ("build_instantiate", "recording (built node by node) + instantiate vs stream capture + instantiate"),
    (
        "node_update_all",
        "re-recording, every node changed (K node calls) vs re-capture + cuGraphExecUpdate + destroy, \
        the rig's launches (PDL where the device has it)",
    ),
    (
        "node_update_all_plain",
        "re-recording, every node changed (K node calls) vs re-capture + cuGraphExecUpdate + destroy, \
        plain launches on both sides",
    ),
    ("node_update_one", "re-recording, one node changed (1 node call) vs re-capture + cuGraphExecUpdate + destroy"),
    ("node_update_none", "re-recording, nothing changed (no driver call) vs re-capture + cuGraphExecUpdate + destroy"),
    ("lanes_replay_pdl", "two joined lanes of 26 (fc column) vs one chain of 52 (bare column, also fc-graph), PDL"),
    ("lanes_replay_plain", "two joined lanes of 26 (fc column) vs one chain of 52 (bare column, also fc-graph), plain"),
    (
        "while_loop_32x26",
        "32 iterations of a 26-kernel body + countdown: one WHILE node (fc column) vs the host loop (launch the \
        body, copy the flag back, sync, decide; bare column, also fc-graph)",
    ),
    ("set_params_floor", "K bare cuGraphExecKernelNodeSetParams, every node changed (the driver's floor)"),
    (
        "set_params_floor_plain",
        "K bare cuGraphExecKernelNodeSetParams, every node changed (the driver's floor), plain launches",
    ),
    ("built_launch_sync", "launch + sync of the recorded graph vs the captured one (bare cuGraphLaunch)"),
];

/// A one-line description of each step, for tables ("" for a step it does not know).
pub fn step_label(step: &str) -> &'static str {
    LABELS.iter().find(|(s, _)| *s == step).map_or("", |&(_, label)| label)
}

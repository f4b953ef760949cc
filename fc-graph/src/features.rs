//! Optional driver features: the driver entry points fc-graph can use but
//! does not require, whether the loaded driver has them, and what fc-graph
//! does with them (and without them).
//!
//! The list is derived from [`cuda_sys::functions::FUNCTIONS`], so an
//! optional entry point added to the table appears here without further
//! edits; [`describe`] adds a name and a one-line description where one is
//! known.
//!
//! A feature is present when the driver gave its entry point at an ABI that
//! delivers it ([`Known::needs_abi`] or newer): in-place update
//! (`cuGraphExecUpdate`) counts through the 10020 ABI of 10.2-11.x drivers
//! (driver 470 included), which the library adapts to the 12.0 form; graph
//! edge data (`cuGraphGetEdges`) does not count through the 10000 ABI of
//! drivers before 12.3, which has no `edgeData` and so cannot tell
//! programmatic edges from full ones.

use cuda_sys::audit::{abi_versions, FunctionDecl};
use cuda_sys::functions::FUNCTIONS;
use cuda_sys::DriverFns;

use crate::driver::driver;
use crate::error::Result;

/// One optional driver entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// The driver entry point, e.g. `cuGraphExecUpdate`.
    pub entry_point: &'static str,
    /// A short name for the feature, e.g. "in-place graph update" (the
    /// entry point's name when none is known).
    pub name: &'static str,
    /// What fc-graph uses it for and what it does without it.
    pub description: &'static str,
    /// The oldest ABI of the entry point that delivers the feature (e.g.
    /// 10020 for in-place update, 12030 for edge data).
    pub needs_abi: i32,
    /// The oldest CUDA version whose driver has it at that ABI, e.g. "10.2"
    /// (where known; else the ABI version's, which may be older: an entry
    /// point can appear after the ABI version it is typed with).
    pub since_cuda: String,
    /// The ABI the loaded driver gave (`None`: it has no such entry point).
    pub resolved_abi: Option<i32>,
    /// Whether the loaded driver has the feature: the entry point resolved
    /// at `needs_abi` or newer.
    pub present: bool,
}

/// "major.minor" of a CUDA API version number (13000 -> "13.0",
/// 12040 -> "12.4", 11040 -> "11.4").
pub fn cuda_version_text(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// What is known of an optional entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// A short name for the feature.
    pub name: &'static str,
    /// The oldest ABI of the entry point that delivers the feature; one of
    /// the table's ABIs of it.
    pub needs_abi: i32,
    /// The CUDA version that introduced the entry point at that ABI.
    pub since_cuda: &'static str,
    /// What fc-graph does with it, and without it.
    pub description: &'static str,
}

/// The optional entry points fc-graph knows about; entry points not listed
/// here are still reported, with their own name and a generic description.
const DESCRIPTIONS: &[(&str, Known)] = &[
    (
        "cuLaunchKernelEx",
        Known {
            name: "programmatic dependent launch",
            needs_abi: 11060,
            since_cuda: "11.8",
            description: "built-in kernels (and user kernels that opt in) launch with PDL on compute capability \
                          9.0+ and a 12.3+ driver; without it every launch is plain",
        },
    ),
    (
        "cuFuncGetParamInfo",
        Known {
            name: "kernel parameter info",
            needs_abi: 12040,
            since_cuda: "12.4",
            description: "kernel parameter sizes parsed from PTX are cross-checked with the driver's; without it \
                          the PTX declarations alone are used",
        },
    ),
    (
        "cuGraphExecUpdate",
        Known {
            name: "in-place graph update",
            needs_abi: 10020,
            since_cuda: "10.2",
            description: "Capture::end_update updates an instantiated graph in place (12.0 ABI, or the 10020 ABI \
                          before 12.0); without it the graph is instantiated anew",
        },
    ),
    (
        "cuGraphGetEdges",
        Known {
            name: "graph edge data",
            needs_abi: 12030,
            since_cuda: "12.3",
            description: "not used by the library; its PDL tests tell programmatic edges from full ones with it \
                          (the 10000 ABI before 12.3 has no edge data)",
        },
    ),
    (
        "cuGraphDebugDotPrint",
        Known {
            name: "graph DOT dump",
            needs_abi: 11030,
            since_cuda: "11.3",
            description: "not used by the library; diagnostics (its PDL tests dump graphs as Graphviz DOT)",
        },
    ),
    (
        "cuDeviceGetDevResource",
        Known {
            name: "device resources",
            needs_abi: 12040,
            since_cuda: "12.4",
            description: "the device's SMs, the resources of an isolated context's green context",
        },
    ),
    (
        "cuDevResourceGenerateDesc",
        Known {
            name: "resource descriptors",
            needs_abi: 12040,
            since_cuda: "12.4",
            description: "the resource descriptor a green context is created from",
        },
    ),
    (
        "cuGreenCtxCreate",
        Known {
            name: "green contexts",
            needs_abi: 12040,
            since_cuda: "12.4",
            description: "isolated contexts are green contexts (all SMs, full speed beside the primary); without them, \
                          private contexts (cuCtxCreate), which time-slice the GPU",
        },
    ),
    (
        "cuGreenCtxDestroy",
        Known {
            name: "green context teardown",
            needs_abi: 12040,
            since_cuda: "12.4",
            description: "destroys an isolated context's green context",
        },
    ),
    (
        "cuCtxFromGreenCtx",
        Known {
            name: "green context handles",
            needs_abi: 12040,
            since_cuda: "12.4",
            description: "the CUcontext of an isolated context's green context (streams, modules, memory, capture)",
        },
    ),
    (
        "cuGreenCtxStreamCreate",
        Known {
            name: "green context streams",
            needs_abi: 12050,
            since_cuda: "12.5",
            description: "an isolated green context's stream; without it (12.4) the stream is created with the green context current",
        },
    ),
    (
        "cuGraphKernelNodeSetParams",
        Known {
            name: "kernel node update in a graph being built",
            needs_abi: 10000,
            since_cuda: "10.0",
            description: "for cuda-sys users; fc-graph updates executables node by node, which measured as fast \
                          (GPU run 47)",
        },
    ),
    (
        "cuGraphAddNode",
        Known {
            name: "nodes from generic parameters",
            needs_abi: 12020,
            since_cuda: "12.2",
            description: "adds recordings' conditional nodes (IF, WHILE, SWITCH); without it recordings refuse \
                          conditionals",
        },
    ),
    (
        "cuGraphConditionalHandleCreate",
        Known {
            name: "conditional nodes",
            needs_abi: 12030,
            since_cuda: "12.3",
            description: "the condition of recorded IF, WHILE and SWITCH nodes, set on the device by fc-graph's \
                          setter kernels; without it recordings refuse conditionals",
        },
    ),
];

/// Generic description of an optional entry point fc-graph has no text for.
pub const UNDESCRIBED: &str = "optional driver entry point (no description yet)";

/// What is known of optional entry point `entry_point`, if anything.
pub fn describe(entry_point: &str) -> Option<Known> {
    DESCRIPTIONS.iter().find(|(e, _)| *e == entry_point).map(|(_, k)| *k)
}

/// Every optional entry point of the table, given the ABI the driver
/// resolved each present one at (`(entry point, ABI version)`; absent
/// entries are not listed).
pub fn features_given_abis(resolved: &[(&str, i32)]) -> Vec<Feature> {
    FUNCTIONS
        .iter()
        .filter(|f| !f.required)
        .map(|f| feature_of(f, resolved.iter().find(|(n, _)| *n == f.name).map(|&(_, abi)| abi)))
        .collect()
}

/// The optional features of a loaded driver table.
pub fn features_of(fns: &DriverFns) -> Vec<Feature> {
    let resolved: Vec<(&str, i32)> = fns.resolved().iter().map(|r| (r.name, r.abi_version)).collect();
    features_given_abis(&resolved)
}

fn feature_of(f: &FunctionDecl, resolved_abi: Option<i32>) -> Feature {
    let known = describe(f.name);
    // Undescribed: any ABI the table knows delivers it.
    let oldest = abi_versions(f.name).last().copied().unwrap_or(f.abi_version);
    let needs_abi = known.map_or(oldest, |k| k.needs_abi);
    Feature {
        entry_point: f.name,
        name: known.map_or(f.name, |k| k.name),
        description: known.map_or(UNDESCRIBED, |k| k.description),
        needs_abi,
        since_cuda: known.map_or_else(|| cuda_version_text(needs_abi), |k| k.since_cuda.to_string()),
        resolved_abi,
        present: resolved_abi.is_some_and(|abi| abi >= needs_abi),
    }
}

/// The optional features of the loaded driver (loads it if needed).
pub fn features() -> Result<Vec<Feature>> {
    Ok(features_of(driver()?))
}

/// Features and in-place update against the driver double (`fc_driver_double`).
#[cfg(all(test, target_os = "linux"))]
#[path = "features_double_tests.rs"]
mod double_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every optional entry at its newest ABI, as a driver of today has them.
    fn all_newest() -> Vec<(&'static str, i32)> {
        FUNCTIONS.iter().filter(|f| !f.required).map(|f| (f.name, f.abi_version)).collect()
    }

    #[test]
    fn every_optional_entry_point_is_listed_once() {
        let all = features_given_abis(&all_newest());
        let optional: Vec<&str> = FUNCTIONS.iter().filter(|f| !f.required).map(|f| f.name).collect();
        assert!(!optional.is_empty(), "the table has optional entry points");
        assert_eq!(all.iter().map(|f| f.entry_point).collect::<Vec<_>>(), optional);
        assert!(all.iter().all(|f| f.present));
        assert!(FUNCTIONS.iter().filter(|f| f.required).all(|r| all.iter().all(|f| f.entry_point != r.name)));
    }

    #[test]
    fn missing_ones_are_marked_absent() {
        let resolved: Vec<_> = all_newest().into_iter().filter(|(n, _)| *n != "cuGraphExecUpdate").collect();
        let all = features_given_abis(&resolved);
        let update = all.iter().find(|f| f.entry_point == "cuGraphExecUpdate").expect("listed");
        assert!(!update.present);
        assert_eq!(update.resolved_abi, None);
        assert_eq!(update.name, "in-place graph update");
        assert_eq!(update.since_cuda, "10.2");
        let info = all.iter().find(|f| f.entry_point == "cuFuncGetParamInfo").expect("listed");
        assert!(info.present);
        assert_eq!(info.since_cuda, "12.4");
    }

    /// What a CUDA 11.4 driver (470) gives: in-place update through the
    /// 10020 ABI (present), the edges without edge data (absent).
    #[test]
    fn older_abis_count_only_where_they_deliver_the_feature() {
        let all = features_given_abis(&[("cuGraphExecUpdate", 10020), ("cuGraphGetEdges", 10000)]);
        let of = |e: &str| all.iter().find(|f| f.entry_point == e).expect("listed").clone();
        let update = of("cuGraphExecUpdate");
        assert!(update.present, "{update:?}");
        assert_eq!((update.resolved_abi, update.needs_abi), (Some(10020), 10020));
        let edges = of("cuGraphGetEdges");
        assert!(!edges.present, "{edges:?}");
        assert_eq!((edges.resolved_abi, edges.needs_abi), (Some(10000), 12030));
        assert!(!of("cuLaunchKernelEx").present && !of("cuFuncGetParamInfo").present);
    }

    #[test]
    fn descriptions_name_optional_entry_points_of_the_table() {
        for (entry, known) in DESCRIPTIONS {
            let decl = FUNCTIONS.iter().find(|f| f.name == *entry);
            assert!(matches!(decl, Some(d) if !d.required), "{entry} is not an optional entry point");
            let text = known.description;
            assert!(!text.contains('\n') && text.len() < 200, "one line: {text}");
            // The ABI that delivers it is one the table resolves.
            let abis = abi_versions(entry);
            assert!(abis.contains(&known.needs_abi), "{entry}: needs ABI {} not in {abis:?}", known.needs_abi);
            // The CUDA version that introduced it is never older than that ABI.
            let (major, minor) = known.since_cuda.split_once('.').expect("major.minor");
            let since: i32 = major.parse::<i32>().expect("major") * 1000 + minor.parse::<i32>().expect("minor") * 10;
            assert!(
                since >= known.needs_abi,
                "{entry}: since {} is older than its ABI {}",
                known.since_cuda,
                known.needs_abi
            );
        }
        assert_eq!(describe("cuSomethingNew"), None);
    }

    #[test]
    fn version_text() {
        assert_eq!(cuda_version_text(13000), "13.0");
        assert_eq!(cuda_version_text(12040), "12.4");
        assert_eq!(cuda_version_text(11040), "11.4");
        assert_eq!(cuda_version_text(12090), "12.9");
    }
}

//! Optional driver features: the driver entry points fc-graph can use but
//! does not require, whether the loaded driver has them, and what fc-graph
//! does with them (and without them).
//!
//! The list is derived from [`cuda_sys::functions::FUNCTIONS`], so an
//! optional entry point added to the table appears here without further
//! edits; [`describe`] adds a name and a one-line description where one is
//! known.

use cuda_sys::audit::FunctionDecl;
use cuda_sys::functions::FUNCTIONS;

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
    /// The ABI version fc-graph resolves it at (e.g. 12000).
    pub abi_version: i32,
    /// The oldest CUDA version whose driver has it at that ABI, e.g. "12.0"
    /// (where known; else the ABI version's, which may be older: an entry
    /// point can appear after the ABI version it is typed with).
    pub since_cuda: String,
    /// Whether the loaded driver has it.
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
    /// The CUDA version that introduced the entry point at fc-graph's ABI.
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
            since_cuda: "11.8",
            description: "built-in kernels (and user kernels that opt in) launch with PDL on compute capability \
                          9.0+ and a 12.3+ driver; without it every launch is plain",
        },
    ),
    (
        "cuFuncGetParamInfo",
        Known {
            name: "kernel parameter info",
            since_cuda: "12.4",
            description: "kernel parameter sizes parsed from PTX are cross-checked with the driver's; without it \
                          the PTX declarations alone are used",
        },
    ),
    (
        "cuGraphExecUpdate",
        Known {
            name: "in-place graph update",
            since_cuda: "12.0",
            description: "Capture::end_update updates an instantiated graph in place (several times cheaper than \
                          instantiating); without it the graph is instantiated anew",
        },
    ),
    (
        "cuGraphGetEdges",
        Known {
            name: "graph edge data",
            since_cuda: "12.3",
            description: "not used by the library; its PDL tests tell programmatic edges from full ones with it",
        },
    ),
    (
        "cuGraphDebugDotPrint",
        Known {
            name: "graph DOT dump",
            since_cuda: "11.3",
            description: "not used by the library; diagnostics (its PDL tests dump graphs as Graphviz DOT)",
        },
    ),    (
        "cuDeviceGetDevResource",
        Known {
            name: "device resources",
            since_cuda: "12.4",
            description: "the device's SMs, the resources of an isolated context's green context",
        },
    ),
    (
        "cuDevResourceGenerateDesc",
        Known {
            name: "resource descriptors",
            since_cuda: "12.4",
            description: "the resource descriptor a green context is created from",
        },
    ),
    (
        "cuGreenCtxCreate",
        Known {
            name: "green contexts",
            since_cuda: "12.4",
            description: "isolated contexts are green contexts (all SMs, full speed beside the primary); without them, \
                          private contexts (cuCtxCreate), which time-slice the GPU",
        },
    ),
    (
        "cuGreenCtxDestroy",
        Known {
            name: "green context teardown",
            since_cuda: "12.4",
            description: "destroys an isolated context's green context",
        },
    ),
    (
        "cuCtxFromGreenCtx",
        Known {
            name: "green context handles",
            since_cuda: "12.4",
            description: "the CUcontext of an isolated context's green context (streams, modules, memory, capture)",
        },
    ),
    (
        "cuGreenCtxStreamCreate",
        Known {
            name: "green context streams",
            since_cuda: "12.5",
            description: "an isolated green context's stream; without it (12.4) the stream is created with the green context current",
        },
    ),
];

/// Generic description of an optional entry point fc-graph has no text for.
pub const UNDESCRIBED: &str = "optional driver entry point (no description yet)";

/// What is known of optional entry point `entry_point`, if anything.
pub fn describe(entry_point: &str) -> Option<Known> {
    DESCRIPTIONS.iter().find(|(e, _)| *e == entry_point).map(|(_, k)| *k)
}

/// Every optional entry point of the table, with `present` computed from
/// the names of the ones the driver lacks.
pub fn features_given_missing(missing: &[&str]) -> Vec<Feature> {
    FUNCTIONS.iter().filter(|f| !f.required).map(|f| feature_of(f, !missing.contains(&f.name))).collect()
}

fn feature_of(f: &FunctionDecl, present: bool) -> Feature {
    let known = describe(f.name);
    Feature {
        entry_point: f.name,
        name: known.map_or(f.name, |k| k.name),
        description: known.map_or(UNDESCRIBED, |k| k.description),
        abi_version: f.abi_version,
        since_cuda: known.map_or_else(|| cuda_version_text(f.abi_version), |k| k.since_cuda.to_string()),
        present,
    }
}

/// The optional features of the loaded driver (loads it if needed).
pub fn features() -> Result<Vec<Feature>> {
    let missing: Vec<&str> = driver()?.missing_optional().iter().map(|f| f.name).collect();
    Ok(features_given_missing(&missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_optional_entry_point_is_listed_once() {
        let all = features_given_missing(&[]);
        let optional: Vec<&str> = FUNCTIONS.iter().filter(|f| !f.required).map(|f| f.name).collect();
        assert!(!optional.is_empty(), "the table has optional entry points");
        assert_eq!(all.iter().map(|f| f.entry_point).collect::<Vec<_>>(), optional);
        assert!(all.iter().all(|f| f.present));
        assert!(FUNCTIONS.iter().filter(|f| f.required).all(|r| all.iter().all(|f| f.entry_point != r.name)));
    }

    #[test]
    fn missing_ones_are_marked_absent() {
        let all = features_given_missing(&["cuGraphExecUpdate"]);
        let update = all.iter().find(|f| f.entry_point == "cuGraphExecUpdate").expect("listed");
        assert!(!update.present);
        assert_eq!(update.name, "in-place graph update");
        assert_eq!(update.since_cuda, "12.0");
        let info = all.iter().find(|f| f.entry_point == "cuFuncGetParamInfo").expect("listed");
        assert!(info.present);
        assert_eq!(info.since_cuda, "12.4");
    }

    #[test]
    fn descriptions_name_optional_entry_points_of_the_table() {
        for (entry, known) in DESCRIPTIONS {
            let decl = FUNCTIONS.iter().find(|f| f.name == *entry);
            assert!(matches!(decl, Some(d) if !d.required), "{entry} is not an optional entry point");
            let text = known.description;
            assert!(!text.contains('\n') && text.len() < 200, "one line: {text}");
            // The CUDA version that introduced it is never older than its ABI.
            let abi = decl.map_or(0, |d| d.abi_version);
            let (major, minor) = known.since_cuda.split_once('.').expect("major.minor");
            let since: i32 = major.parse::<i32>().expect("major") * 1000 + minor.parse::<i32>().expect("minor") * 10;
            assert!(since >= abi, "{entry}: since {} is older than its ABI {abi}", known.since_cuda);
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

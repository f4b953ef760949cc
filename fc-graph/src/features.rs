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
    /// The ABI version fc-graph resolves it at (e.g. 12000), which is also
    /// the oldest driver API version that has it.
    pub abi_version: i32,
    /// Whether the loaded driver has it.
    pub present: bool,
}

impl Feature {
    /// The oldest CUDA version whose driver has the entry point, e.g.
    /// "12.0" for ABI version 12000.
    pub fn since_cuda(&self) -> String {
        cuda_version_text(self.abi_version)
    }
}

/// "major.minor" of a CUDA API version number (13000 -> "13.0",
/// 12040 -> "12.4", 11040 -> "11.4").
pub fn cuda_version_text(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// Name and description of the optional entry points fc-graph knows about;
/// entry points not listed here are still reported, with their own name and
/// a generic description.
const DESCRIPTIONS: &[(&str, &str, &str)] = &[
    (
        "cuGraphExecUpdate",
        "in-place graph update",
        "Capture::end_update updates an instantiated graph in place (several times cheaper than \
         instantiating); without it the graph is instantiated anew",
    ),
    (
        "cuFuncGetParamInfo",
        "kernel parameter info",
        "kernel parameter sizes parsed from PTX are cross-checked with the driver's; without it the \
         PTX declarations alone are used",
    ),
];

/// Generic description of an optional entry point fc-graph has no text for.
pub const UNDESCRIBED: &str = "optional driver entry point (no description yet)";

/// The short name and description of optional entry point `entry_point`.
pub fn describe(entry_point: &str) -> (Option<&'static str>, &'static str) {
    match DESCRIPTIONS.iter().find(|(e, _, _)| *e == entry_point) {
        Some((_, name, description)) => (Some(name), description),
        None => (None, UNDESCRIBED),
    }
}

/// Every optional entry point of the table, with `present` computed from
/// the names of the ones the driver lacks.
pub fn features_given_missing(missing: &[&str]) -> Vec<Feature> {
    FUNCTIONS.iter().filter(|f| !f.required).map(|f| feature_of(f, !missing.contains(&f.name))).collect()
}

fn feature_of(f: &FunctionDecl, present: bool) -> Feature {
    let (name, description) = describe(f.name);
    Feature { entry_point: f.name, name: name.unwrap_or(f.name), description, abi_version: f.abi_version, present }
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
        assert_eq!(update.since_cuda(), "12.0");
        let info = all.iter().find(|f| f.entry_point == "cuFuncGetParamInfo").expect("listed");
        assert!(info.present);
        assert_eq!(info.since_cuda(), "12.4");
    }

    #[test]
    fn descriptions_name_optional_entry_points_of_the_table() {
        for (entry, _, text) in DESCRIPTIONS {
            let decl = FUNCTIONS.iter().find(|f| f.name == *entry);
            assert!(matches!(decl, Some(d) if !d.required), "{entry} is not an optional entry point");
            assert!(!text.contains('\n') && text.len() < 200, "one line: {text}");
        }
        assert_eq!(describe("cuSomethingNew"), (None, UNDESCRIBED));
    }

    #[test]
    fn version_text() {
        assert_eq!(cuda_version_text(13000), "13.0");
        assert_eq!(cuda_version_text(12040), "12.4");
        assert_eq!(cuda_version_text(11040), "11.4");
        assert_eq!(cuda_version_text(12090), "12.9");
    }
}

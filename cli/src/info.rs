//! `fcgraph info`: the library, the driver it loaded, each device, and
//! which optional driver features are present.

use cuda_sys::Driver;
use fc_graph::features::{cuda_version_text, features_of, Feature};
use fc_graph::isolation::{last_green_failure, Isolation};
use fc_graph::{Context, Device};
use serde_json::{json, Value};

use crate::format;
use crate::locate::{self, Located};
use crate::table::{Align, Table};

/// One device's facts; each is the value or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// The ordinal.
    pub index: usize,
    /// Marketing name.
    pub name: Result<String, String>,
    /// Compute capability (major, minor).
    pub compute: Result<(i32, i32), String>,
    /// Total memory in bytes.
    pub total: Result<usize, String>,
    /// Free memory in bytes (with our context open).
    pub free: Result<usize, String>,
    /// Whether fc-graph's built-in kernels launch with programmatic
    /// dependent launch here (device, driver and `FC_PDL` allowing).
    pub pdl: Result<bool, String>,
    /// `GPU-...` UUID.
    pub uuid: Result<String, String>,
    /// What `Context::isolated` (and `fc_cuda_init_device_isolated`) gives
    /// here: a green or a private context (`FC_ISOLATION` allowing), and,
    /// for a private one that fell back, why the green context failed.
    pub isolation: Result<(Isolation, Option<String>), String>,
    /// Which conditional nodes recordings can hold here (IF, WHILE, SWITCH)
    /// and how their setter kernels loaded, or why there are none.
    pub conditionals: Result<String, String>,
}

impl DeviceInfo {
    /// Reads device `index`'s facts; failures are kept per fact.
    pub fn read(index: usize) -> DeviceInfo {
        let err = |e: fc_graph::Error| e.to_string();
        match Device::get(index) {
            Err(e) => {
                let e = err(e);
                DeviceInfo {
                    index,
                    name: Err(e.clone()),
                    compute: Err(e.clone()),
                    total: Err(e.clone()),
                    free: Err(e.clone()),
                    pdl: Err(e.clone()),
                    isolation: Err(e.clone()),
                    conditionals: Err(e.clone()),
                    uuid: Err(e),
                }
            }
            Ok(d) => {
                let ctx = Context::new(index).map_err(err);
                DeviceInfo {
                    index,
                    name: d.name().map_err(err),
                    compute: d.compute_capability().map_err(err),
                    total: d.total_memory().map_err(err),
                    free: ctx.clone().and_then(|c| c.mem_info().map(|(free, _total)| free).map_err(err)),
                    pdl: ctx.as_ref().map(|c| c.pdl_enabled()).map_err(Clone::clone),
                    conditionals: ctx.as_ref().map_err(Clone::clone).and_then(read_conditionals),
                    isolation: read_isolation(index),
                    uuid: d.uuid().map_err(err),
                }
            }
        }
    }

    /// Every fact that could not be read.
    pub fn errors(&self) -> Vec<String> {
        [
            self.name.as_ref().err(),
            self.compute.as_ref().err(),
            self.total.as_ref().err(),
            self.free.as_ref().err(),
            self.pdl.as_ref().err(),
            self.isolation.as_ref().err(),
            self.conditionals.as_ref().err(),
            self.uuid.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
    }
}

/// Opens (and closes) an isolated context on device `index`: what it is
/// isolated by, and why a green context failed when it fell back.
fn read_isolation(index: usize) -> Result<(Isolation, Option<String>), String> {
    let ctx = Context::isolated(index).map_err(|e| e.to_string())?;
    let isolation = ctx.isolation();
    drop(ctx);
    let why = (isolation == Isolation::Private).then(last_green_failure).flatten();
    Ok((isolation, why))
}

/// Which conditional nodes the driver has, and whether the setter kernels
/// load on `ctx` (resolved by the driver or linked with the device runtime).
fn read_conditionals(ctx: &Context) -> Result<String, String> {
    use fc_graph::conditional_kernels::SetterSource;
    let s = fc_graph::conditional::support();
    if !s.if_while {
        return Ok("none (a CUDA 12.3+ driver has them)".to_string());
    }
    let kinds =
        if s.switch && s.if_else { "IF, IF/ELSE, WHILE, SWITCH" } else { "IF, WHILE (IF/ELSE, SWITCH: CUDA 12.8+)" };
    match ctx.conditional_setters() {
        Ok(SetterSource::Driver) => Ok(format!("{kinds}; setters resolved by the driver")),
        Ok(SetterSource::Linked(p)) => Ok(format!("{kinds}; setters linked with {}", p.display())),
        Err(e) => Err(format!("{kinds} in the driver, but the setter kernels do not load: {e}")),
    }
}

/// The text of an isolation cell.
fn isolation_text(&(isolation, ref why): &(Isolation, Option<String>)) -> String {
    match why {
        Some(why) => format!("{isolation} (green failed: {why})"),
        None => isolation.to_string(),
    }
}

/// Everything `fcgraph info` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// fc-graph's version.
    pub version: &'static str,
    /// The running binary.
    pub binary: Option<Located>,
    /// An installed `libfcgraph.so.0` next to it.
    pub library: Option<Located>,
    /// The driver library name as opened (`libcuda.so.1` or `FC_CUDA_LIBRARY`).
    pub driver_opened: String,
    /// The file it resolved to.
    pub driver_file: Option<Located>,
    /// The driver's CUDA API version (e.g. 13000).
    pub api_version: i32,
    /// The NVIDIA kernel module's version.
    pub kernel_module: Option<String>,
    /// `CUDA_VISIBLE_DEVICES`, when set.
    pub visible_devices: Option<String>,
    /// The devices, or why they could not be counted.
    pub devices: Result<Vec<DeviceInfo>, String>,
    /// The optional driver features.
    pub features: Vec<Feature>,
}

impl Info {
    /// Reads everything from the loaded driver.
    pub fn gather(d: &Driver) -> Info {
        let binary = locate::binary();
        Info {
            version: fc_graph::VERSION,
            library: binary.as_ref().and_then(|b| locate::installed_library(&b.path)),
            binary,
            driver_opened: d.library_path().to_string(),
            driver_file: locate::driver_library(d),
            api_version: d.driver_version(),
            kernel_module: locate::kernel_module_version(),
            visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            devices: Device::count().map(|n| (0..n).map(DeviceInfo::read).collect()).map_err(|e| e.to_string()),
            features: features_of(d),
        }
    }

    /// Whether anything could not be read.
    pub fn has_errors(&self) -> bool {
        match &self.devices {
            Ok(devs) => devs.iter().any(|d| !d.errors().is_empty()),
            Err(_) => true,
        }
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        out.push(format!("fc-graph {}", self.version));
        if let Some(b) = &self.binary {
            out.push(kv("fcgraph binary", &b.display()));
        }
        if let Some(l) = &self.library {
            out.push(kv("libfcgraph.so.0", &format!("{} (installed next to this binary)", l.display())));
        }
        out.push(String::new());
        out.push("CUDA driver".to_string());
        let file = match &self.driver_file {
            Some(f) if f.path.as_os_str() == self.driver_opened.as_str() => f.display(),
            Some(f) => format!("{} = {}", self.driver_opened, f.display()),
            None => self.driver_opened.clone(),
        };
        out.push(kv("library", &file));
        out.push(kv("CUDA API version", &format!("{} ({})", cuda_version_text(self.api_version), self.api_version)));
        if let Some(k) = &self.kernel_module {
            out.push(kv("kernel module", k));
        }
        if let Some(v) = &self.visible_devices {
            out.push(kv("CUDA_VISIBLE_DEVICES", v));
        }
        out.push(String::new());
        match &self.devices {
            Err(e) => out.push(format!("Devices: could not be counted: {e}")),
            Ok(devs) if devs.is_empty() => out.push("Devices: none visible".to_string()),
            Ok(devs) => {
                out.push(format!("Devices: {}", devs.len()));
                let mut t = Table::new(
                    &[
                        "#",
                        "name",
                        "compute capability",
                        "memory total",
                        "memory free",
                        "PDL",
                        "isolated",
                        "conditional nodes",
                        "UUID",
                    ],
                    &[Align::Right, Align::Left, Align::Left, Align::Right, Align::Right],
                );
                for dev in devs {
                    t.row([
                        dev.index.to_string(),
                        cell(&dev.name, Clone::clone),
                        cell(&dev.compute, |&(ma, mi)| format!("{ma}.{mi} (sm_{ma}{mi})")),
                        cell(&dev.total, |&b| format::bytes(b)),
                        cell(&dev.free, |&b| format::bytes(b)),
                        cell(&dev.pdl, |&on| if on { "yes" } else { "no" }.to_string()),
                        cell(&dev.isolation, isolation_text),
                        cell(&dev.conditionals, Clone::clone),
                        cell(&dev.uuid, Clone::clone),
                    ]);
                }
                out.push(t.render());
                out.push(
                    "(memory free: measured with a context open on the device, which itself takes some; PDL: whether \
                     fc-graph's built-in kernels launch with programmatic dependent launch there; isolated: what an \
                     isolated context is there, a green context or a private one, FC_ISOLATION allowing; conditional \
                     nodes: the kinds recordings can hold, and how the kernels that set their conditions loaded)"
                        .to_string(),
                );
            }
        }
        out.push(String::new());
        let present = self.features.iter().filter(|f| f.present).count();
        out.push(format!("Optional driver features: {present} of {} present", self.features.len()));
        let mut t =
            Table::new(&["feature", "entry point", "needs", "ABI here", "present", "what fc-graph does with it"], &[]);
        for f in &self.features {
            t.row([
                f.name.to_string(),
                f.entry_point.to_string(),
                format!("CUDA {} (ABI {})", f.since_cuda, f.needs_abi),
                f.resolved_abi.map_or_else(|| "-".to_string(), |a| a.to_string()),
                if f.present { "yes" } else { "no" }.to_string(),
                f.description.to_string(),
            ]);
        }
        out.push(t.render());
        out.join("\n")
    }

    /// The report as one JSON document: the library, the driver, the
    /// devices (or why they could not be counted), the features.
    pub fn json(&self) -> Value {
        let path = |l: &Option<Located>| l.as_ref().map(|l| l.path.display().to_string());
        let resolved =
            |l: &Option<Located>| l.as_ref().and_then(|l| l.resolved.as_ref()).map(|r| r.display().to_string());
        let devices: Vec<Value> = match &self.devices {
            Err(_) => Vec::new(),
            Ok(devs) => devs
                .iter()
                .map(|dev| {
                    json!({"index": dev.index, "name": dev.name.as_ref().ok(),
                           "compute_capability": dev.compute.as_ref().ok().map(|(a, b)| format!("{a}.{b}")),
                           "memory_total_bytes": dev.total.as_ref().ok(), "memory_free_bytes": dev.free.as_ref().ok(),
                           "pdl": dev.pdl.as_ref().ok(),
                           "isolation": dev.isolation.as_ref().ok().map(|(i, _)| i.as_str()),
                           "green_failure": dev.isolation.as_ref().ok().and_then(|(_, w)| w.clone()),
                           "conditional_nodes": dev.conditionals.as_ref().ok(),
                           "uuid": dev.uuid.as_ref().ok(), "errors": dev.errors()})
                })
                .collect(),
        };
        let features: Vec<Value> = self
            .features
            .iter()
            .map(|f| {
                json!({"name": f.name, "entry_point": f.entry_point, "since_cuda": f.since_cuda,
                       "needs_abi": f.needs_abi, "resolved_abi": f.resolved_abi,
                       "present": f.present, "description": f.description})
            })
            .collect();
        json!({
            "fcgraph": {"version": self.version, "binary": path(&self.binary),
                        "libfcgraph": path(&self.library), "libfcgraph_resolved": resolved(&self.library)},
            "driver": {"library": self.driver_opened, "file": path(&self.driver_file),
                       "file_resolved": resolved(&self.driver_file), "cuda_api_version": self.api_version,
                       "cuda_api": cuda_version_text(self.api_version), "kernel_module": self.kernel_module,
                       "cuda_visible_devices": self.visible_devices},
            "devices": devices,
            "devices_error": self.devices.as_ref().err(),
            "features": features,
        })
    }
}

fn kv(label: &str, value: &str) -> String {
    format!("  {label:<22}{value}")
}

fn cell<T>(r: &Result<T, String>, show: impl Fn(&T) -> String) -> String {
    match r {
        Ok(v) => show(v),
        Err(e) => format!("error: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn sample() -> Info {
        Info {
            version: "0.1.0",
            binary: Some(Located { path: PathBuf::from("/opt/fc/bin/fcgraph"), resolved: None }),
            library: Some(Located {
                path: PathBuf::from("/opt/fc/lib/libfcgraph.so.0"),
                resolved: Some(PathBuf::from("/opt/fc/lib/libfcgraph.so.0.1.0")),
            }),
            driver_opened: "libcuda.so.1".into(),
            driver_file: Some(Located {
                path: PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
                resolved: Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06")),
            }),
            api_version: 13000,
            kernel_module: Some("580.65.06".into()),
            visible_devices: None,
            devices: Ok(vec![
                DeviceInfo {
                    index: 0,
                    name: Ok("NVIDIA H200".into()),
                    compute: Ok((9, 0)),
                    total: Ok(150_109_880_320),
                    free: Ok(149_000_000_000),
                    pdl: Ok(true),
                    isolation: Ok((Isolation::Green, None)),
                    conditionals: Ok("IF, IF/ELSE, WHILE, SWITCH; setters resolved by the driver".into()),
                    uuid: Ok("GPU-01234567-89ab-cdef-0123-456789abcdef".into()),
                },
                DeviceInfo {
                    index: 1,
                    name: Ok("NVIDIA H200".into()),
                    compute: Ok((9, 0)),
                    total: Ok(150_109_880_320),
                    free: Err("cuMemGetInfo failed: CUDA_ERROR_UNKNOWN (999): unknown error".into()),
                    pdl: Ok(false),
                    isolation: Ok((
                        Isolation::Private,
                        Some("cuGreenCtxCreate failed: CUDA_ERROR_NOT_SUPPORTED".into()),
                    )),
                    conditionals: Ok("none (a CUDA 12.3+ driver has them)".into()),
                    uuid: Ok("GPU-11111111-89ab-cdef-0123-456789abcdef".into()),
                },
            ]),
            // Every optional entry at its newest ABI but cuFuncGetParamInfo.
            features: fc_graph::features::features_given_abis(
                &cuda_sys::functions::FUNCTIONS
                    .iter()
                    .filter(|f| !f.required && f.name != "cuFuncGetParamInfo")
                    .map(|f| (f.name, f.abi_version))
                    .collect::<Vec<_>>(),
            ),
        }
    }

    #[test]
    fn text_report_names_everything() {
        let text = sample().text();
        for want in [
            "fc-graph 0.1.0",
            "/opt/fc/bin/fcgraph",
            "/opt/fc/lib/libfcgraph.so.0 -> /opt/fc/lib/libfcgraph.so.0.1.0",
            "libcuda.so.1 = /usr/lib/x86_64-linux-gnu/libcuda.so.1 -> /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06",
            "13.0 (13000)",
            "580.65.06",
            "Devices: 2",
            "NVIDIA H200",
            "9.0 (sm_90)",
            "139.8 GiB",
            "GPU-01234567-89ab-cdef-0123-456789abcdef",
            "error: cuMemGetInfo failed",
            "in-place graph update",
            "cuGraphExecUpdate",
            "CUDA 10.2 (ABI 10020)",
            "CUDA 12.4 (ABI 12040)",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        let n = sample().features.len();
        assert!(text.contains(&format!("Optional driver features: {} of {n} present", n - 1)), "{text}");
        let dev0 = text.lines().find(|l| l.contains("GPU-01234567")).expect("device 0 row");
        assert!(dev0.contains("| yes |"), "PDL column: {dev0}");
        assert!(dev0.contains("| green "), "isolated column: {dev0}");
        let dev1 = text.lines().find(|l| l.contains("GPU-11111111")).expect("device 1 row");
        assert!(dev1.contains("private (green failed: cuGreenCtxCreate failed"), "isolated column: {dev1}");
        let param_row = text.lines().find(|l| l.contains("cuFuncGetParamInfo")).expect("row");
        assert!(param_row.contains("| no "), "{param_row}");
        assert!(!text.contains("CUDA_VISIBLE_DEVICES"), "only shown when set");
    }

    /// A CUDA 11.4 driver (470): in-place update through the 10020 ABI is
    /// reported present, edges through the 10000 ABI (no edge data) absent.
    #[test]
    fn older_abis_are_reported_with_what_they_deliver() {
        let mut info = sample();
        info.api_version = 11040;
        info.features = fc_graph::features::features_given_abis(&[
            ("cuGraphExecUpdate", 10020),
            ("cuGraphGetEdges", 10000),
            ("cuGraphDebugDotPrint", 11030),
        ]);
        let text = info.text();
        let row = |entry: &str| text.lines().find(|l| l.contains(entry)).map(str::to_string).unwrap_or_default();
        let update = row("cuGraphExecUpdate");
        assert!(update.contains("| 10020 ") && update.contains("| yes "), "{text}");
        let edges = row("cuGraphGetEdges");
        assert!(
            edges.contains("CUDA 12.3 (ABI 12030)") && edges.contains("| 10000 ") && edges.contains("| no "),
            "{text}"
        );
        let launch = row("cuLaunchKernelEx");
        assert!(launch.contains("| - ") && launch.contains("| no "), "{text}");
        let doc = info.json();
        let objs = doc["features"].as_array().expect("features");
        let feature = |e: &str| objs.iter().find(|o| o["entry_point"] == e).expect("feature");
        assert_eq!(feature("cuGraphExecUpdate")["resolved_abi"], 10020);
        assert_eq!(feature("cuGraphExecUpdate")["present"], true);
        assert_eq!(feature("cuGraphGetEdges")["resolved_abi"], 10000);
        assert_eq!(feature("cuGraphGetEdges")["present"], false);
        assert!(feature("cuLaunchKernelEx")["resolved_abi"].is_null());
    }

    #[test]
    fn errors_are_reported_per_device() {
        let info = sample();
        assert!(info.has_errors());
        let Ok(devs) = &info.devices else { panic!("devices") };
        assert!(devs[0].errors().is_empty());
        assert_eq!(devs[1].errors().len(), 1);
    }

    #[test]
    fn json_is_one_document_carrying_the_facts() {
        let text = sample().json().to_string();
        let doc: Value = serde_json::from_str(&text).expect("valid JSON");
        assert!(!text.contains('\n'));
        assert_eq!(doc["fcgraph"]["version"], "0.1.0");
        assert_eq!(doc["driver"]["cuda_api_version"], 13000);
        let devices = doc["devices"].as_array().expect("devices");
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0]["compute_capability"], "9.0");
        assert_eq!(devices[0]["isolation"], "green");
        assert!(devices[0]["green_failure"].is_null());
        assert_eq!(devices[1]["isolation"], "private");
        assert!(devices[1]["green_failure"].as_str().is_some_and(|w| w.contains("NOT_SUPPORTED")));
        assert!(devices[1]["memory_free_bytes"].is_null());
        assert_eq!(devices[1]["errors"].as_array().map(Vec::len), Some(1));
        assert!(doc["devices_error"].is_null());
        assert_eq!(doc["features"].as_array().map(Vec::len), Some(sample().features.len()));
    }
}

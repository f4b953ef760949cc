//! What the double simulates: the driver's version, how many devices, their
//! compute capability and memory, and the faults it is told to inject.
//!
//! Read once from the environment at the first call into a loaded copy of
//! the double, unless a test set them first through `fc_double_configure`
//! (each loaded copy of the library has its own state):
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `FC_DOUBLE_DRIVER_VERSION` | `cuDriverGetVersion`'s answer, and the ABI rules `cuGetProcAddress` follows | 13000 (the cuda12 build), 11040 (the cuda11 build) |
//! | `FC_DOUBLE_DEVICES` | simulated devices | 2 |
//! | `FC_DOUBLE_CC` | compute capability, as `90` or `9.0` | 9.0 from 12000 on, 3.7 (a K80) before |
//! | `FC_DOUBLE_MEMORY_MB` | memory of each device (host memory stands in) | 4096 |
//! | `FC_DOUBLE_FAULTS` | faults to inject, comma-separated (see [`Faults`]) | none |
//! | `FC_DOUBLE_LATENCY_US` | microseconds each call takes before it runs (outside the lock, so other threads move meanwhile): a real driver's call costs, which give other threads' calls room to land inside a capture | 0 |
//! | `FC_DOUBLE_TRACE` | `1`: print every call that does not succeed (the call, its status, the thread) | off |
//! | `FC_DOUBLE_MISUSE` | `exit` (a process that misused the driver exits with status 86), `warn` (report only) | `exit` |

use std::collections::HashMap;

/// The simulated driver and devices.
#[derive(Debug, Clone)]
pub struct Config {
    /// The driver's API version (`cuDriverGetVersion`).
    pub version: i32,
    /// Number of devices.
    pub devices: usize,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    /// Bytes of memory per device.
    pub memory: usize,
    /// Faults to inject.
    pub faults: Faults,
    /// Whether a process that misused the driver exits with status 86.
    pub exit_on_misuse: bool,
    /// Whether every call that does not succeed is printed.
    pub trace: bool,
    /// What each call waits before it runs.
    pub latency: std::time::Duration,
}

/// Faults the double injects on request (`FC_DOUBLE_FAULTS`).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// `capture-global`: every stream capture is taken as GLOBAL, whatever
    /// mode was asked, and against another thread's capture every thread
    /// is held to GLOBAL, whatever mode it set: the engine's old code,
    /// which captured in GLOBAL mode while other threads' calls came
    /// unshielded.
    pub capture_global: bool,
    /// `fail=SYMBOL[:CODE][@N|%N]`: the call of SYMBOL fails with CODE
    /// (default 999, `CUDA_ERROR_UNKNOWN`): `@N` the Nth call once, `%N`
    /// every Nth call, neither every call.
    pub fail: HashMap<String, Fail>,
}

/// One symbol's injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fail {
    /// The status returned.
    pub code: u32,
    /// Which calls fail.
    pub when: FailWhen,
}

/// Which calls of a symbol fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailWhen {
    /// Every call.
    Always,
    /// The Nth call (1-based), once.
    Nth(u64),
    /// Every Nth call.
    Every(u64),
}

impl Fail {
    /// Whether call number `n` (1-based) fails.
    pub fn fails(&self, n: u64) -> bool {
        match self.when {
            FailWhen::Always => true,
            FailWhen::Nth(k) => n == k,
            FailWhen::Every(k) => k != 0 && n % k == 0,
        }
    }
}

/// A fault specification that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSpec(pub String);

impl Faults {
    /// Parses a comma-separated list of faults.
    pub fn parse(spec: &str) -> Result<Faults, BadSpec> {
        let mut f = Faults::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "capture-global" {
                f.capture_global = true;
            } else if let Some(rest) = item.strip_prefix("fail=") {
                let (symbol, fail) = parse_fail(rest).ok_or_else(|| BadSpec(format!("bad fault {item:?}")))?;
                f.fail.insert(symbol, fail);
            } else {
                return Err(BadSpec(format!("unknown fault {item:?} (capture-global, fail=SYMBOL[:CODE][@N|%N])")));
            }
        }
        Ok(f)
    }
}

fn parse_fail(rest: &str) -> Option<(String, Fail)> {
    let (head, when) = if let Some((h, n)) = rest.split_once('@') {
        (h, FailWhen::Nth(n.parse().ok()?))
    } else if let Some((h, n)) = rest.split_once('%') {
        (h, FailWhen::Every(n.parse().ok()?))
    } else {
        (rest, FailWhen::Always)
    };
    let (symbol, code) = match head.split_once(':') {
        Some((s, c)) => (s, c.parse().ok()?),
        None => (head, 999),
    };
    if symbol.is_empty() || !symbol.starts_with("cu") {
        return None;
    }
    Some((symbol.to_string(), Fail { code, when }))
}

/// Parses `90`, `9.0` or `3.7`.
fn parse_cc(v: &str) -> Option<(i32, i32)> {
    let v = v.trim();
    if let Some((a, b)) = v.split_once('.') {
        return Some((a.parse().ok()?, b.parse().ok()?));
    }
    let n: i32 = v.parse().ok()?;
    (n >= 10).then_some((n / 10, n % 10))
}

/// The compute capability a driver of `version` stands for by default: a
/// Hopper GPU on CUDA 12 and 13, the engine's K80 (3.7) on CUDA 11.
pub fn default_cc(version: i32) -> (i32, i32) {
    if version >= 12000 {
        (9, 0)
    } else {
        (3, 7)
    }
}

impl Config {
    /// The configuration from the environment, with `default_version`
    /// where `FC_DOUBLE_DRIVER_VERSION` is unset. A value that does not
    /// parse is reported (and the default used), never ignored silently.
    pub fn from_env(default_version: i32, complain: &mut dyn FnMut(String)) -> Config {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let num = |name: &str, default: i64, complain: &mut dyn FnMut(String)| match var(name) {
            None => default,
            Some(v) => v.trim().parse::<i64>().unwrap_or_else(|_| {
                complain(format!("{name}={v:?} is not a number; using {default}"));
                default
            }),
        };
        let version = num("FC_DOUBLE_DRIVER_VERSION", default_version.into(), complain) as i32;
        let devices = num("FC_DOUBLE_DEVICES", 2, complain).clamp(0, 64) as usize;
        let memory = (num("FC_DOUBLE_MEMORY_MB", 4096, complain).max(1) as usize) << 20;
        let cc = match var("FC_DOUBLE_CC") {
            None => default_cc(version),
            Some(v) => parse_cc(&v).unwrap_or_else(|| {
                complain(format!("FC_DOUBLE_CC={v:?} is not a compute capability (90, 9.0)"));
                default_cc(version)
            }),
        };
        let faults = match var("FC_DOUBLE_FAULTS") {
            None => Faults::default(),
            Some(v) => Faults::parse(&v).unwrap_or_else(|e| {
                complain(format!("FC_DOUBLE_FAULTS: {}", e.0));
                Faults::default()
            }),
        };
        let exit_on_misuse = var("FC_DOUBLE_MISUSE").is_none_or(|v| v.trim() != "warn");
        let trace = var("FC_DOUBLE_TRACE").is_some_and(|v| v.trim() == "1");
        let latency =
            std::time::Duration::from_micros(num("FC_DOUBLE_LATENCY_US", 0, complain).clamp(0, 1_000_000) as u64);
        Config { version, devices, cc, memory, faults, exit_on_misuse, trace, latency }
    }

    /// The newest PTX ISA version (as `major * 10 + minor`) a driver of
    /// this version JIT-compiles: 7.x for CUDA 11.x, 8.x for 12.x (8.5 at
    /// most up to 12.6, then 8.7 to 8.8), 9.x for 13.x.
    pub fn max_ptx_isa(&self) -> i32 {
        let (major, minor) = (self.version / 1000, (self.version % 1000) / 10);
        match major {
            11 => 70 + minor.min(8),
            12 => match minor {
                0..=5 => 80 + minor,
                6 => 85,
                7 => 86,
                8 => 87,
                _ => 88,
            },
            m if m >= 13 => 90 + minor.min(9),
            _ => 60,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse() {
        let f = Faults::parse("capture-global, fail=cuMemAlloc:2@3,fail=cuGraphLaunch%4").expect("parses");
        assert!(f.capture_global);
        assert_eq!(f.fail["cuMemAlloc"], Fail { code: 2, when: FailWhen::Nth(3) });
        assert_eq!(f.fail["cuGraphLaunch"], Fail { code: 999, when: FailWhen::Every(4) });
        assert!(f.fail["cuMemAlloc"].fails(3) && !f.fail["cuMemAlloc"].fails(4));
        assert!(f.fail["cuGraphLaunch"].fails(8) && !f.fail["cuGraphLaunch"].fails(9));
        assert!(Faults::parse("nonsense").is_err());
        assert!(Faults::parse("fail=:3").is_err());
        assert!(Faults::parse("fail=cuX@y").is_err());
    }

    #[test]
    fn ptx_isa_by_driver() {
        let at = |version| Config {
            version,
            devices: 1,
            cc: (9, 0),
            memory: 1,
            faults: Faults::default(),
            exit_on_misuse: true,
            trace: false,
            latency: std::time::Duration::ZERO,
        };
        assert_eq!(at(11040).max_ptx_isa(), 74);
        assert_eq!(at(12000).max_ptx_isa(), 80);
        assert_eq!(at(12030).max_ptx_isa(), 83);
        assert_eq!(at(13000).max_ptx_isa(), 90);
        assert_eq!(parse_cc("9.0"), Some((9, 0)));
        assert_eq!(parse_cc("37"), Some((3, 7)));
        assert_eq!(parse_cc("x"), None);
    }
}

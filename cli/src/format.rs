//! Small formatting helpers for the tool's output.

use std::time::Duration;

/// Bytes as GiB with one decimal ("139.8 GiB"); MiB below 1 GiB.
pub fn bytes(n: usize) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    let n = n as f64;
    if n >= GIB {
        format!("{:.1} GiB", n / GIB)
    } else {
        format!("{:.1} MiB", n / MIB)
    }
}

/// A duration for humans: "0.8 ms", "35 ms", "1.24 s".
pub fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

/// The NVIDIA kernel module's version from the text of
/// `/proc/driver/nvidia/version` ("... Kernel Module  580.65.06  ..." or
/// "... Open Kernel Module for x86_64  580.65.06 ...").
pub fn kernel_module_version(proc_text: &str) -> Option<String> {
    let line = proc_text.lines().find(|l| l.contains("Kernel Module"))?;
    let after = &line[line.find("Kernel Module")? + "Kernel Module".len()..];
    after
        .split_whitespace()
        .find(|tok| tok.contains('.') && tok.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(150_109_880_320), "139.8 GiB");
        assert_eq!(bytes(1 << 30), "1.0 GiB");
        assert_eq!(bytes(512 << 20), "512.0 MiB");
        assert_eq!(bytes(0), "0.0 MiB");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(Duration::from_micros(800)), "0.8 ms");
        assert_eq!(duration(Duration::from_millis(35)), "35 ms");
        assert_eq!(duration(Duration::from_millis(1240)), "1.24 s");
    }

    #[test]
    fn kernel_module_versions() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n\
                           GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(kernel_module_version(proprietary).as_deref(), Some("535.104.05"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 07:09:04 UTC 2025\n";
        assert_eq!(kernel_module_version(open).as_deref(), Some("580.65.06"));
        assert_eq!(kernel_module_version("garbage"), None);
        assert_eq!(kernel_module_version("NVRM version: Kernel Module  unknown"), None);
    }
}

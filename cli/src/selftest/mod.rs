//! `fcgraph selftest`: the checks a user needs before trusting the library,
//! on every device (or one), each on its own thread with a deadline, timed,
//! reported as a table (or one JSON document).

pub mod breakable;
pub mod common;
pub mod concurrency;
pub mod pool;
pub mod raw;
pub mod replay;
pub mod shield;

use std::any::Any;
use std::panic;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fc_graph::{Context, Device};
use serde_json::{json, Value};

use self::common::{Failure, Outcome};
use crate::format;
use crate::table::{Align, Table};

/// The device a check runs on, and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The device under test.
    pub device: usize,
    /// Devices visible.
    pub device_count: usize,
}

impl Target {
    /// The device a second thread uses alongside this one: the next device,
    /// or this one (with a second context) when it is the only one.
    pub fn peer_device(&self) -> usize {
        if self.device_count >= 2 {
            (self.device + 1) % self.device_count
        } else {
            self.device
        }
    }
}

/// One check.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// Stable identifier (JSON).
    pub id: &'static str,
    /// What the table shows.
    pub title: &'static str,
    /// The check.
    pub run: fn(&Target) -> Outcome,
}

/// Every check, in the order they run.
pub const CHECKS: [Check; 5] = [
    Check { id: "capture_replay_equals_eager", title: "capture + replay == eager", run: replay::run },
    Check { id: "seed_concurrency", title: "two-thread concurrency (seed test)", run: concurrency::run },
    Check { id: "foreign_global_capture_shield", title: "foreign GLOBAL capture shield", run: shield::run },
    Check { id: "breakable_replay", title: "breakable replay", run: breakable::run },
    Check { id: "pool_reuse", title: "capture pool reuse", run: pool::run },
];

/// How long one check may take before the self-test gives up.
pub const CHECK_DEADLINE: Duration = Duration::from_secs(60);

/// A finished (or abandoned) check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRow {
    /// The device.
    pub device: usize,
    /// [`Check::id`] (or `open_context` for the device's first step).
    pub id: &'static str,
    /// [`Check::title`].
    pub title: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// How long it took.
    pub time: Duration,
    /// What it showed, or why it failed.
    pub detail: String,
}

impl CheckRow {
    /// The row as a JSON object.
    pub fn json(&self) -> Value {
        json!({"device": self.device, "check": self.id, "title": self.title,
               "result": if self.passed { "pass" } else { "fail" },
               "ms": (self.time.as_secs_f64() * 1e6).round() / 1e3, "detail": self.detail})
    }
}

/// What the self-test found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The devices tested, with their names.
    pub devices: Vec<(usize, String)>,
    /// Every check's row, in order.
    pub rows: Vec<CheckRow>,
    /// A check passed its deadline: the run stopped there (the check's
    /// thread may still hold the driver, so the process must exit at once).
    pub abandoned: bool,
    /// Wall time of the whole run.
    pub time: Duration,
}

impl Report {
    /// Checks that failed.
    pub fn failed(&self) -> usize {
        self.rows.iter().filter(|r| !r.passed).count()
    }

    /// Whether everything passed.
    pub fn passed(&self) -> bool {
        self.failed() == 0 && !self.abandoned && !self.rows.is_empty()
    }

    /// The table and a verdict line.
    pub fn text(&self) -> String {
        let mut t = Table::new(
            &["device", "check", "result", "time", "detail"],
            &[Align::Right, Align::Left, Align::Left, Align::Right],
        );
        for r in &self.rows {
            t.row([
                r.device.to_string(),
                r.title.to_string(),
                if r.passed { "PASS" } else { "FAIL" }.to_string(),
                format::duration(r.time),
                r.detail.clone(),
            ]);
        }
        let mut out = vec![t.render(), String::new()];
        let n = self.devices.len();
        let devices = format!("{n} device{}", if n == 1 { "" } else { "s" });
        if self.abandoned {
            out.push(format!(
                "selftest ABANDONED: a check did not finish within {} s; later checks did not run",
                CHECK_DEADLINE.as_secs()
            ));
        }
        if self.passed() {
            out.push(format!(
                "selftest passed: {} checks on {devices} ({})",
                self.rows.len(),
                format::duration(self.time)
            ));
        } else {
            out.push(format!(
                "selftest FAILED: {} of {} checks failed on {devices} ({})",
                self.failed(),
                self.rows.len(),
                format::duration(self.time)
            ));
        }
        out.join("\n")
    }

    /// The verdict as a JSON object.
    pub fn summary_json(&self) -> Value {
        json!({"passed": self.passed(), "checks": self.rows.len(), "failed": self.failed(),
               "abandoned": self.abandoned, "devices": self.devices.iter().map(|(i, _)| i).collect::<Vec<_>>(),
               "seconds": (self.time.as_secs_f64() * 1e3).round() / 1e3})
    }

    /// The whole report as one JSON document: every check's row and the verdict.
    pub fn json(&self) -> Value {
        json!({"checks": self.rows.iter().map(CheckRow::json).collect::<Vec<_>>(), "summary": self.summary_json()})
    }
}

/// How a check on its own thread ended.
enum Ended {
    Finished(Outcome, Duration),
    Overdue,
}

/// The message a panic carried.
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Runs `check` on a thread of its own: a panic becomes a failure, and a
/// check still running after `deadline` is abandoned.
fn run_isolated(check: &Check, target: Target, deadline: Duration) -> Ended {
    let (tx, rx) = mpsc::channel();
    let run = check.run;
    let started = Instant::now();
    let spawned = thread::Builder::new().name(format!("selftest-{}", check.id)).spawn(move || {
        let outcome = panic::catch_unwind(move || run(&target))
            .unwrap_or_else(|p| Err(Failure(format!("panicked: {}", panic_message(p.as_ref())))));
        let _ = tx.send(outcome);
    });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => return Ended::Finished(Err(Failure(format!("could not start a thread: {e}"))), started.elapsed()),
    };
    match rx.recv_timeout(deadline) {
        Ok(outcome) => {
            let time = started.elapsed();
            let _ = handle.join();
            Ended::Finished(outcome, time)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Ended::Overdue,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Ended::Finished(Err(Failure("the check's thread ended without a result".into())), started.elapsed())
        }
    }
}

/// Runs every check on `devices` (ordinals, all below `device_count`).
/// `on_row` sees each row as soon as it is known (progress on a terminal).
pub fn run(devices: &[usize], device_count: usize, mut on_row: impl FnMut(&CheckRow)) -> Report {
    let started = Instant::now();
    let mut report = Report { devices: Vec::new(), rows: Vec::new(), abandoned: false, time: Duration::ZERO };
    // Contexts held for the whole run: they keep each device's primary
    // context (and the driver's caches) alive from one check to the next.
    let mut keepalive: Vec<Context> = Vec::new();
    'devices: for &device in devices {
        let name = Device::get(device).and_then(|d| d.name()).unwrap_or_else(|e| format!("(name unreadable: {e})"));
        report.devices.push((device, name));
        let opened = Instant::now();
        match Context::new(device) {
            Ok(c) => keepalive.push(c),
            Err(e) => {
                let row = CheckRow {
                    device,
                    id: "open_context",
                    title: "open a context",
                    passed: false,
                    time: opened.elapsed(),
                    detail: e.to_string(),
                };
                on_row(&row);
                report.rows.push(row);
                continue;
            }
        }
        let target = Target { device, device_count };
        for check in &CHECKS {
            let row = match run_isolated(check, target, CHECK_DEADLINE) {
                Ended::Finished(outcome, time) => {
                    let (passed, detail) = match outcome {
                        Ok(detail) => (true, detail),
                        Err(Failure(why)) => (false, why),
                    };
                    CheckRow { device, id: check.id, title: check.title, passed, time, detail }
                }
                Ended::Overdue => {
                    report.abandoned = true;
                    CheckRow {
                        device,
                        id: check.id,
                        title: check.title,
                        passed: false,
                        time: CHECK_DEADLINE,
                        detail: format!("did not finish within {} s (stuck in the driver?)", CHECK_DEADLINE.as_secs()),
                    }
                }
            };
            on_row(&row);
            report.rows.push(row);
            if report.abandoned {
                // The check's thread may still hold the driver: releasing
                // contexts or going on could block behind it.
                std::mem::forget(std::mem::take(&mut keepalive));
                break 'devices;
            }
        }
    }
    report.time = started.elapsed();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_is_the_next_device_or_the_same_one() {
        assert_eq!(Target { device: 0, device_count: 1 }.peer_device(), 0);
        assert_eq!(Target { device: 0, device_count: 2 }.peer_device(), 1);
        assert_eq!(Target { device: 1, device_count: 2 }.peer_device(), 0);
        assert_eq!(Target { device: 2, device_count: 8 }.peer_device(), 3);
    }

    fn pass(_: &Target) -> Outcome {
        Ok("fine".into())
    }
    fn boom(_: &Target) -> Outcome {
        panic!("kaboom")
    }
    fn slow(_: &Target) -> Outcome {
        thread::sleep(Duration::from_millis(500));
        Ok("late".into())
    }

    #[test]
    fn isolated_checks_report_panics_and_deadlines() {
        let t = Target { device: 0, device_count: 1 };
        let check = |run| Check { id: "t", title: "t", run };
        assert!(
            matches!(run_isolated(&check(pass), t, Duration::from_secs(5)), Ended::Finished(Ok(d), _) if d == "fine")
        );
        match run_isolated(&check(boom), t, Duration::from_secs(5)) {
            Ended::Finished(Err(Failure(why)), _) => assert_eq!(why, "panicked: kaboom"),
            _ => panic!("a panic must become a failure"),
        }
        assert!(matches!(run_isolated(&check(slow), t, Duration::from_millis(20)), Ended::Overdue));
    }

    fn row(device: usize, passed: bool) -> CheckRow {
        CheckRow {
            device,
            id: "x",
            title: "capture + replay == eager",
            passed,
            time: Duration::from_millis(12),
            detail: if passed { "ok" } else { "replay vs CPU: 1 of 4096 values differ" }.into(),
        }
    }

    #[test]
    fn report_verdicts() {
        let mut r = Report {
            devices: vec![(0, "NVIDIA H200".into())],
            rows: vec![row(0, true), row(0, true)],
            abandoned: false,
            time: Duration::from_millis(1500),
        };
        assert!(r.passed());
        let text = r.text();
        assert!(text.contains("| PASS ") && text.ends_with("selftest passed: 2 checks on 1 device (1.50 s)"), "{text}");
        r.rows.push(row(0, false));
        assert!(!r.passed());
        let text = r.text();
        assert!(text.contains("| FAIL ") && text.contains("1 of 4096 values differ"), "{text}");
        assert!(text.ends_with("selftest FAILED: 1 of 3 checks failed on 1 device (1.50 s)"), "{text}");
        let doc: Value = serde_json::from_str(&r.json().to_string()).expect("json");
        assert_eq!(doc["summary"]["passed"], false);
        assert_eq!(doc["summary"]["failed"], 1);
        assert_eq!(doc["checks"].as_array().map(Vec::len), Some(3));
        let row_json = &doc["checks"][2];
        assert_eq!(row_json["result"], "fail");
        assert_eq!(row_json["ms"], 12.0);
    }

    #[test]
    fn an_empty_or_abandoned_run_does_not_pass() {
        let mut r = Report { devices: vec![], rows: vec![], abandoned: false, time: Duration::ZERO };
        assert!(!r.passed(), "no checks ran");
        r.rows.push(row(0, true));
        r.abandoned = true;
        assert!(!r.passed());
        assert!(r.text().contains("selftest ABANDONED"));
    }

    #[test]
    fn check_ids_are_unique() {
        for (i, a) in CHECKS.iter().enumerate() {
            assert!(CHECKS[i + 1..].iter().all(|b| b.id != a.id && b.title != a.title));
        }
    }
}

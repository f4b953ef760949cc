//! Misuse reports: a call the real driver would answer with undefined
//! behaviour, or that no correct client makes (an ABI the loader must never
//! resolve, a destroyed handle, a handle of another context, memory of
//! another device, a kernel the double has no model of).
//!
//! Each report is printed at once on standard error (`fc-driver-double:
//! MISUSE in cuX: ...`) and kept. When the process exits with reports that
//! no test took back (`fc_double_take_misuses`), the double prints them
//! again and ends the process with status [`EXIT_STATUS`], so that the test
//! that misused it fails even if it checked nothing (`FC_DOUBLE_MISUSE=warn`
//! keeps the exit status).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The exit status of a process that misused the double.
pub const EXIT_STATUS: i32 = 86;

/// The reports not yet taken back.
static REPORTS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Whether the exit hook is registered.
static HOOKED: AtomicBool = AtomicBool::new(false);
/// Whether the exit hook ends the process.
static EXIT: AtomicBool = AtomicBool::new(true);

fn reports() -> std::sync::MutexGuard<'static, Vec<String>> {
    REPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records and prints a misuse in `call`.
pub fn misuse(call: &str, what: &str) {
    let line = format!("MISUSE in {call}: {what}");
    eprintln!("fc-driver-double: {line}");
    let mut r = reports();
    if r.len() < 10_000 {
        r.push(line);
    }
}

/// How many reports are kept.
pub fn count() -> usize {
    reports().len()
}

/// Report `i`, if there is one.
pub fn get(i: usize) -> Option<String> {
    reports().get(i).cloned()
}

/// Takes every report back (a test that provoked them on purpose).
pub fn take() -> Vec<String> {
    std::mem::take(&mut *reports())
}

extern "C" fn at_exit() {
    let r = reports();
    if r.is_empty() {
        return;
    }
    eprintln!("fc-driver-double: {} misuse report(s) not taken back:", r.len());
    for line in r.iter().take(50) {
        eprintln!("fc-driver-double:   {line}");
    }
    if EXIT.load(Ordering::Relaxed) {
        eprintln!("fc-driver-double: exiting with status {EXIT_STATUS} (FC_DOUBLE_MISUSE=warn keeps the status)");
        // SAFETY: flushes every C stdio stream (the test's own output),
        // then ends the process at once, as _exit(2) does.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(EXIT_STATUS);
        }
    }
}

/// Registers the exit hook once; `exit` sets whether it ends the process.
pub fn hook(exit: bool) {
    EXIT.store(exit, Ordering::Relaxed);
    if !HOOKED.swap(true, Ordering::AcqRel) {
        // SAFETY: registers a plain function with no captured state.
        unsafe { libc::atexit(at_exit) };
    }
}

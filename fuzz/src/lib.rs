//! What the fuzz targets share: the driver double as the process's CUDA
//! driver (loaded once, checked after every input for misuse reports and
//! leaked driver objects), a reader that turns fuzz bytes into values, and
//! the checks every C ABI status goes through.
//!
//! The double is `libfc_cuda_double.so` (or `_11.so` for CUDA 11.x), found
//! through `FC_CUDA_LIBRARY`, else in the project's `target/release`
//! (scripts/fuzz.sh builds it there). Its settings come from the
//! environment as in every other test (`FC_DOUBLE_DRIVER_VERSION`,
//! `FC_DOUBLE_DEVICES`, default here 2 devices of 8 MiB each).

use std::ffi::{c_char, c_int, CStr, CString};
use std::os::raw::c_void;
use std::sync::OnceLock;

use fcgraph::header::FC_ERR_INTERNAL;

/// The double's control exports this harness reads.
pub struct Double {
    misuses: unsafe extern "C" fn() -> c_int,
    misuse: unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int,
    live: unsafe extern "C" fn(*const c_char) -> i64,
    set_faults: unsafe extern "C" fn(*const c_char) -> c_int,
    _lib: libloading::Library,
}

// SAFETY: the double's control exports may be called from any thread.
unsafe impl Sync for Double {}
// SAFETY: as above; the library handle is only kept open.
unsafe impl Send for Double {}

/// The driver objects whose counts must come back to where an input found
/// them (`fc_double_live`'s kinds).
pub const DRIVER_OBJECTS: [&str; 9] =
    ["contexts", "streams", "events", "modules", "graphs", "execs", "allocations", "links", "primary_retains"];

impl Double {
    /// Misuse reports the double holds.
    pub fn misuses(&self) -> Vec<String> {
        // SAFETY: a plain query of the double.
        let n = unsafe { (self.misuses)() };
        (0..n)
            .map(|i| {
                let mut buf = vec![0u8; 1024];
                // SAFETY: `buf` holds `buf.len()` bytes.
                let len = unsafe { (self.misuse)(i, buf.as_mut_ptr().cast(), buf.len()) };
                let len = usize::try_from(len).unwrap_or(0).min(buf.len());
                String::from_utf8_lossy(&buf[..len]).trim_end_matches('\0').to_string()
            })
            .collect()
    }

    /// Live driver objects of each kind in [`DRIVER_OBJECTS`].
    pub fn live(&self) -> Vec<(&'static str, i64)> {
        DRIVER_OBJECTS
            .iter()
            .map(|k| {
                let name = CString::new(*k).expect("no NUL in a kind");
                // SAFETY: `name` is NUL-terminated.
                (*k, unsafe { (self.live)(name.as_ptr()) })
            })
            .collect()
    }

    /// Replaces the injected faults (the `FC_DOUBLE_FAULTS` syntax; "" for none).
    pub fn set_faults(&self, spec: &str) {
        let spec = CString::new(spec).expect("no NUL in a fault spec");
        // SAFETY: `spec` is NUL-terminated.
        let rc = unsafe { (self.set_faults)(spec.as_ptr()) };
        assert_eq!(rc, 0, "the double refused the fault spec {spec:?}");
    }

    /// Panics (a crash to the fuzzer) when the double reported a misuse.
    pub fn assert_no_misuse(&self) {
        let m = self.misuses();
        assert!(m.is_empty(), "the driver double reported misuse:\n{}", m.join("\n"));
    }
}

/// The double, loaded once, and made the library's driver.
pub fn double() -> &'static Double {
    static D: OnceLock<Double> = OnceLock::new();
    D.get_or_init(|| {
        let path = std::env::var("FC_CUDA_LIBRARY").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/libfc_cuda_double.so").to_string()
        });
        // SAFETY: set before any other thread exists (libFuzzer calls the
        // target on its one thread) and before the library reads them.
        unsafe {
            std::env::set_var("FC_CUDA_LIBRARY", &path);
            if std::env::var_os("FC_DOUBLE_DEVICES").is_none() {
                std::env::set_var("FC_DOUBLE_DEVICES", "2");
            }
            if std::env::var_os("FC_DOUBLE_MEMORY_MB").is_none() {
                // Small devices: out of memory is reached, and no kernel
                // runs over more than 2 Mi floats on the host.
                std::env::set_var("FC_DOUBLE_MEMORY_MB", "8");
            }
        }
        // SAFETY: the double's initialisers only register an exit hook.
        let lib = unsafe { libloading::Library::new(&path) }
            .unwrap_or_else(|e| panic!("cannot load the driver double {path}: {e} (scripts/fuzz.sh builds it)"));
        // SAFETY: each symbol has the signature the double exports it with.
        unsafe {
            Double {
                misuses: *lib.get(b"fc_double_misuses\0").expect("fc_double_misuses"),
                misuse: *lib.get(b"fc_double_misuse\0").expect("fc_double_misuse"),
                live: *lib.get(b"fc_double_live\0").expect("fc_double_live"),
                set_faults: *lib.get(b"fc_double_set_faults\0").expect("fc_double_set_faults"),
                _lib: lib,
            }
        }
    })
}

/// The status codes the header documents (FC_OK and FC_ERR_*), less
/// FC_ERR_INTERNAL, which is a bug.
pub fn documented(rc: c_int) -> bool {
    (0..=13).contains(&rc) && rc != FC_ERR_INTERNAL as c_int
}

/// This thread's last error message.
pub fn last_message() -> String {
    let p = fcgraph::fc_last_error();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: fc_last_error returns a NUL-terminated per-thread string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Whether FC_FUZZ_TRACE is set: every checked call is printed (to read
/// what a seed or a crash input does).
pub fn tracing() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| std::env::var_os("FC_FUZZ_TRACE").is_some())
}

/// Checks an int status of call `what`: documented, and a failure with
/// its code and a message in fc_last_error.
pub fn check(what: &str, rc: c_int) -> c_int {
    if tracing() {
        eprintln!("fuzz: {what} -> {rc} {}", if rc != 0 { last_message() } else { String::new() });
    }
    assert!(documented(rc), "{what} returned {rc}, not a documented status: {}", last_message());
    if rc != 0 {
        let code = fcgraph::fc_last_error_code();
        assert_eq!(code, rc, "{what} returned {rc} but fc_last_error_code() is {code}");
        assert!(!last_message().is_empty(), "{what} failed with {rc} and no message");
    }
    rc
}

/// Checks a constructor's result: NULL comes with an error code and a message.
pub fn check_ptr<T>(what: &str, p: *mut T) -> *mut T {
    if tracing() {
        eprintln!("fuzz: {what} -> {p:?} {}", if p.is_null() { last_message() } else { String::new() });
    }
    if p.is_null() {
        let code = fcgraph::fc_last_error_code();
        assert!(documented(code) && code != 0, "{what} returned NULL with fc_last_error_code() {code}");
        assert!(!last_message().is_empty(), "{what} returned NULL with no message");
    }
    p
}

/// Fuzz bytes read as values; reads past the end give zeros.
pub struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, at: 0 }
    }
    /// Whether every byte was read.
    pub fn done(&self) -> bool {
        self.at >= self.data.len()
    }
    /// One byte.
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    /// Two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// Four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    /// The next `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.at.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.at = start.saturating_add(n);
        &self.data[start..end]
    }
    /// A size: mostly small, sometimes at the edges (0, SIZE_MAX and
    /// values that overflow when multiplied or added).
    pub fn size(&mut self) -> usize {
        match self.u8() % 16 {
            0 => 0,
            1 => usize::MAX,
            2 => usize::MAX / 2 + 1,
            3 => usize::MAX - self.u8() as usize,
            4 => 1usize << (self.u8() % 64),
            5 => self.u32() as usize,
            6..=9 => self.u8() as usize,
            _ => self.u16() as usize,
        }
    }
    /// An int argument: small values, negatives and the edges.
    pub fn int(&mut self) -> c_int {
        match self.u8() % 8 {
            0 => -1,
            1 => c_int::MAX,
            2 => c_int::MIN,
            3 => self.u32() as c_int,
            _ => c_int::from(self.u8() % 8),
        }
    }
}

/// A `void *` the library passes back untouched (a break's `live`).
pub fn opaque(v: usize) -> *mut c_void {
    v as *mut c_void
}

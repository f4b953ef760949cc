//! Why the driver could not be loaded: [`LoadError`], public as
//! `cuda_sys::LoadError` and `cuda_sys::loader::LoadError`. A leaf module:
//! the entry-point table (`functions`) reports a missing required entry
//! with it and the loader (`loader`) builds on that table, so neither
//! imports the other back.

/// Environment variable naming the driver library to open instead of
/// `libcuda.so.1` / `libcuda.so`.
pub const FC_CUDA_LIBRARY_ENV: &str = "FC_CUDA_LIBRARY";

/// Why the driver could not be loaded. Never a panic.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// No library could be opened.
    #[error("{}", library_not_found(tried, reason))]
    LibraryNotFound {
        /// The names or paths tried, comma-separated.
        tried: String,
        /// Why each failed.
        reason: String,
    },
    /// The library has no `cuGetProcAddress` (drivers older than CUDA 11.3).
    #[error("{library} does not export cuGetProcAddress; a driver of CUDA 11.4 (470) or newer is required")]
    NoProcAddress {
        /// The library opened.
        library: String,
    },
    /// A required entry point could not be resolved.
    #[error("the CUDA driver lacks the required entry point {name} (ABI {version}): {detail}")]
    MissingSymbol {
        /// The entry point.
        name: &'static str,
        /// The ABI version asked for.
        version: i32,
        /// What `cuGetProcAddress` said.
        detail: String,
    },
    /// The driver is older than the oldest supported one.
    #[error("CUDA driver API version {found} is older than the oldest supported, {min} (CUDA 11.4, driver 470)")]
    DriverTooOld {
        /// The driver's CUDA API version.
        found: i32,
        /// The oldest supported.
        min: i32,
    },
}

/// [`LoadError::LibraryNotFound`]'s message, one sentence: what was tried,
/// why it failed (each distinct reason once, without the path the loader
/// repeats) and what to do.
fn library_not_found(tried: &str, reason: &str) -> String {
    let mut why: Vec<&str> = Vec::new();
    for r in reason.split("; ") {
        let r = tried.split(", ").find_map(|t| r.strip_prefix(t).and_then(|r| r.strip_prefix(": "))).unwrap_or(r);
        if !why.contains(&r) {
            why.push(r);
        }
    }
    format!(
        "no CUDA driver library could be opened (tried {tried}: {}); install the NVIDIA driver, \
         or set {FC_CUDA_LIBRARY_ENV} to the driver library's path",
        why.join("; ")
    )
}

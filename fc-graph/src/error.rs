//! The one error type of the library.

use cuda_sys::{CUresult, LoadError, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What usually invalidates a capture, for [`Error::CaptureInvalidated`].
pub const CAPTURE_INVALIDATED_CAUSES: &str = "usually another thread synchronised the whole device \
     (cudaDeviceSynchronize, torch.cuda.synchronize, cuCtxSynchronize), or freed memory \
     (cudaFree synchronises), while this capture was open on a primary context, or an unsafe call was made \
     while a GLOBAL-mode capture was open; an isolated context (Context::isolated, \
     fc_cuda_init_device_isolated) is immune to other libraries' device-wide synchronisation, and \
     Context::capture_with_retry / fc_graph_capture_ctx re-record an invalidated capture";

/// Everything that can go wrong. Driver failures carry the CUDA error name.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The driver library could not be loaded or initialised.
    #[error("no usable CUDA driver: {0}")]
    NoDriver(#[from] LoadError),
    /// A driver call returned an error.
    #[error("{call} failed: {name} ({code}): {description}")]
    Cuda {
        /// The driver entry point.
        call: &'static str,
        /// Its `CUresult`.
        code: CUresult,
        /// The driver's name for the code, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
        name: String,
        /// The driver's description of the code.
        description: String,
    },
    /// The stream capture was invalidated: every call recorded into it since
    /// is lost and the capture can only be ended and recorded again.
    #[error("{call} failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901): the stream capture was invalidated ({causes}){detail}", causes = CAPTURE_INVALIDATED_CAUSES)]
    CaptureInvalidated {
        /// The driver entry point that reported it.
        call: &'static str,
        /// Extra context (e.g. the first failing call inside the capture), or empty.
        detail: String,
    },
    /// A caller passed something unusable (NULL, zero size, bad name...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A buffer or kernel lives on another device than the context's.
    #[error("wrong device: {0}")]
    WrongDevice(String),
    /// A buffer or kernel belongs to another context of the same device
    /// (isolated contexts do not share memory or modules).
    #[error("wrong context: {0}")]
    WrongContext(String),
    /// A buffer is smaller than the operation needs.
    #[error("buffer too small: {0}")]
    BufferTooSmall(String),
    /// The operation does not fit the context's capture state.
    #[error("capture state: {0}")]
    CaptureState(String),
    /// The driver is too old for the feature.
    #[error("{feature} is unsupported by this driver (needs {needs})")]
    Unsupported {
        /// What was asked for.
        feature: &'static str,
        /// The driver (or device) it needs.
        needs: String,
    },
    /// A break function reported failure.
    #[error("break function failed: {0}")]
    Callback(String),
}

impl Error {
    /// The CUDA error code, for driver failures.
    pub fn cuda_code(&self) -> Option<CUresult> {
        match self {
            Error::Cuda { code, .. } => Some(*code),
            Error::CaptureInvalidated { .. } => Some(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED),
            _ => None,
        }
    }

    /// Whether this error means the capture was invalidated (and recording
    /// it again may succeed).
    pub fn is_capture_invalidated(&self) -> bool {
        matches!(self, Error::CaptureInvalidated { .. })
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::CaptureState`].
    pub fn capture_state(msg: impl Into<String>) -> Error {
        Error::CaptureState(msg.into())
    }

    /// The same error with `note` appended to its message where the variant
    /// carries free text (used to name the first failure inside a capture).
    pub(crate) fn with_note(self, note: &str) -> Error {
        match self {
            Error::Cuda { call, code, name, description } => {
                Error::Cuda { call, code, name, description: format!("{description}; {note}") }
            }
            Error::CaptureInvalidated { call, detail } => {
                Error::CaptureInvalidated { call, detail: format!("{detail}; {note}") }
            }
            Error::CaptureState(m) => Error::CaptureState(format!("{m}; {note}")),
            Error::Callback(m) => Error::Callback(format!("{m}; {note}")),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidated_captures_name_their_causes_and_code() {
        let e = Error::CaptureInvalidated { call: "cuStreamEndCapture", detail: String::new() };
        let m = e.to_string();
        assert!(m.contains("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"), "{m}");
        assert!(m.contains("synchronised the whole device") && m.contains("isolated context"), "{m}");
        assert_eq!(e.cuda_code(), Some(901));
        assert!(e.is_capture_invalidated());
    }

    #[test]
    fn notes_append_to_free_text() {
        let e = Error::capture_state("end failed").with_note("first failure inside the capture: x");
        assert_eq!(e.to_string(), "capture state: end failed; first failure inside the capture: x");
        let e = Error::invalid("n").with_note("ignored");
        assert_eq!(e.to_string(), "invalid argument: n");
    }
}

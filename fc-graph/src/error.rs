//! The one error type of the library, and its C status codes.

use cuda_sys::{CUresult, LoadError};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong. Driver failures carry the CUDA error name.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The driver library could not be loaded or initialised.
    #[error("no usable CUDA driver: {0}")]
    NoDriver(#[from] LoadError),
    /// A driver call returned an error.
    #[error("{call} failed: {name} ({code}): {description}")]
    Cuda { call: &'static str, code: CUresult, name: String, description: String },
    /// A caller passed something unusable (NULL, zero size, bad name...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A buffer lives on another device than the context's.
    #[error("wrong device: {0}")]
    WrongDevice(String),
    /// A buffer is smaller than the operation needs.
    #[error("buffer too small: {0}")]
    BufferTooSmall(String),
    /// The operation does not fit the context's capture state.
    #[error("capture state: {0}")]
    CaptureState(String),
    /// The driver is too old for the feature.
    #[error("{feature} is unsupported by this driver (needs {needs})")]
    Unsupported { feature: &'static str, needs: String },
    /// A break function reported failure.
    #[error("break function failed: {0}")]
    Callback(String),
    /// A panic was caught at the C boundary.
    #[error("internal error (panic caught at the C boundary): {0}")]
    Panic(String),
}

impl Error {
    /// The CUDA error code, for driver failures.
    pub fn cuda_code(&self) -> Option<CUresult> {
        match self {
            Error::Cuda { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::CaptureState`].
    pub fn capture_state(msg: impl Into<String>) -> Error {
        Error::CaptureState(msg.into())
    }
}

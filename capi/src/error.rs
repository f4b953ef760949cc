//! The C ABI's error: the safe layer's [`fc_graph::Error`] plus the two
//! failures only the C boundary has (a handle that is not live, a panic
//! caught before it could cross into C).
//!
//! Exports, the handle lookups and the `status` / `value` helpers use this
//! type; closures handed to the safe layer (break and record functions,
//! the graph cache's backend) return [`fc_graph::Result`], and never meet
//! the C-only variants (they look up no handles).

/// Everything an export can fail with; `status_code` (crate root) maps it
/// to the header's `FC_ERR_*` codes.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A failure of the safe layer (its message unchanged).
    #[error(transparent)]
    Lib(#[from] ::fc_graph::Error),
    /// A handle that is not live: freed already, of another kind, or never
    /// made by this library.
    #[error("invalid handle: {0}")]
    InvalidHandle(String),
    /// A panic was caught at the C boundary.
    #[error("internal error (panic caught at the C boundary): {0}")]
    Panic(String),
}

/// Result alias of the C ABI's internals.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for the safe layer's [`fc_graph::Error::InvalidArgument`].
    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::Lib(::fc_graph::Error::invalid(msg))
    }

    /// Shorthand for the safe layer's [`fc_graph::Error::CaptureState`].
    pub(crate) fn capture_state(msg: impl Into<String>) -> Error {
        Error::Lib(::fc_graph::Error::capture_state(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_those_of_the_c_abi() {
        assert_eq!(Error::InvalidHandle("x".into()).to_string(), "invalid handle: x");
        assert_eq!(Error::Panic("boom".into()).to_string(), "internal error (panic caught at the C boundary): boom");
        assert_eq!(Error::invalid("n").to_string(), "invalid argument: n");
        assert_eq!(Error::capture_state("s").to_string(), "capture state: s");
        let lib = ::fc_graph::Error::Callback("record function returned 7".into());
        assert_eq!(Error::from(lib.clone()).to_string(), lib.to_string());
    }
}

//! How a context's recordings take its work: built node by node (no stream
//! in capture mode), or by capturing the context's stream (every piece of
//! work on the stream is recorded, also work other libraries enqueue on it
//! through [`crate::Context::raw_stream`]).
//!
//! [`RecordingMode::Auto`] (the default) builds, unless the stream's handle
//! was handed out ([`crate::Context::raw_stream`], the C API's
//! `fc_ctx_stream`): then a caller may enqueue foreign work on the stream
//! at any time during a recording, and capturing the stream is the only
//! way to record it rather than run it, so such a context's recordings
//! capture (the behaviour before recordings were built). Callers that put
//! their foreign work into recordings explicitly (foreign sections:
//! [`crate::Capture::foreign`], the C API's `fc_graph_foreign_begin_ctx`)
//! choose [`RecordingMode::Build`] and keep building. `FC_RECORDING`
//! (`auto`, `build` or `capture`, read once) sets the default of every new
//! context.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Environment variable: the recording mode of new contexts.
pub const RECORDING_ENV: &str = "FC_RECORDING";

/// How a context's recordings take its work (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordingMode {
    /// Build, unless the stream's handle was handed out: then capture.
    #[default]
    Auto,
    /// Always build: the library's own work becomes graph nodes; foreign
    /// work enters recordings only through foreign sections (work enqueued
    /// on the raw stream outside one runs eagerly).
    Build,
    /// Always capture the context's stream for the whole recording.
    Capture,
}

impl RecordingMode {
    /// Parses `auto`, `build` or `capture` (any case, blanks ignored).
    pub fn parse(value: &str) -> Result<RecordingMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(RecordingMode::Auto),
            "build" => Ok(RecordingMode::Build),
            "capture" => Ok(RecordingMode::Capture),
            other => Err(Error::invalid(format!("{RECORDING_ENV}={other:?}: expected auto, build or capture"))),
        }
    }

    /// The default of new contexts: `FC_RECORDING` (read once), else
    /// [`RecordingMode::Auto`]. An unreadable value is an error at every
    /// context creation, so that a typo is never silently ignored.
    pub fn from_env() -> Result<RecordingMode> {
        static MODE: OnceLock<Result<RecordingMode>> = OnceLock::new();
        MODE.get_or_init(|| match std::env::var(RECORDING_ENV) {
            Ok(v) => RecordingMode::parse(&v),
            Err(_) => Ok(RecordingMode::Auto),
        })
        .clone()
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            RecordingMode::Auto => 0,
            RecordingMode::Build => 1,
            RecordingMode::Capture => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> RecordingMode {
        match v {
            1 => RecordingMode::Build,
            2 => RecordingMode::Capture,
            _ => RecordingMode::Auto,
        }
    }

    /// Whether a recording begun now captures the stream, given whether the
    /// stream's handle was handed out.
    pub fn captures(self, stream_shared: bool) -> bool {
        match self {
            RecordingMode::Auto => stream_shared,
            RecordingMode::Build => false,
            RecordingMode::Capture => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_round_trip() {
        assert_eq!(RecordingMode::parse(" Build ").ok(), Some(RecordingMode::Build));
        assert_eq!(RecordingMode::parse("CAPTURE").ok(), Some(RecordingMode::Capture));
        assert_eq!(RecordingMode::parse("auto").ok(), Some(RecordingMode::Auto));
        assert_eq!(RecordingMode::parse("").ok(), Some(RecordingMode::Auto));
        assert!(RecordingMode::parse("graph").is_err());
        for m in [RecordingMode::Auto, RecordingMode::Build, RecordingMode::Capture] {
            assert_eq!(RecordingMode::from_u8(m.to_u8()), m);
        }
    }

    #[test]
    fn auto_captures_only_a_handed_out_stream() {
        assert!(!RecordingMode::Auto.captures(false));
        assert!(RecordingMode::Auto.captures(true));
        assert!(!RecordingMode::Build.captures(true));
        assert!(RecordingMode::Capture.captures(false));
    }
}

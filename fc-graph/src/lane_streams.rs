//! The extra streams behind a context's lanes (see [`crate::lanes`]): one
//! non-blocking stream and one event per lane, made on first use, kept
//! until the context is torn down. Lane 0 is the context's own stream and
//! event.

use std::sync::Mutex;

use cuda_sys::result::{event, stream};
use cuda_sys::*;

use crate::driver::{shielded, RawCtx};
use crate::error::{Error, Result};
use crate::sync::lock;

/// Most lanes a context has (lane 0, the context's own stream, included).
pub const MAX_LANES: usize = 64;

/// One lane's stream and the event its waits go through.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaneStream {
    pub(crate) stream: CUstream,
    pub(crate) event: CUevent,
}

/// A context's lane streams, by lane index (`None` until first used).
#[derive(Debug, Default)]
pub(crate) struct LaneStreams {
    lanes: Mutex<Vec<Option<LaneStream>>>,
}

// SAFETY: stream and event handles may be used from any thread; the table
// is behind a mutex.
unsafe impl Send for LaneStreams {}
// SAFETY: as above.
unsafe impl Sync for LaneStreams {}

impl LaneStreams {
    /// Lane `i`'s stream and event, made now if this is its first use:
    /// lane 0 gets only its event (its stream is `main`); a green context
    /// (`green` non-null) makes its streams with `cuGreenCtxStreamCreate`.
    pub(crate) fn get(&self, raw: RawCtx, green: CUgreenCtx, main: CUstream, i: usize) -> Result<LaneStream> {
        if i >= MAX_LANES {
            return Err(Error::invalid(format!("lane {i}: a context has lanes 0 to {}", MAX_LANES - 1)));
        }
        let mut lanes = lock(&self.lanes);
        if lanes.len() <= i {
            lanes.resize(i + 1, None);
        }
        if let Some(l) = lanes[i] {
            return Ok(l);
        }
        let made = shielded(raw, |d| {
            let stream = if i == 0 {
                main
            } else if !green.is_null() {
                crate::isolation::green_stream(d, green)?
            } else {
                // In the context, current here.
                stream::create(d, CU_STREAM_NON_BLOCKING)?
            };
            let event = match event::create(d, CU_EVENT_DISABLE_TIMING) {
                Ok(e) => e,
                Err(e) => {
                    if i != 0 {
                        // SAFETY: the stream made above, used by nothing else.
                        let _ = unsafe { stream::destroy(d, stream) };
                    }
                    return Err(e.into());
                }
            };
            Ok(LaneStream { stream, event })
        })?;
        lanes[i] = Some(made);
        Ok(made)
    }

    /// Destroys every lane's event and stream (lane 0's stream is the
    /// context's own, not destroyed here). With the context current and its
    /// streams idle.
    pub(crate) fn destroy(&self, d: &Driver) {
        let mut lanes = lock(&self.lanes);
        for (i, l) in lanes.drain(..).enumerate() {
            let Some(l) = l else { continue };
            // SAFETY: made by `get`, destroyed once; nothing uses them any more.
            let _ = unsafe { event::destroy(d, l.event) };
            if i != 0 {
                // SAFETY: as above.
                let _ = unsafe { stream::synchronize(d, l.stream) };
                // SAFETY: as above.
                let _ = unsafe { stream::destroy(d, l.stream) };
            }
        }
    }
}

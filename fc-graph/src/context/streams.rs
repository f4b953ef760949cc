//! A context's streams ([`Streams`]): its own non-blocking stream (lane
//! 0's) and, behind its lanes (see [`crate::lanes`]), one non-blocking
//! stream and one event per lane, made on first use and kept until the
//! context is torn down. Lane 0's event waits on the context's own stream.

use std::sync::Mutex;

use cuda_sys::result::{event, stream};
use cuda_sys::*;

use super::cuda_context::CudaContext;
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

/// The context's own stream and its lanes' streams and events, by lane
/// index (`None` until first used).
#[derive(Debug)]
pub(crate) struct Streams {
    main: CUstream,
    lanes: Mutex<Vec<Option<LaneStream>>>,
}

// SAFETY: stream and event handles may be used from any thread; the table
// is behind a mutex.
unsafe impl Send for Streams {}
// SAFETY: as above.
unsafe impl Sync for Streams {}

/// A non-blocking stream of `cuda`, which the caller made current: with
/// `cuGreenCtxStreamCreate` for a green context.
fn new_stream(d: &'static Driver, cuda: &CudaContext) -> Result<CUstream> {
    if !cuda.green_handle().is_null() {
        return crate::isolation::green_stream(d, cuda.green_handle());
    }
    // In the context, current here.
    Ok(stream::create(d, CU_STREAM_NON_BLOCKING)?)
}

impl Streams {
    /// The context's own stream, made now (shielded); no lane yet.
    pub(crate) fn create(cuda: &CudaContext) -> Result<Streams> {
        let main = cuda.shielded(|d| new_stream(d, cuda))?;
        Ok(Streams { main, lanes: Mutex::new(Vec::new()) })
    }

    /// The context's own stream (lane 0's).
    #[inline]
    pub(crate) fn main(&self) -> CUstream {
        self.main
    }

    /// Lane `i`'s stream and event, made now if this is its first use:
    /// lane 0 gets only its event (its stream is the context's own).
    pub(crate) fn lane(&self, cuda: &CudaContext, i: usize) -> Result<LaneStream> {
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
        let made = cuda.shielded(|d| {
            let stream = if i == 0 { self.main } else { new_stream(d, cuda)? };
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

    /// Waits for the context's own stream (teardown; errors ignored).
    pub(crate) fn synchronize_main(&self, d: &Driver) {
        // SAFETY: our stream; waits for queued work before tearing down.
        let _ = unsafe { stream::synchronize(d, self.main) };
    }

    /// Destroys every lane's event and stream (lane 0's stream is the
    /// context's own, destroyed by [`Streams::destroy_main`]). With the
    /// context current and its streams idle.
    pub(crate) fn destroy_lanes(&self, d: &Driver) {
        let mut lanes = lock(&self.lanes);
        for (i, l) in lanes.drain(..).enumerate() {
            let Some(l) = l else { continue };
            // SAFETY: made by `lane`, destroyed once; nothing uses them any more.
            let _ = unsafe { event::destroy(d, l.event) };
            if i != 0 {
                // SAFETY: as above.
                let _ = unsafe { stream::synchronize(d, l.stream) };
                // SAFETY: as above.
                let _ = unsafe { stream::destroy(d, l.stream) };
            }
        }
    }

    /// Destroys the context's own stream, last (with the context current).
    pub(crate) fn destroy_main(&self, d: &Driver) {
        // SAFETY: our stream, no longer used by anyone.
        let _ = unsafe { stream::destroy(d, self.main) };
    }
}

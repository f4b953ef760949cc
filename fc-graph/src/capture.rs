//! The recording guard: [`Capture`] keeps a [`Recording`] on the thread
//! that began it and aborts it when dropped; [`break_here`] for code that
//! runs both recorded and eagerly; re-recording of invalidated captures
//! ([`Context::capture_with_retry`], [`Context::update_with_retry`]).

use cuda_sys::CUstream;

use crate::capture_mode::CaptureMode;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::{Graph, UpdateReport};
use crate::recording::Recording;

/// An open capture on a context. `L` is the live value type its breaks
/// receive (see [`Graph::replay`]). Dropping it without [`Capture::end`]
/// aborts the capture.
///
/// The guard stays on the thread that opened the capture (it is not
/// `Send`): the driver lets only that thread end a THREAD_LOCAL or GLOBAL
/// capture, so a guard ended or dropped elsewhere would leave the stream
/// capturing for good.
pub struct Capture<L = ()> {
    /// The recording (it aborts itself when dropped).
    recording: Recording<L>,
    _same_thread: std::marker::PhantomData<*const ()>,
}

impl Context {
    /// Opens a capture on this context's stream. Refused while another
    /// capture is open on the same context.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<Capture<()>> {
        self.begin_breakable(mode)
    }

    /// Opens a capture whose breaks receive a live `L` at replay.
    pub fn begin_breakable<L>(&self, mode: CaptureMode) -> Result<Capture<L>> {
        Ok(Capture { recording: Recording::begin(self, mode)?, _same_thread: std::marker::PhantomData })
    }
}

impl<L> std::fmt::Debug for Capture<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("device", &self.context().device_id())
            .field("mode", &self.recording.mode())
            .field("pieces_so_far", &self.pieces_so_far())
            .finish()
    }
}

impl<L> Capture<L> {
    /// The context being captured.
    pub fn context(&self) -> &Context {
        self.recording.context()
    }

    /// Pieces recorded so far (segments ended plus breaks).
    pub fn pieces_so_far(&self) -> usize {
        self.recording.pieces_so_far()
    }

    /// Records later breaks without running their function now (see
    /// [`Recording::defer_breaks`]).
    pub(crate) fn defer_breaks(&mut self) {
        self.recording.defer_breaks();
    }

    /// A break: ends the current segment, runs `f` once now (eagerly, on
    /// the context's stream, with `live`), records it, and opens the next
    /// segment. At replay `f` runs again between the two segments with the
    /// live value given to [`Graph::replay`]. Values `f` captured by move
    /// stay frozen at their capture-time values. If `f` fails or panics now,
    /// the capture fails (its end says so) and the next segment still
    /// opens (see [`Recording::brk`]).
    pub fn brk<F>(&mut self, live: &L, f: F) -> Result<()>
    where
        F: Fn(&Context, &L) -> Result<()> + Send + Sync + 'static,
    {
        self.recording.brk(live, Box::new(f))
    }

    /// Whether this recording builds its graphs node by node (the default;
    /// see [`crate::recording_mode`]) rather than capturing the stream.
    pub fn builds(&self) -> bool {
        self.recording.builds()
    }

    /// Opens a *foreign section*: until [`Capture::foreign_end`], the
    /// context's stream (returned) captures, in `mode`, whatever anyone
    /// enqueues on it (cuBLAS, NCCL, the engine's own kernels, and the
    /// library's own work, in order); the section becomes one child graph
    /// node after the work recorded before it. In a recording that captures
    /// the stream anyway it changes nothing and returns the stream. Refused
    /// while a section is open. Enqueue nothing on the stream after the
    /// section ends unless it should run eagerly.
    pub fn foreign_begin(&mut self, mode: CaptureMode) -> Result<CUstream> {
        self.recording.foreign_begin(mode)
    }

    /// [`Capture::foreign_begin`] on a lane of the context: see
    /// [`Recording::foreign_begin_on`].
    pub fn foreign_begin_on(&mut self, lane: &Context, mode: CaptureMode) -> Result<CUstream> {
        self.recording.foreign_begin_on(lane, mode)
    }

    /// Ends the foreign section (see [`Capture::foreign_begin`]). A
    /// THREAD_LOCAL or GLOBAL section ends only on the thread that began
    /// it; a section the driver invalidated fails the recording.
    pub fn foreign_end(&mut self) -> Result<()> {
        self.recording.foreign_end()
    }

    /// Runs `f` with the context's stream inside a foreign section (see
    /// [`Capture::foreign_begin`]): the section ends when `f` returns, also
    /// when it fails (`f`'s error is returned first).
    pub fn foreign<T>(&mut self, mode: CaptureMode, f: impl FnOnce(CUstream) -> Result<T>) -> Result<T> {
        let ctx = self.context().clone();
        self.foreign_on(&ctx, mode, f)
    }

    /// [`Capture::foreign`] on a lane of the context (see
    /// [`Recording::foreign_begin_on`]): `f` gets the lane's stream.
    pub fn foreign_on<T>(
        &mut self,
        lane: &Context,
        mode: CaptureMode,
        f: impl FnOnce(CUstream) -> Result<T>,
    ) -> Result<T> {
        let stream = self.foreign_begin_on(lane, mode)?;
        let out = f(stream);
        let ended = self.foreign_end();
        let value = out?;
        ended.map(|()| value)
    }

    /// Whether the driver reports this capture as invalidated (for example
    /// by another library's device-wide synchronisation): ending it will
    /// fail, and recording it again may succeed.
    pub fn is_invalidated(&self) -> bool {
        self.recording.is_invalidated()
    }

    /// Ends the capture and instantiates every segment. On error nothing is
    /// returned, the stream is left out of capture, and the message names
    /// the first failing call inside the capture (call, thread, CUDA error).
    pub fn end(self) -> Result<Graph<L>> {
        self.recording.end()
    }

    /// Ends the capture into `graph`, an earlier capture of the same
    /// context: each segment whose topology matches the one at the same
    /// position is updated in place with `cuGraphExecUpdate` (its 12.0 ABI,
    /// or the 10020 ABI of 11.x drivers; several times cheaper than
    /// instantiating), the others are
    /// instantiated anew, and the breaks become the new capture's. The
    /// stream leaves capture either way. On error `graph` keeps its old
    /// pieces, but segments already updated in place carry the new
    /// parameters. Do not replay `graph` meanwhile.
    pub fn end_update(self, graph: &mut Graph<L>) -> Result<UpdateReport> {
        self.recording.end_update(graph)
    }
}

/// A break point for code that runs both under a capture and eagerly (a
/// model's forward): with a capture, [`Capture::brk`]; without one, `f`
/// runs right away with `live`.
pub fn break_here<L, F>(capture: Option<&mut Capture<L>>, ctx: &Context, live: &L, f: F) -> Result<()>
where
    F: Fn(&Context, &L) -> Result<()> + Send + Sync + 'static,
{
    match capture {
        Some(c) => c.brk(live, f),
        None => f(ctx, live),
    }
}

/// A graph recorded by [`Context::capture_with_retry`] (or the held
/// variant), and how many recordings it took.
#[derive(Debug)]
pub struct Recaptured<L = ()> {
    /// The instantiated graph.
    pub graph: Graph<L>,
    /// Recordings made: 1 when the first capture held.
    pub tries: u32,
}

impl Context {
    /// Records `record` into a graph, recording it again (up to `max_tries`
    /// recordings in all) when the capture is invalidated, e.g. because
    /// another library synchronised the device meanwhile. Any other error
    /// ends the attempt at once. `record` must be safe to run several times
    /// (captured work is not executed, so a discarded recording has no
    /// effect on the device). Between tries the thread backs off briefly
    /// (20 µs, doubling, at most 2 ms). When every try was invalidated, the
    /// last [`Error::CaptureInvalidated`] is returned.
    pub fn capture_with_retry<L, F>(&self, mode: CaptureMode, max_tries: u32, mut record: F) -> Result<Recaptured<L>>
    where
        F: FnMut(&mut Capture<L>) -> Result<()>,
    {
        retry_invalidated(max_tries, || self.record_guarded(mode, &mut record)?.end())
            .map(|(graph, tries)| Recaptured { graph, tries })
    }

    /// Like [`Context::capture_with_retry`], but ends each recording into
    /// `graph` with [`Capture::end_update`] (segments updated in place where
    /// the topology allows, instantiated anew elsewhere). Returns what the
    /// update did and how many recordings it took. An invalidated recording
    /// fails before `graph` is touched; on any other error `graph` is as
    /// `end_update` leaves it.
    pub fn update_with_retry<L, F>(
        &self,
        mode: CaptureMode,
        max_tries: u32,
        graph: &mut Graph<L>,
        mut record: F,
    ) -> Result<(UpdateReport, u32)>
    where
        F: FnMut(&mut Capture<L>) -> Result<()>,
    {
        retry_invalidated(max_tries, || self.record_guarded(mode, &mut record)?.end_update(graph))
    }

    /// Opens a guarded capture and runs `record` on it; a failed recording
    /// on an invalidated capture becomes [`Error::CaptureInvalidated`].
    fn record_guarded<L>(
        &self,
        mode: CaptureMode,
        record: &mut impl FnMut(&mut Capture<L>) -> Result<()>,
    ) -> Result<Capture<L>> {
        let mut cap = self.begin_breakable::<L>(mode)?;
        if let Err(e) = record(&mut cap) {
            // A recording that failed because the capture was invalidated
            // (a launch refused with another error, say) is retried too.
            if cap.is_invalidated() && !e.is_capture_invalidated() {
                return Err(Error::CaptureInvalidated { call: "the recording", detail: format!(" ({e})") });
            }
            return Err(e);
        }
        Ok(cap)
    }
}

/// Runs `attempt` up to `max_tries` times while it fails with an
/// invalidated capture, backing off between tries; returns its value and
/// the number of tries.
pub fn retry_invalidated<R>(max_tries: u32, mut attempt: impl FnMut() -> Result<R>) -> Result<(R, u32)> {
    if max_tries == 0 {
        return Err(Error::invalid("max_tries must be at least 1"));
    }
    let mut backoff = std::time::Duration::from_micros(20);
    for tries in 1..=max_tries {
        match attempt() {
            Ok(value) => return Ok((value, tries)),
            Err(e) if e.is_capture_invalidated() && tries < max_tries => {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(std::time::Duration::from_millis(2));
            }
            Err(e) if e.is_capture_invalidated() => {
                return Err(e.with_note(&format!("gave up after {max_tries} recordings, each invalidated")));
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::invalid("max_tries must be at least 1"))
}

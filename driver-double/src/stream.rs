//! Streams and events. Work is queued, not run, when it is enqueued: a
//! stream's queue runs when something waits for it (a synchronisation, a
//! copy to host memory, an event it recorded being waited on, the stream's
//! query or destruction, a free of device memory). So work on two streams
//! with no event between them runs in whichever order their waits come,
//! and a client that forgets a wait reads stale values, as it could on a
//! GPU.
//!
//! The legacy (NULL) stream of a context waits for the context's blocking
//! streams and they for it (approximated: enqueueing on one runs the
//! others' queued work first).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use cuda_sys::*;

use crate::exec::Plan;
use crate::state::{State, R};
use crate::work::Work;

/// Queued work.
#[derive(Debug)]
pub enum Op {
    /// Device work.
    Work(Work),
    /// An event's record.
    Record(u64),
    /// A wait for another stream's work up to a sequence number.
    Wait {
        /// The stream waited for.
        stream: u64,
        /// Its last operation to wait for.
        seq: u64,
    },
    /// A graph launch: the executable and its plan at launch time.
    Graph {
        /// The executable.
        exec: u64,
        /// Its work when launched.
        plan: Arc<Plan>,
    },
}

/// A stream.
#[derive(Debug)]
pub struct Stream {
    /// Its context.
    pub ctx: u64,
    /// `CU_STREAM_*` flags.
    pub flags: u32,
    /// Whether it is its context's legacy stream.
    pub legacy: bool,
    /// Queued operations with their sequence numbers.
    pub queue: VecDeque<(u64, Op)>,
    /// The last sequence number enqueued.
    pub last: u64,
    /// The capture sequence it is part of.
    pub capture: Option<u64>,
    /// Its dependencies in the capture (the nodes its next work follows).
    pub deps: Vec<(u64, crate::graph::EdgeData)>,
    /// The dependencies `cuStreamGetCaptureInfo` last handed out (their
    /// memory stays valid until the next call on the stream).
    pub info_deps: Vec<u64>,
    /// A fault of its work, reported at its next synchronisation.
    pub error: Option<CUresult>,
}

/// An event.
#[derive(Debug)]
pub struct Event {
    /// Its context.
    pub ctx: u64,
    /// `CU_EVENT_*` flags.
    pub flags: u32,
    /// Its last record: the stream and sequence number, if any.
    pub record: Option<(u64, u64)>,
    /// When its last record ran.
    pub done: Option<Instant>,
    /// The capture its last record was made in, with the capture's
    /// dependencies at that point.
    pub captured: Option<(u64, Vec<(u64, crate::graph::EdgeData)>)>,
}

impl State {
    /// A new stream of `ctx`.
    pub fn new_stream(&mut self, ctx: u64, flags: u32, legacy: bool) -> u64 {
        let serial = self.serial();
        self.streams.insert(
            serial,
            Stream {
                ctx,
                flags,
                legacy,
                queue: VecDeque::new(),
                last: 0,
                capture: None,
                deps: Vec::new(),
                info_deps: Vec::new(),
                error: None,
            },
        )
    }

    /// The stream a handle names in the current context: NULL and
    /// `CU_STREAM_LEGACY` its legacy stream, `CU_STREAM_PER_THREAD` too
    /// (the double keeps one default stream a context); else a live
    /// stream, which must be the current context's (a misuse otherwise).
    pub fn stream(&self, h: CUstream) -> R<u64> {
        let v = h as usize as u64;
        if v <= 2 {
            let ctx = self.current_ctx()?;
            return Ok(self.ctxs.get(ctx).map(|c| c.legacy).unwrap_or(0));
        }
        let s = self.streams.get(v).map_err(|b| self.bad_handle(b, crate::handle::Kind::Stream, v))?;
        let current = crate::context::current();
        if current != s.ctx {
            let same_device =
                self.ctxs.get(current).map(|c| c.device).ok() == self.ctxs.get(s.ctx).map(|c| c.device).ok();
            return Err(self.misuse(
                CUDA_ERROR_INVALID_HANDLE,
                format!(
                    "stream {v:#x} belongs to context {:#x}, not to the current context {current:#x}{}",
                    s.ctx,
                    if same_device { " (same device)" } else { "" }
                ),
            ));
        }
        Ok(v)
    }

    /// Enqueues `op` on `stream` (not capturing); returns its number.
    pub fn enqueue(&mut self, stream: u64, op: Op) -> R<u64> {
        self.implicit_sync(stream);
        let seq = self.next_seq;
        self.next_seq += 1;
        let s = self.streams.get_mut(stream).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        s.queue.push_back((seq, op));
        s.last = seq;
        Ok(seq)
    }

    /// The legacy stream's implicit synchronisation with blocking streams.
    fn implicit_sync(&mut self, stream: u64) {
        let Ok(s) = self.streams.get(stream) else { return };
        let (ctx, legacy, blocking) = (s.ctx, s.legacy, s.flags & CU_STREAM_NON_BLOCKING == 0);
        if legacy {
            for other in
                self.streams.handles_where(|o| o.ctx == ctx && !o.legacy && o.flags & CU_STREAM_NON_BLOCKING == 0)
            {
                self.flush(other);
            }
        } else if blocking {
            if let Ok(l) = self.ctxs.get(ctx).map(|c| c.legacy) {
                self.flush(l);
            }
        }
    }

    /// Runs every queued operation of `stream`.
    pub fn flush(&mut self, stream: u64) {
        self.flush_until(stream, u64::MAX);
    }

    /// Runs the queued operations of `stream` numbered up to `seq`.
    pub fn flush_until(&mut self, stream: u64, seq: u64) {
        loop {
            let op = match self.streams.get_mut(stream) {
                Ok(s) => match s.queue.front() {
                    Some((n, _)) if *n <= seq => s.queue.pop_front(),
                    _ => None,
                },
                Err(_) => None,
            };
            let Some((_, op)) = op else { return };
            let r = match op {
                Op::Work(w) => self.run_work(&w, None),
                Op::Record(e) => {
                    if let Ok(ev) = self.events.get_mut(e) {
                        ev.done = Some(Instant::now());
                    }
                    Ok(())
                }
                Op::Wait { stream: other, seq } => {
                    self.flush_until(other, seq);
                    Ok(())
                }
                Op::Graph { exec, plan } => self.run_plan(exec, &plan),
            };
            if let Err(code) = r {
                if let Ok(s) = self.streams.get_mut(stream) {
                    s.error.get_or_insert(code);
                }
            }
        }
    }

    /// Runs every stream of `ctx` (and, for a primary context, of its
    /// device's green contexts).
    pub fn flush_ctx(&mut self, ctx: u64) {
        let primary_device = match self.ctxs.get(ctx) {
            Ok(c) if c.kind == crate::context::CtxKind::Primary => Some(c.device),
            _ => None,
        };
        let greens: Vec<u64> = match primary_device {
            Some(d) => {
                self.ctxs.handles_where(|c| matches!(c.kind, crate::context::CtxKind::Green(_)) && c.device == d)
            }
            None => Vec::new(),
        };
        for s in self.streams.handles_where(|s| s.ctx == ctx || greens.contains(&s.ctx)) {
            self.flush(s);
        }
    }

    /// Runs every stream of `device` (a free is synchronous).
    pub fn flush_device(&mut self, device: usize) {
        let ctxs = self.ctxs.handles_where(|c| c.device == device);
        for s in self.streams.handles_where(|s| ctxs.contains(&s.ctx)) {
            self.flush(s);
        }
    }

    /// Takes a stream's reported fault.
    pub fn take_error(&mut self, stream: u64) -> R {
        match self.streams.get_mut(stream).ok().and_then(|s| s.error.take()) {
            Some(code) => Err(code),
            None => Ok(()),
        }
    }
}

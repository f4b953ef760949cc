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

use std::time::Instant;

use cuda_sys::*;

use crate::handle::Kind;
use crate::objects::context::CtxKind;
use crate::objects::stream::Op;
use crate::state::{State, R};
use crate::thread;

impl State {
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
        let s = self.streams.get(v).map_err(|b| self.bad_handle(b, Kind::Stream, v))?;
        let current = thread::current();
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
            Ok(c) if c.kind == CtxKind::Primary => Some(c.device),
            _ => None,
        };
        let greens: Vec<u64> = match primary_device {
            Some(d) => self.ctxs.handles_where(|c| matches!(c.kind, CtxKind::Green(_)) && c.device == d),
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

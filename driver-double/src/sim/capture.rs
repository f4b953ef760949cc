//! Stream capture: work enqueued on a capturing stream becomes nodes of
//! the capture's graph; events fork and join other streams into it; and
//! the rules on "potentially unsafe" calls that NVIDIA documents for
//! `cuThreadExchangeStreamCaptureMode`:
//!
//! - a thread whose mode is GLOBAL is refused an unsafe call while it has
//!   a capture of its own not begun RELAXED, or while another thread has a
//!   GLOBAL capture;
//! - THREAD_LOCAL: refused only while it has a capture of its own not
//!   begun RELAXED;
//! - RELAXED: never refused.
//!
//! A refused call returns `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` and
//! invalidates the captures that refused it (their end then returns
//! `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`). Some calls conflict with a
//! capture in any mode: synchronising or querying a capturing stream, a
//! device-wide synchronisation of a context with a capturing stream, work
//! on a legacy stream beside a capturing blocking stream
//! (`CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`).
//!
//! The unsafe calls in the double: allocating and freeing memory,
//! synchronising a context, stream or event, loading and unloading a
//! module, creating and destroying a context (and retaining or releasing
//! a primary one), instantiating a graph.
//!
//! With the fault `capture-global`, every capture is GLOBAL and, against
//! another thread's capture, every thread is held to GLOBAL whatever mode
//! it set: the engine's old code (GLOBAL captures; the other threads'
//! calls unshielded), which the seed test guards against.

use cuda_sys::*;

use crate::objects::capture::{Capture, Status};
use crate::objects::graph::{EdgeData, NodeKind, Owner};
use crate::objects::work::Work;
use crate::state::{State, CUDA_ERROR_ILLEGAL_STATE, R};
use crate::thread::{thread_id, thread_mode};

impl State {
    /// The mode a capture is taken in.
    fn effective_capture_mode(&self, mode: u32) -> u32 {
        if self.cfg.faults.capture_global {
            CU_STREAM_CAPTURE_MODE_GLOBAL
        } else {
            mode
        }
    }

    /// Refuses an unsafe call where the mode rules do, invalidating the
    /// captures that refuse it.
    pub fn gate_unsafe(&mut self) -> R {
        let own = thread_mode();
        // Against other threads' captures, the fault holds every thread to
        // GLOBAL whatever it set (their calls come unshielded).
        let cross = if self.cfg.faults.capture_global { CU_STREAM_CAPTURE_MODE_GLOBAL } else { own };
        let me = thread_id();
        let refusing: Vec<u64> = self
            .captures
            .iter()
            .filter(|(_, c)| {
                (c.thread == me && own != CU_STREAM_CAPTURE_MODE_RELAXED && c.mode != CU_STREAM_CAPTURE_MODE_RELAXED)
                    || (c.thread != me
                        && cross == CU_STREAM_CAPTURE_MODE_GLOBAL
                        && c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
            })
            .map(|(id, _)| *id)
            .collect();
        if refusing.is_empty() {
            return Ok(());
        }
        for id in refusing {
            self.invalidate(id);
        }
        Err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    }

    /// Invalidates a capture.
    pub fn invalidate(&mut self, id: u64) {
        if let Some(c) = self.captures.get_mut(&id) {
            c.status = Status::Invalidated;
        }
    }

    /// The capture `stream` is part of, with its status.
    pub fn capture_of(&self, stream: u64) -> Option<(u64, Status)> {
        let id = self.streams.get(stream).ok()?.capture?;
        Some((id, self.captures.get(&id)?.status))
    }

    /// A synchronisation of `stream` (or its query): refused with
    /// invalidation while it captures.
    pub fn gate_stream_sync(&mut self, stream: u64) -> R {
        if let Some((id, _)) = self.capture_of(stream) {
            self.invalidate(id);
            return Err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        }
        Ok(())
    }

    /// A device-wide synchronisation of `ctx`: refused with invalidation
    /// while one of its streams captures.
    pub fn gate_ctx_sync(&mut self, ctx: u64) -> R {
        let ids: Vec<u64> = self
            .captures
            .iter()
            .filter(|(_, c)| self.streams.get(c.origin).map(|s| s.ctx == ctx).unwrap_or(false))
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        for id in ids {
            self.invalidate(id);
        }
        Err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    }

    /// Work on a legacy stream beside a capturing blocking stream of its
    /// context: refused with invalidation.
    pub fn gate_legacy(&mut self, stream: u64) -> R {
        let Ok(s) = self.streams.get(stream) else { return Ok(()) };
        if !s.legacy {
            return Ok(());
        }
        let ctx = s.ctx;
        let ids: Vec<u64> = self
            .captures
            .iter()
            .filter(|(_, c)| {
                self.streams
                    .get(c.origin)
                    .map(|o| o.ctx == ctx && o.flags & CU_STREAM_NON_BLOCKING == 0)
                    .unwrap_or(false)
            })
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        for id in ids {
            self.invalidate(id);
        }
        Err(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    }

    /// Begins a capture on `stream` (into `into` with `deps` when given).
    pub fn begin_capture(&mut self, stream: u64, mode: u32, into: Option<(u64, Vec<(u64, EdgeData)>)>) -> R {
        if mode > CU_STREAM_CAPTURE_MODE_RELAXED {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let s = self.streams.get(stream).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        if s.legacy {
            return Err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        }
        if s.capture.is_some() {
            return Err(CUDA_ERROR_ILLEGAL_STATE);
        }
        let (graph, to_graph, deps) = match into {
            Some((g, deps)) => (g, true, deps),
            None => (self.new_graph(Owner::Client), false, Vec::new()),
        };
        let id = self.next_capture;
        self.next_capture += 1;
        let mode = self.effective_capture_mode(mode);
        self.captures
            .insert(id, Capture { origin: stream, mode, thread: thread_id(), graph, to_graph, status: Status::Active });
        if let Ok(s) = self.streams.get_mut(stream) {
            s.capture = Some(id);
            s.deps = deps;
        }
        Ok(())
    }

    /// Ends the capture begun on `stream`: its graph, or why not.
    pub fn end_capture(&mut self, stream: u64) -> R<u64> {
        let Some((id, status)) = self.capture_of(stream) else {
            return Err(CUDA_ERROR_ILLEGAL_STATE);
        };
        let c = self.captures.get(&id).ok_or(CUDA_ERROR_ILLEGAL_STATE)?;
        if c.origin != stream {
            self.invalidate(id);
            return Err(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
        }
        if c.mode != CU_STREAM_CAPTURE_MODE_RELAXED && c.thread != thread_id() {
            return Err(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        }
        let (graph, to_graph) = (c.graph, c.to_graph);
        let joined = self.unjoined(id, stream);
        let members = self.streams.handles_where(|s| s.capture == Some(id));
        for m in members {
            if let Ok(s) = self.streams.get_mut(m) {
                s.capture = None;
                s.deps.clear();
            }
        }
        for e in self.events.handles_where(|e| e.captured.as_ref().map(|(c, _)| *c) == Some(id)) {
            if let Ok(ev) = self.events.get_mut(e) {
                ev.captured = None;
            }
        }
        self.captures.remove(&id);
        let fail = if status == Status::Invalidated {
            Some(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        } else if joined {
            Some(CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        } else {
            None
        };
        if let Some(code) = fail {
            if !to_graph {
                self.destroy_graph(graph);
            }
            return Err(code);
        }
        Ok(graph)
    }

    /// Whether a stream forked into capture `id` has work the origin did
    /// not join back.
    fn unjoined(&self, id: u64, origin: u64) -> bool {
        let Ok(o) = self.streams.get(origin) else { return false };
        let Some(graph) = self.captures.get(&id).map(|c| c.graph) else { return false };
        // Everything the origin's dependencies reach backwards.
        let Ok(g) = self.graphs.get(graph) else { return false };
        let mut reached: Vec<u64> = o.deps.iter().map(|d| d.0).collect();
        let mut i = 0;
        while i < reached.len() {
            let n = reached[i];
            for e in g.edges.iter().filter(|e| e.to == n) {
                if !reached.contains(&e.from) {
                    reached.push(e.from);
                }
            }
            i += 1;
        }
        self.streams
            .iter()
            .filter(|(h, s)| *h != origin && s.capture == Some(id))
            .any(|(_, s)| s.deps.iter().any(|(n, _)| !reached.contains(n)))
    }

    /// Records `kind` into the capture `stream` is part of, after the
    /// stream's dependencies (a programmatic edge from the last kernel when
    /// `programmatic`).
    pub fn capture_node(&mut self, stream: u64, kind: NodeKind, programmatic: bool) -> R {
        let (id, status) = self.capture_of(stream).ok_or(CUDA_ERROR_ILLEGAL_STATE)?;
        if status == Status::Invalidated {
            return Err(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
        let graph = self.captures.get(&id).map(|c| c.graph).ok_or(CUDA_ERROR_ILLEGAL_STATE)?;
        let deps = self.streams.get(stream).map(|s| s.deps.clone()).unwrap_or_default();
        let nodes: Vec<u64> = deps.iter().map(|d| d.0).collect();
        let mut data: Vec<EdgeData> = deps.iter().map(|d| d.1).collect();
        // Edge data exists from CUDA 12.3 on; before, a programmatic launch
        // is captured with a full edge.
        if programmatic && self.cfg.version >= 12030 {
            for (d, n) in data.iter_mut().zip(&nodes) {
                let kernel = matches!(self.nodes.get(*n).map(|n| &n.kind), Ok(NodeKind::Work(Work::Kernel(_))));
                if kernel && d.is_default() {
                    *d = EdgeData {
                        from_port: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
                        to_port: 0,
                        ty: CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8,
                    };
                }
            }
        }
        let node = self.add_node(graph, &nodes, Some(&data), kind)?;
        if let Ok(s) = self.streams.get_mut(stream) {
            s.deps = vec![(node, EdgeData::default())];
        }
        Ok(())
    }
}

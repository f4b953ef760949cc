//! Streams and events.

use cuda_sys::*;

use super::{h, p};
use crate::handle::Kind;
use crate::objects::stream::{Event, Op};
use crate::state::{entry, out, State, R};

/// `CU_EVENT_INTERPROCESS`.
const EVENT_INTERPROCESS: u32 = 4;

impl State {
    /// A live event of the current context's device.
    fn event(&self, e: CUevent) -> R<u64> {
        let v = h(e);
        self.events.get(v).map_err(|b| self.bad_handle(b, Kind::Event, v))?;
        Ok(v)
    }
}

/// `cuStreamCreate` (2000): `CU_STREAM_DEFAULT` or `CU_STREAM_NON_BLOCKING`.
pub unsafe extern "C" fn cuStreamCreate_v2000(stream: *mut CUstream, flags: c_uint) -> CUresult {
    entry("cuStreamCreate", 2000, |s| {
        let o = out(stream)?;
        if flags & !CU_STREAM_NON_BLOCKING != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let ctx = s.current_ctx()?;
        *o = p(s.new_stream(ctx, flags, false));
        Ok(())
    })
}

/// `cuStreamDestroy` (4000): its queued work still runs (now); destroying
/// a capturing stream is a misuse (the capture is invalidated).
pub unsafe extern "C" fn cuStreamDestroy_v4000(stream: CUstream) -> CUresult {
    entry("cuStreamDestroy", 4000, |s| {
        let v = h(stream);
        let st = s.streams.get(v).map_err(|b| s.bad_handle(b, Kind::Stream, v))?;
        if st.legacy {
            return Err(s.misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy of a legacy (NULL) stream"));
        }
        if let Some(id) = st.capture {
            s.invalidate(id);
            return Err(s.misuse(
                CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                format!("cuStreamDestroy of stream {v:#x} while it captures"),
            ));
        }
        s.flush(v);
        let _ = s.streams.remove(v);
        Ok(())
    })
}

/// `cuStreamSynchronize` (2000): runs the stream's queue; reports the
/// first fault of its work since the last synchronisation.
pub unsafe extern "C" fn cuStreamSynchronize_v2000(stream: CUstream) -> CUresult {
    entry("cuStreamSynchronize", 2000, |s| {
        let v = s.stream(stream)?;
        s.gate_unsafe()?;
        s.gate_stream_sync(v)?;
        s.flush(v);
        s.take_error(v)
    })
}

/// `cuStreamQuery` (2000): the work is done by the time anyone asks.
pub unsafe extern "C" fn cuStreamQuery_v2000(stream: CUstream) -> CUresult {
    entry("cuStreamQuery", 2000, |s| {
        let v = s.stream(stream)?;
        s.gate_stream_sync(v)?;
        s.flush(v);
        s.take_error(v)
    })
}

/// `cuStreamWaitEvent` (3020): outside captures, a queued wait for the
/// event's record; an event recorded in a capture forks the stream into
/// that capture (or merges its dependencies); waiting inside a capture on
/// an event recorded outside it is `CUDA_ERROR_STREAM_CAPTURE_ISOLATION`.
pub unsafe extern "C" fn cuStreamWaitEvent_v3020(stream: CUstream, event: CUevent, flags: c_uint) -> CUresult {
    entry("cuStreamWaitEvent", 3020, |s| {
        let v = s.stream(stream)?;
        let e = s.event(event)?;
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let ev = s.events.get(e).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        let (captured, record) = (ev.captured.clone(), ev.record);
        let mine = s.capture_of(v);
        match (captured, mine) {
            (Some((id, deps)), Some((my, status))) => {
                if id != my {
                    s.invalidate(my);
                    return Err(CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
                }
                if status == crate::objects::capture::Status::Invalidated {
                    return Err(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
                }
                let st = s.streams.get_mut(v).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
                for d in deps {
                    if !st.deps.iter().any(|x| x.0 == d.0) {
                        st.deps.push(d);
                    }
                }
                Ok(())
            }
            (Some((id, deps)), None) => {
                s.gate_legacy(v)?;
                let st = s.streams.get_mut(v).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
                st.capture = Some(id);
                st.deps = deps;
                Ok(())
            }
            (None, Some((my, _))) => {
                if record.is_none() {
                    return Ok(());
                }
                s.invalidate(my);
                Err(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
            }
            (None, None) => {
                s.gate_legacy(v)?;
                if let Some((other, seq)) = record {
                    if other != v {
                        s.enqueue(v, Op::Wait { stream: other, seq })?;
                    }
                }
                Ok(())
            }
        }
    })
}

/// `cuEventCreate` (2000).
pub unsafe extern "C" fn cuEventCreate_v2000(event: *mut CUevent, flags: c_uint) -> CUresult {
    entry("cuEventCreate", 2000, |s| {
        let o = out(event)?;
        if flags & !(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | EVENT_INTERPROCESS) != 0
            || (flags & EVENT_INTERPROCESS != 0 && flags & CU_EVENT_DISABLE_TIMING == 0)
        {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let ctx = s.current_ctx()?;
        let serial = s.serial();
        *o = p(s.events.insert(serial, Event { ctx, flags, record: None, done: None, captured: None }));
        Ok(())
    })
}

/// `cuEventRecord` (2000): in a capture, the capture's position (for
/// forks and joins); else a queued record. The event and the stream must
/// be of one context.
pub unsafe extern "C" fn cuEventRecord_v2000(event: CUevent, stream: CUstream) -> CUresult {
    entry("cuEventRecord", 2000, |s| {
        let e = s.event(event)?;
        let v = s.stream(stream)?;
        let (ectx, sctx) = (s.events.get(e).map(|x| x.ctx).unwrap_or(0), s.streams.get(v).map(|x| x.ctx).unwrap_or(0));
        if ectx != sctx {
            return Err(s.misuse(
                CUDA_ERROR_INVALID_HANDLE,
                format!("event {e:#x} of context {ectx:#x} recorded on stream {v:#x} of context {sctx:#x}"),
            ));
        }
        if let Some((id, status)) = s.capture_of(v) {
            if status == crate::objects::capture::Status::Invalidated {
                return Err(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            }
            let deps = s.streams.get(v).map(|x| x.deps.clone()).unwrap_or_default();
            if let Ok(ev) = s.events.get_mut(e) {
                ev.captured = Some((id, deps));
            }
            return Ok(());
        }
        s.gate_legacy(v)?;
        let seq = s.enqueue(v, Op::Record(e))?;
        if let Ok(ev) = s.events.get_mut(e) {
            ev.record = Some((v, seq));
            ev.done = None;
            ev.captured = None;
        }
        Ok(())
    })
}

/// `cuEventSynchronize` (2000).
pub unsafe extern "C" fn cuEventSynchronize_v2000(event: CUevent) -> CUresult {
    entry("cuEventSynchronize", 2000, |s| {
        let e = s.event(event)?;
        s.gate_unsafe()?;
        let ev = s.events.get(e).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        if ev.captured.is_some() {
            return Err(CUDA_ERROR_CAPTURED_EVENT);
        }
        if let Some((stream, seq)) = ev.record {
            s.flush_until(stream, seq);
        }
        Ok(())
    })
}

/// `cuEventElapsedTime` (2000): `CUDA_ERROR_NOT_READY` until both records
/// ran.
pub unsafe extern "C" fn cuEventElapsedTime_v2000(ms: *mut f32, start: CUevent, end: CUevent) -> CUresult {
    entry("cuEventElapsedTime", 2000, |s| {
        let o = out(ms)?;
        let (a, b) = (s.event(start)?, s.event(end)?);
        let (ea, eb) = (
            s.events.get(a).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?,
            s.events.get(b).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?,
        );
        if (ea.flags | eb.flags) & CU_EVENT_DISABLE_TIMING != 0 {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        if ea.record.is_none() || eb.record.is_none() {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        match (ea.done, eb.done) {
            (Some(x), Some(y)) => {
                *o = if y >= x { (y - x).as_secs_f32() * 1e3 } else { -((x - y).as_secs_f32() * 1e3) };
                Ok(())
            }
            _ => Err(CUDA_ERROR_NOT_READY),
        }
    })
}

/// `cuEventDestroy` (4000).
pub unsafe extern "C" fn cuEventDestroy_v4000(event: CUevent) -> CUresult {
    entry("cuEventDestroy", 4000, |s| {
        let e = s.event(event)?;
        let _ = s.events.remove(e);
        Ok(())
    })
}

//! Recording mode, foreign-section and lane exports (recordings held by
//! the context, as in `graph`).

use std::os::raw::{c_int, c_uint, c_void};

use ::fc_graph::{Conditional, RecordingMode};
use cuda_sys::CUstream;

use super::context::ctx;
use super::error::{Error, Result};
use super::graph::{capture_mode, returned, CCallback};
use super::handles;
use super::header::{self, fc_buffer, fc_cuda_ctx, fc_foreign_fn};
use super::held::CContext;
use super::{handle_or_null, status, value};

/// The header's `FC_RECORDING_*` value as a mode.
fn recording_mode(mode: c_int) -> Result<RecordingMode> {
    match u32::try_from(mode) {
        Ok(header::FC_RECORDING_AUTO) => Ok(RecordingMode::Auto),
        Ok(header::FC_RECORDING_BUILD) => Ok(RecordingMode::Build),
        Ok(header::FC_RECORDING_CAPTURE) => Ok(RecordingMode::Capture),
        _ => Err(Error::invalid(format!(
            "unknown recording mode {mode} (FC_RECORDING_AUTO 0, FC_RECORDING_BUILD 1 or FC_RECORDING_CAPTURE 2)"
        ))),
    }
}

/// A mode as the header's `FC_RECORDING_*` value.
fn recording_mode_code(mode: RecordingMode) -> c_int {
    let code = match mode {
        RecordingMode::Auto => header::FC_RECORDING_AUTO,
        RecordingMode::Build => header::FC_RECORDING_BUILD,
        RecordingMode::Capture => header::FC_RECORDING_CAPTURE,
    };
    code as c_int
}

/// `int fc_ctx_set_recording_mode(fc_cuda_ctx *ctx, int mode)`
#[no_mangle]
pub extern "C" fn fc_ctx_set_recording_mode(h: *mut fc_cuda_ctx, mode: c_int) -> c_int {
    status(|| {
        let c = ctx(h)?;
        c.set_recording_mode(recording_mode(mode)?);
        Ok(())
    })
}

/// `int fc_ctx_recording_mode(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_recording_mode(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || Ok(recording_mode_code(ctx(h)?.recording_mode())))
}

/// `int fc_graph_builds_ctx(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_builds_ctx(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || {
        let c = ctx(h)?;
        Ok(c_int::from(c.held_builds().unwrap_or_else(|| !c.recordings_capture())))
    })
}

/// `int fc_graph_foreign_begin_ctx(fc_cuda_ctx *ctx, int mode, void **stream_out)`
///
/// # Safety
/// `stream_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_foreign_begin_ctx(
    h: *mut fc_cuda_ctx,
    mode: c_int,
    stream_out: *mut *mut c_void,
) -> c_int {
    status(|| {
        let c = ctx(h)?;
        let stream = c.foreign_held_begin(capture_mode(mode)?)?;
        // SAFETY: NULL or valid for one write, per the contract.
        if let Some(out) = unsafe { stream_out.as_mut() } {
            *out = stream.cast();
        }
        Ok(())
    })
}

/// `int fc_graph_foreign_begin_on_ctx(fc_cuda_ctx *ctx, const fc_cuda_ctx *lane, int mode, void **stream_out)`
///
/// # Safety
/// `stream_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_foreign_begin_on_ctx(
    h: *mut fc_cuda_ctx,
    lane: *const fc_cuda_ctx,
    mode: c_int,
    stream_out: *mut *mut c_void,
) -> c_int {
    status(|| {
        handles::get_all!(c: CContext = h, "ctx"; l: CContext = lane, "lane");
        let stream = c.foreign_held_begin_on(&l, capture_mode(mode)?)?;
        // SAFETY: NULL or valid for one write, per the contract.
        if let Some(out) = unsafe { stream_out.as_mut() } {
            *out = stream.cast();
        }
        Ok(())
    })
}

/// `int fc_graph_foreign_end_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_foreign_end_ctx(h: *mut fc_cuda_ctx) -> c_int {
    status(|| Ok(ctx(h)?.foreign_held_end()?))
}

type ForeignFnPtr = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;

impl CCallback<ForeignFnPtr> {
    fn call(&self, stream: CUstream) -> ::fc_graph::Result<()> {
        // SAFETY: a C function of the fc_foreign_fn type, called on this
        // thread with the stream and the pointer the caller gave, per the
        // header.
        returned("foreign function", unsafe { (self.f)(stream.cast(), self.user) })
    }
}

/// `int fc_graph_record_foreign_ctx(fc_cuda_ctx *ctx, int mode, fc_foreign_fn fn, void *user)`
#[no_mangle]
pub extern "C" fn fc_graph_record_foreign_ctx(
    h: *mut fc_cuda_ctx,
    mode: c_int,
    f: fc_foreign_fn,
    user: *mut c_void,
) -> c_int {
    status(|| {
        let c = ctx(h)?;
        let mode = capture_mode(mode)?;
        let f: ForeignFnPtr = f.ok_or_else(|| Error::invalid("fn is NULL"))?;
        let cb = CCallback { f, user, ctx: h };
        let stream = c.foreign_held_begin(mode)?;
        let ran = cb.call(stream);
        // The section ends also when the function failed; its error first.
        let ended = c.foreign_held_end();
        Ok(ran.and(ended)?)
    })
}

/// `fc_cuda_ctx *fc_ctx_lane(fc_cuda_ctx *ctx, int lane)`
#[no_mangle]
pub extern "C" fn fc_ctx_lane(h: *mut fc_cuda_ctx, lane: c_int) -> *mut fc_cuda_ctx {
    handle_or_null(|| {
        let c = ctx(h)?;
        let lane = usize::try_from(lane).map_err(|_| Error::invalid(format!("lane {lane} is negative")))?;
        handles::insert(CContext::new(c.lane(lane)?))
    })
}

/// `int fc_ctx_lane_index(const fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_ctx_lane_index(h: *const fc_cuda_ctx) -> c_int {
    value(-1, || Ok(c_int::try_from(ctx(h)?.lane_index()).unwrap_or(c_int::MAX)))
}

/// `int fc_ctx_wait_lane(fc_cuda_ctx *ctx, const fc_cuda_ctx *other)`
#[no_mangle]
pub extern "C" fn fc_ctx_wait_lane(h: *mut fc_cuda_ctx, other: *const fc_cuda_ctx) -> c_int {
    status(|| {
        handles::get_all!(c: CContext = h, "ctx"; o: CContext = other, "other");
        Ok(c.wait_lane(&o)?)
    })
}

/// A conditional kind of the header (`FC_COND_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CondKind {
    While,
    Repeat,
    If,
    IfElse,
    Switch,
}

/// The header's `FC_COND_*` value as a kind.
fn cond_kind(kind: c_int) -> Result<CondKind> {
    match u32::try_from(kind) {
        Ok(header::FC_COND_WHILE) => Ok(CondKind::While),
        Ok(header::FC_COND_REPEAT) => Ok(CondKind::Repeat),
        Ok(header::FC_COND_IF) => Ok(CondKind::If),
        Ok(header::FC_COND_IF_ELSE) => Ok(CondKind::IfElse),
        Ok(header::FC_COND_SWITCH) => Ok(CondKind::Switch),
        _ => Err(Error::invalid(format!(
            "unknown conditional kind {kind} (FC_COND_WHILE 0, FC_COND_REPEAT 1, FC_COND_IF 2, FC_COND_IF_ELSE 3, \
             FC_COND_SWITCH 4)"
        ))),
    }
}

/// A kind with its buffer and case count (read for SWITCH only).
fn conditional(kind: CondKind, buf: &::fc_graph::DeviceBuffer, cases: c_uint) -> Conditional<'_> {
    match kind {
        CondKind::While => Conditional::While(buf),
        CondKind::Repeat => Conditional::Repeat(buf),
        CondKind::If => Conditional::If(buf),
        CondKind::IfElse => Conditional::IfElse(buf),
        CondKind::Switch => Conditional::Switch(buf, cases),
    }
}

/// `int fc_graph_cond_begin_ctx(fc_cuda_ctx *ctx, int kind, const fc_buffer *cond, unsigned cases)`
#[no_mangle]
pub extern "C" fn fc_graph_cond_begin_ctx(
    h: *mut fc_cuda_ctx,
    kind: c_int,
    cond: *const fc_buffer,
    cases: c_uint,
) -> c_int {
    status(|| {
        handles::get_all!(c: CContext = h, "ctx"; b: ::fc_graph::DeviceBuffer = cond, "cond");
        Ok(c.conditional_begin(conditional(cond_kind(kind)?, &b, cases))?)
    })
}

/// `int fc_graph_cond_next_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_cond_next_ctx(h: *mut fc_cuda_ctx) -> c_int {
    status(|| Ok(ctx(h)?.conditional_next()?))
}

/// `int fc_graph_cond_end_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_cond_end_ctx(h: *mut fc_cuda_ctx) -> c_int {
    status(|| Ok(ctx(h)?.conditional_end()?))
}

/// `int fc_graph_cond_abort_ctx(fc_cuda_ctx *ctx)`
#[no_mangle]
pub extern "C" fn fc_graph_cond_abort_ctx(h: *mut fc_cuda_ctx) -> c_int {
    status(|| {
        if ctx(h)?.conditional_abort() {
            Ok(())
        } else {
            Err(::fc_graph::Error::capture_state("no conditional is open on this context").into())
        }
    })
}

/// `int fc_cond_support(void)`
#[no_mangle]
pub extern "C" fn fc_cond_support() -> c_int {
    value(-1, || {
        ::fc_graph::driver()?;
        let s = ::fc_graph::conditional::support();
        let mut bits = 0;
        if s.if_while {
            bits |= header::FC_COND_SUPPORT_IF_WHILE;
        }
        if s.switch {
            bits |= header::FC_COND_SUPPORT_SWITCH;
        }
        if s.if_else {
            bits |= header::FC_COND_SUPPORT_IF_ELSE;
        }
        Ok(bits as c_int)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_msg() -> String {
        // SAFETY: fc_last_error returns a NUL-terminated per-thread string.
        unsafe { std::ffi::CStr::from_ptr(crate::fc_last_error()) }.to_string_lossy().into_owned()
    }

    const INVALID_ARGUMENT: c_int = header::FC_ERR_INVALID_ARGUMENT as c_int;

    #[test]
    fn conditional_kinds_map_and_unknown_ones_are_refused() {
        let kinds = [CondKind::While, CondKind::Repeat, CondKind::If, CondKind::IfElse, CondKind::Switch];
        for (code, want) in (0..).zip(kinds) {
            assert_eq!(cond_kind(code).ok(), Some(want), "FC_COND value {code}");
        }
        for bad in [-1, 5, c_int::MAX, c_int::MIN] {
            let e = cond_kind(bad).unwrap_err();
            assert!(
                matches!(e, Error::Lib(::fc_graph::Error::InvalidArgument(ref m)) if m.contains("unknown conditional kind")),
                "{e}"
            );
        }
    }

    #[test]
    fn modes_round_trip_and_unknown_ones_are_refused() {
        for m in [RecordingMode::Auto, RecordingMode::Build, RecordingMode::Capture] {
            assert_eq!(recording_mode(recording_mode_code(m)).ok(), Some(m));
        }
        for bad in [-1, 3, c_int::MAX, c_int::MIN] {
            let e = recording_mode(bad).unwrap_err();
            assert!(
                matches!(e, Error::Lib(::fc_graph::Error::InvalidArgument(ref m)) if m.contains("unknown recording mode")),
                "{e}"
            );
        }
    }

    unsafe extern "C" fn never(_stream: *mut c_void, user: *mut c_void) -> c_int {
        // SAFETY: the test passes a valid `bool`.
        unsafe { *user.cast::<bool>() = true };
        0
    }

    #[test]
    fn null_contexts_are_refused_and_nothing_is_written_or_called() {
        let null = std::ptr::null_mut();
        assert_eq!(fc_ctx_set_recording_mode(null, header::FC_RECORDING_BUILD as c_int), INVALID_ARGUMENT);
        assert!(last_msg().contains("ctx is NULL"), "{}", last_msg());
        assert_eq!(fc_ctx_recording_mode(null), -1);
        assert_eq!(fc_graph_builds_ctx(null), -1);
        assert_eq!(crate::last_error::code(), INVALID_ARGUMENT);
        let mut stream = std::ptr::null_mut::<u8>().wrapping_add(7).cast::<c_void>();
        // SAFETY: a valid out-pointer.
        let rc =
            unsafe { fc_graph_foreign_begin_ctx(null, header::FC_CAPTURE_MODE_THREAD_LOCAL as c_int, &mut stream) };
        assert_eq!((rc, stream.addr()), (INVALID_ARGUMENT, 7), "a refused begin writes nothing");
        assert_eq!(fc_graph_foreign_end_ctx(null), INVALID_ARGUMENT);
        let mut called = false;
        let rc = fc_graph_record_foreign_ctx(null, 1, Some(never), (&mut called as *mut bool).cast());
        assert_eq!((rc, called), (INVALID_ARGUMENT, false), "a refused section calls nothing");
        assert_eq!(fc_graph_record_foreign_ctx(null, 1, None, std::ptr::null_mut()), INVALID_ARGUMENT);
        assert!(last_msg().contains("ctx is NULL"), "the handle is checked first: {}", last_msg());
    }
}

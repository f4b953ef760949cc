//! Conditional nodes (CUDA 12.3+ drivers; SWITCH 12.8+): branches and
//! loops decided on the GPU inside a recording, with no round trip to the
//! host.
//!
//! A conditional is recorded like any other work of a recording that
//! builds its graph ([`crate::recording`]): between
//! [`Context::conditional_begin`] and [`Context::conditional_end`] (or
//! inside the closure of [`Context::while_loop`], [`Context::repeat`],
//! [`Context::if_then`], [`Context::if_else`], [`Context::switch`]), the
//! context's launches, fills, foreign sections, lane forks and joins and
//! nested conditionals go into the node's body instead of the recording.
//! The condition is read from a `u32` in device memory by a built-in
//! setter kernel (one thread) that runs right before the node, after
//! whatever the recording did before; a loop's body ends with the setter
//! again. So a kernel of the recording can compute the condition, and the
//! host never reads it.
//!
//! - [`Conditional::While`]: runs the body while `*flag != 0`, checked
//!   before every iteration (the first included). The body must change the
//!   flag, or the loop never ends.
//! - [`Conditional::Repeat`]: runs the body `*count` times; `count` is read
//!   once per replay, when the node starts (the graph keeps a counter of
//!   its own).
//! - [`Conditional::If`] / [`Conditional::IfElse`]: body 0 when
//!   `*flag != 0`, else body 1 (after [`Context::conditional_next`]; an
//!   else body needs a CUDA 12.8+ driver).
//! - [`Conditional::Switch`]: body `*index` of `cases`, none when
//!   `*index >= cases` (bodies follow each other through
//!   [`Context::conditional_next`]; those never recorded are empty).
//!
//! **Bodies** take what the driver allows in them: kernels, memsets,
//! copies, child graphs (foreign sections, whose captured nodes are checked
//! when the section ends) and nested conditionals. A break, an event record
//! or a recording that captures the stream (rather than building) is
//! refused with an error, and nothing is lost: the recording stays usable.
//!
//! **Threads:** like a recording's work, a body takes the launches of every
//! thread on the context while it is open; begin, next and end may come
//! from any thread, one conditional at a time per nesting level.
//!
//! **Updates:** a re-recording whose conditionals have the same kind and
//! bodies of the same shape (as many ops, each of the same kind, function
//! and dependencies) is applied node by node, bodies included: one driver
//! call per changed kernel or memset, one per setter whose condition
//! address changed (two for a WHILE, whose body ends with a setter too),
//! none when nothing changed. Any other change re-instantiates the segment
//! (a graph with conditional nodes goes to no whole-graph update).

use crate::buffer::DeviceBuffer;
use crate::context::Context;
use crate::driver::driver;
use crate::error::{Error, Result};
use crate::segment::{CondKind, CondOp};

/// The most bodies a SWITCH takes.
pub const MAX_SWITCH_CASES: u32 = 1 << 16;

/// A conditional node and the `u32` in device memory that decides it (see
/// the [module docs](self)). The buffer must be of the recording's context
/// (or share its memory), hold at least 4 bytes and stay allocated while
/// the graph is used.
#[derive(Debug, Clone, Copy)]
pub enum Conditional<'a> {
    /// Loop while `*flag != 0`.
    While(&'a DeviceBuffer),
    /// Run the body `*count` times.
    Repeat(&'a DeviceBuffer),
    /// Run the body if `*flag != 0`.
    If(&'a DeviceBuffer),
    /// Run body 0 if `*flag != 0`, else body 1.
    IfElse(&'a DeviceBuffer),
    /// Run body `*index` of `cases` (1 to [`MAX_SWITCH_CASES`]).
    Switch(&'a DeviceBuffer, u32),
}

impl Conditional<'_> {
    fn parts(&self) -> (CondKind, &DeviceBuffer, usize) {
        match *self {
            Conditional::While(b) => (CondKind::While, b, 1),
            Conditional::Repeat(b) => (CondKind::Repeat, b, 1),
            Conditional::If(b) => (CondKind::If, b, 1),
            Conditional::IfElse(b) => (CondKind::If, b, 2),
            Conditional::Switch(b, n) => (CondKind::Switch, b, n as usize),
        }
    }
}

/// What the loaded driver offers of conditional nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionalSupport {
    /// IF and WHILE nodes (CUDA 12.3+: `cuGraphConditionalHandleCreate` and
    /// `cuGraphAddNode`).
    pub if_while: bool,
    /// SWITCH nodes (CUDA 12.8+).
    pub switch: bool,
    /// IF nodes with an else body (CUDA 12.8+).
    pub if_else: bool,
}

/// What the loaded driver offers (none when no driver loads).
pub fn support() -> ConditionalSupport {
    match driver() {
        Ok(d) => {
            let if_while = d.cuGraphConditionalHandleCreate.is_some() && d.cuGraphAddNode.is_some();
            let v12_8 = if_while && d.driver_version() >= 12080;
            ConditionalSupport { if_while, switch: v12_8, if_else: v12_8 }
        }
        Err(_) => ConditionalSupport { if_while: false, switch: false, if_else: false },
    }
}

impl Context {
    /// Opens conditional node `c` in the open recording (see the [module
    /// docs](self)): the work recorded on this context from now on is its
    /// first body, until [`Context::conditional_next`] or
    /// [`Context::conditional_end`]. The node goes on this handle's lane.
    /// Refused (nothing changes) for a bad buffer or case count, without a
    /// recording that builds, on the lane of an open foreign section, or on
    /// a driver without such nodes, checked in that order (a bad argument
    /// gets its own error on every driver).
    pub fn conditional_begin(&self, c: Conditional<'_>) -> Result<()> {
        let (kind, buf, max_bodies) = c.parts();
        // Bad input first, the driver's support last: a bad argument gets
        // its own error on every driver, not "unsupported" on old ones.
        if kind == CondKind::Switch && (max_bodies == 0 || max_bodies > MAX_SWITCH_CASES as usize) {
            return Err(Error::invalid(format!("a SWITCH takes 1 to {MAX_SWITCH_CASES} cases, not {max_bodies}")));
        }
        self.check_usable("the condition buffer", buf.context())?;
        if buf.size() < 4 {
            return Err(Error::BufferTooSmall(format!(
                "a condition is a u32 (4 bytes); the buffer holds {}",
                buf.size()
            )));
        }
        if buf.as_raw() % 4 != 0 {
            return Err(Error::invalid("the condition buffer is not 4-byte aligned"));
        }
        if !self.records_by_construction() {
            return Err(Error::capture_state(
                "a conditional node needs an open recording that builds its graph (not one that captures the \
                 stream: see RecordingMode), outside foreign sections",
            ));
        }
        if self.recorder().sink().foreign_lane() == Some(self.lane_index()) {
            return Err(Error::capture_state(
                "a conditional node cannot begin on a lane whose foreign section is open; end the section first",
            ));
        }
        let s = support();
        if !s.if_while {
            return Err(Error::Unsupported { feature: "conditional nodes", needs: "a CUDA 12.3+ driver".into() });
        }
        if matches!(c, Conditional::IfElse(_)) && !s.if_else {
            return Err(Error::Unsupported {
                feature: "IF conditional nodes with an else body",
                needs: "a CUDA 12.8+ driver".into(),
            });
        }
        if kind == CondKind::Switch && !s.switch {
            return Err(Error::Unsupported {
                feature: "SWITCH conditional nodes",
                needs: "a CUDA 12.8+ driver".into(),
            });
        }
        let kernels = self.kernels().setters(self.cuda().raw())?;
        let counter = match kind {
            CondKind::Repeat => {
                let c = self.alloc(4)?;
                Some((c.as_raw(), Box::new(c) as Box<dyn Send + Sync>))
            }
            _ => None,
        };
        let cond = Box::new(CondOp { kind, src: buf.as_raw(), bodies: Vec::new(), counter, kernels });
        self.recorder().sink().begin_body(cond, self.lane_index(), max_bodies)
    }

    /// Ends the open body of the innermost conditional and opens its next
    /// one (an IF's else, a SWITCH's next case). Refused when none is open
    /// or every body was recorded.
    pub fn conditional_next(&self) -> Result<()> {
        self.recorder().sink().next_body()
    }

    /// Ends the innermost conditional: it is recorded after the work its
    /// lane recorded before it began.
    pub fn conditional_end(&self) -> Result<()> {
        self.recorder().sink().end_body()
    }

    /// Drops the innermost open conditional with its bodies (nothing of it
    /// is recorded); `false` when none is open.
    pub fn conditional_abort(&self) -> bool {
        self.recorder().sink().abort_body()
    }

    /// How many conditionals are open (nested) in the open recording.
    pub fn conditional_depth(&self) -> usize {
        self.recorder().sink().open_bodies()
    }

    /// Records `c` with one body per call of `body` (its argument the body
    /// index), ending it, or dropping it when a body fails.
    fn conditional_with(
        &self,
        c: Conditional<'_>,
        bodies: usize,
        mut body: impl FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        self.conditional_begin(c)?;
        for i in 0..bodies {
            let step = if i == 0 { Ok(()) } else { self.conditional_next() };
            if let Err(e) = step.and_then(|()| body(i)) {
                self.conditional_abort();
                return Err(e);
            }
        }
        self.conditional_end()
    }

    /// A WHILE node: runs what `body` records while `*flag != 0` (see
    /// [`Conditional::While`]).
    pub fn while_loop(&self, flag: &DeviceBuffer, body: impl FnOnce(&Context) -> Result<()>) -> Result<()> {
        let mut body = Some(body);
        self.conditional_with(Conditional::While(flag), 1, |_| body.take().map_or(Ok(()), |b| b(self)))
    }

    /// A loop that runs what `body` records `*count` times (see
    /// [`Conditional::Repeat`]).
    pub fn repeat(&self, count: &DeviceBuffer, body: impl FnOnce(&Context) -> Result<()>) -> Result<()> {
        let mut body = Some(body);
        self.conditional_with(Conditional::Repeat(count), 1, |_| body.take().map_or(Ok(()), |b| b(self)))
    }

    /// An IF node: runs what `then` records if `*flag != 0`.
    pub fn if_then(&self, flag: &DeviceBuffer, then: impl FnOnce(&Context) -> Result<()>) -> Result<()> {
        let mut then = Some(then);
        self.conditional_with(Conditional::If(flag), 1, |_| then.take().map_or(Ok(()), |b| b(self)))
    }

    /// An IF node with an else body.
    pub fn if_else(
        &self,
        flag: &DeviceBuffer,
        then: impl FnOnce(&Context) -> Result<()>,
        otherwise: impl FnOnce(&Context) -> Result<()>,
    ) -> Result<()> {
        let (mut then, mut otherwise) = (Some(then), Some(otherwise));
        self.conditional_with(Conditional::IfElse(flag), 2, |i| {
            let b = if i == 0 { then.take().map(|f| f(self)) } else { otherwise.take().map(|f| f(self)) };
            b.unwrap_or(Ok(()))
        })
    }

    /// A SWITCH node: runs what `case(i, ctx)` recorded for `i = *index`
    /// (nothing when `*index >= cases`).
    pub fn switch(
        &self,
        index: &DeviceBuffer,
        cases: u32,
        mut case: impl FnMut(u32, &Context) -> Result<()>,
    ) -> Result<()> {
        self.conditional_with(Conditional::Switch(index, cases), cases as usize, |i| case(i as u32, self))
    }
}

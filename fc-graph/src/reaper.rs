//! Deferred destruction of graphs nobody needs any more (the source graph
//! an in-place update replaced). `cuGraphDestroy` costs time in proportion
//! to the graph's nodes (about 0.2 µs a node on an H200), so a background
//! thread does it, off the caller's critical path. The message keeps the
//! graph's context alive until then.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use cuda_sys::CUgraph;

use crate::context::Context;
use crate::graph::destroy_graph;

/// A graph to destroy and the context it came from.
struct Retired {
    ctx: Context,
    graph: CUgraph,
}

// SAFETY: graph handles may be destroyed from any thread, and this message
// is the graph's only owner.
unsafe impl Send for Retired {}

static PENDING: AtomicUsize = AtomicUsize::new(0);
static REAPER: OnceLock<Option<Sender<Retired>>> = OnceLock::new();

fn destroy_now(r: Retired) {
    destroy_graph(r.ctx.raw_context(), r.graph);
    PENDING.fetch_sub(1, Ordering::SeqCst);
}

/// The reaper thread's queue, started on first use (`None` if no thread
/// could be started: then graphs are destroyed right away).
fn queue() -> Option<&'static Sender<Retired>> {
    REAPER
        .get_or_init(|| {
            let (tx, rx) = channel::<Retired>();
            std::thread::Builder::new()
                .name("fc-graph-reaper".into())
                .spawn(move || rx.into_iter().for_each(destroy_now))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Destroys `graph` soon, on the reaper thread.
pub(crate) fn destroy_later(ctx: &Context, graph: CUgraph) {
    PENDING.fetch_add(1, Ordering::SeqCst);
    let r = Retired { ctx: ctx.clone(), graph };
    match queue() {
        Some(tx) => {
            if let Err(e) = tx.send(r) {
                destroy_now(e.0);
            }
        }
        None => destroy_now(r),
    }
}

/// Graphs handed to the reaper and not destroyed yet.
pub fn pending_graph_destroys() -> usize {
    PENDING.load(Ordering::SeqCst)
}

//! Graph-cache rows of `fc-bench` (issue 10): the host cost of a cache hit
//! next to a bare launch of the same graph, in one loop, alternating.
//!
//! | row                          | what is timed (host monotonic clock)                        |
//! |------------------------------|-------------------------------------------------------------|
//! | `cache_hit_host`             | `GraphCache::run` of a cached key (a hit: replays its graph) |
//! | `graph_launch_host_paired`   | `graph.launch()` of an identical graph, same iterations      |
//! | `cache_hit_overhead_us`      | per-iteration `cache_hit_host - graph_launch_host_paired`;   |
//! |                              | median and p10/p90 of the paired differences (goal <= 0.2)  |
//!
//! Both graphs hold the K=26 chain kernels. The stream is synchronised
//! every 64 iterations (outside the timers) so launches never wait for
//! queue space.

use std::time::Instant;

use fc_graph::cache::{CacheConfig, GraphCache, Outcome};
use fc_graph::{Error, Result};

use serde_json::json;

use fc_bench::chain::Chain;
use fc_bench::stats::{no_extra, us_since, Summary};

use crate::multi_gpu::MULTI_GPU_KERNELS;
use crate::print::{emit_row_with, print_row};
use crate::Check;

/// Goal of issue 10: a hit costs at most this much more than a bare launch.
const HIT_OVERHEAD_GOAL_US: f64 = 0.2;

/// Emits the three cache rows for the K=26 chain of `c`.
pub(crate) fn bench_cache_hit(c: &Chain, warmup: usize, iters: usize) -> Result<()> {
    let k = MULTI_GPU_KERNELS;
    let graph = c.capture(k)?;
    let cache: GraphCache<u64> = GraphCache::new(&c.ctx, CacheConfig::default())?;
    let key = k as u64;
    c.reset()?;
    let first = cache.run(&key, &(), |_| c.enqueue(k))?;
    if first != Outcome::Captured {
        return Err(Error::invalid(format!("cache_hit: first call was {first:?}, not Captured")));
    }
    c.check(k, "cache capture + launch")?;
    c.reset()?;
    if cache.run(&key, &(), |_| c.enqueue(k))? != Outcome::Hit {
        return Err(Error::invalid("cache_hit: second call was not a hit"));
    }
    c.check(k, "cache hit")?;
    for _ in 0..warmup {
        cache.run(&key, &(), |_| c.enqueue(k))?;
        graph.launch()?;
        c.ctx.synchronize()?;
    }
    let (mut hit, mut bare, mut diff) = (Vec::with_capacity(iters), Vec::with_capacity(iters), Vec::new());
    for i in 0..iters {
        let t0 = Instant::now();
        let o = cache.run(&key, &(), |_| c.enqueue(k))?;
        let t1 = Instant::now();
        graph.launch()?;
        let t2 = Instant::now();
        if o != Outcome::Hit {
            return Err(Error::invalid(format!("cache_hit: iteration {i} was {o:?}")));
        }
        hit.push(us_since(t0, t1));
        bare.push(us_since(t1, t2));
        diff.push(us_since(t0, t1) - us_since(t1, t2));
        if i % 64 == 63 {
            c.ctx.synchronize()?;
        }
    }
    c.ctx.synchronize()?;
    let stats = cache.stats()?;
    emit_row_with("cache_hit_host", k, &mut hit, json!({"hits": stats.hits, "misses": stats.misses}));
    emit_row_with("graph_launch_host_paired", k, &mut bare, no_extra());
    let s = Summary::of(&mut diff);
    let verdict = if s.median <= HIT_OVERHEAD_GOAL_US { "met" } else { "missed" };
    print_row("cache_hit_overhead_us", k, &s, json!({"goal_us": HIT_OVERHEAD_GOAL_US, "goal": verdict}));
    Ok(())
}

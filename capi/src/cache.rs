//! Graph cache exports: a keyed cache of graphs on one context
//! (`fc_graph::GraphCache` over captures held by the context).

use std::os::raw::{c_char, c_int, c_void};
use std::time::Duration;

use ::fc_graph::cache::{CacheConfig, CacheStats, GraphCache, Outcome};

use super::context::ctx;
use super::error::{Error, Result};
use super::graph::{c_path, capture_mode};
use super::handles::{self, handle_kind};
use super::header::{self, fc_cuda_ctx, fc_graph_cache, fc_graph_cache_config, fc_graph_cache_stats, fc_record_fn};
use super::held::{HeldBackend, LivePtr};
use super::{fail, handle_or_null, release, status, value};

/// What an `fc_graph_cache *` stands for: the cache and the context handle
/// its record functions receive.
pub(crate) struct CCache {
    cache: GraphCache<u64, LivePtr>,
    /// The `fc_cuda_ctx *` the cache was made with (a handle value, not an
    /// address).
    ctx_handle: usize,
}

handle_kind!(CCache => fc_graph_cache, "fc_graph_cache");

fn cache(h: *const fc_graph_cache) -> Result<super::handles::Live<CCache>> {
    handles::get::<CCache>(h, "cache")
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

fn default_config() -> fc_graph_cache_config {
    let d = CacheConfig::default();
    fc_graph_cache_config {
        max_entries: d.max_entries,
        max_bytes: d.max_bytes,
        warmup: c_int::from(d.warmup),
        max_tries: c_int::try_from(d.max_tries).unwrap_or(c_int::MAX),
        fail_threshold: c_int::try_from(d.fail_threshold).unwrap_or(c_int::MAX),
        backoff_ms: millis(d.backoff),
        max_backoff_ms: millis(d.max_backoff),
        mode: header::FC_CAPTURE_MODE_THREAD_LOCAL as c_int,
    }
}

fn at_least_one(v: c_int, what: &str) -> Result<u32> {
    u32::try_from(v)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| Error::invalid(format!("{what} must be at least 1, got {v}")))
}

fn config(c: &fc_graph_cache_config) -> Result<CacheConfig> {
    let cfg = CacheConfig {
        max_entries: c.max_entries,
        max_bytes: c.max_bytes,
        warmup: c.warmup != 0,
        max_tries: at_least_one(c.max_tries, "max_tries")?,
        fail_threshold: at_least_one(c.fail_threshold, "fail_threshold")?,
        backoff: Duration::from_millis(u64::from(c.backoff_ms)),
        max_backoff: Duration::from_millis(u64::from(c.max_backoff_ms)),
        mode: capture_mode(c.mode)?,
    };
    cfg.validate()?;
    Ok(cfg)
}

fn outcome_code(o: Outcome) -> c_int {
    let code = match o {
        Outcome::Hit => header::FC_CACHE_HIT,
        Outcome::Captured => header::FC_CACHE_CAPTURED,
        Outcome::WarmedUp => header::FC_CACHE_WARMED_UP,
        Outcome::Refreshed => header::FC_CACHE_REFRESHED,
        Outcome::EagerAfterFailure => header::FC_CACHE_EAGER_FAILED,
        Outcome::EagerBackoff => header::FC_CACHE_EAGER_BACKOFF,
    };
    code as c_int
}

fn c_stats(s: &CacheStats) -> fc_graph_cache_stats {
    fc_graph_cache_stats {
        hits: s.hits,
        misses: s.misses,
        captures: s.captures,
        updates: s.updates,
        reinstantiations: s.reinstantiations,
        fallbacks: s.fallbacks,
        failures: s.failures,
        evictions: s.evictions,
        entries: s.entries,
        graphs: s.graphs,
        bytes: s.bytes,
    }
}

/// `void fc_graph_cache_config_default(fc_graph_cache_config *cfg)`
///
/// # Safety
/// `cfg` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_cache_config_default(cfg: *mut fc_graph_cache_config) {
    let _ = status(|| {
        // SAFETY: NULL or valid for one write, per the contract.
        let out = unsafe { cfg.as_mut() }.ok_or_else(|| Error::invalid("cfg is NULL"))?;
        *out = default_config();
        Ok(())
    });
}

/// `fc_graph_cache *fc_graph_cache_new(fc_cuda_ctx *ctx, const fc_graph_cache_config *cfg)`
///
/// # Safety
/// `cfg` is NULL or valid for one read.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_cache_new(
    c: *mut fc_cuda_ctx,
    cfg: *const fc_graph_cache_config,
) -> *mut fc_graph_cache {
    handle_or_null(|| {
        let context = ctx(c)?;
        // SAFETY: NULL or valid for one read, per the contract.
        let cfg = match unsafe { cfg.as_ref() } {
            Some(c) => config(c)?,
            None => CacheConfig::default(),
        };
        handles::insert(CCache { cache: GraphCache::new(&context, cfg)?, ctx_handle: c as usize })
    })
}

/// `void fc_graph_cache_free(fc_graph_cache *cache)`
#[no_mangle]
pub extern "C" fn fc_graph_cache_free(h: *mut fc_graph_cache) {
    release(h, |h| handles::remove::<CCache>(h, "cache").map(drop))
}

/// `int fc_graph_cache_run(fc_graph_cache *cache, uint64_t key, fc_record_fn record, void *user, void *live, int *outcome)`
///
/// # Safety
/// `outcome` is NULL or valid for one write; `record` follows the header's
/// rules for record functions.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_cache_run(
    h: *mut fc_graph_cache,
    key: u64,
    record: fc_record_fn,
    user: *mut c_void,
    live: *mut c_void,
    outcome: *mut c_int,
) -> c_int {
    // SAFETY: NULL or valid for one write, per the contract.
    let mut outcome = unsafe { outcome.as_mut() };
    if let Some(o) = outcome.as_deref_mut() {
        *o = -1;
    }
    let mut result = None;
    let rc = status(|| {
        let c = cache(h)?;
        let record = record.ok_or_else(|| Error::invalid("record is NULL"))?;
        let ctx_handle = c.ctx_handle as *mut fc_cuda_ctx;
        let cctx = ctx(ctx_handle).map_err(|e| match e {
            Error::InvalidHandle(m) => Error::InvalidHandle(format!(
                "the cache's context handle, which its record function receives: {m}; free the cache before its \
                 context"
            )),
            other => other,
        })?;
        let (mode, max_tries) = c.cache.capture_settings()?;
        let record = || {
            // SAFETY: a C function of the fc_record_fn type, called with the
            // context handle and `user` the caller gave, per the header.
            match unsafe { record(ctx_handle, user) } {
                0 => Ok(()),
                rc => Err(::fc_graph::Error::Callback(format!("record function returned {rc}"))),
            }
        };
        let mut backend = HeldBackend { cctx: &cctx, mode, max_tries, live: LivePtr(live), record };
        let o = c.cache.run_with(&key, &mut backend)?;
        if o == Outcome::EagerAfterFailure {
            result = c.cache.last_failure(&key)?;
        }
        if let Some(out) = outcome {
            *out = outcome_code(o);
        }
        Ok(())
    });
    // The call succeeded; the capture's failure is left for fc_last_error().
    if let Some(e) = result {
        fail(&e.into());
    }
    rc
}

/// `int fc_graph_cache_invalidate(fc_graph_cache *cache, uint64_t key)`
#[no_mangle]
pub extern "C" fn fc_graph_cache_invalidate(h: *mut fc_graph_cache, key: u64) -> c_int {
    status(|| {
        cache(h)?.cache.invalidate(&key)?;
        Ok(())
    })
}

/// `int fc_graph_cache_invalidate_all(fc_graph_cache *cache)`
#[no_mangle]
pub extern "C" fn fc_graph_cache_invalidate_all(h: *mut fc_graph_cache) -> c_int {
    status(|| {
        cache(h)?.cache.invalidate_all()?;
        Ok(())
    })
}

/// `int fc_graph_cache_remove(fc_graph_cache *cache, uint64_t key)`
#[no_mangle]
pub extern "C" fn fc_graph_cache_remove(h: *mut fc_graph_cache, key: u64) -> c_int {
    status(|| {
        cache(h)?.cache.remove(&key)?;
        Ok(())
    })
}

/// `int fc_graph_cache_clear(fc_graph_cache *cache)`
#[no_mangle]
pub extern "C" fn fc_graph_cache_clear(h: *mut fc_graph_cache) -> c_int {
    status(|| Ok(cache(h)?.cache.clear()?))
}

/// `int fc_graph_cache_stats_get(const fc_graph_cache *cache, fc_graph_cache_stats *out)`
///
/// # Safety
/// `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_cache_stats_get(h: *const fc_graph_cache, out: *mut fc_graph_cache_stats) -> c_int {
    status(|| {
        let s = cache(h)?.cache.stats()?;
        // SAFETY: NULL or valid for one write, per the contract.
        let out = unsafe { out.as_mut() }.ok_or_else(|| Error::invalid("out is NULL"))?;
        *out = c_stats(&s);
        Ok(())
    })
}

fn no_graph(key: u64) -> Error {
    Error::invalid(format!("graph cache: key {key} has no cached graph"))
}

/// `size_t fc_graph_cache_node_count(const fc_graph_cache *cache, uint64_t key)`
#[no_mangle]
pub extern "C" fn fc_graph_cache_node_count(h: *const fc_graph_cache, key: u64) -> usize {
    value(0, || cache(h)?.cache.node_count(&key)?.ok_or_else(|| no_graph(key)))
}

/// `int fc_graph_cache_debug_dot(const fc_graph_cache *cache, uint64_t key, const char *path)`
///
/// # Safety
/// `path` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fc_graph_cache_debug_dot(h: *const fc_graph_cache, key: u64, path: *const c_char) -> c_int {
    status(|| {
        let c = cache(h)?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_path(path) }?;
        c.cache.with_graph(&key, |g| g.debug_dot(&path))?.ok_or_else(|| no_graph(key))
    })
}

/// Handles of this module's kinds alive now.
pub(crate) fn live_handles() -> usize {
    <CCache as super::handles::Kind>::table().live()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_and_bad_configs_are_refused() {
        let mut c = default_config();
        // SAFETY: a valid out-pointer.
        unsafe { fc_graph_cache_config_default(&mut c) };
        assert_eq!(config(&c).unwrap(), CacheConfig::default());
        for (tweak, want) in [
            ((|c: &mut fc_graph_cache_config| c.max_tries = 0) as fn(&mut _), "max_tries must be at least 1"),
            (|c| c.fail_threshold = -1, "fail_threshold must be at least 1"),
            (|c| c.max_backoff_ms = c.backoff_ms - 1, "max_backoff"),
            (|c| c.mode = 7, "unknown capture mode 7"),
        ] {
            let mut bad = default_config();
            tweak(&mut bad);
            let e = config(&bad).unwrap_err();
            assert!(matches!(e, Error::Lib(::fc_graph::Error::InvalidArgument(ref m)) if m.contains(want)), "{e}");
        }
        let mut warm = default_config();
        warm.warmup = 5;
        warm.mode = header::FC_CAPTURE_MODE_RELAXED as c_int;
        let cfg = config(&warm).unwrap();
        assert!(cfg.warmup);
        assert_eq!(cfg.mode, ::fc_graph::CaptureMode::Relaxed);
    }

    #[test]
    fn outcome_codes_are_distinct() {
        let all = [
            Outcome::Hit,
            Outcome::Captured,
            Outcome::WarmedUp,
            Outcome::Refreshed,
            Outcome::EagerAfterFailure,
            Outcome::EagerBackoff,
        ];
        let mut codes: Vec<c_int> = all.iter().map(|&o| outcome_code(o)).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
    }

    #[test]
    fn bad_handles_and_nulls_are_refused() {
        let mut o = 3;
        // SAFETY: valid out-pointer; a NULL cache is refused before use.
        let rc = unsafe {
            fc_graph_cache_run(std::ptr::null_mut(), 1, None, std::ptr::null_mut(), std::ptr::null_mut(), &mut o)
        };
        assert_eq!(rc, header::FC_ERR_INVALID_ARGUMENT as c_int);
        assert_eq!(o, -1, "outcome is -1 on failure");
        assert_eq!(fc_graph_cache_invalidate(std::ptr::null_mut(), 1), header::FC_ERR_INVALID_ARGUMENT as c_int);
        let mut s = c_stats(&CacheStats::default());
        assert_eq!(
            // SAFETY: valid out-pointer.
            unsafe { fc_graph_cache_stats_get(std::ptr::null(), &mut s) },
            header::FC_ERR_INVALID_ARGUMENT as c_int
        );
        // SAFETY: NULL is refused.
        assert!(unsafe { fc_graph_cache_new(std::ptr::null_mut(), std::ptr::null()) }.is_null());
        // SAFETY: NULL is refused with an error.
        unsafe { fc_graph_cache_config_default(std::ptr::null_mut()) };
        assert_eq!(crate::last_error::code(), header::FC_ERR_INVALID_ARGUMENT as c_int);
        fc_graph_cache_free(std::ptr::null_mut());
    }
}

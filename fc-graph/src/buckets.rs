//! Token buckets for prefill CUDA graphs, and a GPU-agnostic bucketed runner.
//!
//! A prefill graph is captured for a fixed number of tokens (a *bucket*). A
//! batch of `n` real tokens is padded up to the smallest bucket `>= n`, run
//! through that bucket's graph, and the padded tail is scrubbed / sliced off.
//!
//! # Ladder rule
//!
//! The effective maximum is `M = min(max_tokens, chunk_size)` (a `chunk_size`
//! of `None` or `0` means "no chunking limit"). No buckets are produced when
//! the ladder is disabled or `M == 0`. Otherwise the rungs are:
//!
//! * powers of two `1, 2, 4, 8, 16`;
//! * then steps of 16: `32, 48, ..., 256`;
//! * then, from a rung `b >= 256`, the next rung is `b + step(b)` with
//!   `step(b) = min(512, max(16, (b / 8) rounded down to a multiple of 16))`;
//! * every rung strictly below `M` is kept and the ladder ends with `M`
//!   exactly.
//!
//! Because the rung that would follow the last kept rung `r` is `>= M`, the
//! final gap `M - r` is at most `step(r)`, so every gap obeys
//! `gap <= 512` and, for `b >= 256`, `gap <= max(b / 8, 16)`.
//!
//! For `M = 2048` the ladder is
//! `1, 2, 4, 8, 16, 32, 48, ..., 256, 288, 320, 352, 384, 432, 480, 528, 592,
//! 656, 736, 816, 912, 1024, 1152, 1296, 1456, 1632, 1824, 2048`.
//!
//! Explicit sizes: zeros are dropped, every size is clamped to `M`, `M` itself
//! is always included, and the result is sorted and deduplicated.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

/// Largest gap allowed anywhere in the generated ladder.
const MAX_STEP: usize = 512;
/// Smallest step used above the dense region.
const MIN_STEP: usize = 16;
/// Upper end of the dense (step-16) region.
const DENSE_TOP: usize = 256;

/// Configuration of the prefill token-bucket ladder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketConfig {
    /// Largest number of tokens a prefill graph is captured for (0 disables).
    pub max_tokens: usize,
    /// Disables prefill graphs altogether.
    pub disabled: bool,
    /// Chunked-prefill size; `None` or `Some(0)` means no chunking limit.
    pub chunk_size: Option<usize>,
    /// Explicit capture sizes replacing the generated ladder.
    pub explicit_sizes: Option<Vec<usize>>,
}

impl Default for BucketConfig {
    /// Mirrors the reference base config: 2048 tokens, enabled, chunk 2048,
    /// no explicit sizes.
    fn default() -> Self {
        BucketConfig { max_tokens: 2048, disabled: false, chunk_size: Some(2048), explicit_sizes: None }
    }
}

/// Effective maximum bucket: `max_tokens` clamped to the chunk size (if any).
pub fn effective_max(cfg: &BucketConfig) -> usize {
    match cfg.chunk_size {
        Some(chunk) if chunk > 0 => cfg.max_tokens.min(chunk),
        _ => cfg.max_tokens,
    }
}

/// Step from rung `b` (only used for `b >= 256`).
fn step_from(b: usize) -> usize {
    let eighth = (b / 8) / MIN_STEP * MIN_STEP;
    eighth.clamp(MIN_STEP, MAX_STEP)
}

/// The rung following `b` on the unbounded ladder.
fn next_rung(b: usize) -> usize {
    if b < MIN_STEP {
        b * 2
    } else if b < DENSE_TOP {
        b + MIN_STEP
    } else {
        // Saturating: near usize::MAX the ladder ends instead of wrapping.
        b.saturating_add(step_from(b))
    }
}

/// Generated ladder ending exactly at `max` (`max > 0`).
fn ladder(max: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut b = 1;
    while b < max {
        out.push(b);
        b = next_rung(b);
    }
    out.push(max);
    out
}

/// Explicit sizes: zeros dropped, clamped to `max`, `max` included, sorted,
/// deduplicated.
fn explicit_ladder(sizes: &[usize], max: usize) -> Vec<usize> {
    let mut out: Vec<usize> = sizes.iter().filter(|&&s| s > 0).map(|&s| s.min(max)).collect();
    out.push(max);
    out.sort_unstable();
    out.dedup();
    out
}

/// Token buckets for prefill graphs, sorted strictly increasing.
///
/// Empty when disabled or when the effective maximum is 0; see the module
/// documentation for the ladder rule.
pub fn token_buckets(cfg: &BucketConfig) -> Vec<usize> {
    let max = effective_max(cfg);
    if cfg.disabled || max == 0 {
        return Vec::new();
    }
    match &cfg.explicit_sizes {
        Some(sizes) => explicit_ladder(sizes, max),
        None => ladder(max),
    }
}

/// Smallest bucket `>= n` in a sorted bucket list.
///
/// `None` when the list is empty or `n` exceeds the top bucket. `n == 0`
/// yields the first (smallest) bucket.
pub fn bucket_for(buckets: &[usize], n: usize) -> Option<usize> {
    let idx = buckets.partition_point(|&b| b < n);
    buckets.get(idx).copied()
}

/// Rows `num_real..rows` of a padded buffer (the padding to scrub), or `None`
/// when the buffer is not padded (`rows <= num_real`).
pub fn padded_tail_range(rows: usize, num_real: usize) -> Option<Range<usize>> {
    if rows > num_real {
        Some(num_real..rows)
    } else {
        None
    }
}

/// Number of rows holding real tokens: `min(rows, num_real)`.
pub fn real_rows(rows: usize, num_real: usize) -> usize {
    rows.min(num_real)
}

/// Errors of bucket validation and lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketError {
    /// The bucket list is empty.
    Empty,
    /// A bucket of size zero was given.
    ZeroBucket,
    /// `buckets[index]` is not greater than the bucket before it.
    NotIncreasing {
        /// The offending position.
        index: usize,
    },
    /// `n` is zero or above the top bucket.
    OutOfRange {
        /// The size asked for.
        n: usize,
        /// The largest bucket.
        top: usize,
    },
}

impl fmt::Display for BucketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketError::Empty => write!(f, "bucket list is empty"),
            BucketError::ZeroBucket => write!(f, "bucket list contains a zero bucket"),
            BucketError::NotIncreasing { index } => {
                write!(f, "bucket list is not strictly increasing at index {index}")
            }
            BucketError::OutOfRange { n, top } => {
                write!(f, "token count {n} is outside the bucket range 1..={top}")
            }
        }
    }
}

impl std::error::Error for BucketError {}

/// Lazily captures one graph `G` per bucket and replays it.
#[derive(Debug)]
pub struct BucketedRunner<G> {
    buckets: Vec<usize>,
    captured: BTreeMap<usize, G>,
}

impl<G> BucketedRunner<G> {
    /// Creates a runner; `buckets` must be non-empty, strictly increasing and
    /// free of zeros.
    pub fn new(buckets: Vec<usize>) -> Result<Self, BucketError> {
        if buckets.is_empty() {
            return Err(BucketError::Empty);
        }
        if buckets.contains(&0) {
            return Err(BucketError::ZeroBucket);
        }
        if let Some(i) = (1..buckets.len()).find(|&i| buckets[i] <= buckets[i - 1]) {
            return Err(BucketError::NotIncreasing { index: i });
        }
        Ok(BucketedRunner { buckets, captured: BTreeMap::new() })
    }

    /// The bucket sizes, strictly increasing.
    pub fn buckets(&self) -> &[usize] {
        &self.buckets
    }

    /// Buckets captured so far, increasing.
    pub fn captured_buckets(&self) -> Vec<usize> {
        self.captured.keys().copied().collect()
    }

    /// The graph captured for `bucket`, if any.
    pub fn get(&self, bucket: usize) -> Option<&G> {
        self.captured.get(&bucket)
    }

    /// Pads `n` to its bucket and runs that bucket's graph.
    ///
    /// The first time a bucket is used, `capture(bucket)` builds its graph
    /// (capture does not execute work), which is then replayed right away;
    /// later calls only `replay(&mut graph, bucket)`. Returns the bucket used.
    ///
    /// Errors: `n == 0` or `n` above the top bucket gives
    /// [`BucketError::OutOfRange`] without capturing. A capture error leaves
    /// the bucket uncaptured (the next call retries); a replay error leaves
    /// the captured graph in place. Both pass through unchanged.
    pub fn run<E: From<BucketError>>(
        &mut self,
        n: usize,
        capture: impl FnOnce(usize) -> Result<G, E>,
        replay: impl FnOnce(&mut G, usize) -> Result<(), E>,
    ) -> Result<usize, E> {
        let top = self.buckets.last().copied().unwrap_or(0);
        let bucket = match bucket_for(&self.buckets, n) {
            Some(b) if n > 0 => b,
            _ => return Err(BucketError::OutOfRange { n, top }.into()),
        };
        let graph = match self.captured.entry(bucket) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(capture(bucket)?),
        };
        replay(graph, bucket)?;
        Ok(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn cfg(max_tokens: usize, chunk: Option<usize>) -> BucketConfig {
        BucketConfig { max_tokens, chunk_size: chunk, ..BucketConfig::default() }
    }

    /// Checks all reference properties; returns a description on failure.
    fn check_ladder(b: &[usize], max: usize) -> Result<(), String> {
        if b.last() != Some(&max) {
            return Err(format!("max {max}: last is {:?}", b.last()));
        }
        for w in b.windows(2) {
            let (b1, b2) = (w[0], w[1]);
            if b2 <= b1 {
                return Err(format!("max {max}: not increasing {b1} {b2}"));
            }
            let gap = b2 - b1;
            if gap > 512 {
                return Err(format!("max {max}: gap {gap} after {b1} > 512"));
            }
            if b1 >= 256 && gap > (b1 / 8).max(16) {
                return Err(format!("max {max}: gap {gap} after {b1} too big"));
            }
        }
        Ok(())
    }

    #[test]
    fn default_matches_reference_base() {
        let c = BucketConfig::default();
        assert_eq!(c.max_tokens, 2048);
        assert!(!c.disabled);
        assert_eq!(c.chunk_size, Some(2048));
        assert_eq!(c.explicit_sizes, None);
    }

    #[test]
    fn disabled_by_zero_max() {
        assert_eq!(token_buckets(&cfg(0, Some(2048))), Vec::<usize>::new());
    }

    #[test]
    fn disabled_by_flag() {
        let c = BucketConfig { disabled: true, ..BucketConfig::default() };
        assert_eq!(token_buckets(&c), Vec::<usize>::new());
    }

    #[test]
    fn clamped_to_chunk() {
        let b = token_buckets(&cfg(8192, Some(2048)));
        assert_eq!(b.last(), Some(&2048));
        assert!(b.iter().all(|&x| x <= 2048));
    }

    #[test]
    fn no_chunk_limit() {
        assert_eq!(token_buckets(&cfg(3000, None)).last(), Some(&3000));
        assert_eq!(token_buckets(&cfg(3000, Some(0))).last(), Some(&3000));
    }

    #[test]
    fn reference_sizes_8192_2048_1500() {
        for max in [8192, 2048, 1500] {
            let b = token_buckets(&cfg(max, Some(max)));
            assert_eq!(b.last(), Some(&max));
            let mut d = b.clone();
            d.dedup();
            assert_eq!(d, b);
            if let Err(e) = check_ladder(&b, max) {
                panic!("{e}");
            }
        }
    }

    /// Near usize::MAX the rungs saturate instead of wrapping around.
    #[test]
    fn rungs_never_wrap() {
        assert_eq!(next_rung(usize::MAX - 100), usize::MAX);
        assert_eq!(next_rung(usize::MAX), usize::MAX);
        assert!(next_rung(usize::MAX / 2) > usize::MAX / 2);
    }

    #[test]
    fn ladder_for_2048() {
        let mut want = vec![1, 2, 4, 8];
        want.extend((16..=256).step_by(16));
        want.extend([
            288, 320, 352, 384, 432, 480, 528, 592, 656, 736, 816, 912, 1024, 1152, 1296, 1456, 1632, 1824, 2048,
        ]);
        assert_eq!(token_buckets(&BucketConfig::default()), want);
    }

    #[test]
    #[cfg_attr(miri, ignore = "20000 ladders take hours under Miri; safe arithmetic only, run natively")]
    fn exhaustive_properties() {
        for max in 1..=20000 {
            let b = token_buckets(&cfg(max, Some(max)));
            if let Err(e) = check_ladder(&b, max) {
                panic!("{e}");
            }
            assert_eq!(b[0], 1);
        }
    }

    #[test]
    fn explicit_reference_case() {
        let c = BucketConfig { explicit_sizes: Some(vec![256, 1024, 4096]), ..BucketConfig::default() };
        assert_eq!(token_buckets(&c), vec![256, 1024, 2048]);
    }

    #[test]
    fn explicit_edge_cases() {
        let with = |v: Vec<usize>| BucketConfig { explicit_sizes: Some(v), ..BucketConfig::default() };
        assert_eq!(token_buckets(&with(vec![])), vec![2048]);
        assert_eq!(token_buckets(&with(vec![0, 0, 64])), vec![64, 2048]);
        assert_eq!(token_buckets(&with(vec![512, 64, 512, 2048, 9999, 64])), vec![64, 512, 2048]);
        let disabled = BucketConfig { disabled: true, ..with(vec![64]) };
        assert_eq!(token_buckets(&disabled), Vec::<usize>::new());
        let zero = BucketConfig { max_tokens: 0, ..with(vec![64]) };
        assert_eq!(token_buckets(&zero), Vec::<usize>::new());
    }

    #[test]
    fn bucket_for_cases() {
        let b = [4, 8, 16];
        assert_eq!(bucket_for(&b, 0), Some(4));
        assert_eq!(bucket_for(&b, 1), Some(4));
        assert_eq!(bucket_for(&b, 4), Some(4));
        assert_eq!(bucket_for(&b, 5), Some(8));
        assert_eq!(bucket_for(&b, 16), Some(16));
        assert_eq!(bucket_for(&b, 17), None);
        assert_eq!(bucket_for(&[], 1), None);
    }

    #[test]
    fn padding_helpers() {
        assert_eq!(padded_tail_range(8, 5), Some(5..8));
        assert_eq!(padded_tail_range(8, 8), None);
        assert_eq!(padded_tail_range(4, 8), None);
        assert_eq!(real_rows(8, 5), 5);
        assert_eq!(real_rows(4, 8), 4);
    }

    #[test]
    fn runner_rejects_bad_buckets() {
        assert_eq!(BucketedRunner::<()>::new(vec![]).err(), Some(BucketError::Empty));
        assert_eq!(BucketedRunner::<()>::new(vec![0, 4]).err(), Some(BucketError::ZeroBucket));
        assert_eq!(BucketedRunner::<()>::new(vec![4, 8, 8]).err(), Some(BucketError::NotIncreasing { index: 2 }));
        assert_eq!(BucketedRunner::<()>::new(vec![8, 4]).err(), Some(BucketError::NotIncreasing { index: 1 }));
    }

    #[derive(Debug, PartialEq)]
    enum TestErr {
        Bucket(BucketError),
        Capture,
    }

    impl From<BucketError> for TestErr {
        fn from(e: BucketError) -> Self {
            TestErr::Bucket(e)
        }
    }

    /// Graph stand-in: its bucket and how often it was replayed.
    #[derive(Debug)]
    struct FakeGraph {
        bucket: usize,
        replays: usize,
    }

    #[test]
    fn runner_captures_lazily_and_replays() {
        let mut r = BucketedRunner::new(vec![4, 8, 16]).unwrap();
        let captures = RefCell::new(Vec::new());
        let mut replays = 0;
        let mut used = Vec::new();
        for n in [3, 4, 5, 8, 11, 16, 1] {
            let b = r
                .run::<TestErr>(
                    n,
                    |b| {
                        captures.borrow_mut().push(b);
                        Ok(FakeGraph { bucket: b, replays: 0 })
                    },
                    |g, b| {
                        assert_eq!(g.bucket, b);
                        g.replays += 1;
                        replays += 1;
                        Ok(())
                    },
                )
                .unwrap();
            used.push(b);
        }
        assert_eq!(*captures.borrow(), vec![4, 8, 16]);
        assert_eq!(captures.borrow().len(), 3);
        assert_eq!(replays, 7);
        assert_eq!(used, vec![4, 4, 8, 8, 16, 16, 4]);
        assert_eq!(r.captured_buckets(), vec![4, 8, 16]);
        assert_eq!(r.get(4).map(|g| g.replays), Some(3));
        assert_eq!(r.get(8).map(|g| g.replays), Some(2));
        assert_eq!(r.get(16).map(|g| g.replays), Some(2));
        assert_eq!(r.buckets(), &[4, 8, 16]);
    }

    #[test]
    fn runner_out_of_range() {
        let mut r = BucketedRunner::<FakeGraph>::new(vec![4, 8, 16]).unwrap();
        for n in [0, 17] {
            let res = r.run::<TestErr>(n, |_| panic!("must not capture"), |_, _| panic!("must not replay"));
            assert_eq!(res, Err(TestErr::Bucket(BucketError::OutOfRange { n, top: 16 })));
        }
        assert!(r.captured_buckets().is_empty());
    }

    #[test]
    fn runner_capture_error_retries() {
        let mut r = BucketedRunner::<FakeGraph>::new(vec![4, 8]).unwrap();
        let res = r.run::<TestErr>(6, |_| Err(TestErr::Capture), |_, _| panic!("must not replay"));
        assert_eq!(res, Err(TestErr::Capture));
        assert!(r.captured_buckets().is_empty());
        assert!(r.get(8).is_none());

        let mut captures = 0;
        let res = r.run::<TestErr>(
            7,
            |b| {
                captures += 1;
                Ok(FakeGraph { bucket: b, replays: 0 })
            },
            |g, _| {
                g.replays += 1;
                Ok(())
            },
        );
        assert_eq!(res, Ok(8));
        assert_eq!(captures, 1);
        assert_eq!(r.captured_buckets(), vec![8]);
    }

    #[test]
    fn runner_replay_error_keeps_graph() {
        let mut r = BucketedRunner::<FakeGraph>::new(vec![4]).unwrap();
        let res = r.run::<TestErr>(2, |b| Ok(FakeGraph { bucket: b, replays: 0 }), |_, _| Err(TestErr::Capture));
        assert_eq!(res, Err(TestErr::Capture));
        assert_eq!(r.captured_buckets(), vec![4]);
    }

    #[test]
    fn error_display() {
        let e = BucketError::OutOfRange { n: 17, top: 16 };
        assert_eq!(e.to_string(), "token count 17 is outside the bucket range 1..=16");
        let _: &dyn std::error::Error = &e;
    }
}

//! Token bucket exports: the ladder, explicit lists and `bucket_for`.

use ::fc_graph::buckets::{bucket_for, token_buckets, BucketConfig};

use super::error::{Error, Result};
use super::handles::{self, handle_kind};
use super::header::fc_buckets;
use super::{handle_or_null, release, value};

/// What an `fc_buckets *` stands for: sizes, strictly increasing, non-empty.
pub(crate) struct Buckets(Vec<usize>);

handle_kind!(Buckets => fc_buckets, "fc_buckets");

fn buckets(b: *const fc_buckets) -> Result<super::handles::Live<Buckets>> {
    handles::get::<Buckets>(b, "buckets")
}

/// The largest `max_tokens` of a generated ladder: 16 Mi tokens, about 33
/// thousand buckets. Past it the ladder (steps of at most 512 tokens) would
/// take unbounded time and memory to build (SIZE_MAX: 3.6e16 buckets).
pub const MAX_LADDER_TOKENS: usize = 1 << 24;

/// The ladder or explicit list for `max_tokens` (no chunk limit).
fn make(max_tokens: usize, explicit: Option<Vec<usize>>) -> Result<Buckets> {
    if max_tokens == 0 {
        return Err(Error::invalid("max_tokens must be at least 1"));
    }
    if explicit.is_none() && max_tokens > MAX_LADDER_TOKENS {
        return Err(Error::invalid(format!(
            "max_tokens {max_tokens} is above the largest ladder, {MAX_LADDER_TOKENS} tokens (use an explicit list)"
        )));
    }
    let cfg = BucketConfig { max_tokens, disabled: false, chunk_size: None, explicit_sizes: explicit };
    let sizes = token_buckets(&cfg);
    if sizes.is_empty() {
        return Err(Error::invalid(format!("no buckets for max_tokens {max_tokens}")));
    }
    Ok(Buckets(sizes))
}

/// `fc_buckets *fc_buckets_ladder(size_t max_tokens)`
#[no_mangle]
pub extern "C" fn fc_buckets_ladder(max_tokens: usize) -> *mut fc_buckets {
    handle_or_null(|| handles::insert(make(max_tokens, None)?))
}

/// `fc_buckets *fc_buckets_from_list(const size_t *sizes, size_t count, size_t max_tokens)`
///
/// # Safety
/// `sizes` is NULL (with `count` 0) or valid for reading `count` values.
#[no_mangle]
pub unsafe extern "C" fn fc_buckets_from_list(sizes: *const usize, count: usize, max_tokens: usize) -> *mut fc_buckets {
    handle_or_null(|| {
        let list = if count == 0 {
            Vec::new()
        } else if sizes.is_null() {
            return Err(Error::invalid(format!("sizes is NULL but count is {count}")));
        } else if count > isize::MAX as usize / std::mem::size_of::<usize>() {
            return Err(Error::invalid(format!("count {count} is larger than any array of sizes")));
        } else {
            // SAFETY: `sizes` holds `count` values per the contract.
            unsafe { std::slice::from_raw_parts(sizes, count) }.to_vec()
        };
        handles::insert(make(max_tokens, Some(list))?)
    })
}

/// `void fc_buckets_free(fc_buckets *buckets)`
#[no_mangle]
pub extern "C" fn fc_buckets_free(b: *mut fc_buckets) {
    release(b, |b| handles::remove::<Buckets>(b, "buckets").map(drop))
}

/// `size_t fc_buckets_count(const fc_buckets *buckets)`
#[no_mangle]
pub extern "C" fn fc_buckets_count(b: *const fc_buckets) -> usize {
    value(0, || Ok(buckets(b)?.0.len()))
}

/// `size_t fc_buckets_get(const fc_buckets *buckets, size_t i)`
#[no_mangle]
pub extern "C" fn fc_buckets_get(b: *const fc_buckets, i: usize) -> usize {
    value(0, || {
        let b = buckets(b)?;
        b.0.get(i)
            .copied()
            .ok_or_else(|| Error::invalid(format!("bucket index {i} out of range (count {})", b.0.len())))
    })
}

/// `size_t fc_buckets_for(const fc_buckets *buckets, size_t n)`
#[no_mangle]
pub extern "C" fn fc_buckets_for(b: *const fc_buckets, n: usize) -> usize {
    value(0, || {
        let b = buckets(b)?;
        let top = b.0.last().copied().unwrap_or(0);
        match bucket_for(&b.0, n) {
            Some(bucket) if n > 0 => Ok(bucket),
            _ => Err(Error::invalid(format!("token count {n} is outside the bucket range 1..={top}"))),
        }
    })
}

/// Handles of this module's kinds alive now.
pub(crate) fn live_handles() -> usize {
    <Buckets as super::handles::Kind>::table().live()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_msg() -> String {
        // SAFETY: fc_last_error returns a NUL-terminated per-thread string.
        unsafe { std::ffi::CStr::from_ptr(crate::fc_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    #[cfg_attr(miri, ignore = "2048 C calls, each searched: too slow under Miri (the handle tests cover the calls)")]
    fn ladder_list_and_lookup_from_c() {
        let l = fc_buckets_ladder(2048);
        assert!(!l.is_null());
        let want = token_buckets(&BucketConfig { chunk_size: None, ..BucketConfig::default() });
        assert_eq!(fc_buckets_count(l), want.len());
        let got: Vec<usize> = (0..fc_buckets_count(l)).map(|i| fc_buckets_get(l, i)).collect();
        assert_eq!(got, want);
        assert_eq!(fc_buckets_for(l, 1), 1);
        assert_eq!(fc_buckets_for(l, 17), 32);
        assert_eq!(fc_buckets_for(l, 257), 288);
        assert_eq!(fc_buckets_for(l, 2048), 2048);
        for n in 1..=2048 {
            let b = fc_buckets_for(l, n);
            let i = got.iter().position(|&x| x == b).expect("a bucket of the list");
            assert!(b >= n && (i == 0 || got[i - 1] < n), "n {n} -> {b}");
        }
        assert_eq!(fc_buckets_for(l, 0), 0);
        assert!(last_msg().contains("outside the bucket range 1..=2048"));
        assert_eq!(fc_buckets_for(l, 2049), 0);
        assert_eq!(fc_buckets_get(l, want.len()), 0);
        assert!(last_msg().contains("out of range"));
        fc_buckets_free(l);
        assert_eq!(fc_buckets_count(l), 0, "freed");
        assert_eq!(crate::last_error::code(), crate::header::FC_ERR_INVALID_HANDLE as i32);

        let sizes = [256usize, 0, 1024, 4096, 256];
        // SAFETY: a valid array of 5 values.
        let e = unsafe { fc_buckets_from_list(sizes.as_ptr(), sizes.len(), 2048) };
        assert_eq!((0..fc_buckets_count(e)).map(|i| fc_buckets_get(e, i)).collect::<Vec<_>>(), [256, 1024, 2048]);
        assert_eq!(fc_buckets_for(e, 300), 1024);
        fc_buckets_free(e);
        // SAFETY: NULL with count 0 is allowed.
        let only_max = unsafe { fc_buckets_from_list(std::ptr::null(), 0, 64) };
        assert_eq!((fc_buckets_count(only_max), fc_buckets_get(only_max, 0)), (1, 64));
        fc_buckets_free(only_max);
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(fc_buckets_ladder(0).is_null());
        assert_eq!(crate::last_error::code(), crate::header::FC_ERR_INVALID_ARGUMENT as i32);
        // SAFETY: NULL with a non-zero count is refused before any read.
        assert!(unsafe { fc_buckets_from_list(std::ptr::null(), 3, 64) }.is_null());
        assert!(last_msg().contains("sizes is NULL"));
        // SAFETY: as above; max_tokens 0 is refused.
        assert!(unsafe { fc_buckets_from_list([1usize].as_ptr(), 1, 0) }.is_null());
        assert_eq!(fc_buckets_count(std::ptr::null()), 0);
        fc_buckets_free(std::ptr::null_mut());
    }

    /// Huge sizes are refused at once, never walked or allocated.
    #[test]
    #[cfg_attr(miri, ignore = "times a 35000-rung ladder against a 5 s limit; far slower under Miri, run natively")]
    fn huge_sizes_are_refused_quickly() {
        let start = std::time::Instant::now();
        for max in [usize::MAX, usize::MAX - 256, MAX_LADDER_TOKENS + 1] {
            assert!(fc_buckets_ladder(max).is_null(), "ladder({max})");
            assert!(last_msg().contains("above the largest ladder"), "{}", last_msg());
        }
        let top = fc_buckets_ladder(MAX_LADDER_TOKENS);
        assert!(fc_buckets_count(top) > 30_000 && fc_buckets_count(top) < 40_000, "{}", fc_buckets_count(top));
        assert_eq!(fc_buckets_for(top, usize::MAX), 0);
        fc_buckets_free(top);
        // An explicit list may name any size.
        // SAFETY: a valid array of 2 values.
        let e = unsafe { fc_buckets_from_list([16usize, usize::MAX].as_ptr(), 2, usize::MAX) };
        assert_eq!((0..fc_buckets_count(e)).map(|i| fc_buckets_get(e, i)).collect::<Vec<_>>(), [16, usize::MAX]);
        fc_buckets_free(e);
        // SAFETY: refused from the count alone, before any read.
        assert!(unsafe { fc_buckets_from_list([1usize].as_ptr(), usize::MAX, 64) }.is_null());
        assert!(last_msg().contains("larger than any array"), "{}", last_msg());
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "took {:?}", start.elapsed());
    }
}

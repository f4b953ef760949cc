//! Bucket lists from the input: fc_buckets_ladder(max) and
//! fc_buckets_from_list(sizes, count, max), checked against what the
//! header promises (increasing, ending at max, each listed size clamped
//! and kept, fc_buckets_for the smallest bucket at or above n, the
//! documented refusals).
#![no_main]

use fc_graph_fuzz::*;
use fcgraph::header::FC_ERR_INVALID_ARGUMENT;
use fcgraph::*;
use libfuzzer_sys::fuzz_target;

/// The largest ladder the header allows.
const LADDER_MAX: usize = 1 << 24;

fn read(b: &fc_buckets) -> Vec<usize> {
    let h = b as *const fc_buckets;
    let n = fc_buckets_count(h);
    assert!(n >= 1, "a bucket list of {n} buckets");
    (0..n).map(|i| fc_buckets_get(h, i)).collect()
}

/// Checks fc_buckets_for against the list for the probes `ns`.
fn check_for(h: *const fc_buckets, list: &[usize], ns: &[usize]) {
    let max = *list.last().expect("not empty");
    for &n in ns {
        let got = fc_buckets_for(h, n);
        if n == 0 || n > max {
            assert_eq!(got, 0, "fc_buckets_for({n}) past the list");
            assert_eq!(fcgraph::fc_last_error_code(), FC_ERR_INVALID_ARGUMENT as i32);
        } else {
            let want = list.iter().copied().find(|&b| b >= n).expect("max >= n");
            assert_eq!(got, want, "fc_buckets_for({n}) in {list:?}");
        }
    }
    assert_eq!(fc_buckets_get(h, list.len()), 0, "fc_buckets_get past the end");
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let max = match b.u8() % 4 {
        0 => b.size(),
        1 => b.u32() as usize % (LADDER_MAX + 2),
        _ => b.u16() as usize,
    };
    let probes: Vec<usize> = (0..8).map(|_| b.size()).chain([1, max, max.saturating_add(1)]).collect();

    // The ladder.
    let h = check_ptr("fc_buckets_ladder", fc_buckets_ladder(max));
    if max == 0 || max > LADDER_MAX {
        assert!(h.is_null(), "fc_buckets_ladder({max}) is refused");
        assert_eq!(fcgraph::fc_last_error_code(), FC_ERR_INVALID_ARGUMENT as i32);
    } else {
        assert!(!h.is_null(), "fc_buckets_ladder({max}) failed: {}", last_message());
        // SAFETY: a live handle.
        let list = read(unsafe { &*h });
        assert_eq!(list[0], 1, "a ladder starts at 1");
        assert_eq!(*list.last().unwrap(), max, "a ladder ends at max");
        assert!(list.windows(2).all(|w| w[0] < w[1]), "a ladder increases: {list:?}");
        for w in list.windows(2).filter(|w| w[0] >= 256 && w[1] != max) {
            let step = w[1] - w[0];
            assert!(step % 16 == 0 && (16..=512).contains(&step), "ladder step {step} after {}", w[0]);
        }
        check_for(h, &list, &probes);
        fc_buckets_free(h);
    }

    // An explicit list.
    let sizes: Vec<usize> = (0..(b.u8() as usize)).map(|_| b.size()).collect();
    let null = sizes.is_empty() && b.u8() % 2 == 0;
    let p = if null { std::ptr::null() } else { sizes.as_ptr() };
    // SAFETY: `p` holds sizes.len() values, or is NULL with a count of 0.
    let h = check_ptr("fc_buckets_from_list", unsafe { fc_buckets_from_list(p, sizes.len(), max) });
    if max == 0 {
        assert!(h.is_null(), "fc_buckets_from_list with max 0 is refused");
    } else {
        assert!(!h.is_null(), "fc_buckets_from_list failed: {}", last_message());
        // SAFETY: a live handle.
        let list = read(unsafe { &*h });
        let mut want: Vec<usize> = sizes.iter().filter(|&&s| s != 0).map(|&s| s.min(max)).chain([max]).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(list, want, "fc_buckets_from_list({sizes:?}, {max})");
        check_for(h, &list, &probes);
        fc_buckets_free(h);
    }
    // A NULL list with a count is refused.
    if !sizes.is_empty() {
        // SAFETY: NULL, which the library must refuse.
        let h = unsafe { fc_buckets_from_list(std::ptr::null(), sizes.len(), max.max(1)) };
        assert!(h.is_null(), "a NULL list with a count of {} is refused", sizes.len());
    }
    let mut live = usize::MAX;
    // SAFETY: valid out-pointer.
    check("fc_live_objects", unsafe { fc_live_objects(&mut live, std::ptr::null_mut()) });
    assert_eq!(live, 0, "bucket lists left alive");
});

//! How the steps' rows are timed and handed out: [`alternate_blocks`]
//! (two sides alternating in blocks, ABBA order), [`paired_ratio`] (fc /
//! bare block by block) and the rows' emitters.

use fc_graph::Result;

use super::rows::{Paired, StepOutput, StepRow, Variant};
use crate::stats::Summary;

/// Emits one row.
pub(super) fn emit(
    out: &mut dyn FnMut(StepOutput),
    step: &'static str,
    variant: Variant,
    kernels: usize,
    samples: &mut [f64],
) {
    out(StepOutput::Row(StepRow { step, variant, kernels, summary: Summary::of(samples), paired: None }));
}

/// Emits the fc and bare rows of a pair timed by [`alternate_blocks`]
/// with `iters` (samples in round order), the fc row with its
/// [`paired_ratio`].
pub(super) fn emit_alternated(
    out: &mut dyn FnMut(StepOutput),
    step: &'static str,
    kernels: usize,
    iters: usize,
    fc: &mut [f64],
    bare: &mut [f64],
) {
    let paired = paired_ratio(fc, bare, block_rounds(iters));
    out(StepOutput::Row(StepRow { step, variant: Variant::Fc, kernels, summary: Summary::of(fc), paired }));
    emit(out, step, Variant::Bare, kernels, bare);
}

/// Rounds per block of [`alternate_blocks`] (fewer where `iters / 4` is).
const BLOCK_ROUNDS: usize = 8;

/// The timed rounds per block [`alternate_blocks`] uses for `iters`.
fn block_rounds(iters: usize) -> usize {
    BLOCK_ROUNDS.min(iters / 4).max(1)
}

/// fc / bare block by block ([`Paired`]): `fc` and `bare` are the samples
/// of two sides timed in alternating blocks, in round order, in timed
/// blocks of `block` rounds (each side's last block may be shorter). The
/// i-th block of fc and the i-th of bare are adjacent in time (ABBA
/// order). `None` when a side has no samples, the sides' block counts
/// differ or a bare block's median is not positive.
pub fn paired_ratio(fc: &[f64], bare: &[f64], block: usize) -> Option<Paired> {
    let block = block.max(1);
    let (f, b) = (fc.chunks(block), bare.chunks(block));
    if fc.is_empty() || f.len() != b.len() {
        return None;
    }
    let mut ratios = Vec::with_capacity(f.len());
    for (x, y) in f.zip(b) {
        let (mut x, mut y) = (x.to_vec(), y.to_vec());
        let (fm, bm) = (Summary::of(&mut x).median, Summary::of(&mut y).median);
        if bm.is_nan() || bm <= 0.0 || !fm.is_finite() {
            return None;
        }
        ratios.push(fm / bm);
    }
    let blocks = ratios.len();
    Some(Paired { ratio: Summary::of(&mut ratios).median, blocks })
}

/// Untimed rounds at the start of a side's first block.
const FIRST_WARMUP_ROUNDS: usize = 2;

/// Times `fc` against `bare`, `iters` timed rounds each, alternating in
/// blocks of B = min(8, iters / 4) (at least 1) rounds in ABBA order: fc,
/// bare, bare, fc, fc, bare, ... Drift over the run weighs on both sides
/// alike, but no timed round directly follows the other side's round: each
/// block that follows the other side's round begins with one untimed
/// warm-up round of its own side (the first block of each side with
/// [`FIRST_WARMUP_ROUNDS`]); a block that follows a block of its own side
/// (the middle of "bb" and "ff") needs none. Each closure gets its side's
/// round number (warm-ups included, from 0) and returns its round's timed
/// part in µs. Returns the (fc, bare) samples in round order.
pub(super) fn alternate_blocks(
    iters: usize,
    mut fc: impl FnMut(usize) -> Result<f64>,
    mut bare: impl FnMut(usize) -> Result<f64>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let block = block_rounds(iters);
    let mut samples = [Vec::with_capacity(iters), Vec::with_capacity(iters)];
    let mut rounds = [0usize; 2];
    let mut previous: Option<usize> = None;
    for j in 0.. {
        if samples.iter().all(|v| v.len() >= iters) {
            break;
        }
        let side = [0, 1, 1, 0][j % 4];
        let timed = block.min(iters - samples[side].len());
        if timed == 0 {
            continue;
        }
        let warmup = match previous {
            _ if rounds[side] == 0 => FIRST_WARMUP_ROUNDS,
            Some(p) if p == side => 0,
            _ => 1,
        };
        for r in 0..warmup + timed {
            let round = rounds[side];
            rounds[side] += 1;
            let us = if side == 0 { fc(round)? } else { bare(round)? };
            if r >= warmup {
                samples[side].push(us);
            }
        }
        previous = Some(side);
    }
    let [fc, bare] = samples;
    Ok((fc, bare))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Runs [`alternate_blocks`] with closures that log each round as
    /// (side, the side's round number) and return the round's position in
    /// the log: (the log, the positions of the timed fc and bare rounds).
    fn trace(iters: usize) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
        let log = RefCell::new(Vec::new());
        let round = |side: usize, r: usize| {
            let mut l = log.borrow_mut();
            l.push((side, r));
            Ok((l.len() - 1) as f64)
        };
        let (fc, bare) = alternate_blocks(iters, |r| round(0, r), |r| round(1, r)).expect("no round fails");
        let pos = |v: Vec<f64>| v.into_iter().map(|p| p as usize).collect();
        (log.into_inner(), pos(fc), pos(bare))
    }

    #[test]
    fn paired_ratio_cancels_a_speed_switch_inside_a_row() {
        // The host doubles its speed halfway through a row of 40 rounds a
        // side: fc takes 10 µs slow / 5 fast, bare 15 / 7.5, so fc / bare is
        // 2/3 in either state. The ABBA order puts more fc than bare rounds
        // into the slow half here, so the medians' ratio is off; the paired
        // ratio is exact.
        let iters = 40;
        let slow_until = 45; // rounds of the whole run, both sides
        let clock = std::cell::Cell::new(0usize);
        let tick = |slow: f64| {
            let t = clock.get();
            clock.set(t + 1);
            Ok(if t < slow_until { slow } else { slow / 2.0 })
        };
        let (fc, bare) = alternate_blocks(iters, |_| tick(10.0), |_| tick(15.0)).expect("no round fails");
        let p = paired_ratio(&fc, &bare, block_rounds(iters)).expect("paired");
        assert_eq!(p.blocks, 5);
        assert!((p.ratio - 2.0 / 3.0).abs() < 1e-12, "{p:?}");
        let (mut f, mut b) = (fc.clone(), bare.clone());
        let medians = Summary::of(&mut f).median / Summary::of(&mut b).median;
        assert!((medians - 2.0 / 3.0).abs() > 0.1, "the medians' ratio is thrown off: {medians}");
    }

    #[test]
    fn paired_ratio_takes_the_median_of_block_ratios() {
        // Blocks of 2: ratios 1.0, 0.5, 4.0 (one outlier block) -> 1.0.
        let fc = [2.0, 2.0, 1.0, 1.0, 8.0, 8.0];
        let bare = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        assert_eq!(paired_ratio(&fc, &bare, 2), Some(Paired { ratio: 1.0, blocks: 3 }));
        // A shorter last block pairs with the other side's shorter one.
        assert_eq!(paired_ratio(&[1.0, 1.0, 3.0], &[2.0, 2.0, 3.0], 2), Some(Paired { ratio: 0.75, blocks: 2 }));
        // Nothing to pair, unequal block counts, a bare median of 0.
        assert_eq!(paired_ratio(&[], &[], 2), None);
        assert_eq!(paired_ratio(&[1.0, 1.0, 1.0], &[1.0], 2), None);
        assert_eq!(paired_ratio(&[1.0], &[0.0], 1), None);
    }

    #[test]
    fn the_fc_row_of_a_pair_carries_its_paired_ratio() {
        let mut rows = Vec::new();
        let (mut fc, mut bare) = (vec![1.0, 1.0, 3.0, 3.0], vec![2.0, 2.0, 6.0, 6.0]);
        emit_alternated(
            &mut |o| {
                if let StepOutput::Row(r) = o {
                    rows.push(r)
                }
            },
            "build_instantiate",
            26,
            8,
            &mut fc,
            &mut bare,
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].paired, Some(Paired { ratio: 0.5, blocks: 2 }));
        assert_eq!(rows[1].paired, None);
        let v: serde_json::Value = serde_json::from_str(&rows[0].json()).expect("JSON");
        assert_eq!((v["paired_fc_over_bare"].as_f64(), v["paired_blocks"].as_u64()), (Some(0.5), Some(2)));
        assert!(serde_json::from_str::<serde_json::Value>(&rows[1].json()).expect("JSON")["paired_blocks"].is_null());
    }

    #[test]
    fn each_side_gets_iters_timed_rounds_in_order() {
        for iters in 1..=130 {
            let (log, fc, bare) = trace(iters);
            assert_eq!((fc.len(), bare.len()), (iters, iters), "iters {iters}");
            for (side, timed) in [(0, &fc), (1, &bare)] {
                assert!(timed.windows(2).all(|w| w[0] < w[1]), "iters {iters}: in round order");
                assert!(timed.iter().all(|&p| log[p].0 == side), "iters {iters}: each side's own rounds");
                // Each side's round numbers count from 0, warm-ups included.
                let numbers: Vec<usize> = log.iter().filter(|e| e.0 == side).map(|e| e.1).collect();
                assert_eq!(numbers, (0..numbers.len()).collect::<Vec<_>>(), "iters {iters}");
            }
        }
    }

    #[test]
    fn no_timed_round_follows_the_other_sides_round() {
        for iters in 1..=130 {
            let (log, fc, bare) = trace(iters);
            for &p in fc.iter().chain(&bare) {
                assert!(p > 0 && log[p - 1].0 == log[p].0, "iters {iters}: timed round {p} follows {:?}", log[p - 1]);
            }
            // Each side's first two rounds warm up.
            for side in 0..2 {
                let first: Vec<usize> = (0..log.len()).filter(|&p| log[p].0 == side).take(2).collect();
                assert!(first.iter().all(|p| !fc.contains(p) && !bare.contains(p)), "iters {iters}");
            }
        }
    }

    #[test]
    fn blocks_of_eight_in_abba_order() {
        let (log, fc, _) = trace(100);
        // The sides' runs: fc (2 warm-ups + 8), bare (2 + 8), bare again
        // (8, no warm-up), fc (1 + 8), fc (8), ...
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &(side, _) in &log {
            match runs.last_mut() {
                Some((s, n)) if *s == side => *n += 1,
                _ => runs.push((side, 1)),
            }
        }
        assert_eq!(&runs[..4], &[(0, 10), (1, 18), (0, 17), (1, 17)]);
        assert!(runs.windows(2).all(|w| w[0].0 != w[1].0));
        // 100 = 12 blocks of 8 + 4: 2 warm-ups at the start, then one per switch.
        let switches = runs.len() - 1;
        assert_eq!(log.len(), 200 + 2 * 2 + (switches - 1));
        assert_eq!(fc[..8], (2..10).collect::<Vec<_>>()[..]);
        // Small counts: blocks of iters / 4.
        let (log, _, _) = trace(20);
        assert_eq!(log.iter().take_while(|e| e.0 == 0).count(), 2 + 5);
    }

    #[test]
    fn drift_weighs_on_both_sides_alike() {
        // ABBA: the timed rounds' mean positions in the run are close.
        for iters in [20, 50, 100] {
            let (log, fc, bare) = trace(iters);
            let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
            let gap = (mean(&fc) - mean(&bare)).abs() / log.len() as f64;
            assert!(gap < 0.05, "iters {iters}: mean positions {} vs {}", mean(&fc), mean(&bare));
        }
    }

    #[test]
    fn a_failing_round_stops_the_loop() {
        let mut calls = 0;
        let r = alternate_blocks(
            40,
            |round| if round == 3 { Err(fc_graph::Error::invalid("round 3")) } else { Ok(1.0) },
            |_| {
                calls += 1;
                Ok(1.0)
            },
        );
        assert!(r.is_err());
        assert_eq!(calls, 0, "fc's first block (2 warm-ups + 8) fails before bare runs");
    }
}

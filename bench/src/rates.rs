//! Loops run on several threads at once for a fixed time: the multi-GPU
//! rows (one thread per device) and the `--isolated` replay rows (one
//! thread per context).

use std::sync::Barrier;
use std::time::{Duration, Instant};

use fc_graph::Result;

/// One thread per item, all started together: each runs `warm(item)` (its
/// untimed set-up and warm-up, which makes the loop's state), waits for
/// every other thread's warm-up, then calls `step(item, &mut state)` in a
/// loop for `secs` seconds. Returns each item's iterations per second, in
/// the items' order; the first error of any thread (a panic goes on in
/// this thread).
pub fn per_second_at_once<T: Sync + ?Sized, S>(
    items: &[&T],
    secs: f64,
    warm: impl Fn(&T) -> Result<S> + Sync,
    step: impl Fn(&T, &mut S) -> Result<()> + Sync,
) -> Result<Vec<f64>> {
    let barrier = Barrier::new(items.len());
    let limit = Duration::from_secs_f64(secs);
    let (warm, step) = (&warm, &step);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .iter()
            .map(|&item| {
                let barrier = &barrier;
                s.spawn(move || -> Result<f64> {
                    let warmed = warm(item);
                    barrier.wait(); // always reached, so no peer waits forever
                    let mut state = warmed?;
                    let t0 = Instant::now();
                    let mut count = 0u64;
                    let elapsed = loop {
                        step(item, &mut state)?;
                        count += 1;
                        let e = t0.elapsed();
                        if e >= limit {
                            break e;
                        }
                    };
                    Ok(count as f64 / elapsed.as_secs_f64())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_thread_warms_up_before_any_loop_starts() {
        let warmed = AtomicUsize::new(0);
        let items = [&1usize, &2, &3];
        let rates = per_second_at_once(
            &items,
            0.02,
            |&i| {
                warmed.fetch_add(1, Ordering::SeqCst);
                Ok(i)
            },
            |_, state| {
                assert_eq!(warmed.load(Ordering::SeqCst), 3, "a loop began before every warm-up ended");
                *state += 1;
                Ok(())
            },
        )
        .expect("no step fails");
        assert_eq!(rates.len(), 3);
        assert!(rates.iter().all(|&r| r > 0.0 && r.is_finite()), "{rates:?}");
    }

    #[test]
    fn a_failed_warm_up_fails_the_run_without_a_hang() {
        let items = [&0usize, &1];
        let r = per_second_at_once(
            &items,
            0.01,
            |&i| if i == 1 { Err(fc_graph::Error::invalid("warm-up")) } else { Ok(()) },
            |_, _| Ok(()),
        );
        assert!(r.is_err());
    }

    #[test]
    fn a_failing_step_stops_its_loop() {
        let calls = AtomicUsize::new(0);
        let r = per_second_at_once(
            &[&()],
            10.0,
            |_| Ok(()),
            |_, _| {
                if calls.fetch_add(1, Ordering::SeqCst) == 2 {
                    return Err(fc_graph::Error::invalid("step 3"));
                }
                Ok(())
            },
        );
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}

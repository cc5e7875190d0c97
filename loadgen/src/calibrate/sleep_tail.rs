//! The tail of a sleeping handler's lateness (`[handler.sleep] tail_share`, `tail_mean_per_ms_us`),
//! fitted on the sleeping echoes' p99. Pure: no I/O.
//!
//! Why: a real DataNode's `Thread.sleep(1)` wakes late by about 0.1 ms in most sleeps and by
//! milliseconds in a few (Ozone 2.2.0 here, pool 4, one echo in flight: p50 1.3 ms, p99 2.0,
//! p99.9 4.4), and with 32 echoes queued on the pool each waits behind the sleeps of the others:
//! a few late wakes put the p99 at 1.2–1.4 × the p50 at every pool, where an even lateness
//! (what calls/s alone can fit) gives 1.0–1.04. dn-sim's tail: a share `q` of sleeps wakes later
//! still by an exponential time of mean `m` per millisecond asked; its mean, `q·m` a millisecond,
//! is taken from the even lateness, so calls/s stay as fitted. Why in proportion to the sleep: the
//! real DataNode's p99 beyond its p50 grew with the sleep at each pool (pool 1: 7.0 ms at 1 ms,
//! 18.2 at 2; pool 4: 2.7 and 4.0), and a tail that does fitted its six cells with half the
//! squared log error of a tail of one length; its mean, 20 µs a millisecond, is about the whole
//! of the lateness's growth with the sleep that calls/s show (18.7 µs a millisecond).
//!
//! The fit: each sleeping cell of the target (P handlers, N echoes in flight, a closed loop on a
//! first-come first-served pool, as grpc-java hands a DataNode's calls to its executor) is
//! replayed in a small simulation with the cell's own mean hold per call; the tail that
//! minimizes the squared log error of p99 − p50 (the target's beyond the baseline's: dn-sim's
//! own spread) over the cells is kept, from a log-spaced grid, with common random numbers for
//! every candidate so that the error is smooth in `q` and `m`.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One sleeping cell as the tail's fit sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TailCell {
    pub pool: u32,
    pub in_flight: u32,
    /// The milliseconds each echo sleeps.
    pub sleep_ms: u32,
    /// The handler's mean hold per call (µs): the sleep, its lateness and the handler's work.
    pub hold_us: f64,
    /// What the tail should add to p99 − p50 (ms): the target's beyond the baseline's.
    pub excess_ms: f64,
}

/// The fitted tail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tail {
    /// The share of sleeps that wake in the tail.
    pub share: f64,
    /// The mean of the tail's extra time (µs) per millisecond the echo asked to sleep.
    pub mean_per_ms_us: f64,
}

impl Tail {
    pub const NONE: Tail = Tail {
        share: 0.0,
        mean_per_ms_us: 0.0,
    };

    /// The mean lateness the tail adds to every sleep (µs) per millisecond asked.
    pub fn mean_late_per_ms_us(&self) -> f64 {
        self.share * self.mean_per_ms_us
    }
}

/// Completions simulated per cell (the first tenth discarded as the queue fills).
const CALLS: usize = 12_000;
/// The excesses compared are floored here (ms), so a cell with none does not weigh infinitely.
const EXCESS_FLOOR_MS: f64 = 0.05;

/// p99 − p50 of the response time (ms) of `c.in_flight` echoes in a closed loop on `c.pool`
/// first-come first-served handlers, each call holding its handler `c.hold_us` on average, of
/// which a share `tail.share` of calls holds it longer by an exponential time of mean
/// `tail.mean_per_ms_us` × `c.sleep_ms` (and every call shorter by the tail's mean, so the mean
/// stays).
pub fn simulate_excess_ms(c: &TailCell, tail: Tail, seed: u64) -> f64 {
    let (pool, in_flight) = (c.pool, c.in_flight);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mean_us = tail.mean_per_ms_us * f64::from(c.sleep_ms);
    let even_us = (c.hold_us - tail.share * mean_us).max(0.0);
    // Times in µs, kept as integer nanoseconds in the heaps (total order).
    let mut free: BinaryHeap<Reverse<u64>> = (0..pool.max(1)).map(|_| Reverse(0)).collect();
    let mut arrivals: BinaryHeap<Reverse<u64>> =
        (0..in_flight.max(1)).map(|_| Reverse(0)).collect();
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let (Some(Reverse(f)), Some(Reverse(a))) = (free.pop(), arrivals.pop()) else {
            break;
        };
        // Both draws every call: the same random numbers for every candidate tail.
        let u_share: f64 = rng.random();
        let u_len = 1.0 - rng.random::<f64>();
        let extra_us = if u_share < tail.share {
            -mean_us * u_len.ln()
        } else {
            0.0
        };
        let start = f.max(a);
        let end = start + ((even_us + extra_us) * 1e3) as u64;
        times.push(end - a);
        free.push(Reverse(end));
        arrivals.push(Reverse(end));
    }
    let mut kept = times.split_off(times.len() / 10);
    kept.sort_unstable();
    let at = |p: f64| kept[((p * kept.len() as f64) as usize).min(kept.len() - 1)] as f64 / 1e6;
    at(0.99) - at(0.50)
}

/// What a tail adds to a cell's p99 − p50 (ms) beyond an even hold's. Why the difference: an
/// even hold has a spread of its own where the pool does not divide the echoes in flight (at
/// pool 10 and 32 in flight some wait three holds, some four), which the baseline, and so the
/// excess the fit is given, already holds.
pub fn tail_excess_ms(c: &TailCell, tail: Tail, seed: u64) -> f64 {
    simulate_excess_ms(c, tail, seed) - simulate_excess_ms(c, Tail::NONE, seed)
}

/// The seed of a cell's simulation in the fit (and its residual).
pub fn seed(cell_index: usize) -> u64 {
    0x5eed + cell_index as u64
}

/// `even_ms`: each cell's excess under an even hold, simulated once (it is the same for every
/// candidate tail).
fn error(cells: &[TailCell], even_ms: &[f64], tail: Tail) -> f64 {
    cells
        .iter()
        .zip(even_ms)
        .enumerate()
        .map(|(i, (c, even))| {
            let sim = simulate_excess_ms(c, tail, seed(i)) - even;
            (sim.max(EXCESS_FLOOR_MS) / c.excess_ms.max(EXCESS_FLOOR_MS))
                .ln()
                .powi(2)
        })
        .sum()
}

/// The tail that best gives the cells' excesses, its mean lateness at most
/// `max_mean_late_per_ms_us` a millisecond asked (the even lateness it is taken from); `None`
/// when no tail does better than none.
pub fn fit_tail(cells: &[TailCell], max_mean_late_per_ms_us: f64) -> Option<Tail> {
    if cells.is_empty() || max_mean_late_per_ms_us <= 0.0 {
        return None;
    }
    let even_ms: Vec<f64> = cells
        .iter()
        .enumerate()
        .map(|(i, c)| simulate_excess_ms(c, Tail::NONE, seed(i)))
        .collect();
    let mut best = (error(cells, &even_ms, Tail::NONE), Tail::NONE);
    // Shares 0.2 % to 30 %, means 50 µs to 50 ms a millisecond asked, each a factor 1.5 apart.
    let shares = (0..13).map(|k| 0.002 * 1.5f64.powi(k));
    for share in shares {
        for j in 0..18 {
            let tail = Tail {
                share,
                mean_per_ms_us: 50.0 * 1.5f64.powi(j),
            };
            if tail.mean_late_per_ms_us() > max_mean_late_per_ms_us {
                break;
            }
            let e = error(cells, &even_ms, tail);
            if e < best.0 - 1e-12 {
                best = (e, tail);
            }
        }
    }
    (best.1.share > 0.0).then_some(best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(pool: u32, sleep_ms: u32) -> TailCell {
        TailCell {
            pool,
            in_flight: 32,
            sleep_ms,
            hold_us: 1100.0 * f64::from(sleep_ms),
            excess_ms: 0.0,
        }
    }

    #[test]
    fn an_even_hold_leaves_no_excess_and_a_tail_makes_one_that_grows_with_queue_and_sleep() {
        assert!(simulate_excess_ms(&cell(4, 1), Tail::NONE, 1) < 1e-3);
        // Pool 10 does not divide 32: an even hold's own spread, one hold.
        let uneven = simulate_excess_ms(&cell(10, 1), Tail::NONE, 1);
        assert!((uneven - 1.1).abs() < 0.01, "{uneven}");
        let tail = Tail {
            share: 0.02,
            mean_per_ms_us: 2000.0,
        };
        // One echo a handler: its own sleep's tail only (p99 of the mix, about 2.2 ms over).
        let alone = simulate_excess_ms(
            &TailCell {
                in_flight: 4,
                ..cell(4, 1)
            },
            tail,
            1,
        );
        assert!((1.5..3.5).contains(&alone), "{alone}");
        // One handler, 32 queued: every late wake ahead of an echo delays it.
        let queued = simulate_excess_ms(&cell(1, 1), tail, 1);
        assert!(queued > alone * 1.5, "{queued} vs {alone}");
        // A longer sleep, a longer tail.
        let longer = simulate_excess_ms(&cell(1, 2), tail, 1);
        assert!(longer > queued * 1.5, "{longer} vs {queued}");
    }

    #[test]
    fn the_fit_gives_back_a_tail_that_made_the_cells() {
        let truth = Tail {
            share: 0.002 * 1.5f64.powi(4),
            mean_per_ms_us: 50.0 * 1.5f64.powi(7),
        };
        let cells: Vec<TailCell> = [(2, 1), (2, 5), (10, 1), (10, 5)]
            .into_iter()
            .map(|(pool, sleep_ms)| {
                let mut c = cell(pool, sleep_ms);
                // Another seed than the fit's: the truth's own noise.
                c.excess_ms = tail_excess_ms(&c, truth, 99);
                c
            })
            .collect();
        let fitted = fit_tail(&cells, 200.0).expect("a tail");
        let ratio = fitted.mean_late_per_ms_us() / truth.mean_late_per_ms_us();
        assert!((0.5..2.0).contains(&ratio), "{fitted:?} vs {truth:?}");
        // Capped: no more mean lateness than there is.
        let capped = fit_tail(&cells, 5.0).expect("a smaller tail");
        assert!(capped.mean_late_per_ms_us() <= 5.0, "{capped:?}");
        // Cells without an excess want no tail.
        let flat: Vec<TailCell> = cells
            .iter()
            .map(|c| TailCell {
                excess_ms: 0.0,
                ..c.clone()
            })
            .collect();
        assert_eq!(fit_tail(&flat, 200.0), None);
        assert_eq!(fit_tail(&[], 200.0), None);
    }
}

//! Google SRE adaptive throttling ("Handling Overload", throttling.md §2.5).
//!
//! Over the last two minutes the client counts `requests` (every attempt the application made,
//! including those this throttle rejected locally) and `accepts` (attempts the backend accepted).
//! Before each attempt it rejects locally with probability
//!
//! ```text
//! p = max(0, (requests − K · accepts) / (requests + 1))
//! ```
//!
//! computed from the counts *before* this attempt, which is then counted in `requests` whether
//! it is sent or not. K = 2 by default ("We generally prefer the 2x multiplier"); a lower K is
//! more aggressive.
//!
//! The window is a ring of fixed time buckets (default 120 buckets of 1 s), so memory is constant
//! and old counts fall out a bucket at a time. Buckets advance from the `now` passed in; the first
//! call starts bucket 0. Random draws come from a [`SmallRng`] seeded by the caller, so runs and
//! tests are reproducible.
//!
//! Accepts: [`Outcome::Success`] is an accept, [`Outcome::Throttled`] is not;
//! [`Outcome::OtherFailure`] is not an accept unless [`SreConfig::other_failure_is_accept`]
//! (an application error such as "no such container" was still accepted by the backend, but a
//! transport error or timeout was not; Envoy's admission control counts UNAVAILABLE, INTERNAL,
//! DEADLINE_EXCEEDED as failures). All operation kinds share one set of counts.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{ClientThrottle, Decision, OpKind, Outcome};

pub const DEFAULT_K: f64 = 2.0;
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(120);
pub const DEFAULT_BUCKET: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SreConfig {
    /// The accepts multiplier K (> 0).
    pub k: f64,
    /// Length of the sliding window.
    pub window: Duration,
    /// Granularity of the window; `window / bucket` (rounded up) buckets are kept.
    pub bucket: Duration,
    /// Whether [`Outcome::OtherFailure`] counts as an accept.
    pub other_failure_is_accept: bool,
}

impl Default for SreConfig {
    fn default() -> Self {
        Self {
            k: DEFAULT_K,
            window: DEFAULT_WINDOW,
            bucket: DEFAULT_BUCKET,
            other_failure_is_accept: false,
        }
    }
}

/// `max(0, (requests − k · accepts) / (requests + 1))`.
pub fn rejection_probability(requests: u64, accepts: u64, k: f64) -> f64 {
    let requests = requests as f64;
    ((requests - k * accepts as f64) / (requests + 1.0)).max(0.0)
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    index: u64,
    requests: u64,
    accepts: u64,
}

#[derive(Debug)]
struct State {
    start: Option<Instant>,
    current: u64,
    slots: Vec<Slot>,
    requests: u64,
    accepts: u64,
    rng: SmallRng,
}

impl State {
    /// Moves the ring to the bucket of `now`, evicting buckets that left the window. A `now` older
    /// than the current bucket counts in the current bucket.
    fn advance(&mut self, now: Instant, bucket: Duration) {
        let start = *self.start.get_or_insert(now);
        let index =
            u64::try_from(now.saturating_duration_since(start).as_nanos() / bucket.as_nanos())
                .unwrap_or(u64::MAX);
        let n = self.slots.len() as u64;
        if index > self.current {
            let first = index - (index - self.current).min(n) + 1;
            for i in first..=index {
                let slot = &mut self.slots[(i % n) as usize];
                self.requests -= slot.requests;
                self.accepts -= slot.accepts;
                *slot = Slot {
                    index: i,
                    requests: 0,
                    accepts: 0,
                };
            }
            self.current = index;
        }
    }

    /// Adds to the current bucket (call [`State::advance`] first).
    fn record(&mut self, requests: u64, accepts: u64) {
        let n = self.slots.len() as u64;
        let slot = &mut self.slots[(self.current % n) as usize];
        debug_assert_eq!(slot.index, self.current);
        slot.requests += requests;
        slot.accepts += accepts;
        self.requests += requests;
        self.accepts += accepts;
    }
}

/// The SRE adaptive throttle of one client (or of the process, if shared).
#[derive(Debug)]
pub struct SreThrottle {
    config: SreConfig,
    state: Mutex<State>,
}

impl SreThrottle {
    /// Panics if `k` is not a positive finite number, `bucket` is zero or `window < bucket`.
    pub fn new(config: SreConfig, seed: u64) -> Self {
        Self::with_rng(config, SmallRng::seed_from_u64(seed))
    }

    pub fn with_rng(config: SreConfig, rng: SmallRng) -> Self {
        assert!(
            config.k.is_finite() && config.k > 0.0,
            "SRE throttle: K must be > 0, got {}",
            config.k
        );
        assert!(!config.bucket.is_zero(), "SRE throttle: bucket must be > 0");
        assert!(
            config.window >= config.bucket,
            "SRE throttle: window must be >= bucket"
        );
        let buckets = config.window.as_nanos().div_ceil(config.bucket.as_nanos());
        let buckets = usize::try_from(buckets).expect("SRE throttle: too many buckets");
        let state = State {
            start: None,
            current: 0,
            slots: vec![Slot::default(); buckets],
            requests: 0,
            accepts: 0,
            rng,
        };
        Self {
            config,
            state: Mutex::new(state),
        }
    }

    pub fn config(&self) -> &SreConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `(requests, accepts)` in the window ending at `now`.
    pub fn counts(&self, now: Instant) -> (u64, u64) {
        let mut s = self.lock();
        s.advance(now, self.config.bucket);
        (s.requests, s.accepts)
    }

    /// The probability that an attempt at `now` is rejected locally.
    pub fn probability(&self, now: Instant) -> f64 {
        let (requests, accepts) = self.counts(now);
        rejection_probability(requests, accepts, self.config.k)
    }
}

impl ClientThrottle for SreThrottle {
    fn before_send(&self, _op: OpKind, _bytes: u64, now: Instant) -> Decision {
        let mut s = self.lock();
        s.advance(now, self.config.bucket);
        let p = rejection_probability(s.requests, s.accepts, self.config.k);
        let reject = p > 0.0 && s.rng.random::<f64>() < p;
        s.record(1, 0);
        if reject {
            Decision::RejectLocally
        } else {
            Decision::Proceed
        }
    }

    fn on_result(&self, _op: OpKind, _bytes: u64, outcome: Outcome, now: Instant) {
        let accepted = match outcome {
            Outcome::Success => true,
            Outcome::Throttled => false,
            Outcome::OtherFailure => self.config.other_failure_is_accept,
        };
        if accepted {
            let mut s = self.lock();
            s.advance(now, self.config.bucket);
            s.record(0, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = 4096;

    fn throttle(seed: u64) -> SreThrottle {
        SreThrottle::new(SreConfig::default(), seed)
    }

    /// `n` attempts at `now`, each answered with `outcome` if sent; returns the local rejections.
    fn attempts(t: &SreThrottle, n: u64, outcome: Outcome, now: Instant) -> u64 {
        let mut rejected = 0;
        for _ in 0..n {
            match t.before_send(OpKind::Write, W, now) {
                Decision::RejectLocally => rejected += 1,
                _ => t.on_result(OpKind::Write, W, outcome, now),
            }
        }
        rejected
    }

    #[test]
    fn probability_formula() {
        let cases = [
            (0, 0, 2.0, 0.0),
            (10, 5, 2.0, 0.0),
            (10, 9, 2.0, 0.0),
            (100, 10, 2.0, 80.0 / 101.0),
            (100, 0, 2.0, 100.0 / 101.0),
            (1000, 400, 2.0, 200.0 / 1001.0),
            (110, 50, 1.1, 55.0 / 111.0),
            (3, 1, 1.0, 0.5),
        ];
        for (requests, accepts, k, p) in cases {
            let got = rejection_probability(requests, accepts, k);
            assert!(
                (got - p).abs() < 1e-12,
                "({requests}, {accepts}, {k}): {got} != {p}"
            );
        }
    }

    #[test]
    fn exposed_probability_follows_the_counts() {
        let t = throttle(1);
        let t0 = Instant::now();
        assert_eq!(attempts(&t, 10, Outcome::Success, t0), 0);
        assert_eq!(t.counts(t0), (10, 10));
        assert_eq!(t.probability(t0), 0.0);
        // Throttled answers are not accepts; other failures neither, by default.
        attempts(&t, 10, Outcome::Throttled, t0);
        attempts(&t, 10, Outcome::OtherFailure, t0);
        assert_eq!(t.counts(t0), (30, 10));
        assert!((t.probability(t0) - 10.0 / 31.0).abs() < 1e-12);

        let lenient = SreThrottle::new(
            SreConfig {
                other_failure_is_accept: true,
                ..Default::default()
            },
            1,
        );
        attempts(&lenient, 10, Outcome::OtherFailure, t0);
        assert_eq!(lenient.counts(t0), (10, 10));
    }

    #[test]
    fn local_rejections_count_as_requests() {
        let t = throttle(2);
        let t0 = Instant::now();
        attempts(&t, 100, Outcome::Success, t0);
        let rejected = attempts(&t, 10_000, Outcome::Throttled, t0);
        assert!(rejected > 8_500, "{rejected}");
        let (requests, accepts) = t.counts(t0);
        assert_eq!((requests, accepts), (10_100, 100));
        assert!((t.probability(t0) - 9_900.0 / 10_101.0).abs() < 1e-12);
    }

    #[test]
    fn window_slides_in_one_second_buckets_over_two_minutes() {
        let t = throttle(3);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        attempts(&t, 50, Outcome::Success, t0); // bucket 0
        attempts(&t, 100, Outcome::Throttled, t0 + s(60)); // bucket 60
        assert_eq!(
            t.counts(t0 + s(119) + Duration::from_millis(999)),
            (150, 50)
        );
        assert!((t.probability(t0 + s(119)) - 50.0 / 151.0).abs() < 1e-12);
        assert_eq!(t.counts(t0 + s(120)), (100, 0)); // bucket 0 left the window
        assert!((t.probability(t0 + s(120)) - 100.0 / 101.0).abs() < 1e-12);
        assert_eq!(t.counts(t0 + s(180)), (0, 0));
        assert_eq!(t.probability(t0 + s(180)), 0.0);
        // A long gap clears everything; an out-of-order `now` lands in the current bucket.
        attempts(&t, 5, Outcome::Success, t0 + s(100_000));
        attempts(&t, 5, Outcome::Success, t0 + s(99_999));
        assert_eq!(t.counts(t0 + s(100_000)), (10, 10));
    }

    /// Over `draws` attempts from counts `(requests, accepts)`, each counted before the next,
    /// returns the expected number of local rejections and its variance.
    fn expected_rejections(requests: u64, accepts: u64, draws: u64) -> (f64, f64) {
        (0..draws).fold((0.0, 0.0), |(mean, var), i| {
            let p = rejection_probability(requests + i, accepts, DEFAULT_K);
            (mean + p, var + p * (1.0 - p))
        })
    }

    #[test]
    fn empirical_rejection_fraction_is_within_statistical_bounds() {
        // (accepted, throttled) preloads: p ≈ 0.6 and p ≈ 0.048 when the draws start.
        for (seed, accepted, throttled) in [(11u64, 20_000u64, 80_000u64), (12, 20_000, 22_000)] {
            let t = throttle(seed);
            let t0 = Instant::now();
            attempts(&t, accepted, Outcome::Success, t0);
            attempts(&t, throttled, Outcome::Throttled, t0);
            let (requests, accepts) = t.counts(t0);
            assert_eq!((requests, accepts), (accepted + throttled, accepted));
            let draws = 20_000;
            let rejected = attempts(&t, draws, Outcome::Throttled, t0) as f64;
            let (mean, var) = expected_rejections(requests, accepts, draws);
            let sigma = var.sqrt();
            assert!(
                (rejected - mean).abs() < 5.0 * sigma,
                "seed {seed}: {rejected} vs {mean} ± {sigma}"
            );
        }
    }

    #[test]
    fn same_seed_same_decisions() {
        let run = |seed| {
            let t = throttle(seed);
            let t0 = Instant::now();
            attempts(&t, 100, Outcome::Success, t0);
            (0..500)
                .map(|_| t.before_send(OpKind::Read, W, t0))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }
}

//! A lock-free token bucket: dn-sim's service limits (ingress bytes/s, egress bytes/s or ops/s,
//! shared by every connection of the simulated DataNode) and loadgen's client-side throttles.
//!
//! The bucket is a GCRA ("generic cell rate algorithm", virtual scheduling): instead of a token
//! count it keeps one number, the *theoretical arrival time* `tat` — the instant at which the
//! bucket would be full again. Taking `n` tokens moves `tat` forward by `n / rate`; a request is
//! admitted when the new `tat` lies at most `burst / rate` ahead of `now`. That single number lives
//! in an [`AtomicU64`] and is updated with `compare_exchange`, so the hot path takes no lock: many
//! connection tasks can share one `Arc<TokenBucket>`.
//!
//! Time is passed in (`now: Instant`), so the bucket is deterministic and testable with synthetic
//! instants. The first `now` the bucket sees becomes its epoch; an earlier `now` passed later (a
//! caller that read the clock a moment before another thread) counts as the epoch.
//!
//! Architecture invariant: no I/O, no tasks, no timers; the caller decides what a rejection looks
//! like on the wire (status, reason, `grpc-retry-pushback-ms` from [`Denied::retry_after`]).

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Floating-point slack (in ns) when comparing the new `tat` with the tolerance, so a request that
/// fits exactly is not refused because of rounding.
const SLACK_NS: f64 = 1e-3;

/// An invalid rate or burst.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error("rate must be > 0 per second (infinity = unlimited), got {0}")]
    Rate(f64),
    #[error("burst must be finite and >= 0, got {0}")]
    Burst(f64),
}

/// A refused request. `retry_after` is how long until the same request would be admitted if
/// nobody else took tokens meanwhile: a pushback hint, not a promise under contention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    pub retry_after: Duration,
}

/// A lock-free token bucket: `rate` tokens per second, at most `burst` tokens banked.
///
/// Units are the caller's: bytes for ingress/egress limits, operations for an ops/s limit.
///
/// # Requests larger than the burst
/// A request for more than `burst` tokens could never fit. Rather than starving it forever, it is
/// admitted when the bucket is **full** and the bucket goes into debt: the following requests wait
/// until the debt is repaid at `rate`, so the long-run rate still holds (over any window the bucket
/// admits at most `rate · window + burst + largest request`). When the bucket is not full, such a
/// request is refused with `retry_after` = time until it is full. Under sustained contention from
/// small requests a large one may still wait long, so configure `burst` ≥ the largest request
/// (e.g. the chunk size) when that matters.
///
/// # Precision
/// Rate and burst are stored together as two `f32` in one atomic word (so a reader never sees a
/// new rate with an old burst), i.e. with ~7 significant digits; `tat` is an `f64` of nanoseconds
/// since the epoch, sub-nanosecond for runs of days.
pub struct TokenBucket {
    epoch: OnceLock<Instant>,
    /// `(rate as f32).to_bits() << 32 | (burst as f32).to_bits()`.
    config: AtomicU64,
    /// `f64` bits: theoretical arrival time, ns since `epoch`. 0 = full at the epoch.
    tat: AtomicU64,
}

fn pack(rate: f64, burst: f64) -> u64 {
    (u64::from((rate as f32).to_bits()) << 32) | u64::from((burst as f32).to_bits())
}

fn unpack(word: u64) -> (f64, f64) {
    let rate = f32::from_bits((word >> 32) as u32);
    let burst = f32::from_bits(word as u32);
    (f64::from(rate), f64::from(burst))
}

fn validate(rate: f64, burst: f64) -> Result<(), LimitError> {
    if rate.is_nan() || rate <= 0.0 || (rate as f32) <= 0.0 {
        return Err(LimitError::Rate(rate));
    }
    if !burst.is_finite() || burst < 0.0 || (burst as f32).is_infinite() {
        return Err(LimitError::Burst(burst));
    }
    Ok(())
}

fn duration_from_ns(ns: f64) -> Duration {
    if ns <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(ns.ceil() / 1e9).unwrap_or(Duration::MAX)
    }
}

impl TokenBucket {
    /// A full bucket refilling at `rate_per_sec` and holding at most `burst` tokens.
    /// `rate_per_sec = f64::INFINITY` makes an unlimited bucket that admits everything.
    pub fn try_new(rate_per_sec: f64, burst: f64) -> Result<Self, LimitError> {
        validate(rate_per_sec, burst)?;
        Ok(Self {
            epoch: OnceLock::new(),
            config: AtomicU64::new(pack(rate_per_sec, burst)),
            tat: AtomicU64::new(0f64.to_bits()),
        })
    }

    /// Like [`TokenBucket::try_new`]; panics on a rate ≤ 0 or NaN or a negative or infinite burst.
    pub fn new(rate_per_sec: f64, burst: f64) -> Self {
        Self::try_new(rate_per_sec, burst).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A bucket that admits everything (until [`TokenBucket::set_rate`] gives it a limit).
    pub fn unlimited() -> Self {
        Self::new(f64::INFINITY, 0.0)
    }

    /// The configured rate (tokens per second; infinite when unlimited).
    pub fn rate(&self) -> f64 {
        unpack(self.config.load(Ordering::Acquire)).0
    }

    /// The configured burst (tokens).
    pub fn burst(&self) -> f64 {
        unpack(self.config.load(Ordering::Acquire)).1
    }

    pub fn is_unlimited(&self) -> bool {
        self.rate().is_infinite()
    }

    fn nanos(&self, now: Instant) -> f64 {
        let epoch = *self.epoch.get_or_init(|| now);
        now.saturating_duration_since(epoch).as_nanos() as f64
    }

    /// Takes `amount` tokens at `now`, or says how long until they would be there.
    ///
    /// Lock-free: one `compare_exchange` on success, retried only when another thread changed the
    /// bucket in between. A refused request takes nothing.
    pub fn try_take(&self, amount: u64, now: Instant) -> Result<(), Denied> {
        let now_ns = self.nanos(now);
        let amount = amount as f64;
        let mut current = self.tat.load(Ordering::Acquire);
        loop {
            let (rate, burst) = unpack(self.config.load(Ordering::Acquire));
            if rate.is_infinite() {
                return Ok(());
            }
            let interval = 1e9 / rate; // ns per token
            let tolerance = burst * interval; // ns of banked tokens
            let tat = f64::from_bits(current);
            let new_tat = tat.max(now_ns) + amount * interval;
            if new_tat - now_ns > tolerance + SLACK_NS {
                let full = tat <= now_ns;
                if amount <= burst || !full {
                    let wait = if amount <= burst {
                        new_tat - tolerance - now_ns
                    } else {
                        tat - now_ns // until full; then the oversize request goes into debt
                    };
                    return Err(Denied {
                        retry_after: duration_from_ns(wait),
                    });
                }
            }
            match self.tat.compare_exchange_weak(
                current,
                new_tat.to_bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => current = actual,
            }
        }
    }

    /// [`TokenBucket::try_take`] as a bool.
    pub fn admits(&self, amount: u64, now: Instant) -> bool {
        self.try_take(amount, now).is_ok()
    }

    /// Tokens available at `now`: `burst` when full, negative while in debt after an oversize
    /// request. Infinite for an unlimited bucket.
    pub fn available(&self, now: Instant) -> f64 {
        let now_ns = self.nanos(now);
        let (rate, burst) = unpack(self.config.load(Ordering::Acquire));
        if rate.is_infinite() {
            return f64::INFINITY;
        }
        let tat = f64::from_bits(self.tat.load(Ordering::Acquire));
        burst - (tat - now_ns).max(0.0) * rate / 1e9
    }

    /// Live reconfiguration. The tokens already owed (the bucket's deficit below full) are carried
    /// over, re-timed at the new rate; a lower burst takes effect at once (the bucket may be in debt
    /// afterwards). A decision racing with this call may use either the old or the new limit.
    pub fn set_rate(&self, rate_per_sec: f64, burst: f64, now: Instant) -> Result<(), LimitError> {
        validate(rate_per_sec, burst)?;
        let now_ns = self.nanos(now);
        let word = pack(rate_per_sec, burst);
        let (old_rate, _) = unpack(self.config.swap(word, Ordering::AcqRel));
        let new_rate = unpack(word).0;
        if old_rate.is_infinite() || new_rate.is_infinite() {
            return Ok(());
        }
        let scale = old_rate / new_rate;
        let _ = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
                let tat = f64::from_bits(bits);
                (tat > now_ns).then(|| (now_ns + (tat - now_ns) * scale).to_bits())
            });
        Ok(())
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("rate", &self.rate())
            .field("burst", &self.burst())
            .field("tat_ns", &f64::from_bits(self.tat.load(Ordering::Relaxed)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64 as Counter;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Offers `amount` every `step` during `[from, from + window)` and returns what was admitted.
    fn drive(b: &TokenBucket, from: Instant, window: Duration, step: Duration, amount: u64) -> u64 {
        let mut admitted = 0;
        let mut t = Duration::ZERO;
        while t < window {
            if b.admits(amount, from + t) {
                admitted += amount;
            }
            t += step;
        }
        admitted
    }

    #[test]
    fn admits_the_configured_ops_rate() {
        let b = TokenBucket::new(1000.0, 10.0);
        let t0 = Instant::now();
        // 10 000 ops/s offered for 5 s.
        let admitted = drive(
            &b,
            t0,
            Duration::from_secs(5),
            Duration::from_micros(100),
            1,
        );
        let expected = 1000.0 * 5.0 + 10.0;
        assert!(
            (admitted as f64 - expected).abs() <= expected * 0.01,
            "{admitted}"
        );
    }

    #[test]
    fn admits_the_configured_byte_rate() {
        let rate = 100.0 * 1048576.0; // 100 MiB/s
        let b = TokenBucket::new(rate, 4.0 * 1048576.0);
        let t0 = Instant::now();
        // 1 MiB every ms = 1 GiB/s offered for 3 s.
        let admitted = drive(&b, t0, Duration::from_secs(3), ms(1), 1 << 20);
        let expected = rate * 3.0 + 4.0 * 1048576.0;
        assert!(
            (admitted as f64 - expected).abs() <= expected * 0.02,
            "{admitted}"
        );
    }

    #[test]
    fn burst_then_refill_capped_at_burst() {
        let b = TokenBucket::new(100.0, 50.0);
        let t0 = Instant::now();
        for i in 0..50 {
            assert!(b.admits(1, t0), "take {i}");
        }
        let denied = b.try_take(1, t0).unwrap_err();
        assert_eq!(denied.retry_after, ms(10));
        assert!(
            b.try_take(1, t0 + ms(10) - Duration::from_micros(1))
                .is_err()
        );
        assert!(b.admits(1, t0 + ms(10)));
        // A long idle period refills only up to the burst.
        let later = t0 + Duration::from_secs(60);
        assert!((b.available(later) - 50.0).abs() < 1e-6);
        assert!(b.admits(50, later));
        assert!(!b.admits(1, later));
    }

    #[test]
    fn retry_after_is_exact_for_a_multi_token_request() {
        let b = TokenBucket::new(1000.0, 100.0);
        let t0 = Instant::now();
        assert!(b.admits(80, t0));
        let d = b.try_take(50, t0).unwrap_err().retry_after;
        assert_eq!(d, ms(30));
        assert!(!b.admits(50, t0 + d - Duration::from_micros(1)));
        assert!(b.admits(50, t0 + d));
    }

    #[test]
    fn oversize_requests_go_into_debt_only_from_a_full_bucket() {
        let b = TokenBucket::new(100.0, 10.0);
        let t0 = Instant::now();
        assert!(b.admits(1, t0));
        // Not full: refused until the bucket has refilled (1 token = 10 ms).
        let d = b.try_take(50, t0).unwrap_err().retry_after;
        assert_eq!(d, ms(10));
        assert!(b.admits(50, t0 + d));
        // 40 tokens of debt: a single token needs 41 tokens of refill = 410 ms.
        let t1 = t0 + d;
        assert!((b.available(t1) + 40.0).abs() < 1e-6);
        assert_eq!(b.try_take(1, t1).unwrap_err().retry_after, ms(410));
        assert!(b.admits(1, t1 + ms(410)));
    }

    #[test]
    fn oversize_requests_do_not_raise_the_long_run_rate() {
        let b = TokenBucket::new(1000.0, 100.0);
        let t0 = Instant::now();
        // 500-token requests every ms: 500 000 tokens/s offered for 10 s.
        let admitted = drive(&b, t0, Duration::from_secs(10), ms(1), 500);
        assert!(
            admitted as f64 <= 1000.0 * 10.0 + 100.0 + 500.0,
            "{admitted}"
        );
        assert!(admitted as f64 >= 1000.0 * 10.0 * 0.95, "{admitted}");
    }

    #[test]
    fn rate_change_takes_effect_and_keeps_the_deficit() {
        let b = TokenBucket::new(100.0, 10.0);
        let t0 = Instant::now();
        let first = drive(
            &b,
            t0,
            Duration::from_secs(2),
            Duration::from_micros(500),
            1,
        );
        assert!((first as f64 - 210.0).abs() <= 3.0, "{first}");

        let t1 = t0 + Duration::from_secs(2);
        b.set_rate(1000.0, 10.0, t1).unwrap();
        assert_eq!(b.rate(), 1000.0);
        let second = drive(
            &b,
            t1,
            Duration::from_secs(2),
            Duration::from_micros(500),
            1,
        );
        assert!((second as f64 - 2000.0).abs() <= 2000.0 * 0.01, "{second}");

        // Deficit carried over: empty the bucket, then slow down 10×; a token takes 10× longer.
        let t2 = t1 + Duration::from_secs(10);
        assert!(b.admits(10, t2));
        b.set_rate(100.0, 10.0, t2).unwrap();
        assert!((b.available(t2)).abs() < 1e-6);
        assert_eq!(b.try_take(1, t2).unwrap_err().retry_after, ms(10));

        // Unlimited and back.
        b.set_rate(f64::INFINITY, 0.0, t2).unwrap();
        assert!(b.is_unlimited());
        assert!(b.admits(1 << 40, t2));
        assert!(b.set_rate(0.0, 1.0, t2).is_err());
        assert!(b.set_rate(1.0, -1.0, t2).is_err());
        assert!(TokenBucket::try_new(f64::NAN, 1.0).is_err());
    }

    #[test]
    fn concurrent_takers_do_not_over_admit() {
        const THREADS: u64 = 8;
        const STEPS: u64 = 50_000;
        let rate = 2000.0; // each thread alone offers 5000/s, so any one of them can saturate it
        let burst = 100.0;
        let b = TokenBucket::new(rate, burst);
        let t0 = Instant::now();
        b.admits(0, t0); // fix the epoch
        let step = Duration::from_micros(25); // 8 × 40 000 offers/s over 10 s of simulated time
        let window = step * (STEPS * THREADS) as u32;
        let admitted = Counter::new(0);
        std::thread::scope(|s| {
            for th in 0..THREADS {
                let (b, admitted) = (&b, &admitted);
                s.spawn(move || {
                    for k in 0..STEPS {
                        let now = t0 + step * (k * THREADS + th) as u32;
                        if b.admits(1, now) {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let admitted = admitted.into_inner() as f64;
        let bound = rate * window.as_secs_f64() + burst;
        assert!(
            admitted <= bound + 1.0,
            "over-admitted: {admitted} > {bound}"
        );
        // Threads run at different speeds, so their clocks interleave out of order; a thread
        // behind the others is refused, but the bucket must still be kept near its rate.
        assert!(
            admitted >= bound * 0.9,
            "under-admitted: {admitted} < {bound}"
        );
    }
}

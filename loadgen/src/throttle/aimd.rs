//! Additive-increase / multiplicative-decrease pacing (our own throttle, in the spirit of TCP
//! congestion avoidance and of the AWS SDK's adaptive mode, throttling.md §2.8).
//!
//! The client keeps an allowed rate `r` (operations/s or bytes/s, see [`AimdUnit`]) and paces its
//! sends to it: each send reserves the next slot on a virtual timeline, `cost / r` after the
//! previous one, and [`Decision::Sleep`] tells the caller how long to wait for its slot. Slots
//! left unused are not banked (no burst credit): after an idle spell the next send goes at once.
//! Slots are reserved at most [`RESERVATION_HORIZON`] ahead; a send beyond it gets
//! [`Decision::Wait`] and asks again, so a raised rate takes effect within the horizon.
//!
//! - **Additive increase**: on a success, if at least `increase_interval` passed since the last
//!   change and the rate was actually binding (some send had to wait since the last change),
//!   `r = min(r + increase, max_rate)`. An idle or concurrency-limited client does not inflate its
//!   rate.
//! - **Multiplicative decrease**: on a throttled rejection, `r = max(r · decrease_factor,
//!   min_rate)`, at most once per `decrease_interval` (an RTT-like interval), so a burst of
//!   rejections caused by one overshoot cuts the rate once, not a dozen times.
//! - Other failures change nothing.
//!
//! Defaults ([`AimdConfig::ops`], [`AimdConfig::bytes`]):
//!
//! | | ops | bytes |
//! |---|---|---|
//! | initial rate | 1000 ops/s | 64 MiB/s |
//! | min rate | 10 ops/s | 1 MiB/s |
//! | max rate | unbounded | unbounded |
//! | increase per 100 ms | +50 ops/s (= +500 ops/s per s) | +4 MiB/s (= +40 MiB/s per s) |
//! | decrease factor, at most every 100 ms | × 0.7 | × 0.7 |
//!
//! 0.7 is CUBIC's β (the AWS SDK's choice); TCP Reno's 0.5 halves too hard when the rejections
//! come from a limit shared with other clients, each of which also backs off.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{ClientThrottle, Decision, OpKind, Outcome};

/// What the rate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AimdUnit {
    /// Every request costs 1.
    Ops,
    /// A request costs its payload bytes; zero-byte requests are neither paced nor delayed.
    Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AimdConfig {
    pub unit: AimdUnit,
    /// Starting rate, in units per second.
    pub initial_rate: f64,
    /// Floor of the rate (> 0).
    pub min_rate: f64,
    /// Ceiling of the rate (may be infinite).
    pub max_rate: f64,
    /// Added to the rate per `increase_interval` with successes.
    pub increase: f64,
    pub increase_interval: Duration,
    /// Rate multiplier on a throttled rejection, in (0, 1).
    pub decrease_factor: f64,
    /// Minimum time between two decreases.
    pub decrease_interval: Duration,
}

impl AimdConfig {
    pub fn ops() -> Self {
        Self {
            unit: AimdUnit::Ops,
            initial_rate: 1000.0,
            min_rate: 10.0,
            max_rate: f64::INFINITY,
            increase: 50.0,
            increase_interval: Duration::from_millis(100),
            decrease_factor: 0.7,
            decrease_interval: Duration::from_millis(100),
        }
    }

    pub fn bytes() -> Self {
        const MIB: f64 = 1048576.0;
        Self {
            unit: AimdUnit::Bytes,
            initial_rate: 64.0 * MIB,
            min_rate: MIB,
            increase: 4.0 * MIB,
            ..Self::ops()
        }
    }

    fn validate(&self) -> Result<(), String> {
        if self.min_rate.is_nan() || self.min_rate <= 0.0 || self.min_rate.is_infinite() {
            return Err(format!(
                "min_rate must be a finite rate > 0, got {}",
                self.min_rate
            ));
        }
        if self.max_rate.is_nan() || self.max_rate < self.min_rate {
            return Err(format!(
                "max_rate {} is below min_rate {}",
                self.max_rate, self.min_rate
            ));
        }
        if self.initial_rate.is_nan()
            || self.initial_rate < self.min_rate
            || self.initial_rate > self.max_rate
        {
            return Err(format!(
                "initial_rate {} is outside [min_rate, max_rate]",
                self.initial_rate
            ));
        }
        if self.increase.is_nan() || self.increase < 0.0 || self.increase.is_infinite() {
            return Err(format!(
                "increase must be a finite value >= 0, got {}",
                self.increase
            ));
        }
        if self.decrease_factor.is_nan()
            || self.decrease_factor <= 0.0
            || self.decrease_factor >= 1.0
        {
            return Err(format!(
                "decrease_factor must be in (0, 1), got {}",
                self.decrease_factor
            ));
        }
        Ok(())
    }
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self::ops()
    }
}

/// How far ahead send slots are reserved. A slot is reserved at the rate in force when it is
/// asked for, and a rate raised later does not move it; without a bound, hundreds of workers
/// waiting after a deep cut (open loop, a backlog) would hold slots spaced at the floor rate for
/// minutes after the limit came back (`scripts/exp-metastability.sh`). Beyond the horizon a send
/// gets [`Decision::Wait`] for a quarter of it and asks again: the pacer still has at least
/// three quarters of a horizon of reservations ahead, so it never idles for want of them.
pub const RESERVATION_HORIZON: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct State {
    rate: f64,
    /// The earliest instant the next send may go.
    next_send: Option<Instant>,
    last_change: Option<Instant>,
    last_decrease: Option<Instant>,
    /// Some send had to wait for its slot since the last change.
    limited: bool,
}

/// The AIMD throttle of one client (or of the process, if shared).
#[derive(Debug)]
pub struct AimdThrottle {
    config: AimdConfig,
    state: Mutex<State>,
}

fn elapsed_at_least(since: Option<Instant>, now: Instant, interval: Duration) -> bool {
    since.is_none_or(|t| now.saturating_duration_since(t) >= interval)
}

impl AimdThrottle {
    /// Panics on an invalid config (rates not `0 < min ≤ initial ≤ max`, negative increase, or a
    /// decrease factor outside (0, 1)).
    pub fn new(config: AimdConfig) -> Self {
        if let Err(e) = config.validate() {
            panic!("AIMD throttle: {e}");
        }
        let state = State {
            rate: config.initial_rate,
            next_send: None,
            last_change: None,
            last_decrease: None,
            limited: false,
        };
        Self {
            config,
            state: Mutex::new(state),
        }
    }

    pub fn config(&self) -> &AimdConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current allowed rate (units per second).
    pub fn rate(&self) -> f64 {
        self.lock().rate
    }
}

impl ClientThrottle for AimdThrottle {
    fn before_send(&self, _op: OpKind, bytes: u64, now: Instant) -> Decision {
        let cost = match self.config.unit {
            AimdUnit::Ops => 1.0,
            AimdUnit::Bytes => bytes as f64,
        };
        if cost <= 0.0 {
            return Decision::Proceed;
        }
        let mut s = self.lock();
        let slot = s.next_send.map_or(now, |t| t.max(now));
        if slot > now + RESERVATION_HORIZON {
            // Reservations already reach a horizon ahead: reserve nothing, ask again later, so
            // that a rate raised meanwhile applies to this send.
            s.limited = true;
            return Decision::Wait(RESERVATION_HORIZON / 4);
        }
        let gap = Duration::try_from_secs_f64(cost / s.rate).unwrap_or(Duration::MAX);
        s.next_send = slot.checked_add(gap).or(s.next_send);
        if slot > now {
            s.limited = true;
            Decision::Sleep(slot - now)
        } else {
            Decision::Proceed
        }
    }

    fn on_result(&self, _op: OpKind, _bytes: u64, outcome: Outcome, now: Instant) {
        let c = &self.config;
        let mut s = self.lock();
        match outcome {
            Outcome::Success => {
                if s.limited && elapsed_at_least(s.last_change, now, c.increase_interval) {
                    s.rate = (s.rate + c.increase).min(c.max_rate);
                    s.last_change = Some(now);
                    s.limited = false;
                }
            }
            Outcome::Throttled => {
                if elapsed_at_least(s.last_decrease, now, c.decrease_interval) {
                    s.rate = (s.rate * c.decrease_factor).max(c.min_rate);
                    s.last_decrease = Some(now);
                    s.last_change = Some(now);
                    s.limited = false;
                }
            }
            Outcome::OtherFailure => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::token_bucket::TokenBucket;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn config(initial: f64) -> AimdConfig {
        AimdConfig {
            initial_rate: initial,
            ..AimdConfig::ops()
        }
    }

    #[test]
    fn paces_sends_at_the_rate_without_banking_idle_time() {
        let t = AimdThrottle::new(config(100.0));
        let t0 = Instant::now();
        assert_eq!(t.before_send(OpKind::Write, 0, t0), Decision::Proceed);
        assert_eq!(t.before_send(OpKind::Write, 0, t0), Decision::Sleep(ms(10)));
        assert_eq!(
            t.before_send(OpKind::Write, 0, t0 + ms(5)),
            Decision::Sleep(ms(15))
        );
        // Idle for a second: the next send goes at once, the one after is paced again.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(t.before_send(OpKind::Write, 0, t1), Decision::Proceed);
        assert_eq!(t.before_send(OpKind::Write, 0, t1), Decision::Sleep(ms(10)));
    }

    #[test]
    fn a_raised_rate_applies_within_the_horizon_whatever_the_backlog() {
        let t = AimdThrottle::new(AimdConfig {
            initial_rate: 10.0,
            increase: 990.0,
            ..AimdConfig::ops()
        });
        let t0 = Instant::now();
        // 100 senders at once, paced at 10/s: 11 slots fit in the 1 s horizon, 89 wait.
        let mut waiting = 0;
        for _ in 0..100 {
            match t.before_send(OpKind::Write, 0, t0) {
                Decision::Proceed | Decision::Sleep(_) => {}
                Decision::Wait(d) => {
                    assert_eq!(d, RESERVATION_HORIZON / 4);
                    waiting += 1;
                }
                Decision::RejectLocally => panic!("aimd never rejects"),
            }
        }
        assert_eq!(waiting, 89);
        // The rate rises to 1000/s; the waiting senders ask again a quarter horizon later and
        // all get slots within the horizon, 1 ms apart — not 100 ms apart, up to 10 s ahead.
        t.on_result(OpKind::Write, 0, Outcome::Success, t0 + ms(100));
        assert_eq!(t.rate(), 1000.0);
        let now = t0 + ms(250);
        let slots: Vec<Duration> = (0..89)
            .map(|_| match t.before_send(OpKind::Write, 0, now) {
                Decision::Sleep(d) => d,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(slots[0], ms(850), "after the slots reserved at 10/s");
        assert_eq!(slots[88], ms(850 + 88));
    }

    #[test]
    fn byte_mode_paces_by_payload() {
        let t = AimdThrottle::new(AimdConfig {
            initial_rate: 1048576.0,
            ..AimdConfig::bytes()
        });
        let t0 = Instant::now();
        assert_eq!(
            t.before_send(OpKind::Write, 512 << 10, t0),
            Decision::Proceed
        );
        assert_eq!(
            t.before_send(OpKind::Read, 256 << 10, t0),
            Decision::Sleep(ms(500))
        );
        // Zero-byte requests (PutBlock, GetBlock, …) do not wait behind data.
        assert_eq!(t.before_send(OpKind::Other, 0, t0), Decision::Proceed);
        assert_eq!(
            t.before_send(OpKind::Write, 1, t0),
            Decision::Sleep(ms(750))
        );
    }

    #[test]
    fn increases_additively_once_per_interval_only_when_binding() {
        let t = AimdThrottle::new(config(100.0));
        let t0 = Instant::now();
        let ok = |at| t.on_result(OpKind::Write, 0, Outcome::Success, at);
        // Not binding yet: successes do not raise the rate.
        assert_eq!(t.before_send(OpKind::Write, 0, t0), Decision::Proceed);
        ok(t0);
        assert_eq!(t.rate(), 100.0);
        // A paced send makes it binding: +50 now, then not again within 100 ms.
        assert!(matches!(
            t.before_send(OpKind::Write, 0, t0),
            Decision::Sleep(_)
        ));
        ok(t0 + ms(10));
        assert_eq!(t.rate(), 150.0);
        assert!(matches!(
            t.before_send(OpKind::Write, 0, t0 + ms(10)),
            Decision::Sleep(_)
        ));
        ok(t0 + ms(109));
        assert_eq!(t.rate(), 150.0);
        ok(t0 + ms(110));
        assert_eq!(t.rate(), 200.0);
        // Steady binding successes: +50 per 100 ms = +500/s, capped by max_rate.
        let capped = AimdThrottle::new(AimdConfig {
            max_rate: 1200.0,
            ..config(100.0)
        });
        let mut now = t0;
        for _ in 0..30 {
            capped.before_send(OpKind::Write, 0, now);
            capped.before_send(OpKind::Write, 0, now);
            capped.on_result(OpKind::Write, 0, Outcome::Success, now);
            now += ms(100);
        }
        assert_eq!(capped.rate(), 1200.0);
    }

    #[test]
    fn decreases_multiplicatively_at_most_once_per_interval() {
        let t = AimdThrottle::new(AimdConfig {
            min_rate: 100.0,
            ..config(1000.0)
        });
        let t0 = Instant::now();
        let throttled = |at| t.on_result(OpKind::Write, 0, Outcome::Throttled, at);
        throttled(t0);
        assert!((t.rate() - 700.0).abs() < 1e-9);
        for i in 1..10 {
            throttled(t0 + ms(i * 10 - 1)); // a burst of rejections within 100 ms
        }
        assert!((t.rate() - 700.0).abs() < 1e-9);
        throttled(t0 + ms(100));
        assert!((t.rate() - 490.0).abs() < 1e-9);
        // Other failures change nothing; the floor holds.
        t.on_result(OpKind::Write, 0, Outcome::OtherFailure, t0 + ms(500));
        assert!((t.rate() - 490.0).abs() < 1e-9);
        for i in 0..20 {
            throttled(t0 + ms(200 + 100 * i));
        }
        assert_eq!(t.rate(), 100.0);
        // No increase right after a decrease, even when binding.
        let now = t0 + ms(2150);
        t.before_send(OpKind::Write, 0, now);
        t.before_send(OpKind::Write, 0, now);
        t.on_result(OpKind::Write, 0, Outcome::Success, now);
        assert_eq!(t.rate(), 100.0);
        t.on_result(OpKind::Write, 0, Outcome::Success, now + ms(50));
        assert_eq!(t.rate(), 150.0);
    }

    /// A greedy client against a 500 ops/s service limit settles near the limit with few
    /// rejections.
    #[test]
    fn converges_near_a_service_limit() {
        let limit = 500.0;
        let service = TokenBucket::new(limit, 10.0);
        let t = AimdThrottle::new(config(100.0));
        let t0 = Instant::now();
        let mut now = t0;
        let (mut ok, mut rejected) = (0u64, 0u64);
        let measure_from = t0 + Duration::from_secs(10);
        let mut min_rate = f64::MAX;
        let mut max_rate = 0f64;
        while now < t0 + Duration::from_secs(60) {
            if let Decision::Sleep(d) = t.before_send(OpKind::Write, 0, now) {
                now += d;
            }
            let admitted = service.admits(1, now);
            let outcome = if admitted {
                Outcome::Success
            } else {
                Outcome::Throttled
            };
            t.on_result(OpKind::Write, 0, outcome, now);
            if now >= measure_from {
                if admitted {
                    ok += 1
                } else {
                    rejected += 1
                }
                min_rate = min_rate.min(t.rate());
                max_rate = max_rate.max(t.rate());
            }
        }
        let goodput = ok as f64 / 50.0;
        let rejected_fraction = rejected as f64 / (ok + rejected) as f64;
        assert!(
            goodput >= 0.75 * limit && goodput <= limit * 1.01,
            "goodput {goodput}"
        );
        assert!(rejected_fraction < 0.05, "rejected {rejected_fraction}");
        assert!(
            min_rate > 0.5 * limit && max_rate < 1.5 * limit,
            "rate in [{min_rate}, {max_rate}]"
        );
    }
}

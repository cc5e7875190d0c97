//! Retry with exponential backoff and jitter, as ABFS's `ExponentialRetryPolicy`
//! (throttling.md §2.4), plus gRPC server pushback (§2.7).
//!
//! The n-th retry (n = 1, 2, …) waits
//!
//! ```text
//! interval(n) = min(min_backoff + 2^(n−1) · U[0.8·delta, 1.2·delta), max_backoff)
//! ```
//!
//! and at most `max_retries` retries follow the first attempt. ABFS's old defaults
//! ([`RetryPolicy::abfs_legacy`]: 3 s / 30 s / 3 s / 30 retries) are the "thrashing baseline" of
//! the HADOOP-14660 experiment. Which failures are retryable is the caller's decision (ABFS: no
//! response, 408, or ≥ 500 except 501 and 505).
//!
//! Pushback: a `grpc-retry-pushback-ms` value ≥ 0 replaces the computed backoff (and, as in gRPC,
//! resets the exponent, so the next computed backoff starts again from n = 1); a negative or
//! unparseable value means "do not retry". A pushback retry still counts toward `max_retries`.
//!
//! Randomness comes from an RNG the caller passes in (e.g. `SmallRng::seed_from_u64`), so runs are
//! reproducible. Jitter is continuous (ABFS draws whole milliseconds).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use common::units::parse_duration;
use rand::Rng;

/// The gRPC metadata key of the server's pushback hint.
pub const PUSHBACK_METADATA_KEY: &str = "grpc-retry-pushback-ms";

const MIN_RANDOM_RATIO: f64 = 0.8;
const MAX_RANDOM_RATIO: f64 = 1.2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = never retry).
    pub max_retries: u32,
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// The base of the exponential term, jittered ±20 %.
    pub delta: Duration,
}

impl RetryPolicy {
    /// No retries at all.
    pub const fn none() -> Self {
        Self {
            max_retries: 0,
            min_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
            delta: Duration::ZERO,
        }
    }

    /// ABFS's defaults before HADOOP-19357: min 3 s, max 30 s, delta 3 s, 30 retries.
    pub const fn abfs_legacy() -> Self {
        Self {
            max_retries: 30,
            min_backoff: Duration::from_secs(3),
            max_backoff: Duration::from_secs(30),
            delta: Duration::from_secs(3),
        }
    }

    /// ABFS's defaults since HADOOP-19357 (Dec 2024): min 500 ms, max 25 s, delta 500 ms,
    /// 30 retries. Also the defaults for keys missing from an `exp:` spec.
    pub const fn abfs_current() -> Self {
        Self {
            max_retries: 30,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(25),
            delta: Duration::from_millis(500),
        }
    }

    /// Whether another retry is allowed after `retries_done` retries.
    pub fn should_retry(&self, retries_done: u32) -> bool {
        retries_done < self.max_retries
    }

    fn with_ratio(&self, n: u32, ratio: f64) -> Duration {
        let exp = 2f64.powi(i32::try_from(n).unwrap_or(i32::MAX) - 1);
        let secs = self.min_backoff.as_secs_f64() + exp * ratio * self.delta.as_secs_f64();
        let capped = secs.min(self.max_backoff.as_secs_f64());
        Duration::try_from_secs_f64(capped).unwrap_or(self.max_backoff)
    }

    /// The backoff before the n-th retry (n ≥ 1; n = 0 gives half the exponential term).
    pub fn interval<R: Rng + ?Sized>(&self, n: u32, rng: &mut R) -> Duration {
        let u: f64 = rng.random();
        self.with_ratio(
            n,
            MIN_RANDOM_RATIO + u * (MAX_RANDOM_RATIO - MIN_RANDOM_RATIO),
        )
    }

    /// The range `interval(n)` falls in: `[low, high]` (`high` is exclusive unless capped).
    pub fn interval_bounds(&self, n: u32) -> (Duration, Duration) {
        (
            self.with_ratio(n, MIN_RANDOM_RATIO),
            self.with_ratio(n, MAX_RANDOM_RATIO),
        )
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::abfs_current()
    }
}

/// A server's `grpc-retry-pushback-ms` hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushback {
    /// Retry after exactly this long.
    RetryAfter(Duration),
    /// Do not retry (a negative or unparseable value); count it as a throttling failure.
    DontRetry,
}

impl Pushback {
    /// Parses the metadata value: an ASCII int32 of milliseconds.
    pub fn parse(value: &str) -> Self {
        match value.trim().parse::<i32>() {
            Ok(ms) if ms >= 0 => Self::RetryAfter(Duration::from_millis(ms as u64)),
            _ => Self::DontRetry,
        }
    }
}

/// Why a request is not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUpReason {
    /// `max_retries` retries were made already.
    Exhausted,
    /// The server's pushback said not to retry.
    Pushback,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    RetryAfter(Duration),
    GiveUp(GiveUpReason),
}

/// Retry bookkeeping of one request: create one per request, call [`RetryState::next`] after each
/// failed attempt that the caller deems retryable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryState {
    retries: u32,
    exponent: u32,
}

impl RetryState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries decided so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Decides about the next retry after a failed attempt, given the server's pushback if any.
    pub fn next<R: Rng + ?Sized>(
        &mut self,
        policy: &RetryPolicy,
        pushback: Option<Pushback>,
        rng: &mut R,
    ) -> RetryDecision {
        if pushback == Some(Pushback::DontRetry) {
            return RetryDecision::GiveUp(GiveUpReason::Pushback);
        }
        if !policy.should_retry(self.retries) {
            return RetryDecision::GiveUp(GiveUpReason::Exhausted);
        }
        self.retries += 1;
        match pushback {
            Some(Pushback::RetryAfter(wait)) => {
                self.exponent = 0;
                RetryDecision::RetryAfter(wait)
            }
            _ => {
                self.exponent += 1;
                RetryDecision::RetryAfter(policy.interval(self.exponent, rng))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryParseError {
    #[error(
        "'{0}' is not a retry policy: expected none, abfs, abfs-new or \
         exp:min=100ms,max=5s,delta=200ms[,retries=30]"
    )]
    Kind(String),
    #[error("unknown key '{0}' in retry policy (keys: min, max, delta, retries)")]
    Key(String),
    #[error("'{0}' in retry policy is not key=value")]
    Pair(String),
    #[error("bad value for '{key}' in retry policy: {reason}")]
    Value { key: String, reason: String },
    #[error("retry policy: min backoff {min:?} exceeds max backoff {max:?}")]
    MinAboveMax { min: Duration, max: Duration },
}

impl FromStr for RetryPolicy {
    type Err = RetryParseError;

    /// `none`, `abfs` (legacy defaults), `abfs-new` (HADOOP-19357 defaults), or
    /// `exp[:key=value,…]` with keys `min`, `max`, `delta` (durations such as `100ms`, `5s`; a
    /// bare number is seconds) and `retries`; missing keys take [`RetryPolicy::abfs_current`]'s
    /// values.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let (kind, params) = match text.split_once(':') {
            Some((kind, params)) => (kind.trim(), Some(params)),
            None => (text, None),
        };
        let mut policy = match (kind.to_ascii_lowercase().as_str(), params) {
            ("none", None) => return Ok(Self::none()),
            ("abfs", None) => return Ok(Self::abfs_legacy()),
            ("abfs-new", None) => return Ok(Self::abfs_current()),
            ("exp", _) => Self::abfs_current(),
            _ => return Err(RetryParseError::Kind(s.to_string())),
        };
        for pair in params
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| RetryParseError::Pair(pair.to_string()))?;
            let (key, value) = (key.trim(), value.trim());
            let bad = |reason: String| RetryParseError::Value {
                key: key.to_string(),
                reason,
            };
            let duration = || parse_duration(value).map_err(|e| bad(e.to_string()));
            match key {
                "min" => policy.min_backoff = duration()?,
                "max" => policy.max_backoff = duration()?,
                "delta" => policy.delta = duration()?,
                "retries" => {
                    policy.max_retries = value.parse().map_err(|_| {
                        bad(format!(
                            "'{value}' is not a retry count (0 to {})",
                            u32::MAX
                        ))
                    })?
                }
                _ => return Err(RetryParseError::Key(key.to_string())),
            }
        }
        if policy.min_backoff > policy.max_backoff {
            return Err(RetryParseError::MinAboveMax {
                min: policy.min_backoff,
                max: policy.max_backoff,
            });
        }
        Ok(policy)
    }
}

fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

impl fmt::Display for RetryPolicy {
    /// `none`, or the `exp:` spec that parses back to this policy.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::none() {
            return f.write_str("none");
        }
        write!(
            f,
            "exp:min={},max={},delta={},retries={}",
            fmt_duration(self.min_backoff),
            fmt_duration(self.max_backoff),
            fmt_duration(self.delta),
            self.max_retries
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Equal within a microsecond (the bounds are computed in floating point).
    fn assert_close(got: (Duration, Duration), want: (Duration, Duration)) {
        let near = |a: Duration, b: Duration| a.abs_diff(b) <= Duration::from_micros(1);
        assert!(
            near(got.0, want.0) && near(got.1, want.1),
            "{got:?} != {want:?}"
        );
    }

    #[test]
    fn legacy_abfs_bounds() {
        let p = RetryPolicy::abfs_legacy();
        assert_close(p.interval_bounds(1), (secs(5.4), secs(6.6)));
        assert_close(p.interval_bounds(2), (secs(7.8), secs(10.2)));
        assert_close(p.interval_bounds(3), (secs(12.6), secs(17.4)));
        assert_close(p.interval_bounds(4), (secs(22.2), secs(30.0))); // 31.8 capped
        assert_close(p.interval_bounds(5), (secs(30.0), secs(30.0)));
        assert_close(p.interval_bounds(u32::MAX), (secs(30.0), secs(30.0)));
    }

    #[test]
    fn intervals_stay_within_bounds_and_cover_the_jitter() {
        let mut rng = SmallRng::seed_from_u64(5);
        let custom: RetryPolicy = "exp:min=100ms,max=5s,delta=200ms".parse().unwrap();
        for p in [
            RetryPolicy::abfs_legacy(),
            RetryPolicy::abfs_current(),
            custom,
        ] {
            for n in 1..=40 {
                let (low, high) = p.interval_bounds(n);
                assert!(low >= p.min_backoff && high <= p.max_backoff, "{p} n={n}");
                let draws: Vec<Duration> = (0..2000).map(|_| p.interval(n, &mut rng)).collect();
                let (lo, hi) = (draws.iter().min().unwrap(), draws.iter().max().unwrap());
                assert!(
                    *lo >= low && *hi <= high,
                    "{p} n={n}: [{lo:?}, {hi:?}] not in [{low:?}, {high:?}]"
                );
                // The jitter is used: draws come within 1 % of the range's ends.
                let span = (high - low).as_secs_f64();
                assert!((*lo - low).as_secs_f64() <= span * 0.01 + 1e-9, "{p} n={n}");
                assert!(
                    (high - *hi).as_secs_f64() <= span * 0.01 + 1e-9,
                    "{p} n={n}"
                );
            }
        }
    }

    #[test]
    fn retries_never_exceed_max_retries() {
        let mut rng = SmallRng::seed_from_u64(9);
        for max in [0, 1, 5, 30] {
            let policy = RetryPolicy {
                max_retries: max,
                ..RetryPolicy::abfs_legacy()
            };
            let mut state = RetryState::new();
            let mut waits = Vec::new();
            loop {
                match state.next(&policy, None, &mut rng) {
                    RetryDecision::RetryAfter(d) => waits.push(d),
                    RetryDecision::GiveUp(reason) => {
                        assert_eq!(reason, GiveUpReason::Exhausted);
                        break;
                    }
                }
                assert!(waits.len() <= max as usize);
            }
            assert_eq!(waits.len(), max as usize);
            assert_eq!(state.retries(), max);
            for (i, w) in waits.iter().enumerate() {
                let (low, high) = policy.interval_bounds(i as u32 + 1);
                assert!(*w >= low && *w <= high);
            }
            // Asking again keeps giving up.
            assert_eq!(
                state.next(&policy, None, &mut rng),
                RetryDecision::GiveUp(GiveUpReason::Exhausted)
            );
        }
        let mut state = RetryState::new();
        assert_eq!(
            state.next(&RetryPolicy::none(), None, &mut rng),
            RetryDecision::GiveUp(GiveUpReason::Exhausted)
        );
    }

    #[test]
    fn pushback_is_honoured() {
        assert_eq!(
            Pushback::parse("250"),
            Pushback::RetryAfter(Duration::from_millis(250))
        );
        assert_eq!(Pushback::parse("0"), Pushback::RetryAfter(Duration::ZERO));
        for stop in ["-1", "-250", "soon", "", "2147483648", "1.5"] {
            assert_eq!(Pushback::parse(stop), Pushback::DontRetry, "{stop}");
        }

        let policy = RetryPolicy {
            max_retries: 4,
            ..RetryPolicy::abfs_legacy()
        };
        let mut rng = SmallRng::seed_from_u64(3);
        let mut state = RetryState::new();
        let in_bounds = |d: RetryDecision, n: u32| match d {
            RetryDecision::RetryAfter(w) => {
                let (low, high) = policy.interval_bounds(n);
                w >= low && w <= high
            }
            RetryDecision::GiveUp(_) => false,
        };
        assert!(in_bounds(state.next(&policy, None, &mut rng), 1));
        assert!(in_bounds(state.next(&policy, None, &mut rng), 2));
        // A pushback wins over the backoff, even beyond max_backoff, and resets the exponent.
        let long = Duration::from_secs(45);
        assert_eq!(
            state.next(&policy, Some(Pushback::RetryAfter(long)), &mut rng),
            RetryDecision::RetryAfter(long)
        );
        assert!(in_bounds(state.next(&policy, None, &mut rng), 1));
        // ... but still counts toward max_retries.
        assert_eq!(state.retries(), 4);
        assert_eq!(
            state.next(
                &policy,
                Some(Pushback::RetryAfter(Duration::ZERO)),
                &mut rng
            ),
            RetryDecision::GiveUp(GiveUpReason::Exhausted)
        );
        // A negative pushback stops at once.
        let mut fresh = RetryState::new();
        assert_eq!(
            fresh.next(&policy, Some(Pushback::DontRetry), &mut rng),
            RetryDecision::GiveUp(GiveUpReason::Pushback)
        );
        assert_eq!(fresh.retries(), 0);
    }

    #[test]
    fn same_seed_same_intervals() {
        let p = RetryPolicy::abfs_legacy();
        let run = |seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (1..=10)
                .map(|n| p.interval(n, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn parses_specs() {
        assert_eq!("none".parse(), Ok(RetryPolicy::none()));
        assert_eq!("ABFS".parse(), Ok(RetryPolicy::abfs_legacy()));
        assert_eq!("abfs-new".parse(), Ok(RetryPolicy::abfs_current()));
        assert_eq!("exp".parse(), Ok(RetryPolicy::abfs_current()));
        assert_eq!(
            "exp:min=100ms,max=5s,delta=200ms".parse(),
            Ok(RetryPolicy {
                max_retries: 30,
                min_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                delta: Duration::from_millis(200),
            })
        );
        assert_eq!(
            " exp: retries=3 , delta=1.5s ".parse(),
            Ok(RetryPolicy {
                max_retries: 3,
                delta: Duration::from_millis(1500),
                ..RetryPolicy::abfs_current()
            })
        );
        let err = |s: &str| s.parse::<RetryPolicy>().unwrap_err();
        assert!(matches!(err("linear"), RetryParseError::Kind(_)));
        assert!(matches!(err("none:retries=1"), RetryParseError::Kind(_)));
        assert!(matches!(err("exp:jitter=1s"), RetryParseError::Key(k) if k == "jitter"));
        assert!(matches!(err("exp:min"), RetryParseError::Pair(_)));
        assert!(matches!(err("exp:min=fast"), RetryParseError::Value { .. }));
        assert!(matches!(
            err("exp:retries=-1"),
            RetryParseError::Value { .. }
        ));
        assert!(matches!(
            err("exp:min=10s,max=1s"),
            RetryParseError::MinAboveMax { .. }
        ));
        assert!(
            err("linear")
                .to_string()
                .contains("exp:min=100ms,max=5s,delta=200ms")
        );
    }

    #[test]
    fn display_round_trips() {
        for p in [
            RetryPolicy::none(),
            RetryPolicy::abfs_legacy(),
            RetryPolicy::abfs_current(),
            RetryPolicy {
                max_retries: 2,
                delta: Duration::from_micros(1500),
                ..RetryPolicy::none()
            },
            RetryPolicy {
                max_retries: 7,
                min_backoff: Duration::from_nanos(5),
                max_backoff: Duration::from_secs(1),
                delta: Duration::ZERO,
            },
        ] {
            assert_eq!(p.to_string().parse(), Ok(p), "{p}");
        }
        assert_eq!(
            RetryPolicy::abfs_legacy().to_string(),
            "exp:min=3s,max=30s,delta=3s,retries=30"
        );
    }
}

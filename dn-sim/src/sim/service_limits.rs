//! Service limits like a storage account's (Azure storage accounts, HADOOP-14660):
//! `--limit-ingress`, `--limit-egress` (bytes/s of request / response data) and `--limit-ops`
//! (requests/s), each a token bucket shared by every connection and stream. Over a limit a request
//! is rejected instead of served, with a gRPC status that names the limit in Azure's words
//! ("Ingress is over the account limit.") and, optionally, a `grpc-retry-pushback-ms` trailer.
//!
//! When the rejection comes (`--limit-reject-timing`):
//! - `early`: when the stream opens, before its request is read (gRPC Trailers-Only). A stream is
//!   rejected early if the ops bucket has no token or a byte bucket is in debt; the bytes of an
//!   admitted request are charged when it is read, and a request that still does not fit then is
//!   rejected after its body.
//! - `after-body`: after the request was received (the cost of a throttled upload before
//!   `100-continue`: the rejected bytes crossed the network).
//! - `after:DURATION`: after the body and a delay, as a slow front end would.
//!
//! Rejections never hold a handler. Limits, status, pushback and timing change at run time
//! through `PUT /config`.

use arc_swap::ArcSwap;
use common::token_bucket::{Denied, TokenBucket};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::{Code, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectTiming {
    Early,
    AfterBody,
    After(Duration),
}

impl FromStr for RejectTiming {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "early" => Ok(Self::Early),
            "after-body" => Ok(Self::AfterBody),
            _ => match s.strip_prefix("after:") {
                Some(d) => common::units::parse_duration(d)
                    .map(Self::After)
                    .map_err(|e| e.to_string()),
                None => Err(format!("'{s}' is not early, after-body or after:DURATION")),
            },
        }
    }
}

impl fmt::Display for RejectTiming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Early => f.write_str("early"),
            Self::AfterBody => f.write_str("after-body"),
            Self::After(d) => write!(f, "after:{}", crate::sim::delay::format_duration(*d)),
        }
    }
}

/// The `grpc-retry-pushback-ms` trailer of a rejection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushback {
    None,
    /// How long until the bucket admits the request again.
    Auto,
    Fixed(Duration),
}

impl FromStr for Pushback {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Self::None),
            "auto" => Ok(Self::Auto),
            d => common::units::parse_duration(d)
                .map(Self::Fixed)
                .map_err(|_| format!("'{s}' is not none, auto or a duration")),
        }
    }
}

impl fmt::Display for Pushback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Auto => f.write_str("auto"),
            Self::Fixed(d) => f.write_str(&crate::sim::delay::format_duration(*d)),
        }
    }
}

/// Which limit a request ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Ingress,
    Egress,
    Ops,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::Ingress => "ingress",
            Reason::Egress => "egress",
            Reason::Ops => "ops",
        }
    }

    /// Azure Storage's wording.
    fn message(self) -> &'static str {
        match self {
            Reason::Ingress => "Ingress is over the account limit.",
            Reason::Egress => "Egress is over the account limit.",
            Reason::Ops => "Operations per second is over the account limit.",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Rejection {
    pub reason: Reason,
    pub retry_after: Duration,
}

/// How rejections look; swapped as a whole when changed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LimitPolicy {
    pub status: Code,
    pub pushback: Pushback,
    pub timing: RejectTiming,
    /// How much of a limit may be used at once, as time at the limit's rate.
    pub burst: Duration,
}

impl Default for LimitPolicy {
    fn default() -> Self {
        Self {
            status: Code::Unavailable,
            pushback: Pushback::None,
            timing: RejectTiming::AfterBody,
            burst: Duration::from_millis(100),
        }
    }
}

/// Rates in units per second; `None` = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LimitRates {
    pub ingress: Option<f64>,
    pub egress: Option<f64>,
    pub ops: Option<f64>,
}

pub struct ServiceLimits {
    ingress: TokenBucket,
    egress: TokenBucket,
    ops: TokenBucket,
    rates: ArcSwap<LimitRates>,
    policy: ArcSwap<LimitPolicy>,
}

fn bucket(rate: Option<f64>, burst: Duration) -> TokenBucket {
    match rate {
        Some(r) => TokenBucket::new(r, r * burst.as_secs_f64()),
        None => TokenBucket::unlimited(),
    }
}

impl ServiceLimits {
    pub fn new(rates: LimitRates, policy: LimitPolicy) -> Self {
        Self {
            ingress: bucket(rates.ingress, policy.burst),
            egress: bucket(rates.egress, policy.burst),
            ops: bucket(rates.ops.map(|r| r.max(1.0)), policy.burst),
            rates: ArcSwap::from_pointee(rates),
            policy: ArcSwap::from_pointee(policy),
        }
    }

    pub fn rates(&self) -> LimitRates {
        **self.rates.load()
    }

    pub fn policy(&self) -> LimitPolicy {
        **self.policy.load()
    }

    pub fn is_limited(&self) -> bool {
        let r = self.rates();
        r.ingress.is_some() || r.egress.is_some() || r.ops.is_some()
    }

    /// Changes rates and policy while serving.
    pub fn update(&self, rates: LimitRates, policy: LimitPolicy) -> Result<(), String> {
        let now = Instant::now();
        let burst = policy.burst.as_secs_f64();
        for (b, r, name) in [
            (&self.ingress, rates.ingress, "ingress"),
            (&self.egress, rates.egress, "egress"),
            (&self.ops, rates.ops, "ops"),
        ] {
            let rate = r.unwrap_or(f64::INFINITY);
            let burst = if rate.is_finite() {
                (rate * burst).max(if name == "ops" { 1.0 } else { 0.0 })
            } else {
                0.0
            };
            b.set_rate(rate, burst, now)
                .map_err(|e| format!("limit_{name}: {e}"))?;
        }
        self.rates.store(Arc::new(rates));
        self.policy.store(Arc::new(policy));
        Ok(())
    }

    /// The early check, when a stream opens: an ops token, and no byte bucket in debt.
    pub fn check_early(&self, now: Instant) -> Result<(), Rejection> {
        take(&self.ops, 1, now, Reason::Ops)?;
        for (b, reason) in [
            (&self.ingress, Reason::Ingress),
            (&self.egress, Reason::Egress),
        ] {
            if !b.is_unlimited() && b.available(now) < 0.0 {
                let wait = Duration::from_secs_f64(-b.available(now) / b.rate());
                return Err(Rejection {
                    reason,
                    retry_after: wait,
                });
            }
        }
        Ok(())
    }

    /// The check of a received request; `ops_taken` when the early check already took its token.
    pub fn check(
        &self,
        ingress: u64,
        egress: u64,
        ops_taken: bool,
        now: Instant,
    ) -> Result<(), Rejection> {
        if !ops_taken {
            take(&self.ops, 1, now, Reason::Ops)?;
        }
        take(&self.ingress, ingress, now, Reason::Ingress)?;
        take(&self.egress, egress, now, Reason::Egress)
    }

    /// The status a rejected request gets.
    pub fn status(&self, rejection: Rejection) -> Status {
        let policy = self.policy();
        let rate = match rejection.reason {
            Reason::Ingress => self.rates().ingress,
            Reason::Egress => self.rates().egress,
            Reason::Ops => self.rates().ops,
        };
        let unit = if rejection.reason == Reason::Ops {
            "requests/s"
        } else {
            "bytes/s"
        };
        let msg = format!(
            "{} (dn-sim --limit-{} {:.0} {unit})",
            rejection.reason.message(),
            rejection.reason.label(),
            rate.unwrap_or(0.0)
        );
        let mut status = Status::new(policy.status, msg);
        let pushback = match policy.pushback {
            Pushback::None => None,
            Pushback::Auto => Some(rejection.retry_after),
            Pushback::Fixed(d) => Some(d),
        };
        if let Some(p) = pushback {
            let ms = p.as_millis().min(i32::MAX as u128).to_string();
            status.metadata_mut().insert(
                "grpc-retry-pushback-ms",
                ms.parse().expect("digits are ASCII"),
            );
        }
        status
    }
}

fn take(bucket: &TokenBucket, amount: u64, now: Instant, reason: Reason) -> Result<(), Rejection> {
    if amount == 0 || bucket.is_unlimited() {
        return Ok(());
    }
    bucket
        .try_take(amount, now)
        .map_err(|Denied { retry_after }| Rejection {
            reason,
            retry_after,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_name_the_limit_and_carry_pushback() {
        let policy = LimitPolicy {
            pushback: Pushback::Auto,
            ..LimitPolicy::default()
        };
        let limits = ServiceLimits::new(
            LimitRates {
                ingress: Some(1000.0),
                ..Default::default()
            },
            policy,
        );
        let now = Instant::now();
        assert!(limits.check(100, 0, false, now).is_ok()); // burst: 100 ms of 1000 B/s
        let rejection = limits.check(100, 0, false, now).unwrap_err();
        assert_eq!(rejection.reason, Reason::Ingress);
        let status = limits.status(rejection);
        assert_eq!(status.code(), Code::Unavailable);
        assert!(
            status
                .message()
                .starts_with("Ingress is over the account limit.")
        );
        let ms: u64 = status
            .metadata()
            .get("grpc-retry-pushback-ms")
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((50..=150).contains(&ms), "{ms}");
    }

    #[test]
    fn ops_limit_admits_its_rate_over_a_few_seconds() {
        let limits = ServiceLimits::new(
            LimitRates {
                ops: Some(500.0),
                ..Default::default()
            },
            LimitPolicy::default(),
        );
        let start = Instant::now();
        let mut admitted = 0;
        // 5 s of offered load at 2000/s in 0.5 ms steps.
        for i in 0..10_000u64 {
            if limits
                .check(0, 0, false, start + Duration::from_micros(500 * i))
                .is_ok()
            {
                admitted += 1;
            }
        }
        assert!((2450..=2600).contains(&admitted), "{admitted}");
    }

    #[test]
    fn update_lifts_and_sets_limits() {
        let limits = ServiceLimits::new(
            LimitRates {
                ops: Some(1.0),
                ..Default::default()
            },
            LimitPolicy::default(),
        );
        let now = Instant::now();
        assert!(limits.check(0, 0, false, now).is_ok());
        assert!(limits.check(0, 0, false, now).is_err());
        limits
            .update(LimitRates::default(), LimitPolicy::default())
            .unwrap();
        assert!(!limits.is_limited());
        for _ in 0..100 {
            assert!(limits.check(1 << 20, 1 << 20, false, now).is_ok());
        }
    }

    #[test]
    fn timings_and_pushbacks_parse() {
        assert_eq!("early".parse(), Ok(RejectTiming::Early));
        assert_eq!(
            "after:250ms".parse(),
            Ok(RejectTiming::After(Duration::from_millis(250)))
        );
        assert!("later".parse::<RejectTiming>().is_err());
        assert_eq!("auto".parse(), Ok(Pushback::Auto));
        assert_eq!("1s".parse(), Ok(Pushback::Fixed(Duration::from_secs(1))));
    }
}

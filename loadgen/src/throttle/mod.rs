//! Client-side throttles: how a loadgen client slows itself down when the DataNode rejects
//! requests for being over a limit (throttling.md §2).
//!
//! A throttle is asked before every send, retries included ([`ClientThrottle::before_send`]), and
//! told the outcome of every response ([`ClientThrottle::on_result`]). Time is always passed in,
//! so every throttle is deterministic and testable with synthetic instants; none of them starts a
//! timer or a task.
//!
//! | kind | module | idea |
//! |---|---|---|
//! | `none` | [`none`] | never slows down (baseline: only the retry policy acts) |
//! | `analyzer` | [`analyzer`] | HADOOP-14660: sleep before each send, tuned every analysis period |
//! | `sre` | [`sre`] | Google SRE adaptive throttling: reject locally with probability p |
//! | `aimd` | [`aimd`] | pace sends at a rate that grows additively and shrinks multiplicatively |
//!
//! Caller contract:
//! - [`Decision::Sleep`] means "sleep this long, then send" — do not ask again; for pacing
//!   throttles the send slot is already reserved.
//! - [`Decision::Wait`] means "sleep this long, then ask again": nothing was reserved (a pacer
//!   whose reservations already reach as far ahead as it allows).
//! - [`Decision::RejectLocally`] means "fail this attempt without sending"; the throttle has
//!   already counted it, so do **not** call `on_result` for it.
//! - `bytes` is the request's payload size (the data length of a write or the requested length of
//!   a read), also for rejected requests, as in WASB/ABFS.

pub mod aimd;
pub mod analyzer;
pub mod none;
pub mod sre;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use aimd::{AimdConfig, AimdThrottle, AimdUnit};
pub use analyzer::{AnalyzerThrottle, ClientThrottlingAnalyzer};
pub use none::NoThrottle;
pub use sre::{SreConfig, SreThrottle};

/// Which analyzer (and, for others, which accounting) an operation belongs to.
/// Ozone: `ReadChunk`/`GetSmallFile` are reads, `WriteChunk`/`PutSmallFile` writes, the rest
/// (`PutBlock`, `GetBlock`, `Echo`, …) other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read,
    Write,
    Other,
}

/// What to do with the request about to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Proceed,
    /// Sleep this long, then send (without asking again).
    Sleep(Duration),
    /// Sleep this long, then ask again (no send slot was reserved).
    Wait(Duration),
    /// Do not send; treat the attempt as failed locally (it may be retried by the retry policy).
    RejectLocally,
}

/// How a sent request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Rejected by the service for being over a limit (RESOURCE_EXHAUSTED / UNAVAILABLE with a
    /// limit reason, 503 ServerBusy).
    Throttled,
    /// Any other failure (application error, transport error, timeout).
    OtherFailure,
}

/// A client-side throttle. Implementations are `Send + Sync` so one can be shared by the worker
/// tasks of a connection or of the whole process; they use tiny critical sections.
pub trait ClientThrottle: Send + Sync + fmt::Debug {
    /// Called before every attempt (retries included).
    fn before_send(&self, op: OpKind, bytes: u64, now: Instant) -> Decision;
    /// Called with the outcome of every attempt that was actually sent.
    fn on_result(&self, op: OpKind, bytes: u64, outcome: Outcome, now: Instant);
}

impl<T: ClientThrottle + ?Sized> ClientThrottle for Arc<T> {
    fn before_send(&self, op: OpKind, bytes: u64, now: Instant) -> Decision {
        (**self).before_send(op, bytes, now)
    }
    fn on_result(&self, op: OpKind, bytes: u64, outcome: Outcome, now: Instant) {
        (**self).on_result(op, bytes, outcome, now)
    }
}

impl<T: ClientThrottle + ?Sized> ClientThrottle for Box<T> {
    fn before_send(&self, op: OpKind, bytes: u64, now: Instant) -> Decision {
        (**self).before_send(op, bytes, now)
    }
    fn on_result(&self, op: OpKind, bytes: u64, outcome: Outcome, now: Instant) {
        (**self).on_result(op, bytes, outcome, now)
    }
}

/// The `--throttle` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThrottleKind {
    #[default]
    None,
    Analyzer,
    Sre,
    Aimd,
}

impl ThrottleKind {
    pub const ALL: [ThrottleKind; 4] = [Self::None, Self::Analyzer, Self::Sre, Self::Aimd];

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Analyzer => "analyzer",
            Self::Sre => "sre",
            Self::Aimd => "aimd",
        }
    }

    /// A throttle of this kind with its documented defaults (analyzer period 10 s, SRE K = 2 over
    /// 2 minutes, AIMD in ops/s). `seed` feeds the SRE throttle's random draws.
    pub fn build(self, seed: u64) -> Arc<dyn ClientThrottle> {
        match self {
            Self::None => Arc::new(NoThrottle),
            Self::Analyzer => Arc::new(AnalyzerThrottle::default()),
            Self::Sre => Arc::new(SreThrottle::new(SreConfig::default(), seed)),
            Self::Aimd => Arc::new(AimdThrottle::new(AimdConfig::ops())),
        }
    }
}

impl fmt::Display for ThrottleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown throttle '{0}': expected one of none, analyzer, sre, aimd")]
pub struct ParseThrottleKindError(pub String);

impl FromStr for ThrottleKind {
    type Err = ParseThrottleKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| ParseThrottleKindError(s.to_string()))
    }
}

/// The `--throttle-scope` choice: one throttle per connection, or one shared by the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThrottleScope {
    #[default]
    Connection,
    Process,
}

impl fmt::Display for ThrottleScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connection => "connection",
            Self::Process => "process",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown throttle scope '{0}': expected connection or process")]
pub struct ParseThrottleScopeError(pub String);

impl FromStr for ThrottleScope {
    type Err = ParseThrottleScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "connection" => Ok(Self::Connection),
            "process" => Ok(Self::Process),
            _ => Err(ParseThrottleScopeError(s.to_string())),
        }
    }
}

/// Which throttle analyzer a workload's requests belong to, and their byte count: the bigger of
/// request and response payload decides (an echo with a request payload is a write: dn-sim charges
/// it to ingress).
pub fn op_of(request_bytes: u64, response_bytes: u64) -> (OpKind, u64) {
    if request_bytes == 0 && response_bytes == 0 {
        (OpKind::Other, 0)
    } else if request_bytes >= response_bytes {
        (OpKind::Write, request_bytes)
    } else {
        (OpKind::Read, response_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in ThrottleKind::ALL {
            assert_eq!(k.to_string().parse::<ThrottleKind>(), Ok(k));
        }
        assert_eq!(" SRE ".parse::<ThrottleKind>(), Ok(ThrottleKind::Sre));
        let err = "cubic".parse::<ThrottleKind>().unwrap_err().to_string();
        assert!(
            err.contains("'cubic'") && err.contains("none, analyzer, sre, aimd"),
            "{err}"
        );
        assert_eq!(
            "process".parse::<ThrottleScope>(),
            Ok(ThrottleScope::Process)
        );
        assert!("thread".parse::<ThrottleScope>().is_err());
    }

    #[test]
    fn built_throttles_are_shareable_and_start_open() {
        fn assert_send_sync<T: Send + Sync>(_: &T) {}
        let now = Instant::now();
        for k in ThrottleKind::ALL {
            let t = k.build(7);
            assert_send_sync(&t);
            assert_eq!(
                t.before_send(OpKind::Write, 4096, now),
                Decision::Proceed,
                "{k}"
            );
            t.on_result(OpKind::Write, 4096, Outcome::Success, now);
        }
    }
}

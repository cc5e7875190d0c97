//! Retries and client-side throttling on the per-request path (issue #6): one request as the user
//! counts it may take several attempts.
//!
//! ```text
//! first = now                                   latency is measured from here
//! loop:
//!   throttle.before_send(op, bytes, now)        before every attempt, retries included (ABFS)
//!     Proceed | Sleep(d) → (sleep d) → attempt → throttle.on_result(outcome)
//!     RejectLocally      → the attempt fails locally, without being sent
//!   success                    → the request ends as a success
//!   not retryable              → the request ends as a failure (Ozone result codes, other gRPC)
//!   retryable, RetryState.next → RetryAfter(d): sleep d (or the server's pushback), loop
//!                              → GiveUp: the request ends as a failure (or locally rejected)
//! ```
//!
//! Classification of an attempt ([`classify`]):
//! - gRPC `UNAVAILABLE` or `RESOURCE_EXHAUSTED` sent by the server (dn-sim's "… is over the
//!   account limit." rejections, any overload) → [`Outcome::Throttled`], retryable;
//! - deadline or transport failure → [`Outcome::OtherFailure`], retryable;
//! - anything else (an Ozone `result` code, other gRPC codes) → `OtherFailure`, not retried.
//!
//! A local rejection is treated like a throttled attempt by the retry policy (as an application
//! of Google's adaptive throttling would retry a fast-failed call later): it uses one retry and
//! its backoff. A request whose last attempt was rejected locally ends as *locally rejected*: it
//! is counted apart from failures and does not stop the run (the client shed it; the DataNode did
//! nothing wrong). Every measured request ends as exactly one of success, failure (after retries)
//! or locally rejected.

use crate::engine::request::{self, Deadline};
use crate::outcome::{ErrorKind, Failure};
use crate::retry::{Pushback, RetryDecision, RetryPolicy, RetryState};
use crate::throttle::{ClientThrottle, Decision, OpKind, Outcome};
use crate::workload::Rpc;
use rand::rngs::SmallRng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Code;

pub use crate::outcome::{RequestCounts, ResilienceCounts};

/// How an attempt's failure is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    pub outcome: Outcome,
    pub retryable: bool,
}

/// Classifies a failed attempt (see the module documentation).
pub fn classify(f: &Failure) -> Class {
    match f.kind {
        ErrorKind::Grpc(c)
            if c == Code::Unavailable as i32 || c == Code::ResourceExhausted as i32 =>
        {
            Class {
                outcome: Outcome::Throttled,
                retryable: true,
            }
        }
        ErrorKind::Deadline | ErrorKind::Transport => Class {
            outcome: Outcome::OtherFailure,
            retryable: true,
        },
        ErrorKind::Ozone(_)
        | ErrorKind::Grpc(_)
        | ErrorKind::Integrity(_)
        | ErrorKind::Protocol
        | ErrorKind::Ratis(_)
        | ErrorKind::LocallyRejected => Class {
            outcome: Outcome::OtherFailure,
            retryable: false,
        },
    }
}

/// A worker's retry and throttle settings.
pub struct Resilience {
    pub retry: RetryPolicy,
    pub throttle: Arc<dyn ClientThrottle>,
    pub rng: SmallRng,
}

/// One request's attempts under the throttle and the retry policy, driven by the caller:
///
/// ```text
/// let mut attempts = Attempts::new(res, op, bytes);
/// let last = loop {
///     let answer = if attempts.admit().await { Some(send().await) } else { None };
///     if !attempts.again(answer.as_ref().map(|a| a.failure())).await { break answer; }
/// };
/// ```
///
/// (A loop in the caller rather than a closure taking `send`: an async closure borrowing the
/// connection would make the caller's future not `Send`, which spawned tasks need.)
pub struct Attempts<'a> {
    res: &'a mut Resilience,
    op: OpKind,
    bytes: u64,
    state: RetryState,
    counts: RequestCounts,
}

impl<'a> Attempts<'a> {
    /// `op` and `bytes` are what the throttle is told about this request.
    pub fn new(res: &'a mut Resilience, op: OpKind, bytes: u64) -> Self {
        Attempts {
            res,
            op,
            bytes,
            state: RetryState::new(),
            counts: RequestCounts::default(),
        }
    }

    /// Asks the throttle before an attempt and sleeps as long as it says: true to send now,
    /// false if it rejected the attempt locally (then call [`again`](Self::again) with `None`).
    pub async fn admit(&mut self) -> bool {
        let mut delayed = Duration::ZERO;
        let admitted = loop {
            let now = Instant::now();
            match self.res.throttle.before_send(self.op, self.bytes, now) {
                Decision::RejectLocally => break false,
                Decision::Proceed => break true,
                Decision::Sleep(d) => {
                    delayed += d;
                    tokio::time::sleep(d).await;
                    break true;
                }
                // Nothing reserved: ask again after the wait.
                Decision::Wait(d) => {
                    delayed += d;
                    tokio::time::sleep(d).await;
                }
            }
        };
        if !delayed.is_zero() {
            self.counts.throttle_delays += 1;
            self.counts.throttle_delay_ms += delayed.as_millis() as u64;
        }
        if admitted {
            self.counts.attempts += 1;
        } else {
            self.counts.local_rejections += 1;
        }
        admitted
    }

    /// After an attempt: `Some(failure)` is what the sent attempt answered (`Some(None)` a
    /// success), `None` a local rejection. Tells the throttle, and returns true after sleeping
    /// the backoff (or the server's pushback) if the request is to be tried again.
    pub async fn again(&mut self, sent: Option<Option<&Failure>>) -> bool {
        let pushback = match sent {
            None => None,
            Some(failure) => {
                let (outcome, retryable, pushback) = match failure {
                    None => (Outcome::Success, false, None),
                    Some(f) => {
                        let c = classify(f);
                        (c.outcome, c.retryable, f.pushback)
                    }
                };
                self.res
                    .throttle
                    .on_result(self.op, self.bytes, outcome, Instant::now());
                if outcome == Outcome::Throttled {
                    self.counts.rejections += 1;
                }
                if !retryable {
                    return false;
                }
                pushback
            }
        };
        match self
            .state
            .next(&self.res.retry, pushback, &mut self.res.rng)
        {
            RetryDecision::RetryAfter(d) => {
                self.counts.retries += 1;
                tokio::time::sleep(d).await;
                true
            }
            RetryDecision::GiveUp(_) => false,
        }
    }

    pub fn counts(&self) -> RequestCounts {
        self.counts
    }
}

/// Sends one RPC with throttling and retries; returns how its last attempt ended (`None`: the
/// throttle rejected it locally) and the attempts' counts.
pub async fn request(
    client: &mut crate::connection::unary::UnaryClient,
    rpc: &Rpc,
    deadline: &mut Deadline,
    res: &mut Resilience,
) -> (Option<Result<(), Failure>>, RequestCounts) {
    let mut attempts = Attempts::new(res, rpc.throttle_op, rpc.throttle_bytes);
    let last = loop {
        let answer = if attempts.admit().await {
            Some(request::attempt(client, rpc.frame.clone(), deadline).await)
        } else {
            None
        };
        if !attempts
            .again(answer.as_ref().map(|a| a.as_ref().err()))
            .await
        {
            break answer;
        }
    };
    (last, attempts.counts())
}

pub use crate::config::ResilienceConfig;

impl Resilience {
    /// A worker's settings with a throttle of its own connection's (or the process's).
    pub fn new(config: &ResilienceConfig, throttle: Arc<dyn ClientThrottle>) -> Self {
        Resilience {
            retry: config.retry,
            throttle,
            rng: rand::SeedableRng::seed_from_u64(fresh_seed()),
        }
    }
}

/// A seed that differs between processes and calls (independent clients must not draw the same
/// jitter, or their retries would fall in step).
pub fn fresh_seed() -> u64 {
    rand::random()
}

/// Whether a push-back value asks not to retry (for reports and tests).
pub fn refuses_retry(p: Option<Pushback>) -> bool {
    p == Some(Pushback::DontRetry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::throttle::{AimdConfig, AimdUnit, SreConfig};

    #[test]
    fn limit_rejections_are_throttled_and_retryable_ozone_errors_are_final() {
        let unavailable = Failure::new(
            ErrorKind::Grpc(Code::Unavailable as i32),
            "Ingress is over the account limit.",
        );
        assert_eq!(
            classify(&unavailable),
            Class {
                outcome: Outcome::Throttled,
                retryable: true
            }
        );
        let exhausted = Failure::new(ErrorKind::Grpc(Code::ResourceExhausted as i32), "quota");
        assert_eq!(classify(&exhausted).outcome, Outcome::Throttled);
        let deadline = Failure::new(ErrorKind::Deadline, "late");
        assert_eq!(
            classify(&deadline),
            Class {
                outcome: Outcome::OtherFailure,
                retryable: true
            }
        );
        assert!(classify(&Failure::new(ErrorKind::Transport, "reset")).retryable);
        assert!(!classify(&Failure::new(ErrorKind::Ozone(9), "no container")).retryable);
        assert!(!classify(&Failure::new(ErrorKind::Grpc(Code::Internal as i32), "bug")).retryable);
        assert!(refuses_retry(Some(Pushback::DontRetry)));
        assert!(!refuses_retry(None));
    }

    #[test]
    fn echo_with_a_request_payload_is_a_write() {
        use crate::throttle::op_of;
        assert_eq!(op_of(65536, 0), (OpKind::Write, 65536));
        assert_eq!(op_of(0, 4096), (OpKind::Read, 4096));
        assert_eq!(op_of(0, 0), (OpKind::Other, 0));
    }

    /// The resilience settings of `loadgen echo --client-throttle KIND EXTRA...`.
    fn config_of(kind: &str, extra: &[&str]) -> ResilienceConfig {
        use clap::Parser;
        let mut argv = vec!["loadgen", "echo", "--client-throttle", kind];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(argv)
            .expect("valid flags")
            .command
        {
            crate::cli::Command::Echo(e) => {
                ResilienceConfig::from_args(&e.common.resilience, AimdUnit::Ops)
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn sre_flags_reach_the_built_throttle() {
        let parse = |extra: &[&str]| config_of("sre", extra);
        let defaults = parse(&[]);
        assert_eq!(defaults.sre, SreConfig::default());
        let c = parse(&["--sre-k", "0.5", "--sre-window", "10s"]);
        assert_eq!(c.sre.k, 0.5);
        assert_eq!(c.sre.window, Duration::from_secs(10));
        // Every sent attempt accepted: with K = 2 p stays 0; with K = 0.5 it is > 0.
        let rejections = |config: &ResilienceConfig| {
            let t = config.build_throttle(7);
            let now = Instant::now();
            for _ in 0..100 {
                if t.before_send(OpKind::Write, 1, now) == Decision::Proceed {
                    t.on_result(OpKind::Write, 1, Outcome::Success, now);
                }
            }
            (0..20)
                .filter(|_| t.before_send(OpKind::Write, 1, now) == Decision::RejectLocally)
                .count()
        };
        assert_eq!(rejections(&defaults), 0);
        assert!(rejections(&c) > 0);
    }

    #[test]
    fn aimd_flags_reach_the_built_throttle() {
        let parse = |extra: &[&str]| config_of("aimd", extra);
        assert_eq!(parse(&[]).aimd, AimdConfig::ops());
        let c = parse(&["--aimd-increase", "20", "--aimd-decrease", "0.5"]);
        assert!((c.aimd.increase - 2.0).abs() < 1e-9, "20/s in 100 ms steps");
        assert_eq!(c.aimd.decrease_factor, 0.5);
        // A rejection halves the paced rate: the gap between sends doubles.
        let t = c.build_throttle(1);
        let t0 = Instant::now();
        let gap = |t: &Arc<dyn ClientThrottle>, at: Instant| {
            let _ = t.before_send(OpKind::Write, 1, at);
            match t.before_send(OpKind::Write, 1, at) {
                Decision::Sleep(d) => d,
                other => panic!("{other:?}"),
            }
        };
        let before = gap(&t, t0);
        t.on_result(
            OpKind::Write,
            1,
            Outcome::Throttled,
            t0 + Duration::from_secs(1),
        );
        let after = gap(&t, t0 + Duration::from_secs(2));
        let ratio = after.as_secs_f64() / before.as_secs_f64();
        assert!((ratio - 2.0).abs() < 0.05, "{before:?} -> {after:?}");
    }

    #[test]
    fn counts_merge_and_keep_the_largest_per_request_retries() {
        let mut a = ResilienceCounts::default();
        a.add_request(&RequestCounts {
            attempts: 3,
            retries: 2,
            rejections: 2,
            ..Default::default()
        });
        let mut b = ResilienceCounts::default();
        b.add_request(&RequestCounts {
            attempts: 1,
            retries: 5,
            local_rejections: 4,
            throttle_delays: 1,
            ..Default::default()
        });
        a.merge(&b);
        assert_eq!(a.attempts, 4);
        assert_eq!(a.retries, 7);
        assert_eq!(a.max_retries_per_request, 5);
        assert_eq!(a.locally_throttled(), 5);
    }
}

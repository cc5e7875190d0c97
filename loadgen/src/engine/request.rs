//! The per-request path, in two layers so that client throttling and retries can be added
//! without restructuring the workers:
//!
//! - [`attempt`]: one send on the wire (a new bidi stream, half-closed at once, one answer);
//! - one RPC as the statistics count it: one attempt, or with `--retry` or a client throttle
//!   `resilience::request`, which runs the attempts under the throttle and the retry
//!   policy (`resilience::Attempts`). The workload then judges the answer.
//!
//! A `result != SUCCESS` answer is a failure in one place ([`ozone_failure`]) for both stream
//! modes.

use crate::connection::http2::RequestBody;
use crate::connection::unary::UnaryClient;
use crate::outcome::{ErrorKind, Failure};
use common::proto::{ContainerCommandResponseProto, Result as OzoneResult};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// A response with `result != SUCCESS` is a failure of kind `result:NAME`.
pub fn ozone_failure(resp: &ContainerCommandResponseProto) -> Option<Failure> {
    (resp.result != OzoneResult::Success as i32).then(|| {
        Failure::new(
            ErrorKind::Ozone(resp.result),
            resp.message.clone().unwrap_or_default(),
        )
    })
}

pub fn deadline_failure(timeout: Duration) -> Failure {
    Failure::new(ErrorKind::Deadline, format!("no answer within {timeout:?}"))
}

/// A worker's per-request deadline. One timer serves every request: it is re-armed only when it
/// fires before the current request's deadline, instead of a timer being registered and removed
/// for every request (with a 30 s timeout it fires about once per 30 s).
pub struct Deadline {
    timeout: Duration,
    sleep: Pin<Box<Sleep>>,
}

impl Deadline {
    pub fn new(timeout: Duration) -> Self {
        Deadline {
            timeout,
            sleep: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `fut`'s output, or `None` if it takes longer than the timeout from now.
    pub async fn run<F: Future>(&mut self, fut: F) -> Option<F::Output> {
        let deadline = Instant::now() + self.timeout;
        tokio::pin!(fut);
        loop {
            tokio::select! {
                biased;
                out = &mut fut => return Some(out),
                _ = &mut self.sleep => {
                    if Instant::now() >= deadline {
                        return None;
                    }
                    self.sleep.as_mut().reset(deadline);
                }
            }
        }
    }
}

/// One send on a new stream: send, half-close, wait for the one answer, within the deadline.
/// `Ok`: a `result == SUCCESS` answer, in `client.response()`.
pub async fn attempt(
    client: &mut UnaryClient,
    frame: RequestBody,
    deadline: &mut Deadline,
) -> Result<(), Failure> {
    match deadline.run(client.call(frame)).await {
        Some(Ok(())) => match ozone_failure(client.response()) {
            None => Ok(()),
            Some(f) => Err(f),
        },
        Some(Err(f)) => Err(f),
        None => Err(deadline_failure(deadline.timeout())),
    }
}

/// Backoff after transport failures, so that a worker does not spin against a target that is
/// down or restarting; the connection is re-established by the next attempt.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    pub fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    /// The pause after another transport failure: 10 ms, doubling up to 1 s.
    pub fn failed(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }

    pub fn succeeded(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_timer_serves_many_deadlines() {
        let mut d = Deadline::new(Duration::from_millis(100));
        for _ in 0..5 {
            // Each request takes 60 ms: under the timeout, though the timer armed for the first
            // one fires during the second.
            let out = d.run(tokio::time::sleep(Duration::from_millis(60))).await;
            assert!(out.is_some());
        }
        let late = d.run(tokio::time::sleep(Duration::from_millis(150))).await;
        assert!(late.is_none());
        let start = Instant::now();
        assert!(d.run(std::future::pending::<()>()).await.is_none());
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }

    #[test]
    fn backoff_doubles_to_a_cap_and_resets() {
        let mut b = Backoff::new();
        let pauses: Vec<_> = (0..10).map(|_| b.failed()).collect();
        assert_eq!(pauses[0], Duration::from_millis(10));
        assert_eq!(pauses[1], Duration::from_millis(20));
        assert_eq!(pauses[9], Duration::from_secs(1));
        b.succeeded();
        assert_eq!(b.failed(), Duration::from_millis(10));
    }
}

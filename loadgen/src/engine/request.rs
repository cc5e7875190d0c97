//! The per-request path, in two layers so that client throttling and retries can be added
//! without restructuring the workers:
//!
//! - [`attempt`]: one send on the wire (a new bidi stream, half-closed at once, one answer);
//! - [`request`]: one request as the user counts it. Today it is one attempt; a retry loop
//!   (`retry::RetryPolicy`) and `ClientThrottle::before_send`/`on_result` wrap the attempt here.
//!
//! Answers are judged in one place ([`judge`]) for both stream modes.

use crate::connection::Client;
use crate::outcome::{Answer, ErrorKind, Failure};
use crate::workload::Workload;
use common::proto::{
    ContainerCommandRequestProto, ContainerCommandResponseProto, Result as OzoneResult,
};
use std::time::Duration;
use tonic::Status;

/// Turns a response into an answer: `result != SUCCESS` is a failure of kind `result:NAME`.
pub fn judge(workload: &dyn Workload, resp: ContainerCommandResponseProto) -> Answer {
    if resp.result == OzoneResult::Success as i32 {
        Answer::Success {
            bytes: workload.response_bytes(&resp),
        }
    } else {
        Answer::Failure(Failure::new(
            ErrorKind::Ozone(resp.result),
            resp.message.unwrap_or_default(),
        ))
    }
}

pub fn deadline_failure(timeout: Duration) -> Failure {
    Failure::new(ErrorKind::Deadline, format!("no answer within {timeout:?}"))
}

/// One request: the unit the statistics count.
pub async fn request(
    client: &mut Client,
    workload: &dyn Workload,
    req: ContainerCommandRequestProto,
    timeout: Duration,
) -> Answer {
    attempt(client, workload, req, timeout).await
}

/// One send on a new stream: send, half-close, wait for the one answer, within `timeout`.
pub async fn attempt(
    client: &mut Client,
    workload: &dyn Workload,
    req: ContainerCommandRequestProto,
    timeout: Duration,
) -> Answer {
    match tokio::time::timeout(timeout, call(client, req, timeout)).await {
        Ok(Ok(resp)) => judge(workload, resp),
        Ok(Err(status)) => Answer::Failure(Failure::from_status(&status)),
        Err(_) => Answer::Failure(deadline_failure(timeout)),
    }
}

async fn call(
    client: &mut Client,
    req: ContainerCommandRequestProto,
    timeout: Duration,
) -> Result<ContainerCommandResponseProto, Status> {
    let mut request = tonic::Request::new(tokio_stream::once(req));
    request.set_timeout(timeout);
    let mut inbound = client.send(request).await?.into_inner();
    match inbound.message().await? {
        Some(resp) => Ok(resp),
        None => Err(Status::internal("the stream ended without a response")),
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

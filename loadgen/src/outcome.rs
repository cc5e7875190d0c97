//! How one request ended, and the per-worker statistics those outcomes accumulate into.

use common::proto::Result as OzoneResult;
use common::stats::LatencyHistogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::error::Error as _;
use std::fmt;
use std::time::Duration;
use tonic::{Code, Status};

/// Why a request failed. Kinds are counted apart and never mixed into the success latencies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// A response with `result != SUCCESS` (the Ozone `Result` number).
    Ozone(i32),
    /// The call failed with a gRPC status sent by the server (the status code number).
    Grpc(i32),
    /// The connection failed: refused, reset, closed.
    Transport,
    /// The server broke HTTP/2 or gRPC framing (a connection or stream error of RFC 9113, an
    /// answer without `grpc-status`): the request failed, and it is not retried.
    Protocol,
    /// No answer within the per-request deadline.
    Deadline,
    /// The answer was a success but its data is wrong (`CHECKSUM_MISMATCH`, `LENGTH_MISMATCH`,
    /// `BLOCK_MISMATCH`): judged by the workload.
    Integrity(&'static str),
    /// A write's or read's RPC that the client throttle rejected locally: the stream cannot go
    /// on without it, so it fails (an echo ends *locally rejected* instead).
    LocallyRejected,
    /// `--ratis`: the Raft reply carried an exception, or Ratis ended the stream with one (its
    /// `exception-type`): the exception's simple Java class name, e.g. `ContainerNotOpenException`
    /// in a `StateMachineException`, or `GroupMismatchException`.
    Ratis(String),
}

impl ErrorKind {
    pub fn from_status(status: &Status) -> Self {
        match status.code() {
            Code::DeadlineExceeded => ErrorKind::Deadline,
            // Statuses made by the client library from a connection error carry the I/O error
            // as their source; statuses sent by a server do not.
            Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
                if status.source().is_some() =>
            {
                ErrorKind::Transport
            }
            code => ErrorKind::Grpc(code as i32),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Ozone(r) => match OzoneResult::try_from(*r) {
                Ok(r) => write!(f, "result:{}", r.as_str_name()),
                Err(_) => write!(f, "result:{r}"),
            },
            ErrorKind::Grpc(code) => write!(f, "grpc:{}", grpc_code_name(Code::from_i32(*code))),
            ErrorKind::Transport => f.write_str("transport"),
            ErrorKind::Protocol => f.write_str("protocol"),
            ErrorKind::Deadline => f.write_str("deadline"),
            ErrorKind::Integrity(what) => write!(f, "integrity:{what}"),
            ErrorKind::LocallyRejected => f.write_str("throttle:LOCALLY_REJECTED"),
            ErrorKind::Ratis(class) => write!(f, "ratis:{class}"),
        }
    }
}

pub use common::grpc::grpc_code_name;

/// How one request ended, as the engine's request path reports it.
#[derive(Debug)]
pub enum Answer {
    /// `result == SUCCESS`; `bytes` of payload came back.
    Success {
        bytes: u64,
    },
    Failure(Failure),
    /// The client throttle rejected the request locally (retries included): never sent, or its
    /// last attempt never sent (see `crate::engine::resilience`).
    LocallyRejected,
}

impl Answer {
    /// The failure of a failed answer.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Answer::Failure(f) => Some(f),
            Answer::Success { .. } | Answer::LocallyRejected => None,
        }
    }
}

#[derive(Debug)]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
    /// The server's `grpc-retry-pushback-ms`, if it sent one.
    pub pushback: Option<crate::retry::Pushback>,
}

impl Failure {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
            pushback: None,
        }
    }

    pub fn from_status(status: &Status) -> Self {
        let message = match status.source() {
            Some(source) if status.message().is_empty() => source.to_string(),
            Some(source) => format!("{}: {source}", status.message()),
            None => status.message().to_string(),
        };
        let mut failure = Failure::new(ErrorKind::from_status(status), message);
        failure.pushback = status
            .metadata()
            .get("grpc-retry-pushback-ms")
            .map(|v| crate::retry::Pushback::parse(v.to_str().unwrap_or("-1")));
        failure
    }
}

/// Counts of the measured requests' attempts, retries and throttling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResilienceCounts {
    /// Attempts sent to the target (first attempts and retries).
    pub attempts: u64,
    /// Retries (attempts after the first, including those the throttle then rejected locally).
    pub retries: u64,
    /// The most retries one request took.
    pub max_retries_per_request: u64,
    /// Attempts the target rejected as over a limit (UNAVAILABLE / RESOURCE_EXHAUSTED).
    pub rejections: u64,
    /// Attempts the client throttle delayed (`Sleep`) before sending.
    pub throttle_delays: u64,
    /// Total time the client throttle made attempts sleep, in milliseconds.
    pub throttle_delay_ms: u64,
    /// Attempts the client throttle rejected locally (never sent).
    pub local_rejections: u64,
    /// Requests that ended locally rejected (their last attempt rejected by the throttle).
    pub locally_rejected: u64,
    /// Payload bytes of the requests that succeeded.
    pub goodput_bytes: u64,
}

impl ResilienceCounts {
    pub fn merge(&mut self, o: &ResilienceCounts) {
        self.attempts += o.attempts;
        self.retries += o.retries;
        self.max_retries_per_request = self.max_retries_per_request.max(o.max_retries_per_request);
        self.rejections += o.rejections;
        self.throttle_delays += o.throttle_delays;
        self.throttle_delay_ms += o.throttle_delay_ms;
        self.local_rejections += o.local_rejections;
        self.locally_rejected += o.locally_rejected;
        self.goodput_bytes += o.goodput_bytes;
    }

    /// Attempts the client throttle acted on (delayed or rejected locally).
    pub fn locally_throttled(&self) -> u64 {
        self.throttle_delays + self.local_rejections
    }

    /// Adds the counts of one request (not `locally_rejected` and `goodput_bytes`, which the
    /// request's end records).
    pub fn add_request(&mut self, r: &RequestCounts) {
        self.attempts += r.attempts;
        self.retries += r.retries;
        self.max_retries_per_request = self.max_retries_per_request.max(r.retries);
        self.rejections += r.rejections;
        self.throttle_delays += r.throttle_delays;
        self.throttle_delay_ms += r.throttle_delay_ms;
        self.local_rejections += r.local_rejections;
    }
}

/// What one request's attempts did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub attempts: u64,
    pub retries: u64,
    pub rejections: u64,
    pub throttle_delays: u64,
    pub throttle_delay_ms: u64,
    pub local_rejections: u64,
}

impl RequestCounts {
    pub fn record_into(&self, stats: &mut WorkerStats) {
        stats.resilience.add_request(self);
    }
}

/// When one measured request happened, for the recorder.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// From the intended send time (open loop) or the actual send (closed loop) to the answer.
    pub corrected: Duration,
    /// From the actual send to the answer (service time).
    pub uncorrected: Duration,
    /// Open loop: how the send related to its intended time.
    pub send: SendTiming,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SendTiming {
    /// Closed loop: there is no intended time.
    Unscheduled,
    /// A worker was waiting for the slot; it fired this long after the intended time (timer lag).
    OnTime(Duration),
    /// Every worker was busy at the intended time: the send went out this long after it.
    Late(Duration),
}

/// The kinds of RPC, in report order. Statistics are kept per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RpcKind {
    Echo,
    WriteChunk,
    PutBlock,
    GetBlock,
    ReadChunk,
}

impl RpcKind {
    pub const ALL: [RpcKind; 5] = [
        RpcKind::Echo,
        RpcKind::WriteChunk,
        RpcKind::PutBlock,
        RpcKind::GetBlock,
        RpcKind::ReadChunk,
    ];

    /// The command type's name (`WriteChunk`).
    pub fn name(self) -> &'static str {
        match self {
            RpcKind::Echo => "Echo",
            RpcKind::WriteChunk => "WriteChunk",
            RpcKind::PutBlock => "PutBlock",
            RpcKind::GetBlock => "GetBlock",
            RpcKind::ReadChunk => "ReadChunk",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One kind of RPC's statistics (workloads whose units take several RPCs: write, read).
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    /// Successful RPCs, from the first attempt to the final answer (retries and throttle
    /// delays included).
    pub success: LatencyHistogram,
    /// RPCs that failed for good (after retries), or that the client throttle rejected.
    pub failures: u64,
    /// Payload bytes of the successful RPCs (data written or read).
    pub bytes: u64,
}

impl OpStats {
    pub fn merge(&mut self, o: &OpStats) {
        self.success.merge(&o.success);
        self.failures += o.failures;
        self.bytes += o.bytes;
    }
}

/// Statistics per [`RpcKind`], allocated for the kinds a run sends.
#[derive(Clone, Debug, Default)]
pub struct PerKind([Option<Box<OpStats>>; 5]);

impl PerKind {
    pub fn get(&self, kind: RpcKind) -> Option<&OpStats> {
        self.0[kind.index()].as_deref()
    }

    pub fn entry(&mut self, kind: RpcKind) -> &mut OpStats {
        self.0[kind.index()].get_or_insert_with(Default::default)
    }

    /// The kinds with statistics, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (RpcKind, &OpStats)> {
        RpcKind::ALL
            .into_iter()
            .filter_map(|k| self.get(k).map(|s| (k, s)))
    }

    pub fn merge(&mut self, o: &PerKind) {
        for (k, s) in o.iter() {
            self.entry(k).merge(s);
        }
    }

    /// Empties the statistics, keeping the memory.
    pub fn reset(&mut self) {
        for s in self.0.iter_mut().flatten() {
            s.success.reset();
            s.failures = 0;
            s.bytes = 0;
        }
    }
}

/// What one worker measured since it last handed its statistics over. Histograms are HDR
/// (fixed size); the coordinator merges them.
#[derive(Clone, Debug, Default)]
pub struct WorkerStats {
    /// Successful requests, latency from the intended send time (= `service` in closed loop).
    pub success: LatencyHistogram,
    /// Successful requests, latency from the actual send.
    pub service: LatencyHistogram,
    /// Failed requests, latency from the intended send time.
    pub failure: LatencyHistogram,
    pub errors: BTreeMap<ErrorKind, u64>,
    /// The first error message of each kind, for the report.
    pub first_messages: BTreeMap<ErrorKind, String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Open loop: sends that went out late because every worker was busy, and how late.
    pub lateness: LatencyHistogram,
    /// Open loop: how late on-time sends fired (the generator's own timer lag).
    pub timer_lag: LatencyHistogram,
    /// Requests sent during the warm-up (not measured).
    pub warmup: u64,
    /// Retries, rejections and client-throttle decisions of the measured requests.
    pub resilience: ResilienceCounts,
    /// Payload bytes of the successful units (application writes' data).
    pub unit_bytes: u64,
    /// Per kind of RPC, for workloads whose units take several RPCs.
    pub ops: PerKind,
}

impl WorkerStats {
    pub fn record_success(&mut self, latency: Duration) {
        self.success.record(latency);
        self.service.record(latency);
    }

    pub fn record_failure(
        &mut self,
        latency: Duration,
        kind: ErrorKind,
        message: impl FnOnce() -> String,
    ) {
        self.failure.record(latency);
        *self.errors.entry(kind.clone()).or_default() += 1;
        self.first_messages.entry(kind).or_insert_with(message);
    }

    /// Records one RPC of a multi-RPC unit: its kind, the payload bytes it sent, its latency
    /// from the first attempt and, when it succeeded, the payload bytes its answer carried and
    /// the bytes that count as goodput.
    pub fn record_rpc(
        &mut self,
        kind: RpcKind,
        sent: u64,
        latency: Duration,
        received: Option<u64>,
        goodput: u64,
    ) {
        self.bytes_sent += sent;
        let op = self.ops.entry(kind);
        match received {
            Some(bytes) => {
                op.success.record(latency);
                op.bytes += sent + bytes;
                self.bytes_received += bytes;
                self.resilience.goodput_bytes += goodput;
            }
            None => op.failures += 1,
        }
    }

    /// Records one measured request (unit). `request_bytes` are its payload bytes sent and its
    /// goodput (single-RPC units; multi-RPC units count theirs per RPC), `unit_bytes` what the
    /// application wrote.
    pub fn record(&mut self, timing: Timing, answer: Answer, request_bytes: u64, unit_bytes: u64) {
        self.bytes_sent += request_bytes;
        match timing.send {
            SendTiming::Unscheduled => {}
            SendTiming::OnTime(lag) => self.timer_lag.record(lag),
            SendTiming::Late(by) => self.lateness.record(by),
        }
        match answer {
            Answer::LocallyRejected => {
                self.resilience.locally_rejected += 1;
            }
            Answer::Success { bytes } => {
                self.resilience.goodput_bytes += request_bytes;
                self.unit_bytes += unit_bytes;
                self.bytes_received += bytes;
                self.success.record(timing.corrected);
                // Closed loop: both are the same; `service_time` falls back to `success`.
                if timing.send != SendTiming::Unscheduled {
                    self.service.record(timing.uncorrected);
                }
            }
            Answer::Failure(f) => {
                self.record_failure(timing.corrected, f.kind, || f.message);
            }
        }
    }

    pub fn failures(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Successful requests' latency from the actual send: `service`, or in closed loop (where it
    /// is not recorded separately) `success`.
    pub fn service_time(&self) -> &LatencyHistogram {
        if self.service.is_empty() {
            &self.success
        } else {
            &self.service
        }
    }

    pub fn late_sends(&self) -> u64 {
        self.lateness.count()
    }

    /// Requests measured: successes, failures and requests the client throttle rejected.
    pub fn requests(&self) -> u64 {
        self.success.count() + self.failures() + self.resilience.locally_rejected
    }

    /// Empties the statistics, keeping the histograms' memory (workers reuse them).
    pub fn reset(&mut self) {
        for h in [
            &mut self.success,
            &mut self.service,
            &mut self.failure,
            &mut self.lateness,
            &mut self.timer_lag,
        ] {
            h.reset();
        }
        self.errors.clear();
        self.first_messages.clear();
        self.bytes_sent = 0;
        self.bytes_received = 0;
        self.warmup = 0;
        self.resilience = Default::default();
        self.unit_bytes = 0;
        self.ops.reset();
    }

    pub fn merge(&mut self, other: &WorkerStats) {
        self.success.merge(&other.success);
        self.service.merge(&other.service);
        self.failure.merge(&other.failure);
        self.lateness.merge(&other.lateness);
        self.timer_lag.merge(&other.timer_lag);
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        for (k, m) in &other.first_messages {
            self.first_messages
                .entry(k.clone())
                .or_insert_with(|| m.clone());
        }
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.warmup += other.warmup;
        self.resilience.merge(&other.resilience);
        self.unit_bytes += other.unit_bytes;
        self.ops.merge(&other.ops);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_carries_the_servers_pushback() {
        let mut status = Status::unavailable("Ingress is over the account limit.");
        assert_eq!(Failure::from_status(&status).pushback, None);
        status
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", "250".parse().unwrap());
        assert_eq!(
            Failure::from_status(&status).pushback,
            Some(crate::retry::Pushback::RetryAfter(Duration::from_millis(
                250
            )))
        );
        status
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
        assert_eq!(
            Failure::from_status(&status).pushback,
            Some(crate::retry::Pushback::DontRetry)
        );
    }

    #[test]
    fn error_kinds_are_told_apart() {
        assert_eq!(
            ErrorKind::from_status(&Status::unavailable("over the limit")),
            ErrorKind::Grpc(Code::Unavailable as i32)
        );
        assert_eq!(
            ErrorKind::from_status(&Status::deadline_exceeded("late")),
            ErrorKind::Deadline
        );
        assert_eq!(ErrorKind::Protocol.to_string(), "protocol");
        assert_eq!(
            ErrorKind::Ozone(9).to_string(),
            "result:CONTAINER_NOT_FOUND"
        );
        assert_eq!(
            ErrorKind::Grpc(Code::ResourceExhausted as i32).to_string(),
            "grpc:RESOURCE_EXHAUSTED"
        );
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(
            ErrorKind::from_status(&Status::from_error(Box::new(io))),
            ErrorKind::Transport
        );
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = WorkerStats::default();
        a.record_success(Duration::from_millis(1));
        a.record_failure(Duration::from_millis(2), ErrorKind::Ozone(9), || "x".into());
        let mut b = a.clone();
        b.record_failure(Duration::from_millis(2), ErrorKind::Transport, || {
            "y".into()
        });
        a.merge(&b);
        assert_eq!(a.success.count(), 2);
        assert_eq!(a.failures(), 3);
        assert_eq!(a.errors[&ErrorKind::Ozone(9)], 2);
    }
}

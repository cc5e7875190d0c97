//! The engine: workers, connections, stop conditions. Each of `threads` workers keeps one request
//! outstanding (freon's model) on connection `worker mod clients`, opening a new bidi stream per
//! request and half-closing it at once, as Ozone's Java client does
//! (`XceiverClientGrpc.sendCommandAsync`). Workers keep their own statistics; they are merged
//! once at the end, so the hot path shares only two atomic counters.

use crate::config::{RunConfig, StopAfter};
use crate::connection::Client;
use crate::outcome::{ErrorKind, WorkerStats};
use crate::workload::Workload;
use common::proto::{
    ContainerCommandRequestProto, ContainerCommandResponseProto, Result as OzoneResult,
};
use common::rates::Meter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};
use tonic::Status;

/// State all workers share: which request is next, how many finished, whether to stop.
struct Shared {
    issued: AtomicU64,
    completed: AtomicU64,
    stop: AtomicBool,
    limit: Option<u64>,
    deadline: Option<Instant>,
}

impl Shared {
    /// The sequence number of the next request to send, or `None` when the run is over.
    fn claim(&self) -> Option<u64> {
        if self.stop.load(Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let seq = self.issued.fetch_add(1, Relaxed);
        match self.limit {
            Some(limit) if seq >= limit => None,
            _ => Some(seq),
        }
    }
}

/// What a finished run measured.
pub struct RunOutput {
    pub stats: WorkerStats,
    pub started_at: SystemTime,
    pub elapsed: Duration,
    pub meter: Meter,
    /// Requests sent (including failed ones).
    pub completed: u64,
    /// The run was stopped early by a signal.
    pub interrupted: bool,
}

/// How long in-flight requests may take to finish after Ctrl-C before the report is printed.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

pub async fn run(
    config: &RunConfig,
    clients: Vec<Client>,
    workload: Arc<dyn Workload>,
    progress: &mut dyn FnMut(&Progress),
) -> RunOutput {
    let started_at = SystemTime::now();
    let start = Instant::now();
    let shared = Arc::new(Shared {
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        limit: match config.stop {
            StopAfter::Requests(n) => Some(n),
            StopAfter::Elapsed(_) => None,
        },
        deadline: match config.stop {
            StopAfter::Elapsed(d) => Some(start + d),
            StopAfter::Requests(_) => None,
        },
    });
    let mut workers = tokio::task::JoinSet::new();
    for idx in 0..config.threads {
        let client = clients[idx % clients.len()].clone();
        let ctx = WorkerContext {
            idx,
            shared: Arc::clone(&shared),
            workload: Arc::clone(&workload),
            timeout: config.timeout,
            fail_at_end: config.fail_at_end,
        };
        workers.spawn(worker(ctx, client));
    }

    let mut meter = Meter::new();
    let mut marked = 0;
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    let mut total = WorkerStats::default();
    let mut interrupted = false;
    let mut drain_deadline: Option<tokio::time::Instant> = None;
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            joined = workers.join_next() => match joined {
                Some(Ok(stats)) => total.merge(&stats),
                Some(Err(e)) => tracing::error!("worker failed: {e}"),
                None => break,
            },
            _ = ticker.tick() => {
                let completed = shared.completed.load(Relaxed);
                meter.mark(completed - marked, start.elapsed());
                marked = completed;
                progress(&Progress { completed, elapsed: start.elapsed(), stop: config.stop });
            }
            _ = &mut signal, if !interrupted => {
                interrupted = true;
                shared.stop.store(true, Relaxed);
                drain_deadline = Some(tokio::time::Instant::now() + DRAIN_GRACE);
                eprintln!("loadgen: stopping: no new requests, waiting up to {DRAIN_GRACE:?} for in-flight ones");
            }
            _ = sleep_until_opt(drain_deadline) => {
                workers.abort_all();
                while let Some(joined) = workers.join_next().await {
                    if let Ok(stats) = joined {
                        total.merge(&stats);
                    }
                }
                break;
            }
        }
    }
    let elapsed = start.elapsed();
    let completed = shared.completed.load(Relaxed);
    meter.mark(completed - marked, elapsed);
    RunOutput {
        stats: total,
        started_at,
        elapsed,
        meter,
        completed,
        interrupted,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Progress as of a tick, for the progress line.
pub struct Progress {
    pub completed: u64,
    pub elapsed: Duration,
    pub stop: StopAfter,
}

struct WorkerContext {
    idx: usize,
    shared: Arc<Shared>,
    workload: Arc<dyn Workload>,
    timeout: Duration,
    fail_at_end: bool,
}

async fn worker(ctx: WorkerContext, mut client: Client) -> WorkerStats {
    let mut stats = WorkerStats::default();
    let request_bytes = ctx.workload.request_bytes();
    while let Some(seq) = ctx.shared.claim() {
        let req = ctx.workload.request(ctx.idx, seq);
        let start = Instant::now();
        let answer = tokio::time::timeout(ctx.timeout, call(&mut client, req, ctx.timeout)).await;
        let latency = start.elapsed();
        stats.bytes_sent += request_bytes;
        let failed = match answer {
            Ok(Ok(resp)) if resp.result == OzoneResult::Success as i32 => {
                stats.bytes_received += ctx.workload.response_bytes(&resp);
                stats.record_success(latency);
                false
            }
            Ok(Ok(resp)) => {
                stats.record_failure(latency, ErrorKind::Ozone(resp.result), || {
                    resp.message.unwrap_or_default()
                });
                true
            }
            Ok(Err(status)) => {
                stats.record_failure(latency, ErrorKind::from_status(&status), || {
                    status.message().to_string()
                });
                true
            }
            Err(_) => {
                stats.record_failure(latency, ErrorKind::Deadline, || {
                    format!("no answer within {:?}", ctx.timeout)
                });
                true
            }
        };
        if failed && !ctx.fail_at_end {
            ctx.shared.stop.store(true, Relaxed);
        }
        ctx.shared.completed.fetch_add(1, Relaxed);
    }
    stats
}

/// One request on a new stream: send, half-close, wait for the one answer.
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

//! `loadgen write` and `loadgen read`: the data path of an Ozone client. Each worker is one
//! output stream ([`crate::workload::block_writer::BlockWriter`], Ozone's BlockOutputStream) that
//! writes its own blocks, sending the WriteChunk/PutBlock requests each application `write()`
//! makes due, one RPC outstanding at a time; reads are GetBlock then ReadChunk of every chunk,
//! each chunk verified against the checksums GetBlock returned.
//!
//! This path has a driver of its own (tokio tasks over tonic connections) instead of the echo
//! engine's pre-encoded per-request frames: its requests are stateful per worker and 4 MB large,
//! so per-request CPU of the RPC layer matters less than the checksum and copy work measured.
//! Histograms are kept per operation type (application write, WriteChunk, PutBlock, GetBlock,
//! ReadChunk); data-integrity errors are counted under their own `integrity:` kinds.

pub mod args;
pub mod manifest;
pub mod read;
pub mod report;
pub mod write;

use crate::UsageError;
use crate::cli::{Command, Format};
use crate::connection::{self, Client};
use crate::outcome::{ErrorKind, Failure};
use crate::resilience::{Attempts, Resilience, ResilienceConfig, ResilienceCounts, fresh_seed};
use crate::throttle::{AimdUnit, ClientThrottle, OpKind, ThrottleScope};
use common::proto::{
    ContainerCommandRequestProto as Req, ContainerCommandResponseProto as Resp,
    Result as OzoneResult,
};
use common::stats::LatencyHistogram;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Operation types, in report order, with their freon-style timer names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// One application write() (copy, checksum, and the RPCs it made due).
    Write,
    WriteChunk,
    PutBlock,
    GetBlock,
    ReadChunk,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::WriteChunk => "WriteChunk",
            Op::PutBlock => "PutBlock",
            Op::GetBlock => "GetBlock",
            Op::ReadChunk => "ReadChunk",
        }
    }

    pub fn timer(self) -> &'static str {
        match self {
            Op::Write => "app-write",
            Op::WriteChunk => "chunk-write",
            Op::PutBlock => "block-put",
            Op::GetBlock => "block-get",
            Op::ReadChunk => "chunk-read",
        }
    }
}

/// Latencies and payload bytes of one operation type.
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    pub latency: LatencyHistogram,
    pub bytes: u64,
}

/// What workers measured; merged over workers and phases.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub ops: BTreeMap<Op, OpStats>,
    /// Failed operations by kind (`result:…`, `grpc:…`, `deadline`, `integrity:…`).
    pub errors: BTreeMap<String, u64>,
    /// Blocks committed by a PutBlock with eof (write).
    pub blocks: Vec<common::proto::BlockData>,
    pub blocks_read: u64,
    pub chunks_read: u64,
    pub bytes_read: u64,
    /// Bytes whose checksums were verified and matched.
    pub bytes_verified: u64,
    /// Attempts, retries and client-throttle decisions of the operations.
    pub resilience: ResilienceCounts,
    /// The phase's goodput per second ([`GoodputSeries`]), set when its workers ended.
    pub goodput_series: Vec<u64>,
}

impl Totals {
    pub fn record(&mut self, op: Op, latency: Duration, bytes: u64) {
        let s = self.ops.entry(op).or_default();
        s.latency.record(latency);
        s.bytes += bytes;
    }

    pub fn error(&mut self, kind: impl Into<String>) {
        *self.errors.entry(kind.into()).or_default() += 1;
    }

    pub fn merge(&mut self, other: Totals) {
        for (op, s) in other.ops {
            let mine = self.ops.entry(op).or_default();
            mine.latency.merge(&s.latency);
            mine.bytes += s.bytes;
        }
        for (k, n) in other.errors {
            *self.errors.entry(k).or_default() += n;
        }
        self.blocks.extend(other.blocks);
        self.blocks_read += other.blocks_read;
        self.chunks_read += other.chunks_read;
        self.bytes_read += other.bytes_read;
        self.bytes_verified += other.bytes_verified;
        self.resilience.merge(&other.resilience);
        if self.goodput_series.len() < other.goodput_series.len() {
            self.goodput_series.resize(other.goodput_series.len(), 0);
        }
        for (mine, theirs) in self.goodput_series.iter_mut().zip(&other.goodput_series) {
            *mine += theirs;
        }
    }

    pub fn count(&self, op: Op) -> u64 {
        self.ops.get(&op).map_or(0, |s| s.latency.count())
    }

    pub fn bytes(&self, op: Op) -> u64 {
        self.ops.get(&op).map_or(0, |s| s.bytes)
    }

    pub fn failures(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn integrity_errors(&self) -> u64 {
        self.errors
            .iter()
            .filter(|(k, _)| k.starts_with("integrity:"))
            .map(|(_, n)| n)
            .sum()
    }
}

/// One request, one answer, on a new stream (as Ozone's Java client sends them). A response with
/// `result != SUCCESS` is a failure of kind `result:NAME`.
pub(crate) async fn call(
    client: &mut Client,
    req: Req,
    timeout: Duration,
) -> Result<Resp, Failure> {
    let exchange = async {
        let mut inbound = client
            .send(tokio_stream::once(req))
            .await
            .map_err(|s| Failure::from_status(&s))?
            .into_inner();
        match inbound.message().await {
            Ok(Some(resp)) => Ok(resp),
            Ok(None) => Err(Failure::new(
                ErrorKind::Grpc(tonic::Code::Internal as i32),
                "the stream ended without a response",
            )),
            Err(s) => Err(Failure::from_status(&s)),
        }
    };
    let resp = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| crate::engine::request::deadline_failure(timeout))??;
    if resp.result != OzoneResult::Success as i32 {
        return Err(Failure::new(
            ErrorKind::Ozone(resp.result),
            resp.message.unwrap_or_default(),
        ));
    }
    Ok(resp)
}

/// One connection of the run and its client throttle (its own, or the process's with
/// `--throttle-scope process`). The write and read phases of one run share them.
#[derive(Clone)]
pub(crate) struct Conn {
    pub client: Client,
    pub throttle: Arc<dyn ClientThrottle>,
}

/// Goodput per second of one phase (bytes of successful WriteChunks or ReadChunks, second `k`
/// counted from the phase's start), shared by its workers. A worker adds its bytes once per
/// second, not per operation, so the lock is off the request path; memory grows by 8 bytes per
/// second of the run, whatever the number of workers.
pub(crate) struct GoodputSeries {
    started: Instant,
    seconds: Mutex<Vec<u64>>,
}

impl GoodputSeries {
    pub fn start() -> Arc<Self> {
        Arc::new(GoodputSeries {
            started: Instant::now(),
            seconds: Mutex::new(Vec::new()),
        })
    }

    fn add(&self, second: usize, bytes: u64) {
        let mut seconds = self.seconds.lock().unwrap_or_else(PoisonError::into_inner);
        if seconds.len() <= second {
            seconds.resize(second + 1, 0);
        }
        seconds[second] += bytes;
    }

    /// The series so far (call after the workers ended).
    pub fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.seconds.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A worker's way to the DataNode: its connection, the deadline, and with `--retry` or a client
/// throttle its retry state and throttle.
pub(crate) struct Caller {
    client: Client,
    timeout: Duration,
    resilience: Option<Resilience>,
    series: Arc<GoodputSeries>,
    /// This second's goodput, not yet added to `series`: (second, bytes).
    pending: (usize, u64),
}

impl Drop for Caller {
    fn drop(&mut self) {
        self.series.add(self.pending.0, self.pending.1);
    }
}

impl Caller {
    pub fn new(conn: &Conn, a: &args::ConnArgs, series: &Arc<GoodputSeries>) -> Self {
        let config = resilience_of(a);
        Caller {
            client: conn.client.clone(),
            timeout: a.timeout,
            series: Arc::clone(series),
            pending: (0, 0),
            resilience: config
                .active()
                .then(|| config.worker(Arc::clone(&conn.throttle))),
        }
    }

    /// One operation as the report counts it: with retries and the throttle, several attempts.
    /// `op` and `bytes` are what the throttle is told (data length of WriteChunk and ReadChunk).
    /// The error is the report's error kind; attempts, retries and throttling go to `t`.
    pub async fn call(
        &mut self,
        req: Req,
        op: OpKind,
        bytes: u64,
        t: &mut Totals,
    ) -> Result<Resp, String> {
        let (client, timeout) = (&mut self.client, self.timeout);
        let answer = match &mut self.resilience {
            None => call(client, req, timeout).await,
            Some(res) => {
                let mut attempts = Attempts::new(res, op, bytes);
                let last = loop {
                    // Each attempt sends its own copy: the data is a shared `Bytes`, only the
                    // small message around it is copied.
                    let answer = if attempts.admit().await {
                        Some(call(client, req.clone(), timeout).await)
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
                t.resilience.add_request(&attempts.counts());
                match last {
                    Some(answer) => answer,
                    None => {
                        t.resilience.locally_rejected += 1;
                        return Err(LOCALLY_REJECTED.to_string());
                    }
                }
            }
        };
        match answer {
            Ok(resp) => {
                t.resilience.goodput_bytes += bytes;
                let second = self.series.started.elapsed().as_secs() as usize;
                if second != self.pending.0 {
                    self.series.add(self.pending.0, self.pending.1);
                    self.pending = (second, 0);
                }
                self.pending.1 += bytes;
                Ok(resp)
            }
            Err(f) => Err(f.kind.to_string()),
        }
    }
}

/// The error kind of an operation the client throttle rejected locally (its last attempt never
/// sent): the output stream cannot go on without it, so it counts as a failure here.
pub const LOCALLY_REJECTED: &str = "throttle:LOCALLY_REJECTED";

/// The `--retry` and `--client-throttle` settings of `write` and `read`: aimd paces bytes.
pub(crate) fn resilience_of(a: &args::ConnArgs) -> ResilienceConfig {
    ResilienceConfig::from_args(&a.resilience, AimdUnit::Bytes)
}

/// The target: a remote DataNode, or an embedded dn-sim kept alive by the first field.
pub(crate) struct Target {
    pub _embedded: Option<dn_sim::EmbeddedServer>,
    pub uri: String,
    pub description: String,
}

pub(crate) fn target(conn: &args::ConnArgs, keep_data: bool) -> Result<Target, UsageError> {
    match &conn.target {
        Some(t) => Ok(Target {
            _embedded: None,
            uri: connection::target_uri(t).map_err(|e| UsageError(e.to_string()))?,
            description: t.clone(),
        }),
        None => {
            let mut config = dn_sim::Config::loopback();
            config.containers = dn_sim::containers::ContainerIds::single(conn.container_id);
            if keep_data {
                // Data is read back: keep it in memory (as much as the run writes).
                config.capacity = u64::MAX / 2;
            } else {
                config.store = dn_sim::store::StoreKind::Discard;
                config.capacity = u64::MAX / 2;
            }
            let threads = conn.embedded_threads as usize;
            let server = dn_sim::EmbeddedServer::start(config, threads)
                .map_err(|e| UsageError(format!("cannot start the embedded dn-sim: {e:#}")))?;
            let addr = server.local_addr();
            let store = if keep_data { "memory" } else { "discard" };
            Ok(Target {
                _embedded: Some(server),
                uri: format!("http://{addr}"),
                description: format!(
                    "{addr} (embedded dn-sim, store {store}, {threads} runtime thread(s))"
                ),
            })
        }
    }
}

pub(crate) fn runtime(conn: &args::ConnArgs) -> Result<tokio::runtime::Runtime, UsageError> {
    let threads = conn.runtime_threads.map_or_else(
        || (std::thread::available_parallelism().map_or(1, |n| n.get()) / 2).max(1),
        |t| t as usize,
    );
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| UsageError(format!("cannot start the runtime: {e}")))
}

/// The run's connections, each with its client throttle.
pub(crate) async fn connect(conn: &args::ConnArgs, uri: &str) -> Result<Vec<Conn>, UsageError> {
    let clients = connection::connect(uri, conn.clients as usize, conn.connect_timeout)
        .await
        .map_err(|e| UsageError(e.to_string()))?;
    let res = resilience_of(conn);
    let process = (res.scope == ThrottleScope::Process).then(|| res.build_throttle(fresh_seed()));
    Ok(clients
        .into_iter()
        .map(|client| Conn {
            client,
            throttle: process
                .clone()
                .unwrap_or_else(|| res.build_throttle(fresh_seed())),
        })
        .collect())
}

/// A finished `write` or `read`.
pub struct BlockSummary {
    pub report: report::Report,
    /// The report in the chosen format.
    pub rendered: String,
    pub text: String,
    pub written_to: Option<std::path::PathBuf>,
    pub format: Format,
}

impl BlockSummary {
    pub fn failures(&self) -> u64 {
        self.report.failures()
    }
}

/// Runs `write` or `read`; `None` for other commands.
pub fn run(command: &Command) -> Option<Result<BlockSummary, UsageError>> {
    match command {
        Command::Write(a) => Some(write::run(a)),
        Command::Read(a) => Some(read::run(a)),
        _ => None,
    }
}

/// `main`'s part for `write` and `read`: prints the report, exit code 0, 1 (failures, integrity
/// errors) or 2 (bad input, unreachable target).
pub fn main(command: &Command) -> Option<ExitCode> {
    let result = run(command)?;
    Some(match result {
        Ok(s) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            match (&s.written_to, s.format) {
                (None, _) => {
                    let _ = write!(out, "{}", s.rendered);
                }
                (Some(path), Format::Text) => {
                    eprintln!("loadgen: report written to {}", path.display())
                }
                (Some(path), _) => {
                    let _ = write!(out, "{}", s.text);
                    eprintln!("loadgen: report written to {}", path.display());
                }
            }
            if s.report.integrity_errors > 0 {
                eprintln!(
                    "loadgen: {} data-integrity error(s): data read back does not match its checksums",
                    s.report.integrity_errors
                );
            }
            if s.failures() > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("loadgen: error: {e}");
            ExitCode::from(2)
        }
    })
}

/// Waits for every worker and merges their totals; a worker that panicked is counted as an error.
async fn join_workers(tasks: Vec<tokio::task::JoinHandle<Totals>>) -> Totals {
    let mut totals = Totals::default();
    for task in tasks {
        match task.await {
            Ok(t) => totals.merge(t),
            Err(e) => totals.error(format!("worker:{e}")),
        }
    }
    totals
}

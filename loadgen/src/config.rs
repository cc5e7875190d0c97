//! The resolved run configuration: only decided values, no raw flags. The engine and the reports
//! read this, never the command line.

use crate::cli::{
    CommonArgs, EchoArgs, Format, LoadRate, ReadArgs, ReportArgs, ShapeArgs, StreamMode, WriteArgs,
};
use crate::error::Error;
use crate::retry::RetryPolicy;
use crate::schedule::{Plan, RateSchedule};
use crate::throttle::{
    AimdConfig, AimdThrottle, AimdUnit, AnalyzerThrottle, ClientThrottle, SreConfig, SreThrottle,
    ThrottleKind, ThrottleScope,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::shard::Shard;

/// freon's default number of requests.
pub const DEFAULT_REQUESTS: u64 = 1000;

#[derive(Clone, Debug)]
pub enum Target {
    /// An embedded dn-sim started by loadgen on 127.0.0.1.
    Embedded { threads: usize },
    /// DataNodes or dn-sims at these addresses (HOST:PORT; connection c goes to the c-th mod
    /// their number), and the TLS to speak to them (`--tls`).
    Remote(Vec<String>, Option<Arc<crate::connection::tls::TargetTls>>),
    /// `--target null`: dn-sim's dispatcher and store called in-process, no network.
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StopAfter {
    Requests(u64),
    Elapsed(Duration),
}

use crate::workload::block::Expected;
use crate::workload::block_writer::{WriteShape, checksum_name};
pub use crate::workload::echo::EchoConfig;
use serde::{Deserialize, Serialize};

/// What the application and its output streams do (write, read).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub write_size: u64,
    pub chunk_size: u64,
    pub bytes_per_checksum: u64,
    pub checksum: String,
    pub checksum_mode: String,
    pub block_size: u64,
    pub flush_size: u64,
}

/// `loadgen write`: the output streams' shape and what is kept of the blocks written.
#[derive(Clone, Debug)]
pub struct WriteConfig {
    pub shape: WriteShape,
    /// The shape as the reports describe it.
    pub described: Shape,
    /// Stream every committed block to this file (JSON lines).
    pub manifest: Option<PathBuf>,
    /// Read every block back afterwards (then the blocks are kept in memory).
    pub then_read: bool,
    /// ReadChunk V1 (`dataBuffers`) rather than V0.
    pub read_v1: bool,
}

/// `loadgen read`: the blocks to read (a manifest's), or the data set to write first.
#[derive(Clone, Debug)]
pub struct ReadConfig {
    pub shape: WriteShape,
    pub described: Shape,
    /// The blocks of `--manifest`, or `None`: write a data set first.
    pub blocks: Option<std::sync::Arc<Vec<Expected>>>,
    pub verify: bool,
    pub read_v1: bool,
}

#[derive(Clone, Debug)]
pub enum WorkloadConfig {
    Echo(EchoConfig),
    Write(WriteConfig),
    Read(ReadConfig),
}

impl WorkloadConfig {
    /// Freon's timer name for the workload's unit.
    pub fn timer_name(&self) -> &'static str {
        match self {
            WorkloadConfig::Echo(_) => "rpc-payload",
            WorkloadConfig::Write(_) => "app-write",
            WorkloadConfig::Read(_) => "block-read",
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadConfig::Echo(_) => "echo",
            WorkloadConfig::Write(_) => "write",
            WorkloadConfig::Read(_) => "read",
        }
    }
}

/// When requests are sent.
#[derive(Clone, Debug)]
pub enum Load {
    /// Each worker sends its next request when the previous one is answered (freon).
    Closed,
    /// Requests are intended at the plan's times, whatever the answers do.
    Open(Plan),
}

/// How requests travel on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streams {
    PerRequest,
    Persistent { pipeline: usize },
}

/// Where the report goes and what it shows.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    pub format: Format,
    pub output: Option<PathBuf>,
    pub percentiles: Vec<f64>,
    /// `--result-markers`: the JSON result on stdout between marker lines too.
    pub result_markers: bool,
}

impl ReportConfig {
    pub fn from_args(args: &ReportArgs) -> Self {
        ReportConfig {
            format: args.format,
            output: args.output.clone(),
            percentiles: args.percentiles.0.clone(),
            result_markers: args.result_markers,
        }
    }
}

/// What is observed while the run goes on.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    pub interval: Duration,
    pub histogram_log: Option<PathBuf>,
    pub metrics_listen: Option<SocketAddr>,
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub load: Load,
    pub streams: Streams,
    pub warmup: Duration,
    pub report: ReportConfig,
    pub live: LiveConfig,
    /// loadgen's own runtime threads (`None`: one per core).
    pub runtime_threads: Option<usize>,
    pub target: Target,
    pub clients: usize,
    pub threads: usize,
    pub stop: StopAfter,
    pub fail_at_end: bool,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub datanode_uuid: String,
    pub container_id: i64,
    pub workload: WorkloadConfig,
    /// Retries and client throttling (`crate::engine::resilience`).
    pub resilience: ResilienceConfig,
    /// `--rate` as a bandwidth (bytes/s) not yet turned into units/s: a read's mean block size
    /// is known only once its blocks are.
    pub bandwidth: Option<f64>,
    /// `--ratis`: the Raft group (pipeline) requests go to on the Ratis port.
    pub ratis: Option<uuid::Uuid>,
    /// `--ratis-admin`: the Ratis admin port that names the group (`crate::connection::ratis_admin`), asked
    /// before the run; `ratis` is then replaced by its answer.
    pub ratis_admin: Option<String>,
    /// `--shard I/N` or `--shards N`: this process's part of a split test (`crate::shard`);
    /// `stop`, the open-loop plan and the targets are already this shard's.
    pub shard: Option<Shard>,
    /// `--start-at`: the wall-clock instant the measured phase starts at.
    pub start_at: Option<SystemTime>,
}

/// Block local IDs carry the writing stream's number in 16 bits (`workload::block`): every
/// worker of every shard has its own.
pub const MAX_WRITE_STREAMS: u64 = 1 << 16;

/// dn-sim's own pipeline (`--pipeline-id`'s default): what `--ratis` sends to without one.
pub const DEFAULT_PIPELINE_ID: uuid::Uuid =
    uuid::Uuid::from_u128(0x0000_0000_0000_4000_8000_0000_0000_9858);

impl RunConfig {
    fn from_common(
        c: &CommonArgs,
        report: &ReportArgs,
        workload: WorkloadConfig,
    ) -> Result<Self, Error> {
        let shard = match (c.shard, c.shards) {
            (Some(s), _) => Some(s),
            (None, Some(n)) => Some(
                crate::shard::from_env(n, std::env::var(crate::shard::INDEX_ENV).ok().as_deref())
                    .map_err(|e| Error::Usage(format!("--shards {n}: {e}")))?,
            ),
            (None, None) => None,
        };
        Self::resolve(c, report, workload, shard)
    }

    /// [`from_common`](Self::from_common) with the shard already known (tests give it here
    /// rather than through the environment).
    pub fn resolve(
        c: &CommonArgs,
        report: &ReportArgs,
        workload: WorkloadConfig,
        shard: Option<Shard>,
    ) -> Result<Self, Error> {
        let moves_data = !matches!(workload, WorkloadConfig::Echo(_));
        let mut bandwidth = None;
        let schedule = match (c.rate, &c.rate_schedule) {
            (Some(LoadRate::PerSecond(r)), _) => Some(RateSchedule::Constant(r)),
            (Some(LoadRate::Bytes(b)), _) if moves_data => {
                bandwidth = Some(b);
                // Resolved into units/s below or when the unit's size is known.
                Some(RateSchedule::Constant(1.0))
            }
            (Some(LoadRate::Bytes(_)), _) => {
                return Err(Error::Usage(
                    "--rate: a bandwidth (e.g. 500MB/s) needs write or read; echo takes requests/s"
                        .into(),
                ));
            }
            (None, Some(s)) => Some(s.clone()),
            (None, None) => None,
        };
        if moves_data && c.stream_mode == StreamMode::Persistent {
            return Err(Error::Usage(
                "--stream-mode persistent: write and read send each RPC on a new stream, as Ozone's client does".into(),
            ));
        }
        let mut stop = match (c.duration, c.number_of_tests) {
            (Some(d), _) => StopAfter::Elapsed(d),
            (None, Some(n)) => StopAfter::Requests(n),
            (None, None) => match schedule.as_ref().and_then(RateSchedule::natural_length) {
                Some(d) => StopAfter::Elapsed(d),
                None => StopAfter::Requests(DEFAULT_REQUESTS),
            },
        };
        let warmup = c.warmup.unwrap_or_default();
        if let (Some(s), StopAfter::Requests(n)) = (shard, stop) {
            // The whole test measures its requests first, first + 1, …: in the open loop the
            // first is the plan's first after the warm-up, and shard I takes those ≡ I (mod N).
            let first = match (&schedule, bandwidth) {
                (Some(plan), None) => {
                    Plan::new(plan.clone()).first_at_or_after(warmup.as_secs_f64())
                }
                _ => 0,
            };
            stop = StopAfter::Requests(s.share(n, first));
            if s.share(n, first) == 0 {
                return Err(Error::Usage(format!(
                    "--shard {s}: -n {n} leaves this shard no request (give -n at least {})",
                    s.count
                )));
            }
        }
        if moves_data
            && u64::from(c.threads) * u64::from(shard.map_or(1, |s| s.count)) > MAX_WRITE_STREAMS
        {
            return Err(Error::Usage(format!(
                "--threads {}: block IDs have room for {MAX_WRITE_STREAMS} writing workers in all shards together",
                c.threads
            )));
        }
        if c.ratis {
            if matches!(workload, WorkloadConfig::Read(_)) {
                return Err(Error::Usage(
                    "--ratis: Ozone reads a RATIS pipeline's blocks over the gRPC port (the pipeline's STANDALONE copy), so read has no --ratis".into(),
                ));
            }
            if moves_data && c.pipeline > 1 {
                return Err(Error::Usage(
                    "--pipeline: write --ratis sends a unit's RPCs one at a time on its worker's stream".into(),
                ));
            }
            if c.target.as_deref() == Some("null") {
                return Err(Error::Usage(
                    "--ratis needs a Ratis port, not --target null".into(),
                ));
            }
            if c.ratis_admin.is_some() && c.target.is_none() {
                return Err(Error::Usage(
                    "--ratis-admin needs --target (the embedded dn-sim's pipeline is known)".into(),
                ));
            }
        }
        let streams = match c.stream_mode {
            // A Ratis client has one ordered stream: --pipeline requests in flight on it.
            _ if c.ratis => Streams::Persistent {
                pipeline: c.pipeline as usize,
            },
            StreamMode::PerRequest if c.pipeline > 1 => {
                return Err(Error::Usage(
                    "--pipeline needs --stream-mode persistent (a per-request stream carries one request)".into(),
                ));
            }
            StreamMode::PerRequest => Streams::PerRequest,
            StreamMode::Persistent => Streams::Persistent {
                pipeline: c.pipeline as usize,
            },
        };
        if c.target.as_deref() == Some("null") && c.stream_mode == StreamMode::Persistent {
            return Err(Error::Usage(
                "--target null answers per-request streams only; --stream-mode persistent needs a network target".into(),
            ));
        }
        // aimd paces requests for echo, payload bytes for write and read.
        let unit = if moves_data {
            AimdUnit::Bytes
        } else {
            AimdUnit::Ops
        };
        let resilience = ResilienceConfig::from_args(&c.resilience, unit);
        let targets = match &c.target {
            Some(t) if t != "null" => {
                let list: Vec<String> = t
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(String::from)
                    .collect();
                if list.is_empty() || list.iter().any(|a| a == "null") && list.len() > 1 {
                    return Err(Error::Usage(format!(
                        "--target '{t}': give HOST:PORT, a comma-separated list of them, or null"
                    )));
                }
                for a in &list {
                    crate::connection::target_uri(a, c.tls.tls)
                        .map_err(|e| Error::Usage(e.to_string()))?;
                }
                match shard {
                    Some(s) => s.targets(&list),
                    None => list,
                }
            }
            _ => Vec::new(),
        };
        if targets.len() > 1 {
            if c.ratis_admin.is_some() {
                return Err(Error::Usage(
                    "--ratis-admin names one DataNode's group; with several --target addresses give --pipeline-id".into(),
                ));
            }
            if c.tls.tls && c.tls.tls_server_name.is_none() {
                return Err(Error::Usage(
                    "--tls with several --target addresses needs --tls-server-name (the name every DataNode's certificate carries)".into(),
                ));
            }
        }
        let tls = crate::connection::tls::TargetTls::from_flags(
            &c.tls.flags(),
            targets.first().map(String::as_str).or(c.target.as_deref()),
        )
        .map_err(Error::Usage)?;
        if c.ratis && c.pipeline > 1 && resilience.active() {
            return Err(Error::Usage(
                "--retry and --client-throttle with --ratis need --pipeline 1 (an attempt is retried alone, on a new stream)".into(),
            ));
        }
        if c.stream_mode == StreamMode::Persistent && !c.ratis && resilience.active() {
            return Err(Error::Usage(
                "--retry and --client-throttle need --stream-mode per-request (the default) or --ratis".into(),
            ));
        }
        Ok(RunConfig {
            ratis: c
                .ratis
                .then_some(c.pipeline_id.unwrap_or(DEFAULT_PIPELINE_ID)),
            ratis_admin: c.ratis_admin.clone(),
            load: match schedule {
                Some(s) => Load::Open(plan_of(s, shard)),
                None => Load::Closed,
            },
            streams,
            runtime_threads: c.runtime_threads.map(|n| n as usize),
            warmup,
            report: ReportConfig::from_args(report),
            live: LiveConfig {
                interval: c.report_interval,
                histogram_log: c.histogram_log.clone(),
                metrics_listen: c.metrics_listen,
            },
            target: match &c.target {
                Some(t) if t == "null" => Target::Null,
                Some(_) => Target::Remote(targets, tls),
                None => Target::Embedded {
                    threads: c.embedded_threads as usize,
                },
            },
            clients: c.clients as usize,
            threads: c.threads as usize,
            stop,
            fail_at_end: c.fail_at_end,
            timeout: c.timeout,
            connect_timeout: c.connect_timeout,
            datanode_uuid: c.datanode_uuid.clone(),
            container_id: c.container_id,
            workload,
            resilience,
            bandwidth,
            shard,
            start_at: c.start_at,
        })
    }

    /// Turns a `--rate` bandwidth into units per second of `unit_bytes` each.
    pub fn resolve_bandwidth(&mut self, unit_bytes: f64) {
        if let Some(b) = self.bandwidth.take() {
            self.load = Load::Open(plan_of(
                RateSchedule::Constant(b / unit_bytes.max(1.0)),
                self.shard,
            ));
        }
    }

    pub fn write(args: &WriteArgs) -> Result<Self, Error> {
        let (shape, described) = shape_of(&args.shape)?;
        let write = WriteConfig {
            shape,
            described,
            manifest: args.manifest.clone(),
            then_read: args.then_read,
            read_v1: args.read_version == crate::cli::ReadVersion::V1,
        };
        let mut config =
            Self::from_common(&args.common, &args.report, WorkloadConfig::Write(write))?;
        config.resolve_bandwidth(args.shape.write_size as f64);
        Ok(config)
    }

    pub fn read(args: &ReadArgs) -> Result<Self, Error> {
        let (shape, described) = shape_of(&args.shape)?;
        if args.common.target.as_deref() == Some("null") && args.manifest.is_some() {
            return Err(Error::Usage(
                "--target null starts with an empty store, so a --manifest's blocks are not in it; leave out --manifest to read a data set written first".into(),
            ));
        }
        let blocks = match &args.manifest {
            Some(path) => {
                let listed = crate::manifest::read(path).map_err(Error::Usage)?;
                let blocks = listed
                    .iter()
                    .map(|b| {
                        Ok(Expected {
                            id: b.block_id(),
                            chunks: Some(b.chunk_infos().map_err(Error::Usage)?),
                        })
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                Some(std::sync::Arc::new(blocks))
            }
            None => None,
        };
        let read = ReadConfig {
            shape,
            described,
            blocks,
            verify: args.verify,
            read_v1: args.read_version == crate::cli::ReadVersion::V1,
        };
        let mut config = Self::from_common(&args.common, &args.report, WorkloadConfig::Read(read))?;
        // A shard reads its share of the manifest's blocks: those ≡ I (mod N) in its order.
        if let (Some(s), WorkloadConfig::Read(r)) = (config.shard, &mut config.workload)
            && let Some(blocks) = &r.blocks
        {
            let mine: Vec<Expected> = blocks
                .iter()
                .skip(s.index as usize)
                .step_by(s.count as usize)
                .cloned()
                .collect();
            r.blocks = Some(std::sync::Arc::new(mine));
        }
        Ok(config)
    }

    /// The phase that writes a `read`'s data set, or reads back a `write --then-read`: closed
    /// loop, no warm-up, the same connections, threads, deadlines and resilience.
    pub fn phase(&self, workload: WorkloadConfig, stop: StopAfter) -> Self {
        RunConfig {
            load: Load::Closed,
            warmup: Duration::ZERO,
            // The measured phase waits for --start-at; the others go at once.
            start_at: None,
            stop,
            workload,
            bandwidth: None,
            live: LiveConfig {
                histogram_log: None,
                metrics_listen: None,
                ..self.live.clone()
            },
            ..self.clone()
        }
    }

    /// Requests in flight at most: workers × pipeline depth.
    pub fn max_in_flight(&self) -> usize {
        match self.streams {
            Streams::PerRequest => self.threads,
            Streams::Persistent { pipeline } => self.threads * pipeline,
        }
    }

    pub fn echo(args: &EchoArgs) -> Result<Self, Error> {
        let echo = EchoConfig {
            payload_req_bytes: (args.payload_req * 1024) as usize,
            // parse_payload_kb bounds the size to 32 MiB, so it fits an int32.
            payload_resp_bytes: (args.payload_resp * 1024) as i32,
            sleep_time_ms: args.sleep_time_ms,
            // freon dn-echo: readOnly is false unless asked for, and forced true over gRPC.
            read_only: args.read_only.unwrap_or(!args.common.ratis),
        };
        Self::from_common(&args.common, &args.report, WorkloadConfig::Echo(echo))
    }
}

/// The open-loop plan: the whole schedule, or this shard's every N-th request of it.
fn plan_of(schedule: RateSchedule, shard: Option<Shard>) -> Plan {
    let plan = Plan::new(schedule);
    match shard {
        Some(s) => plan.sharded(s.index, s.count),
        None => plan,
    }
}

fn shape_of(a: &ShapeArgs) -> Result<(WriteShape, Shape), Error> {
    let checksum = common::checksum::Checksum::new(a.checksum, a.bytes_per_checksum as u32)
        .map_err(|e| Error::Usage(format!("--bytes-per-checksum: {e}")))?;
    let shape = WriteShape {
        write_size: a.write_size as usize,
        chunk_size: a.chunk_size as usize,
        block_size: a.block_size,
        flush_size: a.flush_size,
        checksum,
        mode: a.checksum_mode,
    };
    let described = Shape {
        write_size: a.write_size,
        chunk_size: a.chunk_size,
        bytes_per_checksum: a.bytes_per_checksum,
        checksum: checksum_name(a.checksum).to_string(),
        checksum_mode: a.checksum_mode.name().to_string(),
        block_size: a.block_size,
        flush_size: a.flush_size,
    };
    Ok((shape, described))
}

/// The resolved `--retry`, `--retry-backoff`, `--client-throttle`, `--throttle-scope`,
/// `--analysis-period`, `--sre-k` and `--sre-window` flags.
#[derive(Clone, Debug, PartialEq)]
pub struct ResilienceConfig {
    pub retry: RetryPolicy,
    pub throttle: ThrottleKind,
    pub scope: ThrottleScope,
    /// The analyzer's analysis period (ABFS `fs.azure.analysis.period`).
    pub analysis_period: Duration,
    /// The sre throttle's settings (K and window from the flags).
    pub sre: SreConfig,
    /// The aimd throttle's settings (increase and decrease from the flags).
    pub aimd: AimdConfig,
}

impl Default for ResilienceConfig {
    fn default() -> Self {
        ResilienceConfig {
            retry: RetryPolicy::none(),
            throttle: ThrottleKind::None,
            scope: ThrottleScope::Connection,
            analysis_period: crate::throttle::analyzer::DEFAULT_ANALYSIS_PERIOD,
            sre: SreConfig::default(),
            aimd: AimdConfig::ops(),
        }
    }
}

impl ResilienceConfig {
    /// From the flags: `--retry N` bounds the retries; without it, an explicit `--retry-backoff`
    /// spec's own count applies (`abfs`: 30), and with neither there are no retries. `unit` is
    /// what aimd paces: requests (echo) or payload bytes (write, read).
    pub fn from_args(c: &crate::cli::ResilienceArgs, unit: AimdUnit) -> Self {
        let mut retry = c.retry_backoff.unwrap_or(RetryPolicy::abfs_legacy());
        retry.max_retries = match (c.retry, c.retry_backoff) {
            (Some(n), _) => n,
            (None, Some(p)) => p.max_retries,
            (None, None) => 0,
        };
        if retry.max_retries == 0 {
            retry = RetryPolicy::none();
        }
        let aimd = match unit {
            AimdUnit::Ops => AimdConfig::ops(),
            AimdUnit::Bytes => AimdConfig::bytes(),
        };
        // The flag is per second (ops/s, or MB/s for bytes); the rate grows in steps of
        // increase_interval.
        let per_step = |per_s: f64| match unit {
            AimdUnit::Ops => per_s,
            AimdUnit::Bytes => per_s * 1048576.0,
        } * aimd.increase_interval.as_secs_f64();
        ResilienceConfig {
            retry,
            throttle: c.client_throttle,
            scope: c.throttle_scope,
            analysis_period: c.analysis_period,
            sre: SreConfig {
                k: c.sre_k,
                window: c.sre_window,
                ..SreConfig::default()
            },
            aimd: AimdConfig {
                increase: c.aimd_increase.map_or(aimd.increase, per_step),
                decrease_factor: c.aimd_decrease,
                ..aimd
            },
        }
    }

    /// Whether requests go through `engine::resilience::request` (retries or a throttle).
    pub fn active(&self) -> bool {
        self.retry.max_retries > 0 || self.throttle != ThrottleKind::None
    }

    /// A new throttle of the configured kind.
    pub fn build_throttle(&self, seed: u64) -> Arc<dyn ClientThrottle> {
        match self.throttle {
            ThrottleKind::Analyzer => Arc::new(AnalyzerThrottle::new(self.analysis_period)),
            ThrottleKind::Sre => Arc::new(SreThrottle::new(self.sre, seed)),
            ThrottleKind::Aimd => Arc::new(AimdThrottle::new(self.aimd)),
            kind => kind.build(seed),
        }
    }
}

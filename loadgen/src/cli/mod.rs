//! Command-line flags. Flags follow freon's names and defaults (`ozone freon dn-echo`), plus what
//! freon lacks (`--target`, `--datanode-uuid`, …). Each flag's parser validates its value, so a
//! bad value is reported with the flag's name; [`crate::config`] turns the flags into a
//! [`crate::config::RunConfig`] the engine uses.

pub mod calibrate;
pub mod plot;
pub mod sweep;

use crate::schedule::RateSchedule;
use crate::workload::block_writer::ChecksumMode;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use common::proto::ChecksumType;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "loadgen",
    version,
    about = "Load generator for Apache Ozone DataNodes (XceiverClientProtocolService), in the spirit of `ozone freon dn-echo`",
    after_help = "Without --target, loadgen starts an embedded dn-sim on 127.0.0.1 and measures it."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Echo round trips (freon dn-echo): measures the client → DataNode RPC path.
    Echo(Box<EchoArgs>),
    /// Combine the JSON results (--format json) of several loadgen processes into one report.
    /// Exact: the latency histograms are merged, not averaged.
    Merge(MergeArgs),
    /// Draw an SVG chart: of one JSON result (latency by percentile, throughput and latency per
    /// interval) or of columns of a CSV file (--csv FILE --x COL --y COL[,COL] --series COL).
    Plot(Box<plot::PlotArgs>),
    /// Measure a DataNode (a real one or dn-sim) and fit the costs of dn-sim's stages to it:
    /// service times per command and size, the saturation curve, runs at several pools; writes
    /// a profile for `dn-sim --profile`.
    Calibrate(Box<calibrate::CalibrateArgs>),
    /// Run a workload over a parameter matrix (loadgen flags and dn-sim settings through its
    /// admin endpoint); write one CSV, one JSON and one chart, print a markdown table.
    Sweep(Box<sweep::SweepArgs>),
    /// Write blocks as Ozone's BlockOutputStream does (WriteChunk per chunk, PutBlock per flush
    /// and at block end); MB/s and writes/s, WriteChunk and PutBlock latency.
    Write(Box<WriteArgs>),
    /// GetBlock and ReadChunk of blocks written first in this run or listed in a --manifest;
    /// every checksum verified.
    Read(Box<ReadArgs>),
}

/// How requests travel on a connection.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamMode {
    /// A new bidi stream per request, half-closed at once (Ozone's Java client).
    PerRequest,
    /// One long stream per worker with --pipeline requests in flight, answered in order.
    Persistent,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// freon's console report, then loadgen's additions.
    Text,
    /// Everything measured, including the histograms (input of `loadgen merge`).
    Json,
    /// One header line and one row per run (appended to an existing --output file).
    Csv,
}

/// Where and how the report is written.
#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Report format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,

    /// Write the report to FILE instead of stdout (a csv row is appended to an existing file);
    /// with json or csv, the text report still goes to stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Percentiles to print, comma separated.
    #[arg(long, value_name = "LIST", default_value = "50,90,99,99.9,99.99", value_parser = parse_percentiles)]
    pub percentiles: Percentiles,

    /// Also print the JSON result (as --format json writes it) on stdout, between the lines
    /// `-----BEGIN LOADGEN RESULT-----` and `-----END LOADGEN RESULT-----`, so that a pod's
    /// `kubectl logs` carries it to `loadgen merge`.
    #[arg(long)]
    pub result_markers: bool,
}

/// A list of percentiles in (0, 100], from `--percentiles`.
#[derive(Clone, Debug, PartialEq)]
pub struct Percentiles(pub Vec<f64>);

#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// JSON results written by `loadgen echo --format json --output FILE`, or logs (`kubectl
    /// logs`, with or without --prefix) holding results between --result-markers lines; `-`
    /// reads stdin; a directory: every `*.json` file in it.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,

    /// Wait up to this long until the results found make up a whole split (shards 0 … N − 1 of
    /// `--shard`/`--shards` runs, each once), reading the inputs again every second: a merge
    /// Job started beside the shards' Job. Without it the inputs are read once.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait: Option<Duration>,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// Options every workload shares: where to send, how much, how concurrently.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// DataNode client port to load, HOST:PORT (a real DataNode or a dn-sim), or several,
    /// comma separated (connection c goes to target c mod their number; with --shard, the list
    /// is dealt out to the shards). Without it an embedded dn-sim is started on 127.0.0.1.
    /// `null`: no network at all, dn-sim's dispatcher answers in loadgen's process (per-request
    /// streams only; read: no --manifest).
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT…]|null")]
    pub target: Option<String>,

    /// Run shard I of a test split over N loadgen processes (0 ≤ I < N): this process does its
    /// exact share of -n, of --rate/--rate-schedule (every N-th request of the whole plan), of
    /// the block IDs and of the --target list. Merge the shards' results with `loadgen merge`.
    #[arg(long, value_name = "I/N", value_parser = parse_shard, conflicts_with = "shards")]
    pub shard: Option<crate::shard::Shard>,

    /// Like --shard I/N, with I from the environment variable JOB_COMPLETION_INDEX (what a
    /// Kubernetes Indexed Job sets in each pod).
    #[arg(long, value_name = "N", value_parser = parse_shard_count)]
    pub shards: Option<u32>,

    /// Start the measured phase at this wall-clock instant, after connecting and the --warmup:
    /// RFC 3339 (2026-12-03T18:00:00Z, or with an offset) or +DURATION from now (+10s). Every
    /// shard given the same instant measures the same interval; the report gives the actual
    /// start's offset from it.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,

    /// Number of requests to measure (ignored with --duration) [default: 1000, or with
    /// --rate-schedule the plan's own length]. write: application write() calls; read: the
    /// data set's writes when there is no --manifest.
    #[arg(short = 'n', long = "number-of-tests", allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub number_of_tests: Option<u64>,

    /// Worker threads, each with one request outstanding.
    #[arg(short = 't', long = "threads", allow_negative_numbers = true, visible_alias = "thread", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub threads: u32,

    /// Run for this long instead of a number of requests (e.g. 30s, 5m, 1h, 7d).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Run this long before measuring; nothing sent during it counts in any statistic.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Open loop: send R requests per second in total, whatever the answers do (write:
    /// application writes/s; read: blocks/s), or a bandwidth such as 500MB/s (write and read).
    /// Latency is measured from each request's intended send time (coordinated omission
    /// corrected).
    #[arg(long, value_name = "R", value_parser = parse_load_rate, conflicts_with = "rate_schedule")]
    pub rate: Option<LoadRate>,

    /// Open loop with a changing rate: step:start=1000,step=1000,every=10s,end=10000 or
    /// ramp:from=1000,to=20000,over=60s.
    #[arg(long, value_name = "PLAN", value_parser = parse_schedule)]
    pub rate_schedule: Option<RateSchedule>,

    /// per-request: a new stream per request (Ozone's Java client); persistent: one long stream
    /// per worker.
    #[arg(long, value_enum, default_value = "per-request")]
    pub stream_mode: StreamMode,

    /// Send through the DataNode's Ratis client port (hdds.container.ratis.ipc.port, 9858) as
    /// Ozone's XceiverClientRatis does (freon dn-echo --ratis): one ordered Raft stream per
    /// worker with --pipeline requests in flight, opened by a dummy watch; an echo that is not
    /// --read-only is a Raft write, a read-only one a Raft read. --target is then the Ratis port;
    /// without --target the embedded dn-sim serves one. Echo and write (a unit's RPCs one at a
    /// time on the worker's stream); not read, which Ozone sends over the gRPC port.
    #[arg(long)]
    pub ratis: bool,

    /// With --ratis: the pipeline (Raft group) to send to, as SCM names it (a UUID). The default
    /// is dn-sim's own pipeline, or with --ratis-admin the DataNode's one group.
    #[arg(long, value_name = "UUID", requires = "ratis")]
    pub pipeline_id: Option<uuid::Uuid>,

    /// With --ratis: the DataNode's Ratis admin port (hdds.container.ratis.admin.port, 9857),
    /// asked for its groups (groupList) when no --pipeline-id is given; it must host exactly one.
    #[arg(
        long,
        value_name = "HOST:PORT",
        requires = "ratis",
        conflicts_with = "pipeline_id"
    )]
    pub ratis_admin: Option<String>,

    /// Requests in flight per worker on its persistent stream (needs --stream-mode persistent).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub pipeline: u32,

    /// How often progress lines (when stderr is not a terminal), the JSON time series, the
    /// histogram log and the metrics are updated.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub report_interval: Duration,

    /// Write an HdrHistogram interval log (V2, compressed) of the latencies to FILE.
    #[arg(long, value_name = "FILE")]
    pub histogram_log: Option<PathBuf>,

    /// Serve live counters and latency histograms in Prometheus text format on ADDR during the
    /// run (e.g. 127.0.0.1:9000).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,

    /// gRPC connections (separate TCP connections, like freon's XceiverClient instances); worker i
    /// uses connection i mod clients.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub clients: u32,

    /// Keep going after failures and report them at the end (default: stop at the first failure).
    #[arg(short = 'f', long = "fail-at-end")]
    pub fail_at_end: bool,

    /// Per-request deadline (ozone.client.read.timeout).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// How long to wait for each connection to the target.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// datanodeUuid sent in every request (a real DataNode checks it only for EC containers).
    #[arg(long, default_value = "loadgen")]
    pub datanode_uuid: String,

    /// Container the requests address; it must exist on the DataNode.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1)]
    pub container_id: i64,

    /// loadgen's I/O threads, each driving its share of the connections with their workers
    /// [default: half the cores, at least 1, never more than --clients].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub runtime_threads: Option<u32>,

    /// Runtime threads of the embedded dn-sim (only without --target).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub embedded_threads: u32,

    #[command(flatten)]
    pub resilience: ResilienceArgs,

    #[command(flatten)]
    pub tls: TlsArgs,
}

/// TLS to the target, as to a secure DataNode (`hdds.grpc.tls.enabled`), for both stream modes.
/// Every `--tls-*` flag needs `--tls`; `--tls` needs `--tls-ca` and a network `--target`.
#[derive(Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Speak TLS (ALPN h2, TLS 1.2/1.3) to --target; needs --tls-ca.
    #[arg(long)]
    pub tls: bool,

    /// PEM CA bundle that signed the DataNode's certificate (Ozone's: the SCM root CA).
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for mutual TLS; needs --tls-client-key.
    #[arg(long, value_name = "PEM")]
    pub tls_client_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-client-cert.
    #[arg(long, value_name = "PEM")]
    pub tls_client_key: Option<PathBuf>,

    /// The name the DataNode's certificate must carry [default: the host of --target].
    #[arg(long, value_name = "NAME")]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    pub fn flags(&self) -> crate::connection::tls::TlsFlags {
        crate::connection::tls::TlsFlags {
            tls: self.tls,
            ca: self.tls_ca.clone(),
            client_cert: self.tls_client_cert.clone(),
            client_key: self.tls_client_key.clone(),
            server_name: self.tls_server_name.clone(),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct EchoArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub report: ReportArgs,

    /// Request payload in KB (1 KB = 1024 bytes); the DataNode ignores it.
    #[arg(long, allow_negative_numbers = true, default_value = "0", value_name = "KB", value_parser = parse_payload_kb)]
    pub payload_req: u64,

    /// Response payload in KB (1 KB = 1024 bytes), sent as payloadSizeResp.
    #[arg(long, allow_negative_numbers = true, default_value = "0", value_name = "KB", value_parser = parse_payload_kb)]
    pub payload_resp: u64,

    /// Milliseconds the DataNode sleeps on its handler before answering (sleepTimeMs).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..))]
    pub sleep_time_ms: i32,

    /// Send read-only echoes. The default is freon dn-echo's: read-only over the gRPC port (a
    /// non-read-only echo runs the DataNode's write-path checks there and must be asked for with
    /// --read-only=false), a Raft write with --ratis (--read-only makes it a Raft read).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub read_only: Option<bool>,
}

/// Retries and client-side throttling (issue #6), shared by `echo`, `write` and `read`.
#[derive(Args, Debug, Clone)]
pub struct ResilienceArgs {
    /// Retry a request up to N times after a retryable failure (UNAVAILABLE/RESOURCE_EXHAUSTED,
    /// deadline, transport) [default: 0, or the --retry-backoff spec's retries= when given].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub retry: Option<u32>,

    /// Backoff between retries: abfs (ABFS's legacy ExponentialRetryPolicy, 3s/30s/3s, the
    /// default), abfs-new (500ms/25s/500ms), none, or exp:min=300ms,max=3s,delta=300ms,retries=30.
    #[arg(long, value_name = "POLICY", value_parser = parse_retry_policy)]
    pub retry_backoff: Option<crate::retry::RetryPolicy>,

    /// Client-side throttle: none, analyzer (HADOOP-14660), sre (Google SRE adaptive throttling,
    /// --sre-k and --sre-window), aimd (additive-increase/multiplicative-decrease of the send rate).
    #[arg(long, value_name = "KIND", default_value = "none", value_parser = parse_throttle_kind)]
    pub client_throttle: crate::throttle::ThrottleKind,

    /// One throttle per --clients connection (connection), or one for the whole process.
    #[arg(long, value_name = "SCOPE", default_value = "connection", value_parser = parse_throttle_scope)]
    pub throttle_scope: crate::throttle::ThrottleScope,

    /// The analyzer throttle's analysis period (ABFS fs.azure.analysis.period).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub analysis_period: Duration,

    /// The sre throttle's accepts multiplier K (> 0): it rejects locally with
    /// p = max(0, (requests − K·accepts)/(requests + 1)); lower is more aggressive (Google: 2,
    /// 1.1 ≈ one rejection per 10 accepts).
    #[arg(long, value_name = "K", allow_negative_numbers = true, default_value = "2", value_parser = parse_sre_k)]
    pub sre_k: f64,

    /// The sre throttle's sliding window of requests and accepts (1 s buckets; 1s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_sre_window)]
    pub sre_window: Duration,

    /// The aimd throttle's additive increase per second of successes while the rate binds
    /// (applied in 100 ms steps): echo paces requests, +500 ops/s per s by default; write and
    /// read pace data, +40 MB/s per s by default.
    #[arg(long, value_name = "RATE_PER_S", value_parser = parse_aimd_increase)]
    pub aimd_increase: Option<f64>,

    /// The aimd throttle's multiplicative decrease on a rejection (at most every 100 ms), in (0, 1).
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true, default_value = "0.7", value_parser = parse_aimd_decrease)]
    pub aimd_decrease: f64,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = common::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// A finite number greater than zero.
fn parse_positive(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{v} is not a number greater than zero"));
    }
    Ok(v)
}

fn parse_sre_k(s: &str) -> Result<f64, String> {
    parse_positive(s)
}

fn parse_aimd_increase(s: &str) -> Result<f64, String> {
    parse_positive(s)
}

fn parse_aimd_decrease(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(v > 0.0 && v < 1.0) {
        return Err(format!("{v} is not a factor between 0 and 1 (exclusive)"));
    }
    Ok(v)
}

fn parse_sre_window(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    let bucket = crate::throttle::sre::DEFAULT_BUCKET;
    if d < bucket || d > Duration::from_secs(3600) {
        return Err(format!(
            "{d:?} is not between {bucket:?} (the window's bucket) and 1h"
        ));
    }
    Ok(d)
}

fn parse_retry_policy(s: &str) -> Result<crate::retry::RetryPolicy, String> {
    s.parse()
        .map_err(|e: crate::retry::RetryParseError| e.to_string())
}

fn parse_throttle_kind(s: &str) -> Result<crate::throttle::ThrottleKind, String> {
    s.parse()
        .map_err(|e: crate::throttle::ParseThrottleKindError| e.to_string())
}

fn parse_throttle_scope(s: &str) -> Result<crate::throttle::ThrottleScope, String> {
    s.parse()
        .map_err(|e: crate::throttle::ParseThrottleScopeError| e.to_string())
}

/// `--rate`: requests per second, or bytes per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadRate {
    PerSecond(f64),
    /// A bandwidth (`500MB/s`; MB = 2^20 bytes), for workloads that move data.
    Bytes(f64),
}

fn parse_load_rate(s: &str) -> Result<LoadRate, String> {
    let t = s.trim();
    let body = t.strip_suffix("/s").unwrap_or(t);
    if body.ends_with(['B', 'b']) {
        let bytes = common::units::parse_size(body).map_err(|e| e.to_string())?;
        if bytes == 0 {
            return Err("must be greater than zero".into());
        }
        return Ok(LoadRate::Bytes(bytes as f64));
    }
    parse_positive_rate(s).map(LoadRate::PerSecond)
}

fn parse_positive_rate(s: &str) -> Result<f64, String> {
    let r = common::units::parse_rate(s).map_err(|e| e.to_string())?;
    if r <= 0.0 {
        return Err("must be greater than zero".into());
    }
    Ok(r)
}

fn parse_shard(s: &str) -> Result<crate::shard::Shard, String> {
    crate::shard::Shard::parse(s)
}

fn parse_shard_count(s: &str) -> Result<u32, String> {
    crate::shard::parse_count(s)
}

fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    crate::shard::parse_start_at(s, std::time::SystemTime::now())
}

fn parse_schedule(s: &str) -> Result<RateSchedule, String> {
    s.parse()
        .map_err(|e: crate::schedule::ScheduleError| e.to_string())
}

fn parse_percentiles(s: &str) -> Result<Percentiles, String> {
    let mut list = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let p: f64 = part
            .trim_start_matches('p')
            .parse()
            .map_err(|_| format!("'{part}' is not a percentile"))?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!("{p} is not in (0, 100]"));
        }
        list.push(p);
    }
    if list.is_empty() {
        return Err("give at least one percentile, e.g. 50,99".into());
    }
    Ok(Percentiles(list))
}

/// A payload size in KB, at most the 32 MiB gRPC message limit of Ozone.
fn parse_payload_kb(s: &str) -> Result<u64, String> {
    let kb: i64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number of KB"))?;
    if kb < 0 {
        return Err(format!("{kb} KB is negative; a payload size is 0 or more"));
    }
    let kb = kb as u64;
    let limit_kb = (common::MAX_MESSAGE_SIZE / 1024) as u64;
    if kb > limit_kb {
        return Err(format!(
            "{kb} KB exceeds the 32 MiB ({limit_kb} KB) message limit"
        ));
    }
    Ok(kb)
}

/// What the application and its output stream do (Ozone's client configuration).
#[derive(Args, Debug, Clone)]
pub struct ShapeArgs {
    /// Size of each application write() (1 KB = 1024 bytes), at most 32 MB.
    #[arg(long, default_value = "1MB", value_name = "SIZE", value_parser = parse_write_size)]
    pub write_size: u64,

    /// Chunk size, ozone.scm.chunk.size: one WriteChunk per full chunk (at most 32 MB).
    #[arg(long, default_value = "4MB", value_name = "SIZE", value_parser = parse_chunk_size)]
    pub chunk_size: u64,

    /// ozone.client.bytes.per.checksum: one checksum per this many bytes of a chunk.
    #[arg(long, default_value = "16KB", value_name = "SIZE", value_parser = parse_bytes_per_checksum)]
    pub bytes_per_checksum: u64,

    /// ozone.client.checksum.type: CRC32, CRC32C, SHA256, MD5 or NONE.
    #[arg(long, default_value = "CRC32", value_name = "TYPE", value_parser = parse_checksum_type)]
    pub checksum: ChecksumType,

    /// Block size, ozone.scm.block.size: a new block (local ID) after this many bytes.
    #[arg(long, default_value = "256MB", value_name = "SIZE", value_parser = parse_positive_size)]
    pub block_size: u64,

    /// PutBlock every this many bytes (ozone.client.stream.buffer.flush.size) and at block end.
    #[arg(long, default_value = "16MB", value_name = "SIZE", value_parser = parse_positive_size)]
    pub flush_size: u64,

    /// incremental: checksum each write() as it is copied into the chunk buffer (HDDS-15612's
    /// "after"); at-flush: checksum the whole chunk when it is sent (Ozone before the patch).
    #[arg(long, default_value = "incremental", value_name = "MODE", value_parser = parse_mode)]
    pub checksum_mode: ChecksumMode,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadVersion {
    /// One `data` buffer.
    V0,
    /// `dataBuffers` split at bytesPerChecksum (what the Java client sends).
    V1,
}

#[derive(Args, Debug, Clone)]
pub struct WriteArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub shape: ShapeArgs,

    #[command(flatten)]
    pub report: ReportArgs,

    /// Record every block written (container, local ID, chunks, checksums) in FILE (JSON lines,
    /// streamed as blocks are committed) for a later `loadgen read --manifest FILE`.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// After writing, read every block back (GetBlock, ReadChunk) and verify every checksum.
    #[arg(long)]
    pub then_read: bool,

    /// ReadChunk version of the read-back.
    #[arg(long, value_enum, default_value = "v1")]
    pub read_version: ReadVersion,
}

#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    /// The data set to write first when there is no --manifest.
    #[command(flatten)]
    pub shape: ShapeArgs,

    #[command(flatten)]
    pub report: ReportArgs,

    /// Read the blocks listed in FILE (written by `loadgen write --manifest FILE`) instead of
    /// writing a data set first.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// Verify every chunk's checksums (mismatches are data-integrity errors).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub verify: bool,

    /// ReadChunk version.
    #[arg(long, value_enum, default_value = "v1")]
    pub read_version: ReadVersion,
}

const MAX_SIZE: u64 = common::MAX_MESSAGE_SIZE as u64;

fn size(s: &str) -> Result<u64, String> {
    common::units::parse_size(s).map_err(|e| e.to_string())
}

fn parse_positive_size(s: &str) -> Result<u64, String> {
    match size(s)? {
        0 => Err("must be greater than zero".into()),
        n => Ok(n),
    }
}

fn parse_upto_32mb(s: &str) -> Result<u64, String> {
    let n = parse_positive_size(s)?;
    if n > MAX_SIZE {
        return Err(format!("{n} bytes exceeds the 32 MB message limit"));
    }
    Ok(n)
}

fn parse_write_size(s: &str) -> Result<u64, String> {
    parse_upto_32mb(s)
}

fn parse_chunk_size(s: &str) -> Result<u64, String> {
    parse_upto_32mb(s)
}

fn parse_bytes_per_checksum(s: &str) -> Result<u64, String> {
    let n = parse_positive_size(s)?;
    u32::try_from(n).map_err(|_| format!("{n} bytes is too large"))?;
    Ok(n)
}

pub fn parse_checksum_type(s: &str) -> Result<ChecksumType, String> {
    crate::workload::block_writer::checksum_type_of(s)
}

fn parse_mode(s: &str) -> Result<ChecksumMode, String> {
    s.parse()
}

//! Command-line flags of the `dn-sim` binary, turned into a [`Config`]. Ozone configuration keys
//! users already know are accepted as `-D key=value`. Every flag can also come from a `DN_SIM_*`
//! environment variable, and Ozone keys from the Ozone images' `OZONE-SITE.XML_<key>=<value>`
//! variables, so a container is configured by its environment.

use crate::datanode::container_ids::ContainerIds;
use crate::datanode::store::StoreKind;
use crate::net::health::HealthcheckArgs;
use crate::net::server::Config;
use crate::sim::cmd_selector::Assignment;
use crate::sim::delay::{DelayModel, DelaySpec};
use crate::sim::fault::{FaultPlan, FaultSpec};
use crate::sim::live_settings::{LiveSettings, MAX_HANDLERS, parse_bandwidth, parse_limit_status};
use crate::sim::service_limits::{LimitPolicy, LimitRates, Pushback, RejectTiming};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::Duration;

/// The `dn-sim` command line: serving is the default, so `dn-sim --listen ...` needs no
/// subcommand.
#[derive(Parser, Debug)]
#[command(
    name = "dn-sim",
    version,
    about = "A simulated Apache Ozone DataNode (XceiverClientProtocolService on port 9859)",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: Args,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the DataNode client protocol (what `dn-sim` without a subcommand does).
    Serve(Box<Args>),
    /// Ask a dn-sim's grpc.health.v1.Health whether it is SERVING: exit 0 if so, 1 if not
    /// (a container healthcheck that needs no shell).
    Healthcheck(HealthcheckArgs),
}

impl Cli {
    /// The subcommand to run; `serve` with the top-level flags when none was given.
    pub fn into_command(self) -> Command {
        self.command
            .unwrap_or_else(|| Command::Serve(Box::new(self.serve)))
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "dn-sim",
    version,
    about = "A simulated Apache Ozone DataNode (XceiverClientProtocolService on port 9859)"
)]
pub struct Args {
    /// Address of the client port (the DataNode's hdds.container.ipc.port).
    #[arg(long, env = "DN_SIM_LISTEN", default_value = "0.0.0.0:9859")]
    pub listen: SocketAddr,

    /// Pre-created containers: a list and/or ranges, e.g. 1 or 1-100,200, or none. Default: 1;
    /// none with --scm (SCM allocates the containers of a cluster; one it does not know is
    /// only logged as CONTAINER_NOT_FOUND by SCM).
    #[arg(long, env = "DN_SIM_CONTAINERS")]
    pub containers: Option<ContainerIds>,

    /// Handlers serving requests: the DataNode's gRPC worker pool
    /// (read.chunk.threads.per.volume × volumes). Default 10.
    #[arg(long, env = "DN_SIM_HANDLER_COUNT", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_HANDLERS)))]
    pub handler_count: Option<u32>,

    /// Bound of the queue of requests waiting for a handler; when full, requests get
    /// RESOURCE_EXHAUSTED. Default: unbounded, as in the DataNode.
    #[arg(long, env = "DN_SIM_MAX_QUEUE", allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(0..))]
    pub max_queue: Option<u64>,

    /// Data volumes; with -D hdds.datanode.read.chunk.threads.per.volume=N the pool is N × volumes.
    #[arg(long, env = "DN_SIM_VOLUMES", allow_negative_numbers = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub volumes: u32,

    /// Ozone configuration key (repeatable): hdds.datanode.read.chunk.threads.per.volume (the pool
    /// is N × volumes), hdds.container.ipc.port, hdds.container.ratis.ipc.port,
    /// hdds.datanode.chunk.data.validation.check
    /// (= --verify-checksums), hdds.container.chunk.write.sync (= --sync),
    /// hdds.datanode.handler.count (checked; sizes nothing, as on a real DataNode's gRPC and Ratis
    /// paths), hdds.grpc.tls.enabled (true needs --tls-cert), hdds.grpc.tls.protocols
    /// (TLSv1.2,TLSv1.3), hdds.container.ratis.num.container.op.executors (each pipeline's apply
    /// threads, 10), hdds.container.ratis.num.write.chunk.threads.per.volume (Ratis chunk writers
    /// = N × volumes, 10), hdds.container.ratis.log.appender.queue.num-elements (checked; sizes
    /// nothing in a one-node group), hdds.container.ratis.log.appender.queue.byte-limit (32MB; the
    /// Ratis port's message limit is the larger of it and 32 MiB, plus 1 MiB), ozone.scm.names
    /// (one SCM host[:port], as --scm), ozone.scm.datanode.port (9861), hdds.heartbeat.interval
    /// (30s; a bare number is ms), hdds.container.report.interval (60m).
    #[arg(short = 'D', env = "DN_SIM_DEFINE", value_delimiter = ';', value_name = "KEY=VALUE", value_parser = parse_ozone_key)]
    pub define: Vec<OzoneKey>,

    /// Injected service time, TYPE=SPEC (repeatable). TYPE: a command type (echo, write_chunk, …) or
    /// all. SPEC: 2ms | uniform:1ms..3ms | normal:mean=2ms,sd=500us | lognormal:p50=1ms,p99=20ms |
    /// pareto:scale=1ms,shape=1.5 | percentiles:p50=1ms,p90=3ms,p99=12ms,p100=40ms.
    #[arg(
        long = "delay",
        env = "DN_SIM_DELAY",
        value_delimiter = ';',
        value_name = "TYPE=SPEC"
    )]
    pub delays: Vec<Assignment<DelaySpec>>,

    /// Injected fault, TYPE=KIND:PROBABILITY (repeatable). KIND: a Result name (IO_EXCEPTION, …),
    /// grpc:CODE, drop, reset, stall:DURATION.
    #[arg(
        long = "fault",
        env = "DN_SIM_FAULT",
        value_delimiter = ';',
        value_name = "TYPE=KIND:P"
    )]
    pub faults: Vec<Assignment<FaultSpec>>,

    /// Seed of all random draws (delays, faults), so runs are repeatable.
    #[arg(long, env = "DN_SIM_SEED", default_value_t = 0x0d15_ea5e)]
    pub seed: u64,

    /// Shared disk bandwidth for chunk data, e.g. 500MiB/s (default: unlimited).
    #[arg(long, env = "DN_SIM_DISK_BANDWIDTH", value_parser = parse_bandwidth)]
    pub disk_bandwidth: Option<f64>,

    /// Per-access latency of the shared disk, a delay SPEC.
    #[arg(long, env = "DN_SIM_DISK_LATENCY")]
    pub disk_latency: Option<DelaySpec>,

    /// Bandwidth of the Raft log's device (the Ratis port's writes append an entry each: the
    /// command without WriteChunk's data), e.g. 200MiB/s (default: unlimited).
    #[arg(long, env = "DN_SIM_RAFT_LOG_BANDWIDTH", value_parser = parse_bandwidth)]
    pub raft_log_bandwidth: Option<f64>,

    /// Latency of one Raft log append until it is durable, a delay SPEC (default: none).
    #[arg(long, env = "DN_SIM_RAFT_LOG_LATENCY")]
    pub raft_log_latency: Option<DelaySpec>,

    /// Ingress limit: bytes/s of request data for all clients together, e.g. 100MB/s
    /// (Ozone units: MB = 2^20 bytes). Over it, requests are rejected.
    #[arg(long, env = "DN_SIM_LIMIT_INGRESS", value_parser = parse_bandwidth)]
    pub limit_ingress: Option<f64>,

    /// Egress limit: bytes/s of response data for all clients together.
    #[arg(long, env = "DN_SIM_LIMIT_EGRESS", value_parser = parse_bandwidth)]
    pub limit_egress: Option<f64>,

    /// Operations limit: requests/s for all clients together.
    #[arg(long, env = "DN_SIM_LIMIT_OPS", value_parser = parse_bandwidth)]
    pub limit_ops: Option<f64>,

    /// gRPC status of a limit rejection: UNAVAILABLE or RESOURCE_EXHAUSTED.
    #[arg(long, env = "DN_SIM_LIMIT_STATUS", default_value = "UNAVAILABLE", value_parser = parse_limit_status)]
    pub limit_status: tonic::Code,

    /// grpc-retry-pushback-ms trailer on rejections: none, auto (time until the limit admits the
    /// request) or a fixed duration.
    #[arg(long, env = "DN_SIM_LIMIT_PUSHBACK", default_value = "none")]
    pub limit_pushback: Pushback,

    /// When a rejection comes: early (before the request body is read), after-body, after:DURATION.
    #[arg(long, env = "DN_SIM_LIMIT_REJECT_TIMING", default_value = "after-body")]
    pub limit_reject_timing: RejectTiming,

    /// Burst allowance of each limit, as time at its rate.
    #[arg(long, env = "DN_SIM_LIMIT_BURST", default_value = "100ms", value_parser = parse_duration)]
    pub limit_burst: Duration,

    /// HTTP listener for /prom, /metrics and /config (the DataNode's HTTP port), or `none`.
    #[arg(long, env = "DN_SIM_METRICS_LISTEN", default_value = "127.0.0.1:9882", value_parser = parse_optional_addr)]
    pub metrics_listen: OptionalAddr,

    /// Ratis client port (the DataNode's hdds.container.ratis.ipc.port), or `none`. Default:
    /// --listen's address with port 9858, or port 0 when --listen asks for port 0 (as Ozone's
    /// hdds.container.ratis.ipc.random.port goes with the client port's in tests).
    #[arg(long, env = "DN_SIM_RATIS_LISTEN", value_parser = parse_optional_addr)]
    pub ratis_listen: Option<OptionalAddr>,

    /// Ratis admin port (hdds.container.ratis.admin.port: groupList, groupInfo), or `none`;
    /// served only with the Ratis client port. Default: --listen's address with port 9857, or
    /// port 0 when --listen asks for port 0.
    #[arg(long, env = "DN_SIM_RATIS_ADMIN_LISTEN", value_parser = parse_optional_addr)]
    pub ratis_admin_listen: Option<OptionalAddr>,

    /// A pipeline (Raft group) the Ratis port hosts, one node each: its UUID, as SCM names
    /// pipelines. Repeatable.
    #[arg(
        long = "pipeline-id",
        env = "DN_SIM_PIPELINE_ID",
        value_name = "UUID",
        value_delimiter = ';',
        default_value = "00000000-0000-4000-8000-000000009858"
    )]
    pub pipeline_ids: Vec<uuid::Uuid>,

    /// Once the listeners are bound, write their addresses to PATH (`client 127.0.0.1:PORT`,
    /// then `admin 127.0.0.1:PORT` when --metrics-listen is not `none`, then `ratis
    /// 127.0.0.1:PORT` when --ratis-listen is not `none` and `ratis-admin 127.0.0.1:PORT` when
    /// --ratis-admin-listen is not either; with --datanodes N, identity 0's, then a line
    /// `datanode I UUID client=ADDR [ratis=ADDR] [ratis-admin=ADDR]` per identity), written to
    /// PATH.tmp and renamed, so a reader sees all of it or nothing: with `--listen 127.0.0.1:0` a
    /// script learns the port the kernel chose instead of guessing a free one.
    #[arg(long, env = "DN_SIM_READY_FILE", value_name = "PATH")]
    pub ready_file: Option<std::path::PathBuf>,
    /// Where block data goes: memory, discard (keep lengths and metadata, drop the bytes) or
    /// dir:PATH (block files in the DataNode's layout, PATH/CONTAINER_ID/chunks/LOCAL_ID.block).
    #[arg(long, env = "DN_SIM_STORE", default_value = "memory")]
    pub store: StoreKind,

    /// With --store dir:PATH, answer a WriteChunk only after its data is fdatasynced and a
    /// PutBlock only after its metadata commit is fsynced (hdds.container.chunk.write.sync=true).
    /// Refused with the other stores.
    #[arg(long, env = "DN_SIM_SYNC")]
    pub sync: bool,

    /// Block data the store may hold (memory or disk) before writes get DISK_OUT_OF_SPACE,
    /// e.g. 1GB, 512MB (powers of 1024).
    #[arg(long, env = "DN_SIM_CAPACITY", default_value = "1GB", value_parser = parse_size)]
    pub capacity: u64,

    /// Memory budget for requests in flight: bytes received and not yet answered plus answers not
    /// yet sent, all clients together (e.g. 1GB, 256MB). Beyond it a new request is refused with
    /// RESOURCE_EXHAUSTED before its body is read, and an answer waits up to 5s for room; a single
    /// larger request is served when nothing else is in flight.
    #[arg(long, env = "DN_SIM_MAX_INFLIGHT_BYTES", default_value = "1GB", value_parser = parse_positive_size)]
    pub max_inflight_bytes: u64,

    /// Block and container metadata the store may keep in memory (block entries, committed
    /// BlockData, container metadata) before writes get DISK_OUT_OF_SPACE, for every --store.
    /// Default: --capacity, at least 64MB.
    #[arg(long, env = "DN_SIM_METADATA_CAPACITY", value_parser = parse_positive_size)]
    pub metadata_capacity: Option<u64>,

    /// Verify the checksums of written chunks, as a DataNode with
    /// hdds.datanode.chunk.data.validation.check=true: a mismatch answers IO_EXCEPTION.
    #[arg(long, env = "DN_SIM_VERIFY_CHECKSUMS")]
    pub verify_checksums: bool,

    /// How long shutdown waits for in-flight requests (e.g. 10s).
    #[arg(long, env = "DN_SIM_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// The DataNode's UUID (`datanode.id`): EC requests (`replicaIndex` > 0) must carry it in
    /// `datanodeUuid`. Default: 00000000-0000-4000-8000-000000009859; with --scm, the one kept
    /// in PATH/datanode.id with --store dir:PATH (made on first start), else a new random one.
    #[arg(long, env = "DN_SIM_DATANODE_UUID", value_parser = parse_uuid)]
    pub datanode_uuid: Option<String>,

    /// Join a real Ozone cluster: register with the SCM whose DataNode port
    /// (ozone.scm.datanode.port) is HOST:PORT and heartbeat every hdds.heartbeat.interval, while
    /// serving clients as ever. Also -D ozone.scm.names=HOST[:PORT].
    #[arg(long, env = "DN_SIM_SCM", value_name = "HOST:PORT", value_parser = parse_host_port)]
    pub scm: Option<String>,

    /// The host name the node registers with SCM. Default: the machine's.
    #[arg(long, env = "DN_SIM_HOSTNAME", value_name = "NAME")]
    pub hostname: Option<String>,

    /// The Ozone release to answer as where releases differ: 2.0, 2.1 or 2.2.
    #[arg(long, env = "DN_SIM_OZONE_VERSION", default_value = "2.2")]
    pub ozone_version: crate::datanode::version::OzoneVersion,

    #[command(flatten)]
    pub connections: crate::net::connection::ConnectionArgs,

    /// TLS on the client port, as a DataNode with hdds.grpc.tls.enabled: the server's PEM
    /// certificate chain (its own certificate first). Needs --tls-key.
    #[arg(long, env = "DN_SIM_TLS_CERT", value_name = "PEM")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "DN_SIM_TLS_KEY", value_name = "PEM")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Mutual TLS: a PEM CA bundle; clients must present a certificate it signed. (A real
    /// DataNode, Ozone 2.0.0-2.2.0, asks for no client certificate.)
    #[arg(long, env = "DN_SIM_TLS_CLIENT_CA", value_name = "PEM")]
    pub tls_client_ca: Option<std::path::PathBuf>,

    /// How long a client may take to complete its TLS handshake before it is disconnected.
    #[arg(long, env = "DN_SIM_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// A profile of the DataNode's stages (TOML, format dn-sim-profile/1): the event loops' and
    /// the handlers' costs per message and byte, the CPU spent per request, a latency floor, and
    /// the machine's cores that size the event loop group. Default: none (no stage costs
    /// anything). See docs/dn-sim.md.
    #[arg(long, env = "DN_SIM_PROFILE", value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,

    /// DataNode identities served by this process, each with its own UUID (kept in
    /// PATH/dn-I/datanode.id with --store dir:PATH, else random), client and Ratis ports (port 0
    /// stays 0 for each; a fixed port P is P+I for identity I), store, capacity, handler pool and
    /// SCM endpoint; the other settings apply to each. One admin listener serves them all
    /// (/datanodes, /prom with a datanode label). Default 1: a single DataNode as ever.
    #[arg(long, env = "DN_SIM_DATANODES", allow_negative_numbers = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::net::fleet::MAX_DATANODES)))]
    pub datanodes: u32,

    /// Runtime worker threads (default: one per core).
    #[arg(long, env = "DN_SIM_THREADS", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
}

/// An Ozone configuration key dn-sim understands.
#[derive(Clone, Debug, PartialEq)]
pub enum OzoneKey {
    /// `hdds.datanode.handler.count`: accepted and checked, sizes nothing (see
    /// [`Args::config_with_env`]).
    HandlerCount(u32),
    ReadChunkThreadsPerVolume(u32),
    IpcPort(u16),
    /// `hdds.container.ratis.ipc.port`: the Ratis client port (with `--ratis-listen none`, none).
    RatisIpcPort(u16),
    /// `hdds.container.ratis.admin.port`: the Ratis admin port.
    RatisAdminPort(u16),
    ChunkDataValidation(bool),
    /// `hdds.container.chunk.write.sync` (= `--sync`).
    ChunkWriteSync(bool),
    /// `hdds.grpc.tls.enabled`: true needs `--tls-cert`/`--tls-key` (dn-sim has no SCM to get a
    /// certificate from); false with `--tls-cert` is a contradiction.
    GrpcTlsEnabled(bool),
    /// `hdds.grpc.tls.protocols` (Ozone 2.2.0): the TLS versions served.
    GrpcTlsProtocols(crate::net::tls::TlsVersions),
    /// `hdds.container.ratis.num.container.op.executors`: each group's apply threads.
    OpExecutors(u32),
    /// `hdds.container.ratis.num.write.chunk.threads.per.volume`: chunk writers per volume.
    WriteChunkThreadsPerVolume(u32),
    /// `hdds.container.ratis.log.appender.queue.num-elements`: checked; sizes nothing (a leader's
    /// queue of appends to its followers, and dn-sim's one-node groups have none).
    AppenderQueueElements(u32),
    /// `hdds.container.ratis.log.appender.queue.byte-limit`: raises the Ratis port's message
    /// limit when over 32 MiB (`XceiverServerRatis`).
    AppenderQueueByteLimit(u64),
    /// `ozone.scm.names`: the SCM to register with, `HOST` or `HOST:PORT` (one SCM).
    ScmNames(String),
    /// `ozone.scm.datanode.port`: SCM's DataNode port where `ozone.scm.names` gives none.
    ScmDatanodePort(u16),
    /// `hdds.heartbeat.interval`.
    HeartbeatInterval(Duration),
    /// `hdds.container.report.interval`: how often a heartbeat carries a full container report.
    ContainerReportInterval(Duration),
}

/// The Ozone keys dn-sim models.
const OZONE_KEYS: [&str; 17] = [
    "hdds.datanode.handler.count",
    "hdds.datanode.read.chunk.threads.per.volume",
    "hdds.container.ipc.port",
    "hdds.container.ratis.ipc.port",
    "hdds.container.ratis.admin.port",
    "hdds.datanode.chunk.data.validation.check",
    "hdds.container.chunk.write.sync",
    "hdds.grpc.tls.enabled",
    "hdds.grpc.tls.protocols",
    "hdds.container.ratis.num.container.op.executors",
    "hdds.container.ratis.num.write.chunk.threads.per.volume",
    "hdds.container.ratis.log.appender.queue.num-elements",
    "hdds.container.ratis.log.appender.queue.byte-limit",
    "ozone.scm.names",
    "ozone.scm.datanode.port",
    "hdds.heartbeat.interval",
    "hdds.container.report.interval",
];

/// Prefix of the Ozone images' convention: `OZONE-SITE.XML_<key>=<value>` sets `<key>` in
/// ozone-site.xml. dn-sim reads such variables as if each were given with `-D`.
pub const OZONE_SITE_ENV_PREFIX: &str = "OZONE-SITE.XML_";

/// Ozone keys set by `OZONE-SITE.XML_<key>=<value>` variables, and a warning naming the keys that
/// dn-sim does not model, which are ignored: a real Ozone compose file passes dozens of them. A
/// modelled key with a bad value is an error naming the variable.
pub fn ozone_site_keys(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<(Vec<OzoneKey>, Option<String>), String> {
    let (mut keys, mut ignored) = (Vec::new(), Vec::new());
    for (name, value) in vars {
        let Some(key) = name
            .to_str()
            .and_then(|n| n.strip_prefix(OZONE_SITE_ENV_PREFIX))
        else {
            continue;
        };
        if !OZONE_KEYS.contains(&key.trim()) {
            ignored.push(key.to_string());
            continue;
        }
        let value = value
            .into_string()
            .map_err(|_| format!("{OZONE_SITE_ENV_PREFIX}{key}: the value is not UTF-8"))?;
        keys.push(
            parse_ozone_key(&format!("{key}={value}"))
                .map_err(|e| format!("{OZONE_SITE_ENV_PREFIX}{key}: {e}"))?,
        );
    }
    ignored.sort();
    let warning = (!ignored.is_empty()).then(|| {
        format!(
            "ignoring {} {OZONE_SITE_ENV_PREFIX} key(s) dn-sim does not model: {}",
            ignored.len(),
            ignored.join(", ")
        )
    });
    Ok((keys, warning))
}

fn parse_ozone_key(text: &str) -> Result<OzoneKey, String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not KEY=VALUE"))?;
    let count = |v: &str| -> Result<u32, String> {
        match v.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!(
                "{key} must be a whole number of at least 1, not '{v}'"
            )),
        }
    };
    match key.trim() {
        "hdds.datanode.handler.count" => count(value).map(OzoneKey::HandlerCount),
        "hdds.datanode.read.chunk.threads.per.volume" => {
            count(value).map(OzoneKey::ReadChunkThreadsPerVolume)
        }
        "hdds.container.ipc.port" => value
            .trim()
            .parse::<u16>()
            .map(OzoneKey::IpcPort)
            .map_err(|_| format!("hdds.container.ipc.port must be a port number, not '{value}'")),
        "hdds.container.ratis.ipc.port" => value
            .trim()
            .parse::<u16>()
            .map(OzoneKey::RatisIpcPort)
            .map_err(|_| {
                format!("hdds.container.ratis.ipc.port must be a port number, not '{value}'")
            }),
        "hdds.container.ratis.admin.port" => value
            .trim()
            .parse::<u16>()
            .map(OzoneKey::RatisAdminPort)
            .map_err(|_| {
                format!("hdds.container.ratis.admin.port must be a port number, not '{value}'")
            }),
        "hdds.datanode.chunk.data.validation.check" => {
            boolean(key, value).map(OzoneKey::ChunkDataValidation)
        }
        "hdds.container.chunk.write.sync" => boolean(key, value).map(OzoneKey::ChunkWriteSync),
        "hdds.grpc.tls.enabled" => boolean(key, value).map(OzoneKey::GrpcTlsEnabled),
        "hdds.grpc.tls.protocols" => {
            crate::net::tls::TlsVersions::parse(value).map(OzoneKey::GrpcTlsProtocols)
        }
        "hdds.container.ratis.num.container.op.executors" => {
            count(value).map(OzoneKey::OpExecutors)
        }
        "hdds.container.ratis.num.write.chunk.threads.per.volume" => {
            count(value).map(OzoneKey::WriteChunkThreadsPerVolume)
        }
        "hdds.container.ratis.log.appender.queue.num-elements" => {
            count(value).map(OzoneKey::AppenderQueueElements)
        }
        "hdds.container.ratis.log.appender.queue.byte-limit" => {
            crate::sim::raft::appender_byte_limit(value).map(OzoneKey::AppenderQueueByteLimit)
        }
        "ozone.scm.names" => {
            let names: Vec<&str> = value.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
            match names.as_slice() {
                [one] => Ok(OzoneKey::ScmNames((*one).to_owned())),
                [] => Err("ozone.scm.names is empty".into()),
                _ => Err(format!("ozone.scm.names: dn-sim talks to one SCM, not '{value}'")),
            }
        }
        "ozone.scm.datanode.port" => value
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .map(OzoneKey::ScmDatanodePort)
            .ok_or_else(|| format!("ozone.scm.datanode.port must be a port number, not '{value}'")),
        "hdds.heartbeat.interval" => {
            hadoop_duration_ms(value).map(OzoneKey::HeartbeatInterval).ok_or_else(|| {
                format!("hdds.heartbeat.interval must be a positive duration (30s, 500ms), not '{value}'")
            })
        }
        "hdds.container.report.interval" => {
            hadoop_duration_ms(value).map(OzoneKey::ContainerReportInterval).ok_or_else(|| {
                format!("hdds.container.report.interval must be a positive duration (60m, 30s), not '{value}'")
            })
        }
        other => Err(format!(
            "unknown key '{other}' (known: {})",
            OZONE_KEYS.join(", ")
        )),
    }
}

/// Hadoop's Configuration.getBoolean: case-insensitive true/false.
fn boolean(key: &str, value: &str) -> Result<bool, String> {
    match value.trim() {
        v if v.eq_ignore_ascii_case("true") => Ok(true),
        v if v.eq_ignore_ascii_case("false") => Ok(false),
        v => Err(format!("{} must be true or false, not '{v}'", key.trim())),
    }
}

/// Hadoop's `getTimeDuration(key, default, MILLISECONDS)`: a bare number is milliseconds, else a
/// number with a unit (ms, s, m, h, d); positive.
fn hadoop_duration_ms(value: &str) -> Option<Duration> {
    let v = value.trim();
    let d = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        Duration::from_millis(v.parse().ok()?)
    } else {
        common::units::parse_duration(v).ok()?
    };
    (!d.is_zero()).then_some(d)
}

/// `HOST:PORT` with a port number (the host is resolved when connecting).
fn parse_host_port(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(s.to_owned())
        }
        _ => Err(format!("'{s}' is not HOST:PORT")),
    }
}

#[derive(Clone, Copy, Debug)]
pub struct OptionalAddr(pub Option<SocketAddr>);

fn parse_optional_addr(s: &str) -> Result<OptionalAddr, String> {
    if s == "none" {
        return Ok(OptionalAddr(None));
    }
    s.parse()
        .map(|a| OptionalAddr(Some(a)))
        .map_err(|_| format!("'{s}' is not HOST:PORT or none"))
}

/// A UUID in its canonical text form (8-4-4-4-12 hex digits), as a DataNode's `datanode.id` has.
fn parse_uuid(s: &str) -> Result<String, String> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip(lens)
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(format!("'{s}' is not a UUID (8-4-4-4-12 hex digits)"))
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    common::units::parse_size(s).map_err(|e| e.to_string())
}

fn parse_positive_size(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("must be greater than zero".into()),
        n => Ok(n),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    common::units::parse_duration(s).map_err(|e| e.to_string())
}

impl Args {
    /// Resolves flags, `-D` keys and `OZONE-SITE.XML_*` variables of the process environment into
    /// a [`Config`], warning once about Ozone keys it ignores. See [`Args::config_with_env`].
    pub fn config(&self) -> Result<Config, String> {
        let (config, warning) = self.config_with_env(std::env::vars_os())?;
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        Ok(config)
    }

    /// Resolves flags, `-D` keys and the `OZONE-SITE.XML_<key>` variables among `env` into a
    /// [`Config`]; `-D` wins over a variable setting the same key. The pool size comes from, in
    /// order: `--handler-count`; `hdds.datanode.read.chunk.threads.per.volume` × `--volumes` (what
    /// sizes the DataNode's gRPC path); 10 × `--volumes`. `hdds.datanode.handler.count` is checked
    /// but sizes nothing: in Ozone 2.0.0–2.2.0 it sizes only the Hadoop-RPC server of
    /// ReconfigureProtocol (and DiskBalancer), which dn-sim does not serve, and a real DataNode's
    /// echo throughput does not change with it (scripts/exp-real-handlers.sh). Also returns the
    /// warning about ignored variables, if any.
    pub fn config_with_env(
        &self,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<(Config, Option<String>), String> {
        let (env_keys, warning) = ozone_site_keys(env)?;
        let mut listen = self.listen;
        // A Ratis port not given follows --listen: its address, the DataNode's port, or port 0
        // with port 0.
        let beside_listen = |given: Option<OptionalAddr>, port: u16| match given {
            Some(OptionalAddr(addr)) => addr,
            None => Some(SocketAddr::new(
                self.listen.ip(),
                if self.listen.port() == 0 { 0 } else { port },
            )),
        };
        let mut ratis_listen = beside_listen(self.ratis_listen, common::ratis::DEFAULT_RATIS_PORT);
        let mut ratis_admin_listen = beside_listen(
            self.ratis_admin_listen,
            common::ratis::DEFAULT_RATIS_ADMIN_PORT,
        );
        let (mut per_volume, mut validation, mut write_sync) = (None, None, None);
        let (mut tls_enabled, mut tls_versions) = (None, crate::net::tls::TlsVersions::default());
        let mut op_executors = crate::sim::raft::DEFAULT_OP_EXECUTORS;
        let mut chunk_threads = crate::sim::raft::DEFAULT_WRITE_CHUNK_THREADS_PER_VOLUME;
        let mut appender_bytes = crate::sim::raft::DEFAULT_APPENDER_BYTE_LIMIT;
        let (mut scm_names, mut scm_port) = (None, common::scm::DEFAULT_DATANODE_PORT);
        let mut heartbeat = common::scm::DEFAULT_HEARTBEAT_INTERVAL;
        let mut container_reports = None;
        for key in env_keys.iter().chain(&self.define) {
            match key {
                OzoneKey::HandlerCount(_) => {}
                OzoneKey::ReadChunkThreadsPerVolume(n) => per_volume = Some(*n),
                OzoneKey::IpcPort(p) => listen.set_port(*p),
                OzoneKey::RatisIpcPort(p) => {
                    if let Some(addr) = ratis_listen.as_mut() {
                        addr.set_port(*p);
                    }
                }
                OzoneKey::RatisAdminPort(p) => {
                    if let Some(addr) = ratis_admin_listen.as_mut() {
                        addr.set_port(*p);
                    }
                }
                OzoneKey::ChunkDataValidation(on) => validation = Some(*on),
                OzoneKey::ChunkWriteSync(on) => write_sync = Some(*on),
                OzoneKey::GrpcTlsEnabled(on) => tls_enabled = Some(*on),
                OzoneKey::GrpcTlsProtocols(v) => tls_versions = *v,
                OzoneKey::OpExecutors(n) => op_executors = *n as usize,
                OzoneKey::WriteChunkThreadsPerVolume(n) => chunk_threads = *n as usize,
                OzoneKey::AppenderQueueElements(_) => {}
                OzoneKey::AppenderQueueByteLimit(n) => appender_bytes = *n,
                OzoneKey::ScmNames(n) => scm_names = Some(n.clone()),
                OzoneKey::ScmDatanodePort(p) => scm_port = *p,
                OzoneKey::HeartbeatInterval(d) => heartbeat = *d,
                OzoneKey::ContainerReportInterval(d) => container_reports = Some(*d),
            }
        }
        let scm_address = match (&self.scm, scm_names) {
            (Some(addr), _) => Some(addr.clone()),
            (None, Some(name)) => Some(if parse_host_port(&name).is_ok() {
                name
            } else {
                format!("{name}:{scm_port}")
            }),
            (None, None) => None,
        };
        let scm = match scm_address {
            Some(address) => {
                if self.ozone_version != crate::datanode::version::OzoneVersion::V2_2 {
                    return Err(format!(
                        "--scm: only --ozone-version 2.2 registers with SCM (its layout version {}), not {}",
                        common::scm::LAYOUT_VERSION,
                        self.ozone_version.as_str()
                    ));
                }
                let mut scm = crate::net::scm::ScmConfig::new(address);
                scm.heartbeat_interval = heartbeat;
                if let Some(d) = container_reports {
                    scm.container_report_interval = d;
                }
                if let Some(name) = &self.hostname {
                    scm.hostname = name.clone();
                }
                Some(scm)
            }
            None => None,
        };
        if self.datanodes > 1 && self.datanode_uuid.is_some() {
            return Err(format!(
                "--datanode-uuid names one DataNode; --datanodes {} gives each its own",
                self.datanodes
            ));
        }
        let datanode_uuid = match (&self.datanode_uuid, &scm, &self.store) {
            (Some(uuid), _, _) => uuid.clone(),
            // Each identity of `net::fleet` keeps its own, under PATH/dn-I.
            (None, _, _) if self.datanodes > 1 => {
                crate::net::server::DEFAULT_DATANODE_UUID.to_string()
            }
            (None, Some(_), StoreKind::Dir(path)) => crate::net::scm::persisted_uuid(path)
                .map_err(|e| {
                    format!(
                        "--store {}: cannot keep the DataNode's UUID: {e}",
                        self.store
                    )
                })?,
            (None, Some(_), _) => uuid::Uuid::new_v4().to_string(),
            (None, None, _) => crate::net::server::DEFAULT_DATANODE_UUID.to_string(),
        };
        let sync = self.sync || write_sync == Some(true);
        if sync && !matches!(self.store, StoreKind::Dir(_)) {
            return Err(format!(
                "--sync (hdds.container.chunk.write.sync) needs --store dir:PATH, not --store {}",
                self.store
            ));
        }
        let tls = self.tls(tls_enabled, tls_versions)?;
        let handler_count = self
            .handler_count
            .unwrap_or_else(|| per_volume.unwrap_or(10).saturating_mul(self.volumes))
            as usize;
        let delays = DelayModel::from_assignments(self.delays.iter().cloned())
            .map_err(|e| format!("--delay: {e}"))?;
        let faults = FaultPlan::from_assignments(self.faults.iter().cloned())
            .map_err(|e| format!("--fault: {e}"))?;
        let profile = self.profile()?;
        let config = Config {
            profile,
            listen,
            containers: match (&self.containers, &scm) {
                (Some(ids), _) => ids.clone(),
                (None, Some(_)) => "none".parse().expect("none is a container list"),
                (None, None) => ContainerIds::single(1),
            },
            store: self.store.clone(),
            capacity: self.capacity,
            sync,
            verify_checksums: self.verify_checksums || validation == Some(true),
            shutdown_grace: self.shutdown_grace,
            handler_count,
            max_queue: self.max_queue.map(|n| n as usize),
            live: LiveSettings { delays, faults },
            seed: self.seed,
            disk_bandwidth: self.disk_bandwidth,
            disk_latency: self.disk_latency.clone(),
            raft: crate::sim::raft::RaftConfig {
                log_bandwidth: self.raft_log_bandwidth,
                log_latency: self.raft_log_latency.clone(),
                op_executors,
                chunk_writers: chunk_threads.saturating_mul(self.volumes as usize),
                message_size_max: crate::sim::raft::message_size_max(appender_bytes),
            },
            metrics_listen: self.metrics_listen.0,
            ratis_admin_listen: ratis_listen.and(ratis_admin_listen),
            ratis_listen,
            pipelines: self.pipeline_ids.clone(),
            limit_rates: LimitRates {
                ingress: self.limit_ingress,
                egress: self.limit_egress,
                ops: self.limit_ops,
            },
            limit_policy: LimitPolicy {
                status: self.limit_status,
                pushback: self.limit_pushback,
                timing: self.limit_reject_timing,
                burst: self.limit_burst,
            },
            datanode_uuid,
            scm,
            volumes: self.volumes,
            ozone_version: self.ozone_version,
            connections: self.connections.limits(),
            tls,
            max_inflight_bytes: self.max_inflight_bytes,
            metadata_capacity: self.metadata_capacity,
        };
        Ok((config, warning))
    }

    /// [`Args::config`] for `--datanodes` identities (`net::fleet`).
    pub fn fleet_config(&self) -> Result<crate::net::fleet::FleetConfig, String> {
        crate::net::fleet::FleetConfig::new(self.config()?, self.datanodes)
    }

    /// `--profile`: the file read and checked, fitted on the release dn-sim answers as.
    fn profile(&self) -> Result<Option<crate::sim::profile::Profile>, String> {
        let Some(path) = &self.profile else {
            return Ok(None);
        };
        let profile =
            crate::sim::profile::Profile::load(path).map_err(|e| format!("--profile {e}"))?;
        if profile.release != self.ozone_version {
            return Err(format!(
                "--profile {}: fitted on Ozone {}, but dn-sim answers as {} (--ozone-version)",
                path.display(),
                profile.release_text,
                self.ozone_version
            ));
        }
        Ok(Some(profile))
    }

    /// The TLS settings from `--tls-*` and `hdds.grpc.tls.*`; errors name the flag or key.
    fn tls(
        &self,
        enabled: Option<bool>,
        versions: crate::net::tls::TlsVersions,
    ) -> Result<Option<crate::net::tls::ServerTls>, String> {
        let files = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (Some(_), None) => return Err("--tls-cert needs --tls-key (its private key)".into()),
            (None, Some(_)) => return Err("--tls-key needs --tls-cert (its certificate)".into()),
            (None, None) => None,
        };
        if self.tls_handshake_timeout.is_zero() {
            return Err("--tls-handshake-timeout must be greater than zero".into());
        }
        match (enabled, files) {
            (Some(true), None) => Err("hdds.grpc.tls.enabled=true needs --tls-cert and \
                 --tls-key (PEM files: dn-sim has no SCM to get a certificate from)"
                .into()),
            (Some(false), Some(_)) => Err("--tls-cert contradicts hdds.grpc.tls.enabled=false; \
                 drop one of them"
                .into()),
            (_, None) if self.tls_client_ca.is_some() => {
                Err("--tls-client-ca needs --tls-cert and --tls-key".into())
            }
            (_, None) => Ok(None),
            (_, Some((cert, key))) => Ok(Some(crate::net::tls::ServerTls {
                client_ca: self.tls_client_ca.clone(),
                versions,
                handshake_timeout: self.tls_handshake_timeout,
                ..crate::net::tls::ServerTls::new(cert, key)
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<Config, String> {
        config_env(args, &[]).map(|(config, _)| config)
    }

    fn config_env(args: &[&str], env: &[(&str, &str)]) -> Result<(Config, Option<String>), String> {
        let mut argv = vec!["dn-sim"];
        argv.extend_from_slice(args);
        let env = env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        Args::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .config_with_env(env)
    }

    fn cli(args: &[&str]) -> Result<Command, String> {
        let mut argv = vec!["dn-sim"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .map(Cli::into_command)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn budgets_are_positive_sizes() {
        let c = config(&[]).unwrap();
        assert_eq!(c.max_inflight_bytes, 1 << 30);
        assert_eq!(c.metadata_capacity, None);
        let c = config(&["--max-inflight-bytes", "64MB", "--metadata-capacity", "2MB"]).unwrap();
        assert_eq!(
            (c.max_inflight_bytes, c.metadata_capacity),
            (64 << 20, Some(2 << 20))
        );
        for flag in ["--max-inflight-bytes", "--metadata-capacity"] {
            for bad in ["0", "lots"] {
                let e = config(&[flag, bad]).unwrap_err();
                assert!(e.contains(flag), "{e}");
            }
        }
    }

    #[test]
    fn ozone_site_variables_set_keys_as_dash_d_and_dash_d_wins() {
        let key = "OZONE-SITE.XML_hdds.datanode.read.chunk.threads.per.volume";
        let env = [
            (key, "7"),
            ("OZONE-SITE.XML_hdds.container.ipc.port", "19859"),
            ("PATH", "/usr/bin"),
        ];
        let (c, warning) = config_env(&[], &env).unwrap();
        assert_eq!((c.handler_count, c.listen.port()), (7, 19859));
        assert_eq!(warning, None);
        let (c, _) = config_env(
            &["-D", "hdds.datanode.read.chunk.threads.per.volume=3"],
            &env,
        )
        .unwrap();
        assert_eq!((c.handler_count, c.listen.port()), (3, 19859));
        let (c, _) = config_env(&["--handler-count", "5"], &env).unwrap();
        assert_eq!(c.handler_count, 5);
    }

    #[test]
    fn handler_count_key_does_not_size_the_pool_as_on_a_real_datanode() {
        // Ozone 2.0.0-2.2.0: hdds.datanode.handler.count sizes the ReconfigureProtocol RPC
        // server only; the gRPC pool is read.chunk.threads.per.volume (10) x volumes.
        let (c, _) = config_env(&["-D", "hdds.datanode.handler.count=1"], &[]).unwrap();
        assert_eq!(c.handler_count, 10);
        let (c, _) = config_env(
            &["-D", "hdds.datanode.handler.count=1", "--volumes", "3"],
            &[],
        )
        .unwrap();
        assert_eq!(c.handler_count, 30);
        // Still checked: a bad value is an error naming the key.
        let err = config(&["-D", "hdds.datanode.handler.count=0"]).unwrap_err();
        assert!(err.contains("hdds.datanode.handler.count"), "{err}");
    }

    #[test]
    fn scm_comes_from_the_flag_or_ozone_scm_names() {
        let c = config(&[]).unwrap();
        assert!(c.scm.is_none());
        assert_eq!(c.datanode_uuid, crate::net::server::DEFAULT_DATANODE_UUID);
        assert_eq!(c.containers.to_string(), "1");

        let c = config(&[
            "--scm",
            "127.0.0.1:9861",
            "-D",
            "hdds.heartbeat.interval=2s",
        ])
        .unwrap();
        let scm = c.scm.unwrap();
        assert_eq!(scm.address, "127.0.0.1:9861");
        assert_eq!(scm.heartbeat_interval, Duration::from_secs(2));
        // A node joining a cluster starts without containers and with a UUID of its own.
        assert_eq!(c.containers.to_string(), "none");
        assert_ne!(c.datanode_uuid, crate::net::server::DEFAULT_DATANODE_UUID);

        let env = [
            ("OZONE-SITE.XML_ozone.scm.names", "scm.example"),
            ("OZONE-SITE.XML_ozone.scm.datanode.port", "19861"),
            ("OZONE-SITE.XML_hdds.heartbeat.interval", "500"),
        ];
        let (c, warning) = config_env(&[], &env).unwrap();
        assert!(warning.is_none());
        let scm = c.scm.unwrap();
        assert_eq!(scm.address, "scm.example:19861");
        // A bare number is milliseconds, as Hadoop's getTimeDuration(…, MILLISECONDS).
        assert_eq!(scm.heartbeat_interval, Duration::from_millis(500));
        let (c, _) = config_env(&["--scm", "a:1"], &env).unwrap();
        assert_eq!(c.scm.unwrap().address, "a:1");
        let (c, _) = config_env(&[], &[("OZONE-SITE.XML_ozone.scm.names", "s:7")]).unwrap();
        assert_eq!(c.scm.unwrap().address, "s:7");
    }

    #[test]
    fn scm_settings_are_checked() {
        for (args, needle) in [
            (&["--scm", "nohost"][..], "--scm"),
            (&["--scm", "h:0"][..], "--scm"),
            (&["-D", "ozone.scm.names=a,b"][..], "one SCM"),
            (
                &["-D", "hdds.heartbeat.interval=0"][..],
                "hdds.heartbeat.interval",
            ),
            (
                &["--scm", "h:1", "--ozone-version", "2.1"][..],
                "--ozone-version 2.2",
            ),
        ] {
            let err = config(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn scm_uuid_is_kept_in_the_store_dir() {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("dir:{}", dir.path().display());
        let first = config(&["--scm", "h:1", "--store", &store])
            .unwrap()
            .datanode_uuid;
        let again = config(&["--scm", "h:1", "--store", &store])
            .unwrap()
            .datanode_uuid;
        assert_eq!(first, again);
        let text = std::fs::read_to_string(dir.path().join("datanode.id")).unwrap();
        assert_eq!(text, format!("uuid: {first}\n"));
        // An explicit UUID wins.
        let given = "12345678-1234-1234-1234-123456789abc";
        let c = config(&["--scm", "h:1", "--store", &store, "--datanode-uuid", given]).unwrap();
        assert_eq!(c.datanode_uuid, given);
    }

    #[test]
    fn unknown_ozone_site_variables_are_ignored_with_one_warning() {
        let env = [
            ("OZONE-SITE.XML_ozone.recon.address", "recon"),
            (
                "OZONE-SITE.XML_hdds.datanode.read.chunk.threads.per.volume",
                "4",
            ),
            ("OZONE-SITE.XML_ozone.om.address", "om"),
        ];
        let (c, warning) = config_env(&[], &env).unwrap();
        assert_eq!(c.handler_count, 4);
        let warning = warning.expect("a warning");
        assert_eq!(warning.lines().count(), 1);
        assert!(
            warning.contains("ozone.om.address, ozone.recon.address"),
            "{warning}"
        );
        // On the command line an unknown key stays an error.
        let err = config(&["-D", "ozone.recon.address=recon"]).unwrap_err();
        assert!(err.contains("unknown key 'ozone.recon.address'"), "{err}");
    }

    #[test]
    fn bad_value_of_a_modelled_ozone_site_variable_is_an_error_naming_it() {
        let env = [("OZONE-SITE.XML_hdds.datanode.handler.count", "many")];
        let err = config_env(&[], &env).unwrap_err();
        assert!(
            err.starts_with("OZONE-SITE.XML_hdds.datanode.handler.count: "),
            "{err}"
        );
    }

    #[test]
    fn serving_is_the_default_and_healthcheck_a_subcommand() {
        let Ok(Command::Serve(args)) = cli(&["--listen", "127.0.0.1:1234", "--handler-count", "2"])
        else {
            panic!("no subcommand serves");
        };
        assert_eq!((args.listen.port(), args.handler_count), (1234, Some(2)));
        assert!(matches!(
            cli(&["serve", "--handler-count", "2"]),
            Ok(Command::Serve(_))
        ));
        let Ok(Command::Healthcheck(h)) =
            cli(&["healthcheck", "--addr", "dn:9859", "--timeout", "1s"])
        else {
            panic!("healthcheck subcommand");
        };
        assert_eq!(
            (h.addr.as_str(), h.timeout),
            ("dn:9859", Duration::from_secs(1))
        );
        for bad in [
            vec!["healthcheck", "--listen", "127.0.0.1:1"],
            vec!["--listen", "127.0.0.1:1", "healthcheck"],
            vec!["healthcheck", "--timeout", "soon"],
            vec!["nonsense"],
        ] {
            assert!(cli(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn repeatable_flags_split_on_semicolons() {
        let c = config(&[
            "--delay",
            "echo=1ms;write_chunk=uniform:1ms..3ms",
            "--fault",
            "echo=drop:0.5",
        ])
        .unwrap();
        for t in [common::proto::Type::Echo, common::proto::Type::WriteChunk] {
            assert!(c.live.delays.spec_for(t).is_some(), "{t:?}");
        }
        let args = Args::try_parse_from([
            "dn-sim",
            "--fault",
            "echo=drop:0.1;all=grpc:UNAVAILABLE:0.01",
        ])
        .unwrap();
        assert_eq!(args.faults.len(), 2);
    }

    #[test]
    fn the_ratis_path_s_threads_log_device_and_message_limit_from_flags_and_keys() {
        let c = config(&[]).unwrap();
        assert_eq!(c.raft.op_executors, 10);
        assert_eq!(c.raft.chunk_writers, 10);
        assert_eq!(c.raft.message_size_max, common::ratis::MAX_MESSAGE_SIZE);
        assert!(c.raft.log_bandwidth.is_none() && c.raft.log_latency.is_none());
        let c = config(&[
            "--volumes",
            "3",
            "--raft-log-bandwidth",
            "100MB/s",
            "--raft-log-latency",
            "2ms",
            "-D",
            "hdds.container.ratis.num.container.op.executors=4",
            "-D",
            "hdds.container.ratis.num.write.chunk.threads.per.volume=2",
            "-D",
            "hdds.container.ratis.log.appender.queue.num-elements=1",
            "-D",
            "hdds.container.ratis.log.appender.queue.byte-limit=48MB",
        ])
        .unwrap();
        assert_eq!(c.raft.op_executors, 4);
        assert_eq!(c.raft.chunk_writers, 6);
        assert_eq!(c.raft.message_size_max, 49 << 20);
        assert_eq!(c.raft.log_bandwidth, Some(100.0 * 1024.0 * 1024.0));
        assert!(c.raft.log_latency.is_some());
        // The DataNode refuses a byte limit that does not fit a 64MB segment; so does dn-sim.
        let err = config(&[
            "-D",
            "hdds.container.ratis.log.appender.queue.byte-limit=64MB",
        ])
        .unwrap_err();
        assert!(err.contains("hdds.container.ratis.segment.size"), "{err}");
        let err = config(&["-D", "hdds.container.ratis.num.container.op.executors=0"]).unwrap_err();
        assert!(err.contains("num.container.op.executors"), "{err}");
    }

    #[test]
    fn pool_size_from_flags_and_ozone_keys() {
        assert_eq!(config(&[]).unwrap().handler_count, 10);
        assert_eq!(config(&["--volumes", "2"]).unwrap().handler_count, 20);
        let c = config(&[
            "-D",
            "hdds.datanode.read.chunk.threads.per.volume=3",
            "--volumes",
            "4",
        ])
        .unwrap();
        assert_eq!(c.handler_count, 12);
        let c = config(&[
            "--handler-count",
            "2",
            "-D",
            "hdds.datanode.handler.count=4",
        ])
        .unwrap();
        assert_eq!(c.handler_count, 2);
        let c = config(&["-D", "hdds.container.ipc.port=19859"]).unwrap();
        assert_eq!(c.listen.port(), 19859);
        let c = config(&["-D", "hdds.container.ratis.ipc.port=19858"]).unwrap();
        assert_eq!(c.ratis_listen.map(|a| a.port()), Some(19858));
        // The Ratis port follows --listen: its address, and port 0 with port 0.
        let c = config(&["--listen", "127.0.0.1:0"]).unwrap();
        assert_eq!(c.ratis_listen, Some("127.0.0.1:0".parse().unwrap()));
        let c = config(&["--listen", "127.0.0.1:19859"]).unwrap();
        assert_eq!(c.ratis_listen, Some("127.0.0.1:9858".parse().unwrap()));
        let c = config(&[
            "--ratis-listen",
            "none",
            "-D",
            "hdds.container.ratis.ipc.port=19858",
        ])
        .unwrap();
        assert_eq!(c.ratis_listen, None);
        // ... and the admin port with it (none without the client port).
        assert_eq!(c.ratis_admin_listen, None);
        let c = config(&["--listen", "127.0.0.1:0"]).unwrap();
        assert_eq!(c.ratis_admin_listen, Some("127.0.0.1:0".parse().unwrap()));
        let c = config(&["--listen", "127.0.0.1:19859"]).unwrap();
        assert_eq!(
            c.ratis_admin_listen,
            Some("127.0.0.1:9857".parse().unwrap())
        );
        let c = config(&["-D", "hdds.container.ratis.admin.port=19857"]).unwrap();
        assert_eq!(c.ratis_admin_listen.map(|a| a.port()), Some(19857));
        let c = config(&["--ratis-admin-listen", "none"]).unwrap();
        assert_eq!(c.ratis_admin_listen, None);
        assert!(c.ratis_listen.is_some());
    }

    #[test]
    fn bad_keys_and_values_are_errors() {
        for bad in [
            vec!["-D", "hdds.datanode.handler.cont=4"],
            vec!["-D", "hdds.datanode.handler.count=0"],
            vec!["-D", "hdds.container.ratis.ipc.port=none"],
            vec!["-D", "novalue"],
            vec!["--handler-count", "0"],
            vec!["--handler-count", "-3"],
            vec!["--delay", "echo=fast"],
            vec!["--fault", "echo=drop:2"],
            vec!["--disk-bandwidth", "0"],
            vec!["--metrics-listen", "nowhere"],
        ] {
            assert!(config(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sync_is_a_flag_or_the_datanode_key_and_needs_a_dir_store() {
        assert!(!config(&["--store", "dir:/tmp/x"]).unwrap().sync);
        assert!(config(&["--store", "dir:/tmp/x", "--sync"]).unwrap().sync);
        let key = [
            "-D",
            "hdds.container.chunk.write.sync=TRUE",
            "--store",
            "dir:/tmp/x",
        ];
        assert!(config(&key).unwrap().sync);
        let off = [
            "-D",
            "hdds.container.chunk.write.sync=false",
            "--store",
            "dir:/tmp/x",
        ];
        assert!(!config(&off).unwrap().sync);
        for store in ["memory", "discard"] {
            let err = config(&["--store", store, "--sync"]).unwrap_err();
            assert!(err.starts_with("--sync "), "{err}");
            let key = [
                "--store",
                store,
                "-D",
                "hdds.container.chunk.write.sync=true",
            ];
            assert!(config(&key).unwrap_err().contains("needs --store dir:PATH"));
        }
        assert!(config(&["-D", "hdds.container.chunk.write.sync=yes"]).is_err());
    }
}

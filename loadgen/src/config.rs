//! The resolved run configuration: only decided values, no raw flags. The engine and the reports
//! read this, never the command line.

use crate::UsageError;
use crate::cli::{CommonArgs, EchoArgs, Format, ReportArgs, StreamMode};
use crate::engine::schedule::{Plan, RateSchedule};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// freon's default number of requests.
pub const DEFAULT_REQUESTS: u64 = 1000;

#[derive(Clone, Debug)]
pub enum Target {
    /// An embedded dn-sim started by loadgen on 127.0.0.1.
    Embedded { threads: usize },
    /// A DataNode or dn-sim at this address (HOST:PORT).
    Remote(String),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StopAfter {
    Requests(u64),
    Elapsed(Duration),
}

pub use crate::workload::echo::EchoConfig;

#[derive(Clone, Debug)]
pub enum WorkloadConfig {
    Echo(EchoConfig),
}

impl WorkloadConfig {
    /// Freon's timer name for the workload.
    pub fn timer_name(&self) -> &'static str {
        match self {
            WorkloadConfig::Echo(_) => "rpc-payload",
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadConfig::Echo(_) => "echo",
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
}

impl ReportConfig {
    pub fn from_args(args: &ReportArgs) -> Self {
        ReportConfig {
            format: args.format,
            output: args.output.clone(),
            percentiles: args.percentiles.0.clone(),
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
    /// Retries and client throttling (`crate::resilience`).
    pub resilience: crate::resilience::ResilienceConfig,
}

impl RunConfig {
    fn from_common(
        c: &CommonArgs,
        report: &ReportArgs,
        workload: WorkloadConfig,
    ) -> Result<Self, UsageError> {
        let schedule = match (c.rate, &c.rate_schedule) {
            (Some(r), _) => Some(RateSchedule::Constant(r)),
            (None, Some(s)) => Some(s.clone()),
            (None, None) => None,
        };
        let stop = match (c.duration, c.number_of_tests) {
            (Some(d), _) => StopAfter::Elapsed(d),
            (None, Some(n)) => StopAfter::Requests(n),
            (None, None) => match schedule.as_ref().and_then(RateSchedule::natural_length) {
                Some(d) => StopAfter::Elapsed(d),
                None => StopAfter::Requests(DEFAULT_REQUESTS),
            },
        };
        let streams = match c.stream_mode {
            StreamMode::PerRequest if c.pipeline > 1 => {
                return Err(UsageError(
                    "--pipeline needs --stream-mode persistent (a per-request stream carries one request)".into(),
                ));
            }
            StreamMode::PerRequest => Streams::PerRequest,
            StreamMode::Persistent => Streams::Persistent {
                pipeline: c.pipeline as usize,
            },
        };
        let resilience = crate::resilience::ResilienceConfig::from_args(
            &c.resilience,
            crate::throttle::AimdUnit::Ops,
        );
        if c.stream_mode == StreamMode::Persistent && resilience.active() {
            return Err(UsageError(
                "--retry and --client-throttle need --stream-mode per-request (the default)".into(),
            ));
        }
        Ok(RunConfig {
            load: match schedule {
                Some(s) => Load::Open(Plan::new(s)),
                None => Load::Closed,
            },
            streams,
            runtime_threads: c.runtime_threads.map(|n| n as usize),
            warmup: c.warmup.unwrap_or_default(),
            report: ReportConfig::from_args(report),
            live: LiveConfig {
                interval: c.report_interval,
                histogram_log: c.histogram_log.clone(),
                metrics_listen: c.metrics_listen,
            },
            target: match &c.target {
                Some(t) => Target::Remote(t.clone()),
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
        })
    }

    /// Requests in flight at most: workers × pipeline depth.
    pub fn max_in_flight(&self) -> usize {
        match self.streams {
            Streams::PerRequest => self.threads,
            Streams::Persistent { pipeline } => self.threads * pipeline,
        }
    }

    pub fn echo(args: &EchoArgs) -> Result<Self, UsageError> {
        let echo = EchoConfig {
            payload_req_bytes: (args.payload_req * 1024) as usize,
            // parse_payload_kb bounds the size to 32 MiB, so it fits an int32.
            payload_resp_bytes: (args.payload_resp * 1024) as i32,
            sleep_time_ms: args.sleep_time_ms,
            read_only: args.read_only,
        };
        Self::from_common(&args.common, &args.report, WorkloadConfig::Echo(echo))
    }
}

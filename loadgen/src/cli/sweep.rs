//! `loadgen sweep`'s flags: the parameter matrix and the chart and table columns.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Example: loadgen sweep --param delay=0,1ms,2ms --param handler_count=1,2,4,8 \
    --out results/handlers -- echo --clients 32 -t 32 --duration 5s\n\
    dn-sim parameters: handler_count, delay (of echoes, with write of WriteChunks; 0 = none), \
    max_queue (a number or none).\n\
    loadgen parameters: threads, clients, rate (requests/s; write: application writes/s); echo: \
    payload_req, payload_resp (KB), pipeline, sleep_time_ms; write: write_size, chunk_size \
    (e.g. 64KB,1MB), checksum (CRC32, CRC32C, NONE, ...), checksum_mode (incremental, at-flush)."
)]
pub struct SweepArgs {
    /// The DataNode or dn-sim client port; without it (and without --target in the workload's
    /// flags) an embedded dn-sim with an admin listener is started.
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,

    /// dn-sim's HTTP admin port (its --metrics-listen), needed for dn-sim parameters with
    /// --target.
    #[arg(long, value_name = "HOST:PORT")]
    pub admin: Option<String>,

    /// A parameter and its values, NAME=V1,V2,… (repeatable). Every combination is run; the
    /// first --param changes slowest.
    #[arg(long = "param", value_name = "NAME=V1,V2,...", required = true, value_parser = parse_param)]
    pub params: Vec<Param>,

    /// Writes PREFIX.csv, PREFIX.json and PREFIX.svg.
    #[arg(long, value_name = "PREFIX", default_value = "sweep")]
    pub out: PathBuf,

    /// Chart title.
    #[arg(long)]
    pub title: Option<String>,

    /// The chart's x parameter [default: the last --param with several values; the other
    /// parameters with several values make the lines].
    #[arg(long, value_name = "NAME")]
    pub x: Option<String>,

    /// The chart's y column, e.g. throughput_calls_per_s, p99_ms, rx_mb_per_s.
    #[arg(long, value_name = "COL", default_value = "throughput_calls_per_s", value_parser = parse_metric)]
    pub y: String,

    /// Logarithmic x axis (base 2: ticks at 1, 2, 4, 8 …).
    #[arg(long)]
    pub log_x: bool,

    /// Logarithmic y axis.
    #[arg(long)]
    pub log_y: bool,

    /// Columns of the printed markdown table, comma separated [default: the parameters, then
    /// throughput, p50, p99, p99.9, MB/s, errors, and Little's law when there is a delay].
    #[arg(long, value_name = "COL[,COL]", value_delimiter = ',')]
    pub table: Vec<String>,

    /// Pause after changing dn-sim's settings, before a cell starts.
    #[arg(long, default_value = "200ms", value_parser = crate::cli::parse_duration)]
    pub settle: Duration,

    /// The workload and its flags, after `--`: `-- echo --clients 32 -t 32 --duration 5s` or
    /// `-- write -t 4 --duration 5s`.
    #[arg(last = true, required = true, value_name = "WORKLOAD FLAGS")]
    pub workload: Vec<String>,
}

/// What a sweep parameter sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamName {
    HandlerCount,
    Delay,
    MaxQueue,
    Threads,
    Clients,
    PayloadReq,
    PayloadResp,
    Rate,
    Pipeline,
    SleepTimeMs,
    WriteSize,
    ChunkSize,
    Checksum,
    ChecksumMode,
}

impl ParamName {
    pub(crate) const ALL: [(&'static str, ParamName); 14] = [
        ("handler_count", ParamName::HandlerCount),
        ("delay", ParamName::Delay),
        ("max_queue", ParamName::MaxQueue),
        ("threads", ParamName::Threads),
        ("clients", ParamName::Clients),
        ("payload_req", ParamName::PayloadReq),
        ("payload_resp", ParamName::PayloadResp),
        ("rate", ParamName::Rate),
        ("pipeline", ParamName::Pipeline),
        ("sleep_time_ms", ParamName::SleepTimeMs),
        ("write_size", ParamName::WriteSize),
        ("chunk_size", ParamName::ChunkSize),
        ("checksum", ParamName::Checksum),
        ("checksum_mode", ParamName::ChecksumMode),
    ];

    /// The CSV column, with its unit.
    pub fn column(self) -> &'static str {
        match self {
            ParamName::HandlerCount => "handler_count",
            ParamName::Delay => "delay_ms",
            ParamName::MaxQueue => "max_queue",
            ParamName::Threads => "threads",
            ParamName::Clients => "clients",
            ParamName::PayloadReq => "payload_req_kb",
            ParamName::PayloadResp => "payload_resp_kb",
            ParamName::Rate => "rate_per_s",
            ParamName::Pipeline => "pipeline",
            ParamName::SleepTimeMs => "sleep_time_ms",
            ParamName::WriteSize => "write_size_bytes",
            ParamName::ChunkSize => "chunk_size_bytes",
            ParamName::Checksum => "checksum",
            ParamName::ChecksumMode => "checksum_mode",
        }
    }

    /// The workloads the parameter applies to (`None`: all).
    pub(crate) fn only_for(self) -> Option<&'static str> {
        match self {
            ParamName::PayloadReq
            | ParamName::PayloadResp
            | ParamName::Pipeline
            | ParamName::SleepTimeMs => Some("echo"),
            ParamName::WriteSize
            | ParamName::ChunkSize
            | ParamName::Checksum
            | ParamName::ChecksumMode => Some("write"),
            _ => None,
        }
    }

    pub(crate) fn is_dn_sim(self) -> bool {
        matches!(
            self,
            ParamName::HandlerCount | ParamName::Delay | ParamName::MaxQueue
        )
    }
}

/// One `--param`: a name and its values (as given, and as the CSV number).
#[derive(Clone, Debug)]
pub struct Param {
    pub name: ParamName,
    pub values: Vec<(String, f64)>,
}

pub(crate) fn parse_param(s: &str) -> Result<Param, String> {
    let (name, values) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=V1,V2,..."))?;
    let name = ParamName::ALL
        .iter()
        .find(|(n, _)| *n == name.trim())
        .map(|(_, p)| *p)
        .ok_or_else(|| {
            let names: Vec<_> = ParamName::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown parameter '{name}' (known: {})", names.join(", "))
        })?;
    let values = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| param_value(name, v).map(|n| (v.to_string(), n)))
        .collect::<Result<Vec<_>, _>>()?;
    if values.is_empty() {
        return Err(format!("'{s}': give at least one value"));
    }
    Ok(Param { name, values })
}

/// Validates a value and turns it into the number written in the CSV.
fn param_value(name: ParamName, v: &str) -> Result<f64, String> {
    let whole = |lo: u64, hi: u64| -> Result<f64, String> {
        match v.parse::<u64>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(n as f64),
            _ => Err(format!(
                "{}: '{v}' is not a whole number from {lo} to {hi}",
                name.column()
            )),
        }
    };
    match name {
        ParamName::HandlerCount => whole(1, 100_000),
        ParamName::Delay => delay_ms(v),
        ParamName::MaxQueue if v == "none" => Ok(f64::NAN),
        ParamName::MaxQueue => whole(0, u32::MAX as u64),
        ParamName::Threads => whole(1, 100_000),
        ParamName::Clients => whole(1, 10_000),
        ParamName::PayloadReq | ParamName::PayloadResp => {
            whole(0, (common::MAX_MESSAGE_SIZE / 1024) as u64)
        }
        ParamName::Rate => match common::units::parse_rate(v) {
            Ok(r) if r > 0.0 => Ok(r),
            _ => Err(format!("rate: '{v}' is not a rate above 0")),
        },
        ParamName::Pipeline => whole(1, 4096),
        ParamName::SleepTimeMs => whole(0, i32::MAX as u64),
        ParamName::WriteSize | ParamName::ChunkSize => match common::units::parse_size(v) {
            Ok(n) if n > 0 && n <= common::MAX_MESSAGE_SIZE as u64 => Ok(n as f64),
            _ => Err(format!(
                "{}: '{v}' is not a size from 1B to 32MB",
                name.column()
            )),
        },
        // Not numbers: the CSV holds the name.
        ParamName::Checksum => crate::workload::block_writer::checksum_type_of(v)
            .map(|_| f64::NAN)
            .map_err(|e| format!("checksum: {e}")),
        ParamName::ChecksumMode => v
            .parse::<crate::workload::block_writer::ChecksumMode>()
            .map(|_| f64::NAN)
            .map_err(|e| format!("checksum_mode: {e}")),
    }
}

fn delay_ms(v: &str) -> Result<f64, String> {
    if v.trim_end_matches("ms").trim_end_matches('s') == "0" {
        return Ok(0.0);
    }
    common::units::parse_duration(v)
        .map(|d| d.as_secs_f64() * 1000.0)
        .map_err(|e| format!("delay: '{v}': {e}"))
}

pub(crate) const METRICS: [(&str, &str); 15] = [
    ("outstanding", "outstanding"),
    ("requests", "requests"),
    ("errors", "errors"),
    ("throughput_calls_per_s", "throughput (calls/s)"),
    ("successes_per_s", "successes (calls/s)"),
    ("p50_ms", "p50 (ms)"),
    ("p90_ms", "p90 (ms)"),
    ("p99_ms", "p99 (ms)"),
    ("p99_9_ms", "p99.9 (ms)"),
    ("max_ms", "max (ms)"),
    ("latency", "latency from"),
    ("rx_mb_per_s", "received (MB/s)"),
    ("tx_mb_per_s", "sent (MB/s)"),
    ("littles_law_calls_per_s", "Little's law (calls/s)"),
    ("measured_over_predicted_pct", "measured / predicted (%)"),
];

fn parse_metric(s: &str) -> Result<String, String> {
    if METRICS.iter().any(|(c, _)| *c == s) {
        Ok(s.to_string())
    } else {
        let names: Vec<_> = METRICS.iter().map(|(c, _)| *c).collect();
        Err(format!(
            "unknown column '{s}' (columns: {})",
            names.join(", ")
        ))
    }
}

/// A column's heading in the markdown table and its axis label.
pub fn heading(col: &str) -> String {
    if let Some((_, h)) = METRICS.iter().find(|(c, _)| *c == col) {
        return h.to_string();
    }
    match col {
        "handler_count" => "handlers",
        "delay_ms" => "echo delay (ms)",
        "max_queue" => "max queue",
        "threads" => "threads",
        "clients" => "clients (connections)",
        "payload_req_kb" => "request payload (KB)",
        "payload_resp_kb" => "response payload (KB)",
        "rate_per_s" => "rate (requests/s)",
        "pipeline" => "pipeline depth",
        "sleep_time_ms" => "sleep time (ms)",
        "write_size_bytes" => "write size (bytes)",
        "chunk_size_bytes" => "chunk size (bytes)",
        "checksum" => "checksum",
        "checksum_mode" => "checksum mode",
        other => other,
    }
    .to_string()
}

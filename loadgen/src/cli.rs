//! Command-line flags. Flags follow freon's names and defaults (`ozone freon dn-echo`), plus what
//! freon lacks (`--target`, `--datanode-uuid`, …). Each flag's parser validates its value, so a
//! bad value is reported with the flag's name; [`crate::config`] turns the flags into a
//! [`crate::config::RunConfig`] the engine uses.

use clap::{ArgAction, Args, Parser, Subcommand};
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
    Echo(EchoArgs),
}

/// Options every workload shares: where to send, how much, how concurrently.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// DataNode client port to load, HOST:PORT (a real DataNode or a dn-sim). Without it an
    /// embedded dn-sim is started on 127.0.0.1.
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,

    /// Number of requests to send (ignored with --duration).
    #[arg(short = 'n', long = "number-of-tests", allow_negative_numbers = true, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub number_of_tests: u64,

    /// Worker threads, each with one request outstanding.
    #[arg(short = 't', long = "threads", allow_negative_numbers = true, visible_alias = "thread", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub threads: u32,

    /// Run for this long instead of a number of requests (e.g. 30s, 5m, 1h, 7d).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

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

    /// Runtime threads of the embedded dn-sim (only without --target).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub embedded_threads: u32,
}

#[derive(Args, Debug, Clone)]
pub struct EchoArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Request payload in KB (1 KB = 1024 bytes); the DataNode ignores it.
    #[arg(long, allow_negative_numbers = true, default_value = "0", value_name = "KB", value_parser = parse_payload_kb)]
    pub payload_req: u64,

    /// Response payload in KB (1 KB = 1024 bytes), sent as payloadSizeResp.
    #[arg(long, allow_negative_numbers = true, default_value = "0", value_name = "KB", value_parser = parse_payload_kb)]
    pub payload_resp: u64,

    /// Milliseconds the DataNode sleeps on its handler before answering (sleepTimeMs).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..))]
    pub sleep_time_ms: i32,

    /// Send read-only echoes. A non-read-only echo runs the DataNode's write-path checks and must
    /// be asked for explicitly (--read-only=false).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub read_only: bool,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = common::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
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

//! `loadgen calibrate`'s flags.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
#[command(after_help = "Example (dn-sim, pools set through its admin port):\n  \
    loadgen calibrate --target 127.0.0.1:9859 --admin 127.0.0.1:9860 --pool 10 --pools 2,10 \
    --out my.toml\n\
    Example (a real DataNode, restarted with each pool): measure each with --pool P \
    --cells-out cells-P.json, then fit all: loadgen calibrate --with cells-2.json --with \
    cells-10.json --out my.toml")]
pub struct CalibrateArgs {
    /// The DataNode (or dn-sim) client port to measure. Without it, --with files are fitted
    /// and nothing is measured.
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,

    /// The target's gRPC handler pool as configured (a real DataNode:
    /// hdds.datanode.read.chunk.threads.per.volume × volumes; dn-sim: --handler-count).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pool: u32,

    /// dn-sim's admin port (its --metrics-listen): with --pools, the saturation cells are run
    /// at each pool, set through PUT /config.
    #[arg(long, value_name = "HOST:PORT")]
    pub admin: Option<String>,

    /// Pools to run the saturation cells at (needs --admin), e.g. 2,10.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pools: Vec<u32>,

    /// A dn-sim without a profile on this machine: the cells at one request in flight run there
    /// too, and its cost per byte (the client's and the transport's) is taken off the target's.
    #[arg(long, value_name = "HOST:PORT")]
    pub baseline: Option<String>,

    /// The baseline's handler pool (dn-sim's --handler-count; its default is 10): the echo
    /// sleep cell compares how long a sleep holds a handler there and on the target.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub baseline_pool: u32,

    /// Runs of each cell: the cell is the run with the median calls/s (a shared machine's
    /// DataNode varies by 10-30 % between runs of one cell).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub rounds: u32,

    /// Rounds of each of the profile's checks on an embedded dn-sim that runs it (with --out):
    /// the loops' and the handler's costs scaled until the loaded 0 B echoes they were priced
    /// on run there at the target's calls/s; the handler's CPU per response byte beyond the
    /// target's 1 MiB echo latency moved to the background; an echo payload's lock priced on
    /// the loaded echo it came from. Each keeps the round nearest the target. 0: no check.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub check_rounds: u32,

    /// Run the checks on dn-sim processes started with this command (the program, then
    /// arguments of your own, split on spaces), e.g. "target/release/dn-sim
    /// --http2-stream-window 1MB"; loadgen adds --listen 127.0.0.1:0, --metrics-listen none,
    /// --ratis-listen none, --store discard, --profile, --handler-count, --containers and
    /// --ready-file: the checks run on the binary and flags you will run. Default: a dn-sim
    /// embedded in this process (none in a loadgen built without it).
    #[arg(long, value_name = "COMMAND")]
    pub check_on: Option<String>,

    /// Cells measured earlier (a --cells-out file), e.g. at other pools of a restarted
    /// DataNode; fitted with this run's (repeatable). A cell measured more than once (the
    /// same pool on several starts of a DataNode) is fitted as the geometric mean of its
    /// measurements: a real DataNode's JVM starts differ from each other.
    #[arg(long = "with", value_name = "FILE")]
    pub with: Vec<PathBuf>,

    /// Write the cells this run measured (JSON), for a later --with.
    #[arg(long, value_name = "FILE")]
    pub cells_out: Option<PathBuf>,

    /// Write the fitted profile (TOML, dn-sim-profile/1, kind "measured"). Without it the fit
    /// is only printed.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// The Ozone release of the target, written to the profile.
    #[arg(long, default_value = "2.2.0", value_parser = parse_release)]
    pub release: String,

    /// The target machine's processors (default: this machine's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cores: Option<u32>,

    /// Measured time of each cell.
    #[arg(long, default_value = "5s", value_parser = crate::cli::parse_duration)]
    pub duration: Duration,

    /// Unmeasured load before each cell.
    #[arg(long, default_value = "2s", value_parser = crate::cli::parse_duration)]
    pub warmup: Duration,

    /// Unmeasured 1 MiB echoes sent to --target at up to 8 x 8 before its first cell, after ten
    /// times as many 0 B echoes, so that a JVM DataNode's JIT has compiled the echo payload's
    /// path: a real Ozone 2.2.0 DataNode's 1 MiB echo at one request in flight went from 42 to
    /// 80 calls/s over its first 3000 or so. 0: none (the target was warmed already).
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    pub warm_up_calls: u32,

    /// Connections of the most concurrent saturation cell.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub clients: u32,

    /// Workers (requests in flight, over all connections) of the most concurrent saturation
    /// cell.
    #[arg(short = 't', long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub threads: u32,

    /// The container the echoes name and the writes go to (it must exist on a real DataNode).
    #[arg(long, default_value_t = 1)]
    pub container_id: i64,
}

fn parse_release(s: &str) -> Result<String, String> {
    match s {
        "2.0.0" | "2.1.0" | "2.2.0" => Ok(s.to_string()),
        _ => Err(format!("'{s}' is not 2.0.0, 2.1.0 or 2.2.0")),
    }
}

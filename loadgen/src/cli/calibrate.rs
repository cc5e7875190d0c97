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

    /// The container the echoes name and, without --write-containers, the writes go to (it
    /// must exist on a real DataNode).
    #[arg(long, default_value_t = 1)]
    pub container_id: i64,

    /// Containers for the writes, FIRST-LAST: each write run (a round of a write cell, on the
    /// target or the baseline) goes to the next, from FIRST again after LAST. A real DataNode
    /// asks SCM to close a container once it holds its size, and writes to it then fail with
    /// CLOSED_CONTAINER_IO: give at least as many as the write runs (10 × --rounds a pool with
    /// --baseline, 5 × --rounds without), all existing on the target and the baseline.
    #[arg(long, value_name = "FIRST-LAST", value_parser = parse_container_range)]
    pub write_containers: Option<ContainerRange>,

    /// Write runs so far (the next of --write-containers).
    #[arg(skip)]
    pub write_runs: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// An inclusive range of container IDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerRange {
    pub first: i64,
    pub last: i64,
}

impl CalibrateArgs {
    /// The container the next write run goes to.
    pub fn next_write_container(&self) -> i64 {
        match self.write_containers {
            None => self.container_id,
            Some(ContainerRange { first, last }) => {
                let n = self
                    .write_runs
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let len = (last - first + 1) as u64;
                first + (n % len) as i64
            }
        }
    }
}

fn parse_container_range(s: &str) -> Result<ContainerRange, String> {
    let (a, b) = s
        .split_once('-')
        .ok_or_else(|| format!("'{s}' is not FIRST-LAST, e.g. 2-33"))?;
    let id = |t: &str| {
        t.trim()
            .parse::<i64>()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("'{t}' is not a container ID (1 or more)"))
    };
    let (first, last) = (id(a)?, id(b)?);
    if first > last {
        return Err(format!("'{s}': FIRST is above LAST"));
    }
    Ok(ContainerRange { first, last })
}

fn parse_release(s: &str) -> Result<String, String> {
    match s {
        "2.0.0" | "2.1.0" | "2.2.0" => Ok(s.to_string()),
        _ => Err(format!("'{s}' is not 2.0.0, 2.1.0 or 2.2.0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CalibrateArgs,
    }

    #[test]
    fn write_runs_take_the_next_container_of_the_range_and_wrap() {
        let cli = Cli::try_parse_from(["calibrate", "--write-containers", "2-4"]).unwrap();
        let ids: Vec<i64> = (0..5).map(|_| cli.args.next_write_container()).collect();
        assert_eq!(ids, [2, 3, 4, 2, 3]);
        // A clone (the checks' copy of the flags) shares the count.
        assert_eq!(cli.args.clone().next_write_container(), 4);
        let plain = Cli::try_parse_from(["calibrate", "--container-id", "7"]).unwrap();
        assert_eq!(plain.args.next_write_container(), 7);
        assert_eq!(plain.args.next_write_container(), 7);
    }

    #[test]
    fn a_bad_container_range_is_refused_naming_the_flag() {
        for bad in ["5-2", "0-3", "3", "a-4", "2-"] {
            let err = Cli::try_parse_from(["calibrate", "--write-containers", bad])
                .err()
                .unwrap_or_else(|| panic!("{bad} accepted"))
                .to_string();
            assert!(err.contains("--write-containers"), "{bad}: {err}");
        }
    }
}

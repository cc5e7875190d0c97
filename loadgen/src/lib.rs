//! loadgen: a load generator for Apache Ozone DataNodes' client port
//! (`XceiverClientProtocolService.send`), in the spirit of `ozone freon dn-echo`.
//!
//! Flow: [`cli`] flags → [`config::RunConfig`] → [`connection`]s → [`engine`] workers driving a
//! [`workload`] → [`outcome::WorkerStats`] → [`results::Results`] → [`report`]s. [`merge`]
//! combines the JSON results of several runs. `main.rs` only parses and prints; tests call
//! [`run`] in-process. The modules' layers are in ARCHITECTURE.md.

pub mod calibrate;
pub mod cli;
pub mod config;
pub mod connection;
pub mod cpu;
pub mod embedded;
pub mod engine;
pub mod error;
pub mod manifest;
pub mod merge;
pub mod outcome;
pub mod plot;
pub mod report;
pub mod results;
pub mod retry;
pub mod run;
pub mod schedule;
pub mod shard;
pub mod sweep;
pub mod throttle;
pub mod workload;

pub use error::Error;
pub use run::{Summary, ToolOutput, run_config};

use crate::config::RunConfig;

/// Runs the command on a runtime of its own and returns what it measured.
pub fn run(cli: cli::Cli) -> Result<Summary, Error> {
    match &cli.command {
        cli::Command::Echo(args) => run_config(&RunConfig::echo(args)?),
        cli::Command::Write(args) => run_config(&RunConfig::write(args)?),
        cli::Command::Read(args) => run_config(&RunConfig::read(args)?),
        cli::Command::Merge(args) => merge::run(args),
        cli::Command::Plot(_) | cli::Command::Sweep(_) | cli::Command::Calibrate(_) => {
            Err(Error::Usage(
                "plot and sweep write files rather than one run's report: use loadgen::run_tool"
                    .into(),
            ))
        }
    }
}

/// Runs `plot` or `sweep`; `None` for the commands [`run`] handles.
pub fn run_tool(cli: &cli::Cli) -> Option<Result<ToolOutput, Error>> {
    match &cli.command {
        cli::Command::Plot(args) => Some(plot::run(args)),
        cli::Command::Sweep(args) => Some(sweep::run(args)),
        cli::Command::Calibrate(args) => Some(calibrate::run(args)),
        _ => None,
    }
}

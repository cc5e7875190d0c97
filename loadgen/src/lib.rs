//! loadgen: a load generator for Apache Ozone DataNodes' client port
//! (`XceiverClientProtocolService.send`), in the spirit of `ozone freon dn-echo`.
//!
//! Flow: [`cli`] flags → [`config::RunConfig`] → [`connection`]s → [`engine`] workers driving a
//! [`workload`] → [`outcome::WorkerStats`] → [`report`]s. `main.rs` only parses and prints;
//! tests call [`run`] in-process.

pub mod cli;
pub mod config;
pub mod connection;
pub mod engine;
pub mod outcome;
pub mod report;
pub mod retry;
pub mod throttle;
pub mod workload;

use crate::config::{RunConfig, StopAfter, Target, WorkloadConfig};
use crate::engine::{Progress, RunOutput};
use crate::workload::Workload;
use std::io::IsTerminal;
use std::sync::Arc;

/// Why loadgen could not run: bad input or an unreachable target (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A finished run and its rendered report.
pub struct Summary {
    pub header: String,
    pub report: String,
    pub output: RunOutput,
}

impl Summary {
    pub fn failures(&self) -> u64 {
        self.output.stats.failures()
    }

    pub fn successes(&self) -> u64 {
        self.output.stats.success.count()
    }
}

/// Runs the command on a runtime of its own and returns what it measured.
pub fn run(cli: cli::Cli) -> Result<Summary, UsageError> {
    let config = match &cli.command {
        cli::Command::Echo(args) => RunConfig::echo(args),
    };
    run_config(&config)
}

pub fn run_config(config: &RunConfig) -> Result<Summary, UsageError> {
    if let WorkloadConfig::Echo(echo) = &config.workload
        && !echo.read_only
    {
        eprintln!(
            "loadgen: warning: --read-only=false sends non-read-only echoes; a real DataNode runs write-path checks for them"
        );
    }
    // The embedded dn-sim runs on threads of its own; it stops when `_embedded` is dropped.
    let (_embedded, uri, target_desc) = match &config.target {
        Target::Embedded { threads } => {
            let server = dn_sim::EmbeddedServer::start(dn_sim::Config::loopback(), *threads)
                .map_err(|e| UsageError(format!("cannot start the embedded dn-sim: {e:#}")))?;
            let addr = server.local_addr();
            let desc =
                format!("{addr} (embedded dn-sim started by loadgen, {threads} runtime thread(s))");
            (Some(server), format!("http://{addr}"), desc)
        }
        Target::Remote(t) => {
            let uri = connection::target_uri(t).map_err(|e| UsageError(e.to_string()))?;
            (None, uri, t.clone())
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("loadgen")
        .build()
        .map_err(|e| UsageError(format!("cannot start the runtime: {e}")))?;
    let output = runtime.block_on(async {
        let clients = connection::connect(&uri, config.clients, config.connect_timeout)
            .await
            .map_err(|e| UsageError(e.to_string()))?;
        let workload: Arc<dyn Workload> = match &config.workload {
            WorkloadConfig::Echo(echo) => Arc::new(workload::echo::Echo::new(
                echo,
                config.container_id,
                &config.datanode_uuid,
            )),
        };
        let interactive = std::io::stderr().is_terminal();
        let mut progress = |p: &Progress| print_progress(p, interactive);
        Ok::<_, UsageError>(engine::run(config, clients, workload, &mut progress).await)
    })?;
    let header = header(config, &target_desc);
    let mut output = output;
    let mut report = report::freon::render(config.workload.timer_name(), &mut output);
    report.push_str(&report::freon::failure_lines(config, &output));
    Ok(Summary {
        header,
        report,
        output,
    })
}

fn header(config: &RunConfig, target: &str) -> String {
    let amount = match config.stop {
        StopAfter::Requests(n) => format!("{n} requests"),
        StopAfter::Elapsed(d) => format!("for {}", humantime::format_duration(d)),
    };
    format!(
        "loadgen {}: {amount}, {} thread(s) over {} connection(s), a new stream per request\ntarget: {target}\n",
        config.workload.name(),
        config.threads,
        config.clients
    )
}

/// freon's progress line, on stderr so that stdout holds only the report.
fn print_progress(p: &Progress, interactive: bool) {
    let line = match p.stop {
        StopAfter::Requests(n) => format!(
            "Progress: {:.2} % ({} out of {})",
            p.completed as f64 * 100.0 / n as f64,
            p.completed,
            n
        ),
        StopAfter::Elapsed(d) => format!(
            "Progress: {:.2} % ({} s of {} s, {} calls)",
            p.elapsed.as_secs_f64() * 100.0 / d.as_secs_f64(),
            p.elapsed.as_secs(),
            d.as_secs(),
            p.completed
        ),
    };
    if interactive {
        eprint!("\r{line}   ");
    } else {
        eprintln!("{line}");
    }
}

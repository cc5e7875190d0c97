//! loadgen: a load generator for Apache Ozone DataNodes' client port
//! (`XceiverClientProtocolService.send`), in the spirit of `ozone freon dn-echo`.
//!
//! Flow: [`cli`] flags → [`config::RunConfig`] → [`connection`]s → [`engine`] workers driving a
//! [`workload`] → [`outcome::WorkerStats`] → [`results::Results`] → [`report`]s. [`merge`]
//! combines the JSON results of several runs. `main.rs` only parses and prints; tests call
//! [`run`] in-process.

pub mod blockio;
pub mod cli;
pub mod config;
pub mod connection;
pub mod cpu;
pub mod engine;
pub mod merge;
pub mod outcome;
pub mod plot;
pub mod report;
pub mod resilience;
pub mod results;
pub mod retry;
pub mod sweep;
pub mod throttle;
pub mod workload;

use crate::cli::Format;
use crate::config::{ReportConfig, RunConfig, StopAfter, Streams, Target, WorkloadConfig};
use crate::engine::live::IntervalSink;
use crate::engine::{Observers, TotalsSink};
use crate::report::progress::ProgressDisplay;
use crate::results::{Results, RunDescription};
use crate::workload::Workload;
use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::sync::Arc;

/// Why loadgen could not run: bad input or an unreachable target (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A finished run (or merge) and its rendered reports.
pub struct Summary {
    /// What was run, against what.
    pub header: String,
    /// The report in the chosen `--format`.
    pub report: String,
    /// The text report (the same as `report` with `--format text`).
    pub text: String,
    pub results: Results,
    /// Where the report was written (`--output`).
    pub written_to: Option<std::path::PathBuf>,
    format: Format,
}

impl Summary {
    pub fn failures(&self) -> u64 {
        self.results.failures()
    }

    pub fn successes(&self) -> u64 {
        self.results.successes()
    }

    /// What `main` prints on stdout: the report, unless it went to a file; then, for json and
    /// csv, the text report for the person watching.
    pub fn stdout(&self) -> String {
        match (&self.written_to, self.format) {
            (None, Format::Text) => format!("{}\n{}", self.header, self.report),
            (None, _) => self.report.clone(),
            (Some(_), Format::Text) => String::new(),
            (Some(_), _) => format!("{}\n{}", self.header, self.text),
        }
    }
}

/// Runs the command on a runtime of its own and returns what it measured.
pub fn run(cli: cli::Cli) -> Result<Summary, UsageError> {
    match &cli.command {
        cli::Command::Echo(args) => run_config(&RunConfig::echo(args)?),
        cli::Command::Merge(args) => merge::run(args),
        cli::Command::Write(_) | cli::Command::Read(_) => Err(UsageError(
            "write and read run through loadgen::blockio::run".into(),
        )),
        cli::Command::Plot(_) | cli::Command::Sweep(_) => Err(UsageError(
            "plot and sweep write files rather than one run's report: use loadgen::run_tool".into(),
        )),
    }
}

/// What `plot` and `sweep` print on stdout (they write their files themselves).
pub struct ToolOutput {
    pub stdout: String,
}

/// Runs `plot` or `sweep`; `None` for the commands [`run`] handles.
pub fn run_tool(cli: &cli::Cli) -> Option<Result<ToolOutput, UsageError>> {
    match &cli.command {
        cli::Command::Plot(args) => Some(plot::run(args)),
        cli::Command::Sweep(args) => Some(sweep::run(args)),
        _ => None,
    }
}

/// The report file (`--output`), opened before the run so that a bad path fails at once. A csv
/// file is appended to (one row per run, for sweeps); json and text replace the file.
pub(crate) struct OutputFile {
    file: File,
    path: std::path::PathBuf,
    /// csv: the file already has rows; append without a header.
    pub(crate) has_rows: bool,
}

impl OutputFile {
    pub(crate) fn open(
        path: Option<&std::path::PathBuf>,
        format: Format,
    ) -> Result<Option<Self>, UsageError> {
        let Some(path) = path else {
            return Ok(None);
        };
        let err = |e: std::io::Error| UsageError(format!("--output {}: {e}", path.display()));
        let (file, has_rows) = if format == Format::Csv {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(err)?;
            let len = file.metadata().map_err(err)?.len();
            (file, len > 0)
        } else {
            (File::create(path).map_err(err)?, false)
        };
        Ok(Some(Self {
            file,
            path: path.clone(),
            has_rows,
        }))
    }

    /// Writes the rendered report; returns where it went.
    pub(crate) fn write(mut self, rendered: &str) -> Result<std::path::PathBuf, UsageError> {
        self.file
            .write_all(rendered.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(|e| UsageError(format!("--output {}: {e}", self.path.display())))?;
        Ok(self.path)
    }
}

fn open_output(report: &ReportConfig) -> Result<Option<OutputFile>, UsageError> {
    OutputFile::open(report.output.as_ref(), report.format)
}

/// Renders `results` and writes them to `--output` if asked.
pub(crate) fn finish(
    header: String,
    results: Results,
    report: &ReportConfig,
    output: Option<OutputFile>,
) -> Result<Summary, UsageError> {
    let text = report::text::render(&results, &report.percentiles);
    let rendered = match report.format {
        Format::Text => text.clone(),
        Format::Json => report::json::render(&results, &report.percentiles),
        Format::Csv => report::csv::render_with(
            &results,
            !output.as_ref().is_some_and(|o| o.has_rows),
            &report.percentiles,
        ),
    };
    let written_to = output.map(|out| out.write(&rendered)).transpose()?;
    Ok(Summary {
        header,
        report: rendered,
        text,
        results,
        written_to,
        format: report.format,
    })
}

pub fn run_config(config: &RunConfig) -> Result<Summary, UsageError> {
    if let WorkloadConfig::Echo(echo) = &config.workload
        && !echo.read_only
    {
        eprintln!(
            "loadgen: warning: --read-only=false sends non-read-only echoes; a real DataNode runs write-path checks for them"
        );
    }
    let output = open_output(&config.report)?;
    // The embedded dn-sim runs on threads of its own; it stops when `_embedded` is dropped.
    let (_embedded, uri, target_desc, address) = match &config.target {
        Target::Embedded { threads } => {
            let server = dn_sim::EmbeddedServer::start(dn_sim::Config::loopback(), *threads)
                .map_err(|e| UsageError(format!("cannot start the embedded dn-sim: {e:#}")))?;
            let addr = server.local_addr();
            let desc =
                format!("{addr} (embedded dn-sim started by loadgen, {threads} runtime thread(s))");
            (
                Some(server),
                format!("http://{addr}"),
                desc,
                addr.to_string(),
            )
        }
        Target::Remote(t) => {
            let uri = connection::target_uri(t).map_err(|e| UsageError(e.to_string()))?;
            (None, uri, t.clone(), t.clone())
        }
    };
    // The coordinator's runtime; connections and workers run on I/O threads of their own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| UsageError(format!("cannot start the runtime: {e}")))?;
    let mut output_run = runtime.block_on(async {
        let workload: Arc<dyn Workload> = match &config.workload {
            WorkloadConfig::Echo(echo) => Arc::new(workload::echo::Echo::new(
                echo,
                config.container_id,
                &config.datanode_uuid,
            )),
        };
        let mut metrics = match config.live.metrics_listen {
            Some(addr) => {
                let (snapshot, local) = report::prometheus::serve(addr).await.map_err(|e| {
                    UsageError(format!("--metrics-listen {addr}: cannot listen: {e}"))
                })?;
                eprintln!("loadgen: metrics on http://{local}/metrics");
                Some(snapshot)
            }
            None => None,
        };
        let mut intervals: Vec<Box<dyn IntervalSink + Send>> = Vec::new();
        if let Some(path) = &config.live.histogram_log {
            let start = std::time::SystemTime::now() + config.warmup;
            let log = report::histogram_log::HistogramLog::create(path, start)
                .map_err(|e| UsageError(format!("--histogram-log {}: {e}", path.display())))?;
            intervals.push(Box::new(log));
        }
        let mut display = ProgressDisplay::new(std::io::stderr().is_terminal(), config.stop);
        let mut progress = |p: &engine::Progress| display.update(p);
        let observers = Observers {
            progress: &mut progress,
            intervals,
            totals: metrics.as_mut().map(|m| m as &mut dyn TotalsSink),
        };
        let out = engine::run(config, &uri, workload, observers).await;
        display.finish();
        out.map_err(UsageError)
    })?;
    let embedded = matches!(config.target, Target::Embedded { .. });
    let results = Results::from_run(
        RunDescription::of(config, &address),
        &mut output_run,
        embedded,
    );
    finish(
        header(config, &target_desc),
        results,
        &config.report,
        output,
    )
}

fn header(config: &RunConfig, target: &str) -> String {
    let amount = match config.stop {
        StopAfter::Requests(n) => format!("{n} requests"),
        StopAfter::Elapsed(d) => format!("for {}", humantime::format_duration(d)),
    };
    let streams = match config.streams {
        Streams::PerRequest => "a new stream per request".to_string(),
        Streams::Persistent { pipeline } => {
            format!("one stream per thread with {pipeline} request(s) in flight")
        }
    };
    let load = match &config.load {
        config::Load::Closed => "closed loop".to_string(),
        config::Load::Open(plan) => format!("open loop at {}", plan.schedule()),
    };
    let warmup = if config.warmup.is_zero() {
        String::new()
    } else {
        format!(
            " after a {} warm-up",
            humantime::format_duration(config.warmup)
        )
    };
    format!(
        "loadgen {}: {amount}{warmup}, {} thread(s) over {} connection(s), {streams}, {load}\ntarget: {target}\n",
        config.workload.name(),
        config.threads,
        config.clients
    )
}

//! One run: its target (an embedded dn-sim or a remote DataNode), its engine phases (one for
//! echo; `write --then-read` and a `read` without a manifest have two), its results and their
//! rendered reports.

use crate::cli::Format;
use crate::config::{ReportConfig, RunConfig, StopAfter, Streams, Target, WorkloadConfig};
use crate::connection;
use crate::embedded;
use crate::engine::live::IntervalSink;
use crate::engine::{Observers, TotalsSink};
use crate::error::{Error, OutputFailure};
use crate::report;
use crate::report::progress::ProgressDisplay;
use crate::results;
use crate::results::{Results, RunDescription};
use crate::workload;
use crate::workload::Workload;
use crate::workload::block::{BlockRead, BlockSink, BlockWrite};
use crate::{config, engine, manifest};
use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

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
    /// The outputs that could not be written at the end (`--output`, `--manifest`): the run
    /// exits 1 and `stdout` is the report as without `--output`.
    pub unwritten: Vec<OutputFailure>,
    /// `--result-markers`: the JSON result between marker lines, printed after the rest.
    pub markers: Option<String>,
    format: Format,
}

impl Summary {
    pub fn failures(&self) -> u64 {
        self.results.failures()
    }

    pub fn successes(&self) -> u64 {
        self.results.successes()
    }

    /// 0 when every request succeeded and every output was written, else 1.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.failures() > 0 || !self.unwritten.is_empty())
    }

    /// What `main` prints on stdout: the report, unless it went to a file; then, for json and
    /// csv, the text report for the person watching.
    pub fn stdout(&self) -> String {
        let mut out = match (&self.written_to, self.format) {
            (None, Format::Text) => format!("{}\n{}", self.header, self.report),
            (None, _) => self.report.clone(),
            (Some(_), Format::Text) => String::new(),
            (Some(_), _) => format!("{}\n{}", self.header, self.text),
        };
        if let Some(m) = &self.markers {
            out.push_str(m);
        }
        out
    }
}

/// What `plot` and `sweep` print on stdout (they write their files themselves).
pub struct ToolOutput {
    pub stdout: String,
}

/// The report file (`--output`). Checked before the run, so that a path that cannot be written
/// fails at once (exit code 2, naming the flag), but neither created nor truncated then: a run
/// that does not start leaves an earlier report as it was. Written at the end; a csv file is
/// appended to (one row per run, for sweeps), json and text replace the file.
pub(crate) struct OutputFile {
    path: std::path::PathBuf,
    format: Format,
}

/// Whether `path` (given by `flag`) can be written, without creating or changing it: an
/// existing file must open for writing, a new one needs a writable directory.
pub(crate) fn check_writable(flag: &str, path: &std::path::Path) -> Result<(), Error> {
    let err = |e: std::io::Error| Error::Usage(format!("{flag} {}: {e}", path.display()));
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(err(std::io::Error::from_raw_os_error(libc::EISDIR))),
        // Opening for append neither truncates nor writes.
        Ok(_) => OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(err),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            let m = std::fs::metadata(dir).map_err(err)?;
            if !m.is_dir() {
                return Err(err(std::io::Error::from_raw_os_error(libc::ENOTDIR)));
            }
            use std::os::unix::ffi::OsStrExt;
            let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
                .map_err(|e| err(std::io::Error::other(e)))?;
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
                return Err(err(std::io::Error::last_os_error()));
            }
            Ok(())
        }
        Err(e) => Err(err(e)),
    }
}

impl OutputFile {
    pub(crate) fn check(
        path: Option<&std::path::PathBuf>,
        format: Format,
    ) -> Result<Option<Self>, Error> {
        let Some(path) = path else {
            return Ok(None);
        };
        check_writable("--output", path)?;
        Ok(Some(Self {
            path: path.clone(),
            format,
        }))
    }

    /// csv: the file already has rows, so the row goes without a header.
    fn has_rows(&self) -> bool {
        self.format == Format::Csv && std::fs::metadata(&self.path).is_ok_and(|m| m.len() > 0)
    }

    /// Writes the rendered report.
    fn write(&self, rendered: &str) -> std::io::Result<()> {
        let mut file = if self.format == Format::Csv {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?
        } else {
            File::create(&self.path)?
        };
        file.write_all(rendered.as_bytes())?;
        file.flush()
    }
}

pub(crate) fn open_output(report: &ReportConfig) -> Result<Option<OutputFile>, Error> {
    OutputFile::check(report.output.as_ref(), report.format)
}

/// Renders `results` and writes them to `--output` if asked. A report that cannot be written
/// joins the outputs of the run that could not be (`unwritten`) in [`Summary::unwritten`].
pub(crate) fn finish(
    header: String,
    results: Results,
    report: &ReportConfig,
    output: Option<OutputFile>,
    mut unwritten: Vec<OutputFailure>,
) -> Result<Summary, Error> {
    let text = report::text::render(&results, &report.percentiles);
    let rendered = match report.format {
        Format::Text => text.clone(),
        Format::Json => report::json::render(&results, &report.percentiles),
        Format::Csv => report::csv::render_with(
            &results,
            !output.as_ref().is_some_and(OutputFile::has_rows),
            &report.percentiles,
        ),
    };
    let markers = report.result_markers.then(|| {
        report::markers::wrap(&match report.format {
            Format::Json => rendered.clone(),
            _ => report::json::render(&results, &report.percentiles),
        })
    });
    let mut written_to = None;
    if let Some(out) = output {
        match out.write(&rendered) {
            Ok(()) => written_to = Some(out.path),
            Err(error) => unwritten.push(OutputFailure {
                what: "report",
                path: out.path,
                error,
            }),
        }
    }
    Ok(Summary {
        header,
        report: rendered,
        text,
        results,
        written_to,
        unwritten,
        markers,
        format: report.format,
    })
}

pub fn run_config(config: &RunConfig) -> Result<Summary, Error> {
    // --ratis-admin: the DataNode names its pipeline before anything runs.
    let discovered;
    let config = match &config.ratis_admin {
        Some(admin) => {
            let group = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Run(format!("cannot start a runtime: {e}")))?
                .block_on(connection::ratis_admin::the_one_group(
                    admin,
                    config.connect_timeout,
                ))
                .map_err(|e| Error::Unreachable(e.to_string()))?;
            discovered = RunConfig {
                ratis: Some(group),
                ratis_admin: None,
                ..config.clone()
            };
            &discovered
        }
        None => config,
    };
    if let WorkloadConfig::Echo(echo) = &config.workload
        && !echo.read_only
        && config.ratis.is_none()
    {
        eprintln!(
            "loadgen: warning: --read-only=false sends non-read-only echoes; a real DataNode runs write-path checks for them"
        );
    }
    let output = open_output(&config.report)?;
    if let Some(path) = &config.live.histogram_log {
        check_writable("--histogram-log", path)?;
    }
    // The embedded dn-sim runs on threads of its own; it stops when `_embedded` is dropped.
    let (_embedded, endpoint, target_desc, address) = start_target(config)?;
    // The target's CPU is in loadgen's process.
    let embedded = _embedded.is_some() || matches!(endpoint, connection::Endpoint::Null(_));
    // The coordinator's runtime; connections and workers run on I/O threads of their own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Run(format!("cannot start the runtime: {e}")))?;
    let target = Where {
        endpoint: &endpoint,
        address: &address,
        embedded,
    };
    let (results, unwritten) = runtime.block_on(async {
        match &config.workload {
            WorkloadConfig::Echo(echo) => {
                let workload = Arc::new(workload::echo::Echo::new(
                    echo,
                    config.container_id,
                    &config.datanode_uuid,
                ));
                let mut out = phase(config, &endpoint, workload, true).await?;
                Ok((
                    Results::from_run(RunDescription::of(config, &address), &mut out, embedded),
                    Vec::new(),
                ))
            }
            WorkloadConfig::Write(w) => run_write(config, w, &target).await,
            WorkloadConfig::Read(r) => Ok((run_read(config, r, &target).await?, Vec::new())),
        }
    })?;
    finish(
        header(config, &target_desc),
        results,
        &config.report,
        output,
        unwritten,
    )
}

/// The target of a run: an embedded dn-sim (kept alive by the first field), a remote one or the
/// in-process null DataNode; the description for the header and the address for the reports.
type Started = (
    Option<embedded::Server>,
    connection::Endpoint,
    String,
    String,
);

fn start_target(config: &RunConfig) -> Result<Started, Error> {
    match &config.target {
        Target::Null => {
            let (node, desc) = embedded::start_null(config)?;
            Ok((
                None,
                connection::Endpoint::Null(node),
                desc,
                connection::null::NAME.to_string(),
            ))
        }
        Target::Embedded { threads } => {
            let (server, desc) = embedded::start(config, *threads)?;
            let addr = server.ratis_addr().unwrap_or_else(|| server.local_addr());
            Ok((
                Some(server),
                connection::Endpoint::Uri(vec![format!("http://{addr}")], None),
                desc,
                addr.to_string(),
            ))
        }
        Target::Remote(list, tls) => {
            let uris = list
                .iter()
                .map(|t| connection::target_uri(t, tls.is_some()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Error::Usage(e.to_string()))?;
            let t = list.join(",");
            let desc = match tls {
                Some(_) => format!("{t} (TLS)"),
                None => t.clone(),
            };
            Ok((None, connection::Endpoint::Uri(uris, tls.clone()), desc, t))
        }
    }
}

struct Where<'a> {
    endpoint: &'a connection::Endpoint,
    address: &'a str,
    embedded: bool,
}

/// One engine run of `workload`. `live`: the run's observers (histogram log, metrics) are
/// attached; the other phases of a run (a read's data set, a write's read-back) only show
/// progress.
async fn phase(
    config: &RunConfig,
    endpoint: &connection::Endpoint,
    workload: Arc<dyn Workload>,
    live: bool,
) -> Result<engine::RunOutput, Error> {
    let mut metrics = match config.live.metrics_listen.filter(|_| live) {
        Some(addr) => {
            let (snapshot, local) = report::prometheus::serve(addr).await.map_err(|e| {
                Error::Usage(format!("--metrics-listen {addr}: cannot listen: {e}"))
            })?;
            eprintln!("loadgen: metrics on http://{local}/metrics");
            Some(snapshot)
        }
        None => None,
    };
    let mut intervals: Vec<Box<dyn IntervalSink + Send>> = Vec::new();
    if let Some(path) = config.live.histogram_log.as_ref().filter(|_| live) {
        let start = config
            .start_at
            .unwrap_or_else(|| std::time::SystemTime::now() + config.warmup);
        let log = report::histogram_log::HistogramLog::create(path, start)
            .map_err(|e| Error::Usage(format!("--histogram-log {}: {e}", path.display())))?;
        intervals.push(Box::new(log));
    }
    let mut display = ProgressDisplay::new(std::io::stderr().is_terminal(), config.stop);
    let mut progress = |p: &engine::Progress| display.update(p);
    let observers = Observers {
        progress: &mut progress,
        intervals,
        totals: metrics.as_mut().map(|m| m as &mut dyn TotalsSink),
    };
    let out = engine::run(config, endpoint, workload, observers).await;
    display.finish();
    out
}

/// Keeps the committed blocks for a read-back.
#[derive(Default)]
struct KeepBlocks(std::sync::Mutex<Vec<workload::block::Expected>>);

impl KeepBlocks {
    fn take(&self) -> Vec<workload::block::Expected> {
        std::mem::take(
            &mut self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

impl BlockSink for KeepBlocks {
    fn committed(&self, block: &common::proto::BlockData) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(workload::block::Expected::of_block(block));
    }
}

/// Every sink gets every block.
struct Sinks(Vec<Arc<dyn BlockSink>>);

impl BlockSink for Sinks {
    fn committed(&self, block: &common::proto::BlockData) {
        for s in &self.0 {
            s.committed(block);
        }
    }
}

const MB: f64 = 1048576.0;

/// A write phase's results, with its `write` summary and unit operation.
async fn write_phase(
    config: &RunConfig,
    shape: &workload::block_writer::WriteShape,
    sink: Arc<dyn BlockSink>,
    target: &Where<'_>,
    live: bool,
) -> Result<Results, Error> {
    let mut write = BlockWrite::new(
        shape.clone(),
        config.container_id,
        &config.datanode_uuid,
        sink,
    );
    if let Some(s) = config.shard {
        write = write.for_shard(s.index, config.threads);
    }
    let workload = Arc::new(write);
    let tally = Arc::clone(&workload.tally);
    let mut out = phase(config, target.endpoint, workload, live).await?;
    let bytes = out.stats.unit_bytes;
    let mut r = Results::from_run(
        RunDescription::of(config, target.address),
        &mut out,
        target.embedded,
    );
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    r.write = Some(results::WritePhase {
        elapsed_s: secs,
        writes: r.successes(),
        bytes,
        mb_per_s: bytes as f64 / MB / secs,
        writes_per_s: r.successes() as f64 / secs,
        blocks_committed: tally.blocks_committed.load(Relaxed),
        goodput_series_bytes: r.series.iter().map(|p| p.goodput_bytes).collect(),
    });
    r.add_unit_op("write", bytes);
    Ok(r)
}

/// A read phase over `blocks`, with its `read` summary and unit operation.
async fn read_phase(
    config: &RunConfig,
    blocks: Arc<Vec<workload::block::Expected>>,
    verify: bool,
    v1: bool,
    target: &Where<'_>,
    live: bool,
) -> Result<Results, Error> {
    let workload = Arc::new(BlockRead::new(blocks, verify, v1, &config.datanode_uuid));
    let tally = Arc::clone(&workload.tally);
    let mut out = phase(config, target.endpoint, workload, live).await?;
    let mut r = Results::from_run(
        RunDescription::of(config, target.address),
        &mut out,
        target.embedded,
    );
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let bytes_read = tally.bytes_read.load(Relaxed);
    r.read = Some(results::ReadPhase {
        elapsed_s: secs,
        blocks: tally.blocks_read.load(Relaxed),
        chunks: tally.chunks_read.load(Relaxed),
        bytes_read,
        bytes_verified: tally.bytes_verified.load(Relaxed),
        mb_per_s: bytes_read as f64 / MB / secs,
        goodput_series_bytes: r.series.iter().map(|p| p.goodput_bytes).collect(),
    });
    r.add_unit_op("read", bytes_read);
    Ok(r)
}

/// `loadgen write`: the measured write phase (blocks streamed to `--manifest`, kept only for
/// `--then-read`), then the read-back if asked for and the writes all succeeded. A manifest
/// that could not be written is returned with the results, for the report to be kept.
async fn run_write(
    config: &RunConfig,
    w: &config::WriteConfig,
    target: &Where<'_>,
) -> Result<(Results, Vec<OutputFailure>), Error> {
    let mut sinks: Vec<Arc<dyn BlockSink>> = Vec::new();
    let manifest = match &w.manifest {
        Some(path) => {
            let header = serde_json::to_value(&w.described).unwrap_or_default();
            let m = manifest::ManifestWriter::create(path, header)
                .map_err(|e| Error::Usage(format!("--manifest {}: {e}", path.display())))?;
            let m = Arc::new(m);
            sinks.push(Arc::clone(&m) as Arc<dyn BlockSink>);
            Some((path, m))
        }
        None => None,
    };
    let kept = w.then_read.then(|| Arc::new(KeepBlocks::default()));
    if let Some(k) = &kept {
        sinks.push(Arc::clone(k) as Arc<dyn BlockSink>);
    }
    let sink: Arc<dyn BlockSink> = match sinks.len() {
        0 => Arc::new(workload::block::NoSink),
        1 => sinks.pop().expect("one sink"),
        _ => Arc::new(Sinks(sinks)),
    };
    let mut results = write_phase(config, &w.shape, sink, target, true).await?;
    let mut unwritten = Vec::new();
    if let Some((path, m)) = manifest
        && let Err(error) = m.finish()
    {
        unwritten.push(OutputFailure {
            what: "manifest",
            path: path.clone(),
            error,
        });
    }
    if let Some(kept) = kept
        && results.failures() == 0
        && !results.interrupted
    {
        let blocks = Arc::new(kept.take());
        let read = config::ReadConfig {
            shape: w.shape.clone(),
            described: w.described.clone(),
            blocks: Some(Arc::clone(&blocks)),
            verify: true,
            read_v1: w.read_v1,
        };
        let stop = StopAfter::Requests(blocks.len() as u64);
        let read_config = config.phase(WorkloadConfig::Read(read), stop);
        let r = read_phase(&read_config, blocks, true, w.read_v1, target, false)
            .await
            .map_err(Error::mid_run)?;
        results.add_phase(&r);
    }
    Ok((results, unwritten))
}

/// `loadgen read`: the blocks of `--manifest`, or a data set written first (closed loop, its
/// own phase, `-n`/`--duration`); then the measured read of every block once.
async fn run_read(
    config: &RunConfig,
    rc: &config::ReadConfig,
    target: &Where<'_>,
) -> Result<Results, Error> {
    let (blocks, written) = match &rc.blocks {
        Some(b) => (Arc::clone(b), None),
        None => {
            let kept = Arc::new(KeepBlocks::default());
            let write = config::WriteConfig {
                shape: rc.shape.clone(),
                described: rc.described.clone(),
                manifest: None,
                then_read: true,
                read_v1: rc.read_v1,
            };
            let write_config = config.phase(WorkloadConfig::Write(write), config.stop);
            let sink = Arc::clone(&kept) as Arc<dyn BlockSink>;
            let w = write_phase(&write_config, &rc.shape, sink, target, false).await?;
            (Arc::new(kept.take()), Some(w))
        }
    };
    let mut read_config = config.clone();
    read_config.stop = StopAfter::Requests(blocks.len() as u64);
    let total: u64 = blocks.iter().map(workload::block::Expected::bytes).sum();
    read_config.resolve_bandwidth(total as f64 / blocks.len().max(1) as f64);
    let read = read_phase(&read_config, blocks, rc.verify, rc.read_v1, target, true).await;
    // After a data set written first, the target was reachable when the run started.
    let mut results = if written.is_some() {
        read.map_err(Error::mid_run)?
    } else {
        read?
    };
    if let Some(w) = written {
        results.add_phase(&w);
    }
    Ok(results)
}

fn header(config: &RunConfig, target: &str) -> String {
    let unit = match config.workload {
        WorkloadConfig::Echo(_) => "requests",
        WorkloadConfig::Write(_) | WorkloadConfig::Read(_) => "application writes",
    };
    let mut amount = match config.stop {
        StopAfter::Requests(n) => format!("{n} {unit}"),
        StopAfter::Elapsed(d) => format!("for {}", humantime::format_duration(d)),
    };
    // A read's -n/--duration are its data set's; then every block is read once.
    if let WorkloadConfig::Read(r) = &config.workload {
        amount = match &r.blocks {
            Some(b) => format!("every block of the manifest ({}) once", b.len()),
            None => format!("a data set written first ({amount}), every block once"),
        };
    }
    let streams = match config.streams {
        Streams::PerRequest => "a new stream per request".to_string(),
        Streams::Persistent { pipeline } if config.ratis.is_some() => {
            format!("one ordered Ratis stream per thread with {pipeline} request(s) in flight")
        }
        Streams::Persistent { pipeline } => {
            format!("one stream per thread with {pipeline} request(s) in flight")
        }
    };
    let load = match (&config.load, config.shard) {
        (config::Load::Closed, _) => "closed loop".to_string(),
        (config::Load::Open(plan), None) => format!("open loop at {}", plan.schedule()),
        (config::Load::Open(plan), Some(s)) => format!(
            "open loop at {} in all, its requests {}, {}+{n}, {}+2·{n}… here",
            plan.schedule(),
            s.index,
            s.index,
            s.index,
            n = s.count
        ),
    };
    let shard = match config.shard {
        Some(s) => format!("shard {s} of a split test: "),
        None => String::new(),
    };
    let start_at = match config.start_at {
        Some(t) => format!(", measured from {}", humantime::format_rfc3339_millis(t)),
        None => String::new(),
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
        "loadgen {}: {shard}{amount}{warmup}{start_at}, {} thread(s) over {} connection(s), {streams}, {load}\ntarget: {target}\n",
        config.workload.name(),
        config.threads,
        config.clients
    )
}

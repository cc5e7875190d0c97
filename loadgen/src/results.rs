//! The results of a run, or of several merged runs, in the form every report renders: the run's
//! description, totals, full latency histograms, errors by kind, the generator's own CPU use and
//! timer lag, and the time series. A single run builds it from the engine's output; `loadgen
//! merge` builds it from JSON files and adds them up (exactly: histograms merge bucket by bucket).

use crate::config::{Load, RunConfig, StopAfter, Streams, WorkloadConfig};
use crate::engine::RunOutput;
use crate::engine::live::{IntervalPoint, push_point};
use common::stats::LatencyHistogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

/// What was run, as plain values (the `config` object of the JSON report).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDescription {
    pub workload: String,
    /// freon's timer name (`rpc-payload`).
    pub timer: String,
    pub target: String,
    pub clients: usize,
    pub threads: usize,
    pub stream_mode: String,
    pub pipeline: usize,
    /// `closed` or `open`.
    pub load: String,
    /// Open loop: the plan (`1000/s`, `step:…`, `ramp:…`).
    pub rate_plan: Option<String>,
    /// Open loop: the highest planned rate, requests/s.
    pub peak_rate: Option<f64>,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub fail_at_end: bool,
    pub payload_req_bytes: u64,
    pub payload_resp_bytes: u64,
    /// `--retry`/`--retry-backoff` as a policy (`none` or `exp:…`), `--client-throttle` and
    /// `--throttle-scope` (absent in older reports).
    #[serde(default)]
    pub retry_policy: String,
    #[serde(default)]
    pub client_throttle: String,
    #[serde(default)]
    pub throttle_scope: String,
    /// write and read: the output streams' shape (of the data set written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
    /// `--shard`/`--shards`: which part of a split test this is. `requests` is then this
    /// shard's share; `rate_plan` and `peak_rate` stay the whole test's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// `--start-at`: when the measured phase was asked to start, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ms: Option<f64>,
}

use crate::shard::Shard;

/// One loadgen process's measured phase, as `loadgen merge` lists them: when it started (and
/// how far from `--start-at`), how long it lasted, what it counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Start of the measured phase by this process's wall clock, ms since the Unix epoch.
    pub started_at_unix_ms: f64,
    pub elapsed_s: f64,
    /// `--start-at`, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_start_unix_ms: Option<f64>,
    /// started − requested, ms (positive: late), by the same process's clock: it shows the
    /// process's own lateness, not its clock's skew against the other nodes' clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset_ms: Option<f64>,
    pub requests: u64,
    pub failures: u64,
}

impl RunRecord {
    pub fn end_unix_ms(&self) -> f64 {
        self.started_at_unix_ms + self.elapsed_s * 1000.0
    }
}

/// How the measured phases of merged runs lie in time (by each process's wall clock).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseOverlap {
    pub runs: usize,
    /// Whether one interval lies in every run's measured phase.
    pub all_overlap: bool,
    /// That interval's length, seconds (0 when they do not all overlap).
    pub overlap_s: f64,
    /// The longest measured phase, seconds.
    pub longest_s: f64,
    /// Latest start − earliest start, ms.
    pub start_spread_ms: f64,
    /// The runs are shards 0 … N − 1 of one split, each once.
    pub complete_split: bool,
    /// The shard indexes missing from the split, or given more than once (empty when complete
    /// or when the runs were not shards).
    pub missing_shards: Vec<u32>,
    pub repeated_shards: Vec<u32>,
}

/// Whether `runs`' measured phases overlap, and whether they make up a whole split.
pub fn phase_overlap(runs: &[RunRecord]) -> PhaseOverlap {
    let latest_start = runs
        .iter()
        .map(|r| r.started_at_unix_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let earliest_start = runs
        .iter()
        .map(|r| r.started_at_unix_ms)
        .fold(f64::INFINITY, f64::min);
    let earliest_end = runs
        .iter()
        .map(RunRecord::end_unix_ms)
        .fold(f64::INFINITY, f64::min);
    let overlap_ms = earliest_end - latest_start;
    let counts: Vec<u32> = runs
        .iter()
        .filter_map(|r| r.shard.map(|s| s.count))
        .collect();
    let (mut missing, mut repeated) = (Vec::new(), Vec::new());
    let mut complete = false;
    if let Some(&n) = counts.first()
        && counts.len() == runs.len()
        && counts.iter().all(|&c| c == n)
    {
        let mut seen = vec![0u32; n as usize];
        for r in runs {
            if let Some(s) = r.shard {
                seen[s.index as usize] += 1;
            }
        }
        missing = (0..n).filter(|&i| seen[i as usize] == 0).collect();
        repeated = (0..n).filter(|&i| seen[i as usize] > 1).collect();
        complete = missing.is_empty() && repeated.is_empty();
    }
    PhaseOverlap {
        runs: runs.len(),
        all_overlap: !runs.is_empty() && overlap_ms > 0.0,
        overlap_s: if runs.is_empty() {
            0.0
        } else {
            overlap_ms.max(0.0) / 1000.0
        },
        longest_s: runs.iter().map(|r| r.elapsed_s).fold(0.0, f64::max),
        start_spread_ms: if runs.is_empty() {
            0.0
        } else {
            latest_start - earliest_start
        },
        complete_split: complete,
        missing_shards: missing,
        repeated_shards: repeated,
    }
}

pub use crate::config::Shape;

/// One operation kind's results (write and read): the unit (`write`, `read`) and each RPC kind.
#[derive(Clone, Debug)]
pub struct OpResults {
    /// freon-style timer name (`chunk-write`).
    pub timer: String,
    /// Successful operations, from the first attempt to the final answer.
    pub latency: LatencyHistogram,
    pub failures: u64,
    /// Payload bytes of the successful operations.
    pub bytes: u64,
    /// How long the phase that ran them was measured.
    pub elapsed: Duration,
}

impl OpResults {
    pub fn per_second(&self) -> f64 {
        self.latency.count() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn merge(&mut self, o: &OpResults) {
        self.latency.merge(&o.latency);
        self.failures += o.failures;
        self.bytes += o.bytes;
        self.elapsed = self.elapsed.max(o.elapsed);
    }
}

/// The report's name and timer of each RPC kind.
pub fn op_names(kind: crate::outcome::RpcKind) -> (&'static str, &'static str) {
    use crate::outcome::RpcKind;
    let timer = match kind {
        RpcKind::Echo => "rpc-payload",
        RpcKind::WriteChunk => "chunk-write",
        RpcKind::PutBlock => "block-put",
        RpcKind::GetBlock => "block-get",
        RpcKind::ReadChunk => "chunk-read",
    };
    (kind.name(), timer)
}

/// Report order of the operation names.
pub fn op_rank(name: &str) -> usize {
    [
        "write",
        "WriteChunk",
        "PutBlock",
        "read",
        "GetBlock",
        "ReadChunk",
    ]
    .iter()
    .position(|n| *n == name)
    .unwrap_or(usize::MAX)
}

const MB: f64 = 1048576.0;

/// A write phase: application writes and the blocks they committed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WritePhase {
    pub elapsed_s: f64,
    /// Successful application write() calls.
    pub writes: u64,
    pub bytes: u64,
    /// MB = 2^20 bytes.
    pub mb_per_s: f64,
    pub writes_per_s: f64,
    pub blocks_committed: u64,
    /// Bytes of successful WriteChunks in each report interval (1 s by default) from the
    /// measurement's start.
    pub goodput_series_bytes: Vec<u64>,
}

/// A read phase: blocks and chunks read, bytes verified.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadPhase {
    pub elapsed_s: f64,
    pub blocks: u64,
    pub chunks: u64,
    pub bytes_read: u64,
    pub bytes_verified: u64,
    /// MB = 2^20 bytes.
    pub mb_per_s: f64,
    /// Bytes of successful ReadChunks in each report interval from the measurement's start.
    pub goodput_series_bytes: Vec<u64>,
}

fn add_series(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

impl WritePhase {
    fn merge(&mut self, o: &WritePhase) {
        self.elapsed_s = self.elapsed_s.max(o.elapsed_s);
        self.writes += o.writes;
        self.bytes += o.bytes;
        self.blocks_committed += o.blocks_committed;
        let secs = self.elapsed_s.max(1e-9);
        self.mb_per_s = self.bytes as f64 / MB / secs;
        self.writes_per_s = self.writes as f64 / secs;
        add_series(&mut self.goodput_series_bytes, &o.goodput_series_bytes);
    }
}

impl ReadPhase {
    fn merge(&mut self, o: &ReadPhase) {
        self.elapsed_s = self.elapsed_s.max(o.elapsed_s);
        self.blocks += o.blocks;
        self.chunks += o.chunks;
        self.bytes_read += o.bytes_read;
        self.bytes_verified += o.bytes_verified;
        self.mb_per_s = self.bytes_read as f64 / MB / self.elapsed_s.max(1e-9);
        add_series(&mut self.goodput_series_bytes, &o.goodput_series_bytes);
    }
}

impl RunDescription {
    pub fn of(config: &RunConfig, target: &str) -> Self {
        let (payload_req_bytes, payload_resp_bytes, shape) = match &config.workload {
            WorkloadConfig::Echo(e) => (
                e.payload_req_bytes as u64,
                e.payload_resp_bytes as u64,
                None,
            ),
            WorkloadConfig::Write(w) => (w.described.write_size, 0, Some(w.described.clone())),
            WorkloadConfig::Read(r) => (0, 0, r.blocks.is_none().then(|| r.described.clone())),
        };
        let (rate_plan, peak_rate) = match &config.load {
            Load::Closed => (None, None),
            Load::Open(plan) => (
                Some(plan.schedule().to_string()),
                Some(plan.schedule().peak_rate()),
            ),
        };
        RunDescription {
            workload: config.workload.name().into(),
            timer: config.workload.timer_name().into(),
            target: target.into(),
            clients: config.clients,
            threads: config.threads,
            stream_mode: match config.streams {
                _ if config.ratis.is_some() => "ratis".into(),
                Streams::PerRequest => "per-request".into(),
                Streams::Persistent { .. } => "persistent".into(),
            },
            pipeline: match config.streams {
                Streams::PerRequest => 1,
                Streams::Persistent { pipeline } => pipeline,
            },
            load: if rate_plan.is_some() {
                "open"
            } else {
                "closed"
            }
            .into(),
            rate_plan,
            peak_rate,
            requests: match config.stop {
                StopAfter::Requests(n) => Some(n),
                StopAfter::Elapsed(_) => None,
            },
            duration_s: match config.stop {
                StopAfter::Elapsed(d) => Some(d.as_secs_f64()),
                StopAfter::Requests(_) => None,
            },
            warmup_s: config.warmup.as_secs_f64(),
            timeout_s: config.timeout.as_secs_f64(),
            fail_at_end: config.fail_at_end,
            payload_req_bytes,
            payload_resp_bytes,
            retry_policy: config.resilience.retry.to_string(),
            client_throttle: config.resilience.throttle.to_string(),
            throttle_scope: config.resilience.scope.to_string(),
            shape,
            shard: config.shard,
            start_at_unix_ms: config.start_at.map(crate::shard::unix_ms),
        }
    }

    pub fn open_loop(&self) -> bool {
        self.load == "open"
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: u64,
    pub first_message: String,
}

/// The generator's view of itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// CPU seconds loadgen's process used (with the embedded dn-sim, its CPU too).
    pub cpu_s: Option<f64>,
    /// Wall-clock seconds of the whole run, warm-up included.
    pub wall_s: f64,
    /// Cores available to the process.
    pub cores: usize,
    /// The target ran inside loadgen's process (its CPU is in `cpu_s`).
    pub embedded_target: bool,
}

impl Generator {
    /// Share of the available cores the process used, 0–1.
    pub fn cpu_share(&self) -> Option<f64> {
        self.cpu_s
            .map(|c| c / self.wall_s.max(1e-9) / self.cores.max(1) as f64)
    }
}

#[derive(Clone, Debug)]
pub struct Results {
    pub description: RunDescription,
    /// Measurement start, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    pub elapsed: Duration,
    pub interrupted: bool,
    /// How many loadgen runs these results add up.
    pub processes: u32,
    /// Successful requests, from the intended send time (closed loop: from the send).
    pub corrected: LatencyHistogram,
    /// Successful requests, from the actual send (service time).
    pub uncorrected: LatencyHistogram,
    /// Failed requests.
    pub failed: LatencyHistogram,
    /// Late sends (every worker busy at the intended time) and how late they went out.
    pub lateness: LatencyHistogram,
    /// On-time sends: how late the timer fired (the generator's own lag).
    pub timer_lag: LatencyHistogram,
    pub errors: BTreeMap<String, ErrorCount>,
    pub warmup_requests: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// freon's 1-, 5- and 15-minute rates of finished requests.
    pub moving_rates: [f64; 3],
    pub generator: Generator,
    pub series: Vec<IntervalPoint>,
    /// Retries, rejections, client throttling and goodput.
    pub resilience: crate::outcome::ResilienceCounts,
    /// write and read: per operation (`write`, `WriteChunk`, … `ReadChunk`).
    pub ops: BTreeMap<String, OpResults>,
    pub write: Option<WritePhase>,
    pub read: Option<ReadPhase>,
    /// Each loadgen process's measured phase (one for a single run; a merge lists them all).
    pub runs: Vec<RunRecord>,
}

impl Results {
    /// The record of a single run's measured phase.
    fn record(&self, started_at: std::time::SystemTime) -> RunRecord {
        let started = crate::shard::unix_ms(started_at);
        let requested = self.description.start_at_unix_ms;
        RunRecord {
            shard: self.description.shard,
            started_at_unix_ms: started,
            elapsed_s: self.elapsed.as_secs_f64(),
            requested_start_unix_ms: requested,
            start_offset_ms: requested.map(|r| started - r),
            requests: self.requests(),
            failures: self.failures(),
        }
    }

    /// The runs' measured phases in time (see [`phase_overlap`]).
    pub fn overlap(&self) -> PhaseOverlap {
        phase_overlap(&self.runs)
    }

    pub fn from_run(description: RunDescription, run: &mut RunOutput, embedded: bool) -> Self {
        let (m1, m5, m15) = run.meter.moving_rates(run.elapsed);
        let s = &run.stats;
        let errors = s
            .errors
            .iter()
            .map(|(kind, &count)| {
                let first_message = s.first_messages.get(kind).cloned().unwrap_or_default();
                (
                    kind.to_string(),
                    ErrorCount {
                        count,
                        first_message,
                    },
                )
            })
            .collect();
        let mut results = Results {
            description,
            started_at_ms: run
                .started_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            elapsed: run.elapsed,
            interrupted: run.interrupted,
            processes: 1,
            corrected: s.success.clone(),
            uncorrected: s.service_time().clone(),
            failed: s.failure.clone(),
            lateness: s.lateness.clone(),
            timer_lag: s.timer_lag.clone(),
            errors,
            warmup_requests: s.warmup,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            moving_rates: [m1, m5, m15],
            generator: Generator {
                cpu_s: run.cpu.map(|c| c.as_secs_f64()),
                wall_s: run.wall.as_secs_f64(),
                cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
                embedded_target: embedded,
            },
            series: std::mem::take(&mut run.series),
            resilience: s.resilience,
            ops: s
                .ops
                .iter()
                .map(|(kind, o)| {
                    let (name, timer) = op_names(kind);
                    (
                        name.to_string(),
                        OpResults {
                            timer: timer.into(),
                            latency: o.success.clone(),
                            failures: o.failures,
                            bytes: o.bytes,
                            elapsed: run.elapsed,
                        },
                    )
                })
                .collect(),
            write: None,
            read: None,
            runs: Vec::new(),
        };
        results.runs = vec![results.record(run.started_at)];
        results
    }

    /// Adds the unit as an operation of its own (`write`: app-write, `read`: block-read).
    pub fn add_unit_op(&mut self, name: &str, bytes: u64) {
        self.ops.insert(
            name.to_string(),
            OpResults {
                timer: self.description.timer.clone(),
                latency: self.corrected.clone(),
                failures: self.failures(),
                bytes,
                elapsed: self.elapsed,
            },
        );
    }

    /// Adds another phase of the same run (a `read`'s data set, a `write`'s read-back): its
    /// operations, errors, retries and phase summary; not its units' histograms or bytes/s.
    pub fn add_phase(&mut self, other: &Results) {
        for (name, o) in &other.ops {
            match self.ops.get_mut(name) {
                Some(mine) => mine.merge(o),
                None => {
                    self.ops.insert(name.clone(), o.clone());
                }
            }
        }
        for (kind, e) in &other.errors {
            let mine = self.errors.entry(kind.clone()).or_insert(ErrorCount {
                count: 0,
                first_message: e.first_message.clone(),
            });
            mine.count += e.count;
        }
        // Bytes per second are of the measured phase; the other's are in its summary.
        self.resilience.merge(&other.resilience);
        merge_phase(&mut self.write, &other.write, WritePhase::merge);
        merge_phase(&mut self.read, &other.read, ReadPhase::merge);
        self.interrupted |= other.interrupted;
    }

    /// Data-integrity failures (`integrity:*` kinds).
    pub fn integrity_errors(&self) -> u64 {
        self.errors
            .iter()
            .filter(|(k, _)| k.starts_with("integrity:"))
            .map(|(_, e)| e.count)
            .sum()
    }

    pub fn successes(&self) -> u64 {
        self.corrected.count()
    }

    pub fn failures(&self) -> u64 {
        self.errors.values().map(|e| e.count).sum()
    }

    /// Measured requests: successes, failures (after retries) and locally rejected requests.
    pub fn requests(&self) -> u64 {
        self.successes() + self.failures() + self.resilience.locally_rejected
    }

    /// Successful requests' payload bytes per second.
    pub fn goodput_bytes_per_s(&self) -> f64 {
        self.per_second(self.resilience.goodput_bytes)
    }

    pub fn late_sends(&self) -> u64 {
        self.lateness.count()
    }

    fn per_second(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn throughput(&self) -> f64 {
        self.per_second(self.requests())
    }

    pub fn success_rate(&self) -> f64 {
        self.per_second(self.successes())
    }

    pub fn bytes_sent_per_s(&self) -> f64 {
        self.per_second(self.bytes_sent)
    }

    pub fn bytes_received_per_s(&self) -> f64 {
        self.per_second(self.bytes_received)
    }

    /// Why the generator itself may have limited the measurement; empty when nothing suggests it.
    pub fn generator_limits(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if let Some(share) = self.generator.cpu_share()
            && share > 0.85
        {
            let with = if self.generator.embedded_target {
                " (with the embedded dn-sim)"
            } else {
                ""
            };
            reasons.push(format!(
                "loadgen used {:.0} % of {} core(s){with}",
                share * 100.0,
                self.generator.cores
            ));
        }
        if self.timer_lag.count() > 0 && self.timer_lag.percentile_ms(99.0) > 5.0 {
            reasons.push(format!(
                "scheduled sends fired late (timer lag p99 {:.2} ms): the runtime was busy",
                self.timer_lag.percentile_ms(99.0)
            ));
        }
        let late = self.late_sends();
        if late > 0 && late * 100 > self.requests() {
            reasons.push(format!(
                "{late} sends ({:.1} %) were late because all {} request slot(s) were busy: \
                 more --threads (or --pipeline) would have sent them on time, unless the target \
                 is saturated",
                late as f64 * 100.0 / self.requests().max(1) as f64,
                self.description.threads * self.description.pipeline
            ));
        }
        reasons
    }

    /// Adds `other` (another process's results of the same test) to these.
    pub fn merge(&mut self, other: &Results) {
        self.started_at_ms = self.started_at_ms.min(other.started_at_ms);
        self.elapsed = self.elapsed.max(other.elapsed);
        self.interrupted |= other.interrupted;
        self.processes += other.processes;
        self.corrected.merge(&other.corrected);
        self.uncorrected.merge(&other.uncorrected);
        self.failed.merge(&other.failed);
        self.lateness.merge(&other.lateness);
        self.timer_lag.merge(&other.timer_lag);
        for (kind, e) in &other.errors {
            let mine = self.errors.entry(kind.clone()).or_insert(ErrorCount {
                count: 0,
                first_message: e.first_message.clone(),
            });
            mine.count += e.count;
        }
        self.warmup_requests += other.warmup_requests;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.resilience.merge(&other.resilience);
        for (name, o) in &other.ops {
            match self.ops.get_mut(name) {
                Some(mine) => mine.merge(o),
                None => {
                    self.ops.insert(name.clone(), o.clone());
                }
            }
        }
        merge_phase(&mut self.write, &other.write, WritePhase::merge);
        merge_phase(&mut self.read, &other.read, ReadPhase::merge);
        for (a, b) in self.moving_rates.iter_mut().zip(other.moving_rates) {
            *a += b;
        }
        self.runs.extend(other.runs.iter().cloned());
        let d = &mut self.description;
        // Shards of one split load different DataNodes: the merged target is all of them.
        for t in other.description.target.split(',') {
            if !d.target.split(',').any(|mine| mine == t) {
                d.target.push(',');
                d.target.push_str(t);
            }
        }
        d.clients += other.description.clients;
        d.threads += other.description.threads;
        // Shards of one split each carry the whole test's rate; independent runs' rates add.
        let same_split = matches!(
            (d.shard, other.description.shard),
            (Some(a), Some(b)) if a.count == b.count && d.rate_plan == other.description.rate_plan
        );
        d.peak_rate = match (d.peak_rate, other.description.peak_rate) {
            (Some(a), Some(_)) if same_split => Some(a),
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        d.requests = match (d.requests, other.description.requests) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        let g = &mut self.generator;
        g.cpu_s = match (g.cpu_s, other.generator.cpu_s) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        g.wall_s = g.wall_s.max(other.generator.wall_s);
        g.cores += other.generator.cores;
        g.embedded_target |= other.generator.embedded_target;
        // Series are aligned by their offset from each run's start; counts add, latency fields
        // keep the larger value.
        let mut merged = Vec::with_capacity(self.series.len().max(other.series.len()));
        let mut a = self.series.iter();
        let mut b = other.series.iter();
        loop {
            let point = match (a.next(), b.next()) {
                (Some(x), Some(y)) => {
                    let mut p = x.clone();
                    p.requests += y.requests;
                    p.successes += y.successes;
                    p.failures += y.failures;
                    p.late_sends += y.late_sends;
                    p.rate += y.rate;
                    p.p50_ms = p.p50_ms.max(y.p50_ms);
                    p.p99_ms = p.p99_ms.max(y.p99_ms);
                    p.max_ms = p.max_ms.max(y.max_ms);
                    p.uncorrected_p99_ms = p.uncorrected_p99_ms.max(y.uncorrected_p99_ms);
                    p.add_resilience(y);
                    p
                }
                (Some(x), None) | (None, Some(x)) => x.clone(),
                (None, None) => break,
            };
            push_point(&mut merged, point);
        }
        self.series = merged;
    }
}

fn merge_phase<T: Clone>(a: &mut Option<T>, b: &Option<T>, merge: fn(&mut T, &T)) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => merge(x, y),
        (None, Some(y)) => *a = Some(y.clone()),
        _ => {}
    }
}

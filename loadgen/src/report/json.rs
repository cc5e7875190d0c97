//! `--format json`: everything measured, for machines and for `loadgen merge`. Latencies are in
//! milliseconds; each latency block carries its full HDR histogram (non-empty buckets, µs) so that
//! results of several processes merge exactly.

use crate::engine::live::IntervalPoint;
use crate::results::{
    ErrorCount, Generator, OpResults, PhaseOverlap, ReadPhase, Results, RunDescription, RunRecord,
    WritePhase,
};
use common::stats::{HistogramData, LatencyHistogram};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Version of the layout below; `loadgen merge` refuses others.
pub const SCHEMA: u32 = 1;

/// Percentiles every JSON latency block lists, whatever `--percentiles` says.
pub const SPECTRUM: [f64; 17] = [
    10.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9,
    99.99, 99.999,
];

#[derive(Serialize, Deserialize)]
pub struct ResultsJson {
    pub loadgen: Producer,
    pub config: RunDescription,
    pub started_at_unix_ms: u64,
    pub elapsed_s: f64,
    pub interrupted: bool,
    pub processes: u32,
    pub totals: Totals,
    pub throughput: Throughput,
    pub latency: Latencies,
    pub late_sends: LateSends,
    pub errors: Vec<ErrorJson>,
    pub generator: GeneratorJson,
    pub series: Vec<IntervalPoint>,
    /// Retries, rejections, client throttling and goodput (absent in older reports).
    #[serde(default)]
    pub resilience: ResilienceJson,
    /// write and read: each operation kind (`write`, `WriteChunk`, `PutBlock`, `read`,
    /// `GetBlock`, `ReadChunk`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ops: BTreeMap<String, OpJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<WritePhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadPhase>,
    /// write and read: failures of kind `integrity:*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity_errors: Option<u64>,
    /// Each loadgen process's measured phase: one for a run, every shard's for a merge (absent
    /// in older reports).
    #[serde(default)]
    pub runs: Vec<RunRecord>,
    /// How the runs' measured phases lie in time (written, not read back: it is derived).
    #[serde(default, skip_deserializing)]
    pub measured_phases: Option<PhaseOverlap>,
}

#[derive(Serialize, Deserialize)]
pub struct OpJson {
    pub timer: String,
    pub count: u64,
    pub failures: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub per_second: f64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    /// `--percentiles` ("p50") → milliseconds.
    pub percentiles_ms: BTreeMap<String, f64>,
    pub histogram: HistogramData,
}

#[derive(Serialize, Deserialize, Default)]
pub struct ResilienceJson {
    #[serde(flatten)]
    pub counts: crate::outcome::ResilienceCounts,
    pub locally_throttled: u64,
    pub goodput_bytes_per_s: f64,
    pub goodput_ops_per_s: f64,
}

#[derive(Serialize, Deserialize)]
pub struct Producer {
    pub version: String,
    pub schema: u32,
}

#[derive(Serialize, Deserialize)]
pub struct Totals {
    pub requests: u64,
    pub successes: u64,
    pub failures: u64,
    pub late_sends: u64,
    pub warmup_requests: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

#[derive(Serialize, Deserialize)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub successes_per_s: f64,
    pub bytes_sent_per_s: f64,
    pub bytes_received_per_s: f64,
    /// freon's moving averages of finished requests.
    pub m1_rate: f64,
    pub m5_rate: f64,
    pub m15_rate: f64,
}

#[derive(Serialize, Deserialize)]
pub struct Latencies {
    /// Successful requests from their intended send time (closed loop: from the send).
    pub corrected: LatencyJson,
    /// Successful requests from their actual send (service time).
    pub uncorrected: LatencyJson,
    pub failed: LatencyJson,
}

#[derive(Serialize, Deserialize)]
pub struct PercentileValue {
    pub percentile: f64,
    pub ms: f64,
}

#[derive(Serialize, Deserialize)]
pub struct LatencyJson {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub stddev_ms: f64,
    pub max_ms: f64,
    /// `--percentiles` and the fixed spectrum (p10 … p99.999), ascending.
    pub percentiles: Vec<PercentileValue>,
    pub histogram: HistogramData,
}

#[derive(Serialize, Deserialize)]
pub struct LateSends {
    pub count: u64,
    /// Share of measured requests, 0–1.
    pub share: f64,
    /// How long after their intended time late sends went out.
    pub lateness: LatencyJson,
}

#[derive(Serialize, Deserialize)]
pub struct ErrorJson {
    /// `result:NAME`, `grpc:CODE`, `transport` or `deadline`.
    pub kind: String,
    pub count: u64,
    pub first_message: String,
}

#[derive(Serialize, Deserialize)]
pub struct GeneratorJson {
    #[serde(flatten)]
    pub info: Generator,
    pub cpu_share: Option<f64>,
    /// How late on-time scheduled sends fired (open loop).
    pub timer_lag: LatencyJson,
    pub may_have_been_the_limit: bool,
    pub reasons: Vec<String>,
}

fn latency(h: &LatencyHistogram, chosen: &[f64]) -> LatencyJson {
    let mut list: Vec<f64> = chosen.iter().chain(SPECTRUM.iter()).copied().collect();
    list.sort_by(f64::total_cmp);
    list.dedup();
    let percentiles = list
        .into_iter()
        .map(|p| PercentileValue {
            percentile: p,
            ms: h.percentile_ms(p),
        })
        .collect();
    LatencyJson {
        count: h.count(),
        min_ms: h.min_ms(),
        mean_ms: h.mean_ms(),
        stddev_ms: h.stddev_ms(),
        max_ms: h.max_ms(),
        percentiles,
        histogram: h.to_data(),
    }
}

pub fn to_json(r: &Results, percentiles: &[f64]) -> ResultsJson {
    let reasons = r.generator_limits();
    ResultsJson {
        loadgen: Producer {
            version: env!("CARGO_PKG_VERSION").into(),
            schema: SCHEMA,
        },
        config: r.description.clone(),
        started_at_unix_ms: r.started_at_ms,
        elapsed_s: r.elapsed.as_secs_f64(),
        interrupted: r.interrupted,
        processes: r.processes,
        totals: Totals {
            requests: r.requests(),
            successes: r.successes(),
            failures: r.failures(),
            late_sends: r.late_sends(),
            warmup_requests: r.warmup_requests,
            bytes_sent: r.bytes_sent,
            bytes_received: r.bytes_received,
        },
        throughput: Throughput {
            requests_per_s: r.throughput(),
            successes_per_s: r.success_rate(),
            bytes_sent_per_s: r.bytes_sent_per_s(),
            bytes_received_per_s: r.bytes_received_per_s(),
            m1_rate: r.moving_rates[0],
            m5_rate: r.moving_rates[1],
            m15_rate: r.moving_rates[2],
        },
        latency: Latencies {
            corrected: latency(&r.corrected, percentiles),
            uncorrected: latency(&r.uncorrected, percentiles),
            failed: latency(&r.failed, percentiles),
        },
        late_sends: LateSends {
            count: r.late_sends(),
            share: r.late_sends() as f64 / r.requests().max(1) as f64,
            lateness: latency(&r.lateness, percentiles),
        },
        errors: r
            .errors
            .iter()
            .map(|(kind, e)| ErrorJson {
                kind: kind.clone(),
                count: e.count,
                first_message: e.first_message.clone(),
            })
            .collect(),
        generator: GeneratorJson {
            info: r.generator.clone(),
            cpu_share: r.generator.cpu_share(),
            timer_lag: latency(&r.timer_lag, percentiles),
            may_have_been_the_limit: !reasons.is_empty(),
            reasons,
        },
        series: r.series.clone(),
        resilience: ResilienceJson {
            counts: r.resilience,
            locally_throttled: r.resilience.locally_throttled(),
            goodput_bytes_per_s: r.goodput_bytes_per_s(),
            goodput_ops_per_s: r.success_rate(),
        },
        ops: r
            .ops
            .iter()
            .map(|(name, o)| {
                let h = &o.latency;
                let json = OpJson {
                    timer: o.timer.clone(),
                    count: h.count(),
                    failures: o.failures,
                    bytes: o.bytes,
                    elapsed_s: o.elapsed.as_secs_f64(),
                    per_second: o.per_second(),
                    min_ms: h.min_ms(),
                    mean_ms: h.mean_ms(),
                    max_ms: h.max_ms(),
                    percentiles_ms: percentiles
                        .iter()
                        .map(|p| (format!("p{p}"), h.percentile_ms(*p)))
                        .collect(),
                    histogram: h.to_data(),
                };
                (name.clone(), json)
            })
            .collect(),
        write: r.write.clone(),
        read: r.read.clone(),
        integrity_errors: (!r.ops.is_empty()).then(|| r.integrity_errors()),
        runs: r.runs.clone(),
        measured_phases: Some(r.overlap()),
    }
}

pub fn render(r: &Results, percentiles: &[f64]) -> String {
    let mut text =
        serde_json::to_string_pretty(&to_json(r, percentiles)).expect("results serialize to JSON");
    text.push('\n');
    text
}

/// Reads a JSON report back (the input of `loadgen merge`).
pub fn parse(text: &str) -> Result<Results, String> {
    let j: ResultsJson = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if j.loadgen.schema != SCHEMA {
        return Err(format!(
            "schema {} is not {SCHEMA} (written by loadgen {})",
            j.loadgen.schema, j.loadgen.version
        ));
    }
    let h = |l: &LatencyJson| LatencyHistogram::from_data(&l.histogram);
    // A report from before `runs`: one run, from its totals.
    let runs = if j.runs.is_empty() {
        vec![RunRecord {
            shard: j.config.shard,
            started_at_unix_ms: j.started_at_unix_ms as f64,
            elapsed_s: j.elapsed_s,
            requested_start_unix_ms: j.config.start_at_unix_ms,
            start_offset_ms: None,
            requests: j.totals.requests,
            failures: j.totals.failures,
        }]
    } else {
        j.runs
    };
    Ok(Results {
        description: j.config,
        started_at_ms: j.started_at_unix_ms,
        elapsed: Duration::try_from_secs_f64(j.elapsed_s).map_err(|e| e.to_string())?,
        interrupted: j.interrupted,
        processes: j.processes,
        corrected: h(&j.latency.corrected),
        uncorrected: h(&j.latency.uncorrected),
        failed: h(&j.latency.failed),
        lateness: h(&j.late_sends.lateness),
        timer_lag: h(&j.generator.timer_lag),
        errors: j
            .errors
            .into_iter()
            .map(|e| {
                (
                    e.kind,
                    ErrorCount {
                        count: e.count,
                        first_message: e.first_message,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>(),
        warmup_requests: j.totals.warmup_requests,
        bytes_sent: j.totals.bytes_sent,
        bytes_received: j.totals.bytes_received,
        moving_rates: [
            j.throughput.m1_rate,
            j.throughput.m5_rate,
            j.throughput.m15_rate,
        ],
        generator: j.generator.info,
        series: j.series,
        resilience: j.resilience.counts,
        ops: j
            .ops
            .into_iter()
            .map(|(name, o)| {
                let elapsed = Duration::try_from_secs_f64(o.elapsed_s).unwrap_or_default();
                let op = OpResults {
                    timer: o.timer,
                    latency: LatencyHistogram::from_data(&o.histogram),
                    failures: o.failures,
                    bytes: o.bytes,
                    elapsed,
                };
                (name, op)
            })
            .collect(),
        write: j.write,
        read: j.read,
        runs,
    })
}

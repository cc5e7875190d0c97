//! Reports of a finished run (or of merged runs), all rendered from [`crate::results::Results`]:
//! freon's console layout plus loadgen's additions (`text`), `json`, `csv`; and what is shown
//! while a run goes on (`progress`, `histogram_log`, `prometheus`).

pub mod csv;
pub mod freon;
pub mod histogram_log;
pub mod json;
pub mod markers;
pub mod progress;
pub mod prometheus;
pub mod text;
mod time;

use crate::cli::Format;
use crate::results::Results;
pub use time::format_dropwizard_datetime;

/// The report in `format`.
pub fn render(results: &Results, format: Format, percentiles: &[f64]) -> String {
    match format {
        Format::Text => text::render(results, percentiles),
        Format::Json => json::render(results, percentiles),
        Format::Csv => csv::render(results, true),
    }
}

/// Results of a small closed-loop run with these successful latencies (µs), for tests.
#[cfg(test)]
pub(crate) fn test_results(micros: &[u64]) -> Results {
    use crate::results::{Generator, RunDescription};
    use common::stats::LatencyHistogram;
    use std::time::Duration;
    let mut h = LatencyHistogram::new();
    for &us in micros {
        h.record(Duration::from_micros(us));
    }
    Results {
        description: RunDescription {
            workload: "echo".into(),
            timer: "rpc-payload".into(),
            target: "127.0.0.1:9859".into(),
            clients: 1,
            threads: 1,
            stream_mode: "per-request".into(),
            pipeline: 1,
            load: "closed".into(),
            rate_plan: None,
            peak_rate: None,
            requests: Some(micros.len() as u64),
            duration_s: None,
            warmup_s: 0.0,
            timeout_s: 30.0,
            fail_at_end: false,
            payload_req_bytes: 0,
            payload_resp_bytes: 0,
            retry_policy: "none".into(),
            client_throttle: "none".into(),
            throttle_scope: "connection".into(),
            shape: None,
            shard: None,
            start_at_unix_ms: None,
        },
        started_at_ms: 1_796_035_520_000,
        elapsed: Duration::from_secs(5),
        interrupted: false,
        processes: 1,
        corrected: h.clone(),
        uncorrected: h,
        failed: LatencyHistogram::new(),
        lateness: LatencyHistogram::new(),
        timer_lag: LatencyHistogram::new(),
        errors: Default::default(),
        warmup_requests: 0,
        bytes_sent: 0,
        bytes_received: 0,
        moving_rates: [0.0; 3],
        generator: Generator {
            cpu_s: Some(0.5),
            wall_s: 5.0,
            cores: 2,
            embedded_target: false,
        },
        series: Vec::new(),
        resilience: Default::default(),
        ops: Default::default(),
        write: None,
        read: None,
        runs: vec![crate::results::RunRecord {
            shard: None,
            started_at_unix_ms: 1_796_035_520_000.0,
            elapsed_s: 5.0,
            requested_start_unix_ms: None,
            start_offset_ms: None,
            requests: micros.len() as u64,
            failures: 0,
        }],
    }
}

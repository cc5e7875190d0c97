//! `--metrics-listen ADDR`: loadgen's live counters and latency histograms in the Prometheus text
//! exposition format, served over plain HTTP on any path. The coordinator renders a new snapshot
//! at every report interval from the closed intervals' totals (so it lags by up to two intervals);
//! the request path never touches it.

use crate::engine::TotalsSink;
use crate::outcome::WorkerStats;
use common::stats::LatencyHistogram;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Upper bounds of the exported latency buckets, in seconds.
const BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// The latest exposition, shared with the HTTP task.
#[derive(Clone, Default)]
pub struct Snapshot(Arc<Mutex<String>>);

impl TotalsSink for Snapshot {
    fn update(&mut self, totals: &WorkerStats, finished: bool) {
        let text = render(totals, finished);
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }
}

fn histogram(out: &mut String, name: &str, help: &str, h: &LatencyHistogram) {
    writeln!(out, "# HELP {name} {help}").unwrap();
    writeln!(out, "# TYPE {name} histogram").unwrap();
    let hdr = h.as_hdr();
    for le in BUCKETS {
        let le_us = (le * 1e6) as u64;
        let n: u64 = hdr
            .iter_recorded()
            .take_while(|v| v.value_iterated_to() <= le_us)
            .map(|v| v.count_at_value())
            .sum();
        writeln!(out, "{name}_bucket{{le=\"{le}\"}} {n}").unwrap();
    }
    writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count()).unwrap();
    let sum = if h.is_empty() {
        0.0
    } else {
        hdr.mean() * h.count() as f64 / 1e6
    };
    writeln!(out, "{name}_sum {sum}").unwrap();
    writeln!(out, "{name}_count {}", h.count()).unwrap();
}

fn counter(out: &mut String, name: &str, help: &str, values: &[(&str, u64)]) {
    writeln!(out, "# HELP {name} {help}").unwrap();
    writeln!(out, "# TYPE {name} counter").unwrap();
    for (labels, v) in values {
        writeln!(out, "{name}{labels} {v}").unwrap();
    }
}

fn as_refs(v: &[(String, u64)]) -> Vec<(&str, u64)> {
    v.iter().map(|(l, n)| (l.as_str(), *n)).collect()
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

pub fn render(s: &WorkerStats, finished: bool) -> String {
    let mut out = String::new();
    counter(
        &mut out,
        "loadgen_requests_total",
        "Measured requests finished, by outcome.",
        &[
            ("{outcome=\"success\"}", s.success.count()),
            ("{outcome=\"failure\"}", s.failures()),
        ],
    );
    writeln!(
        out,
        "# HELP loadgen_errors_total Failed requests by kind (result:NAME, grpc:CODE, transport, deadline)."
    )
    .unwrap();
    writeln!(out, "# TYPE loadgen_errors_total counter").unwrap();
    for (kind, n) in &s.errors {
        writeln!(
            out,
            "loadgen_errors_total{{kind=\"{}\"}} {n}",
            escape(&kind.to_string())
        )
        .unwrap();
    }
    counter(
        &mut out,
        "loadgen_late_sends_total",
        "Open loop: sends that went out after their intended time because every worker was busy.",
        &[("", s.late_sends())],
    );
    counter(
        &mut out,
        "loadgen_payload_bytes_total",
        "Application payload bytes, by direction.",
        &[
            ("{direction=\"sent\"}", s.bytes_sent),
            ("{direction=\"received\"}", s.bytes_received),
        ],
    );
    if s.ops.iter().next().is_some() {
        // write and read: each RPC kind of the units (WriteChunk, PutBlock, GetBlock, ReadChunk).
        let mut rpcs = Vec::new();
        let mut bytes = Vec::new();
        for (kind, o) in s.ops.iter() {
            let k = kind.name();
            rpcs.push((
                format!("{{kind=\"{k}\",outcome=\"success\"}}"),
                o.success.count(),
            ));
            rpcs.push((format!("{{kind=\"{k}\",outcome=\"failure\"}}"), o.failures));
            bytes.push((format!("{{kind=\"{k}\"}}"), o.bytes));
        }
        counter(
            &mut out,
            "loadgen_rpcs_total",
            "RPCs of write and read units finished (after retries), by kind and outcome.",
            &as_refs(&rpcs),
        );
        counter(
            &mut out,
            "loadgen_rpc_payload_bytes_total",
            "Payload bytes of successful RPCs (data written or read), by kind.",
            &as_refs(&bytes),
        );
    }
    histogram(
        &mut out,
        "loadgen_request_latency_seconds",
        "Successful requests' latency from the intended send time (closed loop: from the send).",
        &s.success,
    );
    histogram(
        &mut out,
        "loadgen_service_time_seconds",
        "Successful requests' latency from the actual send.",
        s.service_time(),
    );
    writeln!(
        out,
        "# HELP loadgen_run_finished 1 once the run has ended.\n# TYPE loadgen_run_finished gauge\nloadgen_run_finished {}",
        u8::from(finished)
    )
    .unwrap();
    out
}

/// Binds `addr` and serves the snapshot until the runtime ends.
pub async fn serve(addr: SocketAddr) -> std::io::Result<(Snapshot, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let snapshot = Snapshot::default();
    snapshot.clone().update(&WorkerStats::default(), false);
    let shared = snapshot.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut read = 0;
                // Read the request head (any path and method are answered alike).
                while read < buf.len() {
                    match conn.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                    if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let body = shared.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(body.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Ok((snapshot, local))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorKind;
    use std::time::Duration;

    #[test]
    fn exposition_has_counters_and_cumulative_buckets() {
        let mut s = WorkerStats::default();
        for ms in [1u64, 2, 3, 200] {
            s.record_success(Duration::from_millis(ms));
        }
        s.record_failure(Duration::from_millis(1), ErrorKind::Ozone(9), String::new);
        let text = render(&s, false);
        assert!(
            text.contains("loadgen_requests_total{outcome=\"success\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("loadgen_errors_total{kind=\"result:CONTAINER_NOT_FOUND\"} 1\n"));
        assert!(
            text.contains("loadgen_request_latency_seconds_bucket{le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("loadgen_request_latency_seconds_bucket{le=\"0.0025\"} 2\n"));
        assert!(text.contains("loadgen_request_latency_seconds_bucket{le=\"0.25\"} 4\n"));
        assert!(text.contains("loadgen_request_latency_seconds_count 4\n"));
        assert!(text.contains("loadgen_run_finished 0\n"));
    }
}

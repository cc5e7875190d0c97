//! Reports of `write` and `read`: text (freon-style timer sections, one per operation type, then
//! throughput and data integrity), json (everything, latencies per operation) and csv (one header
//! and one row per run, appended to an existing --output file). MB = 2^20 bytes.

use super::args::ConnArgs;
use super::{Op, Totals};
use crate::cli::{Format, Percentiles, ReportArgs};
use crate::resilience::ResilienceCounts;
use crate::{OutputFile as Output, UsageError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

const MB: f64 = (1u64 << 20) as f64;

#[derive(Serialize, Clone, Debug)]
pub struct ShapeReport {
    pub write_size: u64,
    pub chunk_size: u64,
    pub bytes_per_checksum: u64,
    pub checksum: String,
    pub checksum_mode: String,
    pub block_size: u64,
    pub flush_size: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct OpReport {
    pub timer: String,
    pub count: u64,
    pub bytes: u64,
    pub per_second: f64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    /// Percentile ("p50") → milliseconds.
    pub percentiles_ms: BTreeMap<String, f64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct WriteReport {
    pub elapsed_s: f64,
    /// Application write() calls.
    pub writes: u64,
    pub bytes: u64,
    /// MB = 2^20 bytes.
    pub mb_per_s: f64,
    pub writes_per_s: f64,
    pub blocks_committed: u64,
    /// Bytes of successful WriteChunks in each second from the phase's start (the last second
    /// partial).
    pub goodput_series_bytes: Vec<u64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct ReadReport {
    pub elapsed_s: f64,
    pub blocks: u64,
    pub chunks: u64,
    pub bytes_read: u64,
    pub bytes_verified: u64,
    /// MB = 2^20 bytes.
    pub mb_per_s: f64,
    /// Bytes of successful ReadChunks in each second from the phase's start.
    pub goodput_series_bytes: Vec<u64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct Report {
    pub command: String,
    pub target: String,
    pub threads: u32,
    pub clients: u32,
    pub container_id: i64,
    pub shape: Option<ShapeReport>,
    pub write: Option<WriteReport>,
    pub read: Option<ReadReport>,
    /// Operation name (WriteChunk, PutBlock, GetBlock, ReadChunk, write) → latency.
    pub ops: BTreeMap<String, OpReport>,
    pub errors: BTreeMap<String, u64>,
    pub integrity_errors: u64,
    /// `--retry-backoff` with the retry count, or "none".
    pub retry_policy: String,
    pub client_throttle: String,
    pub throttle_scope: String,
    /// Attempts, retries, rejections and client-throttle decisions of every operation.
    pub resilience: ResilienceCounts,
    #[serde(skip)]
    resilience_active: bool,
    #[serde(skip)]
    totals: Totals,
    #[serde(skip)]
    op_order: Vec<Op>,
}

fn pct_key(p: f64) -> String {
    format!("p{p}")
}

impl Report {
    pub fn new(
        command: &str,
        target: &str,
        conn: &ConnArgs,
        shape: Option<ShapeReport>,
        write: Option<(Totals, Duration)>,
        read: Option<(Totals, Duration)>,
    ) -> Self {
        let mut totals = Totals::default();
        let write_report = write.map(|(t, elapsed)| {
            let secs = elapsed.as_secs_f64().max(1e-9);
            let r = WriteReport {
                elapsed_s: secs,
                writes: t.count(Op::Write),
                bytes: t.bytes(Op::Write),
                mb_per_s: t.bytes(Op::Write) as f64 / MB / secs,
                writes_per_s: t.count(Op::Write) as f64 / secs,
                blocks_committed: t.blocks.len() as u64,
                goodput_series_bytes: t.goodput_series.clone(),
            };
            totals.merge(t);
            (r, secs)
        });
        let read_report = read.map(|(t, elapsed)| {
            let secs = elapsed.as_secs_f64().max(1e-9);
            let r = ReadReport {
                elapsed_s: secs,
                blocks: t.blocks_read,
                chunks: t.chunks_read,
                bytes_read: t.bytes_read,
                bytes_verified: t.bytes_verified,
                mb_per_s: t.bytes_read as f64 / MB / secs,
                goodput_series_bytes: t.goodput_series.clone(),
            };
            totals.merge(t);
            (r, secs)
        });
        let mut ops = BTreeMap::new();
        let mut op_order = Vec::new();
        for (op, s) in &totals.ops {
            let secs = match op {
                Op::Write | Op::WriteChunk | Op::PutBlock => write_report.as_ref().map(|w| w.1),
                _ => read_report.as_ref().map(|r| r.1),
            }
            .unwrap_or(1.0);
            let h = &s.latency;
            ops.insert(
                op.name().to_string(),
                OpReport {
                    timer: op.timer().to_string(),
                    count: h.count(),
                    bytes: s.bytes,
                    per_second: h.count() as f64 / secs,
                    min_ms: h.min_ms(),
                    mean_ms: h.mean_ms(),
                    max_ms: h.max_ms(),
                    percentiles_ms: BTreeMap::new(),
                },
            );
            op_order.push(*op);
        }
        let res = super::resilience_of(conn);
        Self {
            command: command.to_string(),
            target: target.to_string(),
            threads: conn.threads,
            clients: conn.clients,
            container_id: conn.container_id,
            shape,
            write: write_report.map(|w| w.0),
            read: read_report.map(|r| r.0),
            ops,
            errors: totals.errors.clone(),
            integrity_errors: totals.integrity_errors(),
            retry_policy: res.retry.to_string(),
            client_throttle: res.throttle.to_string(),
            throttle_scope: res.scope.to_string(),
            resilience: totals.resilience,
            resilience_active: res.active(),
            totals,
            op_order,
        }
    }

    fn fill_percentiles(&mut self, percentiles: &Percentiles) {
        for op in &self.op_order {
            let h = &self.totals.ops[op].latency;
            let r = self.ops.get_mut(op.name()).expect("every op has a report");
            r.percentiles_ms = percentiles
                .0
                .iter()
                .map(|p| (pct_key(*p), h.percentile_ms(*p)))
                .collect();
        }
    }

    pub fn failures(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn text(&self, percentiles: &Percentiles) -> String {
        let mut out = String::new();
        writeln!(
            out,
            "loadgen {}: {} thread(s) over {} connection(s), container {}\ntarget: {}",
            self.command, self.threads, self.clients, self.container_id, self.target
        )
        .unwrap();
        if let Some(s) = &self.shape {
            writeln!(
                out,
                "write size {}, chunk size {}, bytes per checksum {}, checksum {} ({}), block size {}, flush size {} (KB/MB = powers of 1024)",
                size(s.write_size),
                size(s.chunk_size),
                size(s.bytes_per_checksum),
                s.checksum,
                s.checksum_mode,
                size(s.block_size),
                size(s.flush_size)
            )
            .unwrap();
        }
        out.push_str(
            "\n-- Timers ----------------------------------------------------------------------\n",
        );
        for op in &self.op_order {
            let r = &self.ops[op.name()];
            writeln!(out, "{} ({})", r.timer, op.name()).unwrap();
            writeln!(out, "             count = {}", r.count).unwrap();
            writeln!(out, "         mean rate = {:.2} calls/second", r.per_second).unwrap();
            writeln!(out, "               min = {:.2} milliseconds", r.min_ms).unwrap();
            writeln!(out, "              mean = {:.2} milliseconds", r.mean_ms).unwrap();
            writeln!(out, "               max = {:.2} milliseconds", r.max_ms).unwrap();
            let h = &self.totals.ops[op].latency;
            for p in &percentiles.0 {
                let label = format!("{p}% <=");
                writeln!(out, "{label:>18} {:.2} milliseconds", h.percentile_ms(*p)).unwrap();
            }
            out.push('\n');
        }
        if let Some(w) = &self.write {
            writeln!(
                out,
                "Written: {} bytes ({:.1} MB) in {} application writes, {} block(s) committed, in {:.3} s",
                w.bytes,
                w.bytes as f64 / MB,
                w.writes,
                w.blocks_committed,
                w.elapsed_s
            )
            .unwrap();
            writeln!(
                out,
                "Write throughput: {:.2} MB/s, {:.2} writes/s (MB = 2^20 bytes)",
                w.mb_per_s, w.writes_per_s
            )
            .unwrap();
        }
        if let Some(r) = &self.read {
            writeln!(
                out,
                "Read: {} bytes in {} chunk(s) of {} block(s) in {:.3} s, {:.2} MB/s (MB = 2^20 bytes)",
                r.bytes_read, r.chunks, r.blocks, r.elapsed_s, r.mb_per_s
            )
            .unwrap();
            writeln!(out, "Bytes verified: {}", r.bytes_verified).unwrap();
        }
        if self.resilience_active {
            let r = &self.resilience;
            writeln!(
                out,
                "Retries: {} attempts, {} retries (at most {} for one operation), {} rejected by the target; policy {}",
                r.attempts, r.retries, r.max_retries_per_request, r.rejections, self.retry_policy
            )
            .unwrap();
            writeln!(
                out,
                "Client throttle: {} ({} scope), {} attempts delayed ({:.1} s in all), {} rejected locally, {} operations ended locally rejected",
                self.client_throttle,
                self.throttle_scope,
                r.throttle_delays,
                r.throttle_delay_ms as f64 / 1000.0,
                r.local_rejections,
                r.locally_rejected
            )
            .unwrap();
        }
        writeln!(out, "Data-integrity errors: {}", self.integrity_errors).unwrap();
        if self.errors.is_empty() {
            writeln!(out, "Errors: none").unwrap();
        } else {
            writeln!(out, "Errors:").unwrap();
            for (k, n) in &self.errors {
                writeln!(out, "  {k}: {n}").unwrap();
            }
        }
        out
    }

    pub fn csv(&self, header: bool) -> String {
        let mut out = String::new();
        if header {
            out.push_str("command,threads,write_size_bytes,chunk_size_bytes,bytes_per_checksum,checksum,checksum_mode,write_elapsed_s,writes,write_bytes,write_mb_per_s,writes_per_s,write_chunk_mean_ms,write_chunk_p99_ms,put_block_mean_ms,put_block_p99_ms,read_bytes,bytes_verified,read_mb_per_s,integrity_errors,errors,client_throttle,attempts,retries,rejections,locally_throttled\n");
        }
        let (ws, cs, bpc, ck, mode) = self.shape.as_ref().map_or(
            (
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ),
            |s| {
                (
                    s.write_size.to_string(),
                    s.chunk_size.to_string(),
                    s.bytes_per_checksum.to_string(),
                    s.checksum.clone(),
                    s.checksum_mode.clone(),
                )
            },
        );
        let lat = |op: Op, p: Option<f64>| {
            self.totals.ops.get(&op).map_or(String::new(), |s| match p {
                Some(p) => format!("{:.3}", s.latency.percentile_ms(p)),
                None => format!("{:.3}", s.latency.mean_ms()),
            })
        };
        let (we, wn, wb, wmb, wps) = self.write.as_ref().map_or(
            (
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ),
            |w| {
                (
                    format!("{:.3}", w.elapsed_s),
                    w.writes.to_string(),
                    w.bytes.to_string(),
                    format!("{:.2}", w.mb_per_s),
                    format!("{:.2}", w.writes_per_s),
                )
            },
        );
        let (rb, rv, rmb) =
            self.read
                .as_ref()
                .map_or((String::new(), String::new(), String::new()), |r| {
                    (
                        r.bytes_read.to_string(),
                        r.bytes_verified.to_string(),
                        format!("{:.2}", r.mb_per_s),
                    )
                });
        writeln!(
            out,
            "{},{},{ws},{cs},{bpc},{ck},{mode},{we},{wn},{wb},{wmb},{wps},{},{},{},{},{rb},{rv},{rmb},{},{},{},{},{},{},{}",
            self.command,
            self.threads,
            lat(Op::WriteChunk, None),
            lat(Op::WriteChunk, Some(99.0)),
            lat(Op::PutBlock, None),
            lat(Op::PutBlock, Some(99.0)),
            self.integrity_errors,
            self.failures(),
            self.client_throttle,
            self.resilience.attempts,
            self.resilience.retries,
            self.resilience.rejections,
            self.resilience.locally_throttled(),
        )
        .unwrap();
        out
    }
}

fn size(bytes: u64) -> String {
    common::units::format_size(bytes)
}

pub(crate) fn open_output(report: &ReportArgs) -> Result<Option<Output>, UsageError> {
    Output::open(report.output.as_ref(), report.format)
}

pub(crate) fn finish(
    mut report: Report,
    args: &ReportArgs,
    output: Option<Output>,
) -> Result<super::BlockSummary, UsageError> {
    report.fill_percentiles(&args.percentiles);
    let text = report.text(&args.percentiles);
    let rendered = match args.format {
        Format::Text => text.clone(),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report).expect("a report serializes");
            s.push('\n');
            s
        }
        Format::Csv => report.csv(!output.as_ref().is_some_and(|o| o.has_rows)),
    };
    let written_to = output.map(|out| out.write(&rendered)).transpose()?;
    Ok(super::BlockSummary {
        report,
        rendered,
        text,
        written_to,
        format: args.format,
    })
}

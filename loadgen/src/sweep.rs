//! `loadgen sweep`: runs a workload once per cell of a parameter matrix and writes one CSV (a row
//! per cell), one JSON (every cell's full result) and one SVG chart, and prints a markdown table.
//! dn-sim parameters (`handler_count`, `delay`, `max_queue`) are set through dn-sim's admin
//! endpoint (`PUT /config`) before each cell (`delay` is the echo's, or with `write` the
//! WriteChunk's); loadgen parameters (`threads`, `clients`, `rate`; for echo `payload_req`,
//! `payload_resp`, `pipeline`, `sleep_time_ms`; for write `write_size`, `chunk_size`,
//! `checksum`, `checksum_mode`) override the workload's flags. Without `--target` an embedded
//! dn-sim with an admin listener on 127.0.0.1 is started.

use crate::cli::sweep::METRICS;
pub use crate::cli::sweep::{Param, ParamName, SweepArgs, heading};
use crate::cli::{Cli, Command, CommonArgs, EchoArgs, Format, LoadRate, ReportArgs, WriteArgs};
use crate::config::RunConfig;
use crate::error::Error;
use crate::plot::{self, Panel, Selection, Table};
use crate::results::Results;
use crate::run::ToolOutput;
use clap::Parser;
use serde_json::{Map, Value, json};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A minimal HTTP/1.1 exchange with dn-sim's admin listener; the answer's body on 200.
pub(crate) fn http(addr: &str, method: &str, path: &str, body: &str) -> Result<String, String> {
    let err = |e: std::io::Error| format!("{method} http://{addr}{path}: {e}");
    let sock = addr
        .to_socket_addrs()
        .map_err(err)?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(5)).map_err(err)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(err)?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(err)?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(err)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        return Err(format!(
            "{method} http://{addr}{path}: HTTP {status}: {}",
            body.trim()
        ));
    }
    Ok(body.to_string())
}

/// dn-sim's settings for one cell, as a `PUT /config` body (empty: nothing to change). `delay`
/// is that of the workload's data requests: echoes, or WriteChunks.
fn dn_sim_changes(cell: &[(ParamName, &str, f64)], delayed: &str) -> Map<String, Value> {
    let mut changes = Map::new();
    for &(name, text, number) in cell {
        match name {
            ParamName::HandlerCount => {
                changes.insert("handler_count".into(), json!(number as u64));
            }
            ParamName::Delay if number == 0.0 => {
                changes.insert("delays".into(), json!({}));
            }
            ParamName::Delay => {
                changes.insert("delays".into(), json!({ delayed: text }));
            }
            ParamName::MaxQueue if number.is_nan() => {
                changes.insert("max_queue".into(), Value::Null);
            }
            ParamName::MaxQueue => {
                changes.insert("max_queue".into(), json!(number as u64));
            }
            _ => {}
        }
    }
    changes
}

/// The workload a sweep runs, with its flags.
#[derive(Clone)]
enum Base {
    Echo(EchoArgs),
    Write(WriteArgs),
}

impl Base {
    fn name(&self) -> &'static str {
        match self {
            Base::Echo(_) => "echo",
            Base::Write(_) => "write",
        }
    }

    fn common(&mut self) -> &mut CommonArgs {
        match self {
            Base::Echo(a) => &mut a.common,
            Base::Write(a) => &mut a.common,
        }
    }

    fn report(&mut self) -> &mut ReportArgs {
        match self {
            Base::Echo(a) => &mut a.report,
            Base::Write(a) => &mut a.report,
        }
    }

    fn percentiles(&self) -> &[f64] {
        match self {
            Base::Echo(a) => &a.report.percentiles.0,
            Base::Write(a) => &a.report.percentiles.0,
        }
    }

    fn config(&self) -> Result<RunConfig, Error> {
        match self {
            Base::Echo(a) => RunConfig::echo(a),
            Base::Write(a) => RunConfig::write(a),
        }
    }

    /// What the embedded dn-sim must hold: a write's container, and whether it is read back.
    fn embedded_store(&self) -> Option<(i64, bool)> {
        match self {
            Base::Write(a) => Some((a.common.container_id, a.then_read)),
            Base::Echo(_) => None,
        }
    }
}

fn apply_loadgen(base: &mut Base, cell: &[(ParamName, &str, f64)]) {
    for &(name, text, n) in cell {
        let c = base.common();
        match name {
            ParamName::Threads => c.threads = n as u32,
            ParamName::Clients => c.clients = n as u32,
            ParamName::Rate => {
                c.rate = Some(LoadRate::PerSecond(n));
                c.rate_schedule = None;
            }
            _ => {}
        }
        match base {
            Base::Echo(args) => match name {
                ParamName::PayloadReq => args.payload_req = n as u64,
                ParamName::PayloadResp => args.payload_resp = n as u64,
                ParamName::Pipeline => args.common.pipeline = n as u32,
                ParamName::SleepTimeMs => args.sleep_time_ms = n as i32,
                _ => {}
            },
            Base::Write(args) => match name {
                ParamName::WriteSize => args.shape.write_size = n as u64,
                ParamName::ChunkSize => args.shape.chunk_size = n as u64,
                ParamName::Checksum => {
                    if let Ok(t) = crate::workload::block_writer::checksum_type_of(text) {
                        args.shape.checksum = t;
                    }
                }
                ParamName::ChecksumMode => {
                    if let Ok(m) = text.parse() {
                        args.shape.checksum_mode = m;
                    }
                }
                _ => {}
            },
        }
    }
}

fn fmt(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

/// One cell's row: the measured values, by column.
fn measured(
    r: &Results,
    config: &RunConfig,
    handlers: Option<f64>,
    delay_ms: Option<f64>,
) -> Vec<(&'static str, String)> {
    let h = &r.corrected;
    let outstanding = config.max_in_flight() as f64;
    let predicted = match (handlers, delay_ms) {
        (Some(hc), Some(d)) if d > 0.0 => {
            let p = hc.min(outstanding) / (d / 1000.0);
            Some(r.description.peak_rate.map_or(p, |rate| p.min(rate)))
        }
        _ => None,
    };
    const MB: f64 = 1024.0 * 1024.0;
    vec![
        ("outstanding", fmt(outstanding, 0)),
        ("requests", r.requests().to_string()),
        ("errors", r.failures().to_string()),
        ("throughput_calls_per_s", fmt(r.throughput(), 1)),
        ("successes_per_s", fmt(r.success_rate(), 1)),
        ("p50_ms", fmt(h.percentile_ms(50.0), 3)),
        ("p90_ms", fmt(h.percentile_ms(90.0), 3)),
        ("p99_ms", fmt(h.percentile_ms(99.0), 3)),
        ("p99_9_ms", fmt(h.percentile_ms(99.9), 3)),
        ("max_ms", fmt(h.max_ms(), 3)),
        (
            "latency",
            if r.description.open_loop() {
                "intended-send"
            } else {
                "send"
            }
            .into(),
        ),
        ("rx_mb_per_s", fmt(r.bytes_received_per_s() / MB, 2)),
        ("tx_mb_per_s", fmt(r.bytes_sent_per_s() / MB, 2)),
        (
            "littles_law_calls_per_s",
            predicted.map_or(String::new(), |p| fmt(p, 0)),
        ),
        (
            "measured_over_predicted_pct",
            predicted.map_or(String::new(), |p| fmt(r.throughput() / p * 100.0, 1)),
        ),
    ]
}

/// Every combination of the parameters' values, the first parameter changing slowest.
fn matrix(params: &[Param]) -> Vec<Vec<usize>> {
    let mut cells = vec![vec![]];
    for p in params {
        cells = cells
            .into_iter()
            .flat_map(|c| {
                (0..p.values.len()).map(move |i| {
                    let mut c = c.clone();
                    c.push(i);
                    c
                })
            })
            .collect();
    }
    cells
}

pub fn run(args: &SweepArgs) -> Result<ToolOutput, Error> {
    let usage = |m: String| Error::Usage(format!("sweep: {m}"));
    for (i, p) in args.params.iter().enumerate() {
        if args.params[..i].iter().any(|q| q.name == p.name) {
            return Err(usage(format!("--param {} is given twice", p.name.column())));
        }
    }
    let parsed = Cli::try_parse_from(
        std::iter::once("loadgen".to_string()).chain(args.workload.iter().cloned()),
    )
    .map_err(|e| {
        let text = e.to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("invalid workload flags")
            .trim_start_matches("error: ")
            .to_string();
        usage(format!("workload flags: {first}"))
    })?;
    let mut base = match parsed.command {
        Command::Echo(a) => Base::Echo(*a),
        Command::Write(a) => Base::Write(*a),
        _ => {
            return Err(usage(
                "the workload must be `echo` or `write` (e.g. `-- echo -t 32 --duration 5s`)"
                    .into(),
            ));
        }
    };
    for p in &args.params {
        if let Some(w) = p.name.only_for()
            && w != base.name()
        {
            return Err(usage(format!(
                "--param {} applies to {w}, not {}",
                p.name.column(),
                base.name()
            )));
        }
    }
    base.report().format = Format::Text;
    base.report().output = None;
    let needs_admin = args.params.iter().any(|p| p.name.is_dn_sim());
    let target = args.target.clone().or(base.common().target.clone());
    let (_embedded, target, admin) = match target {
        Some(t) => {
            if needs_admin && args.admin.is_none() {
                return Err(usage(
                    "dn-sim parameters with --target need --admin HOST:PORT (dn-sim's --metrics-listen)".into(),
                ));
            }
            (None, t, args.admin.clone())
        }
        None => {
            let threads = base.common().embedded_threads as usize;
            // --ratis: the cells go to the embedded dn-sim's Ratis port, hosting their pipeline.
            let ratis_group = base.config()?.ratis;
            let server =
                crate::embedded::start_for_sweep(base.embedded_store(), ratis_group, threads)?;
            let t = server
                .ratis_addr()
                .unwrap_or_else(|| server.local_addr())
                .to_string();
            let admin = server.metrics_addr().map(|a| a.to_string());
            eprintln!(
                "loadgen sweep: embedded dn-sim on {t}, admin on http://{}",
                admin.as_deref().unwrap_or("-")
            );
            (Some(server), t, admin)
        }
    };
    base.common().target = Some(target.clone());
    // dn-sim's settings before the sweep, restored after it.
    let original: Option<Map<String, Value>> = match (&admin, needs_admin) {
        (Some(a), true) => {
            // dn-sim's admin port not answering before the first cell: an unreachable target.
            let body = http(a, "GET", "/config", "")
                .map_err(|m| Error::Unreachable(format!("sweep: {m}")))?;
            Some(serde_json::from_str(&body).map_err(|e| usage(format!("GET /config: {e}")))?)
        }
        _ => None,
    };
    let initial_handlers = original
        .as_ref()
        .and_then(|o| o.get("handler_count"))
        .and_then(Value::as_f64);
    let csv = args.out.with_extension("csv");
    let json_path = args.out.with_extension("json");
    let svg = args.out.with_extension("svg");
    if let Some(dir) = csv.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    }

    let mut table = Table {
        header: args
            .params
            .iter()
            .map(|p| p.name.column().to_string())
            .chain(METRICS.iter().map(|(c, _)| c.to_string()))
            .collect(),
        rows: Vec::new(),
    };
    let mut cell_json = Vec::new();
    let outcome = run_cells(
        args,
        &base,
        admin.as_deref(),
        initial_handlers,
        &mut table,
        &mut cell_json,
    );
    if let (Some(a), Some(o)) = (&admin, &original) {
        let restore: Map<String, Value> = ["handler_count", "max_queue", "delays"]
            .iter()
            .filter_map(|k| o.get(*k).map(|v| (k.to_string(), v.clone())))
            .collect();
        if let Err(e) = http(a, "PUT", "/config", &Value::Object(restore).to_string()) {
            eprintln!("loadgen sweep: warning: could not restore dn-sim's settings: {e}");
        }
    }
    outcome?;

    // The cells ran: a table or chart that cannot be written is an I/O failure (exit 1).
    let io = |m: String| Error::Io(format!("sweep: {m}"));
    std::fs::write(&csv, table.to_csv()).map_err(|e| io(format!("{}: {e}", csv.display())))?;
    let doc = json!({
        "sweep": {
            "params": args.params.iter().map(|p| json!({
                "name": p.name.column(),
                "values": p.values.iter().map(|v| v.0.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "workload": args.workload,
            "target": target,
            "embedded": _embedded.is_some(),
        },
        "cells": cell_json,
    });
    let text = serde_json::to_string(&doc).expect("JSON");
    std::fs::write(&json_path, text + "\n")
        .map_err(|e| io(format!("{}: {e}", json_path.display())))?;

    let panel = chart(args, &table).map_err(usage)?;
    plot::draw(&svg, (900, 560), &[panel]).map_err(|e| io(format!("{}: {e}", svg.display())))?;
    eprintln!(
        "loadgen sweep: wrote {}, {} and {}",
        csv.display(),
        json_path.display(),
        svg.display()
    );
    Ok(ToolOutput {
        stdout: markdown(args, &table),
    })
}

/// Runs every cell of the matrix, adding a CSV row and a JSON object per cell.
fn run_cells(
    args: &SweepArgs,
    base: &Base,
    admin: Option<&str>,
    initial_handlers: Option<f64>,
    table: &mut Table,
    cell_json: &mut Vec<Value>,
) -> Result<(), Error> {
    let cells = matrix(&args.params);
    for (k, idx) in cells.iter().enumerate() {
        let cell: Vec<(ParamName, &str, f64)> = args
            .params
            .iter()
            .zip(idx)
            .map(|(p, &i)| (p.name, p.values[i].0.as_str(), p.values[i].1))
            .collect();
        let label = cell
            .iter()
            .map(|(n, t, _)| {
                format!(
                    "{}={t}",
                    n.column().trim_end_matches("_ms").trim_end_matches("_kb")
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        let delayed = match base {
            Base::Echo(_) => "echo",
            Base::Write(_) => "write_chunk",
        };
        let changes = dn_sim_changes(&cell, delayed);
        if !changes.is_empty() {
            let admin = admin.expect("checked above");
            // Mid-sweep: the admin port was reachable before the first cell.
            http(admin, "PUT", "/config", &Value::Object(changes).to_string())
                .map_err(|m| Error::Run(format!("sweep: {m}")))?;
            std::thread::sleep(args.settle);
        }
        let mut run = base.clone();
        apply_loadgen(&mut run, &cell);
        let config = run
            .config()
            .map_err(|e| e.map_message(|m| format!("sweep: {label}: {m}")))?;
        eprintln!("loadgen sweep: cell {}/{}: {label}", k + 1, cells.len());
        // A target unreachable at the first cell is unreachable; at a later one, the sweep
        // could not complete.
        let summary = crate::run::run_config(&config).map_err(|e| {
            let e = if k == 0 { e } else { e.mid_run() };
            e.map_message(|m| format!("sweep: {label}: {m}"))
        })?;
        let r = summary.results;
        let find = |n: ParamName| cell.iter().find(|c| c.0 == n).map(|c| c.2);
        let handlers = find(ParamName::HandlerCount).or(initial_handlers);
        let row = measured(&r, &config, handlers, find(ParamName::Delay));
        eprintln!(
            "loadgen sweep:   {} calls/s, p99 {} ms, {} error(s)",
            row[3].1, row[7].1, row[2].1
        );
        let mut params = Map::new();
        let mut cells_text: Vec<String> = Vec::new();
        for &(n, t, v) in &cell {
            params.insert(n.column().into(), json!(t));
            cells_text.push(if v.is_nan() {
                t.to_string()
            } else {
                trim_number(v)
            });
        }
        cells_text.extend(row.iter().map(|(_, v)| v.clone()));
        table.rows.push(cells_text);
        cell_json.push(json!({
            "params": params,
            "measured": row.iter().map(|(c, v)| (c.to_string(), json!(v))).collect::<Map<_, _>>(),
            "result": crate::report::json::to_json(&r, base.percentiles()),
        }));
    }
    Ok(())
}

fn trim_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn chart(args: &SweepArgs, table: &Table) -> Result<Panel, String> {
    let varying: Vec<&Param> = args.params.iter().filter(|p| p.values.len() > 1).collect();
    let x = match &args.x {
        Some(x) => args
            .params
            .iter()
            .find(|p| {
                p.name.column() == x || ParamName::ALL.iter().any(|(n, q)| n == x && *q == p.name)
            })
            .map(|p| p.name.column())
            .ok_or_else(|| format!("--x {x} is not one of the --param names"))?,
        None => varying
            .last()
            .copied()
            .or(args.params.last())
            .map(|p| p.name.column())
            .expect("at least one --param"),
    };
    let series: Vec<String> = varying
        .iter()
        .map(|p| p.name.column().to_string())
        .filter(|c| c != x)
        .collect();
    let mut y = vec![args.y.clone()];
    let mut dashed = Vec::new();
    let has_prediction = table.rows.iter().any(|r| {
        let i = table.column("littles_law_calls_per_s").unwrap_or(0);
        !r[i].is_empty()
    });
    if args.y == "throughput_calls_per_s" && has_prediction {
        y.push("littles_law_calls_per_s".into());
        dashed.push("littles_law_calls_per_s".to_string());
    }
    let sel = Selection {
        x,
        y: &y,
        series: &series,
        dashed: &dashed,
    };
    let (x_axis, mut lines) = plot::lines_from_table(table, &sel)?;
    for l in &mut lines {
        l.name = l
            .name
            .replace("Little's law (calls/s)", "Little's law")
            .replace("throughput (calls/s)", "measured");
    }
    Ok(Panel {
        title: args
            .title
            .clone()
            .unwrap_or_else(|| format!("{} vs {}", heading(&args.y), heading(x))),
        x_label: heading(x),
        y_label: heading(&args.y),
        x_axis,
        log_x: args.log_x,
        log_y: args.log_y,
        lines,
    })
}

fn markdown(args: &SweepArgs, table: &Table) -> String {
    let cols: Vec<String> = if args.table.is_empty() {
        let mut c: Vec<String> = args
            .params
            .iter()
            .map(|p| p.name.column().to_string())
            .collect();
        c.extend(
            [
                "throughput_calls_per_s",
                "p50_ms",
                "p99_ms",
                "p99_9_ms",
                "rx_mb_per_s",
                "errors",
            ]
            .map(String::from),
        );
        if args.params.iter().any(|p| p.name == ParamName::Delay) {
            c.extend(["littles_law_calls_per_s", "measured_over_predicted_pct"].map(String::from));
        }
        c
    } else {
        args.table.clone()
    };
    let idx: Vec<Option<usize>> = cols.iter().map(|c| table.column(c).ok()).collect();
    let mut out = format!(
        "| {} |\n",
        cols.iter()
            .map(|c| heading(c))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    out.push_str(&format!("|{}\n", "---:|".repeat(cols.len())));
    for r in &table.rows {
        let cells: Vec<&str> = idx
            .iter()
            .map(|i| i.and_then(|i| r.get(i)).map_or("", |s| s.as_str()))
            .map(|s| if s.is_empty() { "—" } else { s })
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::sweep::parse_param;

    #[test]
    fn params_parse_with_units_and_the_matrix_varies_the_first_slowest() {
        let d = parse_param("delay=0,1ms,2.5ms").unwrap();
        assert_eq!(
            d.values.iter().map(|v| v.1).collect::<Vec<_>>(),
            [0.0, 1.0, 2.5]
        );
        let h = parse_param("handler_count=1,4").unwrap();
        assert_eq!(
            matrix(&[d, h]),
            [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]
        );
        assert!(
            parse_param("handlers=1")
                .unwrap_err()
                .contains("unknown parameter")
        );
        assert!(parse_param("threads=0").is_err());
        assert!(parse_param("payload_resp=99999").is_err());
        assert!(parse_param("max_queue=none").unwrap().values[0].1.is_nan());
    }
}

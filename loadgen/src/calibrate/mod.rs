//! `loadgen calibrate`: measures a DataNode (a real one or dn-sim) and fits the costs of
//! dn-sim's stages to it, writing a profile for `dn-sim --profile` ([`fit`] says how).
//!
//! The cells, each a `loadgen echo` or `loadgen write` run in this process against `--target`
//! at its current pool (`--pool`):
//! - at one request in flight (1 connection × 1 worker): echoes of 0 B and 1 MiB responses, and
//!   WriteChunks of 64 KB, 1 MB and 4 MB chunks (service time per command and size);
//! - the saturation curve of 0 B echoes: 4, 8 and `--threads` workers (requests in flight) on
//!   4, 8 and `--clients` connections;
//! - 1 MiB echoes under load: 8 workers on 8 connections (at most `--clients`, `--threads`);
//! - 0 B echoes that sleep 1 ms and 5 ms on the handler, at `--clients` × `--threads` (how much
//!   longer than asked a sleep holds a handler, and how that grows with the sleep), on the
//!   baseline too.
//!
//! With `--baseline HOST:PORT` (a dn-sim without a profile) the cells at one request in flight
//! run there too, and their per-byte slopes, the client's and the transport's share, are taken
//! off the target's. Two more run there only: echoes of 0 B and 1 MiB at one request in flight
//! that sleep on the handler as long as the target's 1 MiB echo took, for the response's slope
//! after a client waited that long.
//!
//! With `--admin` (dn-sim's) and `--pools`, the two loaded cells (0 B at `--clients` ×
//! `--threads`, 1 MiB with 8 workers) run again at each pool, set by `PUT /config`. A real DataNode
//! sizes its event loops at start, so its other pools come from runs of their own, restarted
//! with the pool key, saved with `--cells-out` and given back with `--with`.

mod dn_sim_process;
pub mod fit;
pub mod sleep_tail;

use crate::cli::calibrate::CalibrateArgs;
use crate::cli::{Cli, Command};
use crate::error::Error;
use crate::run::ToolOutput;
use clap::Parser;
use fit::{Cell, Kind};
use serde_json::{Value, json};
use std::path::Path;

const MIB: u64 = 1 << 20;

/// The pool of the embedded dn-sim that checks the 1 MiB echo and the echo payload's lock:
/// dn-sim's default, where neither is held back by too few handlers.
const CHECK_POOL: u32 = 10;

pub fn run(args: &CalibrateArgs) -> Result<ToolOutput, Error> {
    let usage = |m: String| Error::Usage(format!("calibrate: {m}"));
    if !args.pools.is_empty() && args.admin.is_none() {
        return Err(usage(
            "--pools needs --admin HOST:PORT (dn-sim's --metrics-listen); restart a real DataNode per pool and use --with".into(),
        ));
    }
    if args
        .check_on
        .as_deref()
        .is_some_and(|c| c.trim().is_empty())
    {
        return Err(usage("--check-on names no program".into()));
    }
    if args.target.is_none() && args.with.is_empty() {
        return Err(usage("--target HOST:PORT or --with FILE is needed".into()));
    }
    if args.target.is_none() && !args.pools.is_empty() {
        return Err(usage("--pools needs --target".into()));
    }
    let mut cells = Vec::new();
    for path in &args.with {
        cells.extend(read_cells(path).map_err(|m| usage(format!("--with {m}")))?);
    }
    let mut measured = Vec::new();
    if let Some(target) = &args.target {
        measured = measure(args, target)?;
    }
    if let (Some(base), None) = (&args.baseline, &args.target) {
        for (kind, bytes) in SINGLE {
            let mut c = cell(args, base, 0, kind, bytes, (1, 1), 0).map_err(Error::mid_run)?;
            c.baseline = true;
            measured.push(c);
        }
        let idle = idle_cells(args, base, &cells).map_err(Error::mid_run)?;
        measured.extend(idle);
    }
    if let Some(path) = &args.cells_out {
        let text = serde_json::to_string_pretty(&json!({ "cells": measured })).expect("JSON");
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::Io(format!("calibrate: {}: {e}", path.display())))?;
    }
    cells.extend(measured);
    let (cells, merged_away) = fit::merge_repeats(cells);
    if merged_away > 0 {
        eprintln!(
            "loadgen calibrate: {merged_away} more measurement(s) of cells already measured \
             (several --with files of one pool): each such cell fitted as the geometric mean of \
             its measurements"
        );
    }
    let cores = args.cores.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4096) as u32)
    });
    let mut fitted = match fit::fit(&cells, cores) {
        Ok(f) => f,
        // Measured but not enough to fit: the cells file is the result.
        Err(m) if args.out.is_none() => {
            return Ok(ToolOutput {
                stdout: format!("{} cell(s) measured; no fit: {m}\n", cells.len()),
            });
        }
        Err(m) => return Err(usage(format!("cannot fit: {m}"))),
    };
    if args.out.is_some() && args.check_rounds > 0 {
        check(args, &mut fitted)?;
    }
    if let Some(path) = &args.out {
        let repeats = match merged_away {
            0 => String::new(),
            n => format!(" ({n} more measurement(s) of them merged in)"),
        };
        let source = match &args.target {
            Some(t) => format!(
                "loadgen calibrate against {t} (pool {}), {} cell(s) incl. --with{repeats}",
                args.pool,
                cells.len()
            ),
            None => format!(
                "loadgen calibrate of {} cell(s) from --with{repeats}",
                cells.len()
            ),
        };
        let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        std::fs::write(path, fitted.to_toml(&args.release, &source, &at))
            .map_err(|e| Error::Io(format!("calibrate: {}: {e}", path.display())))?;
        eprintln!("loadgen calibrate: wrote {}", path.display());
    }
    Ok(ToolOutput {
        stdout: fitted.markdown(),
    })
}

/// The dn-sim a check runs on, with the profile as it stands; it stops when dropped.
enum CheckDnSim {
    Embedded(crate::embedded::Server),
    Process(dn_sim_process::DnSimProcess),
}

impl CheckDnSim {
    fn addr(&self) -> String {
        match self {
            CheckDnSim::Embedded(server) => server.local_addr().to_string(),
            CheckDnSim::Process(process) => process.addr().to_string(),
        }
    }
}

/// The profile's checks on a dn-sim with the profile as it stands (embedded, or a process of
/// `--check-on`'s), up to `--check-rounds` rounds each: the loops', the handler's and the CPU
/// stage's costs per message on the loaded 0 B echoes they were priced on
/// (`fit::SaturationCheck`), then the 1 MiB echo at one request in flight (`fit::Check`), then
/// the echo payload's lock on the loaded echo it was priced on (`fit::LockCheck`), then the 0 B
/// echo at one request in flight (`fit::FloorCheck`). Each runs only when the fit has what it
/// checks.
fn check(args: &CalibrateArgs, fitted: &mut fit::Fitted) -> Result<(), Error> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let command: Option<Vec<String>> = args
        .check_on
        .as_ref()
        .map(|c| c.split_whitespace().map(str::to_string).collect());
    let on = if command.is_some() {
        "a dn-sim process (--check-on)"
    } else {
        "an embedded dn-sim"
    };
    let dn_sim = |fitted: &fit::Fitted, pool: u32| {
        let profile = fitted.to_toml(&args.release, "loadgen calibrate's check", "");
        match &command {
            Some(command) => {
                dn_sim_process::DnSimProcess::start(command, &profile, pool, args.container_id)
                    .map(CheckDnSim::Process)
            }
            None => crate::embedded::start_profiled(&profile, args.container_id, pool, threads)
                .map(CheckDnSim::Embedded),
        }
    };
    if fitted.saturation_checkable() {
        // One dn-sim per pool and round, its cells in a row.
        let mut pools: Vec<u32> = fitted.saturation_cells.iter().map(|c| c.pool).collect();
        pools.sort_unstable();
        pools.dedup();
        for round in 1..=args.check_rounds {
            eprintln!("loadgen calibrate: saturation check round {round} on {on} with the profile");
            let mut rates = vec![0.0; fitted.saturation_cells.len()];
            for &pool in &pools {
                let server = dn_sim(fitted, pool)?;
                let addr = server.addr();
                for (i, c) in fitted.saturation_cells.iter().enumerate() {
                    if c.pool == pool {
                        let shape = (c.clients, c.threads);
                        rates[i] = cell(args, &addr, pool, Kind::Echo, 0, shape, 0)
                            .map_err(Error::mid_run)?
                            .calls_per_s;
                    }
                }
            }
            if !fitted.saturation_check_round(rates) {
                break;
            }
        }
        fitted.settle_saturation_check();
    }
    if fitted.checkable() {
        for round in 1..=args.check_rounds {
            let server = dn_sim(fitted, CHECK_POOL)?;
            let addr = server.addr();
            eprintln!("loadgen calibrate: check round {round} on {on} with the profile");
            let c = cell(args, &addr, CHECK_POOL, Kind::Echo, MIB, (1, 1), 0)
                .map_err(Error::mid_run)?;
            drop(server);
            if !fitted.check_round(c.mean_ms) {
                break;
            }
        }
        fitted.settle_check();
    }
    // The echo payload's lock, on the loaded echo it was priced on (`fit::LockCheck`).
    if let Some(priced) = fitted.echo_payload_cell.clone() {
        // At `CHECK_POOL` whatever the cell's pool: the price is the lock's alone, and at a
        // pool of 2 the handlers' CPU, not the lock, limits dn-sim's loaded 1 MiB echoes (142
        // calls/s at any price under 4.6 ns/B where the real DataNode made 161).
        for round in 1..=args.check_rounds {
            let server = dn_sim(fitted, CHECK_POOL)?;
            let addr = server.addr();
            eprintln!("loadgen calibrate: lock check round {round} on {on} with the profile");
            let shape = (priced.clients, priced.threads);
            let c = cell(
                args,
                &addr,
                CHECK_POOL,
                Kind::Echo,
                priced.resp_bytes,
                shape,
                0,
            )
            .map_err(Error::mid_run)?;
            drop(server);
            if !fitted.lock_check_round(c.calls_per_s) {
                break;
            }
        }
        fitted.settle_lock_check();
    }
    // The latency floor and its jitter, on the 0 B echo at one request in flight
    // (`fit::FloorCheck`), last: the loaded cells the other checks ran do not wait for it.
    if fitted.floor_checkable() {
        for round in 1..=args.check_rounds {
            let server = dn_sim(fitted, CHECK_POOL)?;
            let addr = server.addr();
            eprintln!("loadgen calibrate: floor check round {round} on {on} with the profile");
            let c =
                cell(args, &addr, CHECK_POOL, Kind::Echo, 0, (1, 1), 0).map_err(Error::mid_run)?;
            drop(server);
            if !fitted.floor_check_round(fit::Latencies::of(&c)) {
                break;
            }
        }
        fitted.settle_floor_check();
    }
    Ok(())
}

fn read_cells(path: &Path) -> Result<Vec<Cell>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    #[derive(serde::Deserialize)]
    struct File {
        cells: Vec<Cell>,
    }
    let f: File = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(c) = f
        .cells
        .iter()
        .find(|c| !(c.calls_per_s.is_finite() && c.calls_per_s > 0.0 && c.mean_ms.is_finite()))
    {
        return Err(format!(
            "{}: cell '{}' has no positive calls/s or latency",
            path.display(),
            c.label()
        ));
    }
    Ok(f.cells)
}

/// One cell: `kind` with `bytes` (echo: response; write: chunk) from `clients` × `threads`,
/// run `--rounds` times in a row; the run with the median calls/s.
fn cell(
    args: &CalibrateArgs,
    target: &str,
    pool: u32,
    kind: Kind,
    bytes: u64,
    shape: (u32, u32),
    sleep_ms: u32,
) -> Result<Cell, Error> {
    let mut runs = (0..args.rounds.max(1))
        .map(|_| cell_once(args, target, pool, kind, bytes, shape, sleep_ms))
        .collect::<Result<Vec<Cell>, Error>>()?;
    runs.sort_by(|a, b| a.calls_per_s.total_cmp(&b.calls_per_s));
    Ok(runs.swap_remove(runs.len() / 2))
}

/// One run of a cell.
fn cell_once(
    args: &CalibrateArgs,
    target: &str,
    pool: u32,
    kind: Kind,
    bytes: u64,
    (clients, threads): (u32, u32),
    sleep_ms: u32,
) -> Result<Cell, Error> {
    let mut argv: Vec<String> = vec!["loadgen".into()];
    let common = [
        "--target".to_string(),
        target.to_string(),
        "--clients".into(),
        clients.to_string(),
        "-t".into(),
        threads.to_string(),
        "--duration".into(),
        format!("{}ms", args.duration.as_millis().max(1)),
        "--warmup".into(),
        format!("{}ms", args.warmup.as_millis()),
        "--container-id".into(),
        match kind {
            Kind::Echo => args.container_id,
            Kind::Write => args.next_write_container(),
        }
        .to_string(),
    ];
    match kind {
        Kind::Echo => {
            argv.push("echo".into());
            argv.extend(common);
            argv.extend([
                "--payload-resp".into(),
                (bytes / 1024).to_string(),
                "--sleep-time-ms".into(),
                sleep_ms.to_string(),
            ]);
        }
        Kind::Write => {
            argv.push("write".into());
            argv.extend(common);
            let size = format!("{}KB", bytes / 1024);
            argv.extend([
                "--write-size".into(),
                size.clone(),
                "--chunk-size".into(),
                size,
            ]);
        }
    }
    let config = run_config_of(&argv)?;
    // The machine's CPU while the cell runs: with the target on this machine (loopback), what a
    // call costs the machine, client and DataNode together (the fit's CPU stage).
    let local = on_this_machine(target);
    let busy_before = local.then(crate::cpu::machine_busy_time).flatten();
    let wall = std::time::Instant::now();
    let r = crate::run::run_config(&config)?.results;
    let wall = wall.elapsed().as_secs_f64();
    let busy = busy_before
        .zip(crate::cpu::machine_busy_time())
        .map(|(a, b)| b.saturating_sub(a).as_secs_f64());
    let mut c = Cell {
        kind,
        pool,
        clients,
        threads,
        req_bytes: 0,
        resp_bytes: 0,
        sleep_ms,
        calls_per_s: r.success_rate(),
        mb_per_s: r.bytes_received_per_s() / MIB as f64,
        mean_ms: r.corrected.mean_ms(),
        p50_ms: r.corrected.percentile_ms(50.0),
        p99_ms: r.corrected.percentile_ms(99.0),
        baseline: false,
        machine_cpu_ms_per_call: None,
    };
    match kind {
        Kind::Echo => c.resp_bytes = bytes,
        Kind::Write => {
            c.req_bytes = bytes;
            let chunks = r.ops.get("WriteChunk");
            if let Some(w) = chunks {
                c.calls_per_s = w.per_second();
                c.mean_ms = w.latency.mean_ms();
                c.p50_ms = w.latency.percentile_ms(50.0);
                c.p99_ms = w.latency.percentile_ms(99.0);
            }
            c.mb_per_s = r.write.as_ref().map_or(0.0, |w| w.mb_per_s);
        }
    }
    if let Some(busy) = busy
        && wall > 0.0
        && c.calls_per_s > 0.0
    {
        c.machine_cpu_ms_per_call = Some(busy / wall / c.calls_per_s * 1e3);
    }
    // A stray failure (a request cut at the cell's end) does not void a cell; more than 1 % do.
    let failed = r.failures() as f64 > 0.01 * r.successes() as f64;
    if failed || c.calls_per_s.is_nan() || c.calls_per_s <= 0.0 {
        let why: Vec<String> = r
            .errors
            .iter()
            .map(|(kind, e)| format!("{kind} x{} ({})", e.count, e.first_message))
            .collect();
        return Err(Error::Run(format!(
            "calibrate: {}: {} failure(s) of {} requests, {:.1} calls/s: {}",
            c.label(),
            r.failures(),
            r.requests(),
            c.calls_per_s,
            why.join("; ")
        )));
    }
    eprintln!(
        "loadgen calibrate: {}: {:.1} calls/s, {:.2} MB/s, mean {:.3} ms, p99 {:.3} ms, {} failure(s)",
        c.label(),
        c.calls_per_s,
        c.mb_per_s,
        c.mean_ms,
        c.p99_ms,
        r.failures()
    );
    Ok(c)
}

/// `--warm-up-calls` 1 MiB echoes at up to 8 x 8 after ten times as many 0 B echoes at
/// `--clients` x `--threads`, unmeasured. Why: a JVM compiles a path only after it ran it many
/// times, and a real DataNode's 1 MiB echo kept getting faster over its first few thousand (42
/// then 80 calls/s at one in flight). Writes are not warmed: 30 000 WriteChunks of 64 KB left a
/// real DataNode's 1 MB writes as fast as before them.
fn warm_up(args: &CalibrateArgs, target: &str) -> Result<(), Error> {
    let n = u64::from(args.warm_up_calls);
    if n == 0 {
        return Ok(());
    }
    let runs = [
        (0, (args.clients, args.threads), 10 * n),
        (MIB, (args.clients.min(8), args.threads.min(8)), n),
    ];
    for (i, (bytes, (clients, threads), calls)) in runs.into_iter().enumerate() {
        let argv = [
            "loadgen".to_string(),
            "echo".into(),
            "--target".into(),
            target.to_string(),
            "--clients".into(),
            clients.to_string(),
            "-t".into(),
            threads.to_string(),
            "-n".into(),
            calls.max(u64::from(threads)).to_string(),
            "--container-id".into(),
            args.container_id.to_string(),
            "--payload-resp".into(),
            (bytes / 1024).to_string(),
        ];
        let config = run_config_of(&argv)?;
        let run = crate::run::run_config(&config);
        // The first run finds an unreachable target (exit 2); later ones fail mid-run.
        let r = if i == 0 {
            run?
        } else {
            run.map_err(Error::mid_run)?
        }
        .results;
        eprintln!(
            "loadgen calibrate: warm-up echo of {bytes} B at {clients}x{threads}: {} requests, {:.1} calls/s, {} failure(s)",
            r.requests(),
            r.success_rate(),
            r.failures()
        );
        if r.successes() == 0 {
            return Err(Error::Run(format!(
                "calibrate: the warm-up's echoes of {bytes} B all failed"
            )));
        }
    }
    Ok(())
}

/// The run of a `loadgen echo` or `loadgen write` command line that calibrate built.
fn run_config_of(argv: &[String]) -> Result<crate::config::RunConfig, Error> {
    let cli = Cli::try_parse_from(argv)
        .map_err(|e| Error::Usage(format!("calibrate: {}: {e}", argv.join(" "))))?;
    match &cli.command {
        Command::Echo(a) => crate::config::RunConfig::echo(a),
        Command::Write(a) => crate::config::RunConfig::write(a),
        _ => unreachable!("calibrate builds echo and write runs only"),
    }
}

/// Whether `target` (HOST:PORT) is on this machine: then the machine's CPU measures the
/// target's too.
fn on_this_machine(target: &str) -> bool {
    use std::net::ToSocketAddrs;
    target
        .to_socket_addrs()
        .map(|mut a| a.all(|a| a.ip().is_loopback()))
        .unwrap_or(false)
}

/// The cells at one request in flight: per command and size.
const SINGLE: [(Kind, u64); 5] = [
    (Kind::Echo, 0),
    (Kind::Echo, MIB),
    (Kind::Write, 64 << 10),
    (Kind::Write, MIB),
    (Kind::Write, 4 * MIB),
];

/// The baseline's echoes of 0 B and 1 MiB at one request in flight that first sleep on the
/// handler as long as the target's 1 MiB echo took (`target_cells`' mean, whole ms): how fast
/// the client and transport move a response after the client waited that long (the fit's
/// per-byte baseline, `fit::idle_resp_slope`). None without such a target cell.
fn idle_cells(args: &CalibrateArgs, base: &str, target_cells: &[Cell]) -> Result<Vec<Cell>, Error> {
    let Some(waited_ms) = target_cells
        .iter()
        .find(|c| {
            !c.baseline
                && c.kind == Kind::Echo
                && c.in_flight() == 1
                && c.resp_bytes == MIB
                && c.sleep_ms == 0
        })
        .map(|c| c.mean_ms.round().clamp(1.0, 1000.0) as u32)
    else {
        return Ok(Vec::new());
    };
    [0, MIB]
        .into_iter()
        .map(|bytes| {
            let mut b = cell(
                args,
                base,
                args.baseline_pool,
                Kind::Echo,
                bytes,
                (1, 1),
                waited_ms,
            )?;
            b.baseline = true;
            Ok(b)
        })
        .collect()
}

/// The sleeps of the echo cells that measure how late a sleeping handler wakes: a short and a
/// long one, for the line of lateness over the sleep (a real DataNode's `Thread.sleep` wakes
/// the later the longer it slept). `exp-twin.sh` validates sleeps of 1–2 ms at other pools.
const SLEEPS_MS: [u32; 2] = [1, 5];

fn measure(args: &CalibrateArgs, target: &str) -> Result<Vec<Cell>, Error> {
    let full = (args.clients, args.threads);
    let mid = (args.clients.min(8), args.threads.min(8));
    let pool = args.pool;
    let mut cells = Vec::new();
    // The first request finds an unreachable target (exit 2).
    warm_up(args, target)?;
    // The cells at one request in flight, each followed by the baseline's same cell: a load
    // that drifts (a shared machine) shifts both alike.
    for (kind, bytes) in SINGLE {
        let c = cell(args, target, pool, kind, bytes, (1, 1), 0);
        // Without a warm-up, the first cell finds an unreachable target (exit 2).
        cells.push(if cells.is_empty() && args.warm_up_calls == 0 {
            c?
        } else {
            c.map_err(Error::mid_run)?
        });
        if let Some(base) = &args.baseline {
            let mut b = cell(args, base, 0, kind, bytes, (1, 1), 0).map_err(Error::mid_run)?;
            b.baseline = true;
            cells.push(b);
        }
    }
    if let Some(base) = &args.baseline {
        let idle = idle_cells(args, base, &cells).map_err(Error::mid_run)?;
        cells.extend(idle);
    }
    // Under load; the baseline's same cells give the CPU a call costs without the DataNode's
    // own work (the CPU stage is the difference).
    for (kind, bytes, shape, paired) in [
        (
            Kind::Echo,
            0,
            (args.clients.min(4), args.threads.min(4)),
            false,
        ),
        (Kind::Echo, 0, mid, false),
        (Kind::Echo, 0, full, true),
        (Kind::Echo, MIB, mid, true),
        (Kind::Write, MIB, mid, true),
        // A second size of loaded writes: what a WriteChunk costs beyond its bytes.
        (Kind::Write, 64 << 10, mid, true),
    ] {
        cells.push(cell(args, target, pool, kind, bytes, shape, 0).map_err(Error::mid_run)?);
        if let (true, Some(base)) = (paired, &args.baseline) {
            let mut b = cell(args, base, 0, kind, bytes, shape, 0).map_err(Error::mid_run)?;
            b.baseline = true;
            cells.push(b);
        }
    }
    // Echoes that sleep, the pool saturated: how long a sleep holds a handler, here and on the
    // baseline (the fit's sleep lateness).
    for sleep_ms in SLEEPS_MS {
        cells
            .push(cell(args, target, pool, Kind::Echo, 0, full, sleep_ms).map_err(Error::mid_run)?);
        if let Some(base) = &args.baseline {
            let mut b = cell(
                args,
                base,
                args.baseline_pool,
                Kind::Echo,
                0,
                full,
                sleep_ms,
            )
            .map_err(Error::mid_run)?;
            b.baseline = true;
            cells.push(b);
        }
    }
    let Some(admin) = &args.admin else {
        return Ok(cells);
    };
    let restore = crate::sweep::http(admin, "GET", "/config", "")
        .map_err(|m| Error::Unreachable(format!("calibrate: --admin: {m}")))
        .and_then(|body| {
            serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.get("handler_count").cloned())
                .ok_or_else(|| {
                    Error::Run("calibrate: --admin: GET /config has no handler_count".into())
                })
        })?;
    let mut outcome = Ok(());
    for &p in &args.pools {
        let body = json!({ "handler_count": p }).to_string();
        if let Err(m) = crate::sweep::http(admin, "PUT", "/config", &body) {
            outcome = Err(Error::Run(format!("calibrate: --admin: {m}")));
            break;
        }
        for (bytes, shape) in [(0, full), (MIB, mid)] {
            match cell(args, target, p, Kind::Echo, bytes, shape, 0) {
                Ok(c) => cells.push(c),
                Err(e) => {
                    outcome = Err(e.mid_run());
                    break;
                }
            }
        }
        if outcome.is_err() {
            break;
        }
    }
    let body = json!({ "handler_count": restore }).to_string();
    if let Err(m) = crate::sweep::http(admin, "PUT", "/config", &body) {
        eprintln!("loadgen calibrate: warning: could not restore handler_count: {m}");
    }
    outcome.map(|()| cells)
}

//! The engine against dn-sims with injected faults and stalls, in-process: coordinated omission
//! correction, error kinds, stream modes, open-loop schedules, warm-up, reports and merge, live
//! outputs, a target restart, and Ctrl-C.

mod support;

use clap::Parser;
use loadgen::cli::Cli;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::dn_sim_with;

fn run(args: &[&str]) -> loadgen::Summary {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run(Cli::try_parse_from(&argv).expect("valid flags")).expect("the run works")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadgen-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn coordinated_omission_is_corrected_in_open_loop() {
    // 0.2 % of echoes stall 100 ms. One worker, a fixed rate: each stall delays the requests
    // scheduled behind it. Their service time is short, their latency from the intended time not.
    let server = dn_sim_with(&["echo=stall:100ms:0.002"], None);
    let target = server.local_addr().to_string();
    let s = run(&[
        "echo", "--target", &target, "--rate", "300", "-n", "2400", "-t", "1",
    ]);
    let r = &s.results;
    assert_eq!(r.successes(), 2400);
    let corrected = r.corrected.percentile_ms(99.0);
    let uncorrected = r.uncorrected.percentile_ms(99.0);
    assert!(
        corrected > 5.0 * uncorrected,
        "corrected p99 {corrected} ms vs uncorrected {uncorrected} ms"
    );
    assert!(r.corrected.max_ms() >= 100.0, "{}", r.corrected.max_ms());
    // A 100 ms stall at 300/s holds back ~30 sends.
    assert!(r.late_sends() >= 20, "late sends {}", r.late_sends());
    assert!(r.lateness.max_ms() >= 50.0, "{}", r.lateness.max_ms());
    assert!(s.report.contains("late sends"), "{}", s.report);
    assert!(s.report.contains("corrected  uncorrected"), "{}", s.report);
}

#[test]
fn closed_loop_cannot_see_the_stalls_it_waits_for() {
    // The same server in closed loop (freon's model): the latency is the service time, and
    // there is no schedule to be late against.
    let server = dn_sim_with(&["echo=stall:100ms:0.002"], None);
    let target = server.local_addr().to_string();
    let s = run(&["echo", "--target", &target, "-n", "1500", "-t", "1"]);
    assert_eq!(s.results.late_sends(), 0);
    assert_eq!(
        s.results.corrected.percentile_ms(99.0),
        s.results.uncorrected.percentile_ms(99.0)
    );
}

fn assert_kinds(summary: &loadgen::Summary, mode: &str) {
    let r = &summary.results;
    for kind in [
        "result:IO_EXCEPTION",
        "grpc:UNAVAILABLE",
        "deadline",
        "transport",
    ] {
        assert!(
            r.errors.get(kind).is_some_and(|e| e.count > 0),
            "{mode}: no {kind} in {:?}",
            r.errors
        );
        assert!(summary.report.contains(kind), "{mode}: {}", summary.report);
    }
    assert!(r.successes() > 0, "{mode}");
    // Failures have their own histogram; successes' latencies hold no failure.
    assert_eq!(r.failed.count(), r.failures(), "{mode}");
    assert_eq!(r.corrected.count(), r.successes(), "{mode}");
    assert!(
        r.corrected.max_ms() < 300.0,
        "{mode}: a deadline (300 ms) leaked into the success latencies"
    );
    // Stalled requests answer normally, late.
    assert!(
        r.corrected.max_ms() >= 50.0,
        "{mode}: {}",
        r.corrected.max_ms()
    );
    assert!(
        r.errors["result:IO_EXCEPTION"].first_message.contains("IO"),
        "{mode}: {:?}",
        r.errors
    );
}

#[test]
fn error_kinds_are_told_apart() {
    let server = dn_sim_with(
        &[
            "echo=IO_EXCEPTION:0.05",
            "echo=grpc:UNAVAILABLE:0.05",
            "echo=drop:0.02",
            "echo=reset:0.05",
            "echo=stall:50ms:0.02",
        ],
        None,
    );
    let target = server.local_addr().to_string();
    let per_request = run(&[
        "echo",
        "--target",
        &target,
        "-n",
        "600",
        "-t",
        "8",
        "-f",
        "--timeout",
        "300ms",
    ]);
    assert_kinds(&per_request, "per-request");
    assert_eq!(per_request.results.requests(), 600);
    let persistent = run(&[
        "echo",
        "--target",
        &target,
        "-n",
        "600",
        "-t",
        "2",
        "--stream-mode",
        "persistent",
        "--pipeline",
        "4",
        "-f",
        "--timeout",
        "300ms",
    ]);
    assert_kinds(&persistent, "persistent");
    assert_eq!(persistent.results.requests(), 600);
}

#[test]
fn persistent_streams_pipeline_requests_in_order() {
    let s = run(&[
        "echo",
        "-n",
        "3000",
        "-t",
        "2",
        "--stream-mode",
        "persistent",
        "--pipeline",
        "16",
        "--payload-resp",
        "1",
    ]);
    assert_eq!(s.successes(), 3000);
    assert_eq!(s.failures(), 0);
    assert_eq!(s.results.bytes_received, 3000 * 1024);
    assert!(s.header.contains("16 request(s) in flight"), "{}", s.header);
}

#[test]
fn open_loop_sends_exactly_what_the_plan_schedules() {
    // 200/s for 2 s: requests at 0, 5, …, 1995 ms.
    let s = run(&["echo", "--rate", "200", "--duration", "2s", "-t", "4"]);
    assert_eq!(s.results.requests(), 400);
    // A ramp from 100/s to 300/s over 2 s plans (100 + 300) / 2 · 2 = 400 requests and, given
    // neither -n nor --duration, lasts as long as the ramp.
    let s = run(&[
        "echo",
        "--rate-schedule",
        "ramp:from=100,to=300,over=2s",
        "-t",
        "4",
        "--format",
        "json",
    ]);
    assert_eq!(s.results.requests(), 400);
    let json: serde_json::Value = serde_json::from_str(&s.report).unwrap();
    assert_eq!(json["config"]["load"], "open");
    assert_eq!(json["config"]["peak_rate"], 300.0);
    // The time series covers the run, and its points add up to the total.
    let series = json["series"].as_array().unwrap();
    assert!(series.len() >= 2, "{series:?}");
    let total: u64 = series.iter().map(|p| p["requests"].as_u64().unwrap()).sum();
    assert_eq!(total, 400);
    let (first, second) = (series[0]["rate"].as_f64(), series[1]["rate"].as_f64());
    assert!(second > first, "the ramp goes up: {series:?}");
}

#[test]
fn warmup_is_excluded_from_every_statistic() {
    let s = run(&["echo", "--warmup", "500ms", "-n", "300", "-t", "2"]);
    assert_eq!(s.successes(), 300);
    assert!(s.results.warmup_requests > 0);
    assert!(s.report.contains("requests not counted"), "{}", s.report);
    let s = run(&[
        "echo", "--warmup", "500ms", "--rate", "400", "-n", "200", "-t", "2",
    ]);
    assert_eq!(s.results.requests(), 200);
    assert_eq!(s.results.warmup_requests, 200);
}

#[test]
fn json_results_merge_exactly() {
    let dir = temp_dir("merge");
    let a = dir.join("a.json");
    let b = dir.join("b.json");
    let csv = dir.join("runs.csv");
    let ra = run(&[
        "echo",
        "-n",
        "700",
        "-t",
        "4",
        "--format",
        "json",
        "--output",
        a.to_str().unwrap(),
    ]);
    let rb = run(&[
        "echo",
        "-n",
        "500",
        "-t",
        "2",
        "--sleep-time-ms",
        "1",
        "--format",
        "json",
        "--output",
        b.to_str().unwrap(),
    ]);
    assert!(ra.stdout().contains("Successful executions: 700"));
    let merged = run(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let m = &merged.results;
    assert_eq!(m.successes(), 1200);
    assert_eq!(m.processes, 2);
    assert_eq!(m.description.threads, 6);
    let mut expected = ra.results.corrected.clone();
    expected.merge(&rb.results.corrected);
    for p in [50.0, 90.0, 99.0, 99.9, 100.0] {
        assert_eq!(
            m.corrected.percentile_ms(p),
            expected.percentile_ms(p),
            "p{p}"
        );
    }
    // One file merged alone reproduces its own numbers.
    let alone = run(&["merge", a.to_str().unwrap()]);
    assert_eq!(alone.successes(), 700);
    for p in [50.0, 99.0, 99.99] {
        assert_eq!(
            alone.results.corrected.percentile_ms(p),
            ra.results.corrected.percentile_ms(p)
        );
    }
    assert!(alone.stdout().contains("Successful executions: 700"));
    // csv: a header once, then a row per run.
    for _ in 0..2 {
        run(&[
            "echo",
            "-n",
            "100",
            "--format",
            "csv",
            "--output",
            csv.to_str().unwrap(),
        ]);
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("started_at_unix_ms,"));
    assert_eq!(
        lines[0].split(',').count(),
        lines[2].split(',').count(),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn live_metrics_and_the_histogram_log_follow_the_run() {
    let dir = temp_dir("live");
    let hlog = dir.join("latency.hlog");
    let report = dir.join("report.json");
    let mut live = support::LiveRun::start(&[
        "echo",
        "--duration",
        "3s",
        "-t",
        "2",
        "--report-interval",
        "500ms",
        "--histogram-log",
        hlog.to_str().unwrap(),
        "--format",
        "json",
        "--output",
        report.to_str().unwrap(),
    ]);
    let addr = live.metrics;
    // Scraped mid-run, once it has counted a success: polled until a deadline, not slept for.
    let scrape_once = || -> Option<String> {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(addr).ok()?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        conn.read_to_string(&mut text).ok()?;
        let counted = text
            .lines()
            .find(|l| l.starts_with("loadgen_requests_total{outcome=\"success\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
        counted.then_some(text)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let scrape = loop {
        if let Some(text) = scrape_once() {
            break text;
        }
        assert!(
            Instant::now() < deadline && !live.is_finished(),
            "no live success count while the run lasted"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    live.finish();
    let r = loadgen::merge::merge_files(std::slice::from_ref(&report)).expect("its own report");
    assert!(scrape.starts_with("HTTP/1.1 200 OK"), "{scrape}");
    let line = scrape
        .lines()
        .find(|l| l.starts_with("loadgen_requests_total{outcome=\"success\"}"))
        .expect("success counter");
    let live: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(
        live > 0 && live < r.successes(),
        "{live} of {}",
        r.successes()
    );
    assert!(scrape.contains("loadgen_request_latency_seconds_bucket{le=\"+Inf\"}"));

    // The log's untagged histograms hold every successful request once.
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let bytes = std::fs::read(&hlog).unwrap();
    let mut logged = 0;
    let mut intervals = 0;
    for entry in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(h) = entry.expect("a well-formed log")
            && h.tag().is_none()
        {
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(h.encoded_histogram())
                .unwrap();
            let hist: hdrhistogram::Histogram<u64> = Deserializer::new()
                .deserialize(&mut raw.as_slice())
                .unwrap();
            logged += hist.len();
            intervals += 1;
        }
    }
    assert_eq!(logged, r.successes());
    assert!(intervals >= 5, "{intervals}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_restarting_target_is_reconnected_and_failures_are_counted() {
    let first = dn_sim_with(&[], None);
    let addr = first.local_addr();
    let target = addr.to_string();
    let runner = std::thread::spawn(move || {
        run(&[
            "echo",
            "--target",
            &target,
            "--duration",
            "4s",
            "-t",
            "4",
            "-f",
            "--report-interval",
            "500ms",
            "--format",
            "json",
        ])
    });
    std::thread::sleep(Duration::from_millis(1200));
    drop(first); // the DataNode goes away …
    std::thread::sleep(Duration::from_millis(800));
    let _second = dn_sim_with(&[], Some(addr)); // … and comes back on the same port
    let started = Instant::now();
    let s = runner.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    let r = &s.results;
    assert!(r.failures() > 0, "the outage was not noticed");
    assert!(
        r.errors.contains_key("transport") || r.errors.contains_key("grpc:UNAVAILABLE"),
        "{:?}",
        r.errors
    );
    // Backoff keeps the failures few: at most a handful per worker per backoff step.
    assert!(r.failures() < 400, "{:?}", r.errors);
    // Requests succeed again after the restart.
    let after: u64 = r
        .series
        .iter()
        .filter(|p| p.t_s >= 2.5)
        .map(|p| p.successes)
        .sum();
    assert!(after > 0, "{:?}", r.series);
}

#[test]
fn ctrl_c_mid_run_still_prints_the_report() {
    let support::Interrupted {
        status,
        stdout,
        stderr,
        stopping,
    } = support::sigint_after_first_progress(
        &["echo", "--duration", "60s", "-t", "2"],
        Duration::from_secs(20),
    );
    assert!(stopping < Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Successful executions: "), "{stdout}");
    assert!(stdout.contains("stopped by a signal"), "{stdout}");
    assert!(stderr.contains("stopping"), "{stderr}");
    let count: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Successful executions: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(count > 0);
}

#[test]
fn large_answers_over_many_frames_arrive_whole() {
    // 2 MiB answers span many HTTP/2 DATA frames; every byte is counted once.
    let s = run(&["echo", "-n", "10", "-t", "2", "--payload-resp", "2048"]);
    assert_eq!(s.successes(), 10);
    assert_eq!(s.results.bytes_received, 10 * 2048 * 1024);
}

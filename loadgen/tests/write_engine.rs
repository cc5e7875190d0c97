//! `write` and `read` on the engine echo uses: open loop at a bandwidth, warm-up excluded from
//! every statistic, Ctrl-C still prints the report (every stream closed), `merge` of two write
//! results, a `sweep` over the write size.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::run_block as run;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("loadgen-we-{}-{name}", std::process::id()))
}

const MB: f64 = 1048576.0;

#[test]
fn open_loop_at_a_bandwidth_writes_about_that_much() {
    // 50 MB/s of 1 MB writes is 50 application writes a second, intended on a schedule. Judged
    // against a 25 MB/s run in the same test (a loaded machine slows both alike), and never above
    // the rate asked for (which no slowness can cause).
    let at = |rate: &str| {
        run(&[
            "write",
            "--rate",
            rate,
            "--duration",
            "2s",
            "-t",
            "4",
            "--write-size",
            "1MB",
            "--checksum",
            "NONE",
        ])
    };
    let half = at("25MB/s");
    assert_eq!(half.failures(), 0, "{}", half.text);
    let half_mb_per_s = half.results.write.as_ref().unwrap().mb_per_s;
    let s = at("50MB/s");
    assert_eq!(s.failures(), 0, "{}", s.text);
    let d = &s.results.description;
    assert_eq!(d.load, "open");
    assert_eq!(d.rate_plan.as_deref(), Some("50/s"), "{d:?}");
    let w = s.results.write.as_ref().unwrap();
    assert!(
        w.mb_per_s <= 55.0 && half_mb_per_s <= 27.5,
        "{} MB/s at 50 MB/s, {half_mb_per_s} MB/s at 25 MB/s\n{}",
        w.mb_per_s,
        s.text
    );
    let ratio = w.mb_per_s / half_mb_per_s;
    assert!(
        (1.6..=2.4).contains(&ratio),
        "{} MB/s at 50 MB/s is {ratio:.2} × the {half_mb_per_s} MB/s at 25 MB/s\n{}",
        w.mb_per_s,
        s.text
    );
    assert!(w.writes <= 110, "{} writes", w.writes);
    // Latency counts from each write's intended time: the uncorrected service time is apart.
    assert!(s.results.uncorrected.count() > 0);
    assert!(s.text.contains("open loop 50/s, achieved"), "{}", s.text);
}

#[test]
fn a_bandwidth_needs_a_workload_that_moves_data() {
    support::assert_usage_error(&["echo", "--rate", "50MB/s"], "--rate");
    support::assert_usage_error(&["write", "--stream-mode", "persistent"], "--stream-mode");
}

#[test]
fn warm_up_writes_are_excluded_from_every_statistic() {
    // 20 writes/s: a 1 s warm-up and 1 s measured.
    let s = run(&[
        "write",
        "--rate",
        "20",
        "--warmup",
        "1s",
        "--duration",
        "1s",
        "-t",
        "2",
        "--write-size",
        "256KB",
        "--chunk-size",
        "256KB",
        "--checksum",
        "NONE",
    ]);
    assert_eq!(s.failures(), 0, "{}", s.text);
    let r = &s.results;
    assert!(
        (15..=25).contains(&r.warmup_requests),
        "{} warm-up writes",
        r.warmup_requests
    );
    let w = r.write.as_ref().unwrap();
    assert!(
        (15..=25).contains(&w.writes),
        "{} measured writes",
        w.writes
    );
    assert_eq!(w.bytes, w.writes * 256 * 1024);
    assert_eq!(r.ops["write"].latency.count(), w.writes);
    // One WriteChunk per 256 KB write: none of the warm-up's is counted (the closing
    // PutBlocks of the two streams carry no data).
    assert_eq!(r.ops["WriteChunk"].latency.count(), w.writes);
    assert_eq!(r.ops["WriteChunk"].bytes, w.bytes);
    assert_eq!(r.bytes_sent, w.bytes);
    assert!(s.text.contains("requests not counted"), "{}", s.text);
}

#[test]
fn ctrl_c_mid_write_closes_the_streams_and_prints_the_report() {
    let support::Interrupted {
        status,
        stdout,
        stderr,
        stopping,
    } = support::sigint_after_first_progress(
        &[
            "write",
            "--duration",
            "60s",
            "-t",
            "2",
            "--write-size",
            "64KB",
            "--checksum",
            "NONE",
            "--format",
            "json",
        ],
        Duration::from_secs(30),
    );
    assert!(stopping < Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON report");
    assert_eq!(json["interrupted"], true);
    assert!(json["write"]["writes"].as_u64().unwrap() > 0, "{stdout}");
    // Both streams were closed: their last blocks committed.
    assert!(
        json["write"]["blocks_committed"].as_u64().unwrap() >= 2,
        "{stdout}"
    );
    assert!(json["ops"]["PutBlock"]["count"].as_u64().unwrap() >= 2);
}

#[test]
fn two_write_results_merge_exactly() {
    let (a, b) = (temp("a.json"), temp("b.json"));
    for (path, n) in [(&a, "12"), (&b, "20")] {
        let s = run(&[
            "write",
            "-n",
            n,
            "-t",
            "2",
            "--write-size",
            "128KB",
            "--chunk-size",
            "256KB",
            "--checksum",
            "CRC32C",
            "--format",
            "json",
            "--output",
            path.to_str().unwrap(),
        ]);
        assert_eq!(s.failures(), 0, "{}", s.text);
    }
    let load = |p: &PathBuf| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (ja, jb) = (load(&a), load(&b));
    let m = run(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    std::fs::remove_file(&a).unwrap();
    std::fs::remove_file(&b).unwrap();
    let r = &m.results;
    assert_eq!(r.processes, 2);
    let w = r.write.as_ref().unwrap();
    assert_eq!(w.writes, 32);
    assert_eq!(w.bytes, 32 * 128 * 1024);
    let sum =
        |k: &str, op: &str| ja["ops"][op][k].as_u64().unwrap() + jb["ops"][op][k].as_u64().unwrap();
    for op in ["write", "WriteChunk", "PutBlock"] {
        assert_eq!(r.ops[op].latency.count(), sum("count", op), "{op}");
        assert_eq!(r.ops[op].bytes, sum("bytes", op), "{op}");
    }
    assert_eq!(
        r.ops["WriteChunk"].latency.count(),
        16,
        "256 KB chunks of 4 MB"
    );
    assert_eq!(
        w.blocks_committed,
        ja["write"]["blocks_committed"].as_u64().unwrap()
            + jb["write"]["blocks_committed"].as_u64().unwrap()
    );
    assert_eq!(r.successes(), 32);
    // The merged report renders the per-operation sections.
    assert!(m.text.contains("chunk-write (WriteChunk)"), "{}", m.text);
    let merged: serde_json::Value = serde_json::from_str(&m.report).unwrap();
    assert_eq!(merged["write"]["writes"], 32);
}

#[test]
fn a_sweep_over_the_write_size() {
    let out = temp("sweep");
    let argv = [
        "loadgen",
        "sweep",
        "--param",
        "write_size=64KB,1MB",
        "--y",
        "tx_mb_per_s",
        "--out",
        out.to_str().unwrap(),
        "--",
        "write",
        "--duration",
        "1s",
        "-t",
        "2",
        "--checksum",
        "NONE",
    ];
    use clap::Parser;
    let cli = loadgen::cli::Cli::try_parse_from(argv).unwrap();
    let stdout = loadgen::run_tool(&cli)
        .unwrap()
        .expect("the sweep runs")
        .stdout;
    let csv = std::fs::read_to_string(out.with_extension("csv")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.with_extension("json")).unwrap())
            .unwrap();
    let svg = std::fs::read_to_string(out.with_extension("svg")).unwrap();
    for ext in ["csv", "json", "svg"] {
        std::fs::remove_file(out.with_extension(ext)).unwrap();
    }
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("write_size_bytes,"), "{csv}");
    assert!(lines[1].starts_with("65536,"), "{csv}");
    assert!(lines[2].starts_with("1048576,"), "{csv}");
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for (cell, size) in cells.iter().zip([65536u64, 1048576]) {
        let r = &cell["result"];
        assert_eq!(r["config"]["shape"]["write_size"], size);
        assert_eq!(r["totals"]["failures"], 0);
        let w = &r["write"];
        assert!(w["writes"].as_u64().unwrap() > 0);
        assert_eq!(
            w["bytes"].as_u64().unwrap(),
            w["writes"].as_u64().unwrap() * size
        );
        assert!(r["ops"]["WriteChunk"]["count"].as_u64().unwrap() > 0);
    }
    assert!(stdout.contains("write size (bytes)"), "{stdout}");
    assert!(svg.contains("<svg"), "{svg}");
    let mbs = |c: &serde_json::Value| c["result"]["write"]["mb_per_s"].as_f64().unwrap() * MB;
    assert!(mbs(&cells[0]) > 0.0 && mbs(&cells[1]) > 0.0);
}

/// One CSV line's fields (quoted fields may hold commas).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

#[test]
fn a_scheduled_write_has_live_metrics_a_histogram_log_and_a_csv_row() {
    let hlog = temp("write.hlog");
    let csv = temp("write.csv");
    let mut run = support::LiveRun::start(&[
        "write",
        "--rate-schedule",
        "ramp:from=10,to=40,over=3s",
        "-t",
        "2",
        "--write-size",
        "64KB",
        "--chunk-size",
        "64KB",
        "--checksum",
        "CRC32C",
        "--report-interval",
        "500ms",
        "--histogram-log",
        hlog.to_str().unwrap(),
        "--format",
        "csv",
        "--output",
        csv.to_str().unwrap(),
    ]);
    let addr = run.metrics;
    // Scraped while the run goes on, until the first closed intervals show successes.
    let scrape = || -> Option<(u64, u64)> {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(addr).ok()?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        conn.read_to_string(&mut text).ok()?;
        let value = |prefix: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(prefix))?;
            line.rsplit(' ').next()?.parse().ok()
        };
        let chunks = value("loadgen_rpcs_total{kind=\"WriteChunk\",outcome=\"success\"}")?;
        let line = text
            .lines()
            .find(|l| l.starts_with("loadgen_requests_total{outcome=\"success\"}"))?;
        Some((line.rsplit(' ').next()?.parse().ok()?, chunks))
    };
    let (mut live, mut live_chunks) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while live == 0 && !run.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        (live, live_chunks) = scrape().unwrap_or((0, 0));
    }
    run.finish();
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let names = csv_fields(lines[0]);
    let values = csv_fields(lines[1]);
    assert_eq!(names.len(), values.len(), "{text}");
    let get = |n: &str| values[names.iter().position(|x| x == n).expect(n)].as_str();
    assert_eq!(get("failures"), "0", "{text}");
    assert_eq!(get("load"), "open");
    // The ramp's own length: 3 s from 10 to 40 writes/s, 75 writes.
    let writes: u64 = get("writes").parse().unwrap();
    assert!((60..=80).contains(&writes), "{writes} writes");
    assert!(live > 0 && live < writes, "{live} of {writes}");
    // Per RPC kind too: one WriteChunk per 64 KB write (64 KB chunks).
    assert!(
        live_chunks > 0 && live_chunks < writes,
        "{live_chunks} of {writes}"
    );

    // The log's untagged histograms hold every application write once.
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let bytes = std::fs::read(&hlog).unwrap();
    let mut logged = 0;
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
        }
    }
    assert_eq!(logged, writes);
    std::fs::remove_file(&csv).unwrap();
    std::fs::remove_file(&hlog).unwrap();
    assert!(get("rate_plan").starts_with("ramp:from=10,"), "{text}");
    assert_eq!(get("workload"), "write");
    assert_eq!(get("write_size_bytes"), "65536");
    assert_eq!(get("checksum"), "CRC32C");
    assert!(!get("write_chunk_p99_ms").is_empty());
}

#[test]
fn a_read_at_a_bandwidth_reads_every_block_once_at_about_that_rate() {
    // 8 blocks of 1 MB (1 MB writes, 1 MB blocks) written to a dn-sim, then read back at
    // 4 MB/s = 4 blocks/s: about 2 s.
    let manifest = temp("read-rate.jsonl");
    let server = dn_sim::EmbeddedServer::start(dn_sim::Config::loopback(), 1).unwrap();
    let target = server.local_addr().to_string();
    let w = run(&[
        "write",
        "--target",
        &target,
        "-n",
        "8",
        "-t",
        "2",
        "--write-size",
        "1MB",
        "--block-size",
        "1MB",
        "--manifest",
        manifest.to_str().unwrap(),
    ]);
    assert_eq!(w.failures(), 0, "{}", w.text);
    let started = Instant::now();
    let r = run(&[
        "read",
        "--target",
        &target,
        "--manifest",
        manifest.to_str().unwrap(),
        "--rate",
        "4MB/s",
        "-t",
        "2",
    ]);
    let took = started.elapsed();
    std::fs::remove_file(&manifest).unwrap();
    assert_eq!(r.failures(), 0, "{}", r.text);
    let read = r.results.read.as_ref().unwrap();
    assert_eq!(read.blocks, 8);
    assert_eq!(read.bytes_verified, 8 << 20);
    assert_eq!(r.results.description.rate_plan.as_deref(), Some("4/s"));
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[test]
fn plot_of_a_write_result_shows_the_spectrum_and_the_series() {
    use clap::Parser;
    let json = temp("plot-write.json");
    run(&[
        "write",
        "--duration",
        "800ms",
        "--report-interval",
        "100ms",
        "-t",
        "2",
        "--write-size",
        "128KB",
        "--checksum",
        "NONE",
        "--format",
        "json",
        "--output",
        json.to_str().unwrap(),
    ]);
    let svg = json.with_extension("svg");
    let cli = loadgen::cli::Cli::try_parse_from([
        "loadgen",
        "plot",
        json.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ])
    .unwrap();
    loadgen::run_tool(&cli)
        .unwrap()
        .expect("the chart is drawn");
    let text = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&json).unwrap();
    std::fs::remove_file(&svg).unwrap();
    for needle in ["latency by percentile", "throughput (calls/s)", "99.9"] {
        assert!(text.contains(needle), "{needle} not in the chart");
    }
}

#[test]
fn with_fail_at_end_a_failed_write_abandons_its_block_and_the_stream_goes_on() {
    // One WriteChunk in ten fails (UNAVAILABLE, no retries): each failure leaves its block
    // uncommitted and the stream starts a new one; every committed block reads back whole.
    let mut config = dn_sim::Config::loopback();
    config.seed = 11;
    config.live = dn_sim::sim::admission::LiveSettings {
        faults: dn_sim::sim::fault::FaultPlan::from_args(["write_chunk=grpc:UNAVAILABLE:0.1"])
            .expect("valid faults"),
        ..Default::default()
    };
    let server = dn_sim::EmbeddedServer::start(config, 1).unwrap();
    let target = server.local_addr().to_string();
    let manifest = temp("abandon.jsonl");
    let w = run(&[
        "write",
        "--target",
        &target,
        "-n",
        "200",
        "-t",
        "2",
        "--write-size",
        "64KB",
        "--chunk-size",
        "64KB",
        "--block-size",
        "256KB",
        "--flush-size",
        "256KB",
        "-f",
        "--manifest",
        manifest.to_str().unwrap(),
    ]);
    let failed = support::errors_of(&w, "grpc:UNAVAILABLE").unwrap_or(0);
    assert!(failed > 0, "{}", w.text);
    assert_eq!(w.failures(), failed, "{}", w.text);
    let written = w.results.write.as_ref().unwrap();
    assert_eq!(written.writes + failed, 200, "every write ends once");
    assert!(written.blocks_committed > 0);
    let r = run(&[
        "read",
        "--target",
        &target,
        "--manifest",
        manifest.to_str().unwrap(),
    ]);
    let blocks = loadgen::manifest::read(&manifest).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    assert_eq!(r.failures(), 0, "{}", r.text);
    let read = r.results.read.as_ref().unwrap();
    assert_eq!(read.blocks, written.blocks_committed);
    assert_eq!(read.bytes_verified, read.bytes_read);
    assert_eq!(read.bytes_read, blocks.iter().map(|b| b.size).sum::<u64>());
    // Whole blocks, but for each stream's last one, closed at the end.
    let full = blocks.iter().filter(|b| b.size == 256 * 1024).count();
    assert!(
        full + 2 >= blocks.len(),
        "{full} of {} blocks full",
        blocks.len()
    );
    for b in &blocks {
        let mut offset = 0;
        for c in &b.chunks {
            assert_eq!(
                c.offset, offset,
                "contiguous chunks in block {}",
                b.local_id
            );
            offset += c.len;
        }
    }
}

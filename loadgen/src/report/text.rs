//! `--format text`: freon's report (byte for byte), its failure lines, then what freon cannot
//! tell: corrected and uncorrected latency at the chosen percentiles, throughput in bytes, late
//! sends, and whether the generator itself may have been the limit.

use super::freon;
use crate::results::Results;
use common::stats::LatencyHistogram;
use std::fmt::Write;

pub fn render(r: &Results, percentiles: &[f64]) -> String {
    let mut out = freon::render(r);
    out.push_str(&freon::failure_lines(r));
    if !r.ops.is_empty() {
        out.push_str(&operations(r, percentiles));
    }
    out.push_str(&details(r, percentiles));
    out
}

/// write and read: a timer section per operation kind in freon's layout, then throughput and
/// data integrity. MB = 2^20 bytes.
fn operations(r: &Results, percentiles: &[f64]) -> String {
    const MB: f64 = 1048576.0;
    let mut out = String::from("\n-- Timers per operation ");
    out.push_str(&"-".repeat(56));
    out.push('\n');
    let mut ops: Vec<_> = r.ops.iter().collect();
    ops.sort_by_key(|(name, _)| crate::results::op_rank(name));
    for (name, o) in ops {
        let h = &o.latency;
        writeln!(out, "{} ({name})", o.timer).unwrap();
        writeln!(out, "{:>18} = {}", "count", h.count()).unwrap();
        writeln!(
            out,
            "{:>18} = {:.2} calls/second",
            "mean rate",
            o.per_second()
        )
        .unwrap();
        for (label, v) in [
            ("min =", h.min_ms()),
            ("max =", h.max_ms()),
            ("mean =", h.mean_ms()),
            ("stddev =", h.stddev_ms()),
        ] {
            writeln!(out, "{label:>20} {v:.2} milliseconds").unwrap();
        }
        for &p in percentiles {
            let label = format!("{p}% <=");
            writeln!(out, "{label:>20} {:.2} milliseconds", h.percentile_ms(p)).unwrap();
        }
        if o.failures > 0 {
            writeln!(out, "{:>18} = {}", "failed", o.failures).unwrap();
        }
        out.push('\n');
    }
    if let Some(s) = &r.description.shape {
        let size = common::units::format_size;
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
    if let Some(w) = &r.write {
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
    if let Some(rd) = &r.read {
        writeln!(
            out,
            "Read: {} bytes in {} chunk(s) of {} block(s) in {:.3} s, {:.2} MB/s (MB = 2^20 bytes)",
            rd.bytes_read, rd.chunks, rd.blocks, rd.elapsed_s, rd.mb_per_s
        )
        .unwrap();
        writeln!(out, "Bytes verified: {}", rd.bytes_verified).unwrap();
    }
    writeln!(out, "Data-integrity errors: {}", r.integrity_errors()).unwrap();
    out
}

fn label(p: f64) -> String {
    format!("p{p}")
}

fn details(r: &Results, percentiles: &[f64]) -> String {
    let mut out = String::from("\n-- loadgen ");
    out.push_str(&"-".repeat(69));
    out.push('\n');
    let open = r.description.open_loop();
    if open {
        writeln!(
            out,
            "{:>20} {:>12} {:>12}",
            "latency (ms)", "corrected", "uncorrected"
        )
        .unwrap();
    } else {
        writeln!(
            out,
            "{:>20} {:>12}   (closed loop: from each send)",
            "latency (ms)", "successes"
        )
        .unwrap();
    }
    let row = |out: &mut String, name: &str, f: &dyn Fn(&LatencyHistogram) -> f64| {
        if open {
            writeln!(
                out,
                "{name:>20} {:>12.3} {:>12.3}",
                f(&r.corrected),
                f(&r.uncorrected)
            )
        } else {
            writeln!(out, "{name:>20} {:>12.3}", f(&r.corrected))
        }
        .unwrap();
    };
    for &p in percentiles {
        row(&mut out, &label(p), &|h| h.percentile_ms(p));
    }
    row(&mut out, "max", &|h| h.max_ms());
    if r.failed.count() > 0 {
        writeln!(
            out,
            "{:>20} {} failed: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            "failed",
            r.failed.count(),
            r.failed.percentile_ms(50.0),
            r.failed.percentile_ms(99.0),
            r.failed.max_ms()
        )
        .unwrap();
    }
    writeln!(
        out,
        "{:>20} {:.2} requests/s ({:.2} successful), {} sent/s, {} received/s",
        "throughput",
        r.throughput(),
        r.success_rate(),
        bytes(r.bytes_sent_per_s()),
        bytes(r.bytes_received_per_s())
    )
    .unwrap();
    let res = &r.resilience;
    if shows_resilience(r) {
        writeln!(
            out,
            "{:>20} {} successful/s, {:.2} successful requests/s",
            "goodput",
            bytes(r.goodput_bytes_per_s()),
            r.success_rate()
        )
        .unwrap();
        writeln!(
            out,
            "{:>20} {} attempts, {} retries (at most {} for one request), {} rejected by the target",
            "retries",
            res.attempts,
            res.retries,
            res.max_retries_per_request,
            res.rejections
        )
        .unwrap();
        writeln!(
            out,
            "{:>20} {} {} attempts delayed ({:.1} s in all), {} rejected locally, {} requests ended locally rejected",
            "client throttle",
            r.description.client_throttle,
            res.throttle_delays,
            res.throttle_delay_ms as f64 / 1000.0,
            res.local_rejections,
            res.locally_rejected
        )
        .unwrap();
    }
    if r.warmup_requests > 0 || r.description.warmup_s > 0.0 {
        writeln!(
            out,
            "{:>20} {:.1} s, {} requests not counted",
            "warm-up", r.description.warmup_s, r.warmup_requests
        )
        .unwrap();
    }
    if let Some(plan) = &r.description.rate_plan {
        writeln!(
            out,
            "{:>20} {plan}, achieved {:.2} requests/s",
            "open loop",
            r.throughput()
        )
        .unwrap();
        let late = r.late_sends();
        write!(
            out,
            "{:>20} {late} ({:.2} %, every worker was busy at the intended time)",
            "late sends",
            late as f64 * 100.0 / r.requests().max(1) as f64
        )
        .unwrap();
        if late > 0 {
            write!(
                out,
                ": late by p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                r.lateness.percentile_ms(50.0),
                r.lateness.percentile_ms(99.0),
                r.lateness.max_ms()
            )
            .unwrap();
        }
        out.push('\n');
    }
    let g = &r.generator;
    let mut line = match (g.cpu_s, g.cpu_share()) {
        (Some(cpu), Some(share)) => format!(
            "CPU {cpu:.2} s in {:.2} s = {:.0} % of {} core(s){}",
            g.wall_s,
            share * 100.0,
            g.cores,
            if g.embedded_target {
                " (embedded dn-sim included)"
            } else {
                ""
            }
        ),
        _ => "CPU use unknown".to_string(),
    };
    if r.timer_lag.count() > 0 {
        write!(
            line,
            "; scheduled sends fired late by p99 {:.3} ms, max {:.3} ms",
            r.timer_lag.percentile_ms(99.0),
            r.timer_lag.max_ms()
        )
        .unwrap();
    }
    writeln!(out, "{:>20} {line}", "generator").unwrap();
    let limits = r.generator_limits();
    if limits.is_empty() {
        writeln!(out, "{:>20} no sign that loadgen was the limit", "").unwrap();
    } else {
        for reason in limits {
            writeln!(out, "{:>20} may have been the limit: {reason}", "").unwrap();
        }
    }
    if r.processes > 1 {
        writeln!(out, "{:>20} {} loadgen runs merged", "merged", r.processes).unwrap();
    }
    if r.interrupted {
        writeln!(
            out,
            "{:>20} stopped by a signal; the report covers what was measured",
            "interrupted"
        )
        .unwrap();
    }
    out
}

/// Whether the goodput, retries and client-throttle lines are printed: when retries or a client
/// throttle were asked for, or when any retry, rejection by the target or client throttling
/// happened (merged runs). A plain run leaves them out; JSON and CSV always carry the fields.
fn shows_resilience(r: &Results) -> bool {
    let d = &r.description;
    let res = &r.resilience;
    let asked = d.retry_policy != "none" || d.client_throttle != "none";
    let happened = res.retries > 0
        || res.rejections > 0
        || res.locally_throttled() > 0
        || res.locally_rejected > 0;
    asked || happened
}

/// Bytes per second with binary units: `0 B`, `1.50 MiB`.
pub fn bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = v;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_results;
    use std::time::Duration;

    #[test]
    fn closed_loop_details_list_the_chosen_percentiles() {
        let r = test_results(&[100, 200, 300, 400, 5000]);
        let text = render(&r, &[50.0, 99.9]);
        assert!(text.contains("Successful executions: 5\n"), "{text}");
        assert!(text.contains("                 p50        0.300"), "{text}");
        assert!(text.contains("               p99.9        5.003"), "{text}");
        assert!(!text.contains("uncorrected"), "{text}");
        assert!(
            text.contains("no sign that loadgen was the limit"),
            "{text}"
        );
    }

    const RESILIENCE_LINES: [&str; 3] = [
        "             goodput ",
        "             retries ",
        "     client throttle ",
    ];

    fn resilience_lines(text: &str) -> usize {
        RESILIENCE_LINES
            .iter()
            .filter(|l| text.lines().any(|t| t.starts_with(*l)))
            .count()
    }

    #[test]
    fn a_plain_run_has_no_retry_or_throttle_lines() {
        let text = render(&test_results(&[100, 200, 300]), &[50.0, 99.0]);
        assert_eq!(resilience_lines(&text), 0, "{text}");
    }

    #[test]
    fn retry_and_throttle_lines_show_when_asked_for_or_when_they_happened() {
        let mut r = test_results(&[100, 200, 300]);
        r.description.retry_policy = "exp:min=3s,max=30s,delta=3s,retries=2".into();
        let text = render(&r, &[50.0]);
        assert_eq!(resilience_lines(&text), 3, "{text}");
        assert!(
            text.contains("             retries 0 attempts, 0 retries (at most 0 for one request), 0 rejected by the target\n"),
            "{text}"
        );

        let mut r = test_results(&[100]);
        r.description.client_throttle = "sre".into();
        let text = render(&r, &[50.0]);
        assert!(
            text.contains("     client throttle sre 0 attempts delayed"),
            "{text}"
        );
        assert_eq!(resilience_lines(&text), 3, "{text}");

        // Nothing asked for (e.g. merged runs that disagree), but it happened.
        let happened: [fn(&mut Results); 4] = [
            |r| r.resilience.retries = 1,
            |r| r.resilience.rejections = 1,
            |r| r.resilience.local_rejections = 1,
            |r| r.resilience.throttle_delays = 1,
        ];
        for set in happened {
            let mut r = test_results(&[100]);
            set(&mut r);
            let text = render(&r, &[50.0]);
            assert_eq!(resilience_lines(&text), 3, "{text}");
        }
    }

    #[test]
    fn open_loop_details_show_both_latencies_and_late_sends() {
        let mut r = test_results(&[100, 200]);
        r.description.load = "open".into();
        r.description.rate_plan = Some("1000/s".into());
        r.corrected.record(Duration::from_millis(90));
        r.uncorrected.record(Duration::from_micros(150));
        r.lateness.record(Duration::from_millis(80));
        let text = render(&r, &[50.0, 99.0]);
        assert!(text.contains("corrected  uncorrected"), "{text}");
        assert!(text.contains("          late sends 1 (33.33 %"), "{text}");
        assert!(text.contains("may have been the limit"), "{text}");
        assert_eq!(bytes(1536.0 * 1024.0), "1.50 MiB");
    }
}

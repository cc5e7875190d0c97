//! freon's console report, byte for byte: Dropwizard metrics-core 3.2.6 `ConsoleReporter` with
//! rates in calls/second and durations in milliseconds, then freon's three totals. The timer's
//! values come from an HDR histogram of every successful request rather than Dropwizard's
//! sampling reservoir; failures are counted separately.

use super::format_dropwizard_datetime;
use crate::results::Results;
use std::fmt::Write;
use std::time::{Duration, UNIX_EPOCH};

const CONSOLE_WIDTH: usize = 80;

fn banner(out: &mut String, s: &str, c: char) {
    out.push_str(s);
    out.push(' ');
    for _ in 0..CONSOLE_WIDTH.saturating_sub(s.len() + 1) {
        out.push(c);
    }
    out.push('\n');
}

/// The report freon prints at the end of a run.
pub fn render(run: &Results) -> String {
    let mut out = String::new();
    let ended = UNIX_EPOCH + Duration::from_millis(run.started_at_ms) + run.elapsed;
    banner(&mut out, &format_dropwizard_datetime(ended), '=');
    out.push('\n');
    banner(&mut out, "-- Timers", '-');
    out.push_str(&run.description.timer);
    out.push('\n');
    let h = &run.corrected;
    let mean_rate = h.count() as f64 / run.elapsed.as_secs_f64().max(1e-9);
    let [m1, m5, m15] = run.moving_rates;
    let rate_lines = [
        ("count", None),
        ("mean rate", Some(mean_rate)),
        ("1-minute rate", Some(m1)),
        ("5-minute rate", Some(m5)),
        ("15-minute rate", Some(m15)),
    ];
    for (label, rate) in rate_lines {
        match rate {
            None => writeln!(out, "{label:>18} = {}", h.count()),
            Some(r) => writeln!(out, "{label:>18} = {r:.2} calls/second"),
        }
        .unwrap();
    }
    let values = [
        ("min =", h.min_ms()),
        ("max =", h.max_ms()),
        ("mean =", h.mean_ms()),
        ("stddev =", h.stddev_ms()),
        ("median =", h.percentile_ms(50.0)),
        ("75% <=", h.percentile_ms(75.0)),
        ("95% <=", h.percentile_ms(95.0)),
        ("98% <=", h.percentile_ms(98.0)),
        ("99% <=", h.percentile_ms(99.0)),
        ("99.9% <=", h.percentile_ms(99.9)),
    ];
    for (label, v) in values {
        writeln!(out, "{label:>20} {v:.2} milliseconds").unwrap();
    }
    out.push_str("\n\n");
    let failures = run.failures();
    writeln!(
        out,
        "Total execution time (sec): {}",
        run.elapsed.as_secs_f64().round() as u64
    )
    .unwrap();
    writeln!(out, "Failures: {failures}").unwrap();
    writeln!(out, "Successful executions: {}", h.count()).unwrap();
    out
}

/// What freon adds when requests failed, then the failures by kind (ours): each kind's count
/// and the first message seen.
pub fn failure_lines(run: &Results) -> String {
    let mut out = String::new();
    if run.failures() == 0 {
        return out;
    }
    if let Some(n) = run.description.requests {
        writeln!(
            out,
            "Expected {n} --number-of-tests objects!, successfully executed {}",
            run.successes()
        )
        .unwrap();
    }
    out.push_str("Failures by kind:\n");
    for (kind, e) in &run.errors {
        writeln!(out, "  {kind} = {} (first: {})", e.count, e.first_message).unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_results;

    #[test]
    fn layout_matches_dropwizard_console_reporter() {
        let run = test_results(&[300, 590, 830, 1670]);
        let text = render(&run);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!("11/30/26, 10:45:25 AM {}", "=".repeat(58))
        );
        assert_eq!(lines[0].len(), 80);
        assert_eq!(lines[1], "");
        assert_eq!(lines[2], format!("-- Timers {}", "-".repeat(70)));
        assert_eq!(lines[3], "rpc-payload");
        assert_eq!(lines[4], "             count = 4");
        assert_eq!(lines[5], "         mean rate = 0.80 calls/second");
        assert_eq!(lines[6], "     1-minute rate = 0.00 calls/second");
        assert_eq!(lines[8], "    15-minute rate = 0.00 calls/second");
        assert_eq!(lines[9], "               min = 0.30 milliseconds");
        assert_eq!(lines[10], "               max = 1.67 milliseconds");
        assert_eq!(lines[13], "            median = 0.59 milliseconds");
        assert_eq!(lines[14], "              75% <= 0.83 milliseconds");
        assert_eq!(lines[18], "            99.9% <= 1.67 milliseconds");
        assert_eq!(lines[19], "");
        assert_eq!(lines[20], "");
        assert_eq!(lines[21], "Total execution time (sec): 5");
        assert_eq!(lines[22], "Failures: 0");
        assert_eq!(lines[23], "Successful executions: 4");
    }
}

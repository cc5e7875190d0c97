//! What `loadgen echo` shows while it runs and in its text report: the progress lines' p99 is the
//! last interval's real latency, and the goodput, retries and client-throttle lines appear only
//! when retries or a throttle were asked for or happened (JSON and CSV always keep the fields).

use clap::Parser;
use loadgen::cli::Cli;
use std::process::Command;

fn run(args: &[&str]) -> loadgen::Summary {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run(Cli::try_parse_from(&argv).expect("valid flags")).expect("the run works")
}

/// The p99 of each `Progress:` line (`None` for `p99 n/a`).
fn progress_p99s(stderr: &str) -> Vec<Option<f64>> {
    stderr
        .lines()
        .filter(|l| l.starts_with("Progress:"))
        .map(|l| {
            let (_, rest) = l.split_once(", p99 ").unwrap_or_else(|| panic!("{l}"));
            let (value, _) = rest.split_once(',').unwrap_or_else(|| panic!("{l}"));
            match value {
                "n/a" => None,
                v => Some(
                    v.strip_suffix(" ms")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| panic!("{l}")),
                ),
            }
        })
        .collect()
}

#[test]
fn progress_lines_show_the_p99_of_the_last_interval() {
    // Every echo sleeps 5 ms on the embedded dn-sim, so no p99 can be below it. stderr is a
    // pipe here: one plain line per interval.
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "echo",
            "--duration",
            "2s",
            "-t",
            "2",
            "--sleep-time-ms",
            "5",
            "--report-interval",
            "250ms",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let p99s = progress_p99s(&stderr);
    assert!(p99s.len() >= 3, "{stderr}");
    let measured: Vec<f64> = p99s.iter().flatten().copied().collect();
    assert!(!measured.is_empty(), "no p99 shown: {stderr}");
    assert!(
        measured.iter().all(|&ms| ms >= 4.95),
        "a p99 below the 5 ms service time: {stderr}"
    );
}

const RESILIENCE_LINES: [&str; 3] = [
    "             goodput ",
    "             retries ",
    "     client throttle ",
];

fn resilience_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| RESILIENCE_LINES.iter().any(|p| l.starts_with(p)))
        .collect()
}

#[test]
fn a_plain_run_has_no_retry_or_throttle_lines_but_json_keeps_the_fields() {
    let s = run(&["echo", "-n", "300", "-t", "2", "--format", "json"]);
    assert_eq!(s.successes(), 300);
    assert!(resilience_lines(&s.text).is_empty(), "{}", s.text);
    assert!(
        s.text.contains("Successful executions: 300\n"),
        "{}",
        s.text
    );
    let json: serde_json::Value = serde_json::from_str(&s.report).unwrap();
    let res = &json["resilience"];
    for field in ["attempts", "retries", "rejections", "goodput_bytes_per_s"] {
        assert!(res.get(field).is_some(), "{field} missing: {res}");
    }
}

#[test]
fn a_run_with_retries_or_a_throttle_has_the_lines() {
    let s = run(&["echo", "-n", "300", "-t", "2", "--retry", "2"]);
    assert_eq!(s.successes(), 300);
    let lines = resilience_lines(&s.text);
    assert_eq!(lines.len(), 3, "{}", s.text);
    assert!(
        lines[1].starts_with("             retries 300 attempts, 0 retries"),
        "{}",
        s.text
    );

    let s = run(&["echo", "-n", "300", "-t", "2", "--client-throttle", "sre"]);
    let lines = resilience_lines(&s.text);
    assert_eq!(lines.len(), 3, "{}", s.text);
    assert!(
        lines[2].starts_with("     client throttle sre "),
        "{}",
        s.text
    );
}

//! loadgen as a user runs it: in-process against the embedded dn-sim or a started one, and the
//! binary for command-line errors.

mod support;

use clap::Parser;
use loadgen::cli::Cli;
use std::process::Command;

fn run(args: &[&str]) -> Result<loadgen::Summary, loadgen::Error> {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run(Cli::try_parse_from(argv).expect("valid flags"))
}

#[test]
fn echo_against_the_embedded_dn_sim_reports_every_request() {
    let summary = run(&[
        "echo",
        "-n",
        "2000",
        "-t",
        "8",
        "--clients",
        "2",
        "--payload-resp",
        "1",
    ])
    .unwrap();
    assert_eq!(summary.successes(), 2000);
    assert_eq!(summary.failures(), 0);
    assert_eq!(summary.results.bytes_received, 2000 * 1024);
    assert!(
        summary.header.contains("embedded dn-sim"),
        "{}",
        summary.header
    );
    assert!(
        summary.report.contains("             count = 2000\n"),
        "{}",
        summary.report
    );
    assert!(summary.report.contains("Successful executions: 2000\n"));
    assert!(summary.report.contains("Failures: 0\n"));
}

#[test]
fn duration_runs_stop_by_time() {
    let summary = run(&["echo", "--duration", "1s", "-t", "4"]).unwrap();
    assert!(summary.successes() > 0);
    let secs = summary.results.elapsed.as_secs_f64();
    assert!((0.9..5.0).contains(&secs), "{secs}");
}

#[test]
fn unknown_container_fails_with_its_result_code() {
    let summary = run(&["echo", "-n", "100", "-t", "2", "--container-id", "2"]).unwrap();
    // Without --fail-at-end the run stops at the first failure, as freon does.
    assert!(
        summary.failures() >= 1 && summary.failures() <= 2,
        "{}",
        summary.failures()
    );
    assert_eq!(summary.successes(), 0);
    assert!(
        summary.report.contains("result:CONTAINER_NOT_FOUND"),
        "{}",
        summary.report
    );
    assert!(summary.report.contains("ContainerID 2 does not exist"));

    let summary = run(&["echo", "-n", "50", "-t", "2", "--container-id", "2", "-f"]).unwrap();
    assert_eq!(summary.failures(), 50);
}

#[test]
fn a_remote_dn_sim_can_be_targeted() {
    let server = dn_sim::EmbeddedServer::start(dn_sim::Config::loopback(), 1).unwrap();
    let target = server.local_addr().to_string();
    let summary = run(&[
        "echo",
        "-n",
        "500",
        "--target",
        &target,
        "--sleep-time-ms",
        "1",
    ])
    .unwrap();
    assert_eq!(summary.successes(), 500);
    assert!(summary.header.contains(&target));
    // Each echo sleeps 1 ms on the server, so no latency can be below it.
    assert!(summary.results.corrected.min_ms() >= 1.0);
}

fn loadgen(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_command_lines_exit_2_with_one_line_naming_the_problem() {
    let free_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("127.0.0.1:{free_port}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["echo", "--payload-req", "-1"], "--payload-req"),
        (vec!["echo", "--payload-resp", "40000"], "--payload-resp"),
        (vec!["echo", "-t", "0"], "--threads"),
        (vec!["echo", "--duration", "soon"], "--duration"),
        (vec!["echo", "--clients", "0"], "--clients"),
        (vec!["echo", "--no-such-flag"], "--no-such-flag"),
        (vec!["echo", "--target", "nohostport"], "--target"),
        (
            vec!["echo", "--target", &refused, "--connect-timeout", "2s"],
            "cannot connect",
        ),
        (vec!["echo", "--rate", "0"], "--rate"),
        (
            vec!["echo", "--client-throttle", "cubic"],
            "--client-throttle",
        ),
        (vec!["echo", "--retry", "-1"], "--retry"),
        (
            vec!["echo", "--retry-backoff", "exp:min=5s,max=1s"],
            "--retry-backoff",
        ),
        (
            vec!["echo", "--throttle-scope", "thread"],
            "--throttle-scope",
        ),
        (
            vec!["echo", "--stream-mode", "persistent", "--retry", "3"],
            "--retry",
        ),
        (vec!["echo", "--rate", "fast"], "--rate"),
        (
            vec!["echo", "--rate-schedule", "sine:from=1"],
            "--rate-schedule",
        ),
        (
            vec![
                "echo",
                "--rate",
                "10",
                "--rate-schedule",
                "ramp:from=1,to=2,over=1s",
            ],
            "--rate",
        ),
        (vec!["echo", "--pipeline", "4"], "--pipeline"),
        (vec!["echo", "--stream-mode", "sometimes"], "--stream-mode"),
        (vec!["echo", "--percentiles", "0,50"], "--percentiles"),
        (vec!["echo", "--format", "xml"], "--format"),
        (vec!["echo", "--warmup", "-1s"], "--warmup"),
        (
            vec!["echo", "--metrics-listen", "nowhere"],
            "--metrics-listen",
        ),
        (
            vec!["echo", "--output", "/nonexistent-dir/r.json"],
            "--output",
        ),
        (
            vec!["echo", "--histogram-log", "/nonexistent-dir/l.hlog"],
            "--histogram-log",
        ),
        (vec!["merge"], "FILE"),
        (vec!["merge", "/nonexistent-dir/r.json"], "merge"),
    ];
    for (args, needle) in cases {
        support::assert_usage_error(&args, needle);
    }
}

#[test]
fn failures_give_a_non_zero_exit_and_help_is_not_an_error() {
    let (code, stdout, _) = loadgen(&["echo", "-n", "10", "-t", "1", "--container-id", "99"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("Failures: 1"), "{stdout}");
    let (code, stdout, _) = loadgen(&["echo", "--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("--payload-resp"));
}

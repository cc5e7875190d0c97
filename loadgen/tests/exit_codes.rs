//! loadgen's exit codes, one test per class (docs/loadgen.md, "Exit codes"): 0 every request
//! succeeded; 1 a run with failures, or one whose report could not be written (the report still
//! on stdout); 2 bad flags, a file given by a flag that cannot be used, an unreachable target.

mod support;

use clap::Parser;
use loadgen::cli::Cli;
use std::process::Command;

/// The loadgen binary's exit code, stdout and stderr.
fn loadgen(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_in_process(args: &[&str]) -> Result<loadgen::Summary, loadgen::Error> {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run(Cli::try_parse_from(argv).expect("valid flags"))
}

/// A port on 127.0.0.1 that was bound and closed again: nothing listens there.
fn closed_port() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

#[test]
fn a_bad_flag_exits_2_with_one_line_naming_it() {
    support::assert_usage_error(&["echo", "--threads", "zero"], "--threads");
    support::assert_usage_error(
        &["echo", "--stream-mode", "persistent", "--target", "null"],
        "--stream-mode persistent",
    );
    // An --output whose parent is a regular file is refused before the run (even for root),
    // and nothing is created.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "not a directory").unwrap();
    let inside = file.join("x.json");
    let inside = inside.to_str().unwrap();
    for flag in ["--output", "--histogram-log"] {
        support::assert_usage_error(&["echo", "-n", "10", flag, inside], flag);
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
    // A merge input that is not a loadgen result is the user's input: 2, naming the file.
    support::assert_usage_error(&["merge", file.to_str().unwrap()], "plain-file");
}

#[test]
fn an_unreachable_target_exits_2_in_one_line_and_leaves_an_earlier_report_alone() {
    let target = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    std::fs::write(&report, "an earlier report\n").unwrap();
    let (code, stdout, stderr) = loadgen(&[
        "echo",
        "--target",
        &target,
        "-n",
        "10",
        "--connect-timeout",
        "2s",
        "--format",
        "json",
        "--output",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("loadgen: error: cannot connect to {target}")),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
    // --output is checked before the run, not created or truncated then.
    assert_eq!(
        std::fs::read_to_string(&report).unwrap(),
        "an earlier report\n"
    );

    let e = run_in_process(&["echo", "--target", &target, "-n", "10"])
        .err()
        .expect("nothing listens there");
    assert!(matches!(e, loadgen::Error::Unreachable(_)), "{e:?}");
    assert_eq!(e.exit_code(), 2);
}

#[test]
fn a_run_with_failed_requests_exits_1_with_its_report() {
    let server = support::dn_sim_with(&["echo=IO_EXCEPTION:1"], None);
    let target = server.local_addr().to_string();
    let (code, stdout, stderr) =
        loadgen(&["echo", "--target", &target, "-n", "20", "-t", "2", "-f"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.contains("Failures: 20\n"), "{stdout}");
    assert!(stdout.contains("Successful executions: 0\n"), "{stdout}");
    assert!(!stderr.contains("error:"), "{stderr}");
    // The same target without the fault: exit 0.
    let healthy = support::dn_sim_with(&[], None);
    let target = healthy.local_addr().to_string();
    let (code, stdout, stderr) = loadgen(&["echo", "--target", &target, "-n", "20", "-t", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Failures: 0\n"), "{stdout}");
}

#[test]
fn a_report_that_cannot_be_written_is_printed_and_exits_1() {
    // /dev/full passes the check before the run (it opens for writing) and fails the write,
    // ENOSPC, for root too.
    let full = "/dev/full";
    for (format, marker) in [("text", "Successful executions: 30\n"), ("json", "{")] {
        let (code, stdout, stderr) = loadgen(&[
            "echo", "-n", "30", "-t", "2", "--format", format, "--output", full,
        ]);
        assert_eq!(code, 1, "{format}: {stderr}");
        // The report, as without --output, so that it is not lost.
        assert!(stdout.contains(marker), "{format}: {stdout}");
        if format == "json" {
            let v: serde_json::Value = serde_json::from_str(&stdout).expect("the JSON report");
            assert!(v.is_object(), "{stdout}");
        }
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("loadgen:"))
            .collect();
        assert_eq!(
            lines,
            [format!(
                "loadgen: could not write the report to {full}: No space left on device (os error 28)"
            )],
            "{format}: {stderr}"
        );
    }

    let summary = run_in_process(&["echo", "-n", "30", "-t", "2", "--output", full])
        .expect("the run finishes");
    assert_eq!(summary.successes(), 30);
    assert_eq!(summary.exit_code(), 1);
    assert!(summary.written_to.is_none());
    assert_eq!(summary.unwritten.len(), 1);
    assert_eq!(summary.unwritten[0].what, "report");
    assert!(summary.stdout().contains("Successful executions: 30\n"));
}

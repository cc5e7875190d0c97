//! Helpers shared by loadgen's integration tests (`mod support;` in each test crate).
#![allow(dead_code)] // each test crate uses its share

use clap::Parser;
use loadgen::cli::Cli;
use std::process::Command;

/// Runs the loadgen binary with `args` and asserts what a bad command line gets: exit code 2,
/// nothing on stdout, one line on stderr that contains `needle` (the flag or value at fault),
/// and no panic.
pub fn assert_usage_error(args: &[&str], needle: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: one line, got {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: '{needle}' not in {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
}

/// `loadgen write …` or `loadgen read …` (any run) in this process.
pub fn run_block(args: &[&str]) -> loadgen::Summary {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("valid flags");
    loadgen::run(cli).expect("the run starts")
}

/// The count of errors of `kind`, if any.
pub fn errors_of(s: &loadgen::Summary, kind: &str) -> Option<u64> {
    s.results.errors.get(kind).map(|e| e.count)
}

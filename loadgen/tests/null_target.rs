//! `--target null`: dn-sim's dispatcher and store answer in loadgen's own process, with no
//! network. Writes succeed with the byte counts of the shape, echo answers as dn-sim does, data
//! written to its memory store reads back verified, every report names the target, and the
//! combinations that cannot work are refused with exit code 2 and one line.

mod support;

use loadgen::connection::null::NAME;
use serde_json::Value;
use std::process::Command;

/// Runs the loadgen binary; asserts exit code 0 and returns stdout.
fn loadgen(args: &[&str]) -> String {
    loadgen_exit(args, 0)
}

/// Runs the loadgen binary; asserts the exit code and returns stdout.
fn loadgen_exit(args: &[&str], code: i32) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    serde_json::from_str(&loadgen(&all)).unwrap()
}

#[test]
fn write_has_the_shapes_byte_counts_and_names_the_target() {
    // One stream, 100 writes of 256 KB = 25 MB: six full 4 MB chunks and 1 MB at close, a
    // PutBlock at 16 MB and the last one (eof), one block.
    let r = json(&[
        "write",
        "--target",
        "null",
        "-n",
        "100",
        "-t",
        "1",
        "--write-size",
        "256KB",
    ]);
    assert_eq!(r["config"]["target"], NAME);
    assert_eq!(r["totals"]["failures"], 0);
    assert_eq!(r["write"]["writes"], 100);
    assert_eq!(r["write"]["bytes"], 100 * 256 * 1024);
    assert_eq!(r["write"]["blocks_committed"], 1);
    assert_eq!(r["ops"]["WriteChunk"]["count"], 7);
    assert_eq!(r["ops"]["WriteChunk"]["bytes"], 100 * 256 * 1024);
    assert_eq!(r["ops"]["PutBlock"]["count"], 2);
    assert_eq!(r["generator"]["embedded_target"], true);
    // 4 streams share the 100 writes (closed loop: whoever is free takes the next), each
    // commits its block: every worker gets its turn although no answer ever waits.
    let r = json(&[
        "write",
        "--target",
        "null",
        "-n",
        "100",
        "-t",
        "4",
        "--write-size",
        "256KB",
    ]);
    assert_eq!(r["totals"]["failures"], 0);
    assert_eq!(r["write"]["bytes"], 100 * 256 * 1024);
    assert_eq!(r["ops"]["WriteChunk"]["bytes"], 100 * 256 * 1024);
    assert_eq!(r["write"]["blocks_committed"], 4);
    assert_eq!(r["ops"]["PutBlock"]["count"], 4);

    let text = loadgen(&["write", "--target", "null", "-n", "8", "-t", "2"]);
    assert!(text.contains(&format!("target: {NAME}")), "{text}");
    let csv = loadgen(&[
        "write", "--target", "null", "-n", "8", "-t", "2", "--format", "csv",
    ]);
    assert!(csv.contains(&format!("\"{NAME}\"")), "{csv}");
}

#[test]
fn writes_of_several_blocks_commit_each_and_read_back_verified() {
    // 2 streams × 12 writes of 1 MB with 4 MB blocks: 3 blocks each, every byte read back.
    let r = json(&[
        "write",
        "--target",
        "null",
        "-n",
        "24",
        "-t",
        "2",
        "--write-size",
        "1MB",
        "--block-size",
        "4MB",
        "--flush-size",
        "4MB",
        "--then-read",
    ]);
    assert_eq!(r["totals"]["failures"], 0);
    assert_eq!(r["write"]["blocks_committed"], 6);
    assert_eq!(r["read"]["bytes_verified"], 24 << 20);
    assert_eq!(r["integrity_errors"], 0);

    // read without a manifest: a data set written first into the memory store.
    let r = json(&["read", "--target", "null", "-n", "16", "-t", "2"]);
    assert_eq!(r["config"]["target"], NAME);
    assert_eq!(r["totals"]["failures"], 0);
    assert_eq!(r["read"]["bytes_verified"], 16 << 20);
}

#[test]
fn echo_answers_as_dn_sim_does() {
    let r = json(&[
        "echo",
        "--target",
        "null",
        "-n",
        "200",
        "-t",
        "3",
        "--payload-resp",
        "4",
    ]);
    assert_eq!(r["config"]["target"], NAME);
    assert_eq!(r["totals"]["successes"], 200);
    assert_eq!(r["totals"]["bytes_received"], 200 * 4096);
    // The container must exist, as on dn-sim (which creates container 1 only).
    let out = loadgen_exit(
        &[
            "echo",
            "--target",
            "null",
            "-n",
            "3",
            "-f",
            "--container-id",
            "7",
            "--format",
            "json",
        ],
        1,
    );
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["totals"]["failures"], 3);
    assert!(
        r["errors"].to_string().contains("CONTAINER_NOT_FOUND"),
        "{}",
        r["errors"]
    );
}

#[test]
fn combinations_that_cannot_work_are_refused() {
    support::assert_usage_error(
        &[
            "echo",
            "--target",
            "null",
            "--stream-mode",
            "persistent",
            "-n",
            "3",
        ],
        "--target null",
    );
    let manifest = std::env::temp_dir().join(format!("loadgen-null-{}.jsonl", std::process::id()));
    std::fs::write(&manifest, "").unwrap();
    support::assert_usage_error(
        &[
            "read",
            "--target",
            "null",
            "--manifest",
            manifest.to_str().unwrap(),
        ],
        "--target null",
    );
    let _ = std::fs::remove_file(manifest);
}

//! A test split over processes (`--shard I/N`, `--shards N` with `JOB_COMPLETION_INDEX`,
//! `--start-at`, `--result-markers`) and `loadgen merge` of the shards: the loadgen binary as an
//! Indexed Job's pods run it, against the in-process `--target null`.

mod support;

use clap::Parser;
use std::process::{Command, Output};

fn loadgen(args: &[&str], index: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loadgen"));
    cmd.args(args).env("RUST_LOG", "off");
    match index {
        Some(i) => cmd.env("JOB_COMPLETION_INDEX", i),
        None => cmd.env_remove("JOB_COMPLETION_INDEX"),
    };
    cmd.output().unwrap()
}

/// Exit code 2 and one line on stderr that names `needle`.
fn assert_usage(args: &[&str], index: Option<&str>, needle: &str) {
    let out = loadgen(args, index);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?} {index:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?} {index:?}: '{needle}' not in {stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_shard_flags_and_index_variables_exit_2_naming_the_flag() {
    let echo = ["echo", "--target", "null", "-n", "10"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        echo.iter().chain(extra).copied().collect()
    };
    assert_usage(&with(&["--shard", "4/4"]), None, "--shard");
    assert_usage(&with(&["--shard", "0/0"]), None, "--shard");
    assert_usage(&with(&["--shard", "one/4"]), None, "--shard");
    assert_usage(&with(&["--shards", "0"]), Some("0"), "--shards");
    assert_usage(&with(&["--shards", "3"]), None, "--shards");
    assert_usage(&with(&["--shards", "3"]), None, "JOB_COMPLETION_INDEX");
    assert_usage(&with(&["--shards", "3"]), Some("3"), "--shards");
    assert_usage(
        &with(&["--shards", "3"]),
        Some("two"),
        "JOB_COMPLETION_INDEX",
    );
    assert_usage(&with(&["--shards", "3"]), Some(""), "--shards");
    assert_usage(
        &with(&["--shard", "0/2", "--shards", "2"]),
        Some("0"),
        "--shard",
    );
    assert_usage(&with(&["--start-at", "tomorrow"]), None, "--start-at");
    assert_usage(
        &with(&["--start-at", "2026-12-03T18:00:00"]),
        None,
        "--start-at",
    );
    // 10 requests over 16 shards leave shard 12 none: said, not run empty.
    assert_usage(&with(&["--shard", "12/16"]), None, "--shard");
}

/// Runs the shards of `args` as an Indexed Job would (one process per index, the same flags),
/// each printing its result between markers, and merges their stdout (one log, as `kubectl
/// logs --prefix` of every pod gives it) as JSON.
/// Each shard also writes its JSON result to a file of `dir` (`--output`), as the chart's pods do
/// on their shared volume.
fn run_split(
    args: &[&str],
    shards: u32,
    dir: &std::path::Path,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut log = String::new();
    let mut each = Vec::new();
    for i in 0..shards {
        let n = shards.to_string();
        let file = dir.join(format!("shard-{i}.json"));
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--shards", &n, "--result-markers", "--format", "json"]);
        all.extend(["--output", file.to_str().unwrap()]);
        let out = loadgen(&all, Some(&i.to_string()));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in stdout.lines() {
            log.push_str(&format!("[pod/split-{i}-abcde/loadgen] {line}\n"));
        }
        let begin = stdout.find("-----BEGIN LOADGEN RESULT-----\n").unwrap() + 31;
        let end = stdout.find("-----END LOADGEN RESULT-----").unwrap();
        each.push(serde_json::from_str(&stdout[begin..end]).unwrap());
    }
    let path = dir.join("pods.log");
    std::fs::write(&path, log).unwrap();
    let out = loadgen(&["merge", path.to_str().unwrap(), "--format", "json"], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (each, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn shards_do_exact_shares_of_n_and_merge_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (each, merged) = run_split(
        &["echo", "--target", "null", "-n", "1003", "-t", "2"],
        4,
        dir.path(),
    );
    let requests: Vec<u64> = each
        .iter()
        .map(|r| r["totals"]["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(requests, [251, 251, 251, 250]);
    assert_eq!(merged["totals"]["requests"], 1003);
    assert_eq!(merged["totals"]["successes"], 1003);
    assert_eq!(merged["latency"]["corrected"]["count"], 1003);
    assert_eq!(merged["config"]["requests"], 1003);
    assert_eq!(merged["processes"], 4);
    let phases = &merged["measured_phases"];
    assert_eq!(phases["runs"], 4);
    assert_eq!(phases["complete_split"], true, "{phases}");
    assert_eq!(merged["runs"].as_array().unwrap().len(), 4);
    // The files on the shared volume merge to the same (the directory: its *.json files).
    let out = loadgen(
        &[
            "merge",
            dir.path().to_str().unwrap(),
            "--wait",
            "5s",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_files: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_files["totals"], merged["totals"]);
    assert_eq!(
        from_files["latency"]["corrected"]["histogram"],
        merged["latency"]["corrected"]["histogram"]
    );
    // Without shard 3, --wait gives up naming it.
    std::fs::remove_file(dir.path().join("shard-3.json")).unwrap();
    let out = loadgen(
        &["merge", dir.path().to_str().unwrap(), "--wait", "1s"],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("missing shards [3]"), "{stderr}");
}

#[test]
fn open_loop_shards_carry_the_whole_rate_and_start_together_at_start_at() {
    let dir = tempfile::tempdir().unwrap();
    let (each, merged) = run_split(
        &[
            "echo",
            "--target",
            "null",
            "-n",
            "300",
            "--rate",
            "3000",
            "--start-at",
            "+2s",
        ],
        3,
        dir.path(),
    );
    for r in &each {
        assert_eq!(r["totals"]["requests"], 100);
        assert_eq!(r["config"]["peak_rate"], 3000.0);
        // Without the wait, the measured phase would start about 2 s before the instant.
        let offset = r["runs"][0]["start_offset_ms"].as_f64().unwrap();
        assert!(offset > -500.0, "started {offset} ms from --start-at");
    }
    assert_eq!(merged["totals"]["requests"], 300);
    assert_eq!(
        merged["config"]["peak_rate"], 3000.0,
        "the whole's rate, not 9000"
    );
    assert_eq!(merged["config"]["rate_plan"], "3000/s");
}

/// Runs `args` in this process; the summary.
fn run(args: &[&str]) -> loadgen::Summary {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run(loadgen::cli::Cli::try_parse_from(argv).expect("valid flags")).expect("runs")
}

#[test]
fn a_target_list_spreads_connections_and_is_dealt_out_to_shards() {
    // Two DataNodes told apart by their answers: the second fails every echo.
    let good = support::dn_sim_with(&[], None);
    let bad = support::dn_sim_with(&["echo=IO_EXCEPTION:1.0"], None);
    let list = format!("{},{}", good.local_addr(), bad.local_addr());
    // One process, two connections: connection 0 to the first, 1 to the second.
    let s = run(&[
        "echo",
        "--target",
        &list,
        "--clients",
        "2",
        "-t",
        "4",
        "-n",
        "200",
        "-f",
    ]);
    assert!(
        s.successes() > 0 && s.failures() > 0,
        "{} ok, {} failed",
        s.successes(),
        s.failures()
    );
    assert_eq!(s.successes() + s.failures(), 200);
    assert_eq!(s.results.description.target, list);
    // Two shards: each has its own DataNode.
    let first = run(&[
        "echo", "--target", &list, "--shard", "0/2", "-n", "50", "-f",
    ]);
    assert_eq!((first.successes(), first.failures()), (25, 0));
    assert_eq!(
        first.results.description.target,
        good.local_addr().to_string()
    );
    let second = run(&[
        "echo", "--target", &list, "--shard", "1/2", "-n", "50", "-f",
    ]);
    assert_eq!((second.successes(), second.failures()), (0, 25));
    // Merged, the target is both DataNodes, each once.
    let mut merged = first.results.clone();
    merged.merge(&second.results);
    merged.merge(&first.results);
    assert_eq!(merged.description.target, list);
    // A bad address anywhere in the list is the flag's error.
    let port = good.local_addr().port();
    assert_usage(
        &[
            "echo",
            "--target",
            &format!("127.0.0.1:{port},nonsense"),
            "-n",
            "1",
        ],
        None,
        "--target",
    );
}

#[test]
fn write_shards_write_their_own_blocks_and_read_shards_split_a_manifest() {
    let server = support::dn_sim_with(&[], None);
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    // Two write shards at once against one DataNode: 2 × 3 threads, a block per 64 KB write.
    let manifests: Vec<std::path::PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("shard-{i}.jsonl")))
        .collect();
    std::thread::scope(|scope| {
        for (i, m) in manifests.iter().enumerate() {
            let (addr, shard) = (&addr, format!("{i}/2"));
            scope.spawn(move || {
                let s = run(&[
                    "write",
                    "--target",
                    addr,
                    "--shard",
                    &shard,
                    "-n",
                    "31",
                    "-t",
                    "3",
                    "--write-size",
                    "64KB",
                    "--chunk-size",
                    "64KB",
                    "--block-size",
                    "64KB",
                    "--flush-size",
                    "64KB",
                    "--manifest",
                    m.to_str().unwrap(),
                ]);
                assert_eq!(s.failures(), 0, "{}", s.text);
                // 31 writes over 2 shards: 16 and 15.
                assert_eq!(s.results.write.as_ref().unwrap().writes, 16 - i as u64);
            });
        }
    });
    let mut ids: Vec<i64> = manifests
        .iter()
        .flat_map(|m| loadgen::manifest::read(m).unwrap())
        .map(|b| b.local_id)
        .collect();
    assert_eq!(ids.len(), 31, "a block per write");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 31, "no block written by both shards");
    // Reading shard 0's manifest in three shards: each reads its share of the blocks, once.
    let manifest = manifests[0].to_str().unwrap();
    let read: Vec<u64> = (0..3)
        .map(|i| {
            let shard = format!("{i}/3");
            let r = run(&[
                "read",
                "--target",
                &addr,
                "--manifest",
                manifest,
                "--shard",
                &shard,
            ]);
            assert_eq!(r.failures(), 0, "{}", r.text);
            r.results.read.as_ref().unwrap().blocks
        })
        .collect();
    assert_eq!(read, [6, 5, 5]);
}

//! The runner end to end, with dn-sim on both sides: the "real" side is dn-sim behind
//! `tests/fake-real-datanode.sh` (the real-DataNode launch protocol), the other side dn-sim as the
//! runner starts it. Everything listens on 127.0.0.1; the only processes stopped are the ones
//! started here or by the runner.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// dn-sim's binary: `DN_SIM_BIN`, or built once by cargo (the path cargo reports).
fn dn_sim() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("DN_SIM_BIN") {
            return PathBuf::from(bin);
        }
        let workspace = Path::new(MANIFEST).parent().unwrap();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(workspace).args([
            "build",
            "-p",
            "dn-sim",
            "--bin",
            "dn-sim",
            "--message-format=json",
        ]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let out = cmd.stderr(Stdio::inherit()).output().expect("cargo runs");
        assert!(out.status.success(), "cargo build -p dn-sim failed");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "dn-sim")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reports dn-sim's executable")
    })
}

fn fake_real_cmd(extra: &str) -> String {
    format!(
        "bash {MANIFEST}/tests/fake-real-datanode.sh {} --threads 1 {extra}",
        dn_sim().display()
    )
}

fn shipped_echo() -> PathBuf {
    Path::new(MANIFEST).join("scenarios/echo.json")
}

fn conformance(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("conformance runs")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn last_line(stdout: &str) -> &str {
    stdout.lines().last().unwrap_or("")
}

/// Scenarios beyond echo.json: writes and reads with checksums, a second config group, raw
/// bytes the parser refuses, an unknown cmdType, a one-stream prom step.
const EXTRA: &str = r#"{
  "family": "extra",
  "scenarios": [
    {
      "name": "x-write-read-block",
      "about": "WriteChunk with correct CRC32s, PutBlock, GetBlock, ReadChunk V1",
      "steps": [
        {"request": {"cmdType": "WriteChunk", "containerID": "$C1", "datanodeUuid": "$DN",
          "writeChunk": {"blockID": {"containerID": "$C1", "localID": "7"},
            "chunkData": {"chunkName": "7_chunk_1", "offset": 0, "len": 4096,
              "checksumData": {"type": "CRC32", "bytesPerChecksum": 1024, "checksums": "$checksums"}},
            "data": "$bytes:4096:3"}}},
        {"request": {"cmdType": "PutBlock", "containerID": "$C1", "datanodeUuid": "$DN",
          "putBlock": {"blockData": {"blockID": {"containerID": "$C1", "localID": "7"}, "size": 4096,
            "chunks": [{"chunkName": "7_chunk_1", "offset": 0, "len": 4096,
              "checksumData": {"type": "CRC32", "bytesPerChecksum": 1024, "checksums": "$checksums:bytes:4096:3"}}]}}}},
        {"request": {"cmdType": "GetBlock", "containerID": "$C1", "datanodeUuid": "$DN",
          "getBlock": {"blockID": {"containerID": "$C1", "localID": "7"}}}},
        {"request": {"cmdType": "ReadChunk", "containerID": "$C1", "datanodeUuid": "$DN",
          "readChunk": {"blockID": {"containerID": "$C1", "localID": "7"}, "readChunkVersion": "V1",
            "chunkData": {"chunkName": "7_chunk_1", "offset": 0, "len": 4096,
              "checksumData": {"type": "CRC32", "bytesPerChecksum": 1024}}}}},
        {"sleep_ms": 100},
        {"prom": ["storage_container_metrics_num_write_chunk", "storage_container_metrics_bytes_write_chunk", "hdds_dispatcher_counter"]}
      ]
    },
    {
      "name": "x-validation-wrong-checksums",
      "about": "With chunk data validation on, wrong checksums are refused",
      "config": {"hdds.datanode.chunk.data.validation.check": "true"},
      "steps": [
        {"request": {"cmdType": "WriteChunk", "containerID": "$C1", "datanodeUuid": "$DN",
          "writeChunk": {"blockID": {"containerID": "$C1", "localID": "1"},
            "chunkData": {"chunkName": "1_chunk_1", "offset": 0, "len": 100,
              "checksumData": {"type": "CRC32", "bytesPerChecksum": 64, "checksums": "$checksums:wrong"}},
            "data": "$bytes:100"}}}
      ]
    },
    {
      "name": "x-garbage-bytes",
      "about": "Bytes that are no protobuf message",
      "steps": [{"raw_hex": "ff ff ff"}]
    },
    {
      "name": "x-unknown-cmd-type",
      "about": "cmdType 99 is no Type",
      "stream": "one-stream",
      "steps": [
        {"request": {"cmdType": 99, "containerID": "$C1", "datanodeUuid": "$DN"}},
        {"request": {"cmdType": "Echo", "containerID": "$C1", "datanodeUuid": "$DN", "echo": {}}, "compare": false}
      ]
    }
  ]
}"#;

#[test]
fn two_dn_sims_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.json");
    std::fs::write(&extra, EXTRA).unwrap();
    let json = dir.path().join("answers.json");
    let scenarios =
        conformance::scenario::load(&[shipped_echo(), extra.clone()]).expect("scenarios load");
    let expected = scenarios.iter().filter(|s| s.runs_on("2.2")).count();
    let real_cmd = fake_real_cmd("");
    let sim_cmd = dn_sim().display().to_string();
    let out = conformance(&[
        "--scenarios",
        shipped_echo().to_str().unwrap(),
        "--scenarios",
        extra.to_str().unwrap(),
        "--real-cmd",
        &real_cmd,
        "--sim-cmd",
        &sim_cmd,
        "--sim-extra-args",
        "--threads 1",
        "--containers",
        "1-50",
        "--prom-settle",
        "300ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        last_line(&stdout),
        format!("{expected} identical, 0 declared, 0 differ")
    );
    assert!(
        stdout.starts_with("| scenario | real DataNode | dn-sim | same? |\n|---|---|---|---|\n")
    );
    assert!(
        stdout.contains("| x-write-read-block | SUCCESS ×4; prom "),
        "{stdout}"
    );
    assert!(
        stdout.contains("storage_container_metrics_num_write_chunk +1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("storage_container_metrics_bytes_write_chunk +4096"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| x-validation-wrong-checksums | IO_EXCEPTION"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| x-garbage-bytes | status UNKNOWN \"Application error processing RPC\""),
        "{stdout}"
    );
    // a step that is not compared is shown in parentheses; after a parse failure the stream is
    // over
    assert!(
        stdout
            .contains("| x-unknown-cmd-type | status UNKNOWN \"Application error processing RPC\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("; (no answer (the stream had ended (status UNKNOWN)))"),
        "{stdout}"
    );
    assert!(!stdout.contains("## Differences"), "{stdout}");
    assert!(
        stderr.contains("config group 2/2"),
        "a second pair for the config: {stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["totals"]["identical"], expected);
    assert_eq!(report["groups"].as_array().unwrap().len(), 2);
    let read = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "x-write-read-block")
        .unwrap();
    // the V1 read's 1 KiB buffers are longer than 64 bytes: length and hash, equal on both sides
    let buffers = &read["real"][3]["normalized"]["response"]["readChunk"]["dataBuffers"]["buffers"];
    assert_eq!(buffers.as_array().unwrap().len(), 4, "{buffers}");
    assert!(
        buffers[0]
            .as_str()
            .unwrap()
            .starts_with("<1024 bytes sha256:")
    );
    assert_eq!(
        buffers,
        &read["sim"][3]["normalized"]["response"]["readChunk"]["dataBuffers"]["buffers"]
    );
}

/// The shipped Ratis scenarios through the Ratis transport, dn-sim on both sides: every answer a
/// Raft reply or a stream's end, ids and log indexes shown relative to each side's own.
#[test]
fn two_dn_sims_answer_alike_over_ratis() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("answers.json");
    let ratis = Path::new(MANIFEST).join("scenarios/ratis.json");
    let expected = conformance::scenario::load(std::slice::from_ref(&ratis))
        .expect("scenarios load")
        .iter()
        .filter(|s| s.runs_on("2.2"))
        .count();
    assert!(expected >= 12, "{expected} Ratis scenarios");
    let real_cmd = fake_real_cmd("");
    let sim_cmd = dn_sim().display().to_string();
    let out = conformance(&[
        "--scenarios",
        ratis.to_str().unwrap(),
        "--real-cmd",
        &real_cmd,
        "--sim-cmd",
        &sim_cmd,
        "--sim-extra-args",
        "--threads 1",
        "--containers",
        "1-50",
        "--prom-settle",
        "300ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        last_line(&stdout),
        format!("{expected} identical, 0 declared, 0 differ")
    );
    // ContainerStateMachine's metrics moved as the scenario's Raft requests say.
    assert!(
        stdout.contains("csm_metrics_num_apply_transaction_ops +3")
            && stdout.contains("csm_metrics_num_query_state_machine_ops +2")
            && stdout.contains("csm_metrics_num_bytes_committed_count +4096"),
        "{stdout}"
    );
    // A write refused at startTransaction: counted, and pending_apply_transactions stays up.
    assert!(
        stdout.contains("csm_metrics_num_container_not_open_verify_failures +1"),
        "{stdout}"
    );
    // A write's reply: its log index (the next write's is two on: the metadata entry that
    // recorded the commit between them), the command's answer.
    assert!(
        stdout.contains("| ratis-echo-write | raft L$BASE+1: SUCCESS; raft L$BASE+3: SUCCESS |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("GroupMismatchException")
            || stdout.contains("The group (group-00000000BEEF)"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let put = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "ratis-bcsid-then-grpc-getblock")
        .unwrap();
    // PutBlock's bcsId is its log index; GetBlock over gRPC reports the same.
    let reply = &put["real"][1]["normalized"]["raft_reply"];
    assert_eq!(reply["logIndex"], "$BASE+3", "{reply}");
    assert_eq!(
        reply["message"]["response"]["putBlock"]["committedBlockLength"]["blockID"]["blockCommitSequenceId"],
        "$BASE+3"
    );
    assert_eq!(
        put["real"][2]["normalized"]["response"]["getBlock"]["blockData"]["blockID"]["blockCommitSequenceId"],
        "$BASE+3"
    );
}

#[test]
fn a_different_config_makes_a_difference() {
    let dir = tempfile::tempdir().unwrap();
    let declared = dir.path().join("declared.json");
    std::fs::write(
        &declared,
        r#"{"family": "declared", "scenarios": [{"name": "declared-echo", "declared": "D99",
            "steps": [{"request": {"cmdType": "Echo", "containerID": "$C1", "datanodeUuid": "$DN",
                       "echo": {"readOnly": true}}}]}]}"#,
    )
    .unwrap();
    let real_cmd = fake_real_cmd("");
    let sim_cmd = dn_sim().display().to_string();
    // dn-sim answers every Echo with IO_EXCEPTION; the "real" side does not
    let out = conformance(&[
        "--scenarios",
        shipped_echo().to_str().unwrap(),
        "--scenarios",
        declared.to_str().unwrap(),
        "--only",
        "^(echo-payload-10|declared-echo)$",
        "--real-cmd",
        &real_cmd,
        "--sim-cmd",
        &sim_cmd,
        "--sim-extra-args",
        "--threads 1 --fault echo=IO_EXCEPTION:1",
        "--containers",
        "1-5",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_eq!(last_line(&stdout), "0 identical, 1 declared, 1 differ");
    assert!(
        stdout.contains("| echo-payload-10 | SUCCESS | IO_EXCEPTION"),
        "{stdout}"
    );
    assert!(stdout.contains("**no** (step 1)"), "{stdout}");
    assert!(stdout.contains("declared (D99)"), "{stdout}");
    assert!(stdout.contains("## Differences"), "{stdout}");
    assert!(stdout.contains("### echo-payload-10\n"), "{stdout}");
    assert!(stdout.contains("-     \"result\": \"SUCCESS\""), "{stdout}");
    assert!(
        stdout.contains("+     \"result\": \"IO_EXCEPTION\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("-       \"payload\": \"<10 bytes>\""),
        "{stdout}"
    );
}

/// A dn-sim started by this test, stopped (by its own handle) when dropped.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_dn_sim(uuid: &str) -> (Started, String, String) {
    // Port 0, and the addresses dn-sim writes to its --ready-file once bound: none is guessed.
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let child = Command::new(dn_sim())
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--ready-file")
        .arg(&ready)
        .args([
            "--containers",
            "1-20",
            "--threads",
            "1",
            "--datanode-uuid",
            uuid,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut started = Started(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let text = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break text;
        }
        if let Some(status) = started.0.try_wait().unwrap() {
            panic!("dn-sim exited before serving: {status}");
        }
        assert!(std::time::Instant::now() < deadline, "dn-sim did not start");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} line in {text}"))
            .to_string()
    };
    (started, field("client"), field("admin"))
}

#[test]
fn targets_given_by_address() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.json");
    std::fs::write(&extra, EXTRA).unwrap();
    let (real_uuid, sim_uuid) = (
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
    );
    let (_real, real_addr, real_http) = start_dn_sim(real_uuid);
    let (_sim, sim_addr, sim_http) = start_dn_sim(sim_uuid);
    let out = conformance(&[
        "--scenarios",
        shipped_echo().to_str().unwrap(),
        "--scenarios",
        extra.to_str().unwrap(),
        "--only",
        "^(echo-envelope|echo-metrics|x-write-read-block|x-validation-wrong-checksums)$",
        "--real-addr",
        &real_addr,
        "--real-uuid",
        real_uuid,
        "--real-http",
        &real_http,
        "--sim-addr",
        &sim_addr,
        "--sim-uuid",
        sim_uuid,
        "--sim-http",
        &sim_http,
        "--containers",
        "1-20",
        "--prom-settle",
        "300ms",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(last_line(&stdout), "3 identical, 0 declared, 0 differ");
    assert!(
        stderr.contains(
            "skipping 1 scenario(s) with config hdds.datanode.chunk.data.validation.check=true"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("x-validation-wrong-checksums"), "{stderr}");
    // without --sim-http a prom step is a runner error, which always differs
    let out = conformance(&[
        "--scenarios",
        shipped_echo().to_str().unwrap(),
        "--only",
        "^echo-metrics$",
        "--real-addr",
        &real_addr,
        "--real-uuid",
        real_uuid,
        "--real-http",
        &real_http,
        "--sim-addr",
        &sim_addr,
        "--sim-uuid",
        sim_uuid,
        "--prom-settle",
        "0",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("runner error: /prom at the start: no HTTP address"),
        "{stdout}"
    );
}

#[test]
fn bad_input_and_failed_starts_exit_2() {
    let out = conformance(&["--scenarios", "/nonexistent/scenarios"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("does not exist"), "{}", text(&out).1);
    let out = conformance(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    let out = conformance(&["--only", "nothing-matches-this"]);
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"family": "bad", "scenarios": [{"name": "b", "steps": [{"request": {"cmdTyp": "Echo"}}]}]}"#).unwrap();
    let out = conformance(&["--scenarios", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("bad.json"), "{}", text(&out).1);
    // a real side that dies at start: exit 2, the log tail in the message, dn-sim stopped
    let sim_cmd = dn_sim().display().to_string();
    let out = conformance(&[
        "--scenarios",
        shipped_echo().to_str().unwrap(),
        "--only",
        "^echo-payload-0$",
        "--real-cmd",
        "echo cannot start >&2; exit 1; :",
        "--sim-cmd",
        &sim_cmd,
        "--start-timeout",
        "20s",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("real DataNode: the real DataNode exited before it was ready"),
        "{stderr}"
    );
    assert!(stderr.contains("cannot start"), "{stderr}");
    // --list starts nothing
    let out = conformance(&[
        "--scenarios",
        shipped_echo().to_str().unwrap(),
        "--list",
        "--only",
        "^echo-payload",
    ]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    let names: Vec<&str> = stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["echo-payload-0", "echo-payload-10", "echo-payload-1mib"]
    );
}

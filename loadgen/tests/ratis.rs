//! `loadgen echo --ratis`: Ozone's Ratis path (an ordered Raft stream opened by a dummy watch)
//! against dn-sim's Ratis port, in-process: Raft writes and reads succeed with requests in
//! flight, and a pipeline the DataNode does not host fails as Ratis says (GroupMismatchException).

mod support;

use support::run_block;

fn dn_sim_with_ratis(group: uuid::Uuid) -> dn_sim::EmbeddedServer {
    let mut config = dn_sim::Config::loopback();
    config.ratis_listen = Some("127.0.0.1:0".parse().unwrap());
    config.pipelines = vec![group];
    dn_sim::EmbeddedServer::start(config, 1).expect("dn-sim starts")
}

#[test]
fn raft_writes_and_reads_succeed_with_requests_in_flight() {
    let group = uuid::Uuid::from_u128(0xabc);
    let server = dn_sim_with_ratis(group);
    let target = server.ratis_addr().unwrap().to_string();
    let group = group.to_string();
    for read_only in ["--read-only=false", "--read-only=true"] {
        let s = run_block(&[
            "echo",
            "--ratis",
            "--target",
            &target,
            "--pipeline-id",
            &group,
            read_only,
            "-n",
            "600",
            "-t",
            "3",
            "--pipeline",
            "8",
        ]);
        assert_eq!(s.successes(), 600, "{read_only}: {}", s.text);
        assert_eq!(s.results.description.stream_mode, "ratis");
    }
}

#[test]
fn a_pipeline_the_datanode_does_not_host_fails_with_group_mismatch() {
    let server = dn_sim_with_ratis(uuid::Uuid::from_u128(1));
    let target = server.ratis_addr().unwrap().to_string();
    let other = uuid::Uuid::from_u128(2).to_string();
    let s = run_block(&[
        "echo",
        "--ratis",
        "--target",
        &target,
        "--pipeline-id",
        &other,
        "-n",
        "5",
        "--fail-at-end",
    ]);
    assert_eq!(s.successes(), 0, "{}", s.text);
    assert_eq!(
        support::errors_of(&s, "ratis:GroupMismatchException"),
        Some(5),
        "{:?}",
        s.results.errors.keys().collect::<Vec<_>>()
    );
}

#[test]
fn ratis_flags_that_cannot_work_are_usage_errors() {
    support::assert_usage_error(&["write", "--ratis"], "--ratis");
    support::assert_usage_error(&["echo", "--ratis", "--target", "null"], "--ratis");
    support::assert_usage_error(&["echo", "--pipeline-id", "x"], "--pipeline-id");
}

//! `loadgen echo --ratis` and `write --ratis`: Ozone's Ratis path (an ordered Raft stream opened
//! by a dummy watch) against dn-sim's Ratis port, in-process: Raft writes and reads succeed with
//! requests in flight, blocks written through Raft read back over the gRPC port, and a pipeline
//! the DataNode does not host fails as Ratis says (GroupMismatchException).

mod support;

use clap::Parser as _;
use loadgen::cli::Cli;

use support::run_block;

/// A `csm_metrics_*` counter of the embedded dn-sim's one group, from its `/prom`.
fn csm_counter(server: &dn_sim::EmbeddedServer, name: &str) -> u64 {
    prom_value(server, &format!("csm_metrics_{name}"))
}

/// A series of the embedded dn-sim's one group, from its `/prom`.
fn prom_value(server: &dn_sim::EmbeddedServer, name: &str) -> u64 {
    use std::io::{Read, Write};
    let addr = server.metrics_addr().expect("a metrics listener");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "GET /prom HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let prefix = format!("{name}{{");
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no {prefix} in /prom")) as u64
}

fn dn_sim_with_ratis(group: uuid::Uuid) -> dn_sim::EmbeddedServer {
    dn_sim_hosting(vec![group])
}

/// An embedded dn-sim whose Ratis port (and admin port) hosts `groups`.
fn dn_sim_hosting(groups: Vec<uuid::Uuid>) -> dn_sim::EmbeddedServer {
    let mut config = dn_sim::Config::loopback();
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    config.ratis_listen = Some("127.0.0.1:0".parse().unwrap());
    config.ratis_admin_listen = Some("127.0.0.1:0".parse().unwrap());
    config.pipelines = groups;
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
fn an_echo_over_ratis_is_a_raft_write_unless_read_only_as_freon_s() {
    let group = uuid::Uuid::from_u128(0xabd);
    let server = dn_sim_with_ratis(group);
    let target = server.ratis_addr().unwrap().to_string();
    let group = group.to_string();
    let echo = |extra: &[&str]| {
        let mut argv = vec![
            "echo",
            "--ratis",
            "--target",
            &target,
            "--pipeline-id",
            &group,
        ];
        argv.extend_from_slice(extra);
        argv.extend_from_slice(&["-n", "20", "-t", "2"]);
        let s = run_block(&argv);
        assert_eq!(s.successes(), 20, "{extra:?}: {}", s.text);
    };
    echo(&[]);
    assert_eq!(csm_counter(&server, "num_apply_transaction_ops"), 20);
    assert_eq!(csm_counter(&server, "num_query_state_machine_ops"), 0);
    // Ratis's own log counts: 20 writes, each a commit that rose or not (two workers), the
    // group's configuration entry, and the applied index at the last entry.
    let writes = prom_value(&server, "ratis_log_worker_stateMachineLogEntryCount");
    let metadata = prom_value(&server, "ratis_log_worker_metadataLogEntryCount");
    assert_eq!(writes, 20);
    assert!((1..=20).contains(&metadata), "{metadata}");
    assert_eq!(
        prom_value(&server, "ratis_log_worker_appendEntryCount"),
        writes + metadata + 1
    );
    assert_eq!(
        prom_value(&server, "ratis_state_machine_appliedIndex"),
        writes + metadata
    );
    // Ratis's timers count every call; a first write misses the retry cache and hits it when
    // applied (a real 2.2.0 DataNode moved these series alike); every ordered stream opens
    // with a MAJORITY watch.
    assert_eq!(
        prom_value(&server, "ratis_server_clientWriteRequest_count"),
        20
    );
    assert_eq!(prom_value(&server, "ratis_server_retryCacheMissCount"), 20);
    assert_eq!(prom_value(&server, "ratis_server_retryCacheHitCount"), 20);
    let watches = prom_value(&server, "ratis_server_clientWatchRequest_count");
    assert!((1..=2).contains(&watches), "{watches}");
    assert_eq!(
        prom_value(&server, "ratis_server_numFailedClientWriteOnServer"),
        0
    );
    echo(&["--read-only"]);
    assert_eq!(csm_counter(&server, "num_apply_transaction_ops"), 20);
    assert_eq!(csm_counter(&server, "num_query_state_machine_ops"), 20);
    assert_eq!(
        prom_value(&server, "ratis_server_clientReadRequest_count"),
        20
    );
    assert_eq!(
        prom_value(&server, "ratis_server_clientWriteRequest_count"),
        20
    );
}

#[test]
fn ratis_admin_names_the_datanode_s_one_pipeline_and_refuses_a_choice_of_several() {
    let group = uuid::Uuid::from_u128(0x5eed);
    let server = dn_sim_hosting(vec![group]);
    let target = server.ratis_addr().unwrap().to_string();
    let admin = server.ratis_admin_addr().unwrap().to_string();
    let echo = [
        "echo",
        "--ratis",
        "--target",
        &target,
        "--ratis-admin",
        &admin,
        "-n",
        "10",
    ];
    let s = run_block(&echo);
    assert_eq!(s.successes(), 10, "{}", s.text);
    assert_eq!(csm_counter(&server, "num_apply_transaction_ops"), 10);

    let (a, b) = (uuid::Uuid::from_u128(0xa), uuid::Uuid::from_u128(0xb));
    let two = dn_sim_hosting(vec![a, b]);
    let target = two.ratis_addr().unwrap().to_string();
    let admin = two.ratis_admin_addr().unwrap().to_string();
    let argv = [
        "loadgen",
        "echo",
        "--ratis",
        "--target",
        &target,
        "--ratis-admin",
        &admin,
    ];
    let Err(err) = loadgen::run(Cli::try_parse_from(argv).unwrap()) else {
        panic!("the run must not start");
    };
    assert_eq!(err.exit_code(), 2);
    let text = err.to_string();
    assert!(
        text.contains("hosts 2 Raft groups") && text.contains(&a.to_string()),
        "{text}"
    );
    assert!(text.contains("--pipeline-id"), "{text}");

    // Nothing listens on a port just freed: unreachable, exit 2, the flag named.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let closed = closed.to_string();
    let argv = [
        "loadgen",
        "echo",
        "--ratis",
        "--target",
        &target,
        "--ratis-admin",
        &closed,
    ];
    let Err(err) = loadgen::run(Cli::try_parse_from(argv).unwrap()) else {
        panic!("the run must not start");
    };
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("--ratis-admin"), "{err}");
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
fn blocks_written_through_raft_read_back_over_grpc() {
    let group = uuid::Uuid::from_u128(0xdef);
    let server = dn_sim_with_ratis(group);
    let ratis = server.ratis_addr().unwrap().to_string();
    let grpc = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("blocks.manifest");
    let manifest = manifest.to_str().unwrap();
    let group = group.to_string();
    let w = run_block(&[
        "write",
        "--ratis",
        "--target",
        &ratis,
        "--pipeline-id",
        &group,
        "-n",
        "48",
        "-t",
        "3",
        "--write-size",
        "16KB",
        "--chunk-size",
        "16KB",
        "--bytes-per-checksum",
        "16KB",
        "--block-size",
        "64KB",
        "--flush-size",
        "32KB",
        "--manifest",
        manifest,
    ]);
    assert_eq!(w.successes(), 48, "{}", w.text);
    assert_eq!(w.results.description.stream_mode, "ratis");
    // 48 writes of 16 KB in 64 KB blocks, committed by PutBlocks over Raft: 12 blocks, and up to
    // 2 more when the 3 workers' shares of the writes are not multiples of 4 (a short last block).
    let r = run_block(&["read", "--target", &grpc, "-t", "2", "--manifest", manifest]);
    let read = r.results.read.as_ref().expect("a read phase");
    assert!(
        (12..=14).contains(&read.blocks),
        "{} blocks: {}",
        read.blocks,
        r.text
    );
    assert_eq!(read.bytes_verified, 48 * 16 * 1024, "{}", r.text);
    assert_eq!(r.failures(), 0, "{}", r.text);
}

#[test]
fn ratis_flags_that_cannot_work_are_usage_errors() {
    support::assert_usage_error(&["read", "--ratis"], "--ratis");
    support::assert_usage_error(&["write", "--ratis", "--pipeline", "2"], "--pipeline");
    support::assert_usage_error(&["echo", "--ratis", "--target", "null"], "--ratis");
    support::assert_usage_error(&["echo", "--pipeline-id", "x"], "--pipeline-id");
}

#[test]
fn without_a_pipeline_id_loadgen_names_dn_sim_s_own_pipeline() {
    assert_eq!(
        loadgen::config::DEFAULT_PIPELINE_ID,
        dn_sim::net::server::DEFAULT_PIPELINE_ID
    );
}

/// A Ratis port in front of dn-sim's whose write replies report a commit index one short of
/// their entry, as a multi-node group's leader may (its followers behind); it counts the
/// commit watches clients send (a watch for an index above 0: not the dummy first one).
mod lagging_proxy {
    use common::ratis::proto::common::raft_client_request_proto::Type as RaftType;
    use common::ratis::proto::common::{RaftClientReplyProto, RaftClientRequestProto};
    use common::ratis::proto::grpc::raft_client_protocol_service_client::RaftClientProtocolServiceClient;
    use common::ratis::proto::grpc::raft_client_protocol_service_server::{
        RaftClientProtocolService, RaftClientProtocolServiceServer,
    };
    use futures_util::StreamExt as _;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tonic::{Request, Response, Status, Streaming};

    type Replies =
        Pin<Box<dyn futures_util::Stream<Item = Result<RaftClientReplyProto, Status>> + Send>>;

    struct Proxy {
        upstream: String,
        watches: Arc<AtomicU64>,
    }

    #[tonic::async_trait]
    impl RaftClientProtocolService for Proxy {
        type orderedStream = Replies;
        type unorderedStream = Replies;

        async fn ordered(
            &self,
            request: Request<Streaming<RaftClientRequestProto>>,
        ) -> Result<Response<Replies>, Status> {
            let channel = tonic::transport::Channel::from_shared(self.upstream.clone())
                .map_err(|e| Status::internal(e.to_string()))?
                .connect()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            let mut client = RaftClientProtocolServiceClient::new(channel)
                .max_decoding_message_size(common::ratis::MAX_MESSAGE_SIZE)
                .max_encoding_message_size(common::ratis::MAX_MESSAGE_SIZE);
            let watches = Arc::clone(&self.watches);
            let requests = request.into_inner().filter_map(move |r| {
                let r = r.ok();
                if let Some(RaftType::Watch(w)) = r.as_ref().and_then(|r| r.r#type.as_ref())
                    && w.index > 0
                {
                    watches.fetch_add(1, Ordering::Relaxed);
                }
                std::future::ready(r)
            });
            let replies = client.ordered(requests).await?.into_inner();
            let lagging = replies.map(|reply| {
                reply.map(|mut reply| {
                    // A write's reply (a watch's carries no message).
                    if reply.log_index > 0 && reply.message.is_some() {
                        for info in &mut reply.commit_infos {
                            info.commit_index = reply.log_index - 1;
                        }
                    }
                    reply
                })
            });
            Ok(Response::new(Box::pin(lagging)))
        }

        async fn unordered(
            &self,
            _request: Request<Streaming<RaftClientRequestProto>>,
        ) -> Result<Response<Replies>, Status> {
            Err(Status::unimplemented("ordered only"))
        }
    }

    /// Starts the proxy on 127.0.0.1:0 in front of `upstream`: its address and watch count.
    pub fn start(upstream: std::net::SocketAddr) -> (std::net::SocketAddr, Arc<AtomicU64>) {
        let watches = Arc::new(AtomicU64::new(0));
        let proxy = Proxy {
            upstream: format!("http://{upstream}"),
            watches: Arc::clone(&watches),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tonic::transport::Server::builder()
                    .add_service(
                        RaftClientProtocolServiceServer::new(proxy)
                            .max_decoding_message_size(common::ratis::MAX_MESSAGE_SIZE)
                            .max_encoding_message_size(common::ratis::MAX_MESSAGE_SIZE),
                    )
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await
                    .unwrap();
            });
        });
        (addr, watches)
    }
}

#[test]
fn a_putblock_whose_commit_infos_lag_is_watched_until_committed() {
    let group = uuid::Uuid::from_u128(0x1a9);
    let server = dn_sim_with_ratis(group);
    let (proxy, watches) = lagging_proxy::start(server.ratis_addr().unwrap());
    let s = run_block(&[
        "write",
        "--ratis",
        "--target",
        &proxy.to_string(),
        "--pipeline-id",
        &group.to_string(),
        "--block-size",
        "64KB",
        "--chunk-size",
        "16KB",
        "-n",
        "12",
        "-t",
        "2",
    ]);
    assert_eq!(s.failures(), 0, "{}", s.text);
    let put_blocks = s.results.ops["PutBlock"].latency.count();
    assert!(put_blocks >= 12, "{put_blocks} PutBlocks");
    // Every PutBlock's reply fell one short of its entry: each got its watch.
    assert_eq!(
        watches.load(std::sync::atomic::Ordering::Relaxed),
        put_blocks
    );
    // Through dn-sim itself the replies cover their entries: no watch is needed.
    let direct = run_block(&[
        "write",
        "--ratis",
        "--target",
        &server.ratis_addr().unwrap().to_string(),
        "--pipeline-id",
        &group.to_string(),
        "-n",
        "4",
    ]);
    assert_eq!(direct.failures(), 0, "{}", direct.text);
    assert_eq!(
        prom_value(
            &server,
            "ratis_server_clientWatch_ALL_COMMITTEDRequest_count"
        ),
        put_blocks,
        "the proxied watches only"
    );
}

#[test]
fn a_raft_write_that_fails_retryably_is_retried_with_its_call_id_and_applied_once() {
    let group = uuid::Uuid::from_u128(0x1aa);
    let mut config = dn_sim::Config::loopback();
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    config.ratis_listen = Some("127.0.0.1:0".parse().unwrap());
    config.pipelines = vec![group];
    config.seed = 7;
    config.live = dn_sim::sim::admission::LiveSettings {
        faults: dn_sim::sim::fault::FaultPlan::from_args(["echo=grpc:UNAVAILABLE:0.2"]).unwrap(),
        ..Default::default()
    };
    let server = dn_sim::EmbeddedServer::start(config, 1).expect("dn-sim starts");
    let target = server.ratis_addr().unwrap().to_string();
    let args = |retry: &'static str| {
        vec![
            "echo".to_string(),
            "--ratis".into(),
            "--target".into(),
            target.clone(),
            "--pipeline-id".into(),
            group.to_string(),
            "-n".into(),
            "200".into(),
            "-t".into(),
            "2".into(),
            "--retry".into(),
            retry.into(),
            "--retry-backoff".into(),
            "none".into(),
            "-f".into(),
        ]
    };
    let run = |retry| {
        let owned = args(retry);
        let argv: Vec<&str> = owned.iter().map(String::as_str).collect();
        run_block(&argv)
    };
    let without = run("0");
    assert!(without.failures() > 0, "{}", without.text);
    let cache = || {
        (
            prom_value(&server, "ratis_server_retryCacheHitCount"),
            prom_value(&server, "ratis_server_retryCacheMissCount"),
        )
    };
    let (hits, misses) = cache();
    let with = run("20");
    assert_eq!(with.failures(), 0, "{}", with.text);
    let res = &with.results.resilience;
    assert!(res.retries > 0, "{}", with.text);
    // Each retry went with its attempt's call id: a call is one cache miss and a hit when
    // applied, and each retry of its failed entry two hits (Ratis's `queryCache` looks twice
    // before it replaces the entry); a new call id per retry would be a miss each.
    let (hits_after, misses_after) = cache();
    assert_eq!(
        (hits_after - hits) - (misses_after - misses),
        2 * res.retries,
        "{}",
        with.text
    );
    support::assert_usage_error(
        &["echo", "--ratis", "--retry", "3", "--pipeline", "4"],
        "--pipeline 1",
    );
}

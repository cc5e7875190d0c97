//! Requests that never reach the DataNode's dispatcher, per `--ozone-version`, as the real
//! DataNodes answer them (conformance/scenarios/wire.json): parse failures end the call with
//! UNKNOWN ("Application error processing RPC" on 2.1/2.2, no description on 2.0), requests over
//! the 32 MiB limit with RESOURCE_EXHAUSTED on 2.1/2.2 (RST_STREAM CANCEL on 2.0, and on every
//! release once the stream has answered); and what the DataNode metrics count.

use bytes::Bytes;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    ContainerCommandRequestProto as Req, EchoRequestProto, ReadContainerRequestProto,
    Result as OzoneResult, Type,
};
use dn_sim::datanode::version::OzoneVersion;
use dn_sim::{Config, RunningServer};
use tonic::Code;
use tonic::transport::Channel;

mod support;
use support::send_raw;

async fn server(version: OzoneVersion) -> (RunningServer, Client<Channel>) {
    let mut config = Config::loopback();
    config.containers = "1-3".parse().unwrap();
    config.ozone_version = version;
    let server = dn_sim::start(config).await.unwrap();
    let channel = Channel::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = Client::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    (server, client)
}

fn echo(container: i64, payload: usize) -> Req {
    Req {
        cmd_type: Type::Echo as i32,
        container_id: container,
        datanode_uuid: "dn-test".into(),
        echo: Some(EchoRequestProto {
            payload: Some(Bytes::from(vec![7u8; payload])),
            payload_size_resp: Some(0),
            read_only: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Sends `reqs` on one stream; the answers (or the status that ended it) in order.
async fn stream(
    client: &mut Client<Channel>,
    reqs: Vec<Req>,
) -> Vec<Result<common::proto::ContainerCommandResponseProto, tonic::Status>> {
    let mut out = Vec::new();
    let mut inbound = match client.send(tokio_stream::iter(reqs)).await {
        Ok(r) => r.into_inner(),
        Err(status) => return vec![Err(status)],
    };
    loop {
        match inbound.message().await {
            Ok(Some(resp)) => out.push(Ok(resp)),
            Ok(None) => return out,
            Err(status) => {
                out.push(Err(status));
                return out;
            }
        }
    }
}

fn expected_parse_failure(version: OzoneVersion) -> &'static str {
    match version {
        OzoneVersion::V2_0 => "",
        _ => "Application error processing RPC",
    }
}

#[tokio::test]
async fn parse_failures_end_the_call_with_unknown_per_release() {
    // Garbage, empty, no datanodeUuid, cmdType 99.
    let cases: [&'static [u8]; 4] = [
        &[0xff, 0xff, 0xff, 0xff],
        &[],
        &[
            0x08, 0x16, 0x18, 0x01, 0xd2, 0x01, 0x04, 0x10, 0x0a, 0x20, 0x01,
        ],
        &[0x08, 0x63, 0x18, 0x01, 0x22, 0x01, 0x78],
    ];
    for version in OzoneVersion::ALL {
        let (server, mut client) = server(version).await;
        for bytes in cases {
            let status = send_raw(server.local_addr(), bytes).await.unwrap_err();
            assert_eq!(
                status.code(),
                Code::Unknown,
                "{version} {bytes:?}: {status:?}"
            );
            assert_eq!(
                status.message(),
                expected_parse_failure(version),
                "{version}"
            );
        }
        // A missing required field deep inside: ChecksumData.type with a value no release has.
        let mut bad = echo(1, 0);
        bad.cmd_type = Type::WriteChunk as i32;
        bad.echo = None;
        bad.write_chunk = Some(common::proto::WriteChunkRequestProto {
            block_id: common::proto::DatanodeBlockId {
                container_id: 1,
                local_id: 1,
                ..Default::default()
            },
            chunk_data: Some(common::proto::ChunkInfo {
                chunk_name: "1_chunk_1".into(),
                len: 4,
                checksum_data: common::proto::ChecksumData {
                    r#type: 99,
                    bytes_per_checksum: 16384,
                    ..Default::default()
                },
                ..Default::default()
            }),
            data: Some(Bytes::from_static(b"abcd")),
            ..Default::default()
        });
        let answers = stream(&mut client, vec![bad]).await;
        let status = answers[0].as_ref().unwrap_err();
        assert_eq!(status.code(), Code::Unknown, "{version}");
        // The server still serves, and the failures counted nothing.
        let answers = stream(&mut client, vec![echo(1, 0)]).await;
        assert_eq!(
            answers[0].as_ref().unwrap().result,
            OzoneResult::Success as i32
        );
        let prom = server.metrics().render_prom(&server.admission().pool);
        let num_ops = prom
            .lines()
            .find(|l| l.starts_with("storage_container_metrics_num_ops{"))
            .unwrap();
        assert!(num_ops.ends_with(" 1"), "{version}: {num_ops}");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn command_types_of_later_releases_fail_to_parse() {
    for (version, cmd_type, known) in [
        (OzoneVersion::V2_0, 23, false),
        (OzoneVersion::V2_0, 24, false),
        (OzoneVersion::V2_1, 23, true),
        (OzoneVersion::V2_1, 24, false),
        (OzoneVersion::V2_2, 24, true),
        (OzoneVersion::V2_2, 25, false),
        (OzoneVersion::V2_1, 25, false),
    ] {
        let (server, mut client) = server(version).await;
        let mut req = echo(1, 0);
        req.echo = None;
        req.cmd_type = cmd_type;
        let answers = stream(&mut client, vec![req]).await;
        match (&answers[0], known) {
            (Ok(resp), true) => assert_eq!(resp.cmd_type, cmd_type, "{version}"),
            (Err(status), false) => {
                assert_eq!(status.code(), Code::Unknown, "{version} {cmd_type}");
                assert_eq!(status.message(), expected_parse_failure(version));
            }
            (other, _) => panic!("{version} cmdType {cmd_type}: {other:?}"),
        }
        server.shutdown().await;
    }
}

/// Payload bytes of an Echo over the 32 MiB limit (the conformance scenario's 33 MiB).
const OVER: usize = 34_603_008;

#[tokio::test]
async fn oversize_requests_per_release() {
    for version in OzoneVersion::ALL {
        let (server, mut client) = server(version).await;
        let answers = stream(&mut client, vec![echo(1, OVER)]).await;
        let status = answers[0].as_ref().unwrap_err();
        if version == OzoneVersion::V2_0 {
            // grpc 1.58 resets the stream (RST_STREAM CANCEL).
            assert_eq!(status.code(), Code::Cancelled, "{version}: {status:?}");
        } else {
            assert_eq!(
                status.code(),
                Code::ResourceExhausted,
                "{version}: {status:?}"
            );
            let len = prost::Message::encoded_len(&echo(1, OVER));
            assert_eq!(
                status.message(),
                format!("gRPC message exceeds maximum size 33554432: {len}")
            );
        }
        // After an answer on the same stream (taken before the next request is sent, as the
        // conformance runner does), every release resets it.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut inbound = client
            .send(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        tx.send(echo(1, 0)).await.unwrap();
        let first = inbound.message().await.unwrap().expect("an answer");
        assert_eq!(first.result, OzoneResult::Success as i32);
        tx.send(echo(1, OVER)).await.unwrap();
        let status = inbound.message().await.unwrap_err();
        assert_eq!(status.code(), Code::Cancelled, "{version}: {status:?}");
        drop(tx);
        // Still serving.
        let answers = stream(&mut client, vec![echo(1, 0)]).await;
        assert!(answers[0].is_ok());
        server.shutdown().await;
    }
}

fn sample(prom: &str, prefix: &str) -> u64 {
    let line = prom
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[tokio::test]
async fn pre_handler_failures_record_no_latency_and_failed_writes_no_bytes() {
    let (server, mut client) = server(OzoneVersion::V2_2).await;
    let read_container = |id| Req {
        cmd_type: Type::ReadContainer as i32,
        container_id: id,
        datanode_uuid: "dn-test".into(),
        read_container: Some(ReadContainerRequestProto {}),
        ..Default::default()
    };
    let answers = stream(&mut client, vec![read_container(424242), echo(424242, 0)]).await;
    assert_eq!(
        answers[0].as_ref().unwrap().result,
        OzoneResult::ContainerNotFound as i32
    );
    let answers = stream(&mut client, vec![read_container(1)]).await;
    assert_eq!(
        answers[0].as_ref().unwrap().result,
        OzoneResult::Success as i32
    );
    let prom = server.metrics().render_prom(&server.admission().pool);
    assert_eq!(
        sample(&prom, "storage_container_metrics_num_read_container{"),
        2
    );
    assert_eq!(
        sample(
            &prom,
            "storage_container_metrics_latency_ns_read_container_num_ops{"
        ),
        1
    );
    assert_eq!(
        sample(&prom, "storage_container_metrics_latency_ns_echo_num_ops{"),
        0
    );
    assert_eq!(
        sample(&prom, "hdds_dispatcher_counter{type=\"ReadContainer\","),
        2
    );
    assert_eq!(sample(&prom, "hdds_dispatcher_concurrency{"), 0);
    server.shutdown().await;
}

/// The spawned-binary helper other test crates rely on: it serves, reports memory and metrics,
/// and comes back on the same port after a SIGKILL.
#[tokio::test]
async fn a_spawned_dn_sim_reports_its_memory_and_survives_a_restart() {
    let mut server = support::process::DnSimProcess::spawn(&["--store", "memory"]);
    let rss = server.rss_mib();
    assert!(rss > 1.0 && rss <= server.peak_rss_mib(), "rss {rss} MiB");
    server.reset_peak();
    assert!(server.peak_rss_mib() <= server.rss_mib() + 1.0);
    assert!(server.http_get("/metrics").contains("dn_sim_"));
    let before = server.pid();
    server.restart();
    assert_ne!(before, server.pid());
    assert!(server.is_running());
    let ok = send_raw(server.addr, b"").await;
    assert!(ok.is_err(), "an empty request is no request: {ok:?}");
    server.kill();
    assert!(!server.is_running());
}

//! dn-sim speaks the DataNode client protocol: stream patterns, Echo, result codes, wire rules.

use bytes::Bytes;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    ContainerCommandRequestProto as Req, ContainerCommandResponseProto as Resp, EchoRequestProto,
    Result as OzoneResult, Type,
};
use dn_sim::{Config, RunningServer};
use tonic::Code;
use tonic::transport::Channel;

mod support;

async fn server() -> (RunningServer, Client<Channel>) {
    let mut config = Config::loopback();
    config.containers = "1,5-7".parse().unwrap();
    let server = dn_sim::start(config).await.unwrap();
    let channel = Channel::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (
        server,
        Client::new(channel).max_decoding_message_size(common::MAX_MESSAGE_SIZE),
    )
}

fn echo(container: i64, trace: &str, size: i32) -> Req {
    Req {
        cmd_type: Type::Echo as i32,
        container_id: container,
        datanode_uuid: "dn-test".into(),
        trace_id: Some(trace.into()),
        echo: Some(EchoRequestProto {
            payload: Some(Bytes::from_static(b"ignored")),
            payload_size_resp: Some(size),
            read_only: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn one(client: &mut Client<Channel>, req: Req) -> Result<Resp, tonic::Status> {
    let mut inbound = client.send(tokio_stream::once(req)).await?.into_inner();
    let resp = inbound.message().await?.expect("one response");
    assert!(
        inbound.message().await?.is_none(),
        "exactly one response per request"
    );
    Ok(resp)
}

#[tokio::test]
async fn thousand_requests_on_one_stream_are_answered_in_order() {
    let (server, mut client) = server().await;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let sender = tokio::spawn(async move {
        for i in 0..1000 {
            tx.send(echo(1, &i.to_string(), i % 64)).await.unwrap();
        }
    });
    let mut inbound = client
        .send(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut n = 0;
    while let Some(resp) = inbound.message().await.unwrap() {
        assert_eq!(resp.result, OzoneResult::Success as i32);
        assert_eq!(resp.trace_id.as_deref(), Some(n.to_string().as_str()));
        assert_eq!(resp.echo.unwrap().payload.unwrap().len(), (n % 64) as usize);
        n += 1;
    }
    sender.await.unwrap();
    assert_eq!(n, 1000);
    server.shutdown().await;
}

#[tokio::test]
async fn thousand_one_request_streams_all_succeed() {
    let (server, client) = server().await;
    let mut tasks = Vec::new();
    for t in 0..10 {
        let mut client = client.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..100 {
                let resp = one(&mut client, echo(1, &format!("{t}-{i}"), 10))
                    .await
                    .unwrap();
                assert_eq!(resp.result, OzoneResult::Success as i32);
                assert_eq!(resp.trace_id.unwrap(), format!("{t}-{i}"));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    server.shutdown().await;
}

#[tokio::test]
async fn echo_answers_like_a_datanode() {
    let (server, mut client) = server().await;
    let resp = one(&mut client, echo(6, "t", 4096)).await.unwrap();
    assert_eq!(resp.cmd_type, Type::Echo as i32);
    assert_eq!(resp.result, OzoneResult::Success as i32);
    assert_eq!(resp.message, None);
    assert_eq!(resp.echo.unwrap().payload.unwrap().len(), 4096);

    // traceID absent → "" in the answer; payload always set, possibly empty.
    let mut req = echo(1, "", 0);
    req.trace_id = None;
    let resp = one(&mut client, req).await.unwrap();
    assert_eq!(resp.trace_id.as_deref(), Some(""));
    assert_eq!(resp.echo.unwrap().payload.map(|p| p.len()), Some(0));

    // clientId/callId (fields 100/101) are in no release 2.0–2.2: never answered.
    let mut req = echo(1, "ids", 0);
    req.client_id = Some(Bytes::from_static(b"client-1"));
    req.call_id = Some(42);
    let resp = one(&mut client, req).await.unwrap();
    assert_eq!((resp.client_id, resp.call_id), (None, None));
    let mut req = echo(1, "one id", 0);
    req.call_id = Some(42);
    let resp = one(&mut client, req).await.unwrap();
    assert_eq!((resp.client_id, resp.call_id), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_container_is_container_not_found() {
    let (server, mut client) = server().await;
    let resp = one(&mut client, echo(2, "t", 10)).await.unwrap();
    assert_eq!(resp.result, OzoneResult::ContainerNotFound as i32);
    assert_eq!(
        resp.message.as_deref(),
        Some("ContainerID 2 does not exist")
    );
    assert_eq!(resp.trace_id.as_deref(), Some("t"));
    assert!(resp.echo.is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn negative_payload_is_an_internal_error_and_the_server_goes_on() {
    let (server, mut client) = server().await;
    let resp = one(&mut client, echo(1, "neg", -5)).await.unwrap();
    assert_eq!(resp.result, OzoneResult::ContainerInternalError as i32);
    assert_eq!(
        resp.message.as_deref(),
        Some("java.lang.IllegalArgumentException: Count cannot be negative.")
    );
    let resp = one(&mut client, echo(1, "after", 1)).await.unwrap();
    assert_eq!(resp.result, OzoneResult::Success as i32);
    server.shutdown().await;
}

#[tokio::test]
async fn unserved_types_are_unsupported_and_an_echo_without_payload_is_empty() {
    let (server, mut client) = server().await;
    let mut req = echo(1, "t", 0);
    req.cmd_type = Type::ListContainer as i32;
    let resp = one(&mut client, req).await.unwrap();
    assert_eq!(resp.result, OzoneResult::UnsupportedRequest as i32);
    assert_eq!(resp.cmd_type, Type::ListContainer as i32);
    let mut req = echo(1, "t", 0);
    req.echo = None;
    let resp = one(&mut client, req).await.unwrap();
    assert_eq!(resp.result, OzoneResult::Success as i32);
    assert_eq!(resp.echo.unwrap().payload.as_deref(), Some(&b""[..]));
    server.shutdown().await;
}

/// One hand-made request on a new stream, its answer decoded.
async fn send_raw(addr: std::net::SocketAddr, bytes: &'static [u8]) -> Result<Resp, tonic::Status> {
    use prost::Message;
    let answer = support::send_raw(addr, bytes).await?;
    Ok(Resp::decode(answer).expect("the answer is a ContainerCommandResponseProto"))
}

#[tokio::test]
async fn missing_required_fields_fail_the_call_with_unknown() {
    let (server, mut client) = server().await;
    let addr = server.local_addr();
    // The golden Echo request minus one required field at a time: cmdType, containerID, datanodeUuid.
    let cases: [&'static [u8]; 4] = [
        &[
            0x18, 0x01, 0x22, 0x01, 0x78, 0xd2, 0x01, 0x04, 0x10, 0x0a, 0x20, 0x01,
        ],
        &[
            0x08, 0x16, 0x22, 0x01, 0x78, 0xd2, 0x01, 0x04, 0x10, 0x0a, 0x20, 0x01,
        ],
        &[
            0x08, 0x16, 0x18, 0x01, 0xd2, 0x01, 0x04, 0x10, 0x0a, 0x20, 0x01,
        ],
        // not protobuf at all
        &[0xff, 0xff, 0xff],
    ];
    for bytes in cases {
        let status = send_raw(addr, bytes).await.unwrap_err();
        // As Ozone 2.2.0's grpc-java: the parser's reason is not sent.
        assert_eq!(status.code(), Code::Unknown, "{status:?}");
        assert_eq!(status.message(), "Application error processing RPC");
    }
    // The complete golden request succeeds through the same raw path.
    let golden = &[
        0x08, 0x16, 0x18, 0x01, 0x22, 0x01, 0x78, 0xd2, 0x01, 0x04, 0x10, 0x0a, 0x20, 0x01,
    ];
    let resp = send_raw(addr, golden).await.unwrap();
    assert_eq!(resp.result, OzoneResult::Success as i32);
    assert_eq!(resp.echo.unwrap().payload.unwrap().len(), 10);
    // And everyone else is still served.
    assert_eq!(
        one(&mut client, echo(1, "x", 1)).await.unwrap().result,
        OzoneResult::Success as i32
    );
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_finishes_in_flight_requests() {
    let (server, mut client) = server().await;
    let mut req = echo(1, "slow", 3);
    req.echo.as_mut().unwrap().sleep_time_ms = Some(300);
    let inflight = tokio::spawn(async move { one(&mut client, req).await });
    // In flight once the server has its stream open (polled, not slept for).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server
        .metrics()
        .render_metrics(&server.admission().pool)
        .contains("dn_sim_streams_open 1")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the echo never arrived"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(server.shutdown().await, "shutdown within the grace period");
    let resp = inflight.await.unwrap().unwrap();
    assert_eq!(resp.result, OzoneResult::Success as i32);
}

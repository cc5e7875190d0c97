//! Service limits: rejections with the configured status, message, pushback and timing.

use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    ContainerCommandRequestProto as Req, EchoRequestProto, Result as OzoneResult, Type,
};
use dn_sim::Config;
use dn_sim::sim::service_limits::{LimitPolicy, LimitRates, Pushback, RejectTiming};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::transport::Channel;

fn echo(payload: usize) -> Req {
    Req {
        cmd_type: Type::Echo as i32,
        container_id: 1,
        datanode_uuid: "dn".into(),
        echo: Some(EchoRequestProto {
            payload: Some(vec![7u8; payload].into()),
            read_only: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn start(rates: LimitRates, policy: LimitPolicy) -> (dn_sim::RunningServer, Client<Channel>) {
    let mut c = Config::loopback();
    c.limit_rates = rates;
    c.limit_policy = policy;
    let server = dn_sim::start(c).await.unwrap();
    let channel = Channel::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (server, Client::new(channel))
}

async fn one(client: &mut Client<Channel>, req: Req) -> Result<(), tonic::Status> {
    let mut inbound = client.send(tokio_stream::once(req)).await?.into_inner();
    let resp = inbound.message().await?.expect("an answer");
    assert_eq!(resp.result, OzoneResult::Success as i32);
    Ok(())
}

#[tokio::test]
async fn ops_limit_rejects_the_excess_with_the_named_limit_and_pushback() {
    let policy = LimitPolicy {
        pushback: Pushback::Fixed(Duration::from_millis(250)),
        ..LimitPolicy::default()
    };
    let (server, mut client) = start(
        LimitRates {
            ops: Some(200.0),
            ..Default::default()
        },
        policy,
    )
    .await;
    let start = Instant::now();
    let (mut ok, mut rejected) = (0u32, 0u32);
    while start.elapsed() < Duration::from_secs(1) {
        match one(&mut client, echo(0)).await {
            Ok(()) => ok += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable);
                assert!(
                    status
                        .message()
                        .starts_with("Operations per second is over the account limit."),
                    "{status:?}"
                );
                assert_eq!(
                    status.metadata().get("grpc-retry-pushback-ms").unwrap(),
                    "250"
                );
                rejected += 1;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // 200/s plus a 100 ms burst (20); generous bounds for scheduling.
    let expected = 200.0 * elapsed + 20.0;
    assert!(
        (ok as f64) < expected * 1.1 && (ok as f64) > expected * 0.8,
        "{ok} admitted in {elapsed:.2}s"
    );
    assert!(rejected > 0);
    let metrics = server.metrics().render_metrics(&server.admission().pool);
    assert!(
        metrics.contains(&format!(
            "dn_sim_rejected_requests_total{{reason=\"ops\"}} {rejected}"
        )),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn ingress_limit_counts_request_bytes_and_status_is_configurable() {
    let policy = LimitPolicy {
        status: Code::ResourceExhausted,
        timing: RejectTiming::Early,
        ..LimitPolicy::default()
    };
    // 1 MB/s with a 100 ms burst: the first 64 KiB request fits, the next ones run into debt.
    let (server, mut client) = start(
        LimitRates {
            ingress: Some(1048576.0),
            ..Default::default()
        },
        policy,
    )
    .await;
    let mut rejected = None;
    for _ in 0..20 {
        if let Err(status) = one(&mut client, echo(64 << 10)).await {
            rejected = Some(status);
            break;
        }
    }
    let status = rejected.expect("a rejection within 20 × 64 KiB at 1 MB/s");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status
            .message()
            .starts_with("Ingress is over the account limit.")
    );
    // Small requests still get through once the debt is repaid.
    // (Polled until a deadline: how soon depends on the limit's clock, not on a guess.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(status) = one(&mut client, echo(10)).await {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(
            Instant::now() < deadline,
            "still rejected after 10 s: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn after_timing_delays_the_rejection() {
    let policy = LimitPolicy {
        timing: RejectTiming::After(Duration::from_millis(200)),
        ..LimitPolicy::default()
    };
    let (server, mut client) = start(
        LimitRates {
            ops: Some(1.0),
            ..Default::default()
        },
        policy,
    )
    .await;
    one(&mut client, echo(0)).await.unwrap();
    let start = Instant::now();
    let status = one(&mut client, echo(0)).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(start.elapsed() >= Duration::from_millis(200));
    server.shutdown().await;
}

//! dn-sim as a simulator: the handler pool follows Little's law, faults land with their
//! probability and look to a client like the failures they model, the queue bound rejects, and
//! `PUT /config` changes a running server.

mod support;

use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    ContainerCommandRequestProto as Req, ContainerCommandResponseProto as Resp, EchoRequestProto,
    Result as OzoneResult, Type,
};
use dn_sim::{Config, RunningServer};
use std::time::{Duration, Instant};
use support::http;
use tonic::Code;
use tonic::transport::Channel;

fn config(handlers: usize, delays: &[&str], faults: &[&str]) -> Config {
    let mut c = Config::loopback();
    c.handler_count = handlers;
    c.live.delays = dn_sim::sim::delay::DelayModel::from_args(delays.iter().copied()).unwrap();
    c.live.faults = dn_sim::sim::fault::FaultPlan::from_args(faults.iter().copied()).unwrap();
    c
}

async fn start(c: Config) -> (RunningServer, Client<Channel>) {
    let server = dn_sim::start(c).await.unwrap();
    let channel = Channel::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (server, Client::new(channel))
}

fn echo(trace: String) -> Req {
    Req {
        cmd_type: Type::Echo as i32,
        container_id: 1,
        datanode_uuid: "dn".into(),
        trace_id: Some(trace),
        echo: Some(EchoRequestProto {
            read_only: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn one(client: &mut Client<Channel>, req: Req) -> Result<Resp, tonic::Status> {
    let mut request = tonic::Request::new(tokio_stream::once(req));
    request.set_timeout(Duration::from_secs(5));
    let mut inbound = client.send(request).await?.into_inner();
    inbound
        .message()
        .await?
        .ok_or_else(|| tonic::Status::unknown("no answer"))
}

/// `total` echoes from `concurrency` requesters; returns the elapsed time.
async fn load(client: &Client<Channel>, concurrency: usize, total: usize) -> Duration {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (mut client, next) = (client.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                    let resp = one(&mut client, echo(String::new())).await.unwrap();
                    assert_eq!(resp.result, OzoneResult::Success as i32);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_follows_littles_law_for_the_handler_count() {
    // Rates against the 1-handler rate measured here, not against the wall clock's absolute
    // expectations: a loaded machine slows every run alike, a pool that ignores its size does not
    // scale. The 20 ms hold is a floor, so no run may beat Little's law by much either.
    let mut baseline = None;
    for handlers in [1usize, 2, 4, 8] {
        let (server, client) = start(config(handlers, &["echo=20ms"], &[])).await;
        let total = 30 * handlers; // about 0.6 s at the predicted rate
        let elapsed = load(&client, 32, total).await;
        let measured = total as f64 / elapsed.as_secs_f64();
        let predicted = handlers as f64 / 0.020;
        assert!(
            measured <= predicted * 1.05,
            "{handlers} handlers: {measured:.1}/s beats Little's law's {predicted:.1}/s"
        );
        let one = *baseline.get_or_insert(measured);
        let scaling = measured / (one * handlers as f64);
        assert!(
            (0.85..=1.15).contains(&scaling),
            "{handlers} handlers: {measured:.1}/s, {scaling:.2} × {handlers} × the 1-handler {one:.1}/s"
        );
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_stay_in_order_under_the_pool() {
    let (server, client) = start(config(2, &["echo=uniform:0ms..2ms"], &[])).await;
    let tasks: Vec<_> = (0..6)
        .map(|s| {
            let mut client = client.clone();
            tokio::spawn(async move {
                let requests = tokio_stream::iter((0..100).map(move |i| echo(format!("{s}-{i}"))));
                let mut inbound = client.send(requests).await.unwrap().into_inner();
                let mut i = 0;
                while let Some(resp) = inbound.message().await.unwrap() {
                    assert_eq!(resp.trace_id.unwrap(), format!("{s}-{i}"));
                    i += 1;
                }
                assert_eq!(i, 100);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_seeded_fault_lands_with_its_probability() {
    let (server, mut client) = start(config(10, &[], &["echo=IO_EXCEPTION:0.1"])).await;
    let mut faults = 0;
    for i in 0..2000 {
        let resp = one(&mut client, echo(i.to_string())).await.unwrap();
        if resp.result == OzoneResult::IoException as i32 {
            faults += 1;
            assert!(resp.message.is_some());
        } else {
            assert_eq!(resp.result, OzoneResult::Success as i32);
        }
    }
    // Binomial(2000, 0.1): mean 200, sd 13.4; four sigma either side.
    assert!((146..=254).contains(&faults), "{faults} faults of 2000");
    server.shutdown().await;
}

#[tokio::test]
async fn each_fault_kind_looks_like_its_failure_to_a_client() {
    let cases = [
        ("echo=grpc:UNAVAILABLE:1", Some(Code::Unavailable)),
        ("echo=CONTAINER_UNHEALTHY:1", None),
        ("echo=reset:1", Some(Code::Unknown)),
    ];
    for (fault, code) in cases {
        let (server, mut client) = start(config(2, &[], &[fault])).await;
        match (one(&mut client, echo("f".into())).await, code) {
            (Err(status), Some(Code::Unknown)) => {
                // A reset is a stream error at the HTTP/2 level, not a status the server sent.
                assert!(
                    std::error::Error::source(&status).is_some(),
                    "{fault}: {status:?}"
                );
            }
            (Err(status), Some(code)) => assert_eq!(status.code(), code, "{fault}"),
            (Ok(resp), None) => assert_eq!(resp.result, OzoneResult::ContainerUnhealthy as i32),
            (other, _) => panic!("{fault}: {other:?}"),
        }
        server.shutdown().await;
    }

    // drop: no answer; the client's deadline fires.
    let (server, mut client) = start(config(2, &[], &["echo=drop:1"])).await;
    let mut request = tonic::Request::new(tokio_stream::once(echo("d".into())));
    request.set_timeout(Duration::from_millis(300));
    let result = tokio::time::timeout(Duration::from_secs(1), async {
        let mut inbound = client.send(request).await?.into_inner();
        inbound.message().await
    })
    .await;
    match result {
        Ok(Err(status)) => assert_eq!(status.code(), Code::DeadlineExceeded),
        Err(_) => {} // no answer at all within a second
        Ok(Ok(msg)) => panic!("a dropped request was answered: {msg:?}"),
    }
    drop(server);

    // stall: answered normally, but only after the stall.
    let (server, mut client) = start(config(2, &[], &["echo=stall:150ms:1"])).await;
    let started = Instant::now();
    let resp = one(&mut client, echo("s".into())).await.unwrap();
    assert_eq!(resp.result, OzoneResult::Success as i32);
    assert!(started.elapsed() >= Duration::from_millis(150));
    server.shutdown().await;
}

#[tokio::test]
async fn a_bounded_queue_rejects_with_resource_exhausted() {
    let mut c = config(1, &["echo=200ms"], &[]);
    c.max_queue = Some(1);
    let (server, client) = start(c).await;
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let mut client = client.clone();
            tokio::spawn(async move { one(&mut client, echo(i.to_string())).await })
        })
        .collect();
    let mut rejected = 0;
    let mut served = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(resp) if resp.result == OzoneResult::Success as i32 => served += 1,
            Err(status) if status.code() == Code::ResourceExhausted => rejected += 1,
            other => panic!("{other:?}"),
        }
    }
    // One runs, one waits, the other two find the queue full.
    assert_eq!((served, rejected), (2, 2));
    let metrics = server.metrics().render_metrics(&server.admission().pool);
    assert!(
        metrics.contains("dn_sim_rejected_requests_total{reason=\"queue_full\"} 2"),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_changes_a_running_server() {
    let mut c = config(1, &["echo=50ms"], &[]);
    c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let (server, client) = start(c).await;
    let admin = server.metrics_addr().unwrap();

    let slow = load(&client, 8, 8).await; // 8 × 50 ms on one handler
    let (status, body) = http(admin, "PUT", "/config", r#"{"handler_count": 8}"#).await;
    assert_eq!(status, 200, "{body}");
    let fast = load(&client, 8, 8).await; // in parallel on eight
    assert!(
        slow.as_secs_f64() / fast.as_secs_f64() > 3.0,
        "slow {slow:?}, fast {fast:?}"
    );

    let (_, body) = http(admin, "GET", "/config", "").await;
    let config: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(config["handler_count"], 8);
    assert_eq!(config["delays"]["echo"], "50ms");

    // Delays and faults change too; a bad request changes nothing.
    let (status, _) = http(
        admin,
        "PUT",
        "/config",
        r#"{"delays": {"all": "1ms"}, "max_queue": 5}"#,
    )
    .await;
    assert_eq!(status, 200);
    for bad in [
        r#"{"handler_count": 0}"#,
        r#"{"delays": {"echo": "soon"}}"#,
        r#"{"colour": 1}"#,
        "not json",
    ] {
        let (status, body) = http(admin, "PUT", "/config", bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains("error"));
    }
    let (_, body) = http(admin, "GET", "/config", "").await;
    let config: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(config["delays"]["all"], "1ms");
    assert_eq!(config["max_queue"], 5);
    assert_eq!(config["handler_count"], 8);

    let (status, prom) = http(admin, "GET", "/prom", "").await;
    assert_eq!(status, 200);
    let line = prom
        .lines()
        .find(|l| l.starts_with("storage_container_metrics_num_echo{"))
        .unwrap();
    assert!(line.ends_with(" 16"), "{line}");
    let (_, metrics) = http(admin, "GET", "/metrics", "").await;
    assert!(metrics.contains("dn_sim_handlers 8"));
    assert!(!metrics.contains("storage_container_metrics"));
    server.shutdown().await;
}

//! dn-sim's client of SCM (`--scm`, `net::scm`) against a small fake SCM speaking Hadoop RPC on
//! loopback: the bytes of the connection (header, context, calls), GetVersion → Register →
//! heartbeats with the node's real ports and capacity, registering again when told, retrying
//! while SCM is away (and serving clients meanwhile), and surviving hostile answers.

use bytes::{Buf as _, Bytes, BytesMut};
use common::hrpc::proto::rpc_response_header_proto::RpcStatusProto;
use common::hrpc::proto::{
    IpcConnectionContextProto, RequestHeaderProto, RpcRequestHeaderProto, RpcResponseHeaderProto,
};
use common::scm::proto::scm_command_proto::Type as CommandType;
use common::scm::proto::scm_registered_response_proto::ErrorCode;
use common::scm::proto::{
    ScmCommandProto, ScmDatanodeRequest, ScmDatanodeResponse, ScmHeartbeatResponseProto,
    ScmRegisteredResponseProto, ScmVersionResponseProto, Status, Type,
};
use dn_sim::net::scm::ScmConfig;
use prost::Message;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// What the fake SCM saw.
#[derive(Default)]
struct Seen {
    contexts: Vec<IpcConnectionContextProto>,
    requests: Vec<ScmDatanodeRequest>,
}

/// How the fake SCM answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// As SCM does; the heartbeat numbered `reregister_at` (from 1) carries reregisterCommand.
    Honest { reregister_at: usize },
    /// A 2 GiB frame length to the first call.
    HugeLength,
    /// Half a frame, then the connection closes.
    ShortFrame,
}

async fn read_frame(s: &mut TcpStream) -> Option<Bytes> {
    let n = s.read_u32().await.ok()? as usize;
    assert!(n < 1 << 20, "a request frame of {n} bytes");
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).await.ok()?;
    Some(Bytes::from(buf))
}

fn delimited(buf: &mut Bytes) -> Bytes {
    let n = prost::encoding::decode_varint(buf).unwrap() as usize;
    buf.split_to(n)
}

fn answer(call_id: i32, client_id: Bytes, body: &impl Message) -> Vec<u8> {
    let header = RpcResponseHeaderProto {
        call_id: call_id as u32,
        status: RpcStatusProto::Success as i32,
        server_ipc_version_num: Some(9),
        client_id: Some(client_id),
        ..Default::default()
    };
    let mut out = BytesMut::new();
    header.encode_length_delimited(&mut out).unwrap();
    body.encode_length_delimited(&mut out).unwrap();
    let mut frame = (out.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&out);
    frame
}

async fn serve_connection(mut s: TcpStream, seen: Arc<Mutex<Seen>>, mode: Mode) {
    let mut header = [0u8; 7];
    if s.read_exact(&mut header).await.is_err() {
        return;
    }
    assert_eq!(&header, b"hrpc\x09\x00\x00", "connection header");
    let Some(mut context) = read_frame(&mut s).await else {
        return;
    };
    let rpc = RpcRequestHeaderProto::decode(delimited(&mut context)).unwrap();
    assert_eq!(rpc.call_id, -3);
    let ctx = IpcConnectionContextProto::decode(delimited(&mut context)).unwrap();
    seen.lock().unwrap().contexts.push(ctx);
    let mut heartbeats = 0;
    while let Some(mut frame) = read_frame(&mut s).await {
        let rpc = RpcRequestHeaderProto::decode(delimited(&mut frame)).unwrap();
        let engine = RequestHeaderProto::decode(delimited(&mut frame)).unwrap();
        assert_eq!(engine.method_name, "submitRequest");
        assert_eq!(
            engine.declaring_class_protocol_name,
            "org.apache.hadoop.ozone.protocol.StorageContainerDatanodeProtocol"
        );
        assert_eq!(engine.client_protocol_version, 1);
        let request = ScmDatanodeRequest::decode(delimited(&mut frame)).unwrap();
        assert!(!frame.has_remaining(), "bytes after the request");
        seen.lock().unwrap().requests.push(request.clone());
        match mode {
            Mode::HugeLength => {
                let _ = s.write_all(&0x7fff_ffffu32.to_be_bytes()).await;
                let _ = s.write_all(&[0; 100]).await;
                continue;
            }
            Mode::ShortFrame => {
                let full = answer(rpc.call_id, rpc.client_id, &ScmDatanodeResponse::default());
                let _ = s.write_all(&full[..full.len() / 2]).await;
                return;
            }
            Mode::Honest { .. } => {}
        }
        let mut response = ScmDatanodeResponse {
            cmd_type: request.cmd_type,
            status: Status::Ok as i32,
            ..Default::default()
        };
        let uuid = || {
            request
                .register_request
                .as_ref()
                .map(|r| r.extended_datanode_details.datanode_details.uuid.clone())
                .unwrap_or_default()
                .unwrap_or_default()
        };
        match Type::try_from(request.cmd_type).unwrap() {
            Type::GetVersion => {
                response.get_version_response = Some(ScmVersionResponseProto {
                    software_version: 1,
                    keys: vec![],
                })
            }
            Type::Register => {
                response.register_response = Some(ScmRegisteredResponseProto {
                    error_code: ErrorCode::Success as i32,
                    datanode_uuid: uuid(),
                    cluster_id: "CID-fake".into(),
                    hostname: Some("seen-by-scm".into()),
                    network_location: Some("/default-rack".into()),
                    ..Default::default()
                })
            }
            Type::SendHeartbeat => {
                heartbeats += 1;
                let reregister =
                    matches!(mode, Mode::Honest { reregister_at } if reregister_at == heartbeats);
                response.send_heartbeat_response = Some(ScmHeartbeatResponseProto {
                    datanode_uuid: String::new(),
                    commands: if reregister {
                        vec![ScmCommandProto {
                            command_type: CommandType::ReregisterCommand as i32,
                            ..Default::default()
                        }]
                    } else {
                        vec![]
                    },
                    term: None,
                })
            }
        }
        if s.write_all(&answer(rpc.call_id, rpc.client_id, &response))
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn fake_scm(listener: TcpListener, mode: Mode) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve_connection(s, Arc::clone(&shared), mode));
        }
    });
    seen
}

fn config(scm: String) -> dn_sim::Config {
    let mut scm = ScmConfig::new(scm);
    scm.heartbeat_interval = Duration::from_millis(50);
    scm.rpc_timeout = Duration::from_secs(2);
    dn_sim::Config {
        scm: Some(scm),
        capacity: 8 << 30,
        volumes: 2,
        datanode_uuid: "6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01".into(),
        ..dn_sim::Config::loopback()
    }
}

async fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_heartbeats_and_registers_again_when_told() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = fake_scm(listener, Mode::Honest { reregister_at: 3 }).await;
    let server = dn_sim::start(config(addr.to_string())).await.unwrap();
    let status = Arc::clone(server.scm_status());
    until(
        "a second registration and heartbeats after it",
        Duration::from_secs(10),
        || {
            status.registrations.load(Ordering::Relaxed) >= 2
                && status.heartbeats.load(Ordering::Relaxed) >= 5
        },
    )
    .await;

    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.contexts.len(), 1, "one connection");
        assert_eq!(
            seen.contexts[0].protocol.as_deref(),
            Some(common::scm::PROTOCOL)
        );
        let kinds: Vec<i32> = seen.requests.iter().map(|r| r.cmd_type).collect();
        assert_eq!(
            &kinds[..5],
            &[
                Type::GetVersion as i32,
                Type::Register as i32,
                Type::SendHeartbeat as i32,
                Type::SendHeartbeat as i32,
                Type::SendHeartbeat as i32
            ]
        );
        // After the third heartbeat's reregisterCommand: Register again, then heartbeats.
        assert_eq!(kinds[5], Type::Register as i32);

        let register = seen.requests[1].register_request.as_ref().unwrap();
        let details = &register.extended_datanode_details.datanode_details;
        assert_eq!(
            details.uuid.as_deref(),
            Some("6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01")
        );
        assert_eq!(details.ip_address, "127.0.0.1");
        let standalone = details
            .ports
            .iter()
            .find(|p| p.name == "STANDALONE")
            .unwrap();
        assert_eq!(standalone.value, u32::from(server.local_addr().port()));
        let layout = register.data_node_layout_version.unwrap();
        assert_eq!(
            (
                layout.software_layout_version,
                layout.metadata_layout_version
            ),
            (10, 10)
        );
        let volumes = &register.node_report.storage_report;
        assert_eq!(volumes.len(), 2);
        assert_eq!(
            volumes.iter().map(|v| v.capacity.unwrap()).sum::<u64>(),
            8 << 30
        );
        // Config::loopback's one pre-created container, OPEN and empty.
        let replicas = &register.container_report.reports;
        assert_eq!(replicas.len(), 1);
        assert_eq!((replicas[0].container_id, replicas[0].state), (1, 1));
        assert_eq!(replicas[0].is_empty, Some(true));
        let heartbeat = seen.requests[2].send_heartbeat_request.as_ref().unwrap();
        assert!(heartbeat.node_report.is_some());
        assert_eq!(heartbeat.datanode_details.uuid, details.uuid);
        // The names SCM registered the node with, as a real DataNode adopts them.
        assert_eq!(heartbeat.datanode_details.host_name, "seen-by-scm");
        assert_eq!(
            heartbeat.datanode_details.network_location.as_deref(),
            Some("/default-rack")
        );
        assert_eq!(heartbeat.datanode_details.persisted_op_state, None);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scm_away_then_back_while_clients_are_served() {
    // A port nothing listens on (yet).
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let server = dn_sim::start(config(addr.to_string())).await.unwrap();
    let status = Arc::clone(server.scm_status());
    until("failed attempts", Duration::from_secs(10), || {
        status.failures.load(Ordering::Relaxed) >= 2
    })
    .await;
    // The client port serves meanwhile.
    TcpStream::connect(server.local_addr()).await.unwrap();
    assert!(!status.registered.load(Ordering::Acquire));

    let listener = TcpListener::bind(addr).await.unwrap();
    let _seen = fake_scm(listener, Mode::Honest { reregister_at: 0 }).await;
    until(
        "registration once SCM is back",
        Duration::from_secs(10),
        || {
            status.registered.load(Ordering::Acquire)
                && status.heartbeats.load(Ordering::Relaxed) >= 2
        },
    )
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_are_errors_and_the_node_keeps_trying() {
    for mode in [Mode::HugeLength, Mode::ShortFrame] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = fake_scm(listener, mode).await;
        let server = dn_sim::start(config(addr.to_string())).await.unwrap();
        let status = Arc::clone(server.scm_status());
        until("failed sessions", Duration::from_secs(10), || {
            status.failures.load(Ordering::Relaxed) >= 2
        })
        .await;
        assert!(!status.registered.load(Ordering::Acquire));
        // Every session starts over with GetVersion on a new connection.
        assert!(seen.lock().unwrap().contexts.len() >= 2);
        TcpStream::connect(server.local_addr()).await.unwrap();
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_of_a_fleet_registers_and_heartbeats_on_its_own() {
    use dn_sim::net::fleet::{self, FleetConfig};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = fake_scm(listener, Mode::Honest { reregister_at: 0 }).await;
    let fleet = fleet::start(FleetConfig::new(config(addr.to_string()), 3).unwrap())
        .await
        .unwrap();
    let live = |i: usize| fleet.nodes()[i].running().unwrap();
    let beats = |i: usize| live(i).scm.heartbeats.load(Ordering::Relaxed);
    until("three nodes heartbeating", Duration::from_secs(10), || {
        (0..3).all(|i| live(i).scm.registered.load(Ordering::Acquire) && beats(i) >= 3)
    })
    .await;
    // Three registrations, one per identity, each with its own UUID and client port.
    let registered = |seen: &Seen| -> Vec<(String, u32)> {
        seen.requests
            .iter()
            .filter_map(|r| r.register_request.as_ref())
            .map(|r| {
                let d = &r.extended_datanode_details.datanode_details;
                let port = d.ports.iter().find(|p| p.name == "STANDALONE").unwrap();
                (d.uuid.clone().unwrap(), port.value)
            })
            .collect()
    };
    let mut first = registered(&seen.lock().unwrap());
    first.sort();
    let mut expected: Vec<_> = fleet
        .nodes()
        .iter()
        .map(|n| (n.uuid().to_owned(), u32::from(n.view().client.port())))
        .collect();
    expected.sort();
    assert_eq!(first, expected);
    assert_eq!(seen.lock().unwrap().contexts.len(), 3, "a connection each");

    // A stopped node stops heartbeating; the others go on. Started again, it registers again.
    let node = &fleet.nodes()[1];
    let of_node_1 = {
        let uuid = Some(node.uuid().to_owned());
        move |r: &ScmDatanodeRequest| {
            r.send_heartbeat_request
                .as_ref()
                .is_some_and(|h| h.datanode_details.uuid == uuid)
        }
    };
    assert!(node.stop().await);
    let stopped_at = seen
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| of_node_1(r))
        .count();
    let others = beats(0);
    until("node 0 heartbeating on", Duration::from_secs(10), || {
        beats(0) >= others + 5
    })
    .await;
    let after = seen
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| of_node_1(r))
        .count();
    assert!(after <= stopped_at + 1, "{stopped_at} then {after}");
    node.start().await.unwrap();
    until("node 1 registered again", Duration::from_secs(10), || {
        live(1).scm.registered.load(Ordering::Acquire) && beats(1) >= 1
    })
    .await;
    let again = registered(&seen.lock().unwrap());
    assert_eq!(again.len(), 4);
    assert_eq!(
        again[3],
        (node.uuid().to_owned(), u32::from(node.view().client.port()))
    );
    fleet.shutdown().await;
}

//! dn-sim's client of SCM (`--scm`, `net::scm`) against a small fake SCM speaking Hadoop RPC on
//! loopback: the bytes of the connection (header, context, calls), GetVersion → Register →
//! heartbeats with the node's real ports and capacity, registering again when told, retrying
//! while SCM is away (and serving clients meanwhile), and surviving hostile answers.

use bytes::{Buf as _, Bytes, BytesMut};
use common::hrpc::proto::rpc_response_header_proto::RpcStatusProto;
use common::hrpc::proto::{
    IpcConnectionContextProto, RequestHeaderProto, RpcRequestHeaderProto, RpcResponseHeaderProto,
};
use common::proto::container_data_proto::State as StoreState;
use common::scm::proto::command_status::Status as CommandState;
use common::scm::proto::container_replica_proto::State as ReplicaState;
use common::scm::proto::scm_command_proto::Type as CommandType;
use common::scm::proto::scm_registered_response_proto::ErrorCode;
use common::scm::proto::{
    CloseContainerCommandProto, ContainerReplicaProto, DeleteBlocksCommandProto,
    DeleteContainerCommandProto, DeletedBlocksTransaction, PipelineId, ScmCommandProto,
    ScmDatanodeRequest, ScmDatanodeResponse, ScmHeartbeatResponseProto, ScmRegisteredResponseProto,
    ScmVersionResponseProto, Status, Type,
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
    /// A pipeline the test wants closed: sent with the next heartbeat's answer.
    close: Option<uuid::Uuid>,
    /// Commands the next heartbeat's answer carries (then forgotten).
    to_send: Vec<ScmCommandProto>,
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
    /// As SCM does; the second heartbeat's answer asks the node to create two RATIS/THREE
    /// pipelines with two other (absent) members: `led` with the node as suggested leader
    /// (priority 1, others 0), `followed` with another member as suggested leader.
    Pipelines {
        led: uuid::Uuid,
        followed: uuid::Uuid,
    },
}

const PEER_B: &str = "0b0b0b0b-0000-4000-8000-00000000000b";
const PEER_C: &str = "0c0c0c0c-0000-4000-8000-00000000000c";

/// A member SCM names in createPipeline: only its UUID, address and Ratis port.
fn member(uuid: &str, ratis_port: u32) -> common::scm::proto::DatanodeDetailsProto {
    common::scm::proto::DatanodeDetailsProto {
        uuid: Some(uuid.to_owned()),
        ip_address: "127.0.0.1".into(),
        host_name: "peer".into(),
        ports: vec![common::scm::proto::Port {
            name: "RATIS".into(),
            value: ratis_port,
        }],
        ..Default::default()
    }
}

fn pipeline_id(id: uuid::Uuid) -> common::scm::proto::PipelineId {
    common::scm::proto::PipelineId {
        id: Some(id.to_string()),
        uuid128: None,
    }
}

/// `createPipelineCommand` for a RATIS/THREE pipeline of `nodes` with `priority`.
fn create_pipeline(
    id: uuid::Uuid,
    nodes: Vec<common::scm::proto::DatanodeDetailsProto>,
    priority: Vec<i32>,
) -> ScmCommandProto {
    ScmCommandProto {
        command_type: CommandType::CreatePipelineCommand as i32,
        create_pipeline_command_proto: Some(common::scm::proto::CreatePipelineCommandProto {
            pipeline_id: pipeline_id(id),
            r#type: common::scm::proto::ReplicationType::Ratis as i32,
            factor: common::scm::proto::ReplicationFactor::Three as i32,
            datanode: nodes,
            cmd_id: 7,
            priority,
        }),
        ..Default::default()
    }
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
    // The node as it registered (createPipeline names it so).
    let mut node = None;
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
            Mode::Honest { .. } | Mode::Pipelines { .. } => {}
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
                node = request
                    .register_request
                    .as_ref()
                    .map(|r| r.extended_datanode_details.datanode_details.clone());
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
                let mut commands = if reregister {
                    vec![ScmCommandProto {
                        command_type: CommandType::ReregisterCommand as i32,
                        ..Default::default()
                    }]
                } else {
                    vec![]
                };
                if let (Mode::Pipelines { led, followed }, 2, Some(me)) = (mode, heartbeats, &node)
                {
                    let ratis = me.ports.iter().find(|p| p.name == "RATIS").unwrap().value;
                    let members = || vec![me.clone(), member(PEER_B, ratis), member(PEER_C, ratis)];
                    commands.push(create_pipeline(led, members(), vec![1, 0, 0]));
                    commands.push(create_pipeline(followed, members(), vec![0, 1, 0]));
                }
                if let Some(id) = seen.lock().unwrap().close.take() {
                    commands.push(ScmCommandProto {
                        command_type: CommandType::ClosePipelineCommand as i32,
                        close_pipeline_command_proto: Some(
                            common::scm::proto::ClosePipelineCommandProto {
                                pipeline_id: pipeline_id(id),
                                cmd_id: 8,
                            },
                        ),
                        ..Default::default()
                    });
                }
                response.send_heartbeat_response = Some(ScmHeartbeatResponseProto {
                    datanode_uuid: String::new(),
                    commands: {
                        commands.extend(std::mem::take(&mut seen.lock().unwrap().to_send));
                        commands
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

/// The pipelines the newest heartbeat reported: (UUID, isLeader), sorted.
fn last_pipeline_report(seen: &Mutex<Seen>) -> Option<Vec<(uuid::Uuid, bool)>> {
    let seen = seen.lock().unwrap();
    let heartbeat = seen
        .requests
        .iter()
        .rev()
        .find_map(|r| r.send_heartbeat_request.as_ref())?;
    let mut reports: Vec<(uuid::Uuid, bool)> = heartbeat
        .pipeline_reports
        .as_ref()?
        .pipeline_report
        .iter()
        .map(|r| {
            let u = r.pipeline_id.uuid128.unwrap();
            let id = uuid::Uuid::from_u64_pair(u.most_sig_bits as u64, u.least_sig_bits as u64);
            assert_eq!(r.pipeline_id.id.as_deref(), Some(id.to_string().as_str()));
            (id, r.is_leader)
        })
        .collect();
    reports.sort();
    Some(reports)
}

/// One Ratis write of an Echo to container `container` in `group` on the node's Ratis port, over
/// an unordered stream.
async fn ratis_echo(
    addr: std::net::SocketAddr,
    group: uuid::Uuid,
    container: i64,
) -> Result<common::ratis::proto::common::RaftClientReplyProto, tonic::Status> {
    use common::ratis::proto::common::raft_client_request_proto::Type as RaftType;
    use common::ratis::proto::common::{
        ClientMessageEntryProto, RaftClientRequestProto, RaftGroupIdProto, RaftRpcRequestProto,
        ReplicationLevel, WriteRequestTypeProto,
    };
    use common::ratis::proto::grpc::raft_client_protocol_service_client::RaftClientProtocolServiceClient;
    let command = common::proto::ContainerCommandRequestProto {
        cmd_type: common::proto::Type::Echo as i32,
        container_id: container,
        datanode_uuid: "6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01".into(),
        echo: Some(common::proto::EchoRequestProto {
            payload: Some(Bytes::from_static(b"hello")),
            payload_size_resp: Some(3),
            read_only: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let request = RaftClientRequestProto {
        rpc_request: Some(RaftRpcRequestProto {
            requestor_id: common::ratis::id_bytes(uuid::Uuid::from_u128(0xc11e)),
            reply_id: Bytes::from_static(b"6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01"),
            raft_group_id: Some(RaftGroupIdProto {
                id: common::ratis::id_bytes(group),
            }),
            // (One call per container: the retry cache answers a repeated call id.)
            call_id: container as u64,
            to_leader: true,
            ..Default::default()
        }),
        message: Some(ClientMessageEntryProto {
            content: common::ratis::encode_message(&command),
        }),
        r#type: Some(RaftType::Write(WriteRequestTypeProto {
            replication: ReplicationLevel::Majority as i32,
        })),
    };
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = RaftClientProtocolServiceClient::new(channel);
    let mut replies = client
        .unordered(tokio_stream::iter(vec![request]))
        .await?
        .into_inner();
    replies
        .message()
        .await?
        .ok_or_else(|| tonic::Status::unknown("no reply"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scm_s_pipelines_become_raft_groups_reported_led_or_followed_and_closed() {
    use common::ratis::proto::common::raft_client_reply_proto::ExceptionDetails;
    let led = uuid::Uuid::from_u128(0x1ed);
    let followed = uuid::Uuid::from_u128(0xf0110ed);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = fake_scm(listener, Mode::Pipelines { led, followed }).await;
    let mut config = config(addr.to_string());
    config.ratis_listen = Some("127.0.0.1:0".parse().unwrap());
    config.pipelines = vec![];
    let server = dn_sim::start(config).await.unwrap();
    let ratis = server.ratis_addr().unwrap();

    // Before SCM's command: no group to report, and none serves.
    until("a heartbeat", Duration::from_secs(10), || {
        last_pipeline_report(&seen).is_some()
    })
    .await;
    assert_eq!(last_pipeline_report(&seen), Some(vec![]));
    {
        let seen = seen.lock().unwrap();
        let register = seen.requests[1].register_request.as_ref().unwrap();
        assert!(register.pipeline_reports.pipeline_report.is_empty());
    }

    until(
        "both pipelines reported, one led and one followed",
        Duration::from_secs(10),
        || last_pipeline_report(&seen) == Some(vec![(led, true), (followed, false)]),
    )
    .await;

    // The leader applies the write and reports every member at its commit index.
    let reply = ratis_echo(ratis, led, 1).await.unwrap();
    assert!(reply.rpc_reply.as_ref().unwrap().success, "{reply:?}");
    assert!(reply.exception_details.is_none(), "{reply:?}");
    assert!(reply.log_index > 0);
    let mut members: Vec<String> = reply
        .commit_infos
        .iter()
        .map(|c| String::from_utf8(c.server.as_ref().unwrap().id.to_vec()).unwrap())
        .collect();
    members.sort();
    assert_eq!(
        members,
        [PEER_B, PEER_C, "6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01"]
    );

    // A follower names the leader instead, as Ratis does.
    let reply = ratis_echo(ratis, followed, 1).await.unwrap();
    assert!(!reply.rpc_reply.as_ref().unwrap().success);
    let Some(ExceptionDetails::NotLeaderException(not_leader)) = &reply.exception_details else {
        panic!("not a NotLeaderException: {reply:?}");
    };
    let leader = not_leader.suggested_leader.as_ref().unwrap();
    assert_eq!(&leader.id[..], PEER_B.as_bytes());
    assert_eq!(leader.client_address, ratis.to_string());
    assert_eq!(not_leader.peers_in_conf.len(), 3);

    // An apply that fails (an Echo to a container the node lacks) makes the DataNode ask SCM,
    // once, to close the pipeline.
    let failed = ratis_echo(ratis, led, 99).await.unwrap();
    assert!(
        matches!(
            failed.exception_details,
            Some(ExceptionDetails::StateMachineException(_))
        ),
        "{failed:?}"
    );
    let close_actions = |seen: &Mutex<Seen>| -> Vec<common::scm::proto::PipelineAction> {
        seen.lock()
            .unwrap()
            .requests
            .iter()
            .filter_map(|r| r.send_heartbeat_request.as_ref()?.pipeline_actions.clone())
            .flat_map(|a| a.pipeline_actions)
            .collect()
    };
    until("a close action", Duration::from_secs(10), || {
        !close_actions(&seen).is_empty()
    })
    .await;
    let heartbeats = |seen: &Mutex<Seen>| {
        let seen = seen.lock().unwrap();
        seen.requests
            .iter()
            .filter(|r| r.send_heartbeat_request.is_some())
            .count()
    };
    let then = heartbeats(&seen);
    until("three more heartbeats", Duration::from_secs(10), || {
        heartbeats(&seen) >= then + 3
    })
    .await;
    let actions = close_actions(&seen);
    assert_eq!(actions.len(), 1, "asked once: {actions:?}");
    let info = actions[0].close_pipeline.as_ref().unwrap();
    assert_eq!(
        info.pipeline_id.id.as_deref(),
        Some(led.to_string().as_str())
    );
    assert_eq!(
        info.reason,
        Some(common::scm::proto::close_pipeline_info::Reason::StatemachineTransactionFailed as i32)
    );

    // closePipeline: the group is gone from the reports and from the port.
    seen.lock().unwrap().close = Some(followed);
    until(
        "the closed pipeline unreported",
        Duration::from_secs(10),
        || last_pipeline_report(&seen) == Some(vec![(led, true)]),
    )
    .await;
    let status = ratis_echo(ratis, followed, 1).await.unwrap_err();
    assert!(status.message().contains("not found"), "{status:?}");
    server.shutdown().await;
}

/// The newest report SCM heard of each container, full or incremental, in order.
fn replica_states(seen: &Seen) -> std::collections::BTreeMap<i64, ContainerReplicaProto> {
    let mut last = std::collections::BTreeMap::new();
    for r in &seen.requests {
        if let Some(reg) = &r.register_request {
            for c in &reg.container_report.reports {
                last.insert(c.container_id, c.clone());
            }
        }
        if let Some(hb) = &r.send_heartbeat_request {
            for c in hb.container_report.iter().flat_map(|f| &f.reports) {
                last.insert(c.container_id, c.clone());
            }
            for c in hb
                .incremental_container_report
                .iter()
                .flat_map(|i| &i.report)
            {
                last.insert(c.container_id, c.clone());
            }
        }
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_delete_and_delete_blocks_commands_are_executed_and_reported() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = fake_scm(listener, Mode::Honest { reregister_at: 0 }).await;
    let mut cfg = config(addr.to_string());
    cfg.containers = "1-4".parse().unwrap();
    // Full reports only at registration: what follows must come in incremental ones.
    cfg.scm.as_mut().unwrap().container_report_interval = Duration::from_secs(3600);
    let server = dn_sim::start(cfg).await.unwrap();
    let store = Arc::clone(server.admission().store());
    let status = Arc::clone(server.scm_status());
    until("registered", Duration::from_secs(10), || {
        status.heartbeats.load(Ordering::Relaxed) >= 1
    })
    .await;
    let pipeline = || PipelineId {
        id: Some("00000000-0000-0000-0000-000000000001".into()),
        ..Default::default()
    };
    let close = |id: i64, force: bool| ScmCommandProto {
        command_type: CommandType::CloseContainerCommand as i32,
        close_container_command_proto: Some(CloseContainerCommandProto {
            container_id: id,
            pipeline_id: pipeline(),
            cmd_id: 100 + id,
            force: Some(force),
        }),
        ..Default::default()
    };
    let delete = |id: i64, force: bool| ScmCommandProto {
        command_type: CommandType::DeleteContainerCommand as i32,
        delete_container_command_proto: Some(DeleteContainerCommandProto {
            container_id: id,
            cmd_id: 200 + id,
            force,
            replica_index: None,
        }),
        ..Default::default()
    };
    let tx = |tx_id: i64, container_id: i64| DeletedBlocksTransaction {
        tx_id,
        container_id,
        local_id: vec![1, 2],
        ..Default::default()
    };
    seen.lock().unwrap().to_send = vec![
        close(1, true),
        close(2, false),
        close(99, true),
        // OPEN: a delete without force is refused, the container stays.
        delete(3, false),
        ScmCommandProto {
            command_type: CommandType::DeleteBlocksCommand as i32,
            delete_blocks_command_proto: Some(DeleteBlocksCommandProto {
                deleted_blocks_transactions: vec![tx(7, 1), tx(8, 99)],
                cmd_id: 300,
            }),
            ..Default::default()
        },
    ];
    until("the commands executed", Duration::from_secs(10), || {
        let seen = seen.lock().unwrap();
        let r = replica_states(&seen);
        r.get(&1).map(|c| (c.state, c.delete_transaction_id))
            == Some((ReplicaState::Closed as i32, Some(7)))
            && r.get(&2).map(|c| c.state) == Some(ReplicaState::QuasiClosed as i32)
    })
    .await;
    assert_eq!(store.get(3).unwrap().state(), StoreState::Open);
    assert!(
        store.get(99).is_none(),
        "closing an unknown container creates none"
    );
    {
        let seen = seen.lock().unwrap();
        let statuses: Vec<_> = seen
            .requests
            .iter()
            .filter_map(|r| r.send_heartbeat_request.as_ref())
            .flat_map(|h| &h.command_status_reports)
            .flat_map(|c| &c.cmd_status)
            .collect();
        assert_eq!(
            statuses.len(),
            1,
            "one status, for deleteBlocks: {statuses:?}"
        );
        assert_eq!(statuses[0].cmd_id, 300);
        assert_eq!(statuses[0].status, CommandState::Executed as i32);
        let ack = statuses[0].block_deletion_ack.as_ref().unwrap();
        assert_eq!(ack.dn_id, "6a1f8bd2-0d2c-4a8e-9a59-3c7d3a1c0b01");
        let results: Vec<_> = ack
            .results
            .iter()
            .map(|r| (r.tx_id, r.container_id, r.success))
            .collect();
        assert_eq!(results, vec![(7, 1, true), (8, 99, false)]);
    }

    // A closed container refuses writes and still serves reads (the gRPC path's checks).
    let closed = store.get(1).unwrap();
    assert!(closed.check_open().is_err());

    // Forced deletes remove containers 3 and 2; SCM hears DELETED for both.
    seen.lock().unwrap().to_send = vec![delete(3, true), delete(2, true)];
    until("the deletions reported", Duration::from_secs(10), || {
        let r = replica_states(&seen.lock().unwrap());
        [2, 3]
            .iter()
            .all(|id| r.get(id).map(|c| c.state) == Some(ReplicaState::Deleted as i32))
    })
    .await;
    assert!(store.get(2).is_none() && store.get(3).is_none());
    assert!(store.get(1).is_some() && store.get(4).is_some());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_container_is_reported_without_waiting_for_the_next_heartbeat() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = fake_scm(listener, Mode::Honest { reregister_at: 0 }).await;
    seen.lock().unwrap().to_send = vec![ScmCommandProto {
        command_type: CommandType::CloseContainerCommand as i32,
        close_container_command_proto: Some(CloseContainerCommandProto {
            container_id: 1,
            pipeline_id: PipelineId::default(),
            cmd_id: 1,
            force: Some(true),
        }),
        ..Default::default()
    }];
    let mut cfg = config(addr.to_string());
    // The first heartbeat goes at once and brings the command; the next tick is 60 s away.
    cfg.scm.as_mut().unwrap().heartbeat_interval = Duration::from_secs(60);
    let server = dn_sim::start(cfg).await.unwrap();
    until(
        "container 1 reported CLOSED well before the next tick",
        Duration::from_secs(10),
        || {
            replica_states(&seen.lock().unwrap())
                .get(&1)
                .map(|c| c.state)
                == Some(ReplicaState::Closed as i32)
        },
    )
    .await;
    let heartbeats = seen
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.send_heartbeat_request.is_some())
        .count();
    assert_eq!(heartbeats, 2, "the tick's heartbeat and the triggered one");
    server.shutdown().await;
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

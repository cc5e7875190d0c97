//! dn-sim's Ratis client port as the Ratis client meets it: the ordered stream's dummy first
//! watch, writes with log indices and commit infos, Raft reads, replies in request order,
//! watches, the retry cache, a closed container's `StateMachineException`, and the stream errors
//! for an unknown group, a group change and a pipeline ID of another group. Over tonic against a
//! server on 127.0.0.1:0.

use bytes::Bytes;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as XceiverClient;
use common::proto::{
    ChunkInfo, CloseContainerRequestProto, ContainerCommandRequestProto as Req,
    ContainerCommandResponseProto as Resp, DatanodeBlockId, EchoRequestProto, GetBlockRequestProto,
    PutBlockRequestProto, Result as OzoneResult, Type, WriteChunkRequestProto,
};
use common::ratis::proto::common::raft_client_reply_proto::ExceptionDetails;
use common::ratis::proto::common::raft_client_request_proto::Type as RaftType;
use common::ratis::proto::common::{
    ClientMessageEntryProto, RaftClientReplyProto, RaftClientRequestProto, RaftGroupIdProto,
    RaftRpcRequestProto, ReadRequestTypeProto, ReplicationLevel, SlidingWindowEntry,
    WatchRequestTypeProto, WriteRequestTypeProto,
};
use common::ratis::proto::grpc::raft_client_protocol_service_client::RaftClientProtocolServiceClient as Client;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

const GROUP: uuid::Uuid = uuid::Uuid::from_u128(0x1111_2222_3333_4444_5555_6666_7777_8888);
const CLIENT: uuid::Uuid = uuid::Uuid::from_u128(0xc11e);

async fn server() -> (dn_sim::RunningServer, Client<Channel>) {
    server_with(|_| {}).await
}

/// A server hosting GROUP over containers 1-3, changed by `change` first.
async fn server_with(
    change: impl FnOnce(&mut dn_sim::Config),
) -> (dn_sim::RunningServer, Client<Channel>) {
    let mut config = dn_sim::Config::loopback();
    config.containers = "1-3".parse().unwrap();
    config.ratis_listen = Some("127.0.0.1:0".parse().unwrap());
    config.pipelines = vec![GROUP];
    change(&mut config);
    let server = dn_sim::start(config).await.unwrap();
    let addr = server.ratis_addr().expect("a Ratis port");
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = Client::new(channel)
        .max_decoding_message_size(common::ratis::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(common::ratis::MAX_MESSAGE_SIZE);
    (server, client)
}

fn rpc(group: uuid::Uuid, call_id: u64, seq: u64) -> RaftRpcRequestProto {
    RaftRpcRequestProto {
        requestor_id: common::ratis::id_bytes(CLIENT),
        reply_id: Bytes::from_static(dn_sim::net::server::DEFAULT_DATANODE_UUID.as_bytes()),
        raft_group_id: Some(RaftGroupIdProto {
            id: common::ratis::id_bytes(group),
        }),
        call_id,
        to_leader: true,
        sliding_window_entry: (seq > 0).then_some(SlidingWindowEntry {
            seq_num: seq,
            is_first: seq == 1,
        }),
        ..Default::default()
    }
}

fn watch(index: u64, call_id: u64, seq: u64) -> RaftClientRequestProto {
    RaftClientRequestProto {
        rpc_request: Some(rpc(GROUP, call_id, seq)),
        message: Some(ClientMessageEntryProto::default()),
        r#type: Some(RaftType::Watch(WatchRequestTypeProto {
            index,
            replication: ReplicationLevel::AllCommitted as i32,
        })),
    }
}

/// `command` as Ozone's `XceiverClientRatis` sends it: a Raft read when read-only, else a write.
fn raft(command: &Req, call_id: u64, seq: u64) -> RaftClientRequestProto {
    let r#type = if common::ratis::is_read_only(command) {
        RaftType::Read(ReadRequestTypeProto::default())
    } else {
        RaftType::Write(WriteRequestTypeProto {
            replication: ReplicationLevel::Majority as i32,
        })
    };
    RaftClientRequestProto {
        rpc_request: Some(rpc(GROUP, call_id, seq)),
        message: Some(ClientMessageEntryProto {
            content: common::ratis::encode_message(command),
        }),
        r#type: Some(r#type),
    }
}

fn req(cmd: Type, container: i64) -> Req {
    Req {
        cmd_type: cmd as i32,
        container_id: container,
        datanode_uuid: dn_sim::net::server::DEFAULT_DATANODE_UUID.into(),
        ..Default::default()
    }
}

fn echo(read_only: bool, payload: usize) -> Req {
    Req {
        echo: Some(EchoRequestProto {
            payload: Some(Bytes::from(vec![7u8; payload])),
            payload_size_resp: Some(3),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..req(Type::Echo, 1)
    }
}

/// An ordered stream: send requests, read replies.
struct Ordered {
    tx: mpsc::Sender<RaftClientRequestProto>,
    inbound: tonic::Streaming<RaftClientReplyProto>,
}

impl Ordered {
    async fn open(client: &mut Client<Channel>) -> Ordered {
        let (tx, rx) = mpsc::channel(64);
        // The dummy first watch goes before the call, as the Ratis client's does.
        tx.send(watch(0, 0, 1)).await.unwrap();
        let inbound = client
            .ordered(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        let mut stream = Ordered { tx, inbound };
        let first = stream.next().await.expect("the dummy watch is answered");
        assert!(first.rpc_reply.as_ref().unwrap().success, "{first:?}");
        stream
    }

    async fn send(&self, request: RaftClientRequestProto) {
        self.tx.send(request).await.unwrap();
    }

    async fn next(&mut self) -> Result<RaftClientReplyProto, tonic::Status> {
        self.inbound
            .message()
            .await
            .and_then(|m| m.ok_or_else(|| tonic::Status::unknown("the stream ended")))
    }
}

fn response(reply: &RaftClientReplyProto) -> Resp {
    Resp::decode(reply.message.as_ref().expect("a message").content.clone()).unwrap()
}

#[tokio::test]
async fn writes_get_log_indices_and_commit_infos_and_reads_get_answers_in_order() {
    let (_server, mut client) = server().await;
    let mut stream = Ordered::open(&mut client).await;
    // 40 requests in flight at once (more than Ozone's 32), alternating writes and reads.
    for i in 0..40u64 {
        stream
            .send(raft(&echo(i % 2 == 1, 100), 10 + i, 2 + i))
            .await;
    }
    let mut last_index = 0;
    for i in 0..40u64 {
        let reply = stream.next().await.unwrap();
        let header = reply.rpc_reply.as_ref().unwrap();
        assert_eq!(header.call_id, 10 + i, "replies leave in request order");
        assert!(header.success, "{reply:?}");
        assert_eq!(header.requestor_id, common::ratis::id_bytes(CLIENT));
        assert_eq!(
            header.reply_id,
            dn_sim::net::server::DEFAULT_DATANODE_UUID.as_bytes()
        );
        assert_eq!(
            header.raft_group_id.as_ref().unwrap().id,
            common::ratis::id_bytes(GROUP)
        );
        let resp = response(&reply);
        assert_eq!(resp.result, OzoneResult::Success as i32);
        assert_eq!(resp.echo.unwrap().payload.unwrap().len(), 3);
        if i % 2 == 0 {
            assert!(reply.log_index > last_index, "a write gets a new log index");
            last_index = reply.log_index;
            let commit = reply.commit_infos[0].commit_index;
            assert!(
                commit >= reply.log_index,
                "commit {commit} covers the write"
            );
            assert_eq!(
                reply.commit_infos[0].server.as_ref().unwrap().id,
                dn_sim::net::server::DEFAULT_DATANODE_UUID.as_bytes()
            );
        } else {
            assert_eq!(reply.log_index, 0, "a read is no log entry");
        }
    }
    // 20 writes: each an entry, and a metadata entry when it raised the commit index.
    assert!(
        (20..=39).contains(&last_index),
        "20 writes, last index {last_index}"
    );
    // A watch of a committed index is answered at once.
    stream.send(watch(last_index, 99, 42)).await;
    let reply = stream.next().await.unwrap();
    assert!(reply.rpc_reply.unwrap().success);
    assert!(reply.log_index >= last_index);
}

#[tokio::test]
async fn a_chunk_and_its_block_are_written_and_read_back_through_raft() {
    let (server, mut client) = server().await;
    let mut stream = Ordered::open(&mut client).await;
    let block = DatanodeBlockId {
        container_id: 2,
        local_id: 77,
        block_commit_sequence_id: None,
        replica_index: None,
    };
    let chunk = ChunkInfo {
        chunk_name: "77_chunk_1".into(),
        offset: 0,
        len: 4096,
        checksum_data: common::proto::ChecksumData {
            r#type: common::proto::ChecksumType::None as i32,
            bytes_per_checksum: 16384,
            checksums: vec![],
        },
        ..Default::default()
    };
    let write = Req {
        write_chunk: Some(WriteChunkRequestProto {
            block_id: block,
            chunk_data: Some(chunk.clone()),
            data: Some(Bytes::from(vec![42u8; 4096])),
            ..Default::default()
        }),
        ..req(Type::WriteChunk, 2)
    };
    let put = Req {
        put_block: Some(PutBlockRequestProto {
            block_data: common::proto::BlockData {
                block_id: block,
                chunks: vec![chunk],
                ..Default::default()
            },
            eof: Some(true),
            ..Default::default()
        }),
        ..req(Type::PutBlock, 2)
    };
    let get = Req {
        get_block: Some(GetBlockRequestProto {
            block_id: block,
            ..Default::default()
        }),
        ..req(Type::GetBlock, 2)
    };
    stream.send(raft(&write, 1, 2)).await;
    stream.send(raft(&put, 2, 3)).await;
    stream.send(raft(&get, 3, 4)).await;
    let mut put_index = 0;
    for expected in [Type::WriteChunk, Type::PutBlock, Type::GetBlock] {
        let reply = stream.next().await.unwrap();
        if expected == Type::PutBlock {
            put_index = reply.log_index;
        }
        let resp = response(&reply);
        assert_eq!(resp.cmd_type, expected as i32);
        assert_eq!(
            resp.result,
            OzoneResult::Success as i32,
            "{expected:?}: {:?}",
            resp.message
        );
        if expected == Type::GetBlock {
            let data = resp.get_block.unwrap().block_data;
            assert_eq!(data.chunks.len(), 1);
            assert_eq!(data.size, Some(4096));
            // PutBlock's bcsId is its transaction's log index.
            assert!(put_index > 0);
            assert_eq!(data.block_id.block_commit_sequence_id, Some(put_index));
        }
    }
    // Over the gRPC port, a GetBlock naming that bcsId finds the block; one past the
    // container's is UNKNOWN_BCSID (BlockUtils.verifyBCSId).
    let channel = Channel::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = XceiverClient::new(channel);
    for (bcs_id, result) in [
        (put_index, OzoneResult::Success),
        (put_index + 1, OzoneResult::UnknownBcsid),
    ] {
        let mut get = get.clone();
        get.get_block
            .as_mut()
            .unwrap()
            .block_id
            .block_commit_sequence_id = Some(bcs_id);
        let resp = grpc
            .send(tokio_stream::once(get))
            .await
            .unwrap()
            .into_inner()
            .message()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            resp.result, result as i32,
            "bcsId {bcs_id}: {:?}",
            resp.message
        );
    }
}

#[tokio::test]
async fn a_closed_container_refuses_writes_with_a_readable_state_machine_exception() {
    let (_server, mut client) = server().await;
    let mut stream = Ordered::open(&mut client).await;
    let close = Req {
        close_container: Some(CloseContainerRequestProto {}),
        ..req(Type::CloseContainer, 3)
    };
    stream.send(raft(&close, 1, 2)).await;
    let closed = stream.next().await.unwrap();
    assert_eq!(response(&closed).result, OzoneResult::Success as i32);
    let mut refused = echo(false, 0);
    refused.container_id = 3;
    stream.send(raft(&refused, 2, 3)).await;
    let reply = stream.next().await.unwrap();
    assert!(!reply.rpc_reply.as_ref().unwrap().success);
    let Some(ExceptionDetails::StateMachineException(e)) = reply.exception_details else {
        panic!("a StateMachineException: {reply:?}")
    };
    assert_eq!(
        e.exception_class_name,
        "org.apache.hadoop.hdds.scm.container.common.helpers.ContainerNotOpenException"
    );
    assert_eq!(e.error_msg, "Container 3 in CLOSED state");
    assert_eq!(&e.stacktrace[..], &common::ratis::EMPTY_STACK_TRACE[..]);
    // A read-only echo of the closed container still works.
    let mut read = echo(true, 0);
    read.container_id = 3;
    stream.send(raft(&read, 3, 4)).await;
    assert!(stream.next().await.unwrap().rpc_reply.unwrap().success);
}

#[tokio::test]
async fn a_retried_call_is_answered_from_the_retry_cache_not_applied_again() {
    let (_server, mut client) = server().await;
    let mut stream = Ordered::open(&mut client).await;
    stream.send(raft(&echo(false, 10), 5, 2)).await;
    let first = stream.next().await.unwrap();
    // The same client and call id on another stream (the Ratis client retries on a new one).
    let (tx, rx) = mpsc::channel(4);
    tx.send(raft(&echo(false, 10), 5, 0)).await.unwrap();
    let mut other = client
        .unordered(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let again = other.message().await.unwrap().unwrap();
    assert_eq!(again.log_index, first.log_index, "the same entry");
    // A new call id is a new entry, after the metadata entry the first write's commit appended.
    stream.send(raft(&echo(false, 10), 6, 3)).await;
    let next = stream.next().await.unwrap();
    assert_eq!(next.log_index, first.log_index + 2);
    assert_eq!(next.commit_infos[0].commit_index, next.log_index + 1);
}

#[tokio::test]
async fn an_unknown_group_a_group_change_and_a_foreign_pipeline_end_the_stream() {
    let (_server, mut client) = server().await;
    let exception_type = |status: &tonic::Status| {
        status
            .metadata()
            .get(common::ratis::EXCEPTION_TYPE_KEY)
            .map(|v| v.to_str().unwrap().to_string())
    };
    // Unknown group.
    let (tx, rx) = mpsc::channel(4);
    let mut unknown = watch(0, 0, 1);
    unknown.rpc_request = Some(rpc(uuid::Uuid::from_u128(9), 0, 1));
    tx.send(unknown).await.unwrap();
    let status = match client.ordered(ReceiverStream::new(rx)).await {
        Err(status) => status,
        Ok(response) => response.into_inner().message().await.unwrap_err(),
    };
    assert_eq!(status.code(), tonic::Code::Internal);
    assert_eq!(
        exception_type(&status).as_deref(),
        Some(common::ratis::GROUP_MISMATCH_EXCEPTION)
    );
    assert!(
        status.message().ends_with("not found."),
        "{}",
        status.message()
    );

    // A second group on a stream opened for the first.
    let mut stream = Ordered::open(&mut client).await;
    let mut other = raft(&echo(false, 0), 1, 2);
    other.rpc_request = Some(rpc(uuid::Uuid::from_u128(10), 1, 2));
    stream.send(other).await;
    let status = stream.next().await.unwrap_err();
    assert_eq!(
        exception_type(&status).as_deref(),
        Some(common::ratis::GROUP_MISMATCH_EXCEPTION)
    );
    // "<stream number>: The group (group-…) of client-… does not match the group (group-…) of
    // the OrderedRequestStreamObserver", as Ratis 3.2.1 words it.
    let (number, rest) = status.message().split_once(": ").unwrap();
    assert!(number.parse::<u64>().is_ok(), "{}", status.message());
    assert!(
        rest.starts_with("The group (group-00000000000A) of client-00000000C11E ")
            && rest.ends_with(
                "does not match the group (group-666677778888) of the OrderedRequestStreamObserver"
            ),
        "{}",
        status.message()
    );

    // A pipeline ID that is not the group's.
    let mut stream = Ordered::open(&mut client).await;
    let mut foreign = echo(false, 0);
    foreign.pipeline_id = Some(uuid::Uuid::from_u128(11).to_string());
    stream.send(raft(&foreign, 1, 2)).await;
    let status = stream.next().await.unwrap_err();
    assert_eq!(
        exception_type(&status).as_deref(),
        Some("org.apache.ratis.thirdparty.com.google.protobuf.InvalidProtocolBufferException")
    );
    assert!(
        status.message().starts_with("ID mismatched"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn garbage_and_oversize_requests_end_their_stream_and_others_are_served() {
    let (server, mut client) = server().await;
    let addr = server.ratis_addr().unwrap();
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    // Bytes that are no RaftClientRequestProto (a field 1 claiming 100 bytes it does not have).
    let mut raw = tonic::client::Grpc::new(channel.clone());
    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(common::ratis::ORDERED_PATH);
    let request = tonic::Request::new(tokio_stream::once(Bytes::from_static(b"\x0a\x64\x01")));
    let status = match raw
        .streaming(request, path, grpc_client::raw::RawCodec)
        .await
    {
        Err(status) => status,
        Ok(response) => response.into_inner().message().await.unwrap_err(),
    };
    assert_eq!(status.code(), tonic::Code::Unknown, "{status:?}");

    // A write over the 33 MiB limit (sent by a client whose own limit is higher), first on an
    // unordered stream: RESOURCE_EXHAUSTED, nothing applied.
    let mut big_client = Client::new(channel).max_encoding_message_size(64 << 20);
    let mut big = raft(&echo(false, 0), 1, 2);
    big.message = Some(ClientMessageEntryProto {
        content: Bytes::from(vec![0u8; common::ratis::MAX_MESSAGE_SIZE + 1]),
    });
    let status = match big_client.unordered(tokio_stream::once(big.clone())).await {
        Err(status) => status,
        Ok(response) => response.into_inner().message().await.unwrap_err(),
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("gRPC message exceeds maximum size 34603008"),
        "{}",
        status.message()
    );
    // On an ordered stream, which has answered its first watch: reset (RST_STREAM CANCEL), as a
    // real DataNode's grpc-java does once a stream has sent headers.
    let mut stream = Ordered::open(&mut big_client).await;
    stream.send(big).await;
    let status = stream.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");

    // Everyone else is still served, and the refused write took no log index.
    let mut stream = Ordered::open(&mut client).await;
    stream.send(raft(&echo(false, 0), 1, 2)).await;
    let reply = stream.next().await.unwrap();
    assert!(reply.rpc_reply.unwrap().success);
    assert_eq!(reply.log_index, 1);
}

/// An echo of `sleep_ms` to `container`, as a Raft write.
fn sleeping_echo(container: i64, sleep_ms: i32) -> Req {
    Req {
        echo: Some(EchoRequestProto {
            sleep_time_ms: Some(sleep_ms),
            ..Default::default()
        }),
        ..req(Type::Echo, container)
    }
}

/// Sends `commands` on one ordered stream at once and waits for every reply: the time they took.
async fn all_at_once(
    stream: &mut Ordered,
    commands: &[Req],
    first_call: u64,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    for (i, command) in commands.iter().enumerate() {
        let call = first_call + i as u64;
        stream.send(raft(command, call, call + 1)).await;
    }
    for _ in commands {
        let reply = stream.next().await.unwrap();
        assert!(reply.rpc_reply.as_ref().unwrap().success, "{reply:?}");
        assert_eq!(response(&reply).result, OzoneResult::Success as i32);
    }
    started.elapsed()
}

#[tokio::test]
async fn writes_to_one_container_are_applied_one_at_a_time_on_the_op_executors() {
    // One gRPC handler: the Ratis path must not use that pool. Four op executors per group.
    let (_server, mut client) = server_with(|config| {
        config.containers = "1-8".parse().unwrap();
        config.handler_count = 1;
        config.raft.op_executors = 4;
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    const SLEEP_MS: u32 = 25;
    let one_container: Vec<Req> = (0..8).map(|_| sleeping_echo(1, SLEEP_MS as i32)).collect();
    let eight_containers: Vec<Req> = (1..=8).map(|c| sleeping_echo(c, SLEEP_MS as i32)).collect();
    let serial = all_at_once(&mut stream, &one_container, 1).await;
    let spread = all_at_once(&mut stream, &eight_containers, 100).await;
    // One container's task queue: 8 sleeps in a row. Eight containers on four executors: two
    // rounds, which a pool of one gRPC handler could not give.
    assert!(
        serial >= std::time::Duration::from_millis(8 * SLEEP_MS as u64),
        "{serial:?}"
    );
    assert!(
        spread >= std::time::Duration::from_millis(2 * SLEEP_MS as u64),
        "{spread:?}"
    );
    let ratio = serial.as_secs_f64() / spread.as_secs_f64();
    assert!(
        ratio > 2.0,
        "one container {serial:?}, eight containers {spread:?}"
    );
}

#[tokio::test]
async fn an_echo_payload_is_written_to_the_raft_log_and_a_chunk_s_data_is_not() {
    // A slow log device: 1 MiB/s. A 64 KiB echo's entry holds its payload (HDDS-10943) and takes
    // >= 62 ms to log; a 64 KiB WriteChunk's entry holds only the command.
    let (_server, mut client) = server_with(|config| {
        config.raft.log_bandwidth = Some(1024.0 * 1024.0);
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    let payload = 64 * 1024;
    let echo = Req {
        echo: Some(EchoRequestProto {
            payload: Some(Bytes::from(vec![1u8; payload])),
            ..Default::default()
        }),
        ..req(Type::Echo, 1)
    };
    let block = DatanodeBlockId {
        container_id: 1,
        local_id: 5,
        block_commit_sequence_id: None,
        replica_index: None,
    };
    let chunk = Req {
        write_chunk: Some(WriteChunkRequestProto {
            block_id: block,
            chunk_data: Some(ChunkInfo {
                chunk_name: "5_chunk_1".into(),
                offset: 0,
                len: payload as u64,
                checksum_data: common::proto::ChecksumData {
                    r#type: common::proto::ChecksumType::None as i32,
                    bytes_per_checksum: 16384,
                    checksums: vec![],
                },
                ..Default::default()
            }),
            data: Some(Bytes::from(vec![2u8; payload])),
            ..Default::default()
        }),
        ..req(Type::WriteChunk, 1)
    };
    let echo_took = all_at_once(&mut stream, std::slice::from_ref(&echo), 1).await;
    let chunk_took = all_at_once(&mut stream, std::slice::from_ref(&chunk), 2).await;
    assert!(
        echo_took >= std::time::Duration::from_millis(62),
        "{echo_took:?}"
    );
    let ratio = echo_took.as_secs_f64() / chunk_took.as_secs_f64();
    assert!(ratio > 3.0, "echo {echo_took:?}, chunk {chunk_took:?}");
}

#[tokio::test]
async fn a_write_is_answered_once_logged_and_a_read_does_not_wait_for_the_log() {
    let (_server, mut client) = server_with(|config| {
        config.raft.log_latency = Some("40ms".parse().unwrap());
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    let write_took = all_at_once(&mut stream, &[sleeping_echo(1, 0)], 1).await;
    let read_took = all_at_once(&mut stream, &[echo(true, 16)], 2).await;
    assert!(
        write_took >= std::time::Duration::from_millis(40),
        "{write_took:?}"
    );
    let ratio = write_took.as_secs_f64() / read_took.as_secs_f64();
    assert!(ratio > 3.0, "write {write_took:?}, read {read_took:?}");
}

#[tokio::test]
async fn with_a_modelled_log_worker_writes_in_flight_together_share_its_flushes() {
    // Flushes of 40 ms, entries free: one write waits for a flush of its own; sixteen sent at
    // once share a few (Ratis's group commit), where one flush each would take 16 x as long.
    let profile = dn_sim::sim::profile::Profile::parse(
        "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
         [machine]\ncores = 2\nozone_release = \"2.2.0\"\n\
         [ratis.log]\nper_flush_us = 40000.0\n",
    )
    .unwrap();
    let (server, mut client) = server_with(|config| {
        config.containers = "1-16".parse().unwrap();
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        config.profile = Some(profile);
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    let one_took = all_at_once(&mut stream, &[sleeping_echo(1, 0)], 1).await;
    assert!(
        one_took >= std::time::Duration::from_millis(40),
        "{one_took:?}"
    );
    let sixteen: Vec<Req> = (1..=16).map(|c| sleeping_echo(c, 0)).collect();
    let sixteen_took = all_at_once(&mut stream, &sixteen, 10).await;
    let ratio = sixteen_took.as_secs_f64() / one_took.as_secs_f64();
    assert!(
        ratio < 6.0,
        "one write {one_took:?}, sixteen at once {sixteen_took:?}"
    );
    // Each flush is counted, and far fewer than the entries (17 writes and their metadata).
    let flushes = prom_sample(&server, "ratis_log_worker_flushCount").await;
    let entries = prom_sample(&server, "ratis_log_worker_appendEntryCount").await;
    assert!(
        (2.0..entries / 2.0).contains(&flushes),
        "{flushes} flushes of {entries} entries"
    );
}

#[tokio::test]
async fn the_admin_port_lists_the_hosted_groups_and_refuses_ids_that_do_not_parse() {
    use common::ratis::proto::common::{GroupInfoRequestProto, GroupListRequestProto};
    use common::ratis::proto::grpc::admin_protocol_service_client::AdminProtocolServiceClient;
    let other = uuid::Uuid::from_u128(0x0123);
    let (server, _client) = server_with(|config| {
        config.pipelines = vec![GROUP, other];
        config.ratis_admin_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let addr = server.ratis_admin_addr().expect("an admin port");
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = AdminProtocolServiceClient::new(channel);
    // As Ratis's client sends it: every id set (the group is Ratis's empty group id).
    let ids = RaftRpcRequestProto {
        requestor_id: common::ratis::id_bytes(CLIENT),
        reply_id: Bytes::from_static(b"any-peer"),
        raft_group_id: Some(RaftGroupIdProto {
            id: common::ratis::id_bytes(uuid::Uuid::nil()),
        }),
        call_id: 7,
        ..Default::default()
    };
    let reply = admin
        .group_list(GroupListRequestProto {
            rpc_request: Some(ids.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    let groups: Vec<_> = reply
        .group_id
        .iter()
        .map(|g| common::ratis::id_from_bytes(&g.id).unwrap())
        .collect();
    assert_eq!(groups, vec![GROUP, other]);
    let header = reply.rpc_reply.unwrap();
    assert!(header.success);
    assert_eq!(header.call_id, 7);
    assert_eq!(
        header.reply_id,
        dn_sim::net::server::DEFAULT_DATANODE_UUID.as_bytes()
    );

    let info = admin
        .group_info(GroupInfoRequestProto {
            rpc_request: Some(ids.clone()),
            group_id: Some(RaftGroupIdProto {
                id: common::ratis::id_bytes(GROUP),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.group.unwrap().peers.len(), 1);

    // A real 2.2.0 DataNode's admin port: the ids do not parse, the handler throws, UNKNOWN.
    let no_reply_id = RaftRpcRequestProto {
        reply_id: Bytes::new(),
        ..ids
    };
    let status = admin
        .group_list(GroupListRequestProto {
            rpc_request: Some(no_reply_id),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown);
    assert_eq!(status.message(), "Application error processing RPC");
}

/// The first `/prom` sample of `name` (a name, or a name and the start of its labels), as a
/// number.
async fn prom_sample(server: &dn_sim::RunningServer, name: &str) -> f64 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = server.metrics_addr().expect("a metrics listener");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /prom HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    let prefix = if name.contains('{') {
        name.to_string()
    } else {
        format!("{name}{{")
    };
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in /prom"))
}

#[tokio::test]
async fn ratis_times_and_counts_each_call_by_its_kind_as_a_real_datanode_does() {
    let (server, mut client) = server_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    // A write, then its retry on another stream: a miss, the apply's hit, the retry's hit.
    stream.send(raft(&echo(false, 10), 1, 2)).await;
    stream.next().await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(raft(&echo(false, 10), 1, 0)).await.unwrap();
    let mut other = client
        .unordered(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    other.message().await.unwrap().unwrap();
    // A closed container's refused write is a failed write; a read of it is not a failure.
    let close = Req {
        close_container: Some(CloseContainerRequestProto {}),
        ..req(Type::CloseContainer, 3)
    };
    stream.send(raft(&close, 2, 3)).await;
    stream.next().await.unwrap();
    let mut refused = echo(false, 0);
    refused.container_id = 3;
    stream.send(raft(&refused, 3, 4)).await;
    assert!(stream.next().await.unwrap().exception_details.is_some());
    stream.send(raft(&echo(true, 0), 4, 5)).await;
    stream.next().await.unwrap();

    let sample = |name: &'static str| prom_sample(&server, name);
    // Writes: call 1, its retry, the close, the refused write.
    assert_eq!(sample("ratis_server_clientWriteRequest_count").await, 4.0);
    assert_eq!(
        sample("ratis_server_numFailedClientWriteOnServer").await,
        1.0
    );
    assert_eq!(sample("ratis_server_clientReadRequest_count").await, 1.0);
    assert_eq!(
        sample("ratis_server_numFailedClientReadOnServer").await,
        0.0
    );
    // The test's dummy first watch is ALL_COMMITTED (Ratis's own client sends MAJORITY).
    assert_eq!(
        sample("ratis_server_clientWatch_ALL_COMMITTEDRequest_count").await,
        1.0
    );
    assert_eq!(sample("ratis_server_clientWatchRequest_count").await, 0.0);
    // Three first writes missed the retry cache; the two applied ones and the retry hit it (the
    // refused write never reached the log).
    assert_eq!(sample("ratis_server_retryCacheMissCount").await, 3.0);
    assert_eq!(sample("ratis_server_retryCacheHitCount").await, 3.0);
    assert_eq!(sample("ratis_server_retryCacheHitRate").await, 0.5);
    // The timer's quantiles are durations in seconds: positive, ordered, under the test's span.
    let p50 = sample("ratis_server_clientWriteRequest{quantile=\"0.5\"").await;
    let p999 = sample("ratis_server_clientWriteRequest{quantile=\"0.999\"").await;
    assert!(0.0 < p50 && p50 <= p999 && p999 < 10.0, "{p50} {p999}");
}

/// `/prom` as text.
async fn prom_text(server: &dn_sim::RunningServer) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = server.metrics_addr().expect("a metrics listener");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /prom HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    text
}

fn state_machine_exception(reply: &RaftClientReplyProto) -> (String, String) {
    assert!(!reply.rpc_reply.as_ref().unwrap().success, "{reply:?}");
    let Some(ExceptionDetails::StateMachineException(e)) = &reply.exception_details else {
        panic!("a StateMachineException: {reply:?}")
    };
    (e.exception_class_name.clone(), e.error_msg.clone())
}

#[tokio::test]
async fn after_a_failed_apply_writes_are_refused_when_applied_and_a_chunk_write_closes_the_log() {
    let (server, mut client) = server_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    let storage = "org.apache.hadoop.hdds.scm.container.common.helpers.StorageContainerException";
    // CreateContainer of a container that exists fails when applied (CONTAINER_ALREADY_EXISTS):
    // the entry is logged, and the state machine is unhealthy.
    let create = Req {
        create_container: Some(Default::default()),
        ..req(Type::CreateContainer, 1)
    };
    stream.send(raft(&create, 1, 2)).await;
    let failed = stream.next().await.unwrap();
    assert_eq!(
        state_machine_exception(&failed),
        (
            storage.into(),
            "Container creation failed because key value container already exists".into()
        )
    );
    assert!(failed.log_index > 0, "logged: {failed:?}");
    // A write to that container is logged and refused at apply; another container's is applied.
    stream.send(raft(&echo(false, 1), 2, 3)).await;
    let refused = stream.next().await.unwrap();
    assert_eq!(
        state_machine_exception(&refused),
        (
            storage.into(),
            "Prev writes to container 1 failed, stopping all writes to container".into()
        )
    );
    assert_eq!(
        refused.log_index,
        failed.log_index + 2,
        "after a metadata entry"
    );
    let mut other = echo(false, 1);
    other.container_id = 2;
    stream.send(raft(&other, 3, 4)).await;
    let applied = stream.next().await.unwrap();
    assert!(applied.rpc_reply.as_ref().unwrap().success, "{applied:?}");
    assert_eq!(applied.log_index, refused.log_index + 2);
    let mut read = echo(true, 1);
    read.container_id = 1;
    stream.send(raft(&read, 4, 5)).await;
    assert!(stream.next().await.unwrap().rpc_reply.unwrap().success);
    let prom = prom_text(&server).await;
    let sample = |prom: &str, name: &str| -> Option<f64> {
        prom.lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    assert_eq!(
        sample(&prom, "csm_metrics_num_apply_transaction_fails"),
        Some(2.0)
    );
    assert_eq!(
        sample(&prom, "csm_metrics_num_start_transaction_verify_failures"),
        Some(0.0)
    );
    assert!(sample(&prom, "ratis_log_worker_appendEntryCount").is_some());

    // A WriteChunk, to any container: its data is refused, which fails the log. No answer.
    let write = Req {
        write_chunk: Some(WriteChunkRequestProto {
            block_id: DatanodeBlockId {
                container_id: 2,
                local_id: 5,
                block_commit_sequence_id: None,
                replica_index: None,
            },
            chunk_data: Some(ChunkInfo {
                chunk_name: "5_chunk_1".into(),
                len: 16,
                checksum_data: common::proto::ChecksumData {
                    r#type: common::proto::ChecksumType::None as i32,
                    bytes_per_checksum: 16384,
                    checksums: vec![],
                },
                ..Default::default()
            }),
            data: Some(Bytes::from(vec![1u8; 16])),
            ..Default::default()
        }),
        ..req(Type::WriteChunk, 2)
    };
    stream.send(raft(&write, 5, 6)).await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let prom = prom_text(&server).await;
        if sample(&prom, "csm_metrics_num_write_data_fails") == Some(1.0) {
            assert!(
                sample(&prom, "ratis_log_worker_appendEntryCount").is_none(),
                "the closed log's series leave /prom"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failed chunk write"
        );
        tokio::task::yield_now().await;
    }
    assert!(
        tokio::time::timeout(std::time::Duration::ZERO, stream.next())
            .await
            .is_err(),
        "the WriteChunk is never answered"
    );
    // A later write, on a new stream: the closed log's IllegalStateException ends the stream.
    let mut later = Ordered::open(&mut client).await;
    let mut echo2 = echo(false, 1);
    echo2.container_id = 2;
    // (A new call id: call 1 of this client is in the retry cache.)
    later.send(raft(&echo2, 100, 2)).await;
    let status = later.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal);
    assert_eq!(
        status.metadata().get("exception-type").unwrap(),
        "java.lang.IllegalStateException"
    );
    assert_eq!(
        status.message(),
        format!(
            "{}@group-666677778888-SegmentedRaftLog is expected to be opened but it is CLOSED",
            dn_sim::net::server::DEFAULT_DATANODE_UUID
        )
    );
    // Thrown before the call's future exists: Ratis neither times nor counts it as failed.
    let prom = prom_text(&server).await;
    assert_eq!(
        sample(&prom, "ratis_server_numFailedClientWriteOnServer"),
        Some(2.0)
    );
    // Reads are still served.
    let mut reader = Ordered::open(&mut client).await;
    let mut read2 = echo(true, 1);
    read2.container_id = 2;
    reader.send(raft(&read2, 101, 2)).await;
    assert!(reader.next().await.unwrap().rpc_reply.unwrap().success);
}

#[tokio::test]
async fn a_retry_of_a_write_refused_before_the_log_is_processed_anew() {
    let (server, mut client) = server_with(|config| {
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let mut stream = Ordered::open(&mut client).await;
    let close = Req {
        close_container: Some(CloseContainerRequestProto {}),
        ..req(Type::CloseContainer, 3)
    };
    stream.send(raft(&close, 1, 2)).await;
    stream.next().await.unwrap();
    let mut refused = echo(false, 0);
    refused.container_id = 3;
    stream.send(raft(&refused, 2, 3)).await;
    let first = stream.next().await.unwrap();
    assert_eq!(first.log_index, 0, "not logged");
    // Ratis's cache entry of a write refused by startTransaction is a failed one: its retry
    // (same client, same call id) runs startTransaction again rather than getting the reply.
    stream.send(raft(&refused, 2, 4)).await;
    let again = stream.next().await.unwrap();
    assert_eq!(
        state_machine_exception(&again).1,
        "Container 3 in CLOSED state"
    );
    assert_eq!(
        prom_sample(
            &server,
            "csm_metrics_num_container_not_open_verify_failures"
        )
        .await,
        2.0
    );
    // A logged write's retry is answered from the cache: not applied twice.
    stream.send(raft(&echo(false, 0), 3, 5)).await;
    let applied = stream.next().await.unwrap();
    stream.send(raft(&echo(false, 0), 3, 6)).await;
    assert_eq!(stream.next().await.unwrap().log_index, applied.log_index);
    assert_eq!(
        prom_sample(&server, "csm_metrics_num_apply_transaction_ops").await,
        2.0,
        "the CloseContainer and the echo"
    );
}

//! dn-sim stores blocks like a DataNode: containers, FILE_PER_BLOCK writes and reads, PutBlock,
//! small files, capacity, the discard and dir stores and checksum verification, over gRPC against
//! a server on 127.0.0.1:0.

use bytes::Bytes;
use clap::Parser;
use common::proto::container_data_proto::State;
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, CloseContainerRequestProto,
    ContainerCommandRequestProto as Req, ContainerCommandResponseProto as Resp, ContainerDataProto,
    CreateContainerRequestProto, DatanodeBlockId, EchoRequestProto, FinalizeBlockRequestProto,
    GetBlockRequestProto, GetCommittedBlockLengthRequestProto, GetSmallFileRequestProto,
    ListBlockRequestProto, PutBlockRequestProto, PutSmallFileRequestProto, ReadChunkRequestProto,
    ReadChunkVersion, ReadContainerRequestProto, Result as OzoneResult, Type,
    WriteChunkRequestProto,
};
use dn_sim::datanode::store::StoreKind;
use dn_sim::{Config, RunningServer};
use tonic::transport::Channel;

async fn server_with(config: Config) -> (RunningServer, Client<Channel>) {
    let server = dn_sim::start(config).await.unwrap();
    let channel = Channel::from_shared(format!("http://{}", server.local_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = Client::new(channel)
        .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(common::MAX_MESSAGE_SIZE);
    (server, client)
}

async fn default_server() -> (RunningServer, Client<Channel>) {
    let mut config = Config::loopback();
    config.containers = "1-9".parse().unwrap();
    server_with(config).await
}

async fn one(client: &mut Client<Channel>, req: Req) -> Resp {
    let mut inbound = client
        .send(tokio_stream::once(req))
        .await
        .unwrap()
        .into_inner();
    inbound.message().await.unwrap().expect("one response")
}

/// Sends `req` and checks the result code, returning the response.
async fn expect(client: &mut Client<Channel>, req: Req, result: OzoneResult) -> Resp {
    let cmd = req.cmd_type;
    let resp = one(client, req).await;
    assert_eq!(
        OzoneResult::try_from(resp.result),
        Ok(result),
        "{:?} answered {:?}",
        Type::try_from(cmd),
        resp.message
    );
    assert_eq!(resp.cmd_type, cmd);
    if result != OzoneResult::Success {
        assert!(resp.message.is_some(), "errors carry a message");
    }
    resp
}

fn req(cmd: Type, container: i64) -> Req {
    Req {
        cmd_type: cmd as i32,
        container_id: container,
        datanode_uuid: "dn-test".into(),
        trace_id: Some(format!("{}-{container}", cmd.as_str_name())),
        ..Default::default()
    }
}

fn bid(container: i64, local_id: i64) -> DatanodeBlockId {
    DatanodeBlockId {
        container_id: container,
        local_id,
        ..Default::default()
    }
}

fn data(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

/// A ChunkInfo for `data` at `offset`, with CRC32 checksums per `bpc` bytes.
fn chunk(offset: u64, data: &[u8], bpc: u32) -> ChunkInfo {
    ChunkInfo {
        chunk_name: format!("chunk_{offset}"),
        offset,
        len: data.len() as u64,
        // bytesPerChecksum 0 cannot be computed; hostile tests send it with no checksums.
        checksum_data: common::checksum::compute(ChecksumType::Crc32, bpc, data).unwrap_or(
            common::proto::ChecksumData {
                r#type: ChecksumType::Crc32 as i32,
                bytes_per_checksum: bpc,
                checksums: Vec::new(),
            },
        ),
        ..Default::default()
    }
}

fn write_chunk(container: i64, local_id: i64, offset: u64, data: Bytes) -> Req {
    let mut r = req(Type::WriteChunk, container);
    r.write_chunk = Some(WriteChunkRequestProto {
        block_id: bid(container, local_id),
        chunk_data: Some(chunk(offset, &data, 16 << 10)),
        data: Some(data),
        ..Default::default()
    });
    r
}

fn block_data(container: i64, local_id: i64, chunks: Vec<ChunkInfo>) -> BlockData {
    BlockData {
        block_id: bid(container, local_id),
        chunks,
        ..Default::default()
    }
}

fn put_block(container: i64, block: BlockData) -> Req {
    let mut r = req(Type::PutBlock, container);
    r.put_block = Some(PutBlockRequestProto {
        block_data: block,
        ..Default::default()
    });
    r
}

fn get_block(container: i64, local_id: i64) -> Req {
    let mut r = req(Type::GetBlock, container);
    r.get_block = Some(GetBlockRequestProto {
        block_id: bid(container, local_id),
        ..Default::default()
    });
    r
}

fn read_chunk(container: i64, local_id: i64, info: ChunkInfo, v1: bool) -> Req {
    let mut r = req(Type::ReadChunk, container);
    r.read_chunk = Some(ReadChunkRequestProto {
        block_id: bid(container, local_id),
        chunk_data: info,
        read_chunk_version: v1.then_some(ReadChunkVersion::V1 as i32),
    });
    r
}

fn read_container(container: i64) -> Req {
    let mut r = req(Type::ReadContainer, container);
    r.read_container = Some(ReadContainerRequestProto {});
    r
}

async fn container_data(client: &mut Client<Channel>, container: i64) -> ContainerDataProto {
    let resp = expect(client, read_container(container), OzoneResult::Success).await;
    resp.read_container.unwrap().container_data.unwrap()
}

async fn state(client: &mut Client<Channel>, container: i64) -> State {
    State::try_from(container_data(client, container).await.state.unwrap()).unwrap()
}

fn v0_data(resp: Resp) -> Bytes {
    match resp.read_chunk.unwrap().response_data {
        Some(ResponseData::Data(d)) => d,
        other => panic!("expected V0 data, got {other:?}"),
    }
}

fn v1_buffers(resp: Resp) -> Vec<Bytes> {
    match resp.read_chunk.unwrap().response_data {
        Some(ResponseData::DataBuffers(b)) => b.buffers,
        other => panic!("expected V1 dataBuffers, got {other:?}"),
    }
}

#[tokio::test]
async fn containers_are_created_read_and_closed_like_a_datanode() {
    let (server, mut c) = default_server().await;
    let data1 = container_data(&mut c, 1).await;
    assert_eq!(data1.container_id, 1);
    assert_eq!(data1.state, Some(State::Open as i32));
    assert_eq!(data1.container_type, Some(1)); // KeyValueContainer
    // 2.1+: no bytesUsed while 0; never a size; always an absolute containerPath.
    assert_eq!((data1.bytes_used, data1.block_count), (None, Some(0)));
    assert_eq!(data1.size, None);
    assert!(data1.container_path.unwrap().starts_with('/'));

    let resp = expect(&mut c, read_container(99), OzoneResult::ContainerNotFound).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("ContainerID 99 does not exist")
    );
    let mut create = req(Type::CreateContainer, 99);
    create.create_container = Some(CreateContainerRequestProto::default());
    expect(&mut c, create.clone(), OzoneResult::Success).await;
    expect(&mut c, create, OzoneResult::ContainerAlreadyExists).await;
    assert_eq!(state(&mut c, 99).await, State::Open);
    expect(
        &mut c,
        req(Type::CreateContainer, 98),
        OzoneResult::MalformedRequest,
    )
    .await;

    let mut close = req(Type::CloseContainer, 99);
    close.close_container = Some(CloseContainerRequestProto {});
    expect(&mut c, close.clone(), OzoneResult::Success).await;
    expect(&mut c, close, OzoneResult::Success).await; // idempotent
    assert_eq!(state(&mut c, 99).await, State::Closed);
    let resp = expect(
        &mut c,
        write_chunk(99, 1, 0, data(10, 1)),
        OzoneResult::ClosedContainerIo,
    )
    .await;
    assert!(resp.message.unwrap().contains("CLOSED"));
    expect(
        &mut c,
        put_block(99, block_data(99, 1, vec![])),
        OzoneResult::ClosedContainerIo,
    )
    .await;
    assert_eq!(
        state(&mut c, 99).await,
        State::Closed,
        "CLOSED_CONTAINER_IO does not mark it"
    );

    // A container created UNHEALTHY refuses writes and closing.
    let mut create = req(Type::CreateContainer, 97);
    create.create_container = Some(CreateContainerRequestProto {
        state: Some(State::Unhealthy as i32),
        ..Default::default()
    });
    expect(&mut c, create, OzoneResult::Success).await;
    expect(
        &mut c,
        write_chunk(97, 1, 0, data(10, 1)),
        OzoneResult::ContainerUnhealthy,
    )
    .await;
    let mut close = req(Type::CloseContainer, 97);
    close.close_container = Some(CloseContainerRequestProto {});
    expect(&mut c, close, OzoneResult::ContainerUnhealthy).await;
    server.shutdown().await;
}

#[tokio::test]
async fn writes_auto_create_containers_whatever_container_auto_create_says() {
    let (server, mut c) = default_server().await;
    expect(
        &mut c,
        write_chunk(50, 1, 0, data(100, 1)),
        OzoneResult::Success,
    )
    .await;
    assert_eq!(container_data(&mut c, 50).await.bytes_used, Some(100));
    expect(
        &mut c,
        put_block(51, block_data(51, 1, vec![])),
        OzoneResult::Success,
    )
    .await;
    let mut small = req(Type::PutSmallFile, 52);
    let d = data(10, 2);
    small.put_small_file = Some(PutSmallFileRequestProto {
        block: PutBlockRequestProto {
            block_data: block_data(52, 1, vec![]),
            ..Default::default()
        },
        chunk_info: chunk(0, &d, 16 << 10),
        data: d,
    });
    expect(&mut c, small, OzoneResult::Success).await;
    for id in [50, 51, 52] {
        assert_eq!(state(&mut c, id).await, State::Open);
    }

    let mut no_create = write_chunk(53, 1, 0, data(10, 1));
    no_create
        .write_chunk
        .as_mut()
        .unwrap()
        .container_auto_create = Some(false);
    // No release 2.0–2.2 has the field: it is ignored.
    expect(&mut c, no_create, OzoneResult::Success).await;
    let mut no_create = put_block(54, block_data(54, 1, vec![]));
    no_create.put_block.as_mut().unwrap().container_auto_create = Some(false);
    expect(&mut c, no_create, OzoneResult::Success).await;
    assert_eq!(container_data(&mut c, 53).await.bytes_used, Some(10));
    // Reads and other commands never create a container.
    expect(&mut c, get_block(55, 1), OzoneResult::ContainerNotFound).await;
    expect(&mut c, read_container(55), OzoneResult::ContainerNotFound).await;
    // Echo goes through the same store.
    let mut echo = req(Type::Echo, 50);
    echo.echo = Some(EchoRequestProto {
        payload_size_resp: Some(3),
        read_only: Some(true),
        ..Default::default()
    });
    expect(&mut c, echo.clone(), OzoneResult::Success).await;
    echo.container_id = 55;
    expect(&mut c, echo, OzoneResult::ContainerNotFound).await;
    server.shutdown().await;
}

#[tokio::test]
async fn chunk_writes_follow_file_per_block_rules() {
    let (server, mut c) = default_server().await;
    let a = data(1000, 1);
    expect(
        &mut c,
        write_chunk(1, 7, 0, a.clone()),
        OzoneResult::Success,
    )
    .await;
    expect(
        &mut c,
        write_chunk(1, 7, 1000, data(500, 2)),
        OzoneResult::Success,
    )
    .await; // append
    expect(
        &mut c,
        write_chunk(1, 7, 100, data(50, 3)),
        OzoneResult::Success,
    )
    .await; // overwrite
    let mut model = [a.to_vec(), data(500, 2).to_vec()].concat();
    model[100..150].copy_from_slice(&data(50, 3));
    let info = chunk(0, &model, 16 << 10);
    let got = v0_data(expect(&mut c, read_chunk(1, 7, info, false), OzoneResult::Success).await);
    assert_eq!(got, model);
    assert_eq!(container_data(&mut c, 1).await.bytes_used, Some(1500));

    // len 0 is a no-op, even past the end.
    let mut empty = write_chunk(1, 7, 99_999, Bytes::new());
    empty.write_chunk.as_mut().unwrap().data = Some(data(3, 0));
    expect(&mut c, empty, OzoneResult::Success).await;
    // WriteChunk without chunkData is a zero-length chunk in the DataNode too.
    let mut no_info = write_chunk(1, 7, 0, data(3, 0));
    no_info.write_chunk.as_mut().unwrap().chunk_data = None;
    expect(&mut c, no_info, OzoneResult::Success).await;
    assert_eq!(state(&mut c, 1).await, State::Open);

    // A gap: CHUNK_FILE_INCONSISTENCY, and a failed write marks the container UNHEALTHY.
    let resp = expect(
        &mut c,
        write_chunk(2, 7, 0, data(10, 1)),
        OzoneResult::Success,
    )
    .await;
    assert!(resp.write_chunk.unwrap().committed_block_length.is_none());
    let resp = expect(
        &mut c,
        write_chunk(2, 7, 11, data(10, 1)),
        OzoneResult::ChunkFileInconsistency,
    )
    .await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Chunk offset 11 does not match length 10 of blockFile 7.block")
    );
    assert_eq!(state(&mut c, 2).await, State::Unhealthy);
    expect(
        &mut c,
        write_chunk(2, 7, 10, data(10, 1)),
        OzoneResult::ContainerUnhealthy,
    )
    .await;
    let info = chunk(0, &data(10, 1), 16 << 10);
    expect(&mut c, read_chunk(2, 7, info, false), OzoneResult::Success).await; // reads still work

    // Data shorter than len: INVALID_WRITE_SIZE, nothing stored.
    let mut short = write_chunk(3, 7, 0, data(100, 1));
    short.write_chunk.as_mut().unwrap().data = Some(data(99, 1));
    let resp = expect(&mut c, short, OzoneResult::InvalidWriteSize).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Unexpected buffer size. expected: 100, actual: 99")
    );
    assert_eq!(container_data(&mut c, 3).await.bytes_used, None);
    assert_eq!(state(&mut c, 3).await, State::Unhealthy);
    server.shutdown().await;
}

#[tokio::test]
async fn payloads_that_do_not_match_the_type_are_malformed() {
    let (server, mut c) = default_server().await;
    for cmd in [
        Type::ReadContainer,
        Type::CloseContainer,
        Type::PutBlock,
        Type::GetBlock,
        Type::ListBlock,
        Type::ReadChunk,
        Type::WriteChunk,
        Type::PutSmallFile,
        Type::GetSmallFile,
        Type::GetCommittedBlockLength,
        Type::FinalizeBlock,
    ] {
        // The payload of another type does not count.
        let mut r = req(cmd, 4);
        r.echo = Some(EchoRequestProto::default());
        let resp = expect(&mut c, r, OzoneResult::MalformedRequest).await;
        assert_eq!(
            resp.message.as_deref(),
            Some("Cmd type does not match the payload.")
        );
    }
    // MALFORMED_REQUEST does not mark the container.
    assert_eq!(state(&mut c, 4).await, State::Open);
    // A payload-less write to an absent container creates it, then is malformed, as in the DN.
    expect(
        &mut c,
        req(Type::WriteChunk, 60),
        OzoneResult::MalformedRequest,
    )
    .await;
    assert_eq!(state(&mut c, 60).await, State::Open);
    server.shutdown().await;
}

#[tokio::test]
async fn put_block_get_block_list_and_finalize() {
    let (server, mut c) = default_server().await;
    let d = data(3000, 5);
    expect(
        &mut c,
        write_chunk(1, 10, 0, d.slice(..2000)),
        OzoneResult::Success,
    )
    .await;
    expect(
        &mut c,
        write_chunk(1, 10, 2000, d.slice(2000..)),
        OzoneResult::Success,
    )
    .await;
    let resp = expect(&mut c, get_block(1, 10), OzoneResult::NoSuchBlock).await;
    assert!(
        resp.message
            .unwrap()
            .starts_with("Unable to find the block.")
    );
    let chunks = vec![chunk(0, &d[..2000], 1024), chunk(2000, &d[2000..], 1024)];

    let mut bad = block_data(1, 10, chunks.clone());
    bad.size = Some(2999);
    let resp = expect(&mut c, put_block(1, bad), OzoneResult::MalformedRequest).await;
    assert_eq!(resp.message.as_deref(), Some("Malformed PutBlock request"));
    expect(&mut c, get_block(1, 10), OzoneResult::NoSuchBlock).await;

    // eof absent = end of block; the response carries committedBlockLength.
    let resp = expect(
        &mut c,
        put_block(1, block_data(1, 10, chunks.clone())),
        OzoneResult::Success,
    )
    .await;
    let committed = resp.put_block.unwrap().committed_block_length;
    assert_eq!(committed.block_length, 3000);
    assert_eq!(committed.block_id.local_id, 10);
    assert_eq!(committed.block_id.block_commit_sequence_id, Some(0));
    let stored = expect(&mut c, get_block(1, 10), OzoneResult::Success)
        .await
        .get_block
        .unwrap()
        .block_data;
    assert_eq!(stored.size, Some(3000));
    assert_eq!(
        stored.chunks, chunks,
        "chunk infos and their checksums are kept"
    );

    let mut gcbl = req(Type::GetCommittedBlockLength, 1);
    gcbl.get_committed_block_length = Some(GetCommittedBlockLengthRequestProto {
        block_id: bid(1, 10),
    });
    let resp = expect(&mut c, gcbl.clone(), OzoneResult::Success).await;
    assert_eq!(resp.get_committed_block_length.unwrap().block_length, 3000);
    gcbl.get_committed_block_length
        .as_mut()
        .unwrap()
        .block_id
        .local_id = 11;
    expect(&mut c, gcbl, OzoneResult::NoSuchBlock).await;

    // bcsId: 0 on the gRPC path, so any higher one is unknown.
    let mut later = get_block(1, 10);
    later
        .get_block
        .as_mut()
        .unwrap()
        .block_id
        .block_commit_sequence_id = Some(3);
    expect(&mut c, later, OzoneResult::UnknownBcsid).await;

    // An end-of-block PutBlock naming chunks of a block never written.
    let resp = expect(
        &mut c,
        put_block(5, block_data(5, 1, chunks.clone())),
        OzoneResult::UnableToFindChunk,
    )
    .await;
    assert!(resp.message.unwrap().contains("5/chunks/1.block"));

    for local in [30, 20] {
        expect(
            &mut c,
            put_block(1, block_data(1, local, vec![])),
            OzoneResult::Success,
        )
        .await;
    }
    let mut list = req(Type::ListBlock, 1);
    // A startLocalID that is not a block: an empty list.
    list.list_block = Some(ListBlockRequestProto {
        start_local_id: Some(11),
        count: 5,
    });
    let blocks = expect(&mut c, list.clone(), OzoneResult::Success)
        .await
        .list_block
        .unwrap()
        .block_data;
    assert!(blocks.is_empty());
    list.list_block = Some(ListBlockRequestProto {
        start_local_id: Some(20),
        count: 5,
    });
    let blocks = expect(&mut c, list.clone(), OzoneResult::Success)
        .await
        .list_block
        .unwrap()
        .block_data;
    let ids: Vec<i64> = blocks.iter().map(|b| b.block_id.local_id).collect();
    assert_eq!(ids, [20, 30]);
    list.list_block = Some(ListBlockRequestProto {
        start_local_id: None,
        count: 2,
    });
    let blocks = expect(&mut c, list.clone(), OzoneResult::Success)
        .await
        .list_block
        .unwrap()
        .block_data;
    assert_eq!(
        blocks
            .iter()
            .map(|b| b.block_id.local_id)
            .collect::<Vec<_>>(),
        [10, 20]
    );
    assert_eq!(container_data(&mut c, 1).await.block_count, Some(3));

    let mut finalize = req(Type::FinalizeBlock, 1);
    finalize.finalize_block = Some(FinalizeBlockRequestProto {
        block_id: bid(1, 10),
    });
    let resp = expect(&mut c, finalize, OzoneResult::Success).await;
    assert_eq!(resp.finalize_block.unwrap().block_data, stored);
    server.shutdown().await;
}

#[tokio::test]
async fn a_piggybacked_put_block_answers_the_committed_length() {
    let (server, mut c) = default_server().await;
    let d = data(4096, 9);
    let mut w = write_chunk(1, 3, 0, d.clone());
    let info = w.write_chunk.as_ref().unwrap().chunk_data.clone().unwrap();
    w.write_chunk.as_mut().unwrap().block = Some(PutBlockRequestProto {
        block_data: block_data(1, 3, vec![info.clone()]),
        eof: Some(true),
        ..Default::default()
    });
    let resp = expect(&mut c, w, OzoneResult::Success).await;
    let committed = resp.write_chunk.unwrap().committed_block_length.unwrap();
    assert_eq!(
        (committed.block_id.local_id, committed.block_length),
        (3, 4096)
    );
    let stored = expect(&mut c, get_block(1, 3), OzoneResult::Success)
        .await
        .get_block
        .unwrap()
        .block_data;
    assert_eq!(stored.chunks, vec![info]);

    // A malformed piggybacked PutBlock fails after the chunk was written, and marks the
    // container.
    let mut w = write_chunk(1, 4, 0, d.clone());
    w.write_chunk.as_mut().unwrap().block = Some(PutBlockRequestProto {
        block_data: BlockData {
            size: Some(1),
            ..block_data(1, 4, vec![])
        },
        ..Default::default()
    });
    let resp = expect(&mut c, w, OzoneResult::IoException).await;
    assert_eq!(resp.message.as_deref(), Some("Write Chunk failed"));
    let info = chunk(0, &d, 16 << 10);
    expect(&mut c, read_chunk(1, 4, info, false), OzoneResult::Success).await;
    assert_eq!(state(&mut c, 1).await, State::Unhealthy);
    server.shutdown().await;
}

#[tokio::test]
async fn read_chunk_v0_and_v1_and_its_errors() {
    let (server, mut c) = default_server().await;
    let d = data(40 << 10, 3);
    expect(
        &mut c,
        write_chunk(1, 1, 0, d.clone()),
        OzoneResult::Success,
    )
    .await;
    let info = chunk(0, &d, 16 << 10);

    let resp = expect(
        &mut c,
        read_chunk(1, 1, info.clone(), false),
        OzoneResult::Success,
    )
    .await;
    let echoed = resp.read_chunk.clone().unwrap();
    assert_eq!(
        (echoed.block_id, echoed.chunk_data),
        (bid(1, 1), info.clone())
    );
    assert_eq!(v0_data(resp), d);

    let buffers = v1_buffers(
        expect(
            &mut c,
            read_chunk(1, 1, info.clone(), true),
            OzoneResult::Success,
        )
        .await,
    );
    assert_eq!(
        buffers.iter().map(Bytes::len).collect::<Vec<_>>(),
        [16 << 10, 16 << 10, 8 << 10]
    );
    assert_eq!(buffers.concat(), d);

    // Checksum type NONE: 1 MiB pieces.
    let big = data(3 << 20, 4);
    expect(
        &mut c,
        write_chunk(1, 2, 0, big.clone()),
        OzoneResult::Success,
    )
    .await;
    let mut none = chunk(0, &big, 16 << 10);
    none.checksum_data = ChecksumData {
        r#type: ChecksumType::None as i32,
        bytes_per_checksum: 16 << 10,
        checksums: vec![],
    };
    let buffers =
        v1_buffers(expect(&mut c, read_chunk(1, 2, none, true), OzoneResult::Success).await);
    assert_eq!(
        buffers.iter().map(Bytes::len).collect::<Vec<_>>(),
        [1 << 20; 3]
    );
    // bytesPerChecksum 0: one buffer.
    let mut zero = info.clone();
    zero.checksum_data.bytes_per_checksum = 0;
    let buffers =
        v1_buffers(expect(&mut c, read_chunk(1, 1, zero, true), OzoneResult::Success).await);
    assert_eq!(buffers.len(), 1);

    let mut past = info.clone();
    past.offset = 30 << 10;
    let resp = expect(
        &mut c,
        read_chunk(1, 1, past, false),
        OzoneResult::ContainerInternalError,
    )
    .await;
    assert!(resp.message.unwrap().starts_with("Unexpected read size"));
    let mut huge = info.clone();
    huge.len = (32 << 20) + 1;
    expect(
        &mut c,
        read_chunk(1, 1, huge, false),
        OzoneResult::UnsupportedRequest,
    )
    .await;
    expect(
        &mut c,
        read_chunk(1, 99, info.clone(), true),
        OzoneResult::UnableToFindChunk,
    )
    .await;
    expect(
        &mut c,
        read_chunk(42, 1, info, true),
        OzoneResult::ContainerNotFound,
    )
    .await;
    // Failed reads do not mark the container.
    assert_eq!(state(&mut c, 1).await, State::Open);
    server.shutdown().await;
}

#[tokio::test]
async fn small_files_are_written_and_read_in_one_call() {
    let (server, mut c) = default_server().await;
    let d = data(5000, 6);
    let info = chunk(0, &d, 2048);
    let mut put = req(Type::PutSmallFile, 1);
    put.put_small_file = Some(PutSmallFileRequestProto {
        block: PutBlockRequestProto {
            block_data: block_data(1, 77, vec![]),
            ..Default::default()
        },
        chunk_info: info.clone(),
        data: d.clone(),
    });
    let resp = expect(&mut c, put, OzoneResult::Success).await;
    assert_eq!(
        resp.put_small_file
            .unwrap()
            .committed_block_length
            .block_length,
        5000
    );
    let stored = expect(&mut c, get_block(1, 77), OzoneResult::Success)
        .await
        .get_block
        .unwrap()
        .block_data;
    assert_eq!(stored.chunks, vec![info.clone()]);

    let get = |v1: bool, local_id: i64| {
        let mut r = req(Type::GetSmallFile, 1);
        r.get_small_file = Some(GetSmallFileRequestProto {
            block: GetBlockRequestProto {
                block_id: bid(1, local_id),
                ..Default::default()
            },
            read_chunk_version: v1.then_some(ReadChunkVersion::V1 as i32),
        });
        r
    };
    let resp = expect(&mut c, get(false, 77), OzoneResult::Success).await;
    let small = resp.get_small_file.unwrap().data;
    assert_eq!((small.block_id, small.chunk_data), (bid(1, 77), info));
    assert_eq!(small.response_data, Some(ResponseData::Data(d.clone())));
    let resp = expect(&mut c, get(true, 77), OzoneResult::Success).await;
    match resp.get_small_file.unwrap().data.response_data {
        Some(ResponseData::DataBuffers(b)) => {
            assert_eq!(
                b.buffers.iter().map(Bytes::len).collect::<Vec<_>>(),
                [2048, 2048, 904]
            );
            assert_eq!(b.buffers.concat(), d);
        }
        other => panic!("{other:?}"),
    }
    expect(&mut c, get(false, 78), OzoneResult::NoSuchBlock).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_full_store_answers_disk_out_of_space() {
    let mut config = Config::loopback();
    config.capacity = 100 << 10;
    let (server, mut c) = server_with(config).await;
    for i in 0..3u64 {
        expect(
            &mut c,
            write_chunk(1, 1, i * (32 << 10), data(32 << 10, 1)),
            OzoneResult::Success,
        )
        .await;
    }
    let resp = expect(
        &mut c,
        write_chunk(1, 1, 96 << 10, data(8 << 10, 1)),
        OzoneResult::DiskOutOfSpace,
    )
    .await;
    assert!(resp.message.unwrap().contains("--capacity"));
    // Nothing stored, the container stays OPEN, the rest still fits.
    assert_eq!(container_data(&mut c, 1).await.bytes_used, Some(96 << 10));
    assert_eq!(state(&mut c, 1).await, State::Open);
    expect(
        &mut c,
        write_chunk(1, 2, 0, data(4 << 10, 1)),
        OzoneResult::Success,
    )
    .await;
    // Full: every data write is refused before the handler, PutBlock included.
    expect(
        &mut c,
        write_chunk(1, 3, 0, data(1, 1)),
        OzoneResult::DiskOutOfSpace,
    )
    .await;
    expect(
        &mut c,
        put_block(1, block_data(1, 1, vec![])),
        OzoneResult::DiskOutOfSpace,
    )
    .await;
    // Reads go on.
    let info = chunk(0, &data(4 << 10, 1), 16 << 10);
    expect(&mut c, read_chunk(1, 2, info, false), OzoneResult::Success).await;
    server.shutdown().await;
}

#[tokio::test]
async fn discard_keeps_metadata_and_refuses_to_read_data() {
    let mut config = Config::loopback();
    config.store = StoreKind::Discard;
    config.capacity = 1;
    let (server, mut c) = server_with(config).await;
    let d = data(1 << 20, 2);
    let mut chunks = Vec::new();
    for i in 0..4u64 {
        chunks.push(chunk(i << 20, &d, 16 << 10));
        expect(
            &mut c,
            write_chunk(1, 1, i << 20, d.clone()),
            OzoneResult::Success,
        )
        .await;
    }
    expect(
        &mut c,
        write_chunk(1, 1, (4 << 20) + 1, d.clone()),
        OzoneResult::ChunkFileInconsistency,
    )
    .await;
    let resp = expect(
        &mut c,
        put_block(2, block_data(2, 1, vec![])),
        OzoneResult::Success,
    )
    .await;
    assert_eq!(
        resp.put_block.unwrap().committed_block_length.block_length,
        0
    );
    assert_eq!(container_data(&mut c, 1).await.bytes_used, Some(4 << 20));
    expect(
        &mut c,
        write_chunk(3, 1, 0, d.clone()),
        OzoneResult::Success,
    )
    .await;
    let resp = expect(
        &mut c,
        put_block(3, block_data(3, 1, vec![chunk(0, &d, 16 << 10)])),
        OzoneResult::Success,
    )
    .await;
    assert_eq!(
        resp.put_block.unwrap().committed_block_length.block_length,
        1 << 20
    );
    let stored = expect(&mut c, get_block(3, 1), OzoneResult::Success)
        .await
        .get_block
        .unwrap()
        .block_data;
    assert_eq!(
        stored.chunks[0].checksum_data.checksums.len(),
        64,
        "checksums are kept"
    );
    let resp = expect(
        &mut c,
        read_chunk(3, 1, chunk(0, &d, 16 << 10), true),
        OzoneResult::UnableToFindChunk,
    )
    .await;
    assert!(
        resp.message
            .unwrap()
            .contains("discarded by `--store discard`")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn dir_store_writes_block_files_in_the_datanode_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.store = StoreKind::Dir(tmp.path().join("hdds"));
    let (server, mut c) = server_with(config).await;
    let a = data(70_000, 1);
    let b = data(30_000, 2);
    expect(
        &mut c,
        write_chunk(1, 104_857_600_001, 0, a.clone()),
        OzoneResult::Success,
    )
    .await;
    expect(
        &mut c,
        write_chunk(1, 104_857_600_001, 70_000, b.clone()),
        OzoneResult::Success,
    )
    .await;
    let file = tmp.path().join("hdds/1/chunks/104857600001.block");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        [a.to_vec(), b.to_vec()].concat()
    );
    let info = chunk(60_000, &data(20_000, 0), 4096);
    let buffers = v1_buffers(
        expect(
            &mut c,
            read_chunk(1, 104_857_600_001, info, true),
            OzoneResult::Success,
        )
        .await,
    );
    assert_eq!(buffers.len(), 5);
    assert_eq!(buffers.concat(), [&a[60_000..], &b[..10_000]].concat());
    let path = container_data(&mut c, 1).await.container_path.unwrap();
    assert_eq!(std::path::Path::new(&path), tmp.path().join("hdds/1"));
    server.shutdown().await;
}

#[tokio::test]
async fn verified_checksum_mismatch_is_io_exception_and_stores_nothing() {
    let mut config = Config::loopback();
    config.verify_checksums = true;
    let (server, mut c) = server_with(config).await;
    let d = data(10_000, 1);
    expect(
        &mut c,
        write_chunk(1, 1, 0, d.clone()),
        OzoneResult::Success,
    )
    .await;
    let mut bad = write_chunk(1, 1, 10_000, d.clone());
    bad.write_chunk.as_mut().unwrap().data = Some(data(10_000, 2));
    let resp = expect(&mut c, bad, OzoneResult::IoException).await;
    assert!(
        resp.message
            .unwrap()
            .to_lowercase()
            .contains("checksum mismatch")
    );
    assert_eq!(container_data(&mut c, 1).await.bytes_used, Some(10_000));
    let past = chunk(10_000, &d, 16 << 10);
    expect(
        &mut c,
        read_chunk(1, 1, past, false),
        OzoneResult::ContainerInternalError,
    )
    .await;
    // IO_EXCEPTION is a failed write: the DataNode marks the container UNHEALTHY.
    assert_eq!(state(&mut c, 1).await, State::Unhealthy);

    // Wrong checksum count, bytesPerChecksum 0 and unknown types fail only when verifying.
    let mut wrong = write_chunk(2, 1, 0, d.clone());
    wrong
        .write_chunk
        .as_mut()
        .unwrap()
        .chunk_data
        .as_mut()
        .unwrap()
        .checksum_data
        .checksums
        .pop();
    expect(&mut c, wrong.clone(), OzoneResult::IoException).await;
    let mut zero = write_chunk(3, 1, 0, d.clone());
    zero.write_chunk
        .as_mut()
        .unwrap()
        .chunk_data
        .as_mut()
        .unwrap()
        .checksum_data
        .bytes_per_checksum = 0;
    expect(&mut c, zero.clone(), OzoneResult::IoException).await;
    // PutSmallFile is verified too.
    let mut small = req(Type::PutSmallFile, 4);
    let mut info = chunk(0, &d, 1024);
    info.checksum_data.checksums[3] = Bytes::from_static(&[0, 0, 0, 0]);
    small.put_small_file = Some(PutSmallFileRequestProto {
        block: PutBlockRequestProto {
            block_data: block_data(4, 1, vec![]),
            ..Default::default()
        },
        chunk_info: info,
        data: d.clone(),
    });
    expect(&mut c, small.clone(), OzoneResult::IoException).await;
    expect(&mut c, get_block(4, 1), OzoneResult::NoSuchBlock).await;
    server.shutdown().await;

    // Verification is off by default: the DataNode stores whatever it receives.
    let (server, mut c) = default_server().await;
    for (r, container) in [(wrong, 2), (zero, 3), (small, 4)] {
        expect(&mut c, r, OzoneResult::Success).await;
        assert_eq!(state(&mut c, container).await, State::Open);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn unserved_and_delete_types() {
    let (server, mut c) = default_server().await;
    let resp = expect(
        &mut c,
        req(Type::ListChunk, 1),
        OzoneResult::UnsupportedRequest,
    )
    .await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Server does not support this command yet.")
    );
    expect(
        &mut c,
        req(Type::ReadBlock, 1),
        OzoneResult::MalformedRequest,
    )
    .await;
    expect(
        &mut c,
        req(Type::ListChunk, 77),
        OzoneResult::ContainerNotFound,
    )
    .await;
    assert_eq!(state(&mut c, 1).await, State::Open);
    // DeleteBlock throws in the DataNode's handler: an internal error, and a failed write.
    let resp = expect(
        &mut c,
        req(Type::DeleteBlock, 2),
        OzoneResult::ContainerInternalError,
    )
    .await;
    assert!(resp.message.unwrap().contains("BlockDeletingService"));
    assert_eq!(state(&mut c, 2).await, State::Unhealthy);
    server.shutdown().await;
}

#[tokio::test]
async fn many_streams_write_different_blocks_concurrently() {
    let (server, client) = default_server().await;
    let mut tasks = Vec::new();
    for t in 0..16i64 {
        let mut c = client.clone();
        tasks.push(tokio::spawn(async move {
            let container = 1 + t % 3;
            for i in 0..20u64 {
                let d = data(8 << 10, (t as u8).wrapping_add(i as u8));
                expect(
                    &mut c,
                    write_chunk(container, 100 + t, i * (8 << 10), d),
                    OzoneResult::Success,
                )
                .await;
            }
            let chunks: Vec<ChunkInfo> = (0..20u64)
                .map(|i| {
                    chunk(
                        i * (8 << 10),
                        &data(8 << 10, (t as u8).wrapping_add(i as u8)),
                        16 << 10,
                    )
                })
                .collect();
            expect(
                &mut c,
                put_block(container, block_data(container, 100 + t, chunks)),
                OzoneResult::Success,
            )
            .await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut c = client;
    for t in 0..16i64 {
        let container = 1 + t % 3;
        let want: Vec<u8> = (0..20u64)
            .flat_map(|i| data(8 << 10, (t as u8).wrapping_add(i as u8)).to_vec())
            .collect();
        let info = chunk(0, &want, 16 << 10);
        let got = v0_data(
            expect(
                &mut c,
                read_chunk(container, 100 + t, info, false),
                OzoneResult::Success,
            )
            .await,
        );
        assert_eq!(got, want, "block {t}");
        let len = expect(&mut c, get_block(container, 100 + t), OzoneResult::Success).await;
        assert_eq!(len.get_block.unwrap().block_data.size, Some(160 << 10));
    }
    server.shutdown().await;
}

#[tokio::test]
async fn hostile_requests_get_answers_and_the_server_goes_on() {
    let (server, mut c) = default_server().await;
    let mut cases = Vec::new();
    // Absurd offsets and lengths.
    let mut w = write_chunk(1, 1, u64::MAX - 1, data(10, 0));
    w.write_chunk
        .as_mut()
        .unwrap()
        .chunk_data
        .as_mut()
        .unwrap()
        .len = u64::MAX;
    cases.push(w);
    let mut w = write_chunk(1, -5, 0, data(10, 0));
    w.write_chunk
        .as_mut()
        .unwrap()
        .chunk_data
        .as_mut()
        .unwrap()
        .len = u64::MAX;
    cases.push(w);
    let mut info = chunk(u64::MAX, &[], 0);
    info.len = u64::MAX;
    cases.push(read_chunk(1, 1, info.clone(), true));
    info.len = 10;
    cases.push(read_chunk(1, i64::MIN, info, false));
    let mut p = put_block(1, block_data(1, 1, vec![chunk(0, &[], 1); 3]));
    p.put_block.as_mut().unwrap().block_data.chunks[0].len = u64::MAX;
    cases.push(p);
    let mut list = req(Type::ListBlock, 1);
    list.list_block = Some(ListBlockRequestProto {
        start_local_id: Some(i64::MIN),
        count: u32::MAX,
    });
    cases.push(list);
    for r in cases {
        let resp = one(&mut c, r).await;
        assert!(OzoneResult::try_from(resp.result).is_ok());
    }
    // An unknown checksum type is an unknown value of a required enum: like grpc-java, the
    // parser refuses the message before any handler sees it (UNKNOWN on the wire).
    let mut bad_type = write_chunk(1, 2, 0, data(10, 0));
    bad_type
        .write_chunk
        .as_mut()
        .unwrap()
        .chunk_data
        .as_mut()
        .unwrap()
        .checksum_data
        .r#type = 77;
    let mut inbound = c
        .send(tokio_stream::once(bad_type))
        .await
        .unwrap()
        .into_inner();
    let status = inbound.message().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown);
    let mut echo = req(Type::Echo, 9);
    echo.echo = Some(EchoRequestProto {
        read_only: Some(true),
        ..Default::default()
    });
    expect(&mut c, echo, OzoneResult::Success).await;
    server.shutdown().await;
}

#[test]
fn flags_resolve_into_the_config() {
    let args = dn_sim::cli::Args::try_parse_from([
        "dn-sim",
        "--store",
        "dir:/tmp/dn",
        "--capacity",
        "2GB",
        "--verify-checksums",
    ])
    .unwrap();
    let config = args.config().unwrap();
    assert_eq!(config.store, StoreKind::Dir("/tmp/dn".into()));
    assert_eq!(config.capacity, 2 << 30);
    assert!(config.verify_checksums);
    let defaults = dn_sim::cli::Args::try_parse_from(["dn-sim"])
        .unwrap()
        .config()
        .unwrap();
    assert_eq!(defaults.store, StoreKind::Memory);
    assert_eq!(defaults.capacity, 1 << 30);
    assert!(!defaults.verify_checksums);
    for bad in [["--store", "disk"], ["--capacity", "lots"]] {
        assert!(dn_sim::cli::Args::try_parse_from(["dn-sim", bad[0], bad[1]]).is_err());
    }
}

#[tokio::test]
async fn chunk_bytes_are_counted_under_the_datanode_metric_names() {
    let (server, mut c) = default_server().await;
    let d = data(5000, 3);
    expect(
        &mut c,
        write_chunk(1, 9, 0, d.clone()),
        OzoneResult::Success,
    )
    .await;
    let prom = server.metrics().render_prom(&server.admission().pool);
    let line = prom
        .lines()
        .find(|l| l.starts_with("storage_container_metrics_bytes_write_chunk{"))
        .unwrap();
    assert!(line.ends_with(" 5000"), "{line}");
}

async fn versioned_server(version: &str) -> (RunningServer, Client<Channel>) {
    let mut config = Config::loopback();
    config.containers = "1-9".parse().unwrap();
    config.ozone_version = version.parse().unwrap();
    config.datanode_uuid = "dn-test".into();
    server_with(config).await
}

/// One request; the response or the gRPC status that failed the call.
async fn call(client: &mut Client<Channel>, req: Req) -> Result<Resp, tonic::Status> {
    let mut inbound = client.send(tokio_stream::once(req)).await?.into_inner();
    Ok(inbound.message().await?.expect("one response"))
}

fn delete_container(container: i64, force: bool) -> Req {
    let mut r = req(Type::DeleteContainer, container);
    r.delete_container = Some(common::proto::DeleteContainerRequestProto {
        force_delete: Some(force),
    });
    r
}

fn close_container(container: i64) -> Req {
    let mut r = req(Type::CloseContainer, container);
    r.close_container = Some(CloseContainerRequestProto {});
    r
}

#[tokio::test]
async fn delete_update_and_checksum_info_of_containers() {
    let (server, mut c) = versioned_server("2.2").await;
    let resp = expect(
        &mut c,
        delete_container(1, false),
        OzoneResult::DeleteOnOpenContainer,
    )
    .await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Deletion of Open Container is not allowed.")
    );
    assert_eq!(state(&mut c, 1).await, State::Open, "ignorable: not marked");
    let resp = expect(&mut c, delete_container(1, true), OzoneResult::Success).await;
    assert_eq!(resp.message.as_deref(), Some(""));
    assert!(resp.delete_container.is_none());
    let resp = expect(&mut c, read_container(1), OzoneResult::ContainerNotFound).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("ContainerID 1 does not exist")
    );

    // CLOSED and non-empty: the DataNode's checkState throws (gRPC UNKNOWN), the container stays.
    let d = data(512, 1);
    expect(
        &mut c,
        write_chunk(2, 1, 0, d.clone()),
        OzoneResult::Success,
    )
    .await;
    let block = block_data(2, 1, vec![chunk(0, &d, 16 << 10)]);
    expect(&mut c, put_block(2, block), OzoneResult::Success).await;
    let resp = expect(&mut c, close_container(2), OzoneResult::Success).await;
    assert_eq!(resp.message.as_deref(), Some(""));
    assert!(resp.close_container.is_none());
    let status = call(&mut c, delete_container(2, false)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown);
    assert_eq!(status.message(), "");
    assert_eq!(state(&mut c, 2).await, State::Closed);
    // CLOSED and empty: deleted.
    expect(&mut c, close_container(3), OzoneResult::Success).await;
    expect(&mut c, delete_container(3, false), OzoneResult::Success).await;
    expect(&mut c, read_container(3), OzoneResult::ContainerNotFound).await;

    // UpdateContainer.
    let mut update = req(Type::UpdateContainer, 4);
    update.update_container = Some(Default::default());
    let resp = expect(&mut c, update, OzoneResult::Success).await;
    assert_eq!(resp.message.as_deref(), Some(""));

    // GetContainerChecksumInfo: closed containers only.
    let mut info = req(Type::GetContainerChecksumInfo, 4);
    info.get_container_checksum_info = Some(Default::default());
    let resp = expect(&mut c, info.clone(), OzoneResult::UnclosedContainerIo).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Checksum information is not available for containers in state OPEN")
    );
    info.container_id = 2;
    let resp = expect(&mut c, info, OzoneResult::Success).await;
    assert_eq!(
        resp.get_container_checksum_info.unwrap().container_id,
        Some(2)
    );
    server.shutdown().await;

    // 2.0 and 2.1 do not know GetContainerChecksumInfo; 2.0 and 2.1 not ReadBlock.
    for (version, description) in [("2.0", ""), ("2.1", "Application error processing RPC")] {
        let (server, mut c) = versioned_server(version).await;
        let mut r = req(Type::ReadBlock, 1);
        r.read_block = Some(Default::default());
        let status = call(&mut c, r).await.unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (tonic::Code::Unknown, description)
        );
        if version == "2.0" {
            let mut info = req(Type::GetContainerChecksumInfo, 1);
            info.get_container_checksum_info = Some(Default::default());
            assert!(call(&mut c, info).await.is_err());
            // 2.0 always reports bytesUsed.
            assert_eq!(container_data(&mut c, 1).await.bytes_used, Some(0));
        }
        server.shutdown().await;
    }
}

#[tokio::test]
async fn read_block_answers_the_block_with_its_checksums() {
    let (server, mut c) = versioned_server("2.2").await;
    let d = data(40000, 5);
    expect(
        &mut c,
        write_chunk(1, 1, 0, d.clone()),
        OzoneResult::Success,
    )
    .await;
    let info = chunk(0, &d, 16 << 10);
    let sums = info.checksum_data.checksums.clone();
    expect(
        &mut c,
        put_block(1, block_data(1, 1, vec![info])),
        OzoneResult::Success,
    )
    .await;
    let mut r = req(Type::ReadBlock, 1);
    r.read_block = Some(common::proto::ReadBlockRequestProto {
        block_id: bid(1, 1),
        offset: 20000,
        length: Some(100),
        response_data_size: None,
    });
    let read = expect(&mut c, r.clone(), OzoneResult::Success)
        .await
        .read_block
        .unwrap();
    // From the window holding offset 20000 (16384) to the end of the block.
    assert_eq!(read.offset, 16384);
    assert_eq!(read.data, d.slice(16384..));
    assert_eq!(read.checksum_data.checksums, sums[1..].to_vec());
    r.read_block.as_mut().unwrap().block_id = bid(1, 2);
    let resp = expect(&mut c, r, OzoneResult::IoException).await;
    assert!(
        resp.message
            .unwrap()
            .starts_with("Failed to readBlock blockID {")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn echo_without_its_field_and_with_a_negative_size() {
    let (server, mut c) = versioned_server("2.2").await;
    let resp = expect(&mut c, req(Type::Echo, 1), OzoneResult::Success).await;
    assert_eq!(resp.echo.unwrap().payload.unwrap().len(), 0);
    let mut neg = req(Type::Echo, 1);
    neg.echo = Some(EchoRequestProto {
        payload_size_resp: Some(-1),
        read_only: Some(true),
        ..Default::default()
    });
    let resp = expect(&mut c, neg.clone(), OzoneResult::ContainerInternalError).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("java.lang.IllegalArgumentException: Count cannot be negative.")
    );
    assert_eq!(state(&mut c, 1).await, State::Open, "read-only: not marked");
    // A non-read-only failure marks an OPEN container, and fails the call on a CLOSED one.
    neg.echo.as_mut().unwrap().read_only = None;
    expect(&mut c, neg.clone(), OzoneResult::ContainerInternalError).await;
    assert_eq!(state(&mut c, 1).await, State::Unhealthy);
    expect(&mut c, close_container(2), OzoneResult::Success).await;
    neg.container_id = 2;
    let status = call(&mut c, neg).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown);
    server.shutdown().await;
}

#[tokio::test]
async fn ec_replicas_check_the_node_and_the_replica_index() {
    let (server, mut c) = versioned_server("2.2").await;
    let mut create = req(Type::CreateContainer, 20);
    create.create_container = Some(CreateContainerRequestProto {
        replica_index: Some(1),
        ..Default::default()
    });
    expect(&mut c, create.clone(), OzoneResult::Success).await;
    let d = data(100, 1);
    let mut w = write_chunk(20, 1, 0, d.clone());
    w.write_chunk.as_mut().unwrap().block_id.replica_index = Some(1);
    expect(&mut c, w, OzoneResult::Success).await;
    let mut block = block_data(20, 1, vec![chunk(0, &d, 16 << 10)]);
    block.block_id.replica_index = Some(1);
    expect(&mut c, put_block(20, block), OzoneResult::Success).await;
    let mut get = get_block(20, 1);
    get.get_block.as_mut().unwrap().block_id.replica_index = Some(2);
    let resp = expect(&mut c, get, OzoneResult::ContainerNotFound).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Unable to find the Container with replicaIdx 2. Container 20 replicaIdx is 1.")
    );
    let resp = expect(&mut c, get_block(20, 9), OzoneResult::NoSuchBlock).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Unable to find the block. BlockID : conID: 20 locID: 9 bcsId: 0 replicaIndex: null")
    );
    // Another node's UUID: INVALID_ARGUMENT for any type (reads too).
    let mut other = read_container(20);
    other.datanode_uuid = "someone-else".into();
    let resp = expect(&mut c, other, OzoneResult::InvalidArgument).await;
    assert_eq!(
        resp.message.as_deref(),
        Some(
            "Request is trying to write to node with uuid : someone-else but the current nodeId \
             is: dn-test ."
        )
    );
    // A new EC container for another node cannot be created: gRPC UNKNOWN.
    create.container_id = 21;
    create.datanode_uuid = "someone-else".into();
    assert_eq!(
        call(&mut c, create).await.unwrap_err().code(),
        tonic::Code::Unknown
    );
    server.shutdown().await;
}

#[tokio::test]
async fn put_block_size_mismatch_per_release() {
    for version in ["2.0", "2.1", "2.2"] {
        let (server, mut c) = versioned_server(version).await;
        let d = data(100, 1);
        expect(
            &mut c,
            write_chunk(1, 1, 0, d.clone()),
            OzoneResult::Success,
        )
        .await;
        let mut bad = block_data(1, 1, vec![chunk(0, &d, 16 << 10)]);
        bad.size = Some(5);
        let answer = call(&mut c, put_block(1, bad)).await;
        match version {
            "2.0" => assert_eq!(answer.unwrap_err().code(), tonic::Code::Unknown),
            "2.1" => {
                let resp = answer.unwrap();
                assert_eq!(resp.result, OzoneResult::IoException as i32);
                assert_eq!(resp.message.as_deref(), Some("Put Key failed"));
            }
            _ => {
                let resp = answer.unwrap();
                assert_eq!(resp.result, OzoneResult::MalformedRequest as i32);
                assert_eq!(resp.message.as_deref(), Some("Malformed PutBlock request"));
            }
        }
        let marked = if version == "2.2" {
            State::Open
        } else {
            State::Unhealthy
        };
        assert_eq!(state(&mut c, 1).await, marked, "{version}");
        // 2.0/2.1 also mark on MALFORMED_REQUEST (a write without its payload).
        expect(
            &mut c,
            req(Type::WriteChunk, 2),
            OzoneResult::MalformedRequest,
        )
        .await;
        assert_eq!(state(&mut c, 2).await, marked, "{version}");
        server.shutdown().await;
    }
}

/// `dir:` when the `.container` file cannot be rewritten (here: a directory stands where it
/// goes, so the rename fails): Ozone 2.2.0's `KeyValueContainer.writeToContainerFile` answers
/// CONTAINER_FILES_CREATE_ERROR "Failed to update container file PATH: <container data>", the
/// caller puts back the state (CloseContainer: OPEN, with the message naming CLOSING, the state
/// of its first write), and HddsDispatcher then marks the still-OPEN container UNHEALTHY.
/// UpdateContainer's failure leaves the container with no metadata (its restore copies from a
/// view of the map it has just cleared), and, the container being CLOSED, HddsDispatcher's
/// precondition fails the call with gRPC UNKNOWN.
#[tokio::test]
async fn a_container_file_that_cannot_be_rewritten_is_container_files_create_error() {
    use common::proto::{KeyValue, UpdateContainerRequestProto};
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.store = StoreKind::Dir(tmp.path().join("hdds"));
    config.datanode_uuid = "dn-test".into();
    let (server, mut c) = server_with(config).await;
    let kv = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(v.into()),
    };
    for id in [5, 6] {
        let mut create = req(Type::CreateContainer, id);
        create.create_container = Some(CreateContainerRequestProto {
            metadata: vec![kv("owner", "ops")],
            ..Default::default()
        });
        expect(&mut c, create, OzoneResult::Success).await;
    }
    let file = |id: i64| {
        tmp.path()
            .join(format!("hdds/{id}/metadata/{id}.container"))
    };
    let block = |id: i64| {
        std::fs::remove_file(file(id)).unwrap();
        std::fs::create_dir_all(file(id).join("in-the-way")).unwrap();
    };

    // CloseContainer of an OPEN container.
    block(5);
    let resp = expect(
        &mut c,
        close_container(5),
        OzoneResult::ContainerFilesCreateError,
    )
    .await;
    let path = std::path::absolute(file(5)).unwrap();
    assert_eq!(
        resp.message.unwrap(),
        format!(
            "Failed to update container file {}: KeyValueContainerData #5 (CLOSING, empty, \
             ri=0, origin=[dn_dn-test, pipeline_])",
            path.display()
        )
    );
    // Put back to OPEN, then marked UNHEALTHY for the failed write; no temporary file left.
    assert_eq!(state(&mut c, 5).await, State::Unhealthy);
    let temporary: Vec<_> = std::fs::read_dir(tmp.path().join("hdds/5/metadata"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.contains("tmp"))
        .collect();
    assert!(temporary.is_empty(), "{temporary:?}");

    // UpdateContainer (forced) of a CLOSED container.
    expect(&mut c, close_container(6), OzoneResult::Success).await;
    block(6);
    let mut update = req(Type::UpdateContainer, 6);
    update.update_container = Some(UpdateContainerRequestProto {
        metadata: vec![kv("owner", "dev"), kv("team", "storage")],
        force_update: Some(true),
    });
    let status = c
        .send(tokio_stream::once(update))
        .await
        .map(|r| r.into_inner());
    let status = match status {
        Ok(mut inbound) => inbound.message().await.expect_err("the call fails"),
        Err(status) => status,
    };
    assert_eq!(status.code(), tonic::Code::Unknown, "{status:?}");
    let data = container_data(&mut c, 6).await;
    assert_eq!(State::try_from(data.state.unwrap()), Ok(State::Closed));
    assert!(data.metadata.is_empty(), "{:?}", data.metadata);
    server.shutdown().await;

    // Ozone 2.0.0's message.
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.store = StoreKind::Dir(tmp.path().join("hdds"));
    config.ozone_version = "2.0".parse().unwrap();
    let (server, mut c) = server_with(config).await;
    expect(&mut c, req_create(7), OzoneResult::Success).await;
    let file = tmp.path().join("hdds/7/metadata/7.container");
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let resp = expect(
        &mut c,
        close_container(7),
        OzoneResult::ContainerFilesCreateError,
    )
    .await;
    assert_eq!(
        resp.message.unwrap(),
        format!(
            "Error while creating/updating container file. ContainerID: 7, container path: {}",
            std::path::absolute(&file).unwrap().display()
        )
    );
    server.shutdown().await;
}

fn req_create(container: i64) -> Req {
    let mut create = req(Type::CreateContainer, container);
    create.create_container = Some(CreateContainerRequestProto::default());
    create
}

/// `dir:` creations on the request path run one at a time off the runtime threads (Ozone's
/// containerCreationLock): concurrent CreateContainers of one ID give exactly one SUCCESS, of
/// distinct IDs all succeed with their directories made; a deleted container's directory is
/// gone and a new creation of the ID makes it again; WriteChunk's auto-create takes the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dir_creations_are_serialized_and_deletions_wait_for_them() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.store = StoreKind::Dir(tmp.path().join("hdds"));
    let (server, c) = server_with(config).await;
    let results = |reqs: Vec<Req>| {
        let c = c.clone();
        async move {
            let mut tasks = Vec::new();
            for r in reqs {
                let mut c = c.clone();
                tasks.push(tokio::spawn(async move { one(&mut c, r).await.result }));
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(OzoneResult::try_from(t.await.unwrap()).unwrap());
            }
            out
        }
    };
    let same = results((0..32).map(|_| req_create(500)).collect()).await;
    let successes = same.iter().filter(|r| **r == OzoneResult::Success).count();
    assert_eq!(successes, 1, "{same:?}");
    assert!(
        same.iter().all(|r| matches!(
            r,
            OzoneResult::Success | OzoneResult::ContainerAlreadyExists
        )),
        "{same:?}"
    );
    let distinct = results((600..632).map(req_create).collect()).await;
    assert!(
        distinct.iter().all(|r| *r == OzoneResult::Success),
        "{distinct:?}"
    );
    let auto = results(
        (700..716)
            .flat_map(|id| {
                [
                    write_chunk(id, 1, 0, data(100, 1)),
                    write_chunk(id, 2, 0, data(100, 2)),
                ]
            })
            .collect(),
    )
    .await;
    assert!(auto.iter().all(|r| *r == OzoneResult::Success), "{auto:?}");
    for id in (600..632).chain(700..716) {
        assert!(
            tmp.path()
                .join(format!("hdds/{id}/metadata/{id}.container"))
                .is_file(),
            "{id}"
        );
    }
    let mut c2 = c.clone();
    expect(&mut c2, delete_container(600, true), OzoneResult::Success).await;
    assert!(!tmp.path().join("hdds/600").exists());
    expect(&mut c2, req_create(600), OzoneResult::Success).await;
    assert!(tmp.path().join("hdds/600/metadata/600.container").is_file());
    server.shutdown().await;
}

/// `dir:` when a container cannot be created on disk (here: a file stands where its directory
/// goes): as `KeyValueContainer.create` fails, there is no container afterwards; CreateContainer
/// fails the call with gRPC UNKNOWN (HddsDispatcher meets a null container for a failure it
/// cannot ignore), a WriteChunk's auto-create answers CONTAINER_INTERNAL_ERROR "ContainerID N
/// creation failed"; once the disk takes it again, the container is created. A container
/// directory already on disk is CONTAINER_ALREADY_EXISTS and is not touched.
#[tokio::test]
async fn a_container_the_disk_refuses_is_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::loopback();
    config.store = StoreKind::Dir(tmp.path().join("hdds"));
    let (server, mut c) = server_with(config).await;
    let in_the_way = tmp.path().join("hdds/800");
    std::fs::write(&in_the_way, b"not a directory").unwrap();

    let status = call(&mut c, req_create(800)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown, "{status:?}");
    expect(&mut c, read_container(800), OzoneResult::ContainerNotFound).await;
    let resp = expect(
        &mut c,
        write_chunk(800, 1, 0, data(100, 1)),
        OzoneResult::ContainerInternalError,
    )
    .await;
    assert_eq!(
        resp.message.as_deref(),
        Some("ContainerID 800 creation failed")
    );
    expect(&mut c, read_container(800), OzoneResult::ContainerNotFound).await;

    std::fs::remove_file(&in_the_way).unwrap();
    expect(
        &mut c,
        write_chunk(800, 1, 0, data(100, 1)),
        OzoneResult::Success,
    )
    .await;
    assert_eq!(state(&mut c, 800).await, State::Open);

    // A container directory already on disk but not served (another process's, or a creation
    // cut short before this start): `verifyIsNewContainer`'s CONTAINER_ALREADY_EXISTS, and the
    // directory is left alone.
    let stray = tmp.path().join("hdds/801/metadata");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("keep"), b"x").unwrap();
    let resp = expect(&mut c, req_create(801), OzoneResult::ContainerAlreadyExists).await;
    assert_eq!(
        resp.message.as_deref(),
        Some("Container creation failed because ContainerFile already exists")
    );
    let resp = expect(
        &mut c,
        write_chunk(801, 1, 0, data(100, 1)),
        OzoneResult::ContainerAlreadyExists,
    )
    .await;
    assert_eq!(
        resp.message.as_deref(),
        Some("ContainerID 801 creation failed")
    );
    assert!(stray.join("keep").is_file(), "left alone");
    expect(&mut c, read_container(801), OzoneResult::ContainerNotFound).await;
    server.shutdown().await;
}

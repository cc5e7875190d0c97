//! The `dn-sim` binary with `--store dir:` killed with SIGKILL and started again on the same
//! directory (`support::process`): what was acknowledged is served again, over gRPC, as a
//! restarted DataNode serves it; with `--sync` and without.

// Only the child-process helper of `support/`: the raw codec there is for other test crates.
#[allow(dead_code)]
#[path = "support/process.rs"]
mod process;

use bytes::Bytes;
use common::proto::container_data_proto::State;
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    BlockData, ChecksumType, ChunkInfo, CloseContainerRequestProto,
    ContainerCommandRequestProto as Req, ContainerCommandResponseProto as Resp, ContainerDataProto,
    DatanodeBlockId, GetBlockRequestProto, PutBlockRequestProto, ReadChunkRequestProto,
    ReadContainerRequestProto, Result as OzoneResult, Type, WriteChunkRequestProto,
};
use process::{DnSimProcess, arg};
use std::net::SocketAddr;
use tonic::transport::Channel;

async fn client(addr: SocketAddr) -> Client<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Client::new(channel)
}

async fn one(client: &mut Client<Channel>, req: Req) -> Resp {
    let mut inbound = client
        .send(tokio_stream::once(req))
        .await
        .unwrap()
        .into_inner();
    inbound.message().await.unwrap().expect("one response")
}

async fn ok(client: &mut Client<Channel>, req: Req) -> Resp {
    let resp = one(client, req).await;
    assert_eq!(
        resp.result,
        OzoneResult::Success as i32,
        "{:?}",
        resp.message
    );
    resp
}

fn req(cmd: Type, container: i64) -> Req {
    Req {
        cmd_type: cmd as i32,
        container_id: container,
        datanode_uuid: "restart-test".into(),
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
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

fn chunk(offset: u64, data: &[u8]) -> ChunkInfo {
    ChunkInfo {
        chunk_name: format!("chunk_{offset}"),
        offset,
        len: data.len() as u64,
        checksum_data: common::checksum::compute(ChecksumType::Crc32, 4096, data).unwrap(),
        ..Default::default()
    }
}

fn write_chunk(container: i64, local_id: i64, offset: u64, data: Bytes) -> Req {
    Req {
        write_chunk: Some(WriteChunkRequestProto {
            block_id: bid(container, local_id),
            chunk_data: Some(chunk(offset, &data)),
            data: Some(data),
            ..Default::default()
        }),
        ..req(Type::WriteChunk, container)
    }
}

fn put_block(block: BlockData) -> Req {
    Req {
        put_block: Some(PutBlockRequestProto {
            block_data: block.clone(),
            ..Default::default()
        }),
        ..req(Type::PutBlock, block.block_id.container_id)
    }
}

fn get_block(container: i64, local_id: i64) -> Req {
    Req {
        get_block: Some(GetBlockRequestProto {
            block_id: bid(container, local_id),
            ..Default::default()
        }),
        ..req(Type::GetBlock, container)
    }
}

async fn read_chunk(
    client: &mut Client<Channel>,
    container: i64,
    local_id: i64,
    info: ChunkInfo,
) -> Bytes {
    let resp = ok(
        client,
        Req {
            read_chunk: Some(ReadChunkRequestProto {
                block_id: bid(container, local_id),
                chunk_data: info,
                read_chunk_version: None,
            }),
            ..req(Type::ReadChunk, container)
        },
    )
    .await;
    match resp.read_chunk.unwrap().response_data {
        Some(ResponseData::Data(d)) => d,
        other => panic!("expected V0 data, got {other:?}"),
    }
}

async fn container_data(client: &mut Client<Channel>, container: i64) -> ContainerDataProto {
    let resp = ok(
        client,
        Req {
            read_container: Some(ReadContainerRequestProto {}),
            ..req(Type::ReadContainer, container)
        },
    )
    .await;
    resp.read_container.unwrap().container_data.unwrap()
}

async fn acknowledged_writes_survive_a_sigkill(sync: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("dir:{}", arg(tmp.path()));
    let mut args = vec!["--store", &store, "--containers", "1-2"];
    if sync {
        args.push("--sync");
    }
    let mut dn = DnSimProcess::spawn(&args);
    let mut c = client(dn.addr).await;
    // Block 5: two chunks, committed. Block 6: written, never committed. Container 2: CLOSED.
    let (a, b) = (data(10_000, 1), data(5_000, 2));
    ok(&mut c, write_chunk(1, 5, 0, a.clone())).await;
    ok(&mut c, write_chunk(1, 5, 10_000, b.clone())).await;
    let committed = BlockData {
        block_id: bid(1, 5),
        chunks: vec![chunk(0, &a), chunk(10_000, &b)],
        ..Default::default()
    };
    ok(&mut c, put_block(committed.clone())).await;
    let stored = ok(&mut c, get_block(1, 5))
        .await
        .get_block
        .unwrap()
        .block_data;
    let uncommitted = data(700, 3);
    ok(&mut c, write_chunk(1, 6, 0, uncommitted.clone())).await;
    let close = Req {
        close_container: Some(CloseContainerRequestProto {}),
        ..req(Type::CloseContainer, 2)
    };
    ok(&mut c, close).await;
    let before = container_data(&mut c, 1).await;
    assert_eq!(
        (before.block_count, before.bytes_used),
        (Some(1), Some(15_700))
    );

    dn.restart();
    let mut c = client(dn.addr).await;
    let after = ok(&mut c, get_block(1, 5))
        .await
        .get_block
        .unwrap()
        .block_data;
    assert_eq!(after, stored);
    assert_eq!(read_chunk(&mut c, 1, 5, chunk(0, &a)).await, a);
    assert_eq!(read_chunk(&mut c, 1, 5, chunk(10_000, &b)).await, b);
    // As a restarted DataNode (2.2.0): the uncommitted block file is still read, no GetBlock knows
    // it, and bytesUsed is what the last PutBlock recorded (before block 6 was written).
    assert_eq!(
        read_chunk(&mut c, 1, 6, chunk(0, &uncommitted)).await,
        uncommitted
    );
    let unknown = one(&mut c, get_block(1, 6)).await;
    assert_eq!(unknown.result, OzoneResult::NoSuchBlock as i32);
    let restored = container_data(&mut c, 1).await;
    assert_eq!(
        (restored.block_count, restored.bytes_used),
        (Some(1), Some(15_000))
    );
    assert_eq!(restored.state, Some(State::Open as i32));
    assert_eq!(
        container_data(&mut c, 2).await.state,
        Some(State::Closed as i32)
    );
}

#[tokio::test]
async fn acknowledged_writes_survive_a_sigkill_with_sync() {
    acknowledged_writes_survive_a_sigkill(true).await;
}

#[tokio::test]
async fn acknowledged_writes_survive_a_sigkill_without_sync() {
    acknowledged_writes_survive_a_sigkill(false).await;
}

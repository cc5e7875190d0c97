//! `loadgen write` and `loadgen read` against dn-sim: what the DataNode stored is what the
//! stream sent, every byte written is read back and verified, manifests round trip, corrupted
//! data is caught, and bad flags are refused.

mod support;

use bytes::Bytes;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    BlockData, ChecksumType, ChunkInfo, ContainerCommandRequestProto as Req,
    ContainerCommandResponseProto as Resp, DatanodeBlockId, GetBlockRequestProto,
    PutBlockRequestProto, Result as OzoneResult, Type, WriteChunkRequestProto,
};
use loadgen::manifest::{self, ManifestBlock};
use std::path::PathBuf;
use std::process::Command;
use tonic::transport::Channel;

use support::{errors_of, run_block as run};

/// A dn-sim with the memory store, serving on threads of its own.
fn server() -> (dn_sim::EmbeddedServer, String) {
    let s = dn_sim::EmbeddedServer::start(dn_sim::Config::loopback(), 1).unwrap();
    let addr = s.local_addr().to_string();
    (s, addr)
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("loadgen-wr-{}-{name}", std::process::id()))
}

async fn one(client: &mut Client<Channel>, req: Req) -> Resp {
    let mut inbound = client
        .send(tokio_stream::once(req))
        .await
        .unwrap()
        .into_inner();
    let resp = inbound.message().await.unwrap().expect("one response");
    assert_eq!(
        OzoneResult::try_from(resp.result),
        Ok(OzoneResult::Success),
        "{:?}",
        resp.message
    );
    resp
}

fn with_client<T>(addr: &str, f: impl AsyncFnOnce(&mut Client<Channel>) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = Client::new(channel)
            .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
            .max_encoding_message_size(common::MAX_MESSAGE_SIZE);
        f(&mut client).await
    })
}

fn get_block(id: DatanodeBlockId) -> Req {
    Req {
        cmd_type: Type::GetBlock as i32,
        container_id: id.container_id,
        datanode_uuid: "test".into(),
        get_block: Some(GetBlockRequestProto {
            block_id: id,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn dn_sim_stores_what_write_sent_and_read_manifest_verifies_it() {
    let (_server, addr) = server();
    let path = temp("manifest.jsonl");
    // 10 × 300 KB = 3000 KB: 1 MB chunks, 2 MB blocks, PutBlock every 1 MB.
    let w = run(&[
        "write",
        "--target",
        &addr,
        "-n",
        "10",
        "-t",
        "2",
        "--write-size",
        "300KB",
        "--chunk-size",
        "1MB",
        "--block-size",
        "2MB",
        "--flush-size",
        "1MB",
        "--bytes-per-checksum",
        "16KB",
        "--checksum",
        "crc32",
        "--checksum-mode",
        "at-flush",
        "--manifest",
        path.to_str().unwrap(),
    ]);
    assert_eq!(w.failures(), 0, "{}", w.text);
    let written = w.results.write.as_ref().unwrap();
    assert_eq!(written.writes, 10);
    assert_eq!(written.bytes, 3000 * 1024);
    assert!(w.text.contains("chunk-write (WriteChunk)"), "{}", w.text);
    assert!(w.text.contains("block-put (PutBlock)"), "{}", w.text);

    let blocks = manifest::read(&path).unwrap();
    assert_eq!(blocks.iter().map(|b| b.size).sum::<u64>(), 3000 * 1024);
    let mut ids: Vec<i64> = blocks.iter().map(|b| b.local_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), blocks.len(), "every block has its own local ID");
    with_client(&addr, async |c| {
        for b in &blocks {
            assert!(b.size <= 2 << 20);
            let mut offset = 0;
            for chunk in &b.chunks {
                assert_eq!(chunk.offset, offset, "contiguous offsets");
                assert!(chunk.len <= 1 << 20);
                assert_eq!(chunk.checksums.len() as u64, chunk.len.div_ceil(16 << 10));
                offset += chunk.len;
            }
            let resp = one(c, get_block(b.block_id())).await;
            let stored = resp.get_block.unwrap().block_data;
            assert_eq!(
                stored.chunks.iter().map(|c| c.len).sum::<u64>(),
                b.size,
                "block {}",
                b.local_id
            );
            let expected = b.chunk_infos().unwrap();
            assert_eq!(stored.chunks.len(), expected.len());
            for (s, e) in stored.chunks.iter().zip(&expected) {
                assert_eq!((s.offset, s.len), (e.offset, e.len));
                assert_eq!(s.checksum_data, e.checksum_data);
            }
        }
    });

    let r = run(&[
        "read",
        "--target",
        &addr,
        "-t",
        "3",
        "--manifest",
        path.to_str().unwrap(),
    ]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.failures(), 0, "{}", r.text);
    let read = r.results.read.as_ref().unwrap();
    assert_eq!(read.blocks, blocks.len() as u64);
    assert_eq!(read.bytes_read, 3000 * 1024);
    assert_eq!(read.bytes_verified, 3000 * 1024);
    assert!(r.results.write.is_none(), "a manifest read writes nothing");
}

#[test]
fn then_read_verifies_every_byte_written() {
    for version in ["v1", "v0"] {
        let s = run(&[
            "write",
            "-n",
            "24",
            "-t",
            "3",
            "--write-size",
            "256KB",
            "--chunk-size",
            "1MB",
            "--block-size",
            "4MB",
            "--checksum",
            "CRC32C",
            "--then-read",
            "--read-version",
            version,
            "--format",
            "json",
        ]);
        assert_eq!(s.failures(), 0, "{}", s.text);
        let w = s.results.write.as_ref().unwrap();
        let r = s.results.read.as_ref().unwrap();
        assert_eq!(w.bytes, 24 * 256 * 1024);
        assert_eq!(r.bytes_verified, w.bytes, "{version}");
        assert!(
            s.text
                .contains(&format!("Bytes verified: {}\n", 24 * 256 * 1024)),
            "{}",
            s.text
        );
        let json: serde_json::Value = serde_json::from_str(&s.report).unwrap();
        for op in ["write", "WriteChunk", "PutBlock", "GetBlock", "ReadChunk"] {
            assert!(
                json["ops"][op]["count"].as_u64().unwrap() > 0,
                "{op}: {}",
                s.report
            );
            assert!(json["ops"][op]["percentiles_ms"]["p99"].as_f64().is_some());
        }
        assert_eq!(json["ops"]["WriteChunk"]["count"], 6);
        assert_eq!(json["integrity_errors"], 0);
    }
}

#[test]
fn read_without_a_manifest_writes_its_data_set_first() {
    let s = run(&["read", "-n", "9", "-t", "1", "--write-size", "512KB"]);
    assert_eq!(s.failures(), 0, "{}", s.text);
    let r = s.results.read.as_ref().unwrap();
    assert_eq!(r.bytes_verified, 9 * 512 * 1024);
    assert_eq!(r.blocks, 1);
    assert_eq!(r.chunks, 2, "4.5 MB: one full 4 MB chunk and a partial one");
    assert!(s.results.write.is_some(), "the write phase is reported too");
}

#[test]
fn duration_stops_the_writes_and_every_block_is_committed() {
    let s = run(&[
        "write",
        "--duration",
        "1s",
        "-t",
        "2",
        "--write-size",
        "64KB",
        "--checksum",
        "NONE",
    ]);
    assert_eq!(s.failures(), 0, "{}", s.text);
    let w = s.results.write.as_ref().unwrap();
    assert!(w.writes > 0);
    assert!((0.9..10.0).contains(&w.elapsed_s), "{}", w.elapsed_s);
    // Each worker closes its last block at the end, and a block holds at most 256 MB (the
    // default `--block-size`): a fast machine fills more than one per worker within the second.
    const BLOCK: u64 = 256 << 20;
    assert!(
        w.blocks_committed >= 2,
        "every worker's last block is committed: {}",
        w.blocks_committed
    );
    assert!(
        w.blocks_committed <= 2 + w.bytes / BLOCK,
        "no more blocks than {} bytes fill: {}",
        w.bytes,
        w.blocks_committed
    );
    assert!(w.blocks_committed * BLOCK >= w.bytes);
}

/// A block whose stored checksums are those of other data.
fn corrupt_block(addr: &str) -> BlockData {
    let data = Bytes::from(vec![0xabu8; 40 << 10]);
    let wrong = vec![0xcdu8; 40 << 10];
    let id = DatanodeBlockId {
        container_id: 1,
        local_id: 777,
        ..Default::default()
    };
    let chunk = ChunkInfo {
        chunk_name: "777_chunk_1".into(),
        offset: 0,
        len: data.len() as u64,
        checksum_data: common::checksum::compute(ChecksumType::Crc32, 16 << 10, &wrong).unwrap(),
        ..Default::default()
    };
    let block = BlockData {
        block_id: id,
        chunks: vec![chunk.clone()],
        size: Some(data.len() as i64),
        ..Default::default()
    };
    with_client(addr, async |c| {
        let base = Req {
            container_id: 1,
            datanode_uuid: "test".into(),
            ..Default::default()
        };
        let mut w = base.clone();
        w.cmd_type = Type::WriteChunk as i32;
        w.write_chunk = Some(WriteChunkRequestProto {
            block_id: id,
            chunk_data: Some(chunk.clone()),
            data: Some(data.clone()),
            ..Default::default()
        });
        one(c, w).await;
        let mut p = base;
        p.cmd_type = Type::PutBlock as i32;
        p.put_block = Some(PutBlockRequestProto {
            block_data: block.clone(),
            eof: Some(true),
            ..Default::default()
        });
        one(c, p).await;
    });
    block
}

#[test]
fn corrupted_data_is_a_data_integrity_error_and_fails_the_run() {
    let (_server, addr) = server();
    let block = corrupt_block(&addr);
    let path = temp("corrupt.jsonl");
    manifest::write(
        &path,
        serde_json::json!({}),
        &[ManifestBlock::from_block(&block)],
    )
    .unwrap();
    let s = run(&[
        "read",
        "--target",
        &addr,
        "--manifest",
        path.to_str().unwrap(),
    ]);
    assert_eq!(errors_of(&s, "integrity:CHECKSUM_MISMATCH"), Some(1));
    assert_eq!(s.results.integrity_errors(), 1);
    assert_eq!(s.results.read.as_ref().unwrap().bytes_verified, 0);
    assert!(s.text.contains("Data-integrity errors: 1\n"), "{}", s.text);

    // --verify=false reads without judging.
    let s = run(&[
        "read",
        "--target",
        &addr,
        "--verify=false",
        "--manifest",
        path.to_str().unwrap(),
    ]);
    assert_eq!(s.failures(), 0);
    assert_eq!(s.results.read.as_ref().unwrap().bytes_read, 40 << 10);

    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["read", "--target", &addr, "--manifest"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("integrity:CHECKSUM_MISMATCH = 1 (first: "),
        "{stdout}"
    );
    assert!(stderr.contains("data-integrity error"), "{stderr}");
}

#[test]
fn a_manifest_that_does_not_match_the_stored_block_is_reported() {
    let (_server, addr) = server();
    let mut block = corrupt_block(&addr);
    // The manifest claims other checksums than the DataNode stored.
    block.chunks[0].checksum_data.checksums[0] = Bytes::from_static(&[0, 0, 0, 0]);
    let path = temp("mismatch.jsonl");
    manifest::write(
        &path,
        serde_json::json!({}),
        &[ManifestBlock::from_block(&block)],
    )
    .unwrap();
    let s = run(&[
        "read",
        "--target",
        &addr,
        "--manifest",
        path.to_str().unwrap(),
    ]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(errors_of(&s, "integrity:BLOCK_MISMATCH"), Some(1));
}

#[test]
fn bad_flags_exit_2_with_one_line_naming_the_flag() {
    for (args, flag) in [
        (vec!["write", "--chunk-size", "0"], "--chunk-size"),
        (
            vec!["write", "--bytes-per-checksum", "0"],
            "--bytes-per-checksum",
        ),
        (vec!["write", "--write-size", "33MB"], "--write-size"),
        (vec!["write", "--checksum", "CRC64"], "--checksum"),
        (vec!["write", "--checksum-mode", "later"], "--checksum-mode"),
        (
            vec!["read", "--manifest", "/nonexistent/m.jsonl"],
            "--manifest",
        ),
        (
            vec!["write", "--client-throttle", "fast"],
            "--client-throttle",
        ),
        (vec!["read", "--retry", "-1"], "--retry"),
        (vec!["write", "--aimd-increase", "0"], "--aimd-increase"),
        (
            vec!["read", "--throttle-scope", "global"],
            "--throttle-scope",
        ),
    ] {
        support::assert_usage_error(&args, flag);
    }
}

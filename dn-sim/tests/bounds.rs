//! Bounded resources: for each class of hostile request, many at once from many connections
//! against a `dn-sim` process, whose peak resident memory must stay under a stated bound while an
//! honest client on its own connection keeps getting Echo answers, each within 2 s.
//!
//! The bounds are what `ARCHITECTURE.md` ("Bounded resources") states each class may cost:
//! - answers nobody reads (Echo `payloadSizeResp`, ReadChunk `len`, ReadContainer's metadata):
//!   the in-flight budget (`--max-inflight-bytes 64MB` here) plus one answer plus the small
//!   allowance, ×2 for the copies made while encoding: growth under 200 MiB where 32 streams
//!   would otherwise hold 0.5–1 GiB (918 MiB peak measured for Echo without the budget);
//! - large requests from many streams: refused (RESOURCE_EXHAUSTED) beyond the budget
//!   (`--max-inflight-bytes 32MB` here) before their bodies are read; the budget plus what HTTP/2
//!   buffers per connection (its 32 MiB window) plus what glibc keeps of freed receive buffers in
//!   each thread's arena (the `dn-sim` binary raises its trim threshold to 256 MiB): under
//!   200 MiB where 16 streams on 2 connections would receive 384 MiB at once;
//! - requests whose sizes or counts would multiply an answer (a V1 read with
//!   `bytesPerChecksum` 1, a GetSmallFile of 64 MiB, a ReadBlock of 1-byte pieces): refused before
//!   anything is read, under 64 MiB of growth;
//! - chunks sent with large unknown fields: re-encoded on arrival, so the stored slice pins its
//!   own bytes only: under 160 MiB of growth where 40 pinned 8 MiB receive buffers hold 320 MiB;
//! - block metadata (PutBlocks of 100,000 chunks, thousands of tiny blocks): charged to
//!   `--metadata-capacity`, refused with DISK_OUT_OF_SPACE beyond it: under 160 MiB of growth for
//!   a 16 MB bound, two PutBlocks of 100,000 chunks decoded at once (about 12 MB each, twice
//!   that while their chunk lists grow) and four GetBlocks copying a stored one (12 MB each);
//!   under 64 MiB for 10,000 tiny blocks.

mod support;

use bytes::Bytes;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, ContainerCommandRequestProto as Req,
    ContainerCommandResponseProto as Resp, DatanodeBlockId, EchoRequestProto, GetBlockRequestProto,
    GetSmallFileRequestProto, ListBlockRequestProto, PutBlockRequestProto, ReadBlockRequestProto,
    ReadChunkRequestProto, ReadChunkVersion, Result as OzoneResult, Type, WriteChunkRequestProto,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::process::DnSimProcess;
use tonic::transport::Channel;

const MIB: usize = 1 << 20;

/// One test at a time: each measures a server process's memory and an honest client's latency,
/// which other tests' servers and clients on the same cores would disturb.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A new connection.
async fn connect(addr: SocketAddr) -> Client<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Client::new(channel)
        .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(common::MAX_MESSAGE_SIZE)
}

fn req(cmd: Type) -> Req {
    Req {
        cmd_type: cmd as i32,
        container_id: 1,
        datanode_uuid: "dn-test".into(),
        ..Default::default()
    }
}

fn bid(local_id: i64) -> DatanodeBlockId {
    DatanodeBlockId {
        container_id: 1,
        local_id,
        ..Default::default()
    }
}

fn echo(payload_size_resp: usize) -> Req {
    let mut r = req(Type::Echo);
    r.echo = Some(EchoRequestProto {
        payload_size_resp: Some(payload_size_resp as i32),
        read_only: Some(true),
        ..Default::default()
    });
    r
}

fn chunk(offset: u64, len: u64, bpc: u32) -> ChunkInfo {
    ChunkInfo {
        chunk_name: "c".into(),
        offset,
        len,
        checksum_data: ChecksumData {
            r#type: ChecksumType::Crc32 as i32,
            bytes_per_checksum: bpc,
            checksums: vec![Bytes::from_static(&[0, 0, 0, 0])],
        },
        ..Default::default()
    }
}

fn write_chunk(local_id: i64, offset: u64, data: Bytes) -> Req {
    let mut r = req(Type::WriteChunk);
    r.write_chunk = Some(WriteChunkRequestProto {
        block_id: bid(local_id),
        chunk_data: Some(chunk(offset, data.len() as u64, MIB as u32)),
        data: Some(data),
        ..Default::default()
    });
    r
}

fn put_block(local_id: i64, chunks: Vec<ChunkInfo>, eof: bool) -> Req {
    let mut r = req(Type::PutBlock);
    r.put_block = Some(PutBlockRequestProto {
        block_data: BlockData {
            block_id: bid(local_id),
            chunks,
            ..Default::default()
        },
        eof: Some(eof),
        ..Default::default()
    });
    r
}

fn read_chunk(local_id: i64, len: u64, bpc: u32, v1: bool) -> Req {
    let mut r = req(Type::ReadChunk);
    r.read_chunk = Some(ReadChunkRequestProto {
        block_id: bid(local_id),
        chunk_data: chunk(0, len, bpc),
        read_chunk_version: v1.then_some(ReadChunkVersion::V1 as i32),
    });
    r
}

async fn one(client: &mut Client<Channel>, req: Req) -> Result<Resp, tonic::Status> {
    let mut inbound = client.send(tokio_stream::once(req)).await?.into_inner();
    Ok(inbound.message().await?.expect("an answer"))
}

/// Sends `req` and checks its result code.
async fn expect(client: &mut Client<Channel>, req: Req, result: OzoneResult) -> Resp {
    let resp = one(client, req).await.unwrap();
    assert_eq!(
        OzoneResult::try_from(resp.result),
        Ok(result),
        "{:?}",
        resp.message
    );
    resp
}

/// Writes `len` bytes to block `local_id` in 4 MiB chunks and commits it.
async fn write_block(client: &mut Client<Channel>, local_id: i64, len: usize) {
    let piece = 4 * MIB;
    let mut chunks = Vec::new();
    for offset in (0..len).step_by(piece) {
        let n = piece.min(len - offset);
        let data = Bytes::from(vec![(offset / piece) as u8; n]);
        expect(
            client,
            write_chunk(local_id, offset as u64, data),
            OzoneResult::Success,
        )
        .await;
        chunks.push(chunk(offset as u64, n as u64, MIB as u32));
    }
    expect(
        client,
        put_block(local_id, chunks, true),
        OzoneResult::Success,
    )
    .await;
}

/// The honest client: Echo round trips on a connection of its own until stopped; the number of
/// answers and the slowest round trip.
struct Probe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(u32, Duration)>,
}

/// Honest answers a probe collects at the least.
const MIN_ANSWERS: u32 = 10;

impl Probe {
    async fn start(addr: SocketAddr) -> Self {
        let mut client = connect(addr).await;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let (mut answers, mut slowest) = (0u32, Duration::ZERO);
            // At least MIN_ANSWERS, however soon the attack is over (a quick attack left 9).
            while !flag.load(Ordering::Relaxed) || answers < MIN_ANSWERS {
                let start = Instant::now();
                let resp = tokio::time::timeout(Duration::from_secs(10), one(&mut client, echo(0)))
                    .await
                    .expect("the honest echo was never answered")
                    .unwrap();
                assert_eq!(resp.result, OzoneResult::Success as i32);
                slowest = slowest.max(start.elapsed());
                answers += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (answers, slowest)
        });
        Self { stop, task }
    }

    /// Stops the probe and checks it: answers all along, none slower than 2 s.
    async fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let (answers, slowest) = self.task.await.unwrap();
        eprintln!("honest echo: {answers} answers, slowest {slowest:?}");
        assert!(answers >= MIN_ANSWERS, "only {answers} honest answers");
        assert!(
            slowest < Duration::from_secs(2),
            "an honest echo took {slowest:?}"
        );
    }
}

/// Starts `dn-sim ARGS`, lets `warm_up` run (allocations every run makes once, such as the
/// 32 MiB payload buffer), then returns the process and its resident memory, MiB, with the peak
/// reset to it.
async fn spawn_warm(args: &[&str]) -> (DnSimProcess, f64) {
    let p = DnSimProcess::spawn(args);
    let mut client = connect(p.addr).await;
    // The large payload buffer is made on the first answer over 1 MiB.
    expect(&mut client, echo(2 * MIB), OzoneResult::Success).await;
    let baseline = p.rss_mib();
    p.reset_peak();
    (p, baseline)
}

/// Checks the peak growth over `baseline` against `bound` MiB and reports it.
fn assert_growth(p: &DnSimProcess, baseline: f64, bound: f64, what: &str) {
    let growth = p.peak_rss_mib() - baseline;
    eprintln!("{what}: peak RSS growth {growth:.1} MiB (bound {bound} MiB)");
    assert!(
        growth < bound,
        "{what}: peak RSS grew {growth:.1} MiB (bound {bound} MiB)"
    );
}

/// Waits (up to 10 s) until the in-flight gauge is back to 0.
async fn assert_drained(p: &DnSimProcess) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let bytes = p.metric("dn_sim_inflight_bytes").unwrap();
        if bytes == 0.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{bytes} bytes still in flight after the clients left"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Opens `streams` streams on each of `connections` connections, each sending `make(i)` and
/// never reading its answer, and holds them for `hold`; then checks the budget held and waited.
async fn unread_answers(
    p: &DnSimProcess,
    connections: usize,
    streams: usize,
    make: impl Fn(usize) -> Req,
    hold: Duration,
) {
    let mut held = Vec::new();
    for c in 0..connections {
        let client = connect(p.addr).await;
        for s in 0..streams {
            let mut client = client.clone();
            let req = make(c * streams + s);
            held.push(tokio::spawn(async move {
                // The answer stream is kept, unread, until the task is aborted.
                let inbound = client.send(tokio_stream::once(req)).await.unwrap();
                std::future::pending::<()>().await;
                drop(inbound);
            }));
        }
    }
    let deadline = Instant::now() + hold;
    let mut most = 0.0f64;
    while Instant::now() < deadline {
        most = most.max(p.metric("dn_sim_inflight_bytes").unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let limit = p.metric("dn_sim_inflight_limit_bytes").unwrap();
    let waits = p.metric("dn_sim_inflight_waits_total").unwrap();
    eprintln!(
        "in flight at most {:.1} MiB of {:.0} MiB, {waits} waits",
        most / MIB as f64,
        limit / MIB as f64
    );
    assert!(waits > 0.0, "nothing waited for the budget");
    // The limit, one request passing it alone, the small allowance.
    assert!(
        most <= limit + (32 + 16) as f64 * MIB as f64,
        "{most} bytes in flight"
    );
    for task in held {
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn echo_answers_nobody_reads_are_bounded_by_the_budget() {
    let _serial = SERIAL.lock().await;
    let (p, baseline) = spawn_warm(&["--max-inflight-bytes", "64MB"]).await;
    let probe = Probe::start(p.addr).await;
    // 32 streams asking for 32 MiB answers they never read: 1 GiB without the budget.
    unread_answers(&p, 8, 4, |_| echo(32 * MIB - 1024), Duration::from_secs(3)).await;
    assert_growth(&p, baseline, 200.0, "32 unread 32 MiB echoes");
    probe.finish().await;
    assert_drained(&p).await;
    // Over the message limit: refused unbuilt.
    let mut client = connect(p.addr).await;
    let status = one(&mut client, echo(64 * MIB)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_chunk_answers_nobody_reads_are_bounded_by_the_budget() {
    let _serial = SERIAL.lock().await;
    let (p, _) = spawn_warm(&["--max-inflight-bytes", "64MB"]).await;
    let mut client = connect(p.addr).await;
    write_block(&mut client, 1, 24 * MIB).await;
    let baseline = p.rss_mib();
    p.reset_peak();
    let probe = Probe::start(p.addr).await;
    // V0 over six stored pieces: each answer is joined (24 MiB) and encoded (24 MiB more).
    unread_answers(
        &p,
        8,
        4,
        |_| read_chunk(1, 24 * MIB as u64, MIB as u32, false),
        Duration::from_secs(3),
    )
    .await;
    assert_growth(&p, baseline, 200.0, "32 unread 24 MiB ReadChunks");
    probe.finish().await;
    assert_drained(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_requests_beyond_the_budget_are_refused_unread() {
    let _serial = SERIAL.lock().await;
    let (p, baseline) = spawn_warm(&["--max-inflight-bytes", "32MB", "--store", "discard"]).await;
    let probe = Probe::start(p.addr).await;
    let data = Bytes::from(vec![5u8; 24 * MIB]);
    let mut writers = Vec::new();
    // Two connections, eight streams each: HTTP/2 lets each connection have 32 MiB unread
    // (the connection window), each stream 8 MiB; without the budget all 16 messages (384 MiB)
    // are received at once (321–350 MiB of growth measured).
    for c in 0..2i64 {
        let client = connect(p.addr).await;
        for s in 0..8i64 {
            let mut client = client.clone();
            let data = data.clone();
            writers.push(tokio::spawn(async move {
                match one(&mut client, write_chunk(c * 100 + s, 0, data)).await {
                    Ok(resp) => {
                        assert_eq!(
                            resp.result,
                            OzoneResult::Success as i32,
                            "{:?}",
                            resp.message
                        );
                        true
                    }
                    Err(status) => {
                        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
                        assert!(
                            status.message().contains("--max-inflight-bytes"),
                            "{status:?}"
                        );
                        false
                    }
                }
            }));
        }
    }
    let mut written = 0;
    for w in writers {
        written += u32::from(w.await.unwrap());
    }
    assert_growth(
        &p,
        baseline,
        200.0,
        "2 connections × 8 streams × a WriteChunk of 24 MiB",
    );
    let refused = p.metric("dn_sim_inflight_refusals_total").unwrap();
    eprintln!("{written} of 16 written, {refused} refused");
    assert!(written >= 1, "nothing was written");
    assert_eq!(refused as u32, 16 - written);
    // Refused, then retried one at a time: all of them fit.
    let mut client = connect(p.addr).await;
    for s in 0..3 {
        let resp = one(&mut client, write_chunk(1000 + s, 0, data.clone()))
            .await
            .unwrap();
        assert_eq!(resp.result, OzoneResult::Success as i32);
    }
    probe.finish().await;
    assert_drained(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sizes_and_counts_that_would_multiply_an_answer_are_refused_unread() {
    let _serial = SERIAL.lock().await;
    let (p, _) = spawn_warm(&[]).await;
    let mut client = connect(p.addr).await;
    write_block(&mut client, 1, MIB).await;
    // Block 2: its own 1 MiB of data named 64 times over, 64 MiB in all.
    write_block(&mut client, 2, MIB).await;
    let same: Vec<ChunkInfo> = (0..64).map(|_| chunk(0, MIB as u64, MIB as u32)).collect();
    expect(&mut client, put_block(2, same, true), OzoneResult::Success).await;
    let baseline = p.rss_mib();
    p.reset_peak();
    let probe = Probe::start(p.addr).await;
    let hostile = |i: usize| match i % 3 {
        // 1 MiB in 1-byte buffers: a million buffers.
        0 => read_chunk(1, MIB as u64, 1, true),
        // 64 MiB of chunks in one answer.
        1 => {
            let mut r = req(Type::GetSmallFile);
            r.get_small_file = Some(GetSmallFileRequestProto {
                block: GetBlockRequestProto {
                    block_id: bid(2),
                    ..Default::default()
                },
                read_chunk_version: None,
            });
            r
        }
        // A ReadBlock of 1-byte pieces.
        _ => {
            let mut r = req(Type::ReadBlock);
            r.read_block = Some(ReadBlockRequestProto {
                block_id: bid(1),
                offset: 0,
                length: Some(MIB as u64),
                response_data_size: Some(1),
            });
            r
        }
    };
    let mut tasks = Vec::new();
    let until = Instant::now() + Duration::from_millis(1500);
    for c in 0..8 {
        let mut client = connect(p.addr).await;
        tasks.push(tokio::spawn(async move {
            let mut sent = 0;
            while Instant::now() < until {
                let resp = one(&mut client, hostile(c + sent)).await.unwrap();
                sent += 1;
                assert_eq!(
                    resp.result,
                    OzoneResult::UnsupportedRequest as i32,
                    "{:?}",
                    resp.message
                );
                assert!(resp.message.unwrap().starts_with("Oversize read. max: "));
            }
            sent
        }));
    }
    let mut sent = 0;
    for t in tasks {
        sent += t.await.unwrap();
    }
    assert!(sent >= 24, "only {sent} hostile requests");
    assert_growth(&p, baseline, 64.0, &format!("{sent} multiplying reads"));
    probe.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn block_metadata_is_charged_to_the_metadata_capacity() {
    let _serial = SERIAL.lock().await;
    // More runtime threads than cores: a 1.4 MB message of 100,000 sub-messages takes a runtime
    // thread for a while to decode (tens of ms in a debug build), and the OS then still shares
    // the cores with the thread serving the honest client.
    let (p, baseline) = spawn_warm(&[
        "--metadata-capacity",
        "16MB",
        "--store",
        "discard",
        "--threads",
        "4",
    ])
    .await;
    let probe = Probe::start(p.addr).await;
    // PutBlocks of 100,000 chunks (about 1.4 MB on the wire, 10 MB or more in memory each).
    let many: Vec<ChunkInfo> = (0..100_000)
        .map(|i| ChunkInfo {
            checksum_data: ChecksumData::default(),
            ..chunk(i, 0, 0)
        })
        .collect();
    let mut tasks = Vec::new();
    for c in 0..2i64 {
        let mut client = connect(p.addr).await;
        let many = many.clone();
        tasks.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            for i in 0..4 {
                let start = Instant::now();
                let resp = one(&mut client, put_block(c * 10 + i, many.clone(), false))
                    .await
                    .unwrap();
                eprintln!("PutBlock of 100,000 chunks: {:?}", start.elapsed());
                codes.push(OzoneResult::try_from(resp.result).unwrap());
            }
            codes
        }));
    }
    let mut stored = 0;
    for t in tasks {
        for code in t.await.unwrap() {
            match code {
                OzoneResult::Success => stored += 1,
                OzoneResult::DiskOutOfSpace => {}
                other => panic!("PutBlock answered {other:?}"),
            }
        }
    }
    eprintln!("{stored} of 8 PutBlocks of 100,000 chunks stored");
    assert!((1..8).contains(&stored), "{stored} stored");
    // Reading such a block back, many at once: each answer is reserved before it is copied.
    let mut readers = Vec::new();
    for _ in 0..4 {
        let mut client = connect(p.addr).await;
        readers.push(tokio::spawn(async move {
            for local_id in 0..4 {
                let mut r = req(Type::GetBlock);
                r.get_block = Some(GetBlockRequestProto {
                    block_id: bid(local_id),
                    ..Default::default()
                });
                let resp = one(&mut client, r).await.unwrap();
                if resp.result == OzoneResult::Success as i32 {
                    let chunks = resp.get_block.unwrap().block_data.chunks.len();
                    assert_eq!(chunks, 100_000);
                }
            }
        }));
    }
    for r in readers {
        r.await.unwrap();
    }
    assert_growth(&p, baseline, 160.0, "PutBlocks of 100,000 chunks");
    probe.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_tiny_blocks_are_charged_and_listed_within_bounds() {
    let _serial = SERIAL.lock().await;
    let (p, baseline) = spawn_warm(&["--metadata-capacity", "2MB", "--store", "discard"]).await;
    let probe = Probe::start(p.addr).await;
    // Four pipelined streams of 2,500 empty PutBlocks each, every one a new block.
    let mut tasks = Vec::new();
    for s in 0..4i64 {
        let mut client = connect(p.addr).await;
        tasks.push(tokio::spawn(async move {
            let reqs: Vec<Req> = (0..2500)
                .map(|i| put_block(1_000_000 + s * 10_000 + i, Vec::new(), false))
                .collect();
            let mut inbound = client
                .send(tokio_stream::iter(reqs))
                .await
                .unwrap()
                .into_inner();
            let (mut ok, mut full) = (0u32, 0u32);
            while let Some(resp) = inbound.message().await.unwrap() {
                match OzoneResult::try_from(resp.result).unwrap() {
                    OzoneResult::Success => ok += 1,
                    OzoneResult::DiskOutOfSpace => full += 1,
                    other => panic!("PutBlock answered {other:?}"),
                }
            }
            (ok, full)
        }));
    }
    let (mut ok, mut full) = (0, 0);
    for t in tasks {
        let (o, f) = t.await.unwrap();
        ok += o;
        full += f;
    }
    eprintln!("{ok} tiny blocks stored, {full} refused");
    // 2 MB at 256 bytes per block entry and a BlockData each: fewer than 8,192 fit.
    assert!(ok < 8192 && full > 0, "{ok} stored, {full} refused");
    // A listing of them all, many at once: it costs what it answers.
    let mut listers = Vec::new();
    for _ in 0..4 {
        let mut client = connect(p.addr).await;
        listers.push(tokio::spawn(async move {
            for _ in 0..5 {
                let mut r = req(Type::ListBlock);
                r.list_block = Some(ListBlockRequestProto {
                    start_local_id: None,
                    count: i32::MAX as u32,
                });
                let resp = expect(&mut client, r, OzoneResult::Success).await;
                assert_eq!(resp.list_block.unwrap().block_data.len() as u32, ok);
            }
        }));
    }
    for l in listers {
        l.await.unwrap();
    }
    assert_growth(&p, baseline, 64.0, "10,000 tiny blocks and their listings");
    probe.finish().await;
}

/// A WriteChunk of `data` to block `local_id` followed by an unknown field of `junk` bytes, which
/// a DataNode's parser (and prost) skips.
fn write_chunk_with_junk(local_id: i64, data: Bytes, junk: usize) -> &'static [u8] {
    use prost::Message;
    let mut bytes = write_chunk(local_id, 0, data).encode_to_vec();
    prost::encoding::encode_key(999, prost::encoding::WireType::LengthDelimited, &mut bytes);
    prost::encoding::encode_varint(junk as u64, &mut bytes);
    bytes.resize(bytes.len() + junk, 0x5a);
    Box::leak(bytes.into_boxed_slice())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stored_chunks_do_not_pin_the_unknown_fields_around_them() {
    let _serial = SERIAL.lock().await;
    let (p, baseline) = spawn_warm(&[]).await;
    let probe = Probe::start(p.addr).await;
    // 40 kept chunks of 64 KiB (stored as slices of what was received), each sent with 8 MiB of
    // unknown fields: 320 MiB would stay pinned if the slices kept their receive buffers.
    let mut tasks = Vec::new();
    for c in 0..8i64 {
        let addr = p.addr;
        tasks.push(tokio::spawn(async move {
            for i in 0..5 {
                let raw =
                    write_chunk_with_junk(c * 10 + i, Bytes::from(vec![1u8; 64 << 10]), 8 * MIB);
                let answer = support::send_raw(addr, raw).await.unwrap();
                let resp = <Resp as prost::Message>::decode(answer).unwrap();
                assert_eq!(
                    resp.result,
                    OzoneResult::Success as i32,
                    "{:?}",
                    resp.message
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Pinned, the receive buffers would be 320 MiB resident by the end (341.8 MiB measured with
    // the re-encoding switched off).
    assert_growth(
        &p,
        baseline,
        160.0,
        "40 WriteChunks with 8 MiB of unknown fields",
    );
    probe.finish().await;
    assert_drained(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_container_answers_nobody_reads_are_bounded_by_the_budget() {
    use common::proto::{CreateContainerRequestProto, KeyValue, ReadContainerRequestProto};
    let _serial = SERIAL.lock().await;
    let (p, _) = spawn_warm(&["--max-inflight-bytes", "64MB"]).await;
    let mut client = connect(p.addr).await;
    // 15 MiB of container metadata, under the 16 MiB a container may keep.
    let mut create = req(Type::CreateContainer);
    create.container_id = 7;
    create.create_container = Some(CreateContainerRequestProto {
        metadata: (0..15)
            .map(|i| KeyValue {
                key: format!("k{i}"),
                value: Some("v".repeat(MIB)),
            })
            .collect(),
        ..Default::default()
    });
    expect(&mut client, create, OzoneResult::Success).await;
    let baseline = p.rss_mib();
    p.reset_peak();
    let probe = Probe::start(p.addr).await;
    // 32 unread ReadContainers, each a 15 MiB copy: 480 MiB without the budget.
    let read = || {
        let mut r = req(Type::ReadContainer);
        r.container_id = 7;
        r.read_container = Some(ReadContainerRequestProto {});
        r
    };
    unread_answers(&p, 8, 4, |_| read(), Duration::from_secs(3)).await;
    assert_growth(&p, baseline, 200.0, "32 unread 15 MiB ReadContainers");
    probe.finish().await;
    assert_drained(&p).await;
}

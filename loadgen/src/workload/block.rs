//! `write` and `read`: the data path of an Ozone client as workloads.
//!
//! **Write.** Each worker is one output stream ([`BlockWriter`], Ozone's `BlockOutputStream`)
//! writing its own blocks. A unit is one application `write()`: the WriteChunk and PutBlock
//! requests it makes due, sent in order; at the end of the run the stream is closed (the partial
//! chunk and a PutBlock with `eof`), so every block written is committed. A committed block goes
//! to the [`BlockSink`] (a manifest file, the read-back list) and is not kept otherwise. Local IDs
//! are `run base | stream << 32 | counter`, the run base being 15 bits of the clock in the top
//! bits, so runs against one DataNode do not overwrite each other's blocks, and the stream the
//! worker's number (16 bits); shard I of a split test numbers its workers after those of shards
//! 0 … I − 1 ([`BlockWrite::for_shard`]), so no two shards write the same block whatever their
//! clocks say.
//!
//! **Read.** A unit is one block: GetBlock, then ReadChunk (V0 or V1) of every chunk GetBlock
//! lists, each verified against the checksums GetBlock returned. When the expected chunk list is
//! known (blocks written in this run, or a manifest), GetBlock's answer must match it. Mismatches
//! are data-integrity failures of their own kinds:
//!
//! - `integrity:CHECKSUM_MISMATCH`: a chunk's data does not match its stored checksums;
//! - `integrity:LENGTH_MISMATCH`: ReadChunk returned another number of bytes than asked for;
//! - `integrity:BLOCK_MISMATCH`: GetBlock's chunk list (offsets, lengths, checksums) differs from
//!   what was written.
//!
//! Every listed block is read once, the workers taking the next one in turn.

use super::block_writer::{BlockOp, BlockWriter, WriteShape};
use super::{Rpc, RpcKind, WorkerLoad, Workload};
use crate::connection::http2::RequestBody;
use crate::outcome::{ErrorKind, Failure};
use crate::throttle::OpKind;
use bytes::{Bytes, BytesMut};
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::{
    BlockData, ChecksumType, ChunkInfo, ContainerCommandRequestProto as Req,
    ContainerCommandResponseProto as Resp, DatanodeBlockId, GetBlockRequestProto,
    PutBlockRequestProto, ReadChunkRequestProto, ReadChunkVersion, Type, WriteChunkRequestProto,
};
use prost::Message;
use rand::RngCore;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Size of the shared random application data the writes copy from.
const SOURCE_LEN: usize = 8 << 20;

/// Where committed blocks go (shared by the workers; called once per committed block).
pub trait BlockSink: Send + Sync {
    fn committed(&self, block: &BlockData);
}

/// Keeps nothing.
pub struct NoSink;

impl BlockSink for NoSink {
    fn committed(&self, _block: &BlockData) {}
}

/// What a phase did to blocks, counted by the workers as they go (warm-up included).
#[derive(Debug, Default)]
pub struct Tally {
    pub blocks_committed: AtomicU64,
    pub blocks_read: AtomicU64,
    pub chunks_read: AtomicU64,
    pub bytes_read: AtomicU64,
    /// Bytes whose checksums were verified and matched.
    pub bytes_verified: AtomicU64,
}

/// A block to read and, when known, the chunks it must have.
#[derive(Clone, Debug)]
pub struct Expected {
    pub id: DatanodeBlockId,
    pub chunks: Option<Vec<ChunkInfo>>,
}

impl Expected {
    pub fn of_block(b: &BlockData) -> Self {
        Self {
            id: b.block_id,
            chunks: Some(b.chunks.clone()),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.chunks
            .as_ref()
            .map_or(0, |c| c.iter().map(|c| c.len).sum())
    }
}

/// Frames `msg` for gRPC into `buf`, whose memory is taken back once the last frame is dropped
/// (a worker's frames are reused, not allocated per RPC).
fn frame_into(buf: &mut BytesMut, msg: &Req) -> Bytes {
    let len = msg.encoded_len();
    buf.clear();
    buf.reserve(5 + len);
    buf.extend_from_slice(&[0]);
    buf.extend_from_slice(&(len as u32).to_be_bytes());
    msg.encode(buf).expect("reserved enough");
    buf.split().freeze()
}

/// WriteChunk data shorter than this is framed in one buffer (copied); longer data is sent as a
/// segment of its own.
const SEGMENT_MIN: usize = 64 * 1024;

/// `ContainerCommandRequestProto.writeChunk` and `WriteChunkRequestProto.data`.
const WRITE_CHUNK_FIELD: u32 = 17;
const DATA_FIELD: u32 = 3;

/// The offset of the first top-level field numbered above `field` in an encoded message (its
/// length if there is none). prost writes fields in field-number order, so every field up to
/// `field` comes before it.
fn split_after_field(encoded: &[u8], field: u32) -> usize {
    use prost::encoding::{WireType, decode_key, decode_varint};
    let mut rest = encoded;
    while !rest.is_empty() {
        let at = encoded.len() - rest.len();
        let (number, wire) = decode_key(&mut rest).expect("prost's own encoding");
        if number > field {
            return at;
        }
        let skip = match wire {
            WireType::Varint => {
                decode_varint(&mut rest).expect("prost's own encoding");
                0
            }
            WireType::SixtyFourBit => 8,
            WireType::ThirtyTwoBit => 4,
            WireType::LengthDelimited => {
                decode_varint(&mut rest).expect("prost's own encoding") as usize
            }
            WireType::StartGroup | WireType::EndGroup => unreachable!("no groups in the proto"),
        };
        rest = &rest[skip..];
    }
    encoded.len()
}

/// Frames a WriteChunk for gRPC without copying its data: the segments are the envelope (the
/// 5-byte gRPC prefix, every field before `writeChunk.data`, and `data`'s tag and length, written
/// into `buf`), the data itself (the caller's `Bytes`), and the fields after it (empty unless
/// the request carries e.g. a piggybacked PutBlock). Concatenated, they are byte for byte prost's
/// encoding of `msg` (`write_chunk_segments_are_prosts_encoding` checks it). Requests with no or
/// little data are framed whole by [`frame_into`].
fn write_chunk_frame(buf: &mut BytesMut, mut msg: Req) -> RequestBody {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
    let data = match msg.write_chunk.as_mut() {
        Some(wc) if wc.data.as_ref().is_some_and(|d| d.len() >= SEGMENT_MIN) => {
            wc.data.take().expect("checked")
        }
        _ => return frame_into(buf, &msg).into(),
    };
    let wc = msg.write_chunk.take().expect("checked");
    // The two messages without the data field, each split where the data field goes.
    let wc_rest = wc.encode_to_vec();
    let outer_rest = msg.encode_to_vec();
    let wc_split = split_after_field(&wc_rest, DATA_FIELD);
    let outer_split = split_after_field(&outer_rest, WRITE_CHUNK_FIELD);
    let data_key_len =
        encoded_len_varint(u64::from(DATA_FIELD << 3)) + encoded_len_varint(data.len() as u64);
    let wc_len = wc_rest.len() + data_key_len + data.len();
    let msg_len = outer_rest.len()
        + encoded_len_varint(u64::from(WRITE_CHUNK_FIELD << 3))
        + encoded_len_varint(wc_len as u64)
        + wc_len;
    buf.clear();
    buf.reserve(5 + outer_split + 8 + wc_split + data_key_len);
    buf.extend_from_slice(&[0]);
    buf.extend_from_slice(&(msg_len as u32).to_be_bytes());
    buf.extend_from_slice(&outer_rest[..outer_split]);
    encode_key(WRITE_CHUNK_FIELD, WireType::LengthDelimited, buf);
    encode_varint(wc_len as u64, buf);
    buf.extend_from_slice(&wc_rest[..wc_split]);
    encode_key(DATA_FIELD, WireType::LengthDelimited, buf);
    encode_varint(data.len() as u64, buf);
    let head = buf.split().freeze();
    let tail = if wc_split == wc_rest.len() && outer_split == outer_rest.len() {
        Bytes::new()
    } else {
        Bytes::from([&wc_rest[wc_split..], &outer_rest[outer_split..]].concat())
    };
    RequestBody::new(head, data, tail)
}

fn run_base() -> i64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // 15 bits (the sign bit stays clear), never 0 so IDs are never small numbers.
    let bits = ((nanos >> 20) & 0x7fff).max(1);
    (bits as i64) << 48
}

/// `loadgen write`'s workload.
pub struct BlockWrite {
    shape: WriteShape,
    source: Bytes,
    container_id: i64,
    datanode_uuid: String,
    run_base: i64,
    /// The number of this process's first writing stream: a shard's workers follow those of
    /// the shards before it, so that no two shards write the same block.
    first_stream: usize,
    sink: Arc<dyn BlockSink>,
    pub tally: Arc<Tally>,
}

/// The first local ID of writing stream `stream` (a worker of one shard) in a run with `run_base`:
/// `run base | stream << 32`; the stream's blocks count up from there.
pub fn stream_base(run_base: i64, stream: usize) -> i64 {
    run_base | ((stream as i64 & 0xffff) << 32)
}

impl BlockWrite {
    /// Shard `shard_index`'s workers (of `threads` per shard) are writing streams
    /// `shard_index · threads …`; the caller keeps the streams of all shards below 2^16.
    pub fn for_shard(mut self, shard_index: u32, threads: usize) -> Self {
        self.first_stream = shard_index as usize * threads;
        self
    }

    pub fn new(
        shape: WriteShape,
        container_id: i64,
        datanode_uuid: &str,
        sink: Arc<dyn BlockSink>,
    ) -> Self {
        let mut v = vec![0u8; SOURCE_LEN];
        rand::rng().fill_bytes(&mut v);
        BlockWrite {
            shape,
            source: Bytes::from(v),
            container_id,
            datanode_uuid: datanode_uuid.to_string(),
            run_base: run_base(),
            first_stream: 0,
            sink,
            tally: Arc::default(),
        }
    }
}

impl Workload for BlockWrite {
    fn worker(&self, idx: usize) -> Box<dyn WorkerLoad> {
        let base = stream_base(self.run_base, self.first_stream + idx);
        Box::new(WriteWorker {
            writer: BlockWriter::new(
                self.shape.clone(),
                self.source.clone(),
                self.container_id,
                base,
            ),
            ops: Vec::new(),
            base,
            counter: 0,
            container_id: self.container_id,
            datanode_uuid: self.datanode_uuid.clone(),
            write_size: self.shape.write_size as u64,
            committing: None,
            frame: BytesMut::new(),
            sink: Arc::clone(&self.sink),
            tally: Arc::clone(&self.tally),
        })
    }
}

struct WriteWorker {
    writer: BlockWriter,
    /// The unit's requests not yet sent, last first.
    ops: Vec<BlockOp>,
    base: i64,
    counter: i64,
    container_id: i64,
    datanode_uuid: String,
    write_size: u64,
    /// The block the PutBlock in flight commits (with `eof`).
    committing: Option<BlockData>,
    frame: BytesMut,
    sink: Arc<dyn BlockSink>,
    tally: Arc<Tally>,
}

impl WriteWorker {
    fn next_local_id(&mut self) -> i64 {
        self.counter += 1;
        self.base + self.counter
    }
}

impl WorkerLoad for WriteWorker {
    fn begin(&mut self) -> bool {
        let (base, counter) = (self.base, &mut self.counter);
        self.writer.write(&mut self.ops, &mut || {
            *counter += 1;
            base + *counter
        });
        self.ops.reverse();
        true
    }

    fn next(&mut self) -> Option<Rpc> {
        let op = self.ops.pop()?;
        let mut req = Req {
            container_id: self.container_id,
            datanode_uuid: self.datanode_uuid.clone(),
            ..Default::default()
        };
        let (kind, bytes) = match op {
            BlockOp::WriteChunk { block, chunk, data } => {
                let len = data.len() as u64;
                req.cmd_type = Type::WriteChunk as i32;
                req.write_chunk = Some(WriteChunkRequestProto {
                    block_id: block,
                    chunk_data: Some(chunk),
                    data: Some(data),
                    ..Default::default()
                });
                (RpcKind::WriteChunk, len)
            }
            BlockOp::PutBlock { block, eof } => {
                self.committing = eof.then(|| block.clone());
                req.cmd_type = Type::PutBlock as i32;
                req.put_block = Some(PutBlockRequestProto {
                    block_data: block,
                    eof: Some(eof),
                    ..Default::default()
                });
                (RpcKind::PutBlock, 0)
            }
        };
        // The chunk's data goes out as its own segment (no copy); the writer's chunk buffer
        // takes that memory back for the next chunk once the request is sent and answered.
        let frame = write_chunk_frame(&mut self.frame, req);
        Some(Rpc {
            kind,
            frame,
            request_bytes: bytes,
            goodput_bytes: bytes,
            throttle_op: if kind == RpcKind::WriteChunk {
                OpKind::Write
            } else {
                OpKind::Other
            },
            throttle_bytes: bytes,
        })
    }

    fn judge(&mut self, _resp: &Resp) -> Result<u64, Failure> {
        if let Some(block) = self.committing.take() {
            self.tally.blocks_committed.fetch_add(1, Relaxed);
            self.sink.committed(&block);
        }
        Ok(0)
    }

    fn failed(&mut self) {
        self.ops.clear();
        self.committing = None;
        let id = self.next_local_id();
        self.writer.abandon(id);
    }

    fn unit_bytes(&self) -> u64 {
        self.write_size
    }

    fn close(&mut self) -> bool {
        self.writer.close(&mut self.ops);
        self.ops.reverse();
        !self.ops.is_empty()
    }
}

/// `loadgen read`'s workload.
pub struct BlockRead {
    blocks: Arc<Vec<Expected>>,
    next: Arc<AtomicUsize>,
    verify: bool,
    v1: bool,
    datanode_uuid: String,
    pub tally: Arc<Tally>,
}

impl BlockRead {
    pub fn new(blocks: Arc<Vec<Expected>>, verify: bool, v1: bool, datanode_uuid: &str) -> Self {
        BlockRead {
            blocks,
            next: Arc::default(),
            verify,
            v1,
            datanode_uuid: datanode_uuid.to_string(),
            tally: Arc::default(),
        }
    }
}

impl Workload for BlockRead {
    fn worker(&self, _idx: usize) -> Box<dyn WorkerLoad> {
        Box::new(ReadWorker {
            blocks: Arc::clone(&self.blocks),
            next: Arc::clone(&self.next),
            verify: self.verify,
            v1: self.v1,
            datanode_uuid: self.datanode_uuid.clone(),
            tally: Arc::clone(&self.tally),
            block: None,
            stage: Stage::Done,
            frame: BytesMut::new(),
        })
    }
}

enum Stage {
    /// GetBlock is to be sent.
    GetBlock,
    /// GetBlock is in flight.
    AwaitBlock,
    /// ReadChunk of `chunks[i]` is next, or in flight.
    Chunks {
        chunks: Vec<ChunkInfo>,
        i: usize,
    },
    Done,
}

struct ReadWorker {
    blocks: Arc<Vec<Expected>>,
    next: Arc<AtomicUsize>,
    verify: bool,
    v1: bool,
    datanode_uuid: String,
    tally: Arc<Tally>,
    block: Option<usize>,
    stage: Stage,
    frame: BytesMut,
}

fn same_chunk(a: &ChunkInfo, b: &ChunkInfo) -> bool {
    a.offset == b.offset && a.len == b.len && a.checksum_data == b.checksum_data
}

fn integrity(what: &'static str, message: String) -> Failure {
    Failure::new(ErrorKind::Integrity(what), message)
}

impl ReadWorker {
    fn expected(&self) -> &Expected {
        &self.blocks[self.block.expect("a block is being read")]
    }
}

impl WorkerLoad for ReadWorker {
    fn begin(&mut self) -> bool {
        let i = self.next.fetch_add(1, Relaxed);
        if i >= self.blocks.len() {
            return false;
        }
        self.block = Some(i);
        self.stage = Stage::GetBlock;
        true
    }

    fn next(&mut self) -> Option<Rpc> {
        let id = self.expected().id;
        let mut req = Req {
            container_id: id.container_id,
            datanode_uuid: self.datanode_uuid.clone(),
            ..Default::default()
        };
        let (kind, len) = match &mut self.stage {
            Stage::GetBlock => {
                req.cmd_type = Type::GetBlock as i32;
                req.get_block = Some(GetBlockRequestProto {
                    block_id: id,
                    ..Default::default()
                });
                self.stage = Stage::AwaitBlock;
                (RpcKind::GetBlock, 0)
            }
            Stage::Chunks { chunks, i } if *i < chunks.len() => {
                let chunk = chunks[*i].clone();
                let len = chunk.len;
                req.cmd_type = Type::ReadChunk as i32;
                req.read_chunk = Some(ReadChunkRequestProto {
                    block_id: id,
                    chunk_data: chunk,
                    read_chunk_version: self.v1.then_some(ReadChunkVersion::V1 as i32),
                });
                (RpcKind::ReadChunk, len)
            }
            _ => return None,
        };
        let frame = frame_into(&mut self.frame, &req).into();
        Some(Rpc {
            kind,
            frame,
            request_bytes: 0,
            goodput_bytes: len,
            throttle_op: if kind == RpcKind::ReadChunk {
                OpKind::Read
            } else {
                OpKind::Other
            },
            throttle_bytes: len,
        })
    }

    fn judge(&mut self, resp: &Resp) -> Result<u64, Failure> {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::AwaitBlock => {
                let stored = resp
                    .get_block
                    .as_ref()
                    .map(|g| g.block_data.clone())
                    .unwrap_or_default();
                self.tally.blocks_read.fetch_add(1, Relaxed);
                let expected = self.expected();
                if let Some(chunks) = &expected.chunks
                    && (chunks.len() != stored.chunks.len()
                        || chunks
                            .iter()
                            .zip(&stored.chunks)
                            .any(|(a, b)| !same_chunk(a, b)))
                {
                    return Err(integrity(
                        "BLOCK_MISMATCH",
                        format!(
                            "block {}/{}: GetBlock's chunks differ from those written",
                            expected.id.container_id, expected.id.local_id
                        ),
                    ));
                }
                self.stage = Stage::Chunks {
                    chunks: stored.chunks,
                    i: 0,
                };
                Ok(0)
            }
            Stage::Chunks { chunks, i } => {
                let chunk = &chunks[i];
                let buffers: Vec<Bytes> = match resp
                    .read_chunk
                    .as_ref()
                    .and_then(|r| r.response_data.as_ref())
                {
                    Some(ResponseData::Data(d)) => vec![d.clone()],
                    Some(ResponseData::DataBuffers(b)) => b.buffers.clone(),
                    None => Vec::new(),
                };
                let len: u64 = buffers.iter().map(|b| b.len() as u64).sum();
                self.tally.chunks_read.fetch_add(1, Relaxed);
                self.tally.bytes_read.fetch_add(len, Relaxed);
                let id = self.expected().id;
                let (offset, want, checksums) =
                    (chunk.offset, chunk.len, chunk.checksum_data.clone());
                self.stage = Stage::Chunks { chunks, i: i + 1 };
                if len != want {
                    return Err(integrity(
                        "LENGTH_MISMATCH",
                        format!(
                            "block {}/{} chunk at offset {offset}: {len} bytes, not {want}",
                            id.container_id, id.local_id
                        ),
                    ));
                }
                if self.verify {
                    match common::checksum::verify_buffers(&buffers, 0, &checksums) {
                        Ok(()) if checksums.r#type != ChecksumType::None as i32 => {
                            self.tally.bytes_verified.fetch_add(len, Relaxed);
                        }
                        Ok(()) => {}
                        Err(e) => {
                            return Err(integrity(
                                "CHECKSUM_MISMATCH",
                                format!(
                                    "block {}/{} chunk at offset {offset}: {e}",
                                    id.container_id, id.local_id
                                ),
                            ));
                        }
                    }
                }
                Ok(len)
            }
            other => {
                self.stage = other;
                Ok(0)
            }
        }
    }

    fn failed(&mut self) {
        self.stage = Stage::Done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::checksum::Checksum;

    fn chunk_request(data: Option<Bytes>) -> Req {
        let checksum_data = match &data {
            Some(d) => Checksum::new(ChecksumType::Crc32, 16 * 1024)
                .unwrap()
                .compute(d),
            None => Default::default(),
        };
        Req {
            cmd_type: Type::WriteChunk as i32,
            container_id: 7,
            datanode_uuid: "c0ffee00-0000-4000-8000-000000000001".into(),
            write_chunk: Some(WriteChunkRequestProto {
                block_id: DatanodeBlockId {
                    container_id: 7,
                    local_id: 1 << 48 | 3,
                    block_commit_sequence_id: Some(0),
                    ..Default::default()
                },
                chunk_data: Some(ChunkInfo {
                    chunk_name: "x_chunk_1".into(),
                    offset: 4 << 20,
                    len: data.as_ref().map_or(0, |d| d.len() as u64),
                    checksum_data,
                    ..Default::default()
                }),
                data,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn prost_frame(msg: &Req) -> Vec<u8> {
        let encoded = msg.encode_to_vec();
        let mut v = vec![0];
        v.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        v.extend_from_slice(&encoded);
        v
    }

    fn data(len: usize) -> Bytes {
        Bytes::from((0..len).map(|i| (i * 7 % 256) as u8).collect::<Vec<u8>>())
    }

    /// The local IDs of the blocks worker `idx` of `w` writes in `writes` application writes.
    fn local_ids(w: &BlockWrite, idx: usize, writes: usize) -> std::collections::BTreeSet<i64> {
        use prost::Message;
        let mut worker = w.worker(idx);
        let mut ids = std::collections::BTreeSet::new();
        for _ in 0..writes {
            assert!(worker.begin());
            while let Some(rpc) = worker.next() {
                let frame = rpc.frame.to_vec();
                let req = Req::decode(&frame[5..]).unwrap();
                if let Some(wc) = req.write_chunk {
                    ids.insert(wc.block_id.local_id);
                }
            }
        }
        ids
    }

    #[test]
    fn no_two_shards_write_the_same_block_even_with_the_same_clock() {
        let shape = WriteShape {
            write_size: 1024,
            chunk_size: 1024,
            // A new block after every write.
            block_size: 1024,
            flush_size: 1024,
            checksum: Checksum::new(ChecksumType::None, 1024).unwrap(),
            mode: crate::workload::block_writer::ChecksumMode::Incremental,
        };
        let (count, threads) = (4u32, 3usize);
        let mut seen: std::collections::BTreeMap<i64, (u32, usize)> = Default::default();
        for shard in 0..count {
            let mut w =
                BlockWrite::new(shape.clone(), 7, "dn", Arc::new(NoSink)).for_shard(shard, threads);
            // The worst case: every shard's clock gives the same run base.
            w.run_base = 5 << 48;
            for idx in 0..threads {
                let ids = local_ids(&w, idx, 20);
                assert!(ids.len() >= 20, "a block per write: {}", ids.len());
                for id in ids {
                    if let Some(other) = seen.insert(id, (shard, idx)) {
                        panic!(
                            "block {id} written by shard/worker {other:?} and {:?}",
                            (shard, idx)
                        );
                    }
                }
            }
        }
        assert!(seen.len() >= 20 * threads * count as usize);
        // The unsharded run numbers its workers from 0, as before.
        assert_eq!(stream_base(5 << 48, 2), 5 << 48 | 2 << 32);
    }

    #[test]
    fn write_chunk_segments_are_prosts_encoding() {
        let mut requests = Vec::new();
        // Data sizes around the varint boundaries of its length (2^14, 2^21) and the segment
        // threshold, a full 4 MB chunk, a small chunk (framed whole), empty and absent data.
        for len in [
            4 << 20,
            SEGMENT_MIN - 1,
            SEGMENT_MIN,
            (1 << 21) - 1,
            1 << 21,
            (1 << 21) + 1,
            100,
            0,
        ] {
            requests.push(chunk_request(Some(data(len))));
        }
        requests.push(chunk_request(None));
        // A piggybacked PutBlock and the auto-create flag after `data`, and fields of the outer
        // message on both sides of `writeChunk`.
        let mut r = chunk_request(Some(data(300_000)));
        let wc = r.write_chunk.as_mut().unwrap();
        wc.block = Some(PutBlockRequestProto {
            block_data: BlockData {
                block_id: wc.block_id,
                chunks: vec![wc.chunk_data.clone().unwrap()],
                size: Some(300_000),
                ..Default::default()
            },
            eof: Some(true),
            ..Default::default()
        });
        wc.container_auto_create = Some(true);
        r.trace_id = Some("trace".into());
        r.pipeline_id = Some("pipeline".into());
        r.encoded_token = Some("token".into());
        r.version = Some(3);
        r.client_id = Some(Bytes::from_static(b"client"));
        r.call_id = Some(99);
        requests.push(r);
        // A PutBlock goes through the same function, framed whole.
        requests.push(Req {
            cmd_type: Type::PutBlock as i32,
            container_id: 7,
            datanode_uuid: "u".into(),
            put_block: Some(PutBlockRequestProto::default()),
            ..Default::default()
        });

        let mut buf = BytesMut::new();
        for req in requests {
            let expected = prost_frame(&req);
            let payload = req.write_chunk.as_ref().and_then(|w| w.data.clone());
            let body = write_chunk_frame(&mut buf, req);
            assert_eq!(body.to_vec(), expected, "{} bytes of data", body.len());
            match payload {
                Some(d) if d.len() >= SEGMENT_MIN => {
                    // The data segment is the caller's memory, and the envelope is small.
                    assert_eq!(body.parts()[1].as_ptr(), d.as_ptr());
                    assert_eq!(body.parts()[1].len(), d.len());
                    assert!(body.parts()[0].len() < 2048, "{}", body.parts()[0].len());
                }
                _ => assert!(body.as_single().is_some()),
            }
        }
    }

    #[test]
    fn split_after_field_finds_where_the_larger_numbers_start() {
        let msg = chunk_request(None);
        let encoded = msg.encode_to_vec();
        assert_eq!(split_after_field(&encoded, 100), encoded.len());
        assert_eq!(split_after_field(&encoded, 0), 0);
        // cmdType (1) and containerID (3) come before datanodeUuid (4).
        assert_eq!(split_after_field(&encoded, 3), 1 + 1 + 1 + 1);
    }
}

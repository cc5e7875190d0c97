//! `loadgen read`: GetBlock, then ReadChunk of every chunk GetBlock lists, each chunk's data
//! verified against the checksums GetBlock returned (`--verify`, on by default). When the
//! expected chunk list is known (blocks written in this run, or a manifest), GetBlock's answer
//! must match it too. Mismatches are data-integrity errors, reported under their own kinds:
//!
//! - `integrity:CHECKSUM_MISMATCH`: a chunk's data does not match its stored checksums;
//! - `integrity:LENGTH_MISMATCH`: ReadChunk returned another number of bytes than asked for;
//! - `integrity:BLOCK_MISMATCH`: GetBlock's chunk list (offsets, lengths, checksums) differs
//!   from what was written.
//!
//! Without `--manifest`, `read` first writes a data set (`-n`/`--duration` and the write flags,
//! unmeasured in the read report) and reads it back. Every listed block is read once.

use super::args::{ReadArgs, ReadVersion};
use super::report::Report;
use super::{Caller, Conn, GoodputSeries, Op, Totals};
use crate::UsageError;
use crate::throttle::OpKind;
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::{
    BlockData, ChecksumType, ChunkInfo, ContainerCommandRequestProto as Req, DatanodeBlockId,
    GetBlockRequestProto, ReadChunkRequestProto, ReadChunkVersion, Type,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
}

struct ReadCtx {
    blocks: Vec<Expected>,
    next: AtomicUsize,
    verify: bool,
    version: ReadVersion,
    datanode_uuid: String,
}

fn same_chunk(a: &ChunkInfo, b: &ChunkInfo) -> bool {
    a.offset == b.offset && a.len == b.len && a.checksum_data == b.checksum_data
}

async fn read_block(caller: &mut Caller, ctx: &ReadCtx, block: &Expected, t: &mut Totals) {
    let base = Req {
        container_id: block.id.container_id,
        datanode_uuid: ctx.datanode_uuid.clone(),
        ..Default::default()
    };
    let mut get = base.clone();
    get.cmd_type = Type::GetBlock as i32;
    get.get_block = Some(GetBlockRequestProto {
        block_id: block.id,
        ..Default::default()
    });
    let start = Instant::now();
    let stored = match caller.call(get, OpKind::Other, 0, t).await {
        Ok(resp) => {
            t.record(Op::GetBlock, start.elapsed(), 0);
            resp.get_block.map(|g| g.block_data).unwrap_or_default()
        }
        Err(e) => {
            t.error(e);
            return;
        }
    };
    if let Some(expected) = &block.chunks
        && (expected.len() != stored.chunks.len()
            || expected
                .iter()
                .zip(&stored.chunks)
                .any(|(a, b)| !same_chunk(a, b)))
    {
        t.error("integrity:BLOCK_MISMATCH");
    }
    t.blocks_read += 1;
    for chunk in &stored.chunks {
        let mut read = base.clone();
        read.cmd_type = Type::ReadChunk as i32;
        read.read_chunk = Some(ReadChunkRequestProto {
            block_id: block.id,
            chunk_data: chunk.clone(),
            read_chunk_version: (ctx.version == ReadVersion::V1)
                .then_some(ReadChunkVersion::V1 as i32),
        });
        let start = Instant::now();
        let resp = match caller.call(read, OpKind::Read, chunk.len, t).await {
            Ok(r) => r,
            Err(e) => {
                t.error(e);
                continue;
            }
        };
        let elapsed = start.elapsed();
        let buffers = match resp.read_chunk.and_then(|r| r.response_data) {
            Some(ResponseData::Data(d)) => vec![d],
            Some(ResponseData::DataBuffers(b)) => b.buffers,
            None => Vec::new(),
        };
        let len: u64 = buffers.iter().map(|b| b.len() as u64).sum();
        t.record(Op::ReadChunk, elapsed, len);
        t.chunks_read += 1;
        t.bytes_read += len;
        if len != chunk.len {
            t.error("integrity:LENGTH_MISMATCH");
            continue;
        }
        if ctx.verify {
            match common::checksum::verify_buffers(&buffers, 0, &chunk.checksum_data) {
                Ok(()) if chunk.checksum_data.r#type != ChecksumType::None as i32 => {
                    t.bytes_verified += len;
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(
                        "block {}/{} chunk at offset {}: {e}",
                        block.id.container_id,
                        block.id.local_id,
                        chunk.offset
                    );
                    t.error("integrity:CHECKSUM_MISMATCH");
                }
            }
        }
    }
}

async fn worker(mut caller: Caller, ctx: Arc<ReadCtx>) -> Totals {
    let mut t = Totals::default();
    loop {
        let i = ctx.next.fetch_add(1, Ordering::Relaxed);
        let Some(block) = ctx.blocks.get(i) else {
            return t;
        };
        read_block(&mut caller, &ctx, block, &mut t).await;
    }
}

/// The read phase over `blocks`.
pub(crate) async fn phase(
    a: &super::args::ConnArgs,
    blocks: Vec<Expected>,
    verify: bool,
    version: ReadVersion,
    conns: &[Conn],
) -> (Totals, Duration) {
    let ctx = Arc::new(ReadCtx {
        blocks,
        next: AtomicUsize::new(0),
        verify,
        version,
        datanode_uuid: a.datanode_uuid.clone(),
    });
    let start = Instant::now();
    let series = GoodputSeries::start();
    let tasks: Vec<_> = (0..a.threads as usize)
        .map(|i| {
            let caller = Caller::new(&conns[i % conns.len()], a, &series);
            tokio::spawn(worker(caller, ctx.clone()))
        })
        .collect();
    let mut totals = super::join_workers(tasks).await;
    totals.goodput_series = series.take();
    (totals, start.elapsed())
}

pub fn run(a: &ReadArgs) -> Result<super::BlockSummary, UsageError> {
    let listed = match &a.manifest {
        Some(path) => Some(super::manifest::read(path).map_err(UsageError)?),
        None => None,
    };
    let expected: Option<Vec<Expected>> = match &listed {
        Some(blocks) => Some(
            blocks
                .iter()
                .map(|b| {
                    Ok(Expected {
                        id: b.block_id(),
                        chunks: Some(b.chunk_infos().map_err(UsageError)?),
                    })
                })
                .collect::<Result<_, UsageError>>()?,
        ),
        None => None,
    };
    let shape = super::write::shape_of(&a.shape)?;
    let output = super::report::open_output(&a.report)?;
    let target = super::target(&a.conn, true)?;
    let rt = super::runtime(&a.conn)?;
    let (write, read) = rt.block_on(async {
        let conns = super::connect(&a.conn, &target.uri).await?;
        let (blocks, write) = match expected {
            Some(e) => (e, None),
            None => {
                let (w, elapsed) = super::write::phase(&a.conn, shape, &conns).await;
                let blocks = w.blocks.iter().map(Expected::of_block).collect();
                (blocks, Some((w, elapsed)))
            }
        };
        let read = phase(&a.conn, blocks, a.verify, a.read_version, &conns).await;
        Ok::<_, UsageError>((write, read))
    })?;
    let shape_report = a
        .manifest
        .is_none()
        .then(|| super::write::shape_report(&a.shape));
    let report = Report::new(
        "read",
        &target.description,
        &a.conn,
        shape_report,
        write,
        Some(read),
    );
    super::report::finish(report, &a.report, output)
}

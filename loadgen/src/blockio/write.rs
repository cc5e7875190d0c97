//! `loadgen write`: every worker is one Ozone output stream writing its own blocks.
//!
//! `-n` counts application write() calls over all workers; `--duration` stops workers from
//! starting new writes. Either way each worker then closes its stream (the partial chunk and a
//! final PutBlock with eof), so every block written is committed and can be read back.
//!
//! Local IDs: `run base | worker << 32 | counter`, the run base being 15 bits of the clock in the
//! top bits, so runs against one DataNode do not overwrite each other's blocks.

use super::args::{WriteArgs, checksum_name, mode_name};
use super::report::{Report, ShapeReport};
use super::{Caller, Conn, GoodputSeries, Op, Totals};
use crate::UsageError;
use crate::throttle::OpKind;
use crate::workload::block_writer::{BlockOp, BlockWriter, WriteShape};
use bytes::Bytes;
use common::checksum::Checksum;
use common::proto::{
    ContainerCommandRequestProto as Req, PutBlockRequestProto, Type, WriteChunkRequestProto,
};
use rand::RngCore;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Size of the shared random application data the writes copy from.
const SOURCE_LEN: usize = 8 << 20;

pub(crate) struct WriteCtx {
    pub shape: WriteShape,
    pub source: Bytes,
    pub container_id: i64,
    pub datanode_uuid: String,
    pub stop: AtomicBool,
    /// Application writes still to start (with -n).
    pub budget: Option<AtomicU64>,
    pub deadline: Option<Instant>,
    pub run_base: i64,
}

pub fn shape_of(a: &super::args::ShapeArgs) -> Result<WriteShape, UsageError> {
    let checksum = Checksum::new(a.checksum, a.bytes_per_checksum as u32)
        .map_err(|e| UsageError(format!("--bytes-per-checksum: {e}")))?;
    Ok(WriteShape {
        write_size: a.write_size as usize,
        chunk_size: a.chunk_size as usize,
        block_size: a.block_size,
        flush_size: a.flush_size,
        checksum,
        mode: a.checksum_mode,
    })
}

pub fn shape_report(a: &super::args::ShapeArgs) -> ShapeReport {
    ShapeReport {
        write_size: a.write_size,
        chunk_size: a.chunk_size,
        bytes_per_checksum: a.bytes_per_checksum,
        checksum: checksum_name(a.checksum).to_string(),
        checksum_mode: mode_name(a.checksum_mode).to_string(),
        block_size: a.block_size,
        flush_size: a.flush_size,
    }
}

fn run_base() -> i64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // 15 bits (the sign bit stays clear), never 0 so IDs are never small numbers.
    let bits = ((nanos >> 20) & 0x7fff).max(1);
    (bits as i64) << 48
}

fn request(ctx: &WriteCtx, op: BlockOp) -> (Op, Req, u64, Option<common::proto::BlockData>) {
    let mut req = Req {
        container_id: ctx.container_id,
        datanode_uuid: ctx.datanode_uuid.clone(),
        ..Default::default()
    };
    match op {
        BlockOp::WriteChunk { block, chunk, data } => {
            let len = data.len() as u64;
            req.cmd_type = Type::WriteChunk as i32;
            req.write_chunk = Some(WriteChunkRequestProto {
                block_id: block,
                chunk_data: Some(chunk),
                data: Some(data),
                ..Default::default()
            });
            (Op::WriteChunk, req, len, None)
        }
        BlockOp::PutBlock { block, eof } => {
            let committed = eof.then(|| block.clone());
            req.cmd_type = Type::PutBlock as i32;
            req.put_block = Some(PutBlockRequestProto {
                block_data: block,
                eof: Some(eof),
                ..Default::default()
            });
            (Op::PutBlock, req, 0, committed)
        }
    }
}

/// Sends `ops` in order; false after the first failure.
async fn send_all(
    caller: &mut Caller,
    ctx: &WriteCtx,
    ops: &mut Vec<BlockOp>,
    t: &mut Totals,
) -> bool {
    for op in ops.drain(..) {
        let (kind, req, bytes, committed) = request(ctx, op);
        let throttle_op = match kind {
            Op::WriteChunk => OpKind::Write,
            _ => OpKind::Other,
        };
        // From the first attempt: retries and throttle delays are part of the latency.
        let start = Instant::now();
        match caller.call(req, throttle_op, bytes, t).await {
            Ok(_) => {
                t.record(kind, start.elapsed(), bytes);
                if let Some(b) = committed {
                    t.blocks.push(b);
                }
            }
            Err(e) => {
                t.error(e);
                return false;
            }
        }
    }
    true
}

fn take_write(ctx: &WriteCtx) -> bool {
    if ctx.stop.load(Ordering::Relaxed) {
        return false;
    }
    if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
        return false;
    }
    match &ctx.budget {
        Some(b) => b
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok(),
        None => true,
    }
}

pub(crate) async fn worker(index: usize, mut caller: Caller, ctx: Arc<WriteCtx>) -> Totals {
    let mut t = Totals::default();
    let base = ctx.run_base | ((index as i64) << 32);
    let mut counter = 0i64;
    let mut writer = BlockWriter::new(
        ctx.shape.clone(),
        ctx.source.clone(),
        ctx.container_id,
        base,
    );
    let mut ops = Vec::new();
    let write_size = ctx.shape.write_size as u64;
    while take_write(&ctx) {
        let start = Instant::now();
        writer.write(&mut ops, &mut || {
            counter += 1;
            base + counter
        });
        if !send_all(&mut caller, &ctx, &mut ops, &mut t).await {
            ctx.stop.store(true, Ordering::Relaxed);
            return t;
        }
        t.record(Op::Write, start.elapsed(), write_size);
    }
    writer.close(&mut ops);
    if !send_all(&mut caller, &ctx, &mut ops, &mut t).await {
        ctx.stop.store(true, Ordering::Relaxed);
    }
    t
}

/// Random application data, generated once and shared by every worker.
pub fn source() -> Bytes {
    let mut v = vec![0u8; SOURCE_LEN];
    rand::rng().fill_bytes(&mut v);
    Bytes::from(v)
}

/// The write phase: returns what the workers measured and how long it took.
pub(crate) async fn phase(
    a: &super::args::ConnArgs,
    shape: WriteShape,
    conns: &[Conn],
) -> (Totals, Duration) {
    let number = match (a.number_of_tests, a.duration) {
        (_, Some(_)) => None,
        (Some(n), None) => Some(n),
        (None, None) => Some(1000),
    };
    let ctx = Arc::new(WriteCtx {
        shape,
        source: source(),
        container_id: a.container_id,
        datanode_uuid: a.datanode_uuid.clone(),
        stop: AtomicBool::new(false),
        budget: number.map(AtomicU64::new),
        deadline: a.duration.map(|d| Instant::now() + d),
        run_base: run_base(),
    });
    let start = Instant::now();
    let series = GoodputSeries::start();
    let tasks: Vec<_> = (0..a.threads as usize)
        .map(|i| {
            let caller = Caller::new(&conns[i % conns.len()], a, &series);
            tokio::spawn(worker(i, caller, ctx.clone()))
        })
        .collect();
    let mut totals = super::join_workers(tasks).await;
    totals.goodput_series = series.take();
    (totals, start.elapsed())
}

pub fn run(a: &WriteArgs) -> Result<super::BlockSummary, UsageError> {
    let shape = shape_of(&a.shape)?;
    let output = super::report::open_output(&a.report)?;
    let target = super::target(&a.conn, a.then_read)?;
    let rt = super::runtime(&a.conn)?;
    let (write, write_elapsed, read) = rt.block_on(async {
        let conns = super::connect(&a.conn, &target.uri).await?;
        let (write, elapsed) = phase(&a.conn, shape, &conns).await;
        let read = if a.then_read && write.failures() == 0 {
            let blocks = write
                .blocks
                .iter()
                .map(super::read::Expected::of_block)
                .collect();
            Some(super::read::phase(&a.conn, blocks, true, a.read_version, &conns).await)
        } else {
            None
        };
        Ok::<_, UsageError>((write, elapsed, read))
    })?;
    if let Some(path) = &a.manifest {
        let blocks: Vec<_> = write
            .blocks
            .iter()
            .map(super::manifest::ManifestBlock::from_block)
            .collect();
        let config = serde_json::to_value(shape_report(&a.shape)).unwrap_or_default();
        super::manifest::write(path, config, &blocks)
            .map_err(|e| UsageError(format!("--manifest {}: {e}", path.display())))?;
    }
    let report = Report::new(
        "write",
        &target.description,
        &a.conn,
        Some(shape_report(&a.shape)),
        Some((write, write_elapsed)),
        read,
    );
    super::report::finish(report, &a.report, output)
}

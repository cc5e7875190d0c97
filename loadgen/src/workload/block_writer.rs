//! What Ozone's `BlockOutputStream` sends for a stream of application writes: the application
//! calls `write(buf)` with `--write-size` bytes; the bytes are copied into the current chunk buffer
//! (`--chunk-size`, 4 MB); a full chunk goes out as a WriteChunk with its ChecksumData (one
//! checksum per `--bytes-per-checksum` window); every `--flush-size` bytes (16 MB) and at the end
//! of each block (`--block-size`, 256 MB) a PutBlock commits the chunks written so far, the last
//! one with `eof`. Offsets are block-relative and contiguous.
//!
//! `--checksum-mode` is HDDS-15612's comparison: `incremental` feeds each application write into a
//! running checksum right after copying it, while the bytes are cache-hot; `at-flush` computes the
//! whole chunk's checksums when the chunk is sent, as Ozone did before the patch. Both produce the
//! same ChecksumData.
//!
//! The chunk buffer is reused: a new chunk starts with `BytesMut::reserve`, which takes the memory
//! of the last chunk back once its request has been dropped, so a long run allocates no payloads
//! (`chunk_buffer_is_reused` checks it).

use bytes::{Bytes, BytesMut};
use common::checksum::{Checksum, RunningChecksum};
use common::proto::{BlockData, ChecksumData, ChecksumType, ChunkInfo, DatanodeBlockId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumMode {
    Incremental,
    AtFlush,
}

impl std::str::FromStr for ChecksumMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "incremental" => Ok(Self::Incremental),
            "at-flush" => Ok(Self::AtFlush),
            _ => Err(format!("'{s}' is not incremental or at-flush")),
        }
    }
}

impl ChecksumMode {
    pub fn name(self) -> &'static str {
        match self {
            ChecksumMode::Incremental => "incremental",
            ChecksumMode::AtFlush => "at-flush",
        }
    }
}

/// The name Ozone uses for a checksum type (`CRC32`).
pub fn checksum_name(t: ChecksumType) -> &'static str {
    match t {
        ChecksumType::None => "NONE",
        ChecksumType::Crc32 => "CRC32",
        ChecksumType::Crc32c => "CRC32C",
        ChecksumType::Sha256 => "SHA256",
        ChecksumType::Md5 => "MD5",
    }
}

/// A checksum type by its name, in any case.
pub fn checksum_type_of(s: &str) -> Result<ChecksumType, String> {
    match s.to_ascii_uppercase().as_str() {
        "CRC32" => Ok(ChecksumType::Crc32),
        "CRC32C" => Ok(ChecksumType::Crc32c),
        "SHA256" => Ok(ChecksumType::Sha256),
        "MD5" => Ok(ChecksumType::Md5),
        "NONE" => Ok(ChecksumType::None),
        _ => Err(format!(
            "'{s}' is not one of CRC32, CRC32C, SHA256, MD5, NONE"
        )),
    }
}

#[derive(Clone, Debug)]
pub struct WriteShape {
    pub write_size: usize,
    pub chunk_size: usize,
    pub block_size: u64,
    pub flush_size: u64,
    pub checksum: Checksum,
    pub mode: ChecksumMode,
}

/// One request the stream sends.
#[derive(Clone, Debug)]
pub enum BlockOp {
    WriteChunk {
        block: DatanodeBlockId,
        chunk: ChunkInfo,
        data: Bytes,
    },
    PutBlock {
        block: BlockData,
        eof: bool,
    },
}

pub struct BlockWriter {
    shape: WriteShape,
    /// Application data: writes copy from it, round robin.
    source: Bytes,
    source_pos: usize,
    container_id: i64,
    local_id: i64,
    /// Bytes of this block already sent in WriteChunks.
    block_sent: u64,
    /// Bytes written since the last PutBlock.
    since_flush: u64,
    chunks: Vec<ChunkInfo>,
    buffer: BytesMut,
    running: RunningChecksum,
}

impl BlockWriter {
    /// A writer of blocks in `container_id`, the first with local ID `first_local_id`; each new
    /// block takes the next local ID from `next_local_id`.
    pub fn new(shape: WriteShape, source: Bytes, container_id: i64, first_local_id: i64) -> Self {
        assert!(
            !source.is_empty(),
            "application data source must not be empty"
        );
        let running = shape.checksum.running();
        Self {
            buffer: BytesMut::with_capacity(shape.chunk_size),
            shape,
            source,
            source_pos: 0,
            container_id,
            local_id: first_local_id,
            block_sent: 0,
            since_flush: 0,
            chunks: Vec::new(),
            running,
        }
    }

    pub fn block_id(&self) -> DatanodeBlockId {
        DatanodeBlockId {
            container_id: self.container_id,
            local_id: self.local_id,
            ..Default::default()
        }
    }

    /// One application `write()` of `write_size` bytes; pushes the requests that become due.
    /// `next_local_id` gives the local ID of a new block when this one is full.
    pub fn write(&mut self, out: &mut Vec<BlockOp>, next_local_id: &mut dyn FnMut() -> i64) {
        let mut remaining = self.shape.write_size;
        while remaining > 0 {
            let block_left = self.shape.block_size - self.block_sent - self.buffer.len() as u64;
            let room = (self.shape.chunk_size - self.buffer.len()).min(block_left as usize);
            let n = remaining.min(room);
            self.copy_in(n);
            remaining -= n;
            self.since_flush += n as u64;
            let block_full = self.block_sent + self.buffer.len() as u64 == self.shape.block_size;
            if self.buffer.len() == self.shape.chunk_size || block_full {
                out.push(self.send_chunk());
            }
            if block_full {
                out.push(self.put_block(true));
                self.local_id = next_local_id();
                self.block_sent = 0;
                self.chunks.clear();
            } else if self.since_flush >= self.shape.flush_size {
                if !self.buffer.is_empty() {
                    out.push(self.send_chunk());
                }
                out.push(self.put_block(false));
            }
        }
    }

    /// After a failed request the block cannot be completed: it is left uncommitted and the
    /// stream goes on with a new block, `local_id`.
    pub fn abandon(&mut self, local_id: i64) {
        self.buffer.clear();
        self.running = self.shape.checksum.running();
        self.local_id = local_id;
        self.block_sent = 0;
        self.since_flush = 0;
        self.chunks.clear();
    }

    /// `close()`: the partial chunk and a final PutBlock with `eof`.
    pub fn close(&mut self, out: &mut Vec<BlockOp>) {
        if !self.buffer.is_empty() {
            out.push(self.send_chunk());
        }
        if !self.chunks.is_empty() {
            out.push(self.put_block(true));
        }
    }

    fn copy_in(&mut self, mut n: usize) {
        if self.buffer.is_empty() && self.buffer.capacity() < self.shape.chunk_size {
            // A new chunk: by now the last chunk's request has been encoded and dropped, so this
            // takes its memory back instead of allocating (the buffer is reused).
            self.buffer.reserve(self.shape.chunk_size);
        }
        while n > 0 {
            let take = n.min(self.source.len() - self.source_pos);
            let slice = &self.source[self.source_pos..self.source_pos + take];
            self.buffer.extend_from_slice(slice);
            if self.shape.mode == ChecksumMode::Incremental {
                // Right after the copy, while the bytes are in cache (HDDS-15612).
                self.running.update(slice);
            }
            self.source_pos = (self.source_pos + take) % self.source.len();
            n -= take;
        }
    }

    fn send_chunk(&mut self) -> BlockOp {
        let data = self.buffer.split().freeze();
        let checksum_data: ChecksumData = match self.shape.mode {
            ChecksumMode::Incremental => self.running.finish_reset(),
            ChecksumMode::AtFlush => self.shape.checksum.compute(&data),
        };
        let chunk = ChunkInfo {
            chunk_name: format!("{}_chunk_{}", self.local_id, self.chunks.len() + 1),
            offset: self.block_sent,
            len: data.len() as u64,
            checksum_data,
            ..Default::default()
        };
        self.block_sent += data.len() as u64;
        self.chunks.push(chunk.clone());
        BlockOp::WriteChunk {
            block: self.block_id(),
            chunk,
            data,
        }
    }

    fn put_block(&mut self, eof: bool) -> BlockOp {
        self.since_flush = 0;
        let block = BlockData {
            block_id: self.block_id(),
            chunks: self.chunks.clone(),
            size: Some(self.block_sent as i64),
            ..Default::default()
        };
        BlockOp::PutBlock { block, eof }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::proto::ChecksumType;

    fn shape(write: usize, chunk: usize, block: u64, flush: u64, mode: ChecksumMode) -> WriteShape {
        WriteShape {
            write_size: write,
            chunk_size: chunk,
            block_size: block,
            flush_size: flush,
            checksum: Checksum::new(ChecksumType::Crc32, 16).unwrap(),
            mode,
        }
    }

    fn run(shape: WriteShape, writes: usize) -> Vec<BlockOp> {
        let source = Bytes::from((0..=250u8).collect::<Vec<u8>>());
        let mut w = BlockWriter::new(shape, source, 1, 100);
        let mut next = 101;
        let mut ops = Vec::new();
        for _ in 0..writes {
            w.write(&mut ops, &mut || {
                next += 1;
                next - 1
            });
        }
        w.close(&mut ops);
        ops
    }

    #[test]
    fn chunks_are_contiguous_and_put_blocks_come_at_flush_and_block_end() {
        // 24-byte writes, 64-byte chunks, 128-byte flushes, 256-byte blocks, 20 writes = 480 B.
        let ops = run(shape(24, 64, 256, 128, ChecksumMode::Incremental), 20);
        let mut expected_offset = std::collections::HashMap::new();
        let mut total = 0;
        let mut put_blocks = Vec::new();
        for op in &ops {
            match op {
                BlockOp::WriteChunk { block, chunk, data } => {
                    let next = expected_offset.entry(block.local_id).or_insert(0u64);
                    assert_eq!(chunk.offset, *next);
                    assert_eq!(chunk.len, data.len() as u64);
                    assert!(data.len() <= 64);
                    common::checksum::verify(data, &chunk.checksum_data).unwrap();
                    *next += chunk.len;
                    total += data.len();
                }
                BlockOp::PutBlock { block, eof } => {
                    let sum: u64 = block.chunks.iter().map(|c| c.len).sum();
                    assert_eq!(block.size, Some(sum as i64));
                    assert_eq!(sum, expected_offset[&block.block_id.local_id]);
                    put_blocks.push((block.block_id.local_id, sum, *eof));
                }
            }
        }
        assert_eq!(total, 480);
        assert_eq!(
            put_blocks,
            vec![
                (100, 128, false),
                (100, 256, true),
                (101, 128, false),
                (101, 224, true)
            ]
        );
    }

    #[test]
    fn incremental_and_at_flush_give_the_same_checksums() {
        let a = run(
            shape(100, 1000, 10_000, 4000, ChecksumMode::Incremental),
            37,
        );
        let b = run(shape(100, 1000, 10_000, 4000, ChecksumMode::AtFlush), 37);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            if let (
                BlockOp::WriteChunk {
                    chunk: c1,
                    data: d1,
                    ..
                },
                BlockOp::WriteChunk {
                    chunk: c2,
                    data: d2,
                    ..
                },
            ) = (x, y)
            {
                assert_eq!(c1, c2);
                assert_eq!(d1, d2);
            }
        }
    }

    #[test]
    fn chunk_buffer_is_reused() {
        let source = Bytes::from(vec![1u8; 1000]);
        let mut w = BlockWriter::new(
            shape(100, 400, 1 << 20, 1 << 20, ChecksumMode::Incremental),
            source,
            1,
            1,
        );
        let mut ops = Vec::new();
        let mut first: Option<*const u8> = None;
        for _ in 0..40 {
            w.write(&mut ops, &mut || 2);
            for op in ops.drain(..) {
                if let BlockOp::WriteChunk { data, .. } = op {
                    let p = data.as_ptr();
                    assert_eq!(*first.get_or_insert(p), p, "every chunk in the same memory");
                }
            }
        }
    }

    #[test]
    fn writes_larger_than_a_chunk_split_across_chunks() {
        let ops = run(shape(150, 64, 1 << 20, 1 << 20, ChecksumMode::AtFlush), 2);
        let lens: Vec<u64> = ops
            .iter()
            .filter_map(|op| match op {
                BlockOp::WriteChunk { chunk, .. } => Some(chunk.len),
                _ => None,
            })
            .collect();
        assert_eq!(lens, vec![64, 64, 64, 64, 44]);
    }
}

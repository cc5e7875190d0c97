//! One block: its length, its bytes in a backend and its committed `BlockData`, with the
//! DataNode's FILE_PER_BLOCK rules (`FilePerBlockStrategy`, `ChunkUtils`, `BlockManagerImpl`;
//! Ozone's FilePerBlockStrategy). The caller holds the block's lock; [`Container`] finds blocks
//! and keeps the container's counters.
//!
//! [`Container`]: super::Container

use super::dir::BlockFile;
use super::memory::Segments;
use super::{Shared, StoreError, StoreKind, StoreResult, discard};
use bytes::{Bytes, BytesMut};
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, DatanodeBlockId, Result as OzoneResult,
};

/// Read buffer size when a chunk's checksum type is NONE (`ozone.chunk.read.buffer.default.size`).
pub const NONE_READ_BUFFER: u64 = 1 << 20;

/// The largest read the DataNode serves (`OzoneConsts.OZONE_SCM_CHUNK_MAX_SIZE`).
const MAX_READ: u64 = common::MAX_MESSAGE_SIZE as u64;

/// Size of the pieces a ReadChunk answer is cut into (`ChunkManager.getBufferCapacityForChunkRead`):
/// V0 answers one buffer; V1 one buffer per `bytesPerChecksum` window, 1 MiB pieces when the
/// checksum type is NONE, and one buffer when `bytesPerChecksum` is 0.
pub fn read_piece_size(checksum: &ChecksumData, len: u64, v1: bool) -> u64 {
    let capacity = if !v1 {
        len
    } else if checksum.r#type == ChecksumType::None as i32 {
        NONE_READ_BUFFER
    } else {
        u64::from(checksum.bytes_per_checksum)
    };
    if capacity == 0 {
        len
    } else {
        capacity.min(len)
    }
}

/// A PutBlock checked as the DataNode's `BlockData.getFromProtoBuf` checks it, in the form the
/// store keeps: `size` = the sum of the chunk lengths, bcsId 0 (the gRPC path has no Ratis log
/// index).
#[derive(Clone, Debug, PartialEq)]
pub struct PutBlock {
    block: BlockData,
    eof: bool,
}

impl PutBlock {
    /// `eof`: whether the PutBlock ends the block (a PutBlock request without `eof` counts as
    /// true; a piggybacked one as false). A `size` that differs from the chunk lengths' sum fails
    /// with MALFORMED_REQUEST and the text of 2.1+'s `CodecException`; each caller answers it as
    /// its release does (see `keyvalue`).
    pub fn new(mut block: BlockData, eof: bool) -> StoreResult<Self> {
        // Java sums the lengths as `long`s; wrapping keeps that behaviour for absurd inputs.
        let sum = block
            .chunks
            .iter()
            .fold(0i64, |acc, c| acc.wrapping_add(c.len as i64));
        if let Some(size) = block.size
            && size != sum
        {
            return Err(StoreError::new(
                OzoneResult::MalformedRequest,
                format!("Size mismatch: size (={size}) != sum of chunks (={sum})"),
            ));
        }
        block.size = Some(sum);
        block.block_id.block_commit_sequence_id = Some(0);
        super::bounds::own_checksums(&mut block);
        Ok(Self { block, eof })
    }

    /// The PutBlock of a Raft transaction: its bcsId is the transaction's log index
    /// (`KeyValueHandler.handlePutBlock` takes it from the dispatcher context).
    pub fn with_bcs_id(mut self, log_index: u64) -> Self {
        self.block.block_id.block_commit_sequence_id = Some(log_index);
        self
    }

    /// The bcsId the block is stored with (0 on the gRPC path).
    pub fn bcs_id(&self) -> u64 {
        self.block.block_id.block_commit_sequence_id.unwrap_or(0)
    }

    pub fn local_id(&self) -> i64 {
        self.block.block_id.local_id
    }

    /// The `BlockData` as it will be stored and returned by GetBlock.
    pub fn block(&self) -> &BlockData {
        &self.block
    }
}

/// A block behind its async lock (held across `dir` I/O).
pub(super) type Block = tokio::sync::RwLock<BlockState>;

/// Which block an operation is about, and the store it belongs to.
pub(super) struct At<'a> {
    pub container: i64,
    pub local_id: i64,
    pub shared: &'a Shared,
}

#[derive(Default)]
pub(super) struct BlockState {
    /// The length of the block's data (the DataNode's block file length).
    len: u64,
    /// `None` until the first successful non-empty write: the block file does not exist.
    bytes: Option<BlockBytes>,
    /// The `BlockData` of the last PutBlock (the DataNode's RocksDB entry).
    committed: Option<BlockData>,
    finalized: bool,
}

enum BlockBytes {
    Memory(Segments),
    Discard,
    Dir(BlockFile),
}

impl BlockState {
    /// The block file's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the block's data exists (the DataNode's block file).
    pub fn has_data(&self) -> bool {
        self.bytes.is_some()
    }

    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    pub fn finalize(&mut self) {
        self.finalized = true;
    }

    /// The `BlockData` of the last PutBlock, if any.
    pub fn committed_data(&self) -> Option<&BlockData> {
        self.committed.as_ref()
    }

    /// `FilePerBlockStrategy.writeChunk` + `ChunkUtils.writeData`. Returns by how many bytes the
    /// block grew. On error nothing changed (no capacity reserved, no byte stored).
    pub async fn write(&mut self, at: &At<'_>, chunk: &ChunkInfo, data: Bytes) -> StoreResult<u64> {
        let (offset, len) = (chunk.offset, chunk.len);
        if len == 0 {
            return Ok(0); // "Skip writing empty chunk"
        }
        if offset > self.len {
            return Err(StoreError::new(
                OzoneResult::ChunkFileInconsistency,
                format!(
                    "Chunk offset {offset} does not match length {} of blockFile {}.block",
                    self.len, at.local_id
                ),
            ));
        }
        // Data shorter or longer than `len`: the DataNode checks the received buffer against
        // `len` before writing (`ChunkUtils.validateBufferSize`) and answers INVALID_WRITE_SIZE.
        // MALFORMED_REQUEST is its answer to a missing payload or a BlockData size mismatch,
        // not to this.
        if data.len() as u64 != len {
            return Err(StoreError::new(
                OzoneResult::InvalidWriteSize,
                format!(
                    "Unexpected buffer size. expected: {len}, actual: {}",
                    data.len()
                ),
            ));
        }
        let end = offset + len; // no overflow: offset <= self.len and len fits in memory
        let growth = end.saturating_sub(self.len);
        at.shared.reserve(at.container, growth)?;
        if let Err(e) = self.store_bytes(at, offset, data).await {
            at.shared.release(growth);
            return Err(e);
        }
        self.len = self.len.max(end);
        Ok(growth)
    }

    async fn store_bytes(&mut self, at: &At<'_>, offset: u64, data: Bytes) -> StoreResult<()> {
        match &mut self.bytes {
            Some(BlockBytes::Memory(segments)) => {
                segments.write(offset, data);
                Ok(())
            }
            Some(BlockBytes::Discard) => Ok(()),
            Some(BlockBytes::Dir(file)) => {
                file.write(offset, data, at.shared.sync).await.map_err(|e| {
                    io_exception(format!(
                        "Write Chunk failed: {}: {e}",
                        file.path().display()
                    ))
                })
            }
            None => {
                let bytes = match &at.shared.kind {
                    StoreKind::Memory => {
                        let mut segments = Segments::default();
                        segments.write(offset, data);
                        BlockBytes::Memory(segments)
                    }
                    StoreKind::Discard => BlockBytes::Discard,
                    StoreKind::Dir(_) => {
                        let path = at.shared.block_path(at.container, at.local_id);
                        let shown = path.display().to_string();
                        let file = BlockFile::create(path, at.shared.sync).await.map_err(|e| {
                            io_exception(format!("Write Chunk failed: cannot create {shown}: {e}"))
                        })?;
                        // A file that exists but whose first write failed counts as existing,
                        // as in the DataNode (its length stays 0).
                        let written = file.write(offset, data, at.shared.sync).await;
                        self.bytes = Some(BlockBytes::Dir(file));
                        return written.map_err(|e| {
                            io_exception(format!("Write Chunk failed: {shown}: {e}"))
                        });
                    }
                };
                self.bytes = Some(bytes);
                Ok(())
            }
        }
    }

    /// A block as found on disk at start-up (`--store dir:`): its file (if any) with its length,
    /// and what its last PutBlock committed (if any).
    pub fn restored(
        file: Option<(BlockFile, u64)>,
        committed: Option<BlockData>,
        finalized: bool,
    ) -> Self {
        let len = file.as_ref().map_or(0, |(_, len)| *len);
        Self {
            len,
            bytes: file.map(|(file, _)| BlockBytes::Dir(file)),
            committed,
            finalized,
        }
    }

    /// `BlockManagerImpl.putBlock`'s checks: whether `put` can be committed, and whether it
    /// would be the block's first commit. Changes nothing.
    pub fn check_put(&self, at: &At<'_>, put: &PutBlock) -> StoreResult<bool> {
        // An end-of-block PutBlock that names chunks closes the block file, which must exist
        // (`FilePerBlockStrategy.finishWriteChunks` → `verifyChunkFileExists`).
        if put.eof && !put.block.chunks.is_empty() && self.bytes.is_none() {
            return Err(no_file(at));
        }
        Ok(self.committed.is_none())
    }

    /// Commits a PutBlock that passed [`BlockState::check_put`] (and, with `dir:`, is in the
    /// container DB). Returns the stored `BlockData`.
    pub fn commit(&mut self, put: PutBlock) -> BlockData {
        self.committed = Some(put.block.clone());
        put.block
    }

    /// `ChunkManager.readChunk` + `ChunkUtils.readData`: `len` bytes at `offset` in pieces of
    /// `piece` bytes, sliced from the stored data where possible.
    pub async fn read(
        &self,
        at: &At<'_>,
        offset: u64,
        len: u64,
        piece: u64,
    ) -> StoreResult<Vec<Bytes>> {
        if len == 0 {
            return Ok(vec![Bytes::new()]); // "Skip reading empty chunk"
        }
        if len > MAX_READ {
            return Err(StoreError::new(
                OzoneResult::UnsupportedRequest,
                format!("Oversize read. max: {MAX_READ}, actual: {len}"),
            ));
        }
        super::bounds::check_pieces(len, piece)?;
        let Some(bytes) = &self.bytes else {
            return Err(no_such_file(at));
        };
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            // A FileChannel read at or past the end returns -1.
            let actual = if offset >= self.len {
                -1
            } else {
                (self.len - offset) as i64
            };
            return Err(StoreError::new(
                OzoneResult::ContainerInternalError,
                format!("Unexpected read size. expected: {len}, actual: {actual}"),
            ));
        }
        match bytes {
            BlockBytes::Memory(segments) => Ok(segments.read(offset, len, piece)),
            BlockBytes::Discard => Err(discard::read_error(at.container, at.local_id, offset, len)),
            BlockBytes::Dir(file) => {
                let all = file.read(offset, len as usize).await.map_err(|e| {
                    let path = file.path().display();
                    // As `ChunkUtils.readData` translates them: a missing file, a short read.
                    match e.kind() {
                        std::io::ErrorKind::NotFound => no_such_file(at),
                        std::io::ErrorKind::UnexpectedEof => StoreError::new(
                            OzoneResult::ContainerInternalError,
                            format!("Unexpected read size. expected: {len}, {path}: {e}"),
                        ),
                        _ => io_exception(format!("Read Chunk failed: {path}: {e}")),
                    }
                })?;
                Ok(split(all, piece))
            }
        }
    }

    /// The committed `BlockData`: NO_SUCH_BLOCK without a PutBlock, BCSID_MISMATCH when the
    /// stored bcsId is below the requested one.
    pub fn committed(&self, id: &DatanodeBlockId) -> StoreResult<BlockData> {
        let data = self.committed.as_ref().ok_or_else(|| no_such_block(id))?;
        let requested = id.block_commit_sequence_id.unwrap_or(0);
        let stored = data.block_id.block_commit_sequence_id.unwrap_or(0);
        if stored < requested {
            return Err(StoreError::new(
                OzoneResult::BcsidMismatch,
                format!(
                    "bcsId {requested} mismatches with existing block Id {stored} for block {}.",
                    block_name(id)
                ),
            ));
        }
        Ok(data.clone())
    }
}

/// NO_SUCH_BLOCK, named by the request's BlockID (`DatanodeStore.NO_SUCH_BLOCK_ERR_MSG`).
pub(super) fn no_such_block(id: &DatanodeBlockId) -> StoreError {
    StoreError::new(
        OzoneResult::NoSuchBlock,
        format!("Unable to find the block. BlockID : {}", block_name(id)),
    )
}

/// The block file does not exist when a PutBlock, FinalizeBlock or PutSmallFile closes it
/// (`ChunkUtils.verifyChunkFileExists`): UNABLE_TO_FIND_CHUNK with its absolute path.
pub(super) fn no_file(at: &At<'_>) -> StoreError {
    let path = at.shared.block_path(at.container, at.local_id);
    StoreError::new(
        OzoneResult::UnableToFindChunk,
        format!("Chunk file not found: {}", path.display()),
    )
}

/// A read of a block file that does not exist: `ChunkUtils` translates the JDK's
/// NoSuchFileException into UNABLE_TO_FIND_CHUNK with its `toString()`.
pub(super) fn no_such_file(at: &At<'_>) -> StoreError {
    let path = at.shared.block_path(at.container, at.local_id);
    StoreError::new(
        OzoneResult::UnableToFindChunk,
        format!("java.nio.file.NoSuchFileException: {}", path.display()),
    )
}

/// `BlockID.toString()` of the DataNode: `replicaIndex` is an `Integer`, `null` when unset.
/// It names the request's BlockID, whose containerID may differ from the envelope's.
fn block_name(id: &DatanodeBlockId) -> String {
    let replica = id
        .replica_index
        .map_or_else(|| "null".to_string(), |r| r.to_string());
    format!(
        "conID: {} locID: {} bcsId: {} replicaIndex: {replica}",
        id.container_id,
        id.local_id,
        id.block_commit_sequence_id.unwrap_or(0)
    )
}

fn io_exception(message: String) -> StoreError {
    StoreError::new(OzoneResult::IoException, message)
}

/// Cuts one buffer into `piece`-byte slices without copying.
fn split(all: Bytes, piece: u64) -> Vec<Bytes> {
    let piece = piece.max(1) as usize;
    if all.len() <= piece {
        return vec![all];
    }
    (0..all.len())
        .step_by(piece)
        .map(|at| all.slice(at..all.len().min(at + piece)))
        .collect()
}

/// Joins buffers into one, without copying when there is only one.
pub fn concat(mut buffers: Vec<Bytes>) -> Bytes {
    if buffers.len() == 1 {
        return buffers.pop().expect("one buffer");
    }
    let mut joined = BytesMut::with_capacity(buffers.iter().map(Bytes::len).sum());
    for b in &buffers {
        joined.extend_from_slice(b);
    }
    joined.freeze()
}

//! A container and its blocks, with the DataNode's rules: KeyValueContainer states,
//! FilePerBlockStrategy for chunk data and BlockManagerImpl for block metadata
//! (shared/ozone/protocol.md §6). Messages follow the DataNode's exception texts.

use super::dir::{self, BlockFile};
use super::memory::Segments;
use super::{MAX_CONTAINER_SIZE, Shared, StoreError, StoreKind, StoreResult, discard, read, write};
use bytes::{Bytes, BytesMut};
use common::proto::container_data_proto::State;
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, ContainerDataProto, ContainerType,
    DatanodeBlockId, Result as OzoneResult,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

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
    /// true; a piggybacked one as false). A `size` that differs from the chunk lengths' sum is
    /// MALFORMED_REQUEST.
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
                format!(
                    "Size mismatch: BlockData.size is {size} but the lengths of its {} chunks \
                     add up to {sum}",
                    block.chunks.len()
                ),
            ));
        }
        block.size = Some(sum);
        block.block_id.block_commit_sequence_id = Some(0);
        Ok(Self { block, eof })
    }

    pub fn local_id(&self) -> i64 {
        self.block.block_id.local_id
    }

    /// The `BlockData` as it will be stored and returned by GetBlock.
    pub fn block(&self) -> &BlockData {
        &self.block
    }
}

/// One container of the store.
pub struct Container {
    id: i64,
    /// A `container_data_proto::State` as i32: read on every write, changed rarely.
    state: AtomicI32,
    /// The sum of its blocks' lengths (`bytesUsed`).
    bytes_used: AtomicU64,
    /// Blocks with a committed PutBlock (`blockCount`).
    block_count: AtomicU64,
    /// The container's block commit sequence ID: always 0 on the gRPC path, kept so that the
    /// bcsId rules read as in the DataNode.
    bcs_id: AtomicU64,
    blocks: RwLock<BTreeMap<i64, Arc<Block>>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("id", &self.id)
            .field("state", &self.state())
            .field("bytes_used", &self.bytes_used())
            .field("block_count", &self.block_count())
            .finish_non_exhaustive()
    }
}

/// A block: its state behind an async lock (held across `dir` I/O).
type Block = tokio::sync::RwLock<BlockState>;

#[derive(Default)]
struct BlockState {
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

impl Container {
    pub(super) fn new(id: i64, state: State, shared: Arc<Shared>) -> Self {
        Self {
            id,
            state: AtomicI32::new(state as i32),
            bytes_used: AtomicU64::new(0),
            block_count: AtomicU64::new(0),
            bcs_id: AtomicU64::new(0),
            blocks: RwLock::default(),
            shared,
        }
    }

    pub fn id(&self) -> i64 {
        self.id
    }

    pub fn state(&self) -> State {
        State::try_from(self.state.load(Ordering::Acquire)).unwrap_or(State::Invalid)
    }

    pub fn bytes_used(&self) -> u64 {
        self.bytes_used.load(Ordering::Acquire)
    }

    pub fn block_count(&self) -> u64 {
        self.block_count.load(Ordering::Acquire)
    }

    pub fn bcs_id(&self) -> u64 {
        self.bcs_id.load(Ordering::Acquire)
    }

    /// Whether a block's data was finalized by FinalizeBlock.
    pub async fn is_finalized(&self, local_id: i64) -> bool {
        match self.block(local_id) {
            Some(block) => block.read().await.finalized,
            None => false,
        }
    }

    /// `KeyValueHandler.checkContainerOpen`: writes need OPEN, CLOSING or RECOVERING.
    pub fn check_open(&self) -> StoreResult<()> {
        let state = self.state();
        let result = match state {
            State::Open | State::Closing | State::Recovering => return Ok(()),
            State::QuasiClosed | State::Closed => OzoneResult::ClosedContainerIo,
            State::Unhealthy => OzoneResult::ContainerUnhealthy,
            State::Invalid => OzoneResult::InvalidContainerState,
            State::Deleted => OzoneResult::ContainerInternalError,
        };
        Err(StoreError::new(
            result,
            format!(
                "Requested operation not allowed as ContainerState is {}",
                state.as_str_name()
            ),
        ))
    }

    /// CloseContainer: OPEN, RECOVERING, CLOSING and QUASI_CLOSED become CLOSED; closing a
    /// CLOSED container succeeds; UNHEALTHY answers CONTAINER_UNHEALTHY.
    pub fn close(&self) -> StoreResult<()> {
        loop {
            let current = self.state();
            let result = match current {
                State::Closed => return Ok(()),
                State::Open | State::Recovering | State::Closing | State::QuasiClosed => {
                    if self.transition(current, State::Closed) {
                        return Ok(());
                    }
                    continue;
                }
                State::Unhealthy => OzoneResult::ContainerUnhealthy,
                State::Invalid => OzoneResult::InvalidContainerState,
                State::Deleted => OzoneResult::ContainerInternalError,
            };
            return Err(StoreError::new(
                result,
                format!(
                    "Cannot close container #{} while in {} state.",
                    self.id,
                    current.as_str_name()
                ),
            ));
        }
    }

    /// Marks an OPEN, CLOSING or RECOVERING container UNHEALTHY (a failed write, protocol.md §4
    /// step 8). Returns whether the state changed.
    pub fn mark_unhealthy(&self) -> bool {
        loop {
            let current = self.state();
            if !matches!(current, State::Open | State::Closing | State::Recovering) {
                return false;
            }
            if self.transition(current, State::Unhealthy) {
                return true;
            }
        }
    }

    fn transition(&self, from: State, to: State) -> bool {
        self.state
            .compare_exchange(from as i32, to as i32, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// ReadContainer's `ContainerDataProto`.
    pub fn data(&self) -> ContainerDataProto {
        let container_path = match &self.shared.kind {
            StoreKind::Dir(root) => Some(root.join(self.id.to_string()).display().to_string()),
            _ => None,
        };
        ContainerDataProto {
            container_id: self.id,
            metadata: Vec::new(),
            container_path,
            bytes_used: Some(self.bytes_used() as i64),
            size: Some(MAX_CONTAINER_SIZE),
            block_count: Some(self.block_count() as i64),
            state: Some(self.state() as i32),
            container_type: Some(ContainerType::KeyValueContainer as i32),
        }
    }

    fn block(&self, local_id: i64) -> Option<Arc<Block>> {
        read(&self.blocks).get(&local_id).cloned()
    }

    fn block_or_insert(&self, local_id: i64) -> Arc<Block> {
        if let Some(block) = self.block(local_id) {
            return block;
        }
        Arc::clone(write(&self.blocks).entry(local_id).or_default())
    }

    /// WriteChunk: verify checksums (with `--verify-checksums`), then write under the block's
    /// lock. On any error nothing is stored.
    pub async fn write_chunk(
        &self,
        block_id: &DatanodeBlockId,
        chunk: &ChunkInfo,
        data: Bytes,
    ) -> StoreResult<()> {
        self.verify(chunk, &data)?;
        let block = self.block_or_insert(block_id.local_id);
        let mut state = block.write().await;
        self.write_locked(&mut state, block_id.local_id, chunk, data)
            .await
    }

    /// A write followed by a PutBlock: WriteChunk with a piggybacked PutBlock, and PutSmallFile.
    /// When both name the same block (the normal case) they happen under one lock, so no other
    /// write comes between them. The PutBlock was validated before (a malformed one stores
    /// nothing), but it can still fail after the write succeeded (its own UNABLE_TO_FIND_CHUNK),
    /// as in the DataNode.
    pub async fn write_chunk_and_put(
        &self,
        block_id: &DatanodeBlockId,
        chunk: &ChunkInfo,
        data: Bytes,
        put: PutBlock,
    ) -> StoreResult<BlockData> {
        self.verify(chunk, &data)?;
        let block = self.block_or_insert(block_id.local_id);
        let mut state = block.write().await;
        self.write_locked(&mut state, block_id.local_id, chunk, data)
            .await?;
        if put.local_id() == block_id.local_id {
            return self.put_locked(&mut state, put);
        }
        drop(state);
        self.put_block(put).await
    }

    /// PutBlock.
    pub async fn put_block(&self, put: PutBlock) -> StoreResult<BlockData> {
        let block = self.block_or_insert(put.local_id());
        let mut state = block.write().await;
        self.put_locked(&mut state, put)
    }

    /// GetBlock: UNKNOWN_BCSID, NO_SUCH_BLOCK, BCSID_MISMATCH, or the stored `BlockData`.
    pub async fn get_block(&self, id: &DatanodeBlockId) -> StoreResult<BlockData> {
        self.verify_bcs_id(id)?;
        let block = self
            .block(id.local_id)
            .ok_or_else(|| self.no_such_block(id))?;
        let state = block.read().await;
        self.committed(&state, id)
    }

    /// GetCommittedBlockLength: the stored `size`, NO_SUCH_BLOCK when nothing was put.
    pub async fn committed_length(&self, id: &DatanodeBlockId) -> StoreResult<i64> {
        self.verify_bcs_id(id)?;
        let block = self
            .block(id.local_id)
            .ok_or_else(|| self.no_such_block(id))?;
        let state = block.read().await;
        let committed = state
            .committed
            .as_ref()
            .ok_or_else(|| self.no_such_block(id))?;
        Ok(committed.size.unwrap_or(0))
    }

    /// ReadChunk: `len` bytes at the block-relative `offset`, cut into pieces of `piece` bytes
    /// (see [`read_piece_size`]). Pieces are slices of the stored data where possible.
    pub async fn read_chunk(
        &self,
        id: &DatanodeBlockId,
        offset: u64,
        len: u64,
        piece: u64,
    ) -> StoreResult<Vec<Bytes>> {
        self.verify_bcs_id(id)?;
        let Some(block) = self.block(id.local_id) else {
            let no_file = BlockState::default();
            return self
                .read_locked(&no_file, id.local_id, offset, len, piece)
                .await;
        };
        let state = block.read().await;
        self.read_locked(&state, id.local_id, offset, len, piece)
            .await
    }

    /// GetSmallFile: the committed block and the data of all its chunks, in order; per chunk one
    /// buffer (V0) or pieces as for ReadChunk V1.
    pub async fn read_block(
        &self,
        id: &DatanodeBlockId,
        v1: bool,
    ) -> StoreResult<(BlockData, Vec<Bytes>)> {
        self.verify_bcs_id(id)?;
        let block = self
            .block(id.local_id)
            .ok_or_else(|| self.no_such_block(id))?;
        let state = block.read().await;
        let data = self.committed(&state, id)?;
        let mut buffers = Vec::with_capacity(data.chunks.len());
        for chunk in &data.chunks {
            let piece = read_piece_size(&chunk.checksum_data, chunk.len, v1);
            buffers.extend(
                self.read_locked(&state, id.local_id, chunk.offset, chunk.len, piece)
                    .await?,
            );
        }
        Ok((data, buffers))
    }

    /// ListBlock: committed blocks with `localID >= start` (all when `start` is absent or -1),
    /// at most `count`, in localID order. A negative start or a count that is not a positive Java
    /// `int` fail the DataNode's preconditions (CONTAINER_INTERNAL_ERROR).
    pub async fn list_blocks(&self, start: Option<i64>, count: u32) -> StoreResult<Vec<BlockData>> {
        let start = start.unwrap_or(-1);
        if start < -1 {
            return Err(StoreError::new(
                OzoneResult::ContainerInternalError,
                "java.lang.IllegalStateException: startLocal ID cannot be negative",
            ));
        }
        let count = match i32::try_from(count) {
            Ok(c) if c > 0 => c as usize,
            _ => {
                return Err(StoreError::new(
                    OzoneResult::ContainerInternalError,
                    "java.lang.IllegalArgumentException: Count must be a positive number.",
                ));
            }
        };
        let candidates: Vec<Arc<Block>> = {
            let blocks = read(&self.blocks);
            let range = if start == -1 {
                blocks.range(..)
            } else {
                blocks.range(start..)
            };
            range.map(|(_, b)| Arc::clone(b)).collect()
        };
        let mut out = Vec::new();
        for block in candidates {
            if out.len() == count {
                break;
            }
            if let Some(data) = &block.read().await.committed {
                out.push(data.clone());
            }
        }
        Ok(out)
    }

    /// FinalizeBlock: the container must be open and the block committed with its data present;
    /// answers the stored `BlockData`.
    pub async fn finalize_block(&self, id: &DatanodeBlockId) -> StoreResult<BlockData> {
        self.check_open()?;
        self.verify_bcs_id(id)?;
        let block = self
            .block(id.local_id)
            .ok_or_else(|| self.no_such_block(id))?;
        let mut state = block.write().await;
        let data = self.committed(&state, id)?;
        if state.bytes.is_none() {
            return Err(self.no_file(id.local_id));
        }
        state.finalized = true;
        Ok(data)
    }

    fn verify(&self, chunk: &ChunkInfo, data: &[u8]) -> StoreResult<()> {
        match &self.shared.verifier {
            Some(verifier) => verifier
                .verify(data, &chunk.checksum_data)
                .map_err(|reason| {
                    StoreError::new(
                        OzoneResult::IoException,
                        format!(
                            "Checksum verification of chunk {} of container {} failed: {reason}",
                            chunk.chunk_name, self.id
                        ),
                    )
                }),
            None => Ok(()),
        }
    }

    /// `FilePerBlockStrategy.writeChunk` + `ChunkUtils.writeData`.
    async fn write_locked(
        &self,
        state: &mut BlockState,
        local_id: i64,
        chunk: &ChunkInfo,
        data: Bytes,
    ) -> StoreResult<()> {
        let (offset, len) = (chunk.offset, chunk.len);
        if len == 0 {
            return Ok(()); // "Skip writing empty chunk"
        }
        if offset > state.len {
            return Err(StoreError::new(
                OzoneResult::ChunkFileInconsistency,
                format!(
                    "Chunk offset {offset} does not match length {} of blockFile {local_id}.block",
                    state.len
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
        let end = offset + len; // no overflow: offset <= state.len and len fits in memory
        let growth = end.saturating_sub(state.len);
        self.shared.reserve(self.id, growth)?;
        if let Err(e) = self.store_bytes(state, local_id, offset, data).await {
            self.shared.release(growth);
            return Err(e);
        }
        state.len = state.len.max(end);
        self.bytes_used.fetch_add(growth, Ordering::AcqRel);
        Ok(())
    }

    async fn store_bytes(
        &self,
        state: &mut BlockState,
        local_id: i64,
        offset: u64,
        data: Bytes,
    ) -> StoreResult<()> {
        match &mut state.bytes {
            Some(BlockBytes::Memory(segments)) => {
                segments.write(offset, data);
                Ok(())
            }
            Some(BlockBytes::Discard) => Ok(()),
            Some(BlockBytes::Dir(file)) => file.write(offset, data).await.map_err(|e| {
                io_exception(format!(
                    "Write Chunk failed: {}: {e}",
                    file.path().display()
                ))
            }),
            None => {
                let bytes = match &self.shared.kind {
                    StoreKind::Memory => {
                        let mut segments = Segments::default();
                        segments.write(offset, data);
                        BlockBytes::Memory(segments)
                    }
                    StoreKind::Discard => BlockBytes::Discard,
                    StoreKind::Dir(root) => {
                        let path = dir::block_path(root, self.id, local_id);
                        let shown = path.display().to_string();
                        let file = BlockFile::create(path).await.map_err(|e| {
                            io_exception(format!("Write Chunk failed: cannot create {shown}: {e}"))
                        })?;
                        // A file that exists but whose first write failed counts as existing,
                        // as in the DataNode (its length stays 0).
                        let written = file.write(offset, data).await;
                        state.bytes = Some(BlockBytes::Dir(file));
                        return written.map_err(|e| {
                            io_exception(format!("Write Chunk failed: {shown}: {e}"))
                        });
                    }
                };
                state.bytes = Some(bytes);
                Ok(())
            }
        }
    }

    fn put_locked(&self, state: &mut BlockState, put: PutBlock) -> StoreResult<BlockData> {
        // An end-of-block PutBlock that names chunks closes the block file, which must exist
        // (`FilePerBlockStrategy.finishWriteChunks` → `verifyChunkFileExists`).
        if put.eof && !put.block.chunks.is_empty() && state.bytes.is_none() {
            return Err(self.no_file(put.local_id()));
        }
        if state.committed.is_none() {
            self.block_count.fetch_add(1, Ordering::AcqRel);
        }
        state.committed = Some(put.block.clone());
        Ok(put.block)
    }

    /// `ChunkManager.readChunk` + `ChunkUtils.readData`.
    async fn read_locked(
        &self,
        state: &BlockState,
        local_id: i64,
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
        let Some(bytes) = &state.bytes else {
            return Err(self.no_file(local_id));
        };
        if offset.checked_add(len).is_none_or(|end| end > state.len) {
            // A FileChannel read at or past the end returns -1.
            let actual = if offset >= state.len {
                -1
            } else {
                (state.len - offset) as i64
            };
            return Err(StoreError::new(
                OzoneResult::ContainerInternalError,
                format!("Unexpected read size. expected: {len}, actual: {actual}"),
            ));
        }
        match bytes {
            BlockBytes::Memory(segments) => Ok(segments.read(offset, len, piece)),
            BlockBytes::Discard => Err(discard::read_error(self.id, local_id, offset, len)),
            BlockBytes::Dir(file) => {
                let all = file.read(offset, len as usize).await.map_err(|e| {
                    let path = file.path().display();
                    // As `ChunkUtils.readData` translates them: a missing file, a short read.
                    match e.kind() {
                        std::io::ErrorKind::NotFound => StoreError::new(
                            OzoneResult::UnableToFindChunk,
                            format!("Chunk file not found: {path}"),
                        ),
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

    /// `BlockUtils.verifyBCSId`: a bcsId above the container's is UNKNOWN_BCSID.
    fn verify_bcs_id(&self, id: &DatanodeBlockId) -> StoreResult<()> {
        let requested = id.block_commit_sequence_id.unwrap_or(0);
        let ours = self.bcs_id();
        if ours < requested {
            return Err(StoreError::new(
                OzoneResult::UnknownBcsid,
                format!(
                    "Unable to find the block with bcsID {requested}. Container {} bcsId is \
                     {ours}.",
                    self.id
                ),
            ));
        }
        Ok(())
    }

    /// The committed `BlockData`: NO_SUCH_BLOCK without a PutBlock, BCSID_MISMATCH when the
    /// stored bcsId is below the requested one.
    fn committed(&self, state: &BlockState, id: &DatanodeBlockId) -> StoreResult<BlockData> {
        let data = state
            .committed
            .as_ref()
            .ok_or_else(|| self.no_such_block(id))?;
        let requested = id.block_commit_sequence_id.unwrap_or(0);
        let stored = data.block_id.block_commit_sequence_id.unwrap_or(0);
        if stored < requested {
            return Err(StoreError::new(
                OzoneResult::BcsidMismatch,
                format!(
                    "bcsId {requested} mismatches with existing block Id {stored} for block {}.",
                    block_name(self.id, id)
                ),
            ));
        }
        Ok(data.clone())
    }

    fn no_such_block(&self, id: &DatanodeBlockId) -> StoreError {
        StoreError::new(
            OzoneResult::NoSuchBlock,
            format!(
                "Unable to find the block. BlockID : {}",
                block_name(self.id, id)
            ),
        )
    }

    fn no_file(&self, local_id: i64) -> StoreError {
        let path = match &self.shared.kind {
            StoreKind::Dir(root) => dir::block_path(root, self.id, local_id)
                .display()
                .to_string(),
            _ => format!("{}/chunks/{local_id}.block", self.id),
        };
        StoreError::new(
            OzoneResult::UnableToFindChunk,
            format!("Chunk file not found: {path}"),
        )
    }
}

/// `BlockID.toString()` of the DataNode.
fn block_name(container: i64, id: &DatanodeBlockId) -> String {
    format!(
        "conID: {container} locID: {} bcsId: {}",
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

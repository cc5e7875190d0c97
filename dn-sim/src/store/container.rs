//! A container: its state (OPEN, CLOSED, UNHEALTHY, …), its counters and its blocks, with the
//! DataNode's container rules (`KeyValueContainer`, `KeyValueHandler.checkContainerOpen`,
//! `BlockUtils.verifyBCSId`). The rules of one block's data and metadata are in `block.rs`;
//! this file finds blocks, takes their locks and keeps the container's counters.

use super::block::{At, Block, BlockState, PutBlock, no_such_block, read_piece_size};
use super::{MAX_CONTAINER_SIZE, Shared, StoreError, StoreKind, StoreResult, read, write};
use bytes::Bytes;
use common::proto::container_data_proto::State;
use common::proto::{
    BlockData, ChunkInfo, ContainerDataProto, ContainerType, DatanodeBlockId, Result as OzoneResult,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

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
            Some(block) => block.read().await.is_finalized(),
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
        state.committed(self.id, id)
    }

    /// GetCommittedBlockLength: the stored `size`, NO_SUCH_BLOCK when nothing was put.
    pub async fn committed_length(&self, id: &DatanodeBlockId) -> StoreResult<i64> {
        self.verify_bcs_id(id)?;
        let block = self
            .block(id.local_id)
            .ok_or_else(|| self.no_such_block(id))?;
        let state = block.read().await;
        let committed = state
            .committed_data()
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
            return no_file
                .read(&self.at(id.local_id), offset, len, piece)
                .await;
        };
        let state = block.read().await;
        state.read(&self.at(id.local_id), offset, len, piece).await
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
        let data = state.committed(self.id, id)?;
        let at = self.at(id.local_id);
        let mut buffers = Vec::with_capacity(data.chunks.len());
        for chunk in &data.chunks {
            let piece = read_piece_size(&chunk.checksum_data, chunk.len, v1);
            buffers.extend(state.read(&at, chunk.offset, chunk.len, piece).await?);
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
            if let Some(data) = block.read().await.committed_data() {
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
        let data = state.committed(self.id, id)?;
        if !state.has_data() {
            return Err(super::block::no_file(&self.at(id.local_id)));
        }
        state.finalize();
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

    fn at(&self, local_id: i64) -> At<'_> {
        At {
            container: self.id,
            local_id,
            shared: &self.shared,
        }
    }

    /// A write under the block's lock, counted in `bytesUsed`.
    async fn write_locked(
        &self,
        state: &mut BlockState,
        local_id: i64,
        chunk: &ChunkInfo,
        data: Bytes,
    ) -> StoreResult<()> {
        let growth = state.write(&self.at(local_id), chunk, data).await?;
        self.bytes_used.fetch_add(growth, Ordering::AcqRel);
        Ok(())
    }

    /// A PutBlock under the block's lock, counted in `blockCount` the first time.
    fn put_locked(&self, state: &mut BlockState, put: PutBlock) -> StoreResult<BlockData> {
        let (block, first) = state.put(&self.at(put.local_id()), put)?;
        if first {
            self.block_count.fetch_add(1, Ordering::AcqRel);
        }
        Ok(block)
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

    fn no_such_block(&self, id: &DatanodeBlockId) -> StoreError {
        no_such_block(self.id, id)
    }
}

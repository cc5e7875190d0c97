//! A container: its state (OPEN, CLOSED, UNHEALTHY, …), its counters and its blocks, with the
//! DataNode's container rules (`KeyValueContainer`, `KeyValueHandler.checkContainerOpen`,
//! `BlockUtils.verifyBCSId`). The rules of one block's data and metadata are in `block.rs`;
//! this file finds blocks, takes their locks and keeps the container's counters.

use super::block::{At, Block, BlockState, PutBlock, no_such_block, read_piece_size};
use super::bounds::{self, DecimalKey};
use super::dir::BlockFile;
use super::durable::{ContainerDb, CreateError, Descriptor, Restored};
use super::{Shared, StoreError, StoreKind, StoreResult, read, write};
use crate::datanode::version::OzoneVersion;
use bytes::Bytes;
use common::proto::container_data_proto::State;
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, ContainerDataProto, ContainerType,
    DatanodeBlockId, KeyValue, Result as OzoneResult,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
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
    /// The EC replica index (`CreateContainer.replicaIndex`; 0 = not an EC replica).
    replica_index: i32,
    /// The newest block-deletion transaction SCM sent for it (`deleteTransactionId`; in memory
    /// only).
    delete_tx_id: AtomicI64,
    /// Bytes this container reserved from the store's capacity (released on delete).
    held: AtomicU64,
    /// Bytes this container charged to the store's metadata account (released on delete).
    meta_held: AtomicU64,
    /// What `metadata` costs (`bounds::key_value_cost` summed; changed under its write lock).
    metadata_cost: AtomicU64,
    /// The committed blocks in ListBlock's order, so a listing costs what it answers.
    committed: RwLock<BTreeSet<DecimalKey>>,
    /// `ContainerData.metadata` (CreateContainer, UpdateContainer), sorted by key.
    metadata: RwLock<BTreeMap<String, String>>,
    blocks: RwLock<BTreeMap<i64, Arc<Block>>>,
    /// Where its metadata is kept on disk (`dir:` only).
    persistence: Persistence,
    shared: Arc<Shared>,
}

/// A container's on-disk metadata.
/// Which write of the `.container` file failed, for its message.
#[derive(Clone, Copy)]
enum DescriptorWrite {
    Create,
    Update,
}

pub(super) enum Persistence {
    /// memory and discard: nothing on disk.
    None,
    /// `dir:`: its container DB and `.container` file.
    Db(Arc<ContainerDb>),
    /// `dir:`, but they could not be created: every PutBlock answers IO_EXCEPTION with this.
    Broken(String),
}

impl Persistence {
    /// A container whose metadata could not be created in `dir`.
    pub(super) fn broken(id: i64, dir: &std::path::Path, e: &dyn std::fmt::Display) -> Self {
        let message = format!(
            "Container {id}: cannot create its metadata in {}: {e}",
            dir.display()
        );
        tracing::warn!("{message}");
        Persistence::Broken(message)
    }
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
    /// What a new container keeps on disk: with `dir:` its directories, container DB and
    /// `.container` file, created here (blocking I/O, once per container; the request path runs
    /// it on the blocking pool, see [`super::ContainerStore::create_replica_async`]); nothing
    /// for the other stores.
    pub(super) fn persistence_for(
        shared: &Shared,
        id: i64,
        state: State,
        replica_index: i32,
    ) -> Persistence {
        Self::try_persistence(shared, id, state, replica_index)
            .unwrap_or_else(|e| Persistence::broken(id, &shared.container_path(id), &e))
    }

    /// [`Container::persistence_for`], failing where the directories, DB or `.container` file
    /// cannot be made.
    pub(super) fn try_persistence(
        shared: &Shared,
        id: i64,
        state: State,
        replica_index: i32,
    ) -> Result<Persistence, CreateError> {
        match &shared.kind {
            StoreKind::Dir(_) => {
                let descriptor = Descriptor {
                    id,
                    state,
                    replica_index,
                    metadata: BTreeMap::new(),
                };
                ContainerDb::create(&shared.container_path(id), &descriptor, shared.sync)
                    .map(|db| Persistence::Db(Arc::new(db)))
            }
            _ => Ok(Persistence::None),
        }
    }

    /// A new container with the `persistence` [`Container::persistence_for`] made. `charged`:
    /// what the store charged the metadata account for the container itself.
    pub(super) fn new(
        id: i64,
        state: State,
        replica_index: i32,
        shared: Arc<Shared>,
        charged: u64,
        persistence: Persistence,
    ) -> Self {
        Self {
            id,
            state: AtomicI32::new(state as i32),
            bytes_used: AtomicU64::new(0),
            block_count: AtomicU64::new(0),
            bcs_id: AtomicU64::new(0),
            replica_index,
            delete_tx_id: AtomicI64::new(0),
            held: AtomicU64::new(0),
            meta_held: AtomicU64::new(charged),
            committed: RwLock::default(),
            metadata_cost: AtomicU64::new(0),
            metadata: RwLock::default(),
            blocks: RwLock::default(),
            persistence,
            shared,
        }
    }

    /// A container read back from disk (`dir:` at start-up): its state, counters and committed
    /// blocks as its metadata last recorded them, and every block file of its `chunks`
    /// directory with its length — also files no PutBlock committed, as the DataNode (2.2.0)
    /// keeps them: ReadChunk reads them, the next WriteChunk must start at their length, GetBlock
    /// does not know them and `bytesUsed` counts them only if a later PutBlock of the container
    /// recorded them. The capacity counts every file's length.
    pub(super) fn restored(r: Restored, files: Vec<(i64, u64)>, shared: Arc<Shared>) -> Self {
        let id = r.descriptor.id;
        let mut file_of: BTreeMap<i64, u64> = files.into_iter().collect();
        let held: u64 = file_of.values().sum();
        let mut blocks = BTreeMap::new();
        let mut add =
            |local_id: i64, committed: Option<BlockData>, finalized: bool, len: Option<u64>| {
                let file =
                    len.map(|len| (BlockFile::existing(shared.block_path(id, local_id)), len));
                let state = BlockState::restored(file, committed, finalized);
                blocks.insert(local_id, Arc::new(Block::new(state)));
            };
        // The metadata account is charged what a request-created container with these blocks
        // and metadata would hold, without a limit: what was acknowledged before the restart
        // is served after it, even if --metadata-capacity has shrunk since.
        let mut charged = bounds::CONTAINER_COST;
        let mut committed = BTreeSet::new();
        for (local_id, stored) in r.blocks {
            let len = file_of.remove(&local_id);
            charged += bounds::BLOCK_COST + bounds::block_data_cost(&stored.data);
            committed.insert(DecimalKey(local_id));
            add(local_id, Some(stored.data), stored.finalized, len);
        }
        for (local_id, len) in file_of {
            charged += bounds::BLOCK_COST;
            add(local_id, None, false, Some(len));
        }
        let metadata_cost: u64 = r
            .descriptor
            .metadata
            .iter()
            .map(|(k, v)| {
                bounds::key_value_cost(&KeyValue {
                    key: k.clone(),
                    value: Some(v.clone()),
                }) as u64
            })
            .sum();
        charged += metadata_cost;
        shared.used.fetch_add(held, Ordering::AcqRel);
        shared.meta_used.fetch_add(charged, Ordering::AcqRel);
        Self {
            id,
            state: AtomicI32::new(r.descriptor.state as i32),
            bytes_used: AtomicU64::new(r.bytes_used),
            block_count: AtomicU64::new(r.block_count),
            bcs_id: AtomicU64::new(r.bcs_id),
            replica_index: r.descriptor.replica_index,
            delete_tx_id: AtomicI64::new(0),
            held: AtomicU64::new(held),
            meta_held: AtomicU64::new(charged),
            metadata_cost: AtomicU64::new(metadata_cost),
            committed: RwLock::new(committed),
            metadata: RwLock::new(r.descriptor.metadata),
            blocks: RwLock::new(blocks),
            persistence: Persistence::Db(Arc::new(r.db)),
            shared,
        }
    }

    /// Rewrites the `.container` file from the container's state now (`dir:` only; rare:
    /// create, close, UNHEALTHY, UpdateContainer; blocking I/O). A failure is Ozone's
    /// `KeyValueContainer.writeToContainerFile`: CONTAINER_FILES_CREATE_ERROR, "Failed to
    /// {create|update} container file PATH: " and the container data as they are now (2.1.0,
    /// 2.2.0; 2.0.0: "Error while creating/updating container file. ContainerID: ID, container
    /// path: PATH"); the caller then undoes its change, as Ozone's callers do.
    fn persist_descriptor(&self, write: DescriptorWrite, datanode_uuid: &str) -> StoreResult<()> {
        let Persistence::Db(db) = &self.persistence else {
            return Ok(());
        };
        let descriptor = Descriptor {
            id: self.id,
            state: self.state(),
            replica_index: self.replica_index,
            metadata: read(&self.metadata).clone(),
        };
        db.write_descriptor(&descriptor).map_err(|e| {
            tracing::warn!(container = self.id, error = %e, "cannot write the .container file");
            let op = match write {
                DescriptorWrite::Create => "create",
                DescriptorWrite::Update => "update",
            };
            let path = db.descriptor_path();
            let message = if self.shared.version().at_least(OzoneVersion::V2_1) {
                format!(
                    "Failed to {op} container file {}: {}",
                    path.display(),
                    self.describe(datanode_uuid)
                )
            } else {
                format!(
                    "Error while creating/updating container file. ContainerID: {}, container \
                     path: {}",
                    self.id,
                    path.display()
                )
            };
            StoreError::new(OzoneResult::ContainerFilesCreateError, message)
        })
    }

    /// Runs `f`, which may write the `.container` file (close, UpdateContainer, UNHEALTHY), where
    /// blocking is allowed: on the blocking pool when this container keeps one (`dir:`), inline
    /// otherwise.
    pub async fn on_disk<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Container) -> T + Send + 'static,
    ) -> T {
        if !matches!(self.persistence, Persistence::Db(_)) {
            return f(self);
        }
        let this = Arc::clone(self);
        match tokio::task::spawn_blocking(move || f(&this)).await {
            Ok(t) => t,
            // `f` panicked: the same panic here, as if it had run inline.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
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

    /// The EC replica index (0: not an EC replica).
    pub fn replica_index(&self) -> i32 {
        self.replica_index
    }

    /// The newest block-deletion transaction recorded (`deleteTransactionId`, 0: none).
    pub fn delete_transaction_id(&self) -> i64 {
        self.delete_tx_id.load(Ordering::Acquire)
    }

    /// Records a block-deletion transaction SCM sent (keeps the newest).
    pub fn note_delete_transaction(&self, tx_id: i64) {
        self.delete_tx_id.fetch_max(tx_id, Ordering::AcqRel);
    }

    /// `BlockUtils.verifyReplicaIdx` (GetBlock, ReadChunk, ReadBlock): an EC container answers
    /// CONTAINER_NOT_FOUND for a request naming another, non-zero replica index.
    pub fn verify_replica_index(&self, id: &DatanodeBlockId) -> StoreResult<()> {
        match id.replica_index {
            Some(r) if self.replica_index > 0 && r != 0 && r != self.replica_index => {
                Err(StoreError::new(
                    OzoneResult::ContainerNotFound,
                    format!(
                        "Unable to find the Container with replicaIdx {r}. Container {} \
                         replicaIdx is {}.",
                        self.id, self.replica_index
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Whether the container holds no committed block (DeleteContainer's "empty").
    pub fn is_empty(&self) -> bool {
        self.block_count() == 0
    }

    /// DeleteContainer's checks (`KeyValueHandler.deleteInternal`): without force an OPEN
    /// container is DELETE_ON_OPEN_CONTAINER and a non-empty one DELETE_ON_NON_EMPTY_CONTAINER.
    pub fn check_delete(&self, force: bool) -> StoreResult<()> {
        if force {
            return Ok(());
        }
        if self.state() == State::Open {
            return Err(StoreError::new(
                OzoneResult::DeleteOnOpenContainer,
                "Deletion of Open Container is not allowed.",
            ));
        }
        if !self.is_empty() {
            return Err(StoreError::new(
                OzoneResult::DeleteOnNonEmptyContainer,
                "Non-force deletion of non-empty container is not allowed.",
            ));
        }
        Ok(())
    }

    /// UpdateContainer (`KeyValueContainer.update`): with metadata, an INVALID container is
    /// INVALID_CONTAINER_STATE and one that is not OPEN needs `forceUpdate`; the keys are added
    /// (replacing equal keys). Empty metadata: success, no checks.
    pub fn update(
        &self,
        metadata: &[KeyValue],
        force: bool,
        datanode_uuid: &str,
    ) -> StoreResult<()> {
        if metadata.is_empty() {
            return Ok(());
        }
        let legacy = !self.shared.version().at_least(OzoneVersion::V2_1);
        let state = self.state();
        if state == State::Invalid {
            let msg = if legacy {
                format!("Invalid container data. ContainerID: {}", self.id)
            } else {
                format!("Invalid container data: {}", self.describe(datanode_uuid))
            };
            return Err(StoreError::new(OzoneResult::InvalidContainerState, msg));
        }
        if state != State::Open && !force {
            let msg = if legacy {
                format!(
                    "Updating a closed container without force option is not allowed. \
                     ContainerID: {}",
                    self.id
                )
            } else {
                format!(
                    "Updating a closed container without force option is disallowed: {}",
                    self.describe(datanode_uuid)
                )
            };
            return Err(StoreError::new(OzoneResult::UnsupportedRequest, msg));
        }
        self.add_metadata(metadata)?;
        self.persist_descriptor(DescriptorWrite::Update, datanode_uuid)
            .inspect_err(|_| {
                // What `KeyValueContainer.update` (2.0.0 to 2.2.0) leaves: it "restores" the old
                // metadata with `setMetadata(oldMetadata)`, but `oldMetadata` is
                // `getMetadata()`, an unmodifiable view of the very map `setMetadata` clears
                // before copying from it, so the container is left with no metadata at all.
                self.clear_metadata();
            })
    }

    /// CreateContainer's metadata.
    pub fn set_metadata(&self, metadata: &[KeyValue], datanode_uuid: &str) -> StoreResult<()> {
        if metadata.is_empty() {
            return Ok(());
        }
        self.add_metadata(metadata)?;
        self.persist_descriptor(DescriptorWrite::Create, datanode_uuid)
    }

    /// Drops every metadata entry, giving their charge back to the metadata account.
    fn clear_metadata(&self) {
        let mut map = write(&self.metadata);
        let freed: u64 = map
            .iter()
            .map(|(k, v)| (size_of::<KeyValue>() + k.len() + v.len()) as u64)
            .sum();
        map.clear();
        let cost = self.metadata_cost.load(Ordering::Acquire);
        self.metadata_cost
            .store(cost.saturating_sub(freed), Ordering::Release);
        drop(map);
        self.release_meta(freed);
    }

    /// Adds (or replaces) metadata entries, charging their growth to the metadata account:
    /// DISK_OUT_OF_SPACE, and nothing changed, when it does not fit.
    fn add_metadata(&self, metadata: &[KeyValue]) -> StoreResult<()> {
        let mut map = write(&self.metadata);
        let mut added = 0u64;
        let mut removed = 0u64;
        for kv in metadata {
            let value = kv.value.as_deref().unwrap_or_default();
            match map.get(&kv.key) {
                Some(old) => {
                    added += value.len() as u64;
                    removed += old.len() as u64;
                }
                None => added += bounds::key_value_cost(kv) as u64,
            }
        }
        // Keys repeated within one request are charged once each: a little too much, never less.
        let growth = added.saturating_sub(removed);
        let cost = self.metadata_cost.load(Ordering::Acquire);
        if cost + growth > bounds::MAX_CONTAINER_METADATA {
            // ReadContainer answers all of it in one message.
            return Err(StoreError::new(
                OzoneResult::DiskOutOfSpace,
                format!(
                    "Container {}: {} more bytes of metadata would pass dn-sim's bound of {} \
                     per container",
                    self.id,
                    growth,
                    bounds::MAX_CONTAINER_METADATA
                ),
            ));
        }
        self.reserve_meta(growth)?;
        self.metadata_cost.store(cost + growth, Ordering::Release);
        for kv in metadata {
            map.insert(kv.key.clone(), kv.value.clone().unwrap_or_default());
        }
        Ok(())
    }

    fn reserve_meta(&self, n: u64) -> StoreResult<()> {
        self.shared.reserve_meta(self.id, n)?;
        self.meta_held.fetch_add(n, Ordering::AcqRel);
        Ok(())
    }

    fn release_meta(&self, n: u64) {
        self.shared.release_meta(n);
        self.meta_held.fetch_sub(n, Ordering::AcqRel);
    }

    /// `KeyValueContainerData.toString()` (2.1+); dn-sim has no pipeline, so its origin names
    /// only the DataNode.
    fn describe(&self, datanode_uuid: &str) -> String {
        format!(
            "KeyValueContainerData #{} ({}, {}, ri={}, origin=[dn_{datanode_uuid}, pipeline_])",
            self.id,
            self.state().as_str_name(),
            if self.is_empty() {
                "empty"
            } else {
                "non-empty"
            },
            self.replica_index
        )
    }

    /// GetContainerChecksumInfo's state rule: only CLOSED, QUASI_CLOSED and UNHEALTHY
    /// containers have checksum information; others are UNCLOSED_CONTAINER_IO.
    pub fn check_checksum_info(&self) -> StoreResult<()> {
        match self.state() {
            State::Closed | State::QuasiClosed | State::Unhealthy => Ok(()),
            other => Err(StoreError::new(
                OzoneResult::UnclosedContainerIo,
                format!(
                    "Checksum information is not available for containers in state {}",
                    other.as_str_name()
                ),
            )),
        }
    }

    /// Frees the capacity this container holds (DeleteContainer).
    pub(super) fn release_all(&self) {
        self.shared.release(self.held.swap(0, Ordering::AcqRel));
        self.shared
            .release_meta(self.meta_held.swap(0, Ordering::AcqRel));
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
    /// CLOSED container succeeds; UNHEALTHY answers CONTAINER_UNHEALTHY. With `dir:`, a
    /// `.container` file that cannot be rewritten leaves the state as it was and answers
    /// CONTAINER_FILES_CREATE_ERROR (`KeyValueContainer.updateContainerData`; Ozone writes the
    /// file at CLOSING first, so its message names CLOSING for an OPEN container).
    pub fn close(&self, datanode_uuid: &str) -> StoreResult<()> {
        loop {
            let current = self.state();
            let result = match current {
                State::Closed => return Ok(()),
                State::Open | State::Recovering | State::Closing | State::QuasiClosed => {
                    if !matches!(self.persistence, Persistence::Db(_)) {
                        if self.transition(current, State::Closed) {
                            return Ok(());
                        }
                        continue;
                    }
                    // Ozone's markContainerForClose writes CLOSING first for an OPEN or
                    // RECOVERING container, then close() writes CLOSED; each failed write puts
                    // back the state before it.
                    let steps: &[State] = match current {
                        State::Open | State::Recovering => &[State::Closing, State::Closed],
                        _ => &[State::Closed],
                    };
                    if !self.transition(current, steps[0]) {
                        continue;
                    }
                    let mut before = current;
                    for &step in steps {
                        self.state.store(step as i32, Ordering::Release);
                        if let Err(e) =
                            self.persist_descriptor(DescriptorWrite::Update, datanode_uuid)
                        {
                            self.state.store(before as i32, Ordering::Release);
                            return Err(e);
                        }
                        before = step;
                    }
                    return Ok(());
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

    /// QUASI_CLOSED, as a DataNode that gets a CloseContainer command without `force` for a
    /// container whose Ratis pipeline it does not host (Ozone 2.2.0's
    /// `CloseContainerCommandHandler`: `markContainerForClose`, then `quasiCloseContainer`): OPEN
    /// and CLOSING become QUASI_CLOSED; QUASI_CLOSED and CLOSED stay; the other states answer as
    /// [`Container::close`]. With `dir:`, a `.container` file that cannot be rewritten leaves
    /// the state as it was.
    pub fn quasi_close(&self, datanode_uuid: &str) -> StoreResult<()> {
        loop {
            let current = self.state();
            let result = match current {
                State::QuasiClosed | State::Closed => return Ok(()),
                State::Open | State::Closing => {
                    if !self.transition(current, State::QuasiClosed) {
                        continue;
                    }
                    if matches!(self.persistence, Persistence::Db(_))
                        && let Err(e) =
                            self.persist_descriptor(DescriptorWrite::Update, datanode_uuid)
                    {
                        self.state.store(current as i32, Ordering::Release);
                        return Err(e);
                    }
                    return Ok(());
                }
                State::Recovering => OzoneResult::InvalidContainerState,
                State::Unhealthy => OzoneResult::ContainerUnhealthy,
                State::Invalid => OzoneResult::InvalidContainerState,
                State::Deleted => OzoneResult::ContainerInternalError,
            };
            return Err(StoreError::new(
                result,
                format!(
                    "Cannot quasi close container #{} while in {} state.",
                    self.id,
                    current.as_str_name()
                ),
            ));
        }
    }

    /// Marks an OPEN, CLOSING or RECOVERING container UNHEALTHY (a failed write, HddsDispatcher
    /// step 8). Returns whether the state changed.
    pub fn mark_unhealthy(&self) -> bool {
        loop {
            let current = self.state();
            if !matches!(current, State::Open | State::Closing | State::Recovering) {
                return false;
            }
            if self.transition(current, State::Unhealthy) {
                // A failed write is only logged: HddsDispatcher keeps the container UNHEALTHY
                // in memory and answers the request's own failure.
                let _ = self.persist_descriptor(DescriptorWrite::Update, "");
                return true;
            }
        }
    }

    fn transition(&self, from: State, to: State) -> bool {
        self.state
            .compare_exchange(from as i32, to as i32, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// ReadContainer's `ContainerDataProto` (`KeyValueContainerData.getProtoBufMessage`): the
    /// container directory's absolute path, never `size`, `bytesUsed` always in 2.0 and only when
    /// above 0 from 2.1 on.
    pub fn data(&self) -> ContainerDataProto {
        let used = self.bytes_used() as i64;
        let bytes_used =
            (used > 0 || !self.shared.version().at_least(OzoneVersion::V2_1)).then_some(used);
        let metadata = read(&self.metadata)
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.clone(),
                value: Some(v.clone()),
            })
            .collect();
        ContainerDataProto {
            container_id: self.id,
            metadata,
            container_path: Some(self.shared.container_path(self.id).display().to_string()),
            bytes_used,
            size: None,
            block_count: Some(self.block_count() as i64),
            state: Some(self.state() as i32),
            container_type: Some(ContainerType::KeyValueContainer as i32),
        }
    }

    fn block(&self, local_id: i64) -> Option<Arc<Block>> {
        read(&self.blocks).get(&local_id).cloned()
    }

    /// The block, added (and charged to the metadata account) if absent.
    fn block_or_insert(&self, local_id: i64) -> StoreResult<Arc<Block>> {
        if let Some(block) = self.block(local_id) {
            return Ok(block);
        }
        let mut blocks = write(&self.blocks);
        if let Some(block) = blocks.get(&local_id) {
            return Ok(Arc::clone(block));
        }
        self.reserve_meta(bounds::BLOCK_COST)?;
        Ok(Arc::clone(blocks.entry(local_id).or_default()))
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
        let block = self.block_or_insert(block_id.local_id)?;
        let mut state = block.write().await;
        self.write_locked(&mut state, block_id.local_id, chunk, data)
            .await
    }

    /// A write followed by a PutBlock: WriteChunk with a piggybacked PutBlock, and PutSmallFile.
    /// When both name the same block (the normal case) they happen under one lock, so no other
    /// write comes between them. `put` is the PutBlock as validated by the caller: an `Err` (a
    /// malformed piggybacked BlockData) is answered after the chunk was written, as the
    /// DataNode handles the piggybacked PutBlock only after the write. The PutBlock can also
    /// fail after the write succeeded (its own UNABLE_TO_FIND_CHUNK), as in the DataNode.
    pub async fn write_chunk_and_put(
        &self,
        block_id: &DatanodeBlockId,
        chunk: &ChunkInfo,
        data: Bytes,
        put: StoreResult<PutBlock>,
    ) -> StoreResult<BlockData> {
        self.verify(chunk, &data)?;
        let block = self.block_or_insert(block_id.local_id)?;
        let mut state = block.write().await;
        self.write_locked(&mut state, block_id.local_id, chunk, data)
            .await?;
        let put = put?;
        if put.local_id() == block_id.local_id {
            return self.put_locked(&mut state, put).await;
        }
        drop(state);
        self.put_block(put).await
    }

    /// PutBlock.
    pub async fn put_block(&self, put: PutBlock) -> StoreResult<BlockData> {
        let block = self.block_or_insert(put.local_id())?;
        let mut state = block.write().await;
        self.put_locked(&mut state, put).await
    }

    /// GetBlock: CONTAINER_NOT_FOUND (another EC replica), UNKNOWN_BCSID, NO_SUCH_BLOCK,
    /// BCSID_MISMATCH, or the stored `BlockData`.
    pub async fn get_block(&self, id: &DatanodeBlockId) -> StoreResult<BlockData> {
        self.verify_replica_index(id)?;
        self.get_block_unchecked(id).await
    }

    /// `BlockManager.getBlock` without the replica check (GetSmallFile does none).
    async fn get_block_unchecked(&self, id: &DatanodeBlockId) -> StoreResult<BlockData> {
        self.verify_bcs_id(id)?;
        let block = self
            .block(id.local_id)
            .ok_or_else(|| self.no_such_block(id))?;
        let state = block.read().await;
        state.committed(id)
    }

    /// ReadBlock (2.2): the committed block's bytes from `offset` (aligned down to a checksum
    /// window) for `length` bytes (rounded up to whole windows, cut at the block's size), in
    /// pieces of `piece_size` bytes (1 MiB when 0), each with the stored checksums covering it.
    /// `Ok(None)` when there is nothing to send. Errors as `KeyValueHandler.readBlock`: the block
    /// file must exist, then replica index, bcsId and the committed block are checked.
    pub async fn read_block_pieces(
        &self,
        id: &DatanodeBlockId,
        offset: u64,
        length: u64,
        piece_size: u32,
        describe: &str,
    ) -> StoreResult<Vec<(ChecksumData, u64, Bytes)>> {
        let failed = |result| StoreError::new(result, format!("Failed to readBlock {describe}"));
        let block = self.block(id.local_id);
        let has_file = match &block {
            Some(b) => b.read().await.has_data(),
            None => false,
        };
        if !has_file {
            return Err(failed(OzoneResult::IoException));
        }
        self.verify_replica_index(id)?;
        self.verify_bcs_id(id)?;
        let block = block.expect("checked above");
        let state = block.read().await;
        let data = state.committed(id)?;
        let Some(first) = data.chunks.first() else {
            return Err(failed(OzoneResult::ContainerInternalError));
        };
        let none = first.checksum_data.r#type == ChecksumType::None as i32;
        let bpc = if none {
            64 << 10 // STREAMING_BYTES_PER_CHUNK
        } else {
            u64::from(first.checksum_data.bytes_per_checksum)
        };
        if bpc == 0 {
            return Err(failed(OzoneResult::ContainerInternalError));
        }
        let per_chunk = first.len;
        let piece_size = if piece_size == 0 {
            1 << 20
        } else {
            u64::from(piece_size)
        };
        let alignment = offset % bpc;
        let mut at = offset - alignment;
        let size = data.size.unwrap_or(0).max(0) as u64;
        let required = length
            .saturating_add(alignment)
            .div_ceil(bpc)
            .saturating_mul(bpc)
            .min(size.saturating_sub(at));
        let file_len = state.len();
        // dn-sim answers one message where the DataNode streams pieces: bound it, its pieces and
        // its checksums before reading anything.
        let answered = required.min(file_len.saturating_sub(at));
        if answered > bounds::MAX_ANSWER_BYTES {
            return Err(bounds::oversize(
                "bytes",
                bounds::MAX_ANSWER_BYTES,
                answered,
            ));
        }
        bounds::check_pieces(answered, piece_size)?;
        if !none {
            bounds::check_pieces(answered, bpc)?;
        }
        let mut total = 0;
        let mut out = Vec::new();
        let addr = self.at(id.local_id);
        while total < required && at < file_len {
            let n = piece_size.min(file_len - at);
            let bytes = super::block::concat(state.read(&addr, at, n, n).await?);
            let checksum_data = if none {
                ChecksumData {
                    r#type: ChecksumType::None as i32,
                    bytes_per_checksum: 0,
                    checksums: Vec::new(),
                }
            } else {
                let count = n.div_ceil(bpc);
                let mut checksums = Vec::with_capacity(count as usize);
                for i in 0..count {
                    let pos = at + i * bpc;
                    let c = (pos / per_chunk.max(1)) as usize;
                    let csi = ((pos % per_chunk.max(1)) / bpc) as usize;
                    let sum = data
                        .chunks
                        .get(c)
                        .and_then(|chunk| chunk.checksum_data.checksums.get(csi))
                        .ok_or_else(|| failed(OzoneResult::ContainerInternalError))?;
                    checksums.push(sum.clone());
                }
                ChecksumData {
                    r#type: first.checksum_data.r#type,
                    bytes_per_checksum: bpc as u32,
                    checksums,
                }
            };
            out.push((checksum_data, at, bytes));
            at += n;
            total += n;
        }
        Ok(out)
    }

    /// What the container's metadata entries take (`bounds::key_value_cost` summed): what a
    /// ReadContainer answer copies.
    pub fn metadata_cost(&self) -> u64 {
        self.metadata_cost.load(Ordering::Acquire)
    }

    /// The memory a copy of the block's committed `BlockData` takes (`bounds::block_data_cost`;
    /// 0 when nothing was put): what a GetBlock, FinalizeBlock or GetSmallFile answer clones.
    pub async fn committed_cost(&self, local_id: i64) -> u64 {
        match self.block(local_id) {
            Some(block) => block
                .read()
                .await
                .committed_data()
                .map_or(0, bounds::block_data_cost),
            None => 0,
        }
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
        self.verify_replica_index(id)?;
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
        let data = state.committed(id)?;
        let at = self.at(id.local_id);
        // The whole answer is bounded before any chunk is read: its bytes and its buffers.
        let mut total = 0u64;
        let mut pieces = 0u64;
        for chunk in &data.chunks {
            total = total.saturating_add(chunk.len);
            let piece = read_piece_size(&chunk.checksum_data, chunk.len, v1);
            pieces += chunk.len.div_ceil(piece.max(1)).max(1);
        }
        if total > bounds::MAX_ANSWER_BYTES {
            return Err(bounds::oversize("bytes", bounds::MAX_ANSWER_BYTES, total));
        }
        if pieces > bounds::MAX_ANSWER_PIECES {
            return Err(bounds::oversize(
                "buffers",
                bounds::MAX_ANSWER_PIECES,
                pieces,
            ));
        }
        let mut buffers = Vec::with_capacity(data.chunks.len());
        for chunk in &data.chunks {
            let piece = read_piece_size(&chunk.checksum_data, chunk.len, v1);
            buffers.extend(state.read(&at, chunk.offset, chunk.len, piece).await?);
        }
        Ok((data, buffers))
    }

    /// ListBlock: at most `count` committed blocks in the DataNode's RocksDB key order, the
    /// localID's decimal text (1, 10, 100, 2, …), from the block `start` on (inclusive; from the
    /// first when `start` is absent or -1). A `start` that is not a committed block lists nothing
    /// ("Key not found, return empty list"). A negative start or a count that is not a positive
    /// Java `int` fail the DataNode's preconditions (CONTAINER_INTERNAL_ERROR).
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
        let mut out = Vec::new();
        let mut answer = 0u64;
        let mut after: Option<DecimalKey> = None;
        // In batches, so that neither the index's lock nor a list of IDs spans the whole
        // container; only what the answer holds is cloned, and never past the message limit.
        const BATCH: usize = 1024;
        loop {
            let ids: Vec<i64> = {
                let committed = read(&self.committed);
                let from = match (after, start) {
                    (Some(last), _) => committed
                        .range((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded)),
                    (None, -1) => committed.range(..),
                    (None, start) if committed.contains(&DecimalKey(start)) => {
                        committed.range(DecimalKey(start)..)
                    }
                    (None, _) => return Ok(Vec::new()),
                };
                from.take(BATCH.min(count - out.len()))
                    .map(|k| k.0)
                    .collect()
            };
            let Some(&last) = ids.last() else {
                return Ok(out);
            };
            after = Some(DecimalKey(last));
            for id in ids {
                let Some(block) = self.block(id) else {
                    continue;
                };
                if let Some(data) = block.read().await.committed_data() {
                    answer += prost::Message::encoded_len(data) as u64 + 5;
                    if answer > bounds::MAX_ANSWER_BYTES {
                        return Err(bounds::oversize(
                            "bytes of block list",
                            bounds::MAX_ANSWER_BYTES,
                            answer,
                        ));
                    }
                    out.push(data.clone());
                }
            }
            if out.len() >= count {
                return Ok(out);
            }
        }
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
        let data = state.committed(id)?;
        if !state.has_data() {
            return Err(super::block::no_file(&self.at(id.local_id)));
        }
        if !state.is_finalized()
            && let Some(db) = self.db()?
        {
            let local_id = id.local_id;
            super::dir::blocking(move || db.finalize_block(local_id))
                .await
                .map_err(|e| {
                    StoreError::new(
                        OzoneResult::IoException,
                        format!("Container {}: FinalizeBlock not recorded: {e}", self.id),
                    )
                })?;
        }
        state.finalize();
        Ok(data)
    }

    /// `--verify-checksums`: the answer of the release's `validateChunkChecksumData`.
    fn verify(&self, chunk: &ChunkInfo, data: &[u8]) -> StoreResult<()> {
        match &self.shared.verifier {
            Some(verifier) => verifier
                .verify_as(self.shared.version(), data, &chunk.checksum_data)
                .map_err(|(result, message)| StoreError::new(result, message)),
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
        let overwrite = chunk.offset < state.len();
        let growth = state.write(&self.at(local_id), chunk, data).await?;
        self.held.fetch_add(growth, Ordering::AcqRel);
        // 2.0 counts an overwrite that extends the block as nothing; 2.1+ count the extension.
        let counted = if overwrite && !self.shared.version().at_least(OzoneVersion::V2_1) {
            0
        } else {
            growth
        };
        self.bytes_used.fetch_add(counted, Ordering::AcqRel);
        Ok(())
    }

    /// A PutBlock under the block's lock, counted in `blockCount` the first time. The
    /// BlockData's memory is charged to the metadata account (its growth over the one it
    /// replaces; DISK_OUT_OF_SPACE when it does not fit). With `dir:` it is committed to the
    /// container DB before it changes anything in memory, so a failed commit leaves the block as
    /// it was.
    async fn put_locked(&self, state: &mut BlockState, put: PutBlock) -> StoreResult<BlockData> {
        let local_id = put.local_id();
        let first = state.check_put(&self.at(local_id), &put)?;
        let old = state.committed_data().map_or(0, bounds::block_data_cost);
        let new = bounds::block_data_cost(put.block());
        self.reserve_meta(new.saturating_sub(old))?;
        if let Err(e) = self.persist_put(local_id, &put, first).await {
            self.release_meta(new.saturating_sub(old));
            return Err(e);
        }
        // `container.updateBlockCommitSequenceId`: the container's bcsId is the highest of its
        // blocks' (0 while only the gRPC path wrote).
        self.bcs_id.fetch_max(put.bcs_id(), Ordering::AcqRel);
        let block = state.commit(put);
        self.release_meta(old.saturating_sub(new));
        if first {
            write(&self.committed).insert(DecimalKey(local_id));
            self.block_count.fetch_add(1, Ordering::AcqRel);
        }
        Ok(block)
    }

    /// Commits a PutBlock's BlockData and the container's counters to the container DB (`dir:`
    /// only; on the blocking pool); IO_EXCEPTION if it cannot.
    async fn persist_put(&self, local_id: i64, put: &PutBlock, first: bool) -> StoreResult<()> {
        let Some(db) = self.db()? else {
            return Ok(());
        };
        let encoded = prost::Message::encode_to_vec(put.block());
        let (bytes_used, bcs_id) = (self.bytes_used(), self.bcs_id().max(put.bcs_id()));
        super::dir::blocking(move || db.put_block(local_id, &encoded, first, bytes_used, bcs_id))
            .await
            .map_err(|e| {
                StoreError::new(
                    OzoneResult::IoException,
                    format!("Container {}: PutBlock not committed: {e}", self.id),
                )
            })
    }

    /// The container DB, if this store keeps one; IO_EXCEPTION if it could not be created.
    fn db(&self) -> StoreResult<Option<Arc<ContainerDb>>> {
        match &self.persistence {
            Persistence::None => Ok(None),
            Persistence::Db(db) => Ok(Some(Arc::clone(db))),
            Persistence::Broken(message) => {
                Err(StoreError::new(OzoneResult::IoException, message.clone()))
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
                    "Unable to find the block with bcsID {requested} .Container {} bcsId is \
                     {ours}.",
                    self.id
                ),
            ));
        }
        Ok(())
    }

    fn no_such_block(&self, id: &DatanodeBlockId) -> StoreError {
        no_such_block(id)
    }
}

//! The container store: containers, their blocks and the blocks' bytes, with the DataNode's
//! rules for them (Ozone's HddsDispatcher, KeyValueHandler, BlockManagerImpl). [`crate::datanode::keyvalue`] turns requests into
//! calls of this API; the store knows nothing of requests, responses or gRPC.
//!
//! ## Layout
//! - [`ContainerStore`]: every container by ID, plus what all containers share: the backend
//!   ([`StoreKind`]), the capacity and the optional [`ChecksumVerifier`].
//! - [`Container`] (`container.rs`): state (OPEN, CLOSED, UNHEALTHY, …), usage counters and the
//!   container's blocks, ordered by localID (for ListBlock).
//! - A block (`block.rs`): its length (the length of the DataNode's block file), its bytes in one
//!   of the backends, and the `BlockData` of its last PutBlock. FILE_PER_BLOCK: chunk offsets are
//!   block-relative, a write appends at the current length or overwrites below it.
//! - Backends: [`memory`](memory.rs) (zero-copy `Bytes` segments), [`discard`](discard.rs)
//!   (lengths and metadata only) and [`dir`](dir.rs) (real block files in the DataNode's
//!   `<containerID>/chunks/<localID>.block` layout).
//! - `dir:` also keeps each container's metadata on disk ([`durable`](durable.rs): the
//!   `.container` file and a container DB with every committed `BlockData`), and
//!   [`ContainerStore::open`] reads it back: a restarted dn-sim serves every acknowledged block.
//!
//! ## Concurrency
//! There is no global lock on the request path:
//! - Containers live in [`SHARDS`] `std::sync::RwLock<HashMap>` shards chosen by container ID.
//!   A lookup takes one shard's read lock for a hash probe and an `Arc` clone; only creating a
//!   container takes a write lock. Readers never block each other, and creations (rare: start-up,
//!   CreateContainer, auto-create) block only 1/64 of lookups for a moment. This is what `dashmap`
//!   does internally, without the dependency; a lock-free map (`papaya`) would save an atomic per
//!   lookup, which is noise next to a gRPC request.
//! - A container's blocks are a `std::sync::RwLock<BTreeMap>`: read-locked to find a block,
//!   write-locked only to add one (once per block). These std locks are never held across an
//!   `.await`.
//! - Each block has a `tokio::sync::RwLock`: writes of one block (WriteChunk, PutBlock, and the
//!   write + PutBlock pairs of a piggybacked PutBlock or PutSmallFile) are serialized, as the
//!   DataNode's per-file lock does, while reads share it. It is async because the `dir` backend
//!   holds it across its file I/O on the blocking pool. Streams writing different blocks never
//!   wait for each other.
//! - Usage is counted in atomics: the store's `used` bytes (checked against `--capacity` with a
//!   compare-and-swap reservation) and each container's `bytesUsed` and `blockCount`.

mod block;
pub mod bounds;
mod container;
mod dir;
mod discard;
mod durable;
mod memory;
pub mod verify;

#[cfg(test)]
mod tests;

pub use block::{NONE_READ_BUFFER, PutBlock, concat, read_piece_size};
pub use container::Container;
pub use verify::ChecksumVerifier;

use crate::datanode::container_ids::ContainerIds;
use crate::datanode::version::OzoneVersion;
use common::proto::Result as OzoneResult;
use common::proto::container_data_proto::State;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Number of container-map shards.
pub const SHARDS: usize = 64;

/// `--capacity` default: 1 GiB.
pub const DEFAULT_CAPACITY: u64 = 1 << 30;

/// `ozone.scm.container.size` (5 GB). The DataNode never reports it in ReadContainer's
/// `ContainerDataProto.size`.
pub const MAX_CONTAINER_SIZE: i64 = 5 << 30;

/// Where block bytes go (`--store`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StoreKind {
    /// In memory, as `Bytes` segments (default).
    #[default]
    Memory,
    /// Keep lengths, block metadata and checksums, drop the bytes: long write benchmarks run in
    /// constant memory for data; reading data back fails with `UNABLE_TO_FIND_CHUNK`.
    Discard,
    /// Real block files under this directory, in the DataNode's layout.
    Dir(PathBuf),
}

impl StoreKind {
    /// Whether the backend holds the bytes it is given (and so counts them against capacity).
    pub fn holds_data(&self) -> bool {
        !matches!(self, StoreKind::Discard)
    }
}

impl FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "memory" => Ok(StoreKind::Memory),
            "discard" => Ok(StoreKind::Discard),
            _ => match s.strip_prefix("dir:") {
                Some(path) if !path.is_empty() => Ok(StoreKind::Dir(PathBuf::from(path))),
                _ => Err(format!(
                    "'{s}' is not a store (memory, discard or dir:PATH, e.g. dir:/tmp/dn-sim)"
                )),
            },
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreKind::Memory => f.write_str("memory"),
            StoreKind::Discard => f.write_str("discard"),
            StoreKind::Dir(path) => write!(f, "dir:{}", path.display()),
        }
    }
}

/// A failed store operation: the DataNode's result code and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    pub result: OzoneResult,
    pub message: String,
}

impl StoreError {
    pub fn new(result: OzoneResult, message: impl Into<String>) -> Self {
        Self {
            result,
            message: message.into(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.result.as_str_name(), self.message)
    }
}

impl std::error::Error for StoreError {}

pub type StoreResult<T> = Result<T, StoreError>;

/// What every container of a store shares.
pub(crate) struct Shared {
    kind: StoreKind,
    capacity: u64,
    /// Bytes held by the backend (always 0 for `discard`).
    used: AtomicU64,
    /// Bytes of metadata (containers, block entries, committed BlockData, container metadata),
    /// for every backend; bounded by `meta_capacity` (`bounds`).
    meta_used: AtomicU64,
    /// `--metadata-capacity`: by default `capacity`, at least `bounds::MIN_METADATA_CAPACITY`.
    meta_capacity: AtomicU64,
    verifier: Option<Arc<dyn ChecksumVerifier>>,
    /// Where containers live: `dir:PATH`'s absolute path, else a per-process directory that is
    /// never written (`<tmp>/dn-sim-<pid>`): the paths the DataNode's answers name
    /// (`containerPath`, block files in UNABLE_TO_FIND_CHUNK messages) are absolute.
    root: PathBuf,
    /// The release whose rules apply where releases differ (set once by the handler).
    version: OnceLock<OzoneVersion>,
    /// `--sync` (`hdds.container.chunk.write.sync`, `dir:` only): answer a WriteChunk after its
    /// data, a PutBlock after its metadata commit, is on stable storage (fdatasync/fsync).
    sync: bool,
}

impl Shared {
    fn version(&self) -> OzoneVersion {
        self.version.get().copied().unwrap_or_default()
    }

    /// `<root>/<containerID>`, the container directory.
    fn container_path(&self, container: i64) -> PathBuf {
        self.root.join(container.to_string())
    }

    /// `<root>/<containerID>/chunks/<localID>.block`.
    fn block_path(&self, container: i64, local_id: i64) -> PathBuf {
        dir::block_path(&self.root, container, local_id)
    }

    /// Reserves `n` more bytes, or answers DISK_OUT_OF_SPACE without reserving anything.
    fn reserve(&self, container: i64, n: u64) -> StoreResult<()> {
        if n == 0 || !self.kind.holds_data() {
            return Ok(());
        }
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.capacity)
            })
            .map(|_| ())
            .map_err(|used| {
                StoreError::new(
                    OzoneResult::DiskOutOfSpace,
                    format!(
                        "Container {container}: cannot write {n} more bytes, dn-sim's {} store \
                         holds {used} of its {} bytes (--capacity)",
                        self.kind, self.capacity
                    ),
                )
            })
    }

    fn release(&self, n: u64) {
        if n > 0 && self.kind.holds_data() {
            self.used.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Charges `n` bytes of metadata, or answers DISK_OUT_OF_SPACE (the DataNode's answer when
    /// its volume, which holds its RocksDB, is full) without charging anything.
    fn reserve_meta(&self, container: i64, n: u64) -> StoreResult<()> {
        if n == 0 {
            return Ok(());
        }
        let capacity = self.meta_capacity.load(Ordering::Relaxed);
        self.meta_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= capacity)
            })
            .map(|_| ())
            .map_err(|used| {
                StoreError::new(
                    OzoneResult::DiskOutOfSpace,
                    format!(
                        "Container {container}: cannot keep {n} more bytes of metadata, dn-sim's \
                         store holds {used} of its {capacity} bytes (--metadata-capacity)"
                    ),
                )
            })
    }

    fn release_meta(&self, n: u64) {
        if n > 0 {
            self.meta_used.fetch_sub(n, Ordering::AcqRel);
        }
    }
}

/// One shard of the container map.
type Shard = RwLock<HashMap<i64, Arc<Container>>>;

/// All containers of the simulated DataNode.
pub struct ContainerStore {
    shared: Arc<Shared>,
    shards: Box<[Shard]>,
    /// Serializes the creation and removal of containers on the request path, as Ozone's
    /// `KeyValueHandler.containerCreationLock` serializes creations: with `dir:` they do disk
    /// I/O (on the blocking pool, never under a shard lock or on a runtime thread), and a
    /// removal must not delete a directory a creation of the same ID is filling.
    lifecycle: tokio::sync::Mutex<()>,
}

/// A container the disk would not take (`KeyValueContainer.create`): CONTAINER_FILES_CREATE_ERROR
/// when its `.container` file could not be written, else CONTAINER_INTERNAL_ERROR (dn-sim's
/// `dir:` is one volume, so "all volumes" have failed at once). The message is for the log:
/// HddsDispatcher never lets a client see it (CreateContainer fails the call; an auto-create
/// answers "ContainerID N creation failed").
fn creation_failed(id: i64, dir: &std::path::Path, e: durable::CreateError) -> StoreError {
    tracing::warn!(container = id, dir = %dir.display(), error = %e, "cannot create the container");
    let result = match e {
        durable::CreateError::Exists => {
            return StoreError::new(
                OzoneResult::ContainerAlreadyExists,
                "Container creation failed because ContainerFile already exists",
            );
        }
        durable::CreateError::Descriptor(_) => OzoneResult::ContainerFilesCreateError,
        durable::CreateError::Layout(_) => OzoneResult::ContainerInternalError,
    };
    StoreError::new(
        result,
        format!("Failed to create container {id} in {}: {e}", dir.display()),
    )
}

fn already_exists() -> StoreError {
    StoreError::new(
        OzoneResult::ContainerAlreadyExists,
        "Container creation failed because key value container already exists",
    )
}

impl ContainerStore {
    /// [`ContainerStore::open`] without `--sync`.
    pub fn new(
        kind: StoreKind,
        capacity: u64,
        verifier: Option<Arc<dyn ChecksumVerifier>>,
    ) -> std::io::Result<Self> {
        Self::open(kind, capacity, verifier, false)
    }

    /// The store: empty for memory and discard; `dir:PATH` creates `PATH` if needed and reads
    /// back every container found in it (see [`Container`]'s restore rules). An unusable path or
    /// an unreadable container is an error here, at start-up, not at the first write. `sync`
    /// (`--sync`, `dir:` only; the caller refuses it for other stores): data and metadata are
    /// on stable storage before a write is answered.
    pub fn open(
        kind: StoreKind,
        capacity: u64,
        verifier: Option<Arc<dyn ChecksumVerifier>>,
        sync: bool,
    ) -> std::io::Result<Self> {
        let kind_is_dir = matches!(kind, StoreKind::Dir(_));
        let root = match &kind {
            StoreKind::Dir(root) => {
                std::fs::create_dir_all(root)?;
                std::path::absolute(root)?
            }
            _ => std::path::absolute(std::env::temp_dir())?
                .join(format!("dn-sim-{}", std::process::id())),
        };
        let store = Self {
            shared: Arc::new(Shared {
                kind,
                capacity,
                used: AtomicU64::new(0),
                meta_used: AtomicU64::new(0),
                meta_capacity: AtomicU64::new(capacity.max(bounds::MIN_METADATA_CAPACITY)),
                verifier,
                root,
                version: OnceLock::new(),
                sync: sync && kind_is_dir,
            }),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            lifecycle: tokio::sync::Mutex::new(()),
        };
        store.restore()?;
        Ok(store)
    }

    /// `dir:` at start-up: every `<containerID>` directory with a `.container` file becomes a
    /// container again, as the DataNode's `ContainerReader` (2.2.0) loads them: a RECOVERING
    /// container is deleted (replica index 0) or marked UNHEALTHY (an EC replica), a DELETED one
    /// is deleted. A directory without a `.container` file (a creation cut short) or without its
    /// DB is skipped.
    fn restore(&self) -> std::io::Result<()> {
        if !matches!(self.shared.kind, StoreKind::Dir(_)) {
            return Ok(());
        }
        for entry in std::fs::read_dir(&self.shared.root)? {
            let entry = entry?;
            let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i64>().ok())
            else {
                continue;
            };
            let dir = entry.path();
            if !entry.file_type()?.is_dir() {
                continue;
            }
            if !durable::ContainerDb::exists(&dir, id) {
                tracing::warn!(path = %dir.display(), "no .container file: not a container, skipped");
                continue;
            }
            let restored = match durable::ContainerDb::open(&dir, id, self.shared.sync) {
                Ok(restored) => restored,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tracing::warn!(container = id, error = %e, "skipping the container");
                    continue;
                }
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("container {id}: {e}"),
                    ));
                }
            };
            let state = restored.descriptor.state;
            let ec = restored.descriptor.replica_index > 0;
            if state == State::Deleted || (state == State::Recovering && !ec) {
                drop(restored);
                std::fs::remove_dir_all(&dir)?;
                continue;
            }
            let files = dir::block_files(&dir)?;
            let container = Arc::new(Container::restored(
                restored,
                files,
                Arc::clone(&self.shared),
            ));
            if state == State::Recovering {
                container.mark_unhealthy();
            }
            write(self.shard(id)).insert(id, container);
        }
        Ok(())
    }

    /// A memory store with the default capacity and no checksum verification.
    pub fn in_memory() -> Self {
        Self::new(StoreKind::Memory, DEFAULT_CAPACITY, None).expect("a memory store needs no I/O")
    }

    /// Creates the `--containers` set, OPEN; IDs that already exist are left alone.
    pub fn precreate(&self, ids: &ContainerIds) {
        for id in ids.iter() {
            self.get_or_create(id);
        }
    }

    /// The release whose rules apply where releases differ; the first call wins (the handler
    /// sets it from `--ozone-version`). Default: the newest release.
    pub fn set_version(&self, version: OzoneVersion) {
        let _ = self.shared.version.set(version);
    }

    pub fn version(&self) -> OzoneVersion {
        self.shared.version()
    }

    /// The directory containers live in (absolute).
    pub fn root(&self) -> &std::path::Path {
        &self.shared.root
    }

    pub fn kind(&self) -> &StoreKind {
        &self.shared.kind
    }

    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }

    /// Bytes the backend holds (block lengths summed; 0 for `discard`).
    pub fn used(&self) -> u64 {
        self.shared.used.load(Ordering::Acquire)
    }

    /// Sets the metadata account's bound (`--metadata-capacity`).
    pub fn set_metadata_capacity(&self, bytes: u64) {
        self.shared.meta_capacity.store(bytes, Ordering::Relaxed);
    }

    pub fn metadata_capacity(&self) -> u64 {
        self.shared.meta_capacity.load(Ordering::Relaxed)
    }

    /// Bytes of metadata charged (containers, blocks, BlockData, container metadata).
    pub fn metadata_used(&self) -> u64 {
        self.shared.meta_used.load(Ordering::Acquire)
    }

    /// The DataNode's volume-full check (HddsDispatcher, 2.1 on): no room for a single byte.
    pub fn is_full(&self) -> bool {
        self.shared.kind.holds_data() && self.used() >= self.shared.capacity
    }

    /// Whether writes are answered only once durable (`--sync`).
    pub fn syncs(&self) -> bool {
        self.shared.sync
    }

    pub fn verifies_checksums(&self) -> bool {
        self.shared.verifier.is_some()
    }

    fn shard(&self, id: i64) -> &Shard {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(id);
        &self.shards[(hash % SHARDS as u64) as usize]
    }

    pub fn get(&self, id: i64) -> Option<Arc<Container>> {
        read(self.shard(id)).get(&id).cloned()
    }

    /// The container, or CONTAINER_NOT_FOUND "ContainerID N does not exist".
    pub fn lookup(&self, id: i64) -> StoreResult<Arc<Container>> {
        self.get(id).ok_or_else(|| {
            StoreError::new(
                OzoneResult::ContainerNotFound,
                format!("ContainerID {id} does not exist"),
            )
        })
    }

    /// CreateContainer: a new container in `state` (OPEN unless the request says otherwise), or
    /// CONTAINER_ALREADY_EXISTS.
    pub fn create(&self, id: i64, state: State) -> StoreResult<Arc<Container>> {
        self.create_replica(id, state, 0)
    }

    /// [`ContainerStore::create`] of an EC replica (`replicaIndex` > 0; 0 = not EC). With
    /// `dir:` this blocks on disk I/O under a shard lock: for start-up and tests; requests use
    /// [`ContainerStore::create_replica_async`].
    pub fn create_replica(
        &self,
        id: i64,
        state: State,
        replica_index: i32,
    ) -> StoreResult<Arc<Container>> {
        let mut shard = write(self.shard(id));
        if shard.contains_key(&id) {
            return Err(already_exists());
        }
        self.shared.reserve_meta(id, bounds::CONTAINER_COST)?;
        let persistence = Container::persistence_for(&self.shared, id, state, replica_index);
        let container = Arc::new(Container::new(
            id,
            state,
            replica_index,
            Arc::clone(&self.shared),
            bounds::CONTAINER_COST,
            persistence,
        ));
        shard.insert(id, Arc::clone(&container));
        Ok(container)
    }

    /// [`ContainerStore::create_replica`] for a request: one creation or removal at a time, the
    /// `dir:` store's disk work on the blocking pool, the shard locked only to insert. Requests
    /// for the container meanwhile find no container, as on a DataNode until its creation ends.
    pub async fn create_replica_async(
        &self,
        id: i64,
        state: State,
        replica_index: i32,
    ) -> StoreResult<Arc<Container>> {
        if !matches!(self.shared.kind, StoreKind::Dir(_)) {
            return self.create_replica(id, state, replica_index);
        }
        let _one_at_a_time = self.lifecycle.lock().await;
        if self.get(id).is_some() {
            return Err(already_exists());
        }
        self.shared.reserve_meta(id, bounds::CONTAINER_COST)?;
        let shared = Arc::clone(&self.shared);
        let created = tokio::task::spawn_blocking(move || {
            Container::try_persistence(&shared, id, state, replica_index)
        })
        .await
        .unwrap_or_else(|e| Err(durable::CreateError::Layout(std::io::Error::other(e))));
        let persistence = match created {
            Ok(p) => p,
            Err(e) => {
                self.shared.release_meta(bounds::CONTAINER_COST);
                return Err(creation_failed(id, &self.shared.container_path(id), e));
            }
        };
        let container = Arc::new(Container::new(
            id,
            state,
            replica_index,
            Arc::clone(&self.shared),
            bounds::CONTAINER_COST,
            persistence,
        ));
        // Nothing else inserts on the request path while the lifecycle lock is held.
        write(self.shard(id)).insert(id, Arc::clone(&container));
        Ok(container)
    }

    /// The container, created OPEN if absent (the auto-create of WriteChunk, PutBlock and
    /// PutSmallFile, and `--containers`).
    pub fn get_or_create(&self, id: i64) -> Arc<Container> {
        self.get_or_create_replica(id, 0)
    }

    /// [`ContainerStore::get_or_create`] with the `replicaIndex` a new container gets (the
    /// auto-create takes it from the request's blockID).
    /// Not charged to the metadata account: the operator's `--containers`, not a request, asks
    /// for these (requests create through [`ContainerStore::try_get_or_create_replica`]).
    pub fn get_or_create_replica(&self, id: i64, replica_index: i32) -> Arc<Container> {
        if let Some(c) = self.get(id) {
            return c;
        }
        let mut shard = write(self.shard(id));
        Arc::clone(shard.entry(id).or_insert_with(|| {
            let persistence =
                Container::persistence_for(&self.shared, id, State::Open, replica_index);
            Arc::new(Container::new(
                id,
                State::Open,
                replica_index,
                Arc::clone(&self.shared),
                0,
                persistence,
            ))
        }))
    }

    /// [`ContainerStore::get_or_create_replica`] for a request (the auto-create of writes): a new
    /// container must fit in the metadata account, else DISK_OUT_OF_SPACE. Created as
    /// [`ContainerStore::create_replica_async`] creates.
    pub async fn try_get_or_create_replica(
        &self,
        id: i64,
        replica_index: i32,
    ) -> StoreResult<Arc<Container>> {
        if let Some(c) = self.get(id) {
            return Ok(c);
        }
        match self
            .create_replica_async(id, State::Open, replica_index)
            .await
        {
            Ok(c) => Ok(c),
            // Created by a concurrent request in between (else: on disk, not in this store).
            Err(e) if e.result == OzoneResult::ContainerAlreadyExists => self.get(id).ok_or(e),
            Err(e) => Err(e),
        }
    }

    /// [`ContainerStore::remove`] for a request: after any creation in progress, the `dir:`
    /// store's directory deleted on the blocking pool.
    pub async fn remove_async(&self, id: i64) -> bool {
        if !matches!(self.shared.kind, StoreKind::Dir(_)) {
            return self.remove(id);
        }
        let _one_at_a_time = self.lifecycle.lock().await;
        let Some(container) = write(self.shard(id)).remove(&id) else {
            return false;
        };
        container.release_all();
        let path = self.shared.container_path(id);
        let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&path)).await;
        match removed {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Ok(Err(e)) => tracing::warn!(container = id, error = %e, "cannot remove container dir"),
            Err(e) => tracing::warn!(container = id, error = %e, "cannot remove container dir"),
        }
        true
    }

    /// DeleteContainer: removes the container and frees what it held (its block files too, with
    /// `dir:`). Returns whether it existed. Requests that still hold the container finish on it.
    pub fn remove(&self, id: i64) -> bool {
        let Some(container) = write(self.shard(id)).remove(&id) else {
            return false;
        };
        container.release_all();
        if let StoreKind::Dir(_) = &self.shared.kind {
            let path = self.shared.container_path(id);
            if let Err(e) = std::fs::remove_dir_all(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove container dir");
            }
        }
        true
    }

    /// Every container, shard by shard (each shard read-locked only while it is copied): what
    /// the DataNode's container reports list. Not for the request path.
    pub fn containers(&self) -> Vec<Arc<Container>> {
        let mut all = Vec::with_capacity(self.len());
        for shard in self.shards.iter() {
            all.extend(read(shard).values().cloned());
        }
        all.sort_unstable_by_key(|c| c.id());
        all
    }

    /// Number of containers.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A poisoned std lock only means another request panicked while holding it; the maps stay
/// consistent (every update is a single insert), so serving goes on.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

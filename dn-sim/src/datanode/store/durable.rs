//! What `--store dir:PATH` keeps beside the block files so that a restarted dn-sim serves every
//! committed block: per container, the DataNode's two metadata files (Ozone 2.2.0's
//! `KeyValueContainerLocationUtil`, `KeyValueContainerUtil`, `BlockManagerImpl.persistPutBlock`):
//!
//! - `PATH/<containerID>/metadata/<containerID>.container`: the container's descriptor in the
//!   DataNode's YAML layout (`ContainerDataYaml`, `KeyValueContainerData`'s fields): state,
//!   replica index, metadata. Rewritten whole (a temporary file renamed over it) on every change,
//!   which is rare: create, close, UNHEALTHY, UpdateContainer.
//! - `PATH/<containerID>/metadata/<containerID>-dn-container.db`: the container DB (the schema-V2
//!   name; the DataNode's is RocksDB, dn-sim's is SQLite, `containerDBType: SQLite`). Tables as
//!   the DataNode's column families: `block_data` (localID → the `BlockData` protobuf of the last
//!   PutBlock), `metadata` (`#BLOCKCOUNT`, `#BYTESUSED`, `#BCSID`), `finalize_blocks`.
//!
//! ## Durability
//! The DB is in WAL mode with an exclusive lock (one dn-sim per directory; no `-shm` file). A
//! PutBlock is one transaction: the block's row, `#BYTESUSED` (the container's `bytesUsed` at
//! that moment, as the DataNode stores it) and `#BLOCKCOUNT`. Its commit is a `write(2)` to the
//! WAL before the PutBlock is answered, so an acknowledged PutBlock survives a crash of the
//! process (SIGKILL) in any mode: the kernel has it. `synchronous=NORMAL` (default) fsyncs only
//! at WAL checkpoints, so a power loss may lose the latest commits; `synchronous=FULL`
//! (`--sync`) fsyncs the WAL before each commit returns. SQLite serializes commits per DB, so
//! PutBlocks of one container commit one at a time (a `Mutex` around its connection, held only
//! on the blocking pool); containers commit in parallel.

use common::proto::BlockData;
use common::proto::container_data_proto::State;
use prost::Message;
use rusqlite::{Connection, params};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// `OzoneConsts.BLOCK_COUNT`, `CONTAINER_BYTES_USED`, `BLOCK_COMMIT_SEQUENCE_ID`.
const BLOCK_COUNT: &str = "#BLOCKCOUNT";
const BYTES_USED: &str = "#BYTESUSED";
const BCS_ID: &str = "#BCSID";

/// `PATH/<id>/metadata`.
pub(super) fn metadata_dir(container_dir: &Path) -> PathBuf {
    container_dir.join("metadata")
}

fn container_file(container_dir: &Path, id: i64) -> PathBuf {
    metadata_dir(container_dir).join(format!("{id}.container"))
}

fn db_file(container_dir: &Path, id: i64) -> PathBuf {
    metadata_dir(container_dir).join(format!("{id}-dn-container.db"))
}

/// fsync of a directory, so that the entries created or renamed in it survive a power loss.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn db_error(e: rusqlite::Error) -> io::Error {
    io::Error::other(e)
}

/// What the `.container` file holds.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Descriptor {
    pub id: i64,
    pub state: State,
    pub replica_index: i32,
    pub metadata: BTreeMap<String, String>,
}

impl Descriptor {
    /// The YAML text: the DataNode's tag and field names, values written as JSON scalars and a
    /// JSON flow mapping (both valid YAML), so that dn-sim reads them back without a YAML
    /// parser. No `checksum` field: the file is replaced by rename, never seen half-written.
    fn to_yaml(&self, container_dir: &Path) -> String {
        let text = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let metadata = serde_json::to_string(&self.metadata).unwrap_or_else(|_| "{}".into());
        let chunks = container_dir.join("chunks");
        let meta = metadata_dir(container_dir);
        [
            "!<KeyValueContainerData>".to_string(),
            format!("chunksPath: {}", text(&chunks.display().to_string())),
            format!("containerDBType: {}", text("SQLite")),
            format!("containerID: {}", self.id),
            format!("containerType: {}", text("KeyValueContainer")),
            "layOutVersion: 2".to_string(),
            format!("maxSize: {}", super::MAX_CONTAINER_SIZE),
            format!("metadata: {metadata}"),
            format!("metadataPath: {}", text(&meta.display().to_string())),
            format!("replicaIndex: {}", self.replica_index),
            format!("schemaVersion: {}", text("2")),
            format!("state: {}", text(self.state.as_str_name())),
            String::new(),
        ]
        .join("\n")
    }

    fn from_yaml(text: &str, path: &Path) -> io::Result<Self> {
        let bad = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {what}", path.display()),
            )
        };
        let mut fields = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("!<"))
        {
            let (key, value) = line
                .split_once(": ")
                .ok_or_else(|| bad(format!("'{line}' is not 'key: value'")))?;
            let value: serde_json::Value =
                serde_json::from_str(value).map_err(|e| bad(format!("{key}: {e}")))?;
            fields.insert(key, value);
        }
        let id = fields
            .get("containerID")
            .and_then(serde_json::Value::as_i64)
            .ok_or_else(|| bad("no containerID".into()))?;
        let state = fields
            .get("state")
            .and_then(serde_json::Value::as_str)
            .and_then(State::from_str_name)
            .ok_or_else(|| bad("no valid state".into()))?;
        let replica_index = fields
            .get("replicaIndex")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0) as i32;
        let metadata = match fields.get("metadata") {
            Some(m) => {
                serde_json::from_value(m.clone()).map_err(|e| bad(format!("metadata: {e}")))?
            }
            None => BTreeMap::new(),
        };
        Ok(Self {
            id,
            state,
            replica_index,
            metadata,
        })
    }
}

/// One committed block as read back from the container DB.
pub(super) struct StoredBlock {
    pub data: BlockData,
    pub finalized: bool,
}

/// A container as found on disk at start-up.
pub(super) struct Restored {
    pub descriptor: Descriptor,
    pub db: ContainerDb,
    pub bytes_used: u64,
    pub block_count: u64,
    pub bcs_id: u64,
    /// Committed blocks by localID.
    pub blocks: BTreeMap<i64, StoredBlock>,
}

struct Inner {
    conn: Connection,
    /// `#BLOCKCOUNT` as last committed: counted here, under the connection's lock, so that
    /// concurrent first PutBlocks of different blocks never store the same count.
    block_count: u64,
    /// `#BYTESUSED` as last committed.
    bytes_used: u64,
}

/// The container DB and `.container` file of one container.
pub(super) struct ContainerDb {
    dir: PathBuf,
    id: i64,
    sync: bool,
    inner: Mutex<Inner>,
    /// Serializes rewrites of the `.container` file (one temporary name per container).
    descriptor_lock: Mutex<()>,
}

impl std::fmt::Debug for ContainerDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerDb")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn open_db(path: &Path, sync: bool) -> io::Result<Connection> {
    let conn = Connection::open(path).map_err(db_error)?;
    conn.execute_batch(&format!(
        "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous={};
         CREATE TABLE IF NOT EXISTS block_data (local_id INTEGER PRIMARY KEY, data BLOB NOT NULL);
         CREATE TABLE IF NOT EXISTS metadata (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS finalize_blocks (local_id INTEGER PRIMARY KEY);",
        if sync { "FULL" } else { "NORMAL" }
    ))
    .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(db_error)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(io::Error::other(format!(
            "{}: journal_mode is {mode}, not WAL",
            path.display()
        )));
    }
    Ok(conn)
}

/// Why a container could not be created, in the terms of Ozone's `KeyValueContainer.create`: its
/// `.container` file could not be written (CONTAINER_FILES_CREATE_ERROR), or something before it
/// failed (the catch-all: CONTAINER_INTERNAL_ERROR once no volume is left to try).
#[derive(Debug)]
pub enum CreateError {
    /// The container's `metadata` directory is already there (`ContainerUtils.verifyIsNewContainer`:
    /// CONTAINER_ALREADY_EXISTS); nothing was touched.
    Exists,
    Descriptor(io::Error),
    Layout(io::Error),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::Exists => write!(f, "its metadata directory already exists"),
            CreateError::Descriptor(e) => write!(f, "cannot write its .container file: {e}"),
            CreateError::Layout(e) => write!(f, "{e}"),
        }
    }
}

impl ContainerDb {
    /// Creates a container's directories, DB and `.container` file. The `.container` file comes
    /// last: a container whose creation was cut short has none, and start-up skips it. A failure
    /// deletes what was made of the container's directory, as `KeyValueContainer.create` does; a
    /// `metadata` directory already there is `Exists`, and nothing is touched.
    pub fn create(
        container_dir: &Path,
        descriptor: &Descriptor,
        sync: bool,
    ) -> Result<Self, CreateError> {
        if metadata_dir(container_dir).exists() {
            return Err(CreateError::Exists);
        }
        Self::make(container_dir, descriptor, sync).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(container_dir);
        })
    }

    fn make(
        container_dir: &Path,
        descriptor: &Descriptor,
        sync: bool,
    ) -> Result<Self, CreateError> {
        let layout = |e| CreateError::Layout(e);
        std::fs::create_dir_all(metadata_dir(container_dir)).map_err(layout)?;
        std::fs::create_dir_all(container_dir.join("chunks")).map_err(layout)?;
        let conn = open_db(&db_file(container_dir, descriptor.id), sync).map_err(layout)?;
        let db = Self {
            dir: container_dir.to_path_buf(),
            id: descriptor.id,
            sync,
            inner: Mutex::new(Inner {
                conn,
                block_count: 0,
                bytes_used: 0,
            }),
            descriptor_lock: Mutex::new(()),
        };
        db.write_descriptor(descriptor)
            .map_err(CreateError::Descriptor)?;
        if sync {
            sync_dir(container_dir).map_err(layout)?;
            if let Some(root) = container_dir.parent() {
                sync_dir(root).map_err(layout)?;
            }
        }
        Ok(db)
    }

    /// Whether `container_dir` holds a container (its `.container` file exists).
    pub fn exists(container_dir: &Path, id: i64) -> bool {
        container_file(container_dir, id).is_file()
    }

    /// Reads a container back: its `.container` file and everything its DB committed. A missing
    /// DB is `NotFound`.
    pub fn open(container_dir: &Path, id: i64, sync: bool) -> io::Result<Restored> {
        let path = container_file(container_dir, id);
        let descriptor = Descriptor::from_yaml(&std::fs::read_to_string(&path)?, &path)?;
        if descriptor.id != id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: containerID {} in directory {id}",
                    path.display(),
                    descriptor.id
                ),
            ));
        }
        let db_path = db_file(container_dir, id);
        // Opening would create an empty DB: a missing one is the DataNode's "Container DB file
        // is missing", and the caller skips the container as `ContainerReader` does.
        if !db_path.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("Container DB file is missing at {}", db_path.display()),
            ));
        }
        let conn = open_db(&db_path, sync)?;
        let get = |key: &str| -> io::Result<u64> {
            let value: Option<i64> = conn
                .query_row("SELECT value FROM metadata WHERE key = ?1", [key], |r| {
                    r.get(0)
                })
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
                .map_err(db_error)?;
            Ok(value.unwrap_or(0).max(0) as u64)
        };
        let (bytes_used, block_count, bcs_id) = (get(BYTES_USED)?, get(BLOCK_COUNT)?, get(BCS_ID)?);
        let mut blocks = BTreeMap::new();
        {
            let mut finalized = std::collections::HashSet::new();
            let mut stmt = conn
                .prepare("SELECT local_id FROM finalize_blocks")
                .map_err(db_error)?;
            let rows = stmt
                .query_map([], |r| r.get::<_, i64>(0))
                .map_err(db_error)?;
            for row in rows {
                finalized.insert(row.map_err(db_error)?);
            }
            let mut stmt = conn
                .prepare("SELECT local_id, data FROM block_data")
                .map_err(db_error)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
                .map_err(db_error)?;
            for row in rows {
                let (local_id, bytes) = row.map_err(db_error)?;
                let data = BlockData::decode(bytes.as_slice()).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: block {local_id}: {e}", db_path.display()),
                    )
                })?;
                let finalized = finalized.contains(&local_id);
                blocks.insert(local_id, StoredBlock { data, finalized });
            }
        }
        Ok(Restored {
            descriptor,
            db: Self {
                dir: container_dir.to_path_buf(),
                id,
                sync,
                inner: Mutex::new(Inner {
                    conn,
                    block_count,
                    bytes_used,
                }),
                descriptor_lock: Mutex::new(()),
            },
            bytes_used,
            block_count,
            bcs_id,
            blocks,
        })
    }

    /// The `.container` file's absolute path.
    pub fn descriptor_path(&self) -> PathBuf {
        let path = container_file(&self.dir, self.id);
        std::path::absolute(&path).unwrap_or(path)
    }

    /// Replaces the `.container` file with `descriptor` (temporary file, rename; with `--sync`
    /// the file and the directory entry are fsynced). A failure leaves the old file and no
    /// temporary one (as `KeyValueContainer.writeToContainerFile` deletes its temporary file).
    pub fn write_descriptor(&self, descriptor: &Descriptor) -> io::Result<()> {
        let _one_writer = self
            .descriptor_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let path = container_file(&self.dir, self.id);
        let tmp = path.with_extension("container.tmp");
        let written = (|| {
            use std::io::Write;
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(descriptor.to_yaml(&self.dir).as_bytes())?;
            if self.sync {
                file.sync_all()?;
            }
            drop(file);
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        if self.sync {
            sync_dir(&metadata_dir(&self.dir))?;
        }
        Ok(())
    }

    /// PutBlock's transaction (`BlockManagerImpl.persistPutBlock`): the block's `BlockData`
    /// (`encoded`), `#BYTESUSED` and, when `first`, `#BLOCKCOUNT` + 1. `bytes_used` is the
    /// container's `bytesUsed` when the PutBlock came; the largest seen is stored, since
    /// `bytesUsed` only grows and concurrent PutBlocks may reach the lock out of order. Blocking:
    /// call it on the blocking pool. Nothing is changed when it fails.
    pub fn put_block(
        &self,
        local_id: i64,
        encoded: &[u8],
        first: bool,
        bytes_used: u64,
        bcs_id: u64,
    ) -> io::Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let count = inner.block_count + u64::from(first);
        let bytes_used = bytes_used.max(inner.bytes_used);
        let tx = inner.conn.transaction().map_err(db_error)?;
        {
            let mut put = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO block_data (local_id, data) VALUES (?1, ?2)",
                )
                .map_err(db_error)?;
            put.execute(params![local_id, encoded]).map_err(db_error)?;
            let mut meta = tx
                .prepare_cached("INSERT OR REPLACE INTO metadata (key, value) VALUES (?1, ?2)")
                .map_err(db_error)?;
            meta.execute(params![BYTES_USED, bytes_used as i64])
                .map_err(db_error)?;
            if first {
                meta.execute(params![BLOCK_COUNT, count as i64])
                    .map_err(db_error)?;
            }
            // As the DataNode: the gRPC path's bcsId is 0, which is never stored.
            if bcs_id != 0 {
                meta.execute(params![BCS_ID, bcs_id as i64])
                    .map_err(db_error)?;
            }
        }
        tx.commit().map_err(db_error)?;
        inner.block_count = count;
        inner.bytes_used = bytes_used;
        Ok(())
    }

    /// FinalizeBlock (`finalizeBlocks` table). Blocking.
    pub fn finalize_block(&self, local_id: i64) -> io::Result<()> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .conn
            .prepare_cached("INSERT OR REPLACE INTO finalize_blocks (local_id) VALUES (?1)")
            .and_then(|mut s| s.execute([local_id]))
            .map_err(db_error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OPEN container's descriptor, no metadata.
    fn open_container(id: i64) -> Descriptor {
        Descriptor {
            id,
            state: State::Open,
            replica_index: 0,
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn the_container_file_round_trips() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("7");
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "owner".to_string(),
            "a \"quoted\": value\nwith a newline".to_string(),
        );
        let d = Descriptor {
            id: 7,
            state: State::QuasiClosed,
            replica_index: 3,
            metadata,
        };
        let db = ContainerDb::create(&dir, &d, false).unwrap();
        drop(db);
        let text = std::fs::read_to_string(container_file(&dir, 7)).unwrap();
        assert!(text.starts_with("!<KeyValueContainerData>\n"), "{text}");
        assert!(text.contains("\nstate: \"QUASI_CLOSED\"\n"), "{text}");
        let back = ContainerDb::open(&dir, 7, false).unwrap();
        assert_eq!(back.descriptor, d);
        assert_eq!((back.bytes_used, back.block_count, back.bcs_id), (0, 0, 0));
        assert!(back.blocks.is_empty());
    }

    #[test]
    fn a_put_block_is_in_the_db_when_it_returns() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("1");
        let d = open_container(1);
        let db = ContainerDb::create(&dir, &d, true).unwrap();
        let mut block = BlockData::default();
        block.block_id.container_id = 1;
        block.block_id.local_id = 42;
        block.size = Some(10);
        db.put_block(42, &block.encode_to_vec(), true, 10, 0)
            .unwrap();
        block.size = Some(20);
        db.put_block(42, &block.encode_to_vec(), false, 25, 0)
            .unwrap();
        // A PutBlock that read `bytesUsed` before the last one reached the lock.
        db.put_block(42, &block.encode_to_vec(), false, 12, 0)
            .unwrap();
        db.finalize_block(42).unwrap();
        // The exclusive lock is held until the connection closes. (What a SIGKILL leaves, an
        // unclosed WAL, is the crash tests' part: loadgen/tests/crash.rs.)
        drop(db);
        let back = ContainerDb::open(&dir, 1, false).unwrap();
        assert_eq!((back.bytes_used, back.block_count), (25, 1));
        let stored = &back.blocks[&42];
        assert_eq!(stored.data, block);
        assert!(stored.finalized);
    }

    #[test]
    fn a_second_opener_of_a_container_db_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("1");
        let d = open_container(1);
        let db = ContainerDb::create(&dir, &d, false).unwrap();
        db.put_block(1, &[], true, 0, 0).unwrap();
        assert!(ContainerDb::open(&dir, 1, false).is_err());
    }
}

//! Directory backend (`--store dir:PATH`): one real file per block in the DataNode's
//! FILE_PER_BLOCK layout, `PATH/<containerID>/chunks/<localID>.block`, written with `pwrite` and
//! read with `pread` (`FileExt::write_all_at` / `read_exact_at`) on tokio's blocking pool, so the
//! runtime's workers never wait for the disk.
//!
//! Block metadata (PutBlock `BlockData`, the container's counters and state) is kept beside the
//! block files, in each container's `metadata/` directory (`durable.rs`), so that a dn-sim
//! restarted on the same PATH serves every committed block. A block's length after a restart is
//! its file's length.
//!
//! Durability of the data (`hdds.container.chunk.write.sync`, `--sync`): without it a WriteChunk
//! is answered once `pwrite` returned, so its bytes are in the kernel's page cache: they survive
//! a crash of the process (SIGKILL), not a power loss. With it the file is `fdatasync`ed before
//! the answer, and a new block file's directory entry is fsynced too (as the DataNode's
//! `FileChannel.force` of `ChunkUtils.writeData`, plus the entry the JVM never syncs).
use bytes::Bytes;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A block file. It is opened for each read or write rather than kept open, so that a
/// container with many blocks never runs out of file descriptors (the DataNode keeps a cache of
/// open files with a 10-minute expiry instead); the open costs microseconds next to a request.
#[derive(Debug)]
pub(super) struct BlockFile {
    path: PathBuf,
}

/// `root/<containerID>/chunks/<localID>.block`.
pub(super) fn block_path(root: &Path, container: i64, local_id: i64) -> PathBuf {
    root.join(container.to_string())
        .join("chunks")
        .join(format!("{local_id}.block"))
}

pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}

impl BlockFile {
    /// Creates (or truncates) the block file, and its container's `chunks` directory if needed.
    /// `sync`: the directory entry is fsynced as well.
    pub async fn create(path: PathBuf, sync: bool) -> io::Result<Self> {
        blocking(move || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            if sync && let Some(dir) = path.parent() {
                super::durable::sync_dir(dir)?;
            }
            Ok(Self { path })
        })
        .await
    }

    /// A block file found on disk at start-up.
    pub fn existing(path: PathBuf) -> Self {
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `pwrite` of all of `data` at `offset`; `sync`: then `fdatasync`.
    pub async fn write(&self, offset: u64, data: Bytes, sync: bool) -> io::Result<()> {
        let path = self.path.clone();
        blocking(move || {
            // Re-created if it vanished (as the DataNode's RandomAccessFile "rw" would), never
            // truncated: an overwrite keeps the rest of the block.
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            file.write_all_at(&data, offset)?;
            if sync {
                file.sync_data()?;
            }
            Ok(())
        })
        .await
    }

    /// `pread` of exactly `len` bytes at `offset` into one buffer; the caller slices it into
    /// pieces without further copies. A missing file is `NotFound`, a short one `UnexpectedEof`.
    pub async fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let path = self.path.clone();
        blocking(move || {
            let file = File::open(&path)?;
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, offset)?;
            Ok(Bytes::from(buf))
        })
        .await
    }
}

/// The block files of a container's `chunks` directory and their lengths, by localID. Files
/// whose names are not `<localID>.block` are not dn-sim's and are left alone.
pub(super) fn block_files(container_dir: &Path) -> io::Result<Vec<(i64, u64)>> {
    let chunks = container_dir.join("chunks");
    let entries = match std::fs::read_dir(&chunks) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(local_id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".block"))
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        let meta = entry.metadata()?;
        if meta.is_file() {
            files.push((local_id, meta.len()));
        }
    }
    Ok(files)
}

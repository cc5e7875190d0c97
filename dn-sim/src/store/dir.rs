//! Directory backend (`--store dir:PATH`): one real file per block in the DataNode's
//! FILE_PER_BLOCK layout, `PATH/<containerID>/chunks/<localID>.block`, written with `pwrite` and
//! read with `pread` (`FileExt::write_all_at` / `read_exact_at`) on tokio's blocking pool, so the
//! runtime's workers never wait for the disk.
//!
//! Block metadata (lengths, PutBlock `BlockData`) stays in memory, like the other backends: the
//! DataNode's RocksDB is not simulated, and a restarted dn-sim starts empty. A block file left by
//! an earlier run is truncated when the same block is first written again.

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

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}

impl BlockFile {
    /// Creates (or truncates) the block file, and its container's `chunks` directory if needed.
    pub async fn create(path: PathBuf) -> io::Result<Self> {
        blocking(move || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            Ok(Self { path })
        })
        .await
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `pwrite` of all of `data` at `offset`.
    pub async fn write(&self, offset: u64, data: Bytes) -> io::Result<()> {
        let path = self.path.clone();
        blocking(move || {
            // Re-created if it vanished (as the DataNode's RandomAccessFile "rw" would), never
            // truncated: an overwrite keeps the rest of the block.
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            file.write_all_at(&data, offset)
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

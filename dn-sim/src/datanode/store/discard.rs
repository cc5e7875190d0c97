//! Discard backend (`--store discard`): a block keeps its length, its PutBlock `BlockData` (with
//! the chunks' checksums) and everything else the DataNode answers from metadata, but not its
//! bytes. Hour-long write benchmarks therefore hold no data in memory and never run out of
//! `--capacity`; only metadata grows (a `ChunkInfo` per chunk named in a PutBlock).
//!
//! Every rule that does not need the bytes still applies: offsets, lengths, CHUNK_FILE_INCONSISTENCY,
//! reads past the end, checksum verification on write. Reading data back answers
//! `UNABLE_TO_FIND_CHUNK`, the DataNode's answer when a block's data is not on its disk, with a
//! message that says why.

use super::StoreError;
use common::proto::Result as OzoneResult;

/// The answer to a read of `len` bytes at `offset` of a block whose bytes were discarded.
pub(super) fn read_error(container: i64, local_id: i64, offset: u64, len: u64) -> StoreError {
    StoreError::new(
        OzoneResult::UnableToFindChunk,
        format!(
            "Data of block {container}/{local_id} (offset {offset}, length {len}) was discarded \
             by `--store discard`: dn-sim keeps only lengths and metadata; use --store memory \
             or --store dir:PATH to read data back"
        ),
    )
}

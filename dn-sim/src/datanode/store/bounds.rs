//! What a request may make the store hold or build, whatever sizes and counts it claims.
//!
//! - Answers: the data of one answer (ReadChunk, GetSmallFile, ReadBlock) is at most the message
//!   limit, checked before anything is read; it is cut into at most [`MAX_ANSWER_PIECES`]
//!   buffers (a V1 read with a tiny `bytesPerChecksum`, a block of many empty chunks); a listing
//!   (ListBlock, GetContainerChecksumInfo) stops being built once it passes the message limit.
//!   Beyond them the store answers UNSUPPORTED_REQUEST "Oversize read", the code of the
//!   DataNode's own read limit (`ChunkUtils.limitReadSize`, 2.0.0–2.2.0).
//! - Metadata: every container, block entry, committed `BlockData` and container metadata entry
//!   is charged to the store's metadata account, which `--metadata-capacity` (by default
//!   `--capacity`, at least [`MIN_METADATA_CAPACITY`]) bounds for every `--store` (metadata lives
//!   in memory for all of them); beyond it writes answer DISK_OUT_OF_SPACE. One
//!   container keeps at most [`MAX_CONTAINER_METADATA`] of metadata entries (DISK_OUT_OF_SPACE).
//!   Committed checksums are copied out of the request's receive buffer, so a stored BlockData
//!   never pins a message larger than itself.

use super::{StoreError, StoreResult};
use bytes::{Bytes, BytesMut};
use common::proto::{BlockData, KeyValue, Result as OzoneResult};
use std::cmp::Ordering;

/// The most buffers one answer is cut into. An Ozone client's smallest `bytesPerChecksum` is
/// 8 KiB (`ozone.client.bytes.per.checksum` minimum, 2.0.0–2.2.0): a 32 MiB read has at most 4,096
/// pieces, well under this.
pub const MAX_ANSWER_PIECES: u64 = 1 << 16;

/// The largest answer the store builds (the message limit).
pub const MAX_ANSWER_BYTES: u64 = common::MAX_MESSAGE_SIZE as u64;

/// The smallest default metadata bound, so that a small `--capacity` for data (tests use a few
/// bytes) still leaves room for containers and blocks.
pub const MIN_METADATA_CAPACITY: u64 = 64 << 20;

/// The most metadata one container keeps (CreateContainer, UpdateContainer): half the message
/// limit, so that ReadContainer's answer always fits in one message.
pub const MAX_CONTAINER_METADATA: u64 = MAX_ANSWER_BYTES / 2;

/// What a container costs the metadata account besides its metadata entries: the struct, its map
/// entry and its locks.
pub const CONTAINER_COST: u64 = 512;

/// What a block entry costs before its `BlockData`: the map entry, the `Arc`, the lock, its state.
pub const BLOCK_COST: u64 = 256;

/// The answer to a request whose answer would pass a bound: `actual` of `max` (bytes or pieces).
pub fn oversize(what: &str, max: u64, actual: u64) -> StoreError {
    StoreError::new(
        OzoneResult::UnsupportedRequest,
        format!("Oversize read. max: {max}, actual: {actual} ({what}; dn-sim's answer bound)"),
    )
}

/// Fails when `len` bytes cut into `piece`-byte buffers would pass [`MAX_ANSWER_PIECES`].
pub fn check_pieces(len: u64, piece: u64) -> StoreResult<()> {
    let pieces = len.div_ceil(piece.max(1)).max(1);
    if pieces > MAX_ANSWER_PIECES {
        return Err(oversize("buffers", MAX_ANSWER_PIECES, pieces));
    }
    Ok(())
}

/// The memory a stored `BlockData` takes, roughly: the structs, strings and checksum bytes.
pub fn block_data_cost(block: &BlockData) -> u64 {
    let chunks: usize = block
        .chunks
        .iter()
        .map(|c| {
            size_of_val(c)
                + c.chunk_name.len()
                + c.metadata.iter().map(key_value_cost).sum::<usize>()
                + c.checksum_data
                    .checksums
                    .iter()
                    .map(|s| size_of::<Bytes>() + s.len())
                    .sum::<usize>()
        })
        .sum();
    let metadata: usize = block.metadata.iter().map(key_value_cost).sum();
    (size_of::<BlockData>() + chunks + metadata) as u64
}

/// A metadata entry's memory, roughly (the key, the value, their headers).
pub fn key_value_cost(kv: &KeyValue) -> usize {
    size_of::<KeyValue>() + kv.key.len() + kv.value.as_ref().map_or(0, String::len)
}

/// Copies every checksum of `block` into one buffer of their own: decoded without copying, they
/// would be slices of the request's receive buffer and keep all of it alive.
pub fn own_checksums(block: &mut BlockData) {
    let total: usize = block
        .chunks
        .iter()
        .flat_map(|c| c.checksum_data.checksums.iter())
        .map(Bytes::len)
        .sum();
    let mut buf = BytesMut::with_capacity(total);
    for c in &block.chunks {
        for s in &c.checksum_data.checksums {
            buf.extend_from_slice(s);
        }
    }
    let mut all = buf.freeze();
    for c in &mut block.chunks {
        for s in &mut c.checksum_data.checksums {
            *s = all.split_to(s.len());
        }
    }
}

/// A localID ordered as its decimal text, as a DataNode's RocksDB keys order blocks
/// (1, 10, 100, 2, …; negative IDs first, '-' sorting before digits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecimalKey(pub i64);

impl DecimalKey {
    /// The decimal text of the ID, written into `buf` (an i64 takes at most 20 characters).
    fn text(self, buf: &mut [u8; 20]) -> &[u8] {
        let mut n = self.0.unsigned_abs();
        let mut at = buf.len();
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if self.0 < 0 {
            at -= 1;
            buf[at] = b'-';
        }
        &buf[at..]
    }
}

impl Ord for DecimalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        self.text(&mut a).cmp(other.text(&mut b))
    }
}

impl PartialOrd for DecimalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::proto::{ChecksumData, ChunkInfo};

    #[tokio::test]
    async fn metadata_is_charged_bounded_and_released() {
        use super::super::{ContainerStore, StoreKind};
        let s = ContainerStore::new(StoreKind::Discard, 1 << 30, None).unwrap();
        assert_eq!(s.metadata_capacity(), 1 << 30);
        s.set_metadata_capacity(8 * CONTAINER_COST);
        // The operator's containers are free; a request's cost CONTAINER_COST each.
        s.precreate(&"1-100".parse().unwrap());
        assert_eq!(s.metadata_used(), 0);
        let mut made = 0;
        let e = loop {
            match s.try_get_or_create_replica(1000 + made, 0).await {
                Ok(_) => made += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(made, 8);
        assert_eq!(e.result, OzoneResult::DiskOutOfSpace);
        assert_eq!(s.metadata_used(), 8 * CONTAINER_COST);
        // A block entry and a BlockData do not fit either, in an operator's container.
        let c = s.lookup(1).unwrap();
        let put = super::super::PutBlock::new(BlockData::default(), false).unwrap();
        assert_eq!(
            c.put_block(put).await.unwrap_err().result,
            OzoneResult::DiskOutOfSpace
        );
        assert!(s.remove(1000));
        assert!(s.remove(1));
        assert_eq!(s.metadata_used(), 7 * CONTAINER_COST);
        assert!(s.try_get_or_create_replica(2000, 0).await.is_ok());
    }

    #[test]
    fn decimal_keys_sort_as_their_text() {
        let ids = [
            0,
            1,
            2,
            9,
            10,
            11,
            100,
            19,
            -1,
            -20,
            i64::MAX,
            i64::MIN,
            1234,
        ];
        let mut by_key = ids.to_vec();
        by_key.sort_by_key(|&id| DecimalKey(id));
        let mut by_text = ids.to_vec();
        by_text.sort_by_key(|id| id.to_string());
        assert_eq!(by_key, by_text);
    }

    #[test]
    fn pieces_are_bounded() {
        assert!(check_pieces(32 << 20, 8 << 10).is_ok());
        assert!(check_pieces(0, 0).is_ok());
        let e = check_pieces(1 << 20, 1).unwrap_err();
        assert_eq!(e.result, OzoneResult::UnsupportedRequest);
        assert!(
            e.message
                .starts_with("Oversize read. max: 65536, actual: 1048576")
        );
    }

    #[test]
    fn checksums_are_copied_out_of_the_request() {
        let received = Bytes::from(vec![7u8; 1 << 20]);
        let chunk = |i: usize| ChunkInfo {
            checksum_data: ChecksumData {
                checksums: vec![received.slice(i * 4..i * 4 + 4), received.slice(100..104)],
                ..Default::default()
            },
            ..Default::default()
        };
        let mut block = BlockData {
            chunks: vec![chunk(0), chunk(1)],
            ..Default::default()
        };
        let before = block.clone();
        own_checksums(&mut block);
        assert_eq!(block, before);
        let range = received.as_ptr_range();
        for c in &block.chunks {
            for s in &c.checksum_data.checksums {
                assert!(!range.contains(&s.as_ptr()));
            }
        }
        assert!(block_data_cost(&block) > 4 * 4);
    }
}

//! The store API against the DataNode's rules, and a property test against a simple model
//! (a `Vec<u8>` per block).

use super::*;
use bytes::Bytes;
use common::proto::{BlockData, ChecksumData, ChecksumType, ChunkInfo, DatanodeBlockId};
use proptest::prelude::*;

const C: i64 = 7;

fn store(kind: StoreKind, capacity: u64) -> ContainerStore {
    let store = ContainerStore::new(kind, capacity, None).unwrap();
    store.precreate(&C.to_string().parse().unwrap());
    store
}

fn bid(local_id: i64) -> DatanodeBlockId {
    DatanodeBlockId {
        container_id: C,
        local_id,
        ..Default::default()
    }
}

fn chunk(offset: u64, len: u64) -> ChunkInfo {
    ChunkInfo {
        chunk_name: format!("chunk_{offset}"),
        offset,
        len,
        checksum_data: ChecksumData {
            r#type: ChecksumType::None as i32,
            bytes_per_checksum: 16 << 10,
            checksums: Vec::new(),
        },
        ..Default::default()
    }
}

fn data(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

fn block_data(local_id: i64, chunks: Vec<ChunkInfo>, size: Option<i64>) -> BlockData {
    BlockData {
        block_id: bid(local_id),
        chunks,
        size,
        ..Default::default()
    }
}

async fn write(c: &Container, local_id: i64, offset: u64, d: Bytes) -> StoreResult<()> {
    c.write_chunk(&bid(local_id), &chunk(offset, d.len() as u64), d)
        .await
}

async fn read_all(c: &Container, local_id: i64, offset: u64, len: u64) -> StoreResult<Vec<u8>> {
    Ok(c.read_chunk(&bid(local_id), offset, len, len)
        .await?
        .concat())
}

fn code<T: std::fmt::Debug>(r: StoreResult<T>) -> OzoneResult {
    r.expect_err("an error").result
}

#[test]
fn store_kinds_parse_and_print() {
    assert_eq!("memory".parse(), Ok(StoreKind::Memory));
    assert_eq!("discard".parse(), Ok(StoreKind::Discard));
    assert_eq!(
        "dir:/tmp/x".parse(),
        Ok(StoreKind::Dir(PathBuf::from("/tmp/x")))
    );
    for bad in ["", "dir:", "disk", "Memory"] {
        assert!(bad.parse::<StoreKind>().is_err(), "{bad}");
    }
    assert_eq!(StoreKind::Dir("/a".into()).to_string(), "dir:/a");
}

#[test]
fn containers_are_created_found_and_refused_twice() {
    let s = store(StoreKind::Memory, 100);
    assert_eq!(s.len(), 1);
    assert_eq!(s.lookup(C).unwrap().state(), State::Open);
    let e = s.lookup(8).unwrap_err();
    assert_eq!(e.result, OzoneResult::ContainerNotFound);
    assert_eq!(e.message, "ContainerID 8 does not exist");
    assert_eq!(
        s.create(C, State::Open).unwrap_err().result,
        OzoneResult::ContainerAlreadyExists
    );
    assert_eq!(s.create(9, State::Closed).unwrap().state(), State::Closed);
    assert_eq!(s.get_or_create(10).state(), State::Open);
    assert_eq!(s.len(), 3);
}

#[test]
fn container_states_follow_the_datanode() {
    let s = store(StoreKind::Memory, 100);
    let c = s.lookup(C).unwrap();
    assert_eq!(c.check_open(), Ok(()));
    c.close("dn").unwrap();
    assert_eq!(c.state(), State::Closed);
    c.close("dn").unwrap(); // idempotent
    let e = c.check_open().unwrap_err();
    assert_eq!(e.result, OzoneResult::ClosedContainerIo);
    assert!(e.message.ends_with("ContainerState is CLOSED"), "{e}");
    assert!(!c.mark_unhealthy(), "a CLOSED container stays CLOSED");

    let u = s.get_or_create(11);
    assert!(u.mark_unhealthy());
    assert!(!u.mark_unhealthy());
    assert_eq!(code(u.check_open()), OzoneResult::ContainerUnhealthy);
    assert_eq!(code(u.close("dn")), OzoneResult::ContainerUnhealthy);
    let q = s.create(12, State::QuasiClosed).unwrap();
    assert_eq!(code(q.check_open()), OzoneResult::ClosedContainerIo);
    q.close("dn").unwrap();
    let i = s.create(13, State::Invalid).unwrap();
    assert_eq!(code(i.check_open()), OzoneResult::InvalidContainerState);
    assert_eq!(code(i.close("dn")), OzoneResult::InvalidContainerState);
}

#[tokio::test]
async fn file_per_block_write_rules() {
    let s = store(StoreKind::Memory, 1 << 20);
    let c = s.lookup(C).unwrap();
    write(&c, 1, 0, data(100, 1)).await.unwrap();
    write(&c, 1, 100, data(50, 2)).await.unwrap(); // append
    write(&c, 1, 10, data(20, 3)).await.unwrap(); // overwrite below the length
    write(&c, 1, 140, data(30, 4)).await.unwrap(); // overwrite that extends
    let mut model = [data(100, 1).to_vec(), data(50, 2).to_vec()].concat();
    model[10..30].copy_from_slice(&data(20, 3));
    model.truncate(140);
    model.extend_from_slice(&data(30, 4));
    assert_eq!(read_all(&c, 1, 0, 170).await.unwrap(), model);
    assert_eq!(c.bytes_used(), 170);
    assert_eq!(s.used(), 170);

    // A gap above the length.
    let e = write(&c, 1, 171, data(5, 5)).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::ChunkFileInconsistency);
    assert_eq!(
        e.message,
        "Chunk offset 171 does not match length 170 of blockFile 1.block"
    );
    // Data shorter or longer than `len`.
    for actual in [9usize, 11] {
        let e = c
            .write_chunk(&bid(1), &chunk(170, 10), data(actual, 6))
            .await
            .unwrap_err();
        assert_eq!(e.result, OzoneResult::InvalidWriteSize);
        assert_eq!(
            e.message,
            format!("Unexpected buffer size. expected: 10, actual: {actual}")
        );
    }
    // `len` 0 is a no-op, whatever the offset and data.
    c.write_chunk(&bid(1), &chunk(9999, 0), data(3, 7))
        .await
        .unwrap();
    c.write_chunk(&bid(2), &chunk(0, 0), Bytes::new())
        .await
        .unwrap();
    assert_eq!(
        code(read_all(&c, 2, 0, 1).await),
        OzoneResult::UnableToFindChunk
    );
    // Nothing of the failed writes was kept.
    assert_eq!(read_all(&c, 1, 0, 170).await.unwrap(), model);
    assert_eq!(c.bytes_used(), 170);
}

#[tokio::test]
async fn read_rules() {
    let s = store(StoreKind::Memory, 1 << 20);
    let c = s.lookup(C).unwrap();
    write(&c, 1, 0, data(100, 1)).await.unwrap();
    let e = read_all(&c, 1, 90, 20).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::ContainerInternalError);
    assert_eq!(e.message, "Unexpected read size. expected: 20, actual: 10");
    let e = read_all(&c, 1, 100, 1).await.unwrap_err();
    assert_eq!(e.message, "Unexpected read size. expected: 1, actual: -1");
    assert_eq!(
        code(read_all(&c, 1, u64::MAX, 2).await),
        OzoneResult::ContainerInternalError
    );
    let e = read_all(&c, 1, 0, (32 << 20) + 1).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::UnsupportedRequest);
    assert_eq!(e.message, "Oversize read. max: 33554432, actual: 33554433");
    let e = read_all(&c, 3, 0, 1).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::UnableToFindChunk);
    let abs = s.root().join("7/chunks/3.block");
    assert!(abs.is_absolute());
    assert_eq!(
        e.message,
        format!("java.nio.file.NoSuchFileException: {}", abs.display())
    );
    // A zero-length read succeeds even for a missing block.
    assert_eq!(read_all(&c, 3, 5, 0).await.unwrap(), Vec::<u8>::new());
    // bcsId above the container's (always 0 here).
    let mut id = bid(1);
    id.block_commit_sequence_id = Some(1);
    assert_eq!(
        code(c.read_chunk(&id, 0, 1, 1).await),
        OzoneResult::UnknownBcsid
    );
}

#[test]
fn read_piece_sizes_follow_the_checksum() {
    let crc = |bpc| ChecksumData {
        r#type: ChecksumType::Crc32 as i32,
        bytes_per_checksum: bpc,
        checksums: Vec::new(),
    };
    let none = ChecksumData {
        r#type: ChecksumType::None as i32,
        ..crc(512)
    };
    assert_eq!(read_piece_size(&crc(512), 4096, false), 4096);
    assert_eq!(read_piece_size(&crc(512), 4096, true), 512);
    assert_eq!(read_piece_size(&crc(512), 100, true), 100);
    assert_eq!(read_piece_size(&crc(0), 4096, true), 4096);
    assert_eq!(read_piece_size(&none, 3 << 20, true), 1 << 20);
}

#[tokio::test]
async fn put_get_and_list_blocks() {
    let s = store(StoreKind::Memory, 1 << 20);
    let c = s.lookup(C).unwrap();
    assert_eq!(code(c.get_block(&bid(1)).await), OzoneResult::NoSuchBlock);
    write(&c, 1, 0, data(100, 1)).await.unwrap();
    // Written but not put: no block metadata yet.
    let e = c.get_block(&bid(1)).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::NoSuchBlock);
    assert_eq!(
        e.message,
        "Unable to find the block. BlockID : conID: 7 locID: 1 bcsId: 0 replicaIndex: null"
    );
    let mut ec = bid(1);
    ec.replica_index = Some(3);
    assert_eq!(
        c.get_block(&ec).await.unwrap_err().message,
        "Unable to find the block. BlockID : conID: 7 locID: 1 bcsId: 0 replicaIndex: 3",
        "a non-EC container ignores the replica index"
    );
    assert_eq!(
        code(c.committed_length(&bid(1)).await),
        OzoneResult::NoSuchBlock
    );

    // size ≠ sum of chunk lengths.
    let bad = PutBlock::new(
        block_data(1, vec![chunk(0, 60), chunk(60, 40)], Some(99)),
        true,
    );
    let bad = bad.unwrap_err();
    assert_eq!(bad.result, OzoneResult::MalformedRequest);
    assert_eq!(
        bad.message,
        "Size mismatch: size (=99) != sum of chunks (=100)"
    );
    // An end-of-block PutBlock naming chunks of a block without data.
    let ghost = PutBlock::new(block_data(2, vec![chunk(0, 10)], None), true).unwrap();
    let e = c.put_block(ghost).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::UnableToFindChunk);
    assert_eq!(
        e.message,
        format!(
            "Chunk file not found: {}",
            s.root().join("7/chunks/2.block").display()
        )
    );
    // Not the end of the block: accepted.
    let open = PutBlock::new(block_data(2, vec![chunk(0, 10)], None), false).unwrap();
    assert_eq!(c.put_block(open).await.unwrap().size, Some(10));

    let put = PutBlock::new(block_data(1, vec![chunk(0, 60), chunk(60, 40)], None), true).unwrap();
    let stored = c.put_block(put).await.unwrap();
    assert_eq!(stored.size, Some(100));
    assert_eq!(stored.block_id.block_commit_sequence_id, Some(0));
    assert_eq!(c.get_block(&bid(1)).await.unwrap(), stored);
    assert_eq!(c.committed_length(&bid(1)).await.unwrap(), 100);
    assert_eq!(c.block_count(), 2);
    let mut later = bid(1);
    later.block_commit_sequence_id = Some(5);
    let e = c.get_block(&later).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::UnknownBcsid);
    assert_eq!(
        e.message,
        "Unable to find the block with bcsID 5 .Container 7 bcsId is 0."
    );

    // A second PutBlock of the same block replaces it and does not count it twice.
    let again = PutBlock::new(block_data(1, vec![chunk(0, 100)], Some(100)), true).unwrap();
    c.put_block(again).await.unwrap();
    assert_eq!(c.block_count(), 2);

    for local in [5, 3, 9] {
        let empty = PutBlock::new(block_data(local, vec![], None), true).unwrap();
        c.put_block(empty).await.unwrap();
    }
    let ids = |v: Vec<BlockData>| v.iter().map(|b| b.block_id.local_id).collect::<Vec<_>>();
    assert_eq!(ids(c.list_blocks(None, 10).await.unwrap()), [1, 2, 3, 5, 9]);
    assert_eq!(ids(c.list_blocks(Some(3), 2).await.unwrap()), [3, 5]);
    assert_eq!(ids(c.list_blocks(Some(-1), 1).await.unwrap()), [1]);
    // A start that is not a committed block lists nothing.
    assert_eq!(
        ids(c.list_blocks(Some(10), 5).await.unwrap()),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(c.list_blocks(Some(4), 5).await.unwrap()),
        Vec::<i64>::new()
    );
    // RocksDB order: the localID's decimal text.
    for local in [10, 100, 20] {
        let empty = PutBlock::new(block_data(local, vec![], None), true).unwrap();
        c.put_block(empty).await.unwrap();
    }
    assert_eq!(
        ids(c.list_blocks(None, 10).await.unwrap()),
        [1, 10, 100, 2, 20, 3, 5, 9]
    );
    assert_eq!(
        ids(c.list_blocks(Some(100), 3).await.unwrap()),
        [100, 2, 20]
    );
    assert_eq!(
        code(c.list_blocks(Some(-2), 5).await),
        OzoneResult::ContainerInternalError
    );
    assert_eq!(
        code(c.list_blocks(None, 0).await),
        OzoneResult::ContainerInternalError
    );
    assert_eq!(
        code(c.list_blocks(None, u32::MAX).await),
        OzoneResult::ContainerInternalError
    );

    // FinalizeBlock needs the block's data.
    assert_eq!(
        c.finalize_block(&bid(1)).await.unwrap(),
        c.get_block(&bid(1)).await.unwrap()
    );
    assert!(c.is_finalized(1).await);
    assert_eq!(
        code(c.finalize_block(&bid(5)).await),
        OzoneResult::UnableToFindChunk
    );
    assert_eq!(
        code(c.finalize_block(&bid(6)).await),
        OzoneResult::NoSuchBlock
    );
}

#[tokio::test]
async fn write_and_put_share_one_lock_and_validate_first() {
    let s = store(StoreKind::Memory, 1 << 20);
    let c = s.lookup(C).unwrap();
    let put = PutBlock::new(block_data(1, vec![chunk(0, 10)], None), false).unwrap();
    let stored = c
        .write_chunk_and_put(&bid(1), &chunk(0, 10), data(10, 1), Ok(put))
        .await
        .unwrap();
    assert_eq!(stored.size, Some(10));
    assert_eq!(c.get_block(&bid(1)).await.unwrap(), stored);
    // A failing write does not put the block.
    let put = PutBlock::new(block_data(2, vec![chunk(0, 10)], None), true).unwrap();
    let e = c
        .write_chunk_and_put(&bid(2), &chunk(5, 10), data(10, 1), Ok(put))
        .await;
    assert_eq!(code(e), OzoneResult::ChunkFileInconsistency);
    assert_eq!(code(c.get_block(&bid(2)).await), OzoneResult::NoSuchBlock);
    // The piggybacked PutBlock may name another block.
    let put = PutBlock::new(block_data(3, vec![], None), true).unwrap();
    c.write_chunk_and_put(&bid(4), &chunk(0, 5), data(5, 2), Ok(put))
        .await
        .unwrap();
    assert!(c.get_block(&bid(3)).await.is_ok());
    assert_eq!(read_all(&c, 4, 0, 5).await.unwrap(), data(5, 2).to_vec());
    // A malformed piggybacked PutBlock fails after the chunk was written.
    let bad = Err(StoreError::new(
        OzoneResult::IoException,
        "Write Chunk failed",
    ));
    let e = c
        .write_chunk_and_put(&bid(8), &chunk(0, 7), data(7, 3), bad)
        .await
        .unwrap_err();
    assert_eq!(e.message, "Write Chunk failed");
    assert_eq!(read_all(&c, 8, 0, 7).await.unwrap(), data(7, 3).to_vec());
    assert_eq!(code(c.get_block(&bid(8)).await), OzoneResult::NoSuchBlock);
}

#[tokio::test]
async fn container_data_per_release() {
    for version in crate::datanode::version::OzoneVersion::ALL {
        let s = store(StoreKind::Memory, 1 << 20);
        s.set_version(version);
        let c = s.lookup(C).unwrap();
        let d = c.data();
        assert_eq!(d.size, None, "the DataNode never sets size");
        let path = d.container_path.unwrap();
        assert!(std::path::Path::new(&path).is_absolute(), "{path}");
        assert!(path.ends_with("/7"), "{path}");
        let legacy = version == crate::datanode::version::OzoneVersion::V2_0;
        assert_eq!(d.bytes_used, legacy.then_some(0), "{version}");
        write(&c, 1, 0, data(100, 1)).await.unwrap();
        // An overwrite that extends the block: 2.0 counts nothing of it, 2.1+ the extension.
        write(&c, 1, 50, data(100, 1)).await.unwrap();
        let used = if legacy { 100 } else { 150 };
        assert_eq!(c.data().bytes_used, Some(used), "{version}");
        assert_eq!(s.used(), 150);
    }
}

#[tokio::test]
async fn ec_replicas_delete_and_update() {
    let s = store(StoreKind::Memory, 1 << 20);
    let ec = s.create_replica(8, State::Open, 1).unwrap();
    assert_eq!(ec.replica_index(), 1);
    let mut id = bid(1);
    id.container_id = 8;
    for ok in [None, Some(0), Some(1)] {
        id.replica_index = ok;
        assert!(ec.verify_replica_index(&id).is_ok());
    }
    id.replica_index = Some(2);
    let e = ec.verify_replica_index(&id).unwrap_err();
    assert_eq!(e.result, OzoneResult::ContainerNotFound);
    assert_eq!(
        e.message,
        "Unable to find the Container with replicaIdx 2. Container 8 replicaIdx is 1."
    );
    assert_eq!(
        code(ec.get_block(&id).await),
        OzoneResult::ContainerNotFound
    );
    assert_eq!(
        code(ec.read_chunk(&id, 0, 1, 1).await),
        OzoneResult::ContainerNotFound
    );
    // Not an EC container: any replica index.
    assert!(s.lookup(C).unwrap().verify_replica_index(&id).is_ok());

    // DeleteContainer's rules.
    let c = s.lookup(C).unwrap();
    let e = c.check_delete(false).unwrap_err();
    assert_eq!(
        (e.result, e.message.as_str()),
        (
            OzoneResult::DeleteOnOpenContainer,
            "Deletion of Open Container is not allowed."
        )
    );
    assert!(c.check_delete(true).is_ok());
    write(&c, 1, 0, data(100, 1)).await.unwrap();
    let put = PutBlock::new(block_data(1, vec![chunk(0, 100)], None), true).unwrap();
    c.put_block(put).await.unwrap();
    c.close("dn").unwrap();
    assert_eq!(
        c.check_delete(false).unwrap_err().result,
        OzoneResult::DeleteOnNonEmptyContainer
    );
    assert_eq!(s.used(), 100);
    assert!(s.remove(C));
    assert!(!s.remove(C));
    assert_eq!(s.used(), 0, "a deleted container frees its bytes");
    assert_eq!(code(s.lookup(C)), OzoneResult::ContainerNotFound);

    // UpdateContainer: empty metadata always; else OPEN or force.
    let kv = |k: &str, v: &str| common::proto::KeyValue {
        key: k.into(),
        value: Some(v.into()),
    };
    assert!(ec.update(&[], false, "dn").is_ok());
    ec.update(&[kv("b", "2"), kv("a", "1")], false, "dn")
        .unwrap();
    ec.update(&[kv("a", "3")], false, "dn").unwrap();
    let keys: Vec<_> = ec
        .data()
        .metadata
        .into_iter()
        .map(|k| (k.key, k.value.unwrap()))
        .collect();
    assert_eq!(keys, [("a".into(), "3".into()), ("b".into(), "2".into())]);
    ec.close("dn").unwrap();
    let e = ec.update(&[kv("c", "1")], false, "dn").unwrap_err();
    assert_eq!(e.result, OzoneResult::UnsupportedRequest);
    assert!(
        e.message.starts_with(
            "Updating a closed container without force option is disallowed: \
             KeyValueContainerData #8 (CLOSED, empty, ri=1"
        ),
        "{e}"
    );
    assert!(ec.update(&[kv("c", "1")], true, "dn").is_ok());
    assert!(ec.check_checksum_info().is_ok());
    let e = s.get_or_create(9).check_checksum_info().unwrap_err();
    assert_eq!(e.result, OzoneResult::UnclosedContainerIo);
    assert_eq!(
        e.message,
        "Checksum information is not available for containers in state OPEN"
    );
}

#[tokio::test]
async fn capacity_bounds_what_the_store_holds() {
    let s = store(StoreKind::Memory, 1000);
    let c = s.lookup(C).unwrap();
    write(&c, 1, 0, data(600, 1)).await.unwrap();
    write(&c, 2, 0, data(300, 2)).await.unwrap();
    let e = write(&c, 3, 0, data(101, 3)).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::DiskOutOfSpace);
    assert!(e.message.contains("--capacity"), "{e}");
    // Nothing stored, nothing reserved.
    assert_eq!(s.used(), 900);
    assert_eq!(
        code(read_all(&c, 3, 0, 1).await),
        OzoneResult::UnableToFindChunk
    );
    // An overwrite needs no new space; an extending one needs only the growth.
    write(&c, 1, 0, data(600, 4)).await.unwrap();
    write(&c, 2, 250, data(150, 5)).await.unwrap();
    assert_eq!(s.used(), 1000);
    assert!(s.is_full());
    assert_eq!(
        code(write(&c, 2, 400, data(1, 6)).await),
        OzoneResult::DiskOutOfSpace
    );
    assert_eq!(c.bytes_used(), 1000);
}

#[tokio::test]
async fn discard_keeps_lengths_and_metadata_but_no_bytes() {
    let s = store(StoreKind::Discard, 10);
    let c = s.lookup(C).unwrap();
    for i in 0..10u64 {
        write(&c, 1, i * 1000, data(1000, i as u8)).await.unwrap();
    }
    assert_eq!(s.used(), 0, "discard holds no data");
    assert!(!s.is_full());
    assert_eq!(c.bytes_used(), 10_000);
    assert_eq!(
        code(write(&c, 1, 10_001, data(1, 0)).await),
        OzoneResult::ChunkFileInconsistency
    );
    let put = PutBlock::new(block_data(1, vec![chunk(0, 10_000)], None), true).unwrap();
    c.put_block(put).await.unwrap();
    assert_eq!(c.committed_length(&bid(1)).await.unwrap(), 10_000);
    let e = read_all(&c, 1, 0, 100).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::UnableToFindChunk);
    assert!(e.message.contains("discarded by `--store discard`"), "{e}");
    assert_eq!(
        code(read_all(&c, 1, 9_990, 100).await),
        OzoneResult::ContainerInternalError
    );
}

#[tokio::test]
async fn dir_writes_block_files_in_the_datanode_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(StoreKind::Dir(tmp.path().to_path_buf()), 1 << 20);
    let c = s.lookup(C).unwrap();
    let a = data(5000, 1);
    let b = data(3000, 2);
    write(&c, 42, 0, a.clone()).await.unwrap();
    write(&c, 42, 5000, b.clone()).await.unwrap();
    write(&c, 42, 100, data(10, 3)).await.unwrap();
    let path = tmp.path().join("7/chunks/42.block");
    let on_disk = std::fs::read(&path).unwrap();
    let mut model = [a.to_vec(), b.to_vec()].concat();
    model[100..110].copy_from_slice(&data(10, 3));
    assert_eq!(on_disk, model);
    assert_eq!(read_all(&c, 42, 0, 8000).await.unwrap(), model);
    let pieces = c.read_chunk(&bid(42), 0, 8000, 1024).await.unwrap();
    assert_eq!(pieces.len(), 8);
    assert_eq!(pieces.concat(), model);
    let e = read_all(&c, 43, 0, 1).await.unwrap_err();
    assert_eq!(e.result, OzoneResult::UnableToFindChunk);
    assert!(e.message.ends_with("7/chunks/43.block"), "{e}");
    assert_eq!(
        c.data().container_path.as_deref(),
        Some(tmp.path().join("7").to_str().unwrap())
    );
    assert_eq!(s.used(), 8000);
    // Files changed behind the store's back read as the DataNode reads them.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4000)
        .unwrap();
    assert_eq!(
        code(read_all(&c, 42, 3000, 2000).await),
        OzoneResult::ContainerInternalError
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        code(read_all(&c, 42, 0, 10).await),
        OzoneResult::UnableToFindChunk
    );
}

/// A PutBlock of `local_id` naming one chunk of `len` bytes at 0, end of block.
fn put(local_id: i64, len: u64) -> PutBlock {
    PutBlock::new(block_data(local_id, vec![chunk(0, len)], None), true).unwrap()
}

#[tokio::test]
async fn dir_restart_serves_what_was_committed_as_the_datanode_does() {
    let tmp = tempfile::tempdir().unwrap();
    let kind = StoreKind::Dir(tmp.path().to_path_buf());
    let ids: crate::datanode::container_ids::ContainerIds = "7-9,20-21".parse().unwrap();
    {
        let s = ContainerStore::new(kind.clone(), 1 << 20, None).unwrap();
        s.precreate(&ids);
        let c = s.lookup(C).unwrap();
        write(&c, 1, 0, data(4000, 1)).await.unwrap();
        c.put_block(put(1, 4000)).await.unwrap();
        c.finalize_block(&bid(1)).await.unwrap();
        // Block 3: written, never committed. Block 2: committed at 1000 bytes, then 500 more
        // written without a PutBlock.
        write(&c, 3, 0, data(300, 4)).await.unwrap();
        write(&c, 2, 0, data(1000, 2)).await.unwrap();
        c.put_block(put(2, 1000)).await.unwrap();
        write(&c, 2, 1000, data(500, 3)).await.unwrap();
        assert_eq!((c.bytes_used(), c.block_count()), (5800, 2));
        let closed = s.lookup(8).unwrap();
        closed
            .set_metadata(
                &[common::proto::KeyValue {
                    key: "owner".into(),
                    value: Some("crash test".into()),
                }],
                "dn",
            )
            .unwrap();
        closed.close("dn").unwrap();
        assert!(s.lookup(9).unwrap().mark_unhealthy());
        s.create(10, State::Recovering).unwrap();
        s.create_replica(11, State::Recovering, 2).unwrap();
    }
    let s = ContainerStore::new(kind, 1 << 20, None).unwrap();
    s.precreate(&ids);
    let c = s.lookup(C).unwrap();
    // bytesUsed is what the last PutBlock recorded (Ozone 2.2.0 `#BYTESUSED`): it counted the
    // uncommitted block 3, not the 500 bytes written after it.
    assert_eq!((c.bytes_used(), c.block_count()), (5300, 2));
    // The capacity counts every block file.
    assert_eq!(s.used(), 5800);
    assert_eq!(c.get_block(&bid(1)).await.unwrap().size, Some(4000));
    assert_eq!(
        read_all(&c, 1, 0, 4000).await.unwrap(),
        data(4000, 1).to_vec()
    );
    assert!(c.is_finalized(1).await);
    assert_eq!(c.get_block(&bid(2)).await.unwrap().size, Some(1000));
    assert_eq!(c.committed_length(&bid(2)).await.unwrap(), 1000);
    // What a WriteChunk left in a block file stays in it: ReadChunk reads it, the next write
    // must start at the file's length, GetBlock and ListBlock do not know an uncommitted block.
    assert_eq!(
        read_all(&c, 2, 1000, 500).await.unwrap(),
        data(500, 3).to_vec()
    );
    assert_eq!(
        read_all(&c, 3, 0, 300).await.unwrap(),
        data(300, 4).to_vec()
    );
    assert_eq!(code(c.get_block(&bid(3)).await), OzoneResult::NoSuchBlock);
    assert_eq!(c.list_blocks(None, 10).await.unwrap().len(), 2);
    assert_eq!(
        code(write(&c, 3, 301, data(1, 5)).await),
        OzoneResult::ChunkFileInconsistency
    );
    write(&c, 3, 300, data(100, 6)).await.unwrap();
    c.put_block(put(3, 400)).await.unwrap();
    assert_eq!((c.bytes_used(), c.block_count()), (5300 + 100, 3));
    // States and metadata as they were; RECOVERING: deleted (replica index 0) or UNHEALTHY (EC).
    let closed = s.lookup(8).unwrap();
    assert_eq!(closed.state(), State::Closed);
    assert_eq!(
        closed.data().metadata[0].value.as_deref(),
        Some("crash test")
    );
    assert_eq!(s.lookup(9).unwrap().state(), State::Unhealthy);
    assert!(s.get(10).is_none());
    assert!(!tmp.path().join("10").exists());
    let ec = s.lookup(11).unwrap();
    assert_eq!((ec.state(), ec.replica_index()), (State::Unhealthy, 2));
    assert_eq!(s.lookup(20).unwrap().state(), State::Open);
    assert_eq!(s.len(), 6, "7, 8, 9, 11, 20 and 21");
    // What the restarted store holds is charged to its metadata account, as it was before.
    assert!(
        s.metadata_used() > 6 * super::bounds::CONTAINER_COST + 3 * super::bounds::BLOCK_COST,
        "{}",
        s.metadata_used()
    );
}

#[tokio::test]
async fn dir_metadata_that_cannot_be_read_stops_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let kind = StoreKind::Dir(tmp.path().to_path_buf());
    drop(store(kind.clone(), 1 << 20));
    let descriptor = tmp.path().join("7/metadata/7.container");
    std::fs::write(&descriptor, "containerID: 7\nstate: \"SHINY\"\n").unwrap();
    let Err(err) = ContainerStore::new(kind.clone(), 1 << 20, None) else {
        panic!("a store with an unreadable .container file started");
    };
    assert!(err.to_string().contains("7.container"), "{err}");
    // A container directory without a .container file (a creation cut short) is skipped, and so
    // is one without its DB.
    std::fs::remove_file(&descriptor).unwrap();
    let s = ContainerStore::new(kind.clone(), 1 << 20, None).unwrap();
    assert!(s.is_empty());
    drop(s);
    drop(store(kind.clone(), 1 << 20));
    std::fs::remove_file(tmp.path().join("7/metadata/7-dn-container.db")).unwrap();
    let s = ContainerStore::new(kind, 1 << 20, None).unwrap();
    assert!(s.is_empty());
}

#[tokio::test]
async fn verification_refuses_bad_checksums_and_stores_nothing() {
    let s =
        ContainerStore::new(StoreKind::Memory, 1 << 20, Some(verify::default_verifier())).unwrap();
    assert!(s.verifies_checksums());
    let c = s.get_or_create(C);
    let d = data(4096, 1);
    let mut good = chunk(0, 4096);
    good.checksum_data = common::checksum::compute(ChecksumType::Crc32, 1024, &d).unwrap();
    c.write_chunk(&bid(1), &good, d.clone()).await.unwrap();

    let mut bad = good.clone();
    bad.offset = 4096;
    let mut flipped = d.to_vec();
    flipped[3000] ^= 0xff;
    let e = c
        .write_chunk(&bid(1), &bad, Bytes::from(flipped))
        .await
        .unwrap_err();
    assert_eq!(e.result, OzoneResult::IoException);
    assert!(
        e.message.contains("this.checksums(2) != that.checksums(2)"),
        "{e}"
    );
    // Wrong number of checksums, bytesPerChecksum 0, unknown type: all refused.
    let mut short = bad.clone();
    short.checksum_data.checksums.pop();
    let mut zero = bad.clone();
    zero.checksum_data.bytes_per_checksum = 0;
    let mut unknown = bad.clone();
    unknown.checksum_data.r#type = 99;
    for info in [short, zero, unknown] {
        assert_eq!(
            code(c.write_chunk(&bid(1), &info, d.clone()).await),
            OzoneResult::IoException
        );
    }
    assert_eq!(
        c.bytes_used(),
        4096,
        "nothing of the refused writes was stored"
    );
    assert_eq!(read_all(&c, 1, 0, 4096).await.unwrap(), d.to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_of_different_blocks_and_of_one_block() {
    let s = Arc::new(store(StoreKind::Memory, 64 << 20));
    let mut tasks = Vec::new();
    for t in 0..16i64 {
        let s = Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            let c = s.lookup(C).unwrap();
            for i in 0..50u64 {
                write(&c, t, i * 1000, data(1000, (t as u8) ^ (i as u8)))
                    .await
                    .unwrap();
            }
        }));
    }
    // Many writers overwriting the same range of one block: each write is atomic.
    let c = s.lookup(C).unwrap();
    write(&c, 100, 0, data(100_000, 0)).await.unwrap();
    for t in 0..8u8 {
        let s = Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            let c = s.lookup(C).unwrap();
            for _ in 0..20 {
                write(&c, 100, 0, data(100_000, t + 1)).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for t in 0..16i64 {
        let got = read_all(&c, t, 0, 50_000).await.unwrap();
        let want: Vec<u8> = (0..50u64)
            .flat_map(|i| data(1000, (t as u8) ^ (i as u8)).to_vec())
            .collect();
        assert_eq!(got, want, "block {t}");
    }
    let last = read_all(&c, 100, 0, 100_000).await.unwrap();
    assert!(
        (1..=8u8).any(|t| last == data(100_000, t).to_vec()),
        "the overwritten range is one writer's data, not a mix"
    );
    assert_eq!(s.used(), 16 * 50_000 + 100_000);
}

// ---- property test: random operations against a model ----

#[derive(Debug, Clone, Copy)]
enum At {
    /// At the block's length.
    End,
    /// At `len * n / 256`: inside the block (or at 0).
    Inside(u8),
    /// `1 + n` bytes past the length.
    Past(u16),
}

#[derive(Debug, Clone)]
enum Op {
    Write {
        block: i64,
        at: At,
        len: usize,
        /// Data length minus `len`: 0 for a valid write.
        skew: i8,
        seed: u8,
    },
    Read {
        block: i64,
        at: At,
        len: u64,
        v1: bool,
    },
    Put {
        block: i64,
        chunk_len: u64,
        eof: bool,
        bad_size: bool,
    },
    Get {
        block: i64,
    },
    /// `dir:` only (a no-op for the other stores): the store is dropped, as a stopped process
    /// leaves its directory, and opened again on the same directory.
    Restart,
}

fn at() -> impl Strategy<Value = At> {
    prop_oneof![
        2 => Just(At::End),
        3 => any::<u8>().prop_map(At::Inside),
        1 => (0u16..500).prop_map(At::Past),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let block = 0i64..3;
    let len = prop_oneof![6 => 0usize..3000, 1 => 60_000usize..140_000];
    prop_oneof![
        5 => (block.clone(), at(), len, prop_oneof![8 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)], any::<u8>())
            .prop_map(|(block, at, len, skew, seed)| Op::Write { block, at, len, skew, seed }),
        3 => (block.clone(), at(), 0u64..5000, any::<bool>())
            .prop_map(|(block, at, len, v1)| Op::Read { block, at, len, v1 }),
        1 => (block.clone(), 0u64..3, any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(block, chunk_len, eof, bad_size)| Op::Put { block, chunk_len, eof, bad_size }),
        1 => block.prop_map(|block| Op::Get { block }),
        1 => Just(Op::Restart),
    ]
}

#[derive(Debug, Default, Clone)]
struct ModelBlock {
    data: Vec<u8>,
    exists: bool,
    committed: Option<i64>,
}

fn offset(at: At, len: u64) -> u64 {
    match at {
        At::End => len,
        At::Inside(n) => len * u64::from(n) / 256,
        At::Past(n) => len + 1 + u64::from(n),
    }
}

const BPC: u32 = 512;

async fn run_model(kind: StoreKind, capacity: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let root = match &kind {
        StoreKind::Dir(root) => Some(root.clone()),
        _ => None,
    };
    let mut s = ContainerStore::new(kind.clone(), capacity, None).unwrap();
    let mut c = s.get_or_create(C);
    let mut model: Vec<ModelBlock> = vec![ModelBlock::default(); 3];
    let mut used = 0u64;
    // The container's bytesUsed, and its value at the last committed PutBlock: what a restarted
    // DataNode reads back (`#BYTESUSED`).
    let (mut bytes_used, mut bytes_used_committed) = (0u64, 0u64);
    let mut restarted = false;
    for op in ops {
        match op {
            Op::Restart => {
                if root.is_none() {
                    continue;
                }
                drop(c);
                drop(s);
                s = ContainerStore::new(kind.clone(), capacity, None).unwrap();
                c = s.get(C).expect("the container is back after a restart");
                bytes_used = bytes_used_committed;
                restarted = true;
                prop_assert_eq!(c.bytes_used(), bytes_used);
                prop_assert_eq!(s.used(), used, "block files count against the capacity");
            }
            Op::Write {
                block,
                at,
                len,
                skew,
                seed,
            } => {
                let m = &mut model[block as usize];
                let off = offset(at, m.data.len() as u64);
                let actual = (len as i64 + i64::from(skew)).max(0) as usize;
                let got = c
                    .write_chunk(&bid(block), &chunk(off, len as u64), data(actual, seed))
                    .await;
                let end = off + len as u64;
                let growth = end.saturating_sub(m.data.len() as u64);
                let expect = if len == 0 {
                    None
                } else if off > m.data.len() as u64 {
                    Some(OzoneResult::ChunkFileInconsistency)
                } else if actual != len {
                    Some(OzoneResult::InvalidWriteSize)
                } else if kind.holds_data() && used + growth > capacity {
                    Some(OzoneResult::DiskOutOfSpace)
                } else {
                    None
                };
                prop_assert_eq!(got.as_ref().err().map(|e| e.result), expect, "{:?}", got);
                if got.is_ok() && len > 0 {
                    let d = data(len, seed);
                    if m.data.len() < end as usize {
                        m.data.resize(end as usize, 0);
                    }
                    m.data[off as usize..end as usize].copy_from_slice(&d);
                    m.exists = true;
                    bytes_used += growth;
                    if kind.holds_data() {
                        used += growth;
                    }
                }
            }
            Op::Read { block, at, len, v1 } => {
                let m = &model[block as usize];
                let off = offset(at, m.data.len() as u64);
                let mut info = chunk(off, len);
                info.checksum_data =
                    common::checksum::compute(ChecksumType::Crc32, BPC, &[]).unwrap();
                let piece = read_piece_size(&info.checksum_data, len, v1);
                let got = c.read_chunk(&bid(block), off, len, piece).await;
                let expect = if len == 0 {
                    None
                } else if !m.exists {
                    Some(OzoneResult::UnableToFindChunk)
                } else if off + len > m.data.len() as u64 {
                    Some(OzoneResult::ContainerInternalError)
                } else if kind == StoreKind::Discard {
                    Some(OzoneResult::UnableToFindChunk)
                } else {
                    None
                };
                prop_assert_eq!(got.as_ref().err().map(|e| e.result), expect, "{:?}", got);
                if let Ok(pieces) = got
                    && len > 0
                {
                    let want = &m.data[off as usize..(off + len) as usize];
                    prop_assert_eq!(pieces.concat(), want);
                    let expected_pieces = if v1 { len.div_ceil(u64::from(BPC)) } else { 1 };
                    prop_assert_eq!(pieces.len() as u64, expected_pieces);
                }
            }
            Op::Put {
                block,
                chunk_len,
                eof,
                bad_size,
            } => {
                let m = &mut model[block as usize];
                let chunks = if chunk_len > 0 {
                    vec![chunk(0, chunk_len)]
                } else {
                    vec![]
                };
                let size = bad_size.then_some(chunk_len as i64 + 1);
                let got = match PutBlock::new(block_data(block, chunks, size), eof) {
                    Ok(put) => c.put_block(put).await,
                    Err(e) => Err(e),
                };
                let expect = if bad_size {
                    Some(OzoneResult::MalformedRequest)
                } else if eof && chunk_len > 0 && !m.exists {
                    Some(OzoneResult::UnableToFindChunk)
                } else {
                    None
                };
                prop_assert_eq!(got.as_ref().err().map(|e| e.result), expect, "{:?}", got);
                if got.is_ok() {
                    m.committed = Some(chunk_len as i64);
                    bytes_used_committed = bytes_used;
                }
            }
            Op::Get { block } => {
                let got = c.get_block(&bid(block)).await;
                match model[block as usize].committed {
                    Some(size) => prop_assert_eq!(got.unwrap().size, Some(size)),
                    None => prop_assert_eq!(code(got), OzoneResult::NoSuchBlock),
                }
            }
        }
    }
    let total: u64 = model.iter().map(|m| m.data.len() as u64).sum();
    prop_assert_eq!(c.bytes_used(), bytes_used);
    if !restarted {
        prop_assert_eq!(bytes_used, total);
    }
    prop_assert_eq!(s.used(), used);
    prop_assert_eq!(
        c.block_count(),
        model.iter().filter(|m| m.committed.is_some()).count() as u64
    );
    if let Some(root) = root {
        for (i, m) in model.iter().enumerate() {
            let path = root.join(format!("{C}/chunks/{i}.block"));
            if m.exists {
                prop_assert_eq!(std::fs::read(&path).unwrap(), m.data.clone());
            } else {
                prop_assert!(!path.exists());
            }
        }
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn memory_store_matches_the_model(
        ops in prop::collection::vec(op(), 1..60),
        capacity in prop_oneof![Just(u64::MAX), 0u64..200_000],
    ) {
        runtime().block_on(run_model(StoreKind::Memory, capacity, ops))?;
    }

    #[test]
    fn discard_store_matches_the_model(ops in prop::collection::vec(op(), 1..60)) {
        runtime().block_on(run_model(StoreKind::Discard, 0, ops))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn dir_store_matches_the_model(
        ops in prop::collection::vec(op(), 1..40),
        capacity in prop_oneof![Just(u64::MAX), 0u64..200_000],
    ) {
        let tmp = tempfile::tempdir().unwrap();
        runtime().block_on(run_model(StoreKind::Dir(tmp.path().to_path_buf()), capacity, ops))?;
    }
}

//! Where a Raft write spends its time on a DataNode (Ozone 2.2.0, Ratis 3.2.1), as a model: the
//! Raft log's device and the executors `ContainerStateMachine` runs commands on. None of this is
//! the gRPC path's handler pool, which a real DataNode's Ratis path never touches.
//!
//! - The log: every write appends one entry to the group's segmented log on the Ratis storage
//!   directory, one device for the whole DataNode (`--raft-log-bandwidth`, `--raft-log-latency`,
//!   a [`DiskModel`]). An entry holds the container command as `ContainerCommandRequestMessage`
//!   without WriteChunk's data (the state machine writes that to the chunk file itself), so an
//!   echo's payload *is* in the log, as HDDS-10943 describes, and a 4 MiB chunk is not.
//! - WriteChunk's data (`writeStateMachineData`) runs on one of the DataNode's chunk writers:
//!   `hdds.container.ratis.num.write.chunk.threads.per.volume` × volumes single-thread executors,
//!   the block's localID modulo their number choosing one (`XceiverServerRatis.createChunkExecutors`,
//!   `ContainerStateMachine.getChunkExecutor`), in parallel with the log append; the entry
//!   commits when both are done.
//! - Every other write is applied (`applyTransaction`) through the container's task queue, one
//!   command of a container at a time in log order, on the group's fixed pool of
//!   `hdds.container.ratis.num.container.op.executors` threads (`TaskQueueMap`). So writes to one
//!   container are serial whatever the pool's size: an echo of sleep D to one container answers
//!   at most 1/D per second.
//! - A Raft read (`query`) runs on the Ratis server's own thread: no pool.
//!
//! The executors are [`HandlerPool`]s, so their service time runs on the simulation's clock as
//! the gRPC handlers' does.

use crate::sim::delay::DelaySpec;
use crate::sim::disk::{DiskModel, DiskModelError};
use crate::sim::pool::HandlerPool;
use std::sync::OnceLock;

/// `hdds.container.ratis.num.container.op.executors`' default (Ozone 2.0.0–2.2.0).
pub const DEFAULT_OP_EXECUTORS: usize = 10;
/// `hdds.container.ratis.num.write.chunk.threads.per.volume`' default (Ozone 2.0.0–2.2.0).
pub const DEFAULT_WRITE_CHUNK_THREADS_PER_VOLUME: usize = 10;

/// `hdds.container.ratis.log.appender.queue.byte-limit`'s default, 32MB (Ozone 2.0.0–2.2.0).
pub const DEFAULT_APPENDER_BYTE_LIMIT: u64 = 32 << 20;
/// `hdds.container.ratis.segment.size`'s default, 64MB: the byte limit plus 8 must fit a segment.
pub const SEGMENT_SIZE: u64 = 64 << 20;

/// Parses `hdds.container.ratis.log.appender.queue.byte-limit` as the DataNode checks it: a size
/// whose 8 bytes more fit a log segment (`XceiverServerRatis.setRaftSegmentAndWriteBufferSize`).
pub fn appender_byte_limit(value: &str) -> Result<u64, String> {
    let key = "hdds.container.ratis.log.appender.queue.byte-limit";
    let bytes = common::units::parse_size(value).map_err(|e| format!("{key}: {e}"))?;
    if bytes == 0 || bytes + 8 > SEGMENT_SIZE {
        return Err(format!(
            "{key} = {bytes} must be > 0 and <= (hdds.container.ratis.segment.size - 8 = {})",
            SEGMENT_SIZE - 8
        ));
    }
    Ok(bytes)
}

/// `raft.grpc.message.size.max` as the DataNode sets it: the larger of 32 MiB (the largest
/// chunk) and the appender's byte limit, plus 1 MiB (`XceiverServerRatis.newRaftProperties`,
/// `RatisConfUtils.Grpc.setMessageSizeMax`).
pub fn message_size_max(appender_byte_limit: u64) -> usize {
    (appender_byte_limit.max(32 << 20) + (1 << 20)) as usize
}

/// Container task queues per group. A container's queue is its id modulo this: containers whose
/// ids differ by a multiple of it share one (and wait for each other), which no lab's range of
/// container ids comes near.
pub const CONTAINER_LANES: usize = 1024;

/// The Raft path's settings, as flags and `-D` keys set them.
#[derive(Clone, Debug)]
pub struct RaftConfig {
    pub log_bandwidth: Option<f64>,
    pub log_latency: Option<DelaySpec>,
    pub op_executors: usize,
    pub chunk_writers: usize,
    /// The Ratis port's message limit ([`message_size_max`]).
    pub message_size_max: usize,
}

impl Default for RaftConfig {
    fn default() -> Self {
        Self {
            log_bandwidth: None,
            log_latency: None,
            op_executors: DEFAULT_OP_EXECUTORS,
            chunk_writers: DEFAULT_WRITE_CHUNK_THREADS_PER_VOLUME,
            message_size_max: message_size_max(DEFAULT_APPENDER_BYTE_LIMIT),
        }
    }
}

/// The DataNode-wide parts: the log's device and the chunk writers.
pub struct RaftModel {
    pub log: DiskModel,
    chunk_writers: Vec<HandlerPool>,
    op_executors: usize,
}

impl RaftModel {
    pub fn new(config: &RaftConfig) -> Result<Self, DiskModelError> {
        Ok(Self {
            log: DiskModel::new(config.log_bandwidth, config.log_latency.clone())?,
            chunk_writers: (0..config.chunk_writers.max(1))
                .map(|_| HandlerPool::new(1, None))
                .collect(),
            op_executors: config.op_executors.max(1),
        })
    }

    /// The chunk writer of the block `local_id`.
    pub fn chunk_writer(&self, local_id: i64) -> &HandlerPool {
        let n = self.chunk_writers.len() as u64;
        &self.chunk_writers[(local_id as u64 % n) as usize]
    }

    pub fn chunk_writers(&self) -> usize {
        self.chunk_writers.len()
    }

    /// A group's executors, sized as this DataNode's.
    pub fn group_executors(&self) -> GroupExecutors {
        GroupExecutors::new(self.op_executors)
    }
}

/// One group's apply side: its op executors and its containers' task queues.
pub struct GroupExecutors {
    pub op: HandlerPool,
    /// Boxed: a group's 1,024 lanes cost a pointer each until used (`--datanodes` has a group
    /// per identity).
    lanes: Box<[OnceLock<Box<HandlerPool>>]>,
}

impl GroupExecutors {
    pub fn new(op_executors: usize) -> Self {
        Self {
            op: HandlerPool::new(op_executors.max(1), None),
            lanes: (0..CONTAINER_LANES).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The task queue of `container_id`: one command at a time.
    pub fn lane(&self, container_id: i64) -> &HandlerPool {
        let i = (container_id as u64 % CONTAINER_LANES as u64) as usize;
        self.lanes[i].get_or_init(|| Box::new(HandlerPool::new(1, None)))
    }
}

/// The bytes one log entry takes in a Ratis log segment: the `LogEntryProto` (term, index, the
/// client and call ids, the state machine's log data of `log_data` bytes) behind its varint
/// length and followed by its CRC32C (`SegmentedRaftLogOutputStream.write`).
pub fn log_entry_bytes(log_data: usize) -> u64 {
    // LogEntryProto{term(1) index(2) stateMachineLogEntry(3){logData(1) callId(2)
    // clientId(3, 16 bytes)}}: tags, lengths and varints, taken at their usual sizes (term 1,
    // an index and a call id of 3 bytes each).
    let sm_entry = 1 + varint_len(log_data) + log_data + 1 + 3 + 1 + 1 + 16;
    let entry = 1 + 1 + 1 + 3 + 1 + varint_len(sm_entry) + sm_entry;
    (varint_len(entry) + entry + 4) as u64
}

fn varint_len(n: usize) -> usize {
    let bits = usize::BITS - (n | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_costs_its_log_data_plus_a_small_frame() {
        let empty = log_entry_bytes(0);
        assert!((30..=50).contains(&empty), "{empty}");
        // A 1 KiB echo payload is in the entry, byte for byte, plus a few length bytes.
        let kib = log_entry_bytes(1024);
        assert!(
            kib - empty >= 1024 && kib - empty <= 1024 + 4,
            "{kib} {empty}"
        );
    }

    #[test]
    fn the_appender_byte_limit_sets_the_message_limit_and_must_fit_a_segment() {
        assert_eq!(
            message_size_max(DEFAULT_APPENDER_BYTE_LIMIT),
            common::ratis::MAX_MESSAGE_SIZE
        );
        assert_eq!(message_size_max(1 << 20), common::ratis::MAX_MESSAGE_SIZE);
        assert_eq!(appender_byte_limit("48MB"), Ok(48 << 20));
        assert_eq!(message_size_max(48 << 20), (49 << 20) as usize);
        let err = appender_byte_limit("64MB").unwrap_err();
        assert!(err.contains("67108856"), "{err}");
        assert!(appender_byte_limit("lots").is_err());
    }

    #[test]
    fn varint_lengths() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(16_383), 2);
        assert_eq!(varint_len(16_384), 3);
    }

    #[test]
    fn blocks_choose_their_chunk_writer_by_local_id() {
        let model = RaftModel::new(&RaftConfig {
            chunk_writers: 4,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(model.chunk_writers(), 4);
        assert!(std::ptr::eq(model.chunk_writer(1), model.chunk_writer(5)));
        assert!(!std::ptr::eq(model.chunk_writer(1), model.chunk_writer(2)));
    }

    #[test]
    fn containers_have_a_task_queue_each() {
        let group = GroupExecutors::new(10);
        assert!(std::ptr::eq(group.lane(7), group.lane(7)));
        assert!(!std::ptr::eq(group.lane(7), group.lane(8)));
        assert_eq!(group.lane(7).size(), 1);
        assert_eq!(group.op.size(), 10);
    }
}

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
//! - With a profile's `[ratis.log]`, each group's log has its worker ([`LogWorker`]), as Ratis's
//!   `SegmentedRaftLogWorker` is one thread a group: it writes the entries one at a time in log
//!   order and flushes (`FileChannel.force`) whenever its queue is empty or 128 entries wait
//!   (`raft.server.log.force.sync.num`), and a write is durable, so committed, once a flush
//!   covers it. Entries that come while the worker flushes share its next flush: the group
//!   commit that lets a real DataNode's Raft writes scale with the requests in flight (Ozone
//!   2.2.0 here, echoes as Raft writes: 1.3–1.7 thousand a second at one in flight, 9–13
//!   thousand at 32 × 32, on a log worker that burnt 0.2 ms of CPU a write at one in flight and
//!   0.03 ms at 32).
//!
//! The executors are [`HandlerPool`]s, so their service time runs on the simulation's clock as
//! the gRPC handlers' does. The log worker is a thread of its own that burns its costs as CPU
//! (`sim::cpu`), time-sliced against everything else by the OS as the real one is.

use crate::datanode::ratis_metrics::RatisMetrics;
use crate::sim::delay::DelaySpec;
use crate::sim::disk::{DiskModel, DiskModelError};
use crate::sim::pool::HandlerPool;
pub use crate::sim::profile::LogWorkerCost;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

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

/// `raft.server.log.force.sync.num`'s default (Ratis 3.2.1): the log worker flushes at the
/// latest once this many entries wait for a flush, even while more are queued.
pub const FORCE_SYNC_NUM: usize = 128;
/// `raft.server.log.queue.element-limit`'s default (Ratis 3.2.1): appends wait while the log
/// worker's queue holds this many entries.
pub const LOG_QUEUE_ELEMENTS: usize = 4096;

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
    log_worker: Option<LogWorkerCost>,
}

impl RaftModel {
    /// The model of `config`; with `log_worker` (a profile's `[ratis.log]`) each group's log
    /// gets a [`LogWorker`] of those costs.
    pub fn new(
        config: &RaftConfig,
        log_worker: Option<LogWorkerCost>,
    ) -> Result<Self, DiskModelError> {
        Ok(Self {
            log: DiskModel::new(config.log_bandwidth, config.log_latency.clone())?,
            chunk_writers: (0..config.chunk_writers.max(1))
                .map(|_| HandlerPool::new(1, None))
                .collect(),
            op_executors: config.op_executors.max(1),
            log_worker,
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

    /// A group's executors, sized as this DataNode's, and its log worker when modelled
    /// (counting its flushes in the group's `metrics`).
    pub fn group_executors(&self, metrics: &Arc<RatisMetrics>) -> GroupExecutors {
        let mut executors = GroupExecutors::new(self.op_executors);
        executors.log = self
            .log_worker
            .map(|cost| LogWorker::new(cost, Arc::clone(metrics)));
        executors
    }
}

/// One group's apply side: its op executors and its containers' task queues.
pub struct GroupExecutors {
    pub op: HandlerPool,
    /// Boxed: a group's 1,024 lanes cost a pointer each until used (`--datanodes` has a group
    /// per identity).
    lanes: Box<[OnceLock<Box<HandlerPool>>]>,
    /// The group's log worker (`[ratis.log]`); `None`: not modelled.
    pub log: Option<LogWorker>,
}

impl GroupExecutors {
    pub fn new(op_executors: usize) -> Self {
        Self {
            op: HandlerPool::new(op_executors.max(1), None),
            lanes: (0..CONTAINER_LANES).map(|_| OnceLock::new()).collect(),
            log: None,
        }
    }

    /// The task queue of `container_id`: one command at a time.
    pub fn lane(&self, container_id: i64) -> &HandlerPool {
        let i = (container_id as u64 % CONTAINER_LANES as u64) as usize;
        self.lanes[i].get_or_init(|| Box::new(HandlerPool::new(1, None)))
    }
}

/// An entry on its way to the log worker: who waits for the flush that covers it (no one for a
/// metadata entry).
type Waiter = Option<oneshot::Sender<()>>;

/// A Raft group's log worker (module docs): one thread, started by the group's first append,
/// that ends when the group is removed (its queue's sender dropped).
pub struct LogWorker {
    cost: LogWorkerCost,
    queue: OnceLock<mpsc::Sender<Waiter>>,
    counts: Arc<LogWorkerCounts>,
    /// The group's Ratis metrics, which count its flushes (`ratis_log_worker_flushCount`).
    metrics: Arc<RatisMetrics>,
}

/// What a log worker has begun, for tests to wait on (the flushes done are counted in the
/// group's metrics).
#[derive(Debug, Default)]
pub struct LogWorkerCounts {
    /// Entries written.
    pub entries: AtomicU64,
    /// Flushes begun.
    pub flushes_started: AtomicU64,
}

impl LogWorker {
    pub fn new(cost: LogWorkerCost, metrics: Arc<RatisMetrics>) -> Self {
        metrics.log_worker_modelled();
        Self {
            cost,
            queue: OnceLock::new(),
            counts: Arc::default(),
            metrics,
        }
    }

    pub fn counts(&self) -> &LogWorkerCounts {
        &self.counts
    }

    fn queue(&self) -> &mpsc::Sender<Waiter> {
        self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(LOG_QUEUE_ELEMENTS);
            let (cost, counts, metrics) = (
                self.cost,
                Arc::clone(&self.counts),
                Arc::clone(&self.metrics),
            );
            let spawned = std::thread::Builder::new()
                .name("raft-log-worker".into())
                .spawn(move || run_log_worker(rx, cost, &counts, &metrics));
            if let Err(e) = spawned {
                // The receiver is gone with the closure: appends are then logged at once.
                tracing::warn!("cannot start a Raft log worker ({e}); writes are not delayed");
            }
            tx
        })
    }

    /// Appends a write's entry, waiting while the queue is full; the receiver completes once a
    /// flush covers the entry (or at once if the worker is gone).
    pub async fn append(&self) -> oneshot::Receiver<()> {
        let (done, flushed) = oneshot::channel();
        // A send fails only without a worker: `done` is then dropped and `flushed` completes.
        let _ = self.queue().send(Some(done)).await;
        flushed
    }

    /// Appends an entry no one waits for (a metadata entry recording a commit index). With the
    /// queue full it is left out rather than hold up the write that raised the index.
    pub fn append_unwaited(&self) {
        let _ = self.queue().try_send(None);
    }
}

/// Ratis's `SegmentedRaftLogWorker.run` with `flushIfNecessary`: take an entry, write it, and
/// flush when the queue has none left or [`FORCE_SYNC_NUM`] wait.
fn run_log_worker(
    mut queue: mpsc::Receiver<Waiter>,
    cost: LogWorkerCost,
    counts: &LogWorkerCounts,
    metrics: &RatisMetrics,
) {
    let burn = |d: Duration| {
        if !d.is_zero() {
            crate::sim::cpu::spin(d.as_nanos() as u64);
        }
    };
    if !cost.sync.is_zero() {
        // A sync of a few hundred µs: Linux's default timer slack (50 µs) would be a sixth of it.
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
    }
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::with_capacity(FORCE_SYNC_NUM);
    let mut unflushed = 0usize;
    let flush = |waiting: &mut Vec<oneshot::Sender<()>>, unflushed: &mut usize| {
        counts.flushes_started.fetch_add(1, Relaxed);
        burn(cost.per_flush);
        if !cost.sync.is_zero() {
            std::thread::sleep(cost.sync);
        }
        metrics.flushed();
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
        *unflushed = 0;
    };
    while let Some(first) = queue.blocking_recv() {
        let mut next = Some(first);
        while let Some(waiter) = next.take() {
            burn(cost.per_entry);
            counts.entries.fetch_add(1, Relaxed);
            waiting.extend(waiter);
            unflushed += 1;
            if unflushed >= FORCE_SYNC_NUM {
                flush(&mut waiting, &mut unflushed);
            }
            next = queue.try_recv().ok();
        }
        if unflushed > 0 {
            flush(&mut waiting, &mut unflushed);
        }
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
        let model = RaftModel::new(
            &RaftConfig {
                chunk_writers: 4,
                ..Default::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(model.chunk_writers(), 4);
        assert!(std::ptr::eq(model.chunk_writer(1), model.chunk_writer(5)));
        assert!(!std::ptr::eq(model.chunk_writer(1), model.chunk_writer(2)));
    }

    /// Polls `done` until it holds or 10 s pass.
    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Appends one entry, waits until its flush has begun, then appends `more` during that
    /// flush: the receivers, the first one's first.
    async fn one_then_more_during_its_flush(
        worker: &LogWorker,
        more: usize,
    ) -> Vec<oneshot::Receiver<()>> {
        let mut flushed = vec![worker.append().await];
        let counts = worker.counts();
        wait_for("the first flush", || {
            counts.flushes_started.load(Relaxed) == 1
        });
        for _ in 0..more {
            flushed.push(worker.append().await);
        }
        flushed
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn group_metrics() -> Arc<RatisMetrics> {
        Arc::new(RatisMetrics::new(uuid::Uuid::nil(), "dn"))
    }

    #[test]
    fn entries_that_come_during_a_flush_share_the_next_one() {
        let metrics = group_metrics();
        let worker = LogWorker::new(
            LogWorkerCost {
                per_entry: Duration::ZERO,
                per_flush: Duration::from_millis(10),
                sync: Duration::from_millis(20),
            },
            Arc::clone(&metrics),
        );
        let rt = runtime();
        rt.block_on(async {
            // The ten that come during the first entry's flush wait for the next one.
            for flushed in one_then_more_during_its_flush(&worker, 10).await {
                flushed.await.unwrap();
            }
            let counts = worker.counts();
            assert_eq!(counts.entries.load(Relaxed), 11);
            assert_eq!(metrics.flush_count(), 2, "one flush alone, one for the ten");
        });
    }

    #[test]
    fn a_flush_covers_at_most_the_force_sync_number_of_entries() {
        let metrics = group_metrics();
        let worker = LogWorker::new(
            LogWorkerCost {
                per_entry: Duration::ZERO,
                per_flush: Duration::from_millis(50),
                sync: Duration::ZERO,
            },
            Arc::clone(&metrics),
        );
        let rt = runtime();
        rt.block_on(async {
            let all = one_then_more_during_its_flush(&worker, 2 * FORCE_SYNC_NUM + 44).await;
            // A metadata entry is written and flushed like any other, with no one waiting.
            worker.append_unwaited();
            for flushed in all {
                flushed.await.unwrap();
            }
            let counts = worker.counts();
            wait_for("the metadata entry", || counts.entries.load(Relaxed) == 302);
            wait_for("its flush", || metrics.flush_count() == 4);
            // 1 alone, then 128, 128 and the last 44 + 1.
            assert_eq!(counts.flushes_started.load(Relaxed), 4);
            let mut flush_count = None;
            metrics.render_into(&mut |name, _, _, value| {
                if name == "ratis_log_worker_flushCount" {
                    flush_count = Some(value);
                }
            });
            assert_eq!(flush_count.as_deref(), Some("4.0"));
        });
    }

    #[test]
    fn no_log_worker_without_its_costs() {
        let metrics = group_metrics();
        let plain = RaftModel::new(&RaftConfig::default(), None).unwrap();
        assert!(plain.group_executors(&metrics).log.is_none());
        let mut names = Vec::new();
        metrics.render_into(&mut |name, _, _, _| names.push(name));
        assert!(!names.iter().any(|n| n.contains("flush")), "{names:?}");
        let cost = LogWorkerCost {
            per_entry: Duration::from_micros(20),
            per_flush: Duration::from_micros(150),
            sync: Duration::ZERO,
        };
        let modelled = RaftModel::new(&RaftConfig::default(), Some(cost)).unwrap();
        let group = modelled.group_executors(&metrics);
        let log = group.log.as_ref().unwrap();
        // Its thread starts with the group's first append, not before.
        assert!(log.queue.get().is_none());
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

//! The DataNode's `ContainerStateMachine` as a Ratis client meets it (Ozone 2.2.0, Ratis 3.2.1):
//! one per Raft group (a pipeline) this DataNode hosts. A one-node group commits an entry once
//! it is in the log, so the commit index follows the log; what stays of Ratis is what a client
//! can see: log indices, commit infos, watches, the retry cache, and the rules that turn a
//! container command into a reply or a `StateMachineException`.
//!
//! Timing (the log's device, the apply executors) is the simulation's business, not this file's.

use crate::datanode::store::ContainerStore;
use common::proto::container_data_proto::State;
use common::proto::{
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    Result as OzoneResult, Type,
};
use common::ratis::proto::common::{CommitInfoProto, RaftPeerProto, RaftRpcReplyProto};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The Java class names a `StateMachineExceptionProto` carries.
pub mod exception_class {
    pub const CONTAINER_NOT_OPEN: &str =
        "org.apache.hadoop.hdds.scm.container.common.helpers.ContainerNotOpenException";
    pub const INVALID_CONTAINER_STATE: &str =
        "org.apache.hadoop.hdds.scm.container.common.helpers.InvalidContainerStateException";
    pub const STORAGE_CONTAINER: &str =
        "org.apache.hadoop.hdds.scm.container.common.helpers.StorageContainerException";
    pub const ILLEGAL_STATE: &str = "java.lang.IllegalStateException";
    pub const INVALID_PROTOBUF: &str =
        "org.apache.ratis.thirdparty.com.google.protobuf.InvalidProtocolBufferException";
}

/// A failure the client receives as `stateMachineException`: the Java class of the cause and
/// its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateMachineError {
    pub class: &'static str,
    pub message: String,
}

/// One Raft group this DataNode is a member of: the only member of a group given at start, or
/// one of the members SCM named in `createPipelineCommand`.
pub struct ContainerStateMachine {
    group: uuid::Uuid,
    /// This DataNode as a Raft peer: its id is the DataNode's UUID string (`replyId`).
    peer: RaftPeerProto,
    /// The group's other members (none in a one-node group). dn-sim has no Raft between
    /// DataNodes: a leader commits alone and reports the others at its own commit index, as if
    /// they had replicated at once; they store nothing (docs/deviations.md).
    others: Vec<RaftPeerProto>,
    /// The member that leads the group when it is not this DataNode (it then answers writes,
    /// reads and watches with `NotLeaderException`, as a Ratis follower does).
    leader: Option<RaftPeerProto>,
    /// The last log index handed out (0: the log is empty).
    last_index: AtomicU64,
    commit_index: tokio::sync::watch::Sender<u64>,
    /// False once an apply failed in a way that makes the real DataNode close the pipeline.
    healthy: AtomicBool,
    /// Containers whose apply or chunk write failed.
    unhealthy_containers: Mutex<Vec<i64>>,
    /// True once a WriteChunk's data failed: the group's Raft log is closed ([`Self::fail_log`]).
    log_closed: AtomicBool,
    pub retry_cache: RetryCache,
    /// The group's `CSMMetrics` (`csm_metrics_*` on `/prom`).
    pub metrics: std::sync::Arc<crate::datanode::csm_metrics::CsmMetrics>,
    /// Ratis's own metrics of the group (`ratis_*` on `/prom`).
    pub ratis_metrics: std::sync::Arc<crate::datanode::ratis_metrics::RatisMetrics>,
}

impl ContainerStateMachine {
    /// The group `group` on the DataNode `datanode_uuid`, its client port at `address`.
    pub fn new(group: uuid::Uuid, datanode_uuid: &str, address: String) -> Self {
        Self::member(group, datanode_uuid, address, Vec::new(), None)
    }

    /// This DataNode's share of a group with `others` as its other members, led by `leader`
    /// (`None`: this DataNode leads).
    pub fn member(
        group: uuid::Uuid,
        datanode_uuid: &str,
        address: String,
        others: Vec<RaftPeerProto>,
        leader: Option<RaftPeerProto>,
    ) -> Self {
        Self {
            group,
            peer: RaftPeerProto {
                id: bytes::Bytes::copy_from_slice(datanode_uuid.as_bytes()),
                address: address.clone(),
                client_address: address,
                ..Default::default()
            },
            others,
            leader,
            last_index: AtomicU64::new(0),
            commit_index: tokio::sync::watch::Sender::new(0),
            healthy: AtomicBool::new(true),
            unhealthy_containers: Mutex::new(Vec::new()),
            log_closed: AtomicBool::new(false),
            retry_cache: RetryCache::new(RETRY_CACHE_ENTRIES),
            metrics: std::sync::Arc::new(crate::datanode::csm_metrics::CsmMetrics::new(group)),
            ratis_metrics: std::sync::Arc::new(crate::datanode::ratis_metrics::RatisMetrics::new(
                group,
                datanode_uuid,
            )),
        }
    }

    pub fn group(&self) -> uuid::Uuid {
        self.group
    }

    /// This DataNode as the group's one peer.
    pub fn peer(&self) -> &RaftPeerProto {
        &self.peer
    }

    /// The DataNode's id as the `replyId` of every reply.
    pub fn peer_id(&self) -> &bytes::Bytes {
        &self.peer.id
    }

    /// Every member of the group, this DataNode first.
    pub fn peers(&self) -> Vec<RaftPeerProto> {
        std::iter::once(self.peer.clone())
            .chain(self.others.iter().cloned())
            .collect()
    }

    /// The member that leads the group, when it is not this DataNode.
    pub fn leader(&self) -> Option<&RaftPeerProto> {
        self.leader.as_ref()
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// `startTransaction` on the leader: `HddsDispatcher.validateContainerCommand`. A write to a
    /// container that is not open (nor recovering) fails, except CreateContainer and
    /// CloseContainer; a read of an INVALID container fails. Unknown containers pass (the
    /// dispatcher answers them). The state machine's health is not asked here: a write after a
    /// failed apply is logged and refused when applied ([`Self::check_container_healthy`]).
    pub fn start_transaction(
        &self,
        store: &ContainerStore,
        req: &Request,
        read_only: bool,
    ) -> Result<(), StateMachineError> {
        let Some(container) = store.get(req.container_id) else {
            return Ok(());
        };
        let state = container.state();
        let text = || {
            format!(
                "Container {} in {} state",
                req.container_id,
                state.as_str_name()
            )
        };
        let cmd = Type::try_from(req.cmd_type).ok();
        let writable = matches!(state, State::Open | State::Recovering);
        if !read_only && !writable {
            if matches!(cmd, Some(Type::CreateContainer | Type::CloseContainer)) {
                return Ok(());
            }
            return Err(StateMachineError {
                class: exception_class::CONTAINER_NOT_OPEN,
                message: text(),
            });
        }
        if read_only && state == State::Invalid {
            return Err(StateMachineError {
                class: exception_class::INVALID_CONTAINER_STATE,
                message: text(),
            });
        }
        Ok(())
    }

    /// `checkContainerHealthy`, asked when a command is applied (`any_container` false) and when
    /// a WriteChunk's data is written (`any_container` true): once an apply failed, commands of
    /// the containers whose writes failed are refused, and so is every container's chunk data.
    pub fn check_container_healthy(
        &self,
        container_id: i64,
        any_container: bool,
    ) -> Result<(), StateMachineError> {
        if self.is_healthy() {
            return Ok(());
        }
        let stopped = self.unhealthy_containers.lock().unwrap();
        let message = if stopped.contains(&container_id) {
            format!(
                "Prev writes to container {container_id} failed, stopping all writes to container"
            )
        } else if any_container {
            // Java's `Set.toString`: "[1, 2]".
            let ids: Vec<String> = stopped.iter().map(i64::to_string).collect();
            format!(
                "Prev writes to containers [{}] failed, stopping all writes to container",
                ids.join(", ")
            )
        } else {
            return Ok(());
        };
        Err(StateMachineError {
            class: exception_class::STORAGE_CONTAINER,
            message,
        })
    }

    /// A WriteChunk's data could not be written (`writeStateMachineData` failed): the state
    /// machine is unhealthy, and the log entry waiting for that data fails, which fails the
    /// group's Raft log for good (Ratis's `SegmentedRaftLogWorker` fails every later task and
    /// the log closes; its `ratis_log_worker_*` series leave `/prom`).
    pub fn fail_log(&self, container_id: i64) {
        self.mark_unhealthy(container_id);
        self.log_closed.store(true, Ordering::Release);
        self.ratis_metrics.log_closed();
    }

    /// Whether the group's Raft log still takes entries; if not, the error a write gets from
    /// `RaftLogBase.checkLogState` (an `IllegalStateException` that ends the client's stream).
    pub fn log_open(&self) -> Result<(), StateMachineError> {
        if !self.log_closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let hex = self.group.simple().to_string().to_uppercase();
        Err(StateMachineError {
            class: exception_class::ILLEGAL_STATE,
            message: format!(
                "{}@group-{}-SegmentedRaftLog is expected to be opened but it is CLOSED",
                String::from_utf8_lossy(&self.peer.id),
                &hex[20..]
            ),
        })
    }

    fn mark_unhealthy(&self, container_id: i64) {
        // Once per failed container (a set in Ozone): the list stays as small as the failures.
        self.healthy.store(false, Ordering::Release);
        let mut stopped = self.unhealthy_containers.lock().unwrap();
        if !stopped.contains(&container_id) {
            stopped.push(container_id);
        }
    }

    /// Appends a write to the log: its index.
    pub fn append(&self) -> u64 {
        self.ratis_metrics
            .appended(crate::datanode::ratis_metrics::Entry::StateMachine);
        self.next_index()
    }

    fn next_index(&self) -> u64 {
        self.last_index.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The entry at `index` is durable in the log: in a one-node group, committed. A commit
    /// index that rises appends a metadata entry recording it (Ratis's
    /// `RaftLogBase.appendMetadata`, on the leader), committed at once here: a lone write at
    /// index N is answered with commit index N + 1, and the next write gets N + 2, as a real
    /// DataNode's replies show (Ratis 3.2.1 in Ozone 2.2.0). True when it appended that entry.
    pub fn committed(&self, index: u64) -> bool {
        if index <= self.commit_index() {
            return false;
        }
        let metadata = self.next_index();
        self.ratis_metrics
            .appended(crate::datanode::ratis_metrics::Entry::Metadata);
        self.commit_index.send_if_modified(|c| {
            let raised = metadata > *c;
            *c = (*c).max(metadata);
            raised
        });
        self.ratis_metrics.applied(metadata);
        true
    }

    /// `applyTransaction`'s verdict on a response: results other than SUCCESS,
    /// CONTAINER_NOT_OPEN, CLOSED_CONTAINER_IO and CHUNK_FILE_INCONSISTENCY mark the state
    /// machine unhealthy (the real DataNode then closes the pipeline) and reach the client as a
    /// `StorageContainerException`.
    pub fn applied(&self, container_id: i64, resp: &Response) -> Result<(), StateMachineError> {
        let result =
            OzoneResult::try_from(resp.result).unwrap_or(OzoneResult::ContainerInternalError);
        if matches!(
            result,
            OzoneResult::Success
                | OzoneResult::ContainerNotOpen
                | OzoneResult::ClosedContainerIo
                | OzoneResult::ChunkFileInconsistency
        ) {
            return Ok(());
        }
        self.mark_unhealthy(container_id);
        Err(StateMachineError {
            class: exception_class::STORAGE_CONTAINER,
            message: resp.message.clone().unwrap_or_default(),
        })
    }

    pub fn commit_index(&self) -> u64 {
        *self.commit_index.borrow()
    }

    /// Waits until the commit index reaches `index` (a watch): every replication level is the
    /// same in a one-node group.
    pub async fn wait_committed(&self, index: u64) -> u64 {
        let mut rx = self.commit_index.subscribe();
        *rx.wait_for(|&c| c >= index)
            .await
            .expect("the sender lives in self")
    }

    /// The `commitInfos` of a reply: each member and its commit index (the others at this
    /// peer's, as the `others` field says).
    pub fn commit_infos(&self) -> Vec<CommitInfoProto> {
        let commit_index = self.commit_index();
        std::iter::once(&self.peer)
            .chain(&self.others)
            .map(|peer| CommitInfoProto {
                server: Some(peer.clone()),
                commit_index,
            })
            .collect()
    }

    /// The `rpcReply` header answering `request` (`requestorId`, group and call ids echoed).
    pub fn reply_header(
        &self,
        request: &common::ratis::proto::common::RaftRpcRequestProto,
        success: bool,
    ) -> RaftRpcReplyProto {
        RaftRpcReplyProto {
            requestor_id: request.requestor_id.clone(),
            reply_id: self.peer.id.clone(),
            raft_group_id: request.raft_group_id.clone(),
            call_id: request.call_id,
            success,
        }
    }
}

/// Entries the retry cache keeps before it forgets the oldest (Ratis bounds its cache by time,
/// `raft.server.retrycache.expirytime`, 60 s; a count bounds dn-sim's memory however fast).
pub const RETRY_CACHE_ENTRIES: usize = 65_536;

/// A reply being made or made, shared by a call and its retries.
pub type CachedReply =
    tokio::sync::watch::Receiver<Option<common::ratis::proto::common::RaftClientReplyProto>>;

/// What answered a call id of a client: a retry (same client, same call id) is answered from
/// here, not applied again (Ratis's `RetryCacheImpl`).
pub struct RetryCache {
    shards: Vec<Mutex<Shard>>,
}

struct Shard {
    entries: HashMap<(uuid::Uuid, u64), CachedReply>,
    order: VecDeque<(uuid::Uuid, u64)>,
    bound: usize,
}

/// A call's place in the cache.
pub enum Lookup {
    /// The first time: make the reply and send it here.
    First(tokio::sync::watch::Sender<Option<common::ratis::proto::common::RaftClientReplyProto>>),
    /// A retry: the first call's reply, when it exists.
    Retry(CachedReply),
}

const RETRY_SHARDS: usize = 16;

impl RetryCache {
    pub fn new(bound: usize) -> Self {
        let per_shard = bound.div_ceil(RETRY_SHARDS).max(1);
        Self {
            shards: (0..RETRY_SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        entries: HashMap::new(),
                        order: VecDeque::new(),
                        bound: per_shard,
                    })
                })
                .collect(),
        }
    }

    /// A new entry for `(client, call_id)` in place of a failed one (its first attempt ended
    /// without a cached reply).
    pub fn refresh(
        &self,
        client: uuid::Uuid,
        call_id: u64,
    ) -> tokio::sync::watch::Sender<Option<common::ratis::proto::common::RaftClientReplyProto>>
    {
        let mut shard = self.shard(client, call_id).lock().unwrap();
        let (tx, rx) = tokio::sync::watch::channel(None);
        if shard.entries.insert((client, call_id), rx).is_none() {
            // Forgotten meanwhile: a new entry in the order, as `lookup` makes one.
            if shard.order.len() >= shard.bound
                && let Some(oldest) = shard.order.pop_front()
            {
                shard.entries.remove(&oldest);
            }
            shard.order.push_back((client, call_id));
        }
        tx
    }

    fn shard(&self, client: uuid::Uuid, call_id: u64) -> &Mutex<Shard> {
        &self.shards[(call_id as usize ^ client.as_u64_pair().1 as usize) % RETRY_SHARDS]
    }

    /// The cache entry of `(client, call_id)`, made if absent. The shard lock is held for a
    /// hash-map step only: calls of different shards never meet.
    pub fn lookup(&self, client: uuid::Uuid, call_id: u64) -> Lookup {
        let mut shard = self.shard(client, call_id).lock().unwrap();
        if let Some(rx) = shard.entries.get(&(client, call_id)) {
            return Lookup::Retry(rx.clone());
        }
        let (tx, rx) = tokio::sync::watch::channel(None);
        if shard.order.len() >= shard.bound
            && let Some(oldest) = shard.order.pop_front()
        {
            shard.entries.remove(&oldest);
        }
        shard.entries.insert((client, call_id), rx);
        shard.order.push_back((client, call_id));
        Lookup::First(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_finds_the_first_calls_reply_and_the_cache_stays_bounded() {
        let cache = RetryCache::new(32);
        let client = uuid::Uuid::from_u128(7);
        let Lookup::First(tx) = cache.lookup(client, 1) else {
            panic!("a first call")
        };
        let Lookup::Retry(rx) = cache.lookup(client, 1) else {
            panic!("a retry")
        };
        assert!(rx.borrow().is_none(), "no reply yet");
        tx.send_replace(Some(Default::default()));
        assert!(rx.borrow().is_some());
        // Another client's call 1 is not a retry.
        assert!(matches!(
            cache.lookup(uuid::Uuid::from_u128(8), 1),
            Lookup::First(_)
        ));
        for call in 2..10_000 {
            let _ = cache.lookup(client, call);
        }
        let held: usize = cache
            .shards
            .iter()
            .map(|s| s.lock().unwrap().entries.len())
            .sum();
        assert!(held <= 32 + RETRY_SHARDS, "{held} entries");
        assert!(
            matches!(cache.lookup(client, 1), Lookup::First(_)),
            "forgotten"
        );
    }

    #[tokio::test]
    async fn the_commit_index_follows_the_log_and_watches_wait_for_it() {
        let sm = ContainerStateMachine::new(uuid::Uuid::from_u128(1), "dn", "127.0.0.1:1".into());
        let (a, b) = (sm.append(), sm.append());
        assert_eq!((a, b), (1, 2));
        assert_eq!(sm.commit_index(), 0);
        // Committing b appends the metadata entry 3 and commits it; a is behind: no new entry.
        sm.committed(b);
        sm.committed(a);
        assert_eq!(sm.commit_index(), 3, "never goes back");
        assert_eq!(sm.wait_committed(2).await, 3);
        // A lone write: index N, answered with commit index N + 1; the next write gets N + 2.
        let c = sm.append();
        assert_eq!(c, 4);
        let waiting = sm.wait_committed(c);
        sm.committed(c);
        assert_eq!(waiting.await, 5);
        assert_eq!(sm.commit_infos()[0].commit_index, 5);
        assert_eq!(sm.append(), 6);
    }
}

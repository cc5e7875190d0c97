//! The DataNode's Ratis client port (`hdds.container.ratis.ipc.port`, 9858):
//! `RaftClientProtocolService.ordered` and `.unordered` as Ratis 3.2.1's `GrpcClientProtocolService`
//! serves them, with each Raft group's [`ContainerStateMachine`] deciding what a container command
//! gets, and the same [`Admission`] (pool, delays, faults, DataNode, metrics) as the gRPC port
//! doing the work.
//!
//! - `ordered`: requests are started in arrival order (the client's sliding window sends them
//!   in `seqNum` order) and run concurrently; replies leave in the same order. The first
//!   request fixes the stream's group: a request of another group ends the stream.
//! - `unordered`: replies leave as each request completes (watches, blocking calls).
//! - A failure Ratis raises instead of replying (an unknown group, a message that is not a
//!   container command) ends the stream with INTERNAL and the exception's Java class in the
//!   `exception-type` trailer, from which the Ratis client rebuilds the exception (`GrpcUtil`).
//! - A stream holds at most [`MAX_PENDING`] requests in progress; beyond that it reads no more
//!   until replies leave, so one client costs bounded memory.

use crate::datanode::ratis_metrics::Call;
use crate::datanode::state_machine::{ContainerStateMachine, Lookup, StateMachineError};
use crate::net::raft_groups::{Group, RaftGroups};
use crate::sim::admission::{Admission, Executor, Outcome};
use crate::sim::raft::{RaftModel, log_entry_bytes};
use crate::sim::rng::RngFactory;
use common::proto::Type;
use common::ratis::proto::common::raft_client_reply_proto::ExceptionDetails;
use common::ratis::proto::common::raft_client_request_proto::Type as RequestType;
use common::ratis::proto::common::{
    ClientMessageEntryProto, NotLeaderExceptionProto, RaftClientReplyProto, RaftClientRequestProto,
    RaftPeerProto, RaftRpcRequestProto, StateMachineExceptionProto,
};
use common::ratis::proto::grpc::raft_client_protocol_service_server::RaftClientProtocolService;
use futures_util::StreamExt as _;
use futures_util::stream::{FuturesOrdered, FuturesUnordered};
use prost::Message as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// Requests one stream may have in progress before it stops reading (Ratis bounds its pending
/// requests per server by `raft.server.write.element-limit`, 4096).
pub const MAX_PENDING: usize = 1024;

pub struct RatisService {
    inner: Arc<Inner>,
}

struct Inner {
    admission: Arc<Admission>,
    groups: Arc<RaftGroups>,
    /// The log's device and the chunk writers, one for the DataNode.
    raft: Arc<RaftModel>,
    /// `raft.grpc.message.size.max`: a request over it ends its stream.
    message_size_max: usize,
    rngs: RngFactory,
    /// The DataNode's id as Ratis names it in errors.
    peer: String,
    /// Streams opened so far, ordered and unordered: a stream's number, as
    /// `GrpcClientProtocolService`'s `streamCount` gives each request stream observer its id.
    streams: std::sync::atomic::AtomicU64,
}

impl RatisService {
    /// The port of a DataNode hosting `groups`.
    pub fn new(
        admission: Arc<Admission>,
        groups: Arc<RaftGroups>,
        raft: Arc<RaftModel>,
        message_size_max: usize,
        rngs: RngFactory,
        peer: String,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                admission,
                groups,
                raft,
                message_size_max,
                rngs,
                peer,
                streams: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }
}

type ReplyStream = ReceiverStream<Result<RaftClientReplyProto, Status>>;
type ReplyFuture = Pin<Box<dyn Future<Output = Result<RaftClientReplyProto, Status>> + Send>>;

#[tonic::async_trait]
impl RaftClientProtocolService for RatisService {
    type orderedStream = ReplyStream;
    type unorderedStream = ReplyStream;

    async fn ordered(
        &self,
        request: Request<Streaming<RaftClientRequestProto>>,
    ) -> Result<Response<ReplyStream>, Status> {
        Ok(Response::new(serve_stream(
            Arc::clone(&self.inner),
            request.into_inner(),
            Pending::Ordered(FuturesOrdered::new()),
        )))
    }

    async fn unordered(
        &self,
        request: Request<Streaming<RaftClientRequestProto>>,
    ) -> Result<Response<ReplyStream>, Status> {
        Ok(Response::new(serve_stream(
            Arc::clone(&self.inner),
            request.into_inner(),
            Pending::Unordered(FuturesUnordered::new()),
        )))
    }
}

/// Requests in progress on one stream, replied in arrival order or as they complete.
enum Pending {
    Ordered(FuturesOrdered<ReplyFuture>),
    Unordered(FuturesUnordered<ReplyFuture>),
}

impl Pending {
    fn len(&self) -> usize {
        match self {
            Pending::Ordered(f) => f.len(),
            Pending::Unordered(f) => f.len(),
        }
    }

    fn push(&mut self, f: ReplyFuture) {
        match self {
            Pending::Ordered(q) => q.push_back(f),
            Pending::Unordered(q) => q.push(f),
        }
    }

    async fn next(&mut self) -> Option<Result<RaftClientReplyProto, Status>> {
        match self {
            Pending::Ordered(f) => f.next().await,
            Pending::Unordered(f) => f.next().await,
        }
    }
}

fn serve_stream(
    inner: Arc<Inner>,
    mut inbound: Streaming<RaftClientRequestProto>,
    mut pending: Pending,
) -> ReplyStream {
    let (tx, rx) = mpsc::channel(16);
    let id = inner
        .streams
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tokio::spawn(async move {
        // Whether a reply went out (its headers with it): grpc-java then resets an over-limit
        // request's stream rather than sending a status.
        let mut answered = false;
        // The first request's group (a refcount on its bytes, not a copy).
        let mut stream_group: Option<bytes::Bytes> = None;
        let mut reading = true;
        loop {
            tokio::select! {
                biased;
                Some(reply) = pending.next(), if pending.len() > 0 => {
                    let failed = reply.is_err();
                    if tx.send(reply).await.is_err() || failed {
                        return;
                    }
                    answered = true;
                }
                next = inbound.message(), if reading && pending.len() < MAX_PENDING => match next {
                    Ok(Some(request)) => {
                        let group = request
                            .rpc_request
                            .as_ref()
                            .and_then(|r| r.raft_group_id.as_ref())
                            .map(|g| g.id.clone())
                            .unwrap_or_default();
                        let first = stream_group.get_or_insert_with(|| group.clone());
                        if *first != group {
                            let client = request
                                .rpc_request
                                .as_ref()
                                .map(|r| r.requestor_id.clone())
                                .unwrap_or_default();
                            let status = stream_group_mismatch(id, &group, &client, &first[..]);
                            let _ = tx.send(Err(status)).await;
                            return;
                        }
                        pending.push(Box::pin(handle(Arc::clone(&inner), request)));
                    }
                    Ok(None) => reading = false,
                    // A request that does not parse or is over the limit ends the stream (the
                    // requests before it are not answered: grpc-java closes the call).
                    Err(status) => {
                        let _ = tx.send(Err(inbound_error(status, &inner, answered))).await;
                        return;
                    }
                },
                else => return,
            }
        }
    });
    ReceiverStream::new(rx)
}

/// The status grpc-java's server (the same ratis-thirdparty grpc as the gRPC port) ends a call
/// with when a request does not parse (the release's parse-failure status) or exceeds the
/// message limit: RESOURCE_EXHAUSTED "gRPC message exceeds maximum size 34603008: N" while the
/// stream has sent nothing, else RST_STREAM(CANCEL), as on the gRPC port. An `ordered` stream
/// has always answered its first watch by then: a real DataNode resets it (Ozone 2.2.0).
fn inbound_error(status: Status, inner: &Inner, answered: bool) -> Status {
    if status.code() == tonic::Code::Internal && status.message().starts_with("failed to decode") {
        tracing::debug!(reason = status.message(), "Ratis request failed to parse");
        return inner.admission.version.parse_failure_status();
    }
    if status.code() == tonic::Code::OutOfRange
        && let Some(len) = crate::net::grpc_service::oversize_length(status.message())
    {
        let text = format!(
            "gRPC message exceeds maximum size {}: {len}",
            inner.message_size_max
        );
        if answered {
            return crate::net::reset::cancel_status(&text);
        }
        return Status::resource_exhausted(text);
    }
    status
}

/// `GroupMismatchException` for a request whose group is not hosted here:
/// "PEER: group-XXXXXXXXXXXX not found." (`RaftServerProxy.getImpl`).
pub(crate) fn group_mismatch(peer: &str, group: &[u8]) -> Status {
    exception_status(
        common::ratis::GROUP_MISMATCH_EXCEPTION,
        format!("{peer}: {} not found.", group_name(group)),
    )
}

/// `GroupMismatchException` for a request on an `ordered` stream whose first request named
/// another group, in `OrderedRequestStreamObserver`'s words: the stream's number, then "The
/// group (G) of client-XXXXXXXXXXXX does not match the group (F) of the
/// OrderedRequestStreamObserver".
fn stream_group_mismatch(stream: u64, group: &[u8], client: &[u8], first: &[u8]) -> Status {
    exception_status(
        common::ratis::GROUP_MISMATCH_EXCEPTION,
        format!(
            "{stream}: The group ({}) of {} does not match the group ({}) of the OrderedRequestStreamObserver",
            group_name(group),
            id_name("client", client),
            group_name(first)
        ),
    )
}

/// `group-` and the id's last 12 hex digits, upper case, as Ratis prints a `RaftGroupId`.
fn group_name(id: &[u8]) -> String {
    id_name("group", id)
}

/// `PREFIX-` and a Ratis id's last 12 hex digits, upper case (`RaftId.toString`: a
/// `RaftGroupId` is `group-…`, a `ClientId` `client-…`).
fn id_name(prefix: &str, id: &[u8]) -> String {
    match common::ratis::id_from_bytes(id) {
        Some(id) => {
            let hex = id.simple().to_string().to_uppercase();
            format!("{prefix}-{}", &hex[20..])
        }
        None => format!("{prefix}-{}", hex_of(id)),
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// INTERNAL with the exception's class in `exception-type`, as `GrpcUtil.wrapException` sends.
fn exception_status(class: &str, message: String) -> Status {
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert(
        common::ratis::EXCEPTION_TYPE_KEY,
        class.parse().expect("a class name is ASCII"),
    );
    Status::with_metadata(tonic::Code::Internal, message, metadata)
}

async fn handle(
    inner: Arc<Inner>,
    request: RaftClientRequestProto,
) -> Result<RaftClientReplyProto, Status> {
    let rpc = request.rpc_request.clone().unwrap_or_default();
    let group_bytes = rpc
        .raft_group_id
        .as_ref()
        .map(|g| g.id.clone())
        .unwrap_or_default();
    let Some(group) = common::ratis::id_from_bytes(&group_bytes).and_then(|g| inner.groups.get(&g))
    else {
        return Err(group_mismatch(&inner.peer, &group_bytes));
    };
    // A follower refuses what only the leader serves (`RaftServerImpl.checkLeaderState`); a
    // stale read any member serves.
    if let Some(leader) = group.sm.leader()
        && !matches!(request.r#type, Some(RequestType::StaleRead(_)))
    {
        return Ok(not_leader(&group.sm, &rpc, leader));
    }
    // Ratis times and counts a call from here, its group found (`submitClientRequestAsync`),
    // to its reply, whatever the reply.
    let started = Instant::now();
    let call = match &request.r#type {
        Some(RequestType::Write(_)) => Some(Call::Write),
        Some(RequestType::Read(_)) => Some(Call::Read),
        Some(RequestType::StaleRead(_)) => Some(Call::StaleRead),
        Some(RequestType::Watch(w)) => Some(Call::Watch(w.replication)),
        _ => None,
    };
    let mut thrown = false;
    let result = call_group(&inner, &group, &rpc, &request, &mut thrown).await;
    // A write that throws before its future exists (`writeAsync`: the command does not parse,
    // the log is closed) is neither timed nor counted: the timer's context never stops.
    if let Some(call) = call.filter(|_| !thrown) {
        let failed = match &result {
            Ok(reply) => reply.exception_details.is_some(),
            Err(_) => true,
        };
        group.sm.ratis_metrics.call(call, started.elapsed(), failed);
    }
    result
}

async fn call_group(
    inner: &Inner,
    group: &Group,
    rpc: &RaftRpcRequestProto,
    request: &RaftClientRequestProto,
    thrown: &mut bool,
) -> Result<RaftClientReplyProto, Status> {
    let sm = &group.sm;
    match request.r#type {
        Some(RequestType::Watch(watch)) => {
            let commit = sm.wait_committed(watch.index).await;
            let mut reply = success(sm, rpc, None);
            reply.log_index = commit;
            Ok(reply)
        }
        Some(RequestType::Write(_)) => {
            let client = common::ratis::id_from_bytes(&rpc.requestor_id).unwrap_or_default();
            let lookup = sm.retry_cache.lookup(client, rpc.call_id);
            sm.ratis_metrics
                .retry_cache_lookup(matches!(lookup, Lookup::Retry(_)));
            let tx = match lookup {
                Lookup::Retry(mut cached) => match cached.wait_for(Option::is_some).await {
                    Ok(reply) => return Ok(reply.clone().expect("waited for Some")),
                    // The first attempt's entry failed (no reply, or refused before the log):
                    // Ratis replaces a failed entry and processes the retry anew
                    // (`RetryCacheImpl.queryCache`, whose second look, `getIfPresent`, is a
                    // second hit).
                    Err(_) => {
                        sm.ratis_metrics.retry_cache_lookup(true);
                        sm.retry_cache.refresh(client, rpc.call_id)
                    }
                },
                Lookup::First(tx) => tx,
            };
            let reply = write(inner, group, rpc, request, thrown).await?;
            // A write refused by `startTransaction` (an exception, no log index) is a failed
            // entry (`failWithReply`); anything logged is cached with its reply.
            if reply.exception_details.is_none() || reply.log_index > 0 {
                tx.send_replace(Some(reply.clone()));
            }
            Ok(reply)
        }
        Some(RequestType::Read(_) | RequestType::StaleRead(_)) => {
            read(inner, sm, rpc, request).await
        }
        Some(
            RequestType::MessageStream(_) | RequestType::DataStream(_) | RequestType::Forward(_),
        )
        | None => Err(Status::unimplemented(
            "dn-sim's Ratis port serves write, read, staleRead and watch requests",
        )),
    }
}

/// The container command a request carries, or the stream error Ratis raises for one that is
/// not (`ContainerCommandRequestMessage.toProto` throws `InvalidProtocolBufferException`).
fn command(
    sm: &ContainerStateMachine,
    request: &RaftClientRequestProto,
) -> Result<common::proto::ContainerCommandRequestProto, Status> {
    let content = request
        .message
        .as_ref()
        .map(|m| m.content.clone())
        .unwrap_or_default();
    common::ratis::decode_message(&content, Some(sm.group())).map_err(|e| {
        exception_status(
            crate::datanode::state_machine::exception_class::INVALID_PROTOBUF,
            e.to_string(),
        )
    })
}

/// A Raft write: `startTransaction`'s checks, a log entry on the log's device, then the command
/// on its executor (see `sim::raft`): WriteChunk's data on its block's chunk writer while the
/// entry is logged, anything else applied through its container's task queue once logged.
async fn write(
    inner: &Inner,
    group: &Group,
    rpc: &RaftRpcRequestProto,
    request: &RaftClientRequestProto,
    thrown: &mut bool,
) -> Result<RaftClientReplyProto, Status> {
    use crate::datanode::csm_metrics::{Counter, Phase};
    let sm = &group.sm;
    let command = command(sm, request).inspect_err(|_| *thrown = true)?;
    let _pending = PendingWrite::new(&sm.ratis_metrics);
    let metrics = &sm.metrics;
    let started = Instant::now();
    metrics.pending_apply(1);
    if let Err(e) = sm.start_transaction(inner.admission.store(), &command, false) {
        // (A refused write leaves pending_apply_transactions up, as ContainerStateMachine does.)
        metrics.add(
            if e.class == crate::datanode::state_machine::exception_class::CONTAINER_NOT_OPEN {
                Counter::ContainerNotOpenVerifyFailures
            } else {
                Counter::StartTransactionVerifyFailures
            },
            1,
        );
        return Ok(failure(sm, rpc, e));
    }
    metrics.phase(Phase::StartTransactionCompleteNs, started.elapsed());
    // After a failed chunk write the group's log is closed: appending throws, and the
    // exception ends the client's stream.
    if let Err(e) = sm.log_open() {
        *thrown = true;
        return Err(exception_status(e.class, e.message));
    }
    let index = sm.append();
    // With a modelled log worker the entry is durable once a flush covers it.
    let mut flushed = match &group.executors.log {
        Some(log) => Some(log.append().await),
        None => None,
    };
    let committed = |flushed: Option<tokio::sync::oneshot::Receiver<()>>| async move {
        if let Some(flushed) = flushed {
            // An error is a worker that is gone: nothing left to wait for.
            let _ = flushed.await;
        }
        if sm.committed(index)
            && let Some(log) = &group.executors.log
        {
            log.append_unwaited();
        }
    };
    let container_id = command.container_id;
    let cmd = Type::try_from(command.cmd_type).ok();
    let chunk_len = command
        .write_chunk
        .as_ref()
        .and_then(|w| w.chunk_data.as_ref())
        .map_or(0, |c| c.len);
    let mut rng = inner.rngs.for_stream();
    let logged = if inner.raft.log.is_enabled() {
        // The entry holds the command without WriteChunk's data (the chunk file gets that).
        let data_len = command
            .write_chunk
            .as_ref()
            .and_then(|w| w.data.as_ref())
            .map_or(0, |d| d.len());
        let entry = log_entry_bytes(command.encoded_len() - data_len);
        started + inner.raft.log.reserve(entry, Instant::now(), &mut rng)
    } else {
        started
    };
    let context = crate::datanode::dispatcher::DispatcherContext {
        log_index: Some(index),
    };
    let write_chunk_block = (cmd == Some(Type::WriteChunk)).then(|| {
        command
            .write_chunk
            .as_ref()
            .map_or(0, |w| w.block_id.local_id)
    });
    if write_chunk_block.is_some() {
        // `writeStateMachineData` asks the state machine's health first: once an apply failed,
        // no container's chunk data is written, the entry waiting for it fails, and with it
        // the group's log. The call is never answered (the client's timeout decides).
        if sm.check_container_healthy(container_id, true).is_err() {
            metrics.add(Counter::WriteStateMachineOps, 1);
            metrics.add(Counter::WriteDataFails, 1);
            sm.fail_log(container_id);
            return std::future::pending().await;
        }
    } else {
        // Applied once the entry is in the log (and so, in a one-node group, committed).
        crate::datanode::timer::sleep_until(logged).await;
        committed(flushed.take()).await;
    }
    let apply_started = Instant::now();
    metrics.phase(
        Phase::UntilApplyTransactionNs,
        apply_started.duration_since(started),
    );
    metrics.add(Counter::ApplyTransactionOps, 1);
    if let Some(t) = cmd {
        metrics.queueing_delay(t, apply_started.duration_since(started));
    }
    if cmd == Some(Type::WriteChunk) {
        // The state machine data (the chunk) is written as the apply's chunk write here.
        metrics.add(Counter::WriteStateMachineOps, 1);
        metrics.phase(
            Phase::WriteStateMachineQueueingLatencyNs,
            apply_started.duration_since(started),
        );
    }
    let outcome = match write_chunk_block {
        Some(local_id) => {
            let writer = Executor::Pool(inner.raft.chunk_writer(local_id));
            let outcome = inner
                .admission
                .dispatch_in(command, &mut rng, false, context, writer)
                .await;
            // The entry commits once both the log and the chunk file have it.
            crate::datanode::timer::sleep_until(logged).await;
            committed(flushed.take()).await;
            outcome
        }
        None => match sm.check_container_healthy(container_id, false) {
            // A container whose earlier write failed: the command is refused, not dispatched
            // (`applyTransaction` answers CONTAINER_UNHEALTHY, then fails the entry).
            Err(refused) => Outcome::Answer(common::proto::ContainerCommandResponseProto {
                cmd_type: command.cmd_type,
                trace_id: command.trace_id.clone(),
                result: common::proto::Result::ContainerUnhealthy as i32,
                message: Some(refused.message),
                ..Default::default()
            }),
            Ok(()) => {
                let executor = Executor::Queued {
                    queue: group.executors.lane(container_id),
                    pool: &group.executors.op,
                };
                inner
                    .admission
                    .dispatch_in(command, &mut rng, false, context, executor)
                    .await
            }
        },
    };
    let applied = apply_started.elapsed();
    metrics.phase(Phase::ApplyTransactionNs, applied);
    metrics.pending_apply(-1);
    match outcome {
        Outcome::Answer(resp) => {
            // The applied entry's reply is found through the retry cache
            // (`replyPendingRequest`): a hit.
            sm.ratis_metrics.retry_cache_lookup(true);
            if let Some(t) = cmd {
                metrics.pipeline_latency(t, started.elapsed());
            }
            let ok = resp.result == common::proto::Result::Success as i32;
            if cmd == Some(Type::WriteChunk) {
                metrics.phase(Phase::WriteStateMachineDataNs, applied);
                if ok {
                    metrics.add(Counter::BytesWrittenCount, chunk_len);
                } else {
                    metrics.add(Counter::WriteDataFails, 1);
                }
            }
            match sm.applied(container_id, &resp) {
                Ok(()) => {
                    if matches!(cmd, Some(Type::WriteChunk | Type::PutSmallFile)) {
                        metrics.add(Counter::BytesCommittedCount, chunk_len);
                    }
                    let mut reply = success(sm, rpc, Some(resp.encode_to_vec().into()));
                    reply.log_index = index;
                    Ok(reply)
                }
                Err(e) => {
                    metrics.add(Counter::ApplyTransactionFails, 1);
                    // As the DataNode logs it (`ContainerStateMachine.applyTransaction`).
                    tracing::warn!(group = %sm.group(), index, command = ?cmd,
                        result = ?common::proto::Result::try_from(resp.result).ok(),
                        message = resp.message.as_deref().unwrap_or(""),
                        "applyTransaction failed");
                    // The entry was logged: its reply names its index.
                    let mut reply = failure(sm, rpc, e);
                    reply.log_index = index;
                    Ok(reply)
                }
            }
        }
        other => answer_of(other).await,
    }
}

async fn read(
    inner: &Inner,
    sm: &ContainerStateMachine,
    rpc: &RaftRpcRequestProto,
    request: &RaftClientRequestProto,
) -> Result<RaftClientReplyProto, Status> {
    let command = command(sm, request)?;
    sm.metrics.add(
        crate::datanode::csm_metrics::Counter::QueryStateMachineOps,
        1,
    );
    let mut rng = inner.rngs.for_stream();
    let context = crate::datanode::dispatcher::DispatcherContext::default();
    match inner
        .admission
        .dispatch_in(command, &mut rng, false, context, Executor::Inline)
        .await
    {
        Outcome::Answer(resp) => Ok(success(sm, rpc, Some(resp.encode_to_vec().into()))),
        other => answer_of(other).await,
    }
}

/// What an injected fault or a service limit does to a Ratis call: a status ends the stream,
/// a dropped request is never answered, a reset ends the stream as a cancelled call.
async fn answer_of(outcome: Outcome) -> Result<RaftClientReplyProto, Status> {
    match outcome {
        Outcome::Answer(_) => unreachable!("answers are handled by the caller"),
        Outcome::Fail(status) => Err(status),
        Outcome::Reset => Err(Status::cancelled("stream reset by dn-sim (--fault reset)")),
        // Never answered: the client's timeout decides, and the request holds its place in the
        // stream (behind it, an ordered stream's replies wait too, as behind a lost request).
        Outcome::Drop => std::future::pending().await,
    }
}

fn success(
    sm: &ContainerStateMachine,
    rpc: &RaftRpcRequestProto,
    content: Option<bytes::Bytes>,
) -> RaftClientReplyProto {
    RaftClientReplyProto {
        rpc_reply: Some(sm.reply_header(rpc, true)),
        message: content.map(|content| ClientMessageEntryProto { content }),
        commit_infos: sm.commit_infos(),
        ..Default::default()
    }
}

/// A write between arrival and reply (`ratis_server_numPendingRequestInQueue`).
struct PendingWrite<'a>(&'a crate::datanode::ratis_metrics::RatisMetrics);

impl<'a> PendingWrite<'a> {
    fn new(metrics: &'a crate::datanode::ratis_metrics::RatisMetrics) -> Self {
        metrics.pending_write(1);
        Self(metrics)
    }
}

impl Drop for PendingWrite<'_> {
    fn drop(&mut self) {
        self.0.pending_write(-1);
    }
}

/// A follower's reply: `NotLeaderException` with the leader and the group's members, from which
/// the Ratis client retries on the leader (`RaftServerImpl.generateNotLeaderException`).
fn not_leader(
    sm: &ContainerStateMachine,
    rpc: &RaftRpcRequestProto,
    leader: &RaftPeerProto,
) -> RaftClientReplyProto {
    RaftClientReplyProto {
        rpc_reply: Some(sm.reply_header(rpc, false)),
        exception_details: Some(ExceptionDetails::NotLeaderException(
            NotLeaderExceptionProto {
                suggested_leader: Some(leader.clone()),
                peers_in_conf: sm.peers(),
            },
        )),
        commit_infos: sm.commit_infos(),
        ..Default::default()
    }
}

/// A write's reply with its exception (Ratis counts it as a failed write).
fn failure(
    sm: &ContainerStateMachine,
    rpc: &RaftRpcRequestProto,
    e: StateMachineError,
) -> RaftClientReplyProto {
    RaftClientReplyProto {
        rpc_reply: Some(sm.reply_header(rpc, false)),
        exception_details: Some(ExceptionDetails::StateMachineException(
            StateMachineExceptionProto {
                exception_class_name: e.class.to_string(),
                error_msg: e.message,
                stacktrace: bytes::Bytes::from_static(&common::ratis::EMPTY_STACK_TRACE),
            },
        )),
        commit_infos: sm.commit_infos(),
        ..Default::default()
    }
}

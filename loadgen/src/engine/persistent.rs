//! Workers of `--stream-mode persistent`: one long bidi stream per worker with up to `--pipeline`
//! requests in flight. A DataNode answers a stream's requests in order, so answers are matched to
//! requests first-in, first-out.
//!
//! When the stream fails (a gRPC status, a reset, the front request's deadline), every request in
//! flight on it fails with that cause, and the worker opens a new stream (after a backoff for
//! transport errors).
//!
//! `--ratis` workers ([`ratis_worker`]) run the same loop on a Ratis `ordered` stream, as Ratis's
//! `OrderedAsync` does: a dummy `watch(0)` opens the sliding window and nothing else is sent
//! until it is answered; each request is the worker's container command in Ozone's Raft message
//! (`common::ratis::encode_message`, made once per worker), with the next `seqNum` and call id;
//! replies come in `seqNum` order, and one carrying an exception fails its request alone.

use super::WorkerContext;
use super::request::{Backoff, deadline_failure, ozone_failure};
use super::slots::Slot;
use crate::connection::{Client, RatisClient};
use crate::outcome::{Answer, ErrorKind, Failure};
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
use common::ratis::proto::common::raft_client_reply_proto::ExceptionDetails;
use common::ratis::proto::common::raft_client_request_proto::Type as RaftType;
use common::ratis::proto::common::{
    ClientMessageEntryProto, RaftClientReplyProto, RaftClientRequestProto, RaftGroupIdProto,
    RaftRpcRequestProto, ReadRequestTypeProto, ReplicationLevel, WatchRequestTypeProto,
    WriteRequestTypeProto,
};
use std::collections::VecDeque;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

struct InFlight {
    slot: Slot,
    sent: Instant,
}

struct Worker {
    ctx: WorkerContext,
    /// The request every unit sends (workloads of independent single RPCs only).
    request: ContainerCommandRequestProto,
    /// Judges answers.
    load: Box<dyn crate::workload::WorkerLoad>,
    inflight: VecDeque<InFlight>,
    /// No more requests will be taken.
    exhausted: bool,
    pipeline: usize,
}

/// How a stream ended.
enum StreamEnd {
    /// All requests sent and answered.
    Done,
    /// The stream failed; open another one.
    Failed { transport: bool },
}

/// What a worker's streams go to.
enum Transport {
    Xceiver(Client),
    Ratis(RatisClient, Box<RatisFraming>),
}

pub async fn worker(ctx: WorkerContext, client: Client, pipeline: usize) {
    run(ctx, pipeline, |_| Transport::Xceiver(client)).await;
}

/// A `--ratis` worker: its streams are `ordered` streams of the Raft group `group`.
pub async fn ratis_worker(
    ctx: WorkerContext,
    client: RatisClient,
    pipeline: usize,
    group: uuid::Uuid,
) {
    run(ctx, pipeline, |request| {
        Transport::Ratis(client, Box::new(RatisFraming::new(group, request)))
    })
    .await;
}

async fn run(
    ctx: WorkerContext,
    pipeline: usize,
    transport: impl FnOnce(&ContainerCommandRequestProto) -> Transport,
) {
    let Some(request) = ctx.workload.pipelined_request() else {
        tracing::error!("this workload cannot be pipelined on a persistent stream");
        return;
    };
    let load = ctx.workload.worker(ctx.idx);
    let mut transport = transport(&request);
    let mut w = Worker {
        request,
        load,
        ctx,
        inflight: VecDeque::with_capacity(pipeline),
        exhausted: false,
        pipeline,
    };
    let mut stop = w.ctx.shared.stop_signal();
    let mut backoff = Backoff::new();
    loop {
        let end = match &mut transport {
            Transport::Xceiver(client) => w.stream(client).await,
            Transport::Ratis(client, framing) => w.ratis_stream(client, framing).await,
        };
        match end {
            StreamEnd::Done => break,
            StreamEnd::Failed { transport } => {
                if w.exhausted {
                    break;
                }
                if transport {
                    let pause = backoff.failed();
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stop.wait_for(|s| *s) => {}
                    }
                } else {
                    backoff.succeeded();
                }
            }
        }
    }
}

impl Worker {
    fn send(&mut self, tx: &mpsc::Sender<ContainerCommandRequestProto>, slot: Slot) {
        let req = self.request.clone();
        self.inflight.push_back(InFlight {
            slot,
            sent: Instant::now(),
        });
        // The channel holds at most `pipeline` requests and at most `pipeline` are in flight, so
        // it is never full; if the stream is gone, the inbound side reports why.
        let _ = tx.try_send(req);
    }

    fn answer(&mut self, resp: ContainerCommandResponseProto) {
        let Some(front) = self.inflight.pop_front() else {
            return;
        };
        let answer = match ozone_failure(&resp) {
            Some(f) => Answer::Failure(f),
            None => match self.load.judge(&resp) {
                Ok(bytes) => Answer::Success { bytes },
                Err(f) => Answer::Failure(f),
            },
        };
        self.finish(front, answer);
    }

    fn finish(&mut self, f: InFlight, answer: Answer) {
        let failed = self
            .ctx
            .recorder
            .borrow_mut()
            .record(&f.slot, f.sent, Instant::now(), answer);
        if failed && !self.ctx.fail_at_end {
            self.ctx.shared.stop();
            self.exhausted = true;
        }
    }

    /// Fails every request in flight with `failure` (the stream they were on is gone).
    fn fail_all(&mut self, failure: Failure) -> StreamEnd {
        let transport = failure.kind == ErrorKind::Transport;
        while let Some(f) = self.inflight.pop_front() {
            let copy = Failure::new(failure.kind.clone(), failure.message.clone());
            self.finish(f, Answer::Failure(copy));
        }
        StreamEnd::Failed { transport }
    }

    async fn take(&mut self) -> Option<Slot> {
        let slot = self.ctx.shared.slots.next().await;
        self.exhausted = slot.is_none();
        slot
    }

    async fn stream(&mut self, client: &mut Client) -> StreamEnd {
        let timeout = self.ctx.timeout;
        // The first request goes into the stream before the call is awaited: a server may send
        // its response headers only with the first answer.
        let Some(first) = self.take().await else {
            return StreamEnd::Done;
        };
        let (tx, rx) = mpsc::channel(self.pipeline);
        self.send(&tx, first);
        // No deadline on the stream itself: it lives long; each request has its own.
        let call = tonic::Request::new(ReceiverStream::new(rx));
        let mut inbound: Streaming<ContainerCommandResponseProto> =
            match tokio::time::timeout(timeout, client.send(call)).await {
                Ok(Ok(resp)) => resp.into_inner(),
                Ok(Err(status)) => return self.fail_all(Failure::from_status(&status)),
                Err(_) => return self.fail_all(deadline_failure(timeout)),
            };
        loop {
            if self.exhausted && self.inflight.is_empty() {
                return StreamEnd::Done; // dropping `tx` half-closes the stream
            }
            let room = self.inflight.len() < self.pipeline && !self.exhausted;
            let front_deadline = self.inflight.front().map(|f| f.sent + timeout);
            tokio::select! {
                biased;
                msg = inbound.message(), if !self.inflight.is_empty() => match msg {
                    Ok(Some(resp)) => self.answer(resp),
                    Ok(None) => {
                        return self.fail_all(Failure::from_status(&Status::internal(
                            "the stream ended with requests unanswered",
                        )));
                    }
                    Err(status) => return self.fail_all(Failure::from_status(&status)),
                },
                _ = sleep_until(front_deadline), if front_deadline.is_some() => {
                    return self.fail_all(deadline_failure(timeout));
                }
                // Cancel-safe: a request is taken only when this branch completes.
                slot = self.ctx.shared.slots.next(), if room => match slot {
                    Some(slot) => self.send(&tx, slot),
                    None => self.exhausted = true,
                },
            }
        }
    }
}

impl Worker {
    /// One Ratis `ordered` stream (see the module notes). The first request is taken before the
    /// stream opens, so that a stream that cannot open fails a request (and is counted) rather
    /// than spinning.
    async fn ratis_stream(
        &mut self,
        client: &mut RatisClient,
        framing: &mut RatisFraming,
    ) -> StreamEnd {
        let timeout = self.ctx.timeout;
        let Some(first) = self.take().await else {
            return StreamEnd::Done;
        };
        self.inflight.push_back(InFlight {
            slot: first,
            sent: Instant::now(),
        });
        let (tx, rx) = mpsc::channel(self.pipeline + 1);
        let _ = tx.try_send(framing.first_watch());
        let call = tonic::Request::new(ReceiverStream::new(rx));
        let mut inbound: Streaming<RaftClientReplyProto> =
            match tokio::time::timeout(timeout, client.ordered(call)).await {
                Ok(Ok(resp)) => resp.into_inner(),
                Ok(Err(status)) => return self.fail_all(ratis_status_failure(&status)),
                Err(_) => return self.fail_all(deadline_failure(timeout)),
            };
        match tokio::time::timeout(timeout, inbound.message()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => {
                return self.fail_all(Failure::from_status(&Status::internal(
                    "the Ratis stream ended before its first watch was answered",
                )));
            }
            Ok(Err(status)) => return self.fail_all(ratis_status_failure(&status)),
            Err(_) => return self.fail_all(deadline_failure(timeout)),
        }
        // The window is open: the first request goes now, timed from now.
        if let Some(front) = self.inflight.front_mut() {
            front.sent = Instant::now();
        }
        let _ = tx.try_send(framing.next_request());
        loop {
            if self.exhausted && self.inflight.is_empty() {
                return StreamEnd::Done;
            }
            let room = self.inflight.len() < self.pipeline && !self.exhausted;
            let front_deadline = self.inflight.front().map(|f| f.sent + timeout);
            tokio::select! {
                biased;
                msg = inbound.message(), if !self.inflight.is_empty() => match msg {
                    Ok(Some(reply)) => match framing.unwrap(reply) {
                        Ok(resp) => self.answer(resp),
                        Err(failure) => {
                            if let Some(front) = self.inflight.pop_front() {
                                self.finish(front, Answer::Failure(failure));
                            }
                        }
                    },
                    Ok(None) => {
                        return self.fail_all(Failure::from_status(&Status::internal(
                            "the Ratis stream ended with requests unanswered",
                        )));
                    }
                    Err(status) => return self.fail_all(ratis_status_failure(&status)),
                },
                _ = sleep_until(front_deadline), if front_deadline.is_some() => {
                    return self.fail_all(deadline_failure(timeout));
                }
                slot = self.ctx.shared.slots.next(), if room => match slot {
                    Some(slot) => {
                        self.inflight.push_back(InFlight { slot, sent: Instant::now() });
                        // Room for `pipeline` requests and the watch: never full.
                        let _ = tx.try_send(framing.next_request());
                    }
                    None => self.exhausted = true,
                },
            }
        }
    }
}

/// How one worker's container command travels as Raft requests: Ozone's message made once, a
/// client id of the worker's own, call ids and sliding-window numbers.
pub struct RatisFraming {
    client_id: bytes::Bytes,
    /// The DataNode's UUID, the Raft peer the requests are for (`replyId`).
    reply_id: bytes::Bytes,
    group: RaftGroupIdProto,
    content: bytes::Bytes,
    read_only: bool,
    call_id: u64,
    seq: u64,
}

impl RatisFraming {
    pub fn new(group: uuid::Uuid, request: &ContainerCommandRequestProto) -> Self {
        Self {
            client_id: common::ratis::id_bytes(uuid::Uuid::new_v4()),
            reply_id: bytes::Bytes::copy_from_slice(request.datanode_uuid.as_bytes()),
            group: RaftGroupIdProto {
                id: common::ratis::id_bytes(group),
            },
            content: common::ratis::encode_message(request),
            read_only: common::ratis::is_read_only(request),
            call_id: 0,
            seq: 0,
        }
    }

    fn rpc(&mut self, first: bool) -> RaftRpcRequestProto {
        self.rpc_for(first, None)
    }

    /// The header of the window's next request: call `retry_of` again (a retry keeps its call
    /// id, so the server's retry cache knows it), or a new call.
    fn rpc_for(&mut self, first: bool, retry_of: Option<u64>) -> RaftRpcRequestProto {
        // A new stream is a new sliding window; call ids go on rising (retries reuse theirs).
        self.seq = if first { 1 } else { self.seq + 1 };
        let call_id = retry_of.unwrap_or_else(|| {
            self.call_id += 1;
            self.call_id
        });
        common::ratis::ordered_rpc(
            self.client_id.clone(),
            self.reply_id.clone(),
            self.group.clone(),
            call_id,
            self.seq,
            first,
        )
    }

    /// A watch for `index` to be committed at `ALL_COMMITTED`, the level Ozone's
    /// `XceiverClientRatis.watchForCommit` asks first (`hdds.ratis.client.request.watch.type`, Ozone 2.2.0).
    pub fn watch(&mut self, index: u64) -> RaftClientRequestProto {
        RaftClientRequestProto {
            rpc_request: Some(self.rpc(false)),
            message: Some(ClientMessageEntryProto::default()),
            r#type: Some(RaftType::Watch(WatchRequestTypeProto {
                index,
                replication: ReplicationLevel::AllCommitted as i32,
            })),
        }
    }

    /// The dummy `watch(0)` that opens an ordered stream.
    pub fn first_watch(&mut self) -> RaftClientRequestProto {
        RaftClientRequestProto {
            rpc_request: Some(self.rpc(true)),
            message: Some(ClientMessageEntryProto::default()),
            r#type: Some(RaftType::Watch(WatchRequestTypeProto {
                index: 0,
                replication: ReplicationLevel::Majority as i32,
            })),
        }
    }

    /// The worker's command as the next request of the window: a Raft read when it is
    /// read-only (`HddsUtils.isReadOnly`), else a write.
    pub fn next_request(&mut self) -> RaftClientRequestProto {
        self.request_with(self.content.clone(), self.read_only, None)
    }

    /// Another command (a write unit's WriteChunk, PutBlock) as the next request of the window.
    /// Its call id is `retry_of` when it is a retry, else the next one.
    pub fn next_request_for(
        &mut self,
        request: &ContainerCommandRequestProto,
        retry_of: Option<u64>,
    ) -> RaftClientRequestProto {
        self.request_with(
            common::ratis::encode_message(request),
            common::ratis::is_read_only(request),
            retry_of,
        )
    }

    fn request_with(
        &mut self,
        content: bytes::Bytes,
        read_only: bool,
        retry_of: Option<u64>,
    ) -> RaftClientRequestProto {
        let r#type = if read_only {
            RaftType::Read(ReadRequestTypeProto::default())
        } else {
            RaftType::Write(WriteRequestTypeProto {
                replication: ReplicationLevel::Majority as i32,
            })
        };
        RaftClientRequestProto {
            rpc_request: Some(self.rpc_for(false, retry_of)),
            message: Some(ClientMessageEntryProto { content }),
            r#type: Some(r#type),
        }
    }

    /// The container command's answer in a Raft reply, or the failure the reply stands for.
    pub fn unwrap(
        &self,
        reply: RaftClientReplyProto,
    ) -> Result<ContainerCommandResponseProto, Failure> {
        use prost::Message as _;
        if reply.rpc_reply.as_ref().is_some_and(|r| r.success) {
            let content = reply.message.map(|m| m.content).unwrap_or_default();
            return ContainerCommandResponseProto::decode(content).map_err(|e| {
                Failure::new(
                    ErrorKind::Protocol,
                    format!("a Raft reply's message is no ContainerCommandResponseProto: {e}"),
                )
            });
        }
        Err(match reply.exception_details {
            Some(ExceptionDetails::StateMachineException(e)) => Failure::new(
                ErrorKind::Ratis(simple_name(&e.exception_class_name).to_string()),
                e.error_msg,
            ),
            Some(ExceptionDetails::AlreadyClosedException(e)) => Failure::new(
                ErrorKind::Ratis(simple_name(&e.exception_class_name).to_string()),
                e.error_msg,
            ),
            Some(ExceptionDetails::NotLeaderException(_)) => Failure::new(
                ErrorKind::Ratis("NotLeaderException".into()),
                "the peer is not the group's leader",
            ),
            Some(other) => {
                let name = format!("{other:?}");
                let name = name
                    .split('(')
                    .next()
                    .unwrap_or("RaftException")
                    .to_string();
                Failure::new(ErrorKind::Ratis(name), "a Raft reply with an exception")
            }
            None => Failure::new(
                ErrorKind::Protocol,
                "a failed Raft reply without an exception",
            ),
        })
    }
}

/// `org.apache.ratis.protocol.exceptions.GroupMismatchException` → `GroupMismatchException`.
pub(super) fn simple_name(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

/// A status that ended a Ratis stream: the Ratis exception its `exception-type` names, if any.
pub(super) fn ratis_status_failure(status: &Status) -> Failure {
    match status
        .metadata()
        .get(common::ratis::EXCEPTION_TYPE_KEY)
        .and_then(|v| v.to_str().ok())
    {
        Some(class) => Failure::new(
            ErrorKind::Ratis(simple_name(class).to_string()),
            status.message().to_string(),
        ),
        None => Failure::from_status(status),
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

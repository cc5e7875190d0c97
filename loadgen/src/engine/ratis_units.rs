//! Workers of `--ratis` for workloads whose unit is several RPCs (write: WriteChunks, then a
//! PutBlock): each worker keeps one `ordered` stream of the Raft group, as Ozone's
//! `XceiverClientRatis` keeps one per client and DataNode, and sends its units' RPCs on it one at
//! a time, each answered before the next goes (as the per-request workers do on the gRPC port).
//!
//! The stream opens with Ratis's dummy `watch(0)`. A stream that fails (a status, its end, an
//! RPC's deadline) fails that RPC and its unit; the next RPC opens a new stream, after a backoff
//! when the failure was the transport's. A reply with an exception fails its RPC alone. With
//! `--retry`/`--client-throttle` an RPC's attempts run under the retry policy and the throttle,
//! and a retry goes on a new stream with the call id of the attempt it retries, as Ratis's
//! client retries, so the DataNode's retry cache answers what it already applied. Single-RPC
//! workloads (echo) come here too when they may be retried.
//!
//! A PutBlock whose reply's commit infos do not cover its log index is watched
//! (`ALL_COMMITTED`) before its unit ends, as `XceiverClientRatis.watchForCommit` does.
//!
//! Each RPC's container command is decoded from the workload's gRPC frame and re-encoded as
//! Ozone's Raft message (`common::ratis::encode_message`): the chunk data is copied into it, where
//! the gRPC path sends the workload's buffers as they are.

use super::WorkerContext;
use super::persistent::{RatisFraming, ratis_status_failure};
use super::request::{Backoff, deadline_failure, ozone_failure};
use super::resilience::Attempts;
use crate::connection::RatisClient;
use crate::outcome::{Answer, ErrorKind, Failure, RequestCounts};
use crate::workload::{Rpc, WorkerLoad};
use bytes::{BufMut as _, BytesMut};
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto, Type};
use common::ratis::proto::common::{RaftClientReplyProto, RaftClientRequestProto};
use prost::Message as _;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// The length of a gRPC message's prefix (a compression flag and a 4-byte length).
const GRPC_PREFIX: usize = 5;

/// One worker's `ordered` stream, opened on first use and again after a failure.
struct RaftStream {
    client: RatisClient,
    group: uuid::Uuid,
    framing: Option<RatisFraming>,
    open: Option<(
        mpsc::Sender<RaftClientRequestProto>,
        Streaming<RaftClientReplyProto>,
    )>,
    /// Commit watches sent (the replies' commit infos lagged a PutBlock's entry).
    watches: u64,
}

impl RaftStream {
    /// Sends `request` and waits for its answer, under `timeout` (the stream's opening, its
    /// first watch included, and a commit watch count against the RPC that needed them).
    /// `retry_of` is the call id of the attempt this one retries. Returns the answer and the
    /// call id it went as.
    async fn call(
        &mut self,
        request: &ContainerCommandRequestProto,
        timeout: Duration,
        retry_of: Option<u64>,
    ) -> (Result<ContainerCommandResponseProto, Failure>, Option<u64>) {
        let mut call_id = retry_of;
        match tokio::time::timeout(timeout, self.call_inner(request, &mut call_id)).await {
            Ok(result) => (result, call_id),
            Err(_) => {
                self.open = None;
                (Err(deadline_failure(timeout)), call_id)
            }
        }
    }

    async fn call_inner(
        &mut self,
        request: &ContainerCommandRequestProto,
        call_id: &mut Option<u64>,
    ) -> Result<ContainerCommandResponseProto, Failure> {
        let group = self.group;
        let framing = self
            .framing
            .get_or_insert_with(|| RatisFraming::new(group, request));
        if self.open.is_none() {
            let (tx, rx) = mpsc::channel(2);
            let _ = tx.try_send(framing.first_watch());
            let mut inbound = self
                .client
                .ordered(tonic::Request::new(ReceiverStream::new(rx)))
                .await
                .map_err(|status| ratis_status_failure(&status))?
                .into_inner();
            match inbound.message().await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(Failure::from_status(&Status::internal(
                        "the Ratis stream ended before its first watch was answered",
                    )));
                }
                Err(status) => return Err(ratis_status_failure(&status)),
            }
            self.open = Some((tx, inbound));
        }
        let sent = framing.next_request_for(request, *call_id);
        *call_id = sent.rpc_request.as_ref().map(|r| r.call_id);
        let reply = self.exchange(sent).await?;
        let framing = self.framing.as_mut().expect("made above");
        let (log_index, committed) = (reply.log_index, min_commit_index(&reply));
        let response = framing.unwrap(reply)?;
        // A PutBlock ends a block: Ozone's `RatisBlockOutputStream` then waits for its entry
        // to be committed (`watchForCommit`), which asks the DataNode only when the replies'
        // commit infos do not yet cover it.
        if request.cmd_type == Type::PutBlock as i32 && log_index > 0 && committed < log_index {
            let watch = framing.watch(log_index);
            let reply = self.exchange(watch).await?;
            let framing = self.framing.as_mut().expect("made above");
            if !reply.rpc_reply.as_ref().is_some_and(|r| r.success) {
                return Err(framing.unwrap(reply).expect_err("a failed reply"));
            }
            self.watches += 1;
        }
        Ok(response)
    }

    /// Sends one request on the open stream and takes its reply.
    async fn exchange(
        &mut self,
        request: RaftClientRequestProto,
    ) -> Result<RaftClientReplyProto, Failure> {
        let (tx, inbound) = self.open.as_mut().expect("an open stream");
        if tx.send(request).await.is_err() {
            self.open = None;
            return Err(Failure::from_status(&Status::unavailable(
                "the Ratis stream is closed",
            )));
        }
        match inbound.message().await {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => {
                self.open = None;
                Err(Failure::from_status(&Status::internal(
                    "the Ratis stream ended with a request unanswered",
                )))
            }
            Err(status) => {
                self.open = None;
                Err(ratis_status_failure(&status))
            }
        }
    }
}

/// The lowest commit index a reply reports of the group's peers (Ozone's
/// `getReplicatedMinCommitIndex`), 0 when it reports none.
fn min_commit_index(reply: &RaftClientReplyProto) -> u64 {
    reply
        .commit_infos
        .iter()
        .map(|c| c.commit_index)
        .min()
        .unwrap_or(0)
}

/// The container command a workload's gRPC frame carries.
fn command(rpc: &Rpc) -> Result<ContainerCommandRequestProto, Failure> {
    let parts = rpc.frame.parts();
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut whole = BytesMut::with_capacity(len);
    for part in parts {
        whole.put_slice(part);
    }
    let message = whole.freeze().split_off(GRPC_PREFIX.min(len));
    ContainerCommandRequestProto::decode(message).map_err(|e| {
        Failure::new(
            ErrorKind::Protocol,
            format!("a workload request that does not decode: {e}"),
        )
    })
}

pub async fn worker(mut ctx: WorkerContext, client: RatisClient, group: uuid::Uuid) {
    let mut stream = RaftStream {
        client,
        group,
        framing: None,
        open: None,
        watches: 0,
    };
    let single = ctx.workload.single_rpc();
    let mut backoff = Backoff::new();
    let mut stop = ctx.shared.stop_signal();
    let mut load = ctx.workload.worker(ctx.idx);
    let mut measured = false;
    while let Some(slot) = ctx.shared.slots.next().await {
        if !load.begin() {
            break;
        }
        measured = slot.measured;
        let sent = Instant::now();
        let (answer, counts) = unit(&mut ctx, &mut stream, &mut *load, measured, single).await;
        let done = Instant::now();
        let transport = matches!(&answer, Answer::Failure(f) if f.kind == ErrorKind::Transport);
        let ok = matches!(answer, Answer::Success { .. });
        let unit_bytes = if ok { load.unit_bytes() } else { 0 };
        let failed = ctx.recorder.borrow_mut().record_unit(
            &slot,
            sent,
            done,
            answer,
            counts.as_ref(),
            unit_bytes,
        );
        if failed && !ctx.fail_at_end {
            ctx.shared.stop();
        }
        if transport {
            let pause = backoff.failed();
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        } else if ok {
            backoff.succeeded();
        }
    }
    if load.close() {
        // The closing RPCs (the last chunk and PutBlock) are no unit of their own.
        if let (Answer::Failure(f), _) =
            unit(&mut ctx, &mut stream, &mut *load, measured, single).await
        {
            ctx.recorder.borrow_mut().record_close_failure(measured, f);
        }
    }
    tracing::debug!(
        worker = ctx.idx,
        watches = stream.watches,
        "commit watches sent after PutBlocks"
    );
}

/// The current unit's RPCs in order until one fails; each measured RPC of a multi-RPC unit is
/// recorded under its kind. A single-RPC unit's attempts' counts are the unit's (returned).
async fn unit(
    ctx: &mut WorkerContext,
    stream: &mut RaftStream,
    load: &mut dyn WorkerLoad,
    measured: bool,
    single: bool,
) -> (Answer, Option<RequestCounts>) {
    let mut received = 0;
    while let Some(rpc) = load.next() {
        let started = Instant::now();
        let (answer, counts) = match command(&rpc) {
            Err(f) => (Answer::Failure(f), None),
            Ok(request) => rpc_attempts(ctx, stream, load, &rpc, &request).await,
        };
        if single {
            if !matches!(answer, Answer::Success { .. }) {
                load.failed();
            }
            return (answer, counts);
        }
        if measured {
            let ok = match &answer {
                Answer::Success { bytes } => Some(*bytes),
                _ => None,
            };
            ctx.recorder
                .borrow_mut()
                .record_rpc(&rpc, started.elapsed(), ok, counts.as_ref());
        }
        match answer {
            Answer::Success { bytes } => received += bytes,
            Answer::Failure(f) => {
                load.failed();
                return (Answer::Failure(f), None);
            }
            Answer::LocallyRejected => {
                load.failed();
                let f = Failure::new(
                    ErrorKind::LocallyRejected,
                    format!("the client throttle rejected a {}", rpc.kind.name()),
                );
                return (Answer::Failure(f), None);
            }
        }
    }
    (Answer::Success { bytes: received }, None)
}

/// One RPC: its attempts under the retry policy and the client throttle (with `--retry`,
/// `--client-throttle`), each retry on a new stream with the call id of the attempt it retries,
/// as Ratis's client retries (the DataNode's retry cache answers a call it already applied);
/// then the workload's judgement of the answer.
async fn rpc_attempts(
    ctx: &mut WorkerContext,
    stream: &mut RaftStream,
    load: &mut dyn WorkerLoad,
    rpc: &Rpc,
    request: &ContainerCommandRequestProto,
) -> (Answer, Option<RequestCounts>) {
    let timeout = ctx.timeout;
    let (last, counts) = match ctx.resilience.as_mut() {
        None => (Some(stream.call(request, timeout, None).await.0), None),
        Some(res) => {
            let mut attempts = Attempts::new(res, rpc.throttle_op, rpc.throttle_bytes);
            let mut call_id = None;
            let last = loop {
                let answer = if attempts.admit().await {
                    let (answer, sent_as) = stream.call(request, timeout, call_id).await;
                    call_id = call_id.or(sent_as);
                    Some(answer)
                } else {
                    None
                };
                if !attempts
                    .again(answer.as_ref().map(|a| a.as_ref().err()))
                    .await
                {
                    break answer;
                }
            };
            (last, Some(attempts.counts()))
        }
    };
    let answer = match last {
        None => Answer::LocallyRejected,
        Some(Err(f)) => Answer::Failure(f),
        Some(Ok(resp)) => match ozone_failure(&resp) {
            Some(f) => Answer::Failure(f),
            None => match load.judge(&resp) {
                Ok(bytes) => Answer::Success { bytes },
                Err(f) => Answer::Failure(f),
            },
        },
    };
    (answer, counts)
}

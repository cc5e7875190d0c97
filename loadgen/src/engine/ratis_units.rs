//! Workers of `--ratis` for workloads whose unit is several RPCs (write: WriteChunks, then a
//! PutBlock): each worker keeps one `ordered` stream of the Raft group, as Ozone's
//! `XceiverClientRatis` keeps one per client and DataNode, and sends its units' RPCs on it one at
//! a time, each answered before the next goes (as the per-request workers do on the gRPC port).
//!
//! The stream opens with Ratis's dummy `watch(0)`. A stream that fails (a status, its end, an
//! RPC's deadline) fails that RPC and its unit; the next RPC opens a new stream, after a backoff
//! when the failure was the transport's. A reply with an exception fails its RPC alone.
//!
//! Each RPC's container command is decoded from the workload's gRPC frame and re-encoded as
//! Ozone's Raft message (`common::ratis::encode_message`): the chunk data is copied into it, where
//! the gRPC path sends the workload's buffers as they are.

use super::WorkerContext;
use super::persistent::{RatisFraming, ratis_status_failure};
use super::request::{Backoff, deadline_failure, ozone_failure};
use crate::connection::RatisClient;
use crate::outcome::{Answer, ErrorKind, Failure};
use crate::workload::{Rpc, WorkerLoad};
use bytes::{BufMut as _, BytesMut};
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
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
}

impl RaftStream {
    /// Sends `request` and waits for its answer, under `timeout` (the stream's opening, its
    /// first watch included, counts against the RPC that needed it).
    async fn call(
        &mut self,
        request: &ContainerCommandRequestProto,
        timeout: Duration,
    ) -> Result<ContainerCommandResponseProto, Failure> {
        match tokio::time::timeout(timeout, self.call_inner(request)).await {
            Ok(result) => result,
            Err(_) => {
                self.open = None;
                Err(deadline_failure(timeout))
            }
        }
    }

    async fn call_inner(
        &mut self,
        request: &ContainerCommandRequestProto,
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
        let (tx, inbound) = self.open.as_mut().expect("opened above");
        if tx.send(framing.next_request_for(request)).await.is_err() {
            self.open = None;
            return Err(Failure::from_status(&Status::unavailable(
                "the Ratis stream is closed",
            )));
        }
        match inbound.message().await {
            Ok(Some(reply)) => framing.unwrap(reply),
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
    };
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
        let answer = unit(&mut ctx, &mut stream, &mut *load, measured).await;
        let done = Instant::now();
        let transport = matches!(&answer, Answer::Failure(f) if f.kind == ErrorKind::Transport);
        let ok = matches!(answer, Answer::Success { .. });
        let unit_bytes = if ok { load.unit_bytes() } else { 0 };
        let failed = ctx
            .recorder
            .borrow_mut()
            .record_unit(&slot, sent, done, answer, None, unit_bytes);
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
        if let Answer::Failure(f) = unit(&mut ctx, &mut stream, &mut *load, measured).await {
            ctx.recorder.borrow_mut().record_close_failure(measured, f);
        }
    }
}

/// The current unit's RPCs in order until one fails; each measured RPC is recorded under its
/// kind.
async fn unit(
    ctx: &mut WorkerContext,
    stream: &mut RaftStream,
    load: &mut dyn WorkerLoad,
    measured: bool,
) -> Answer {
    let mut received = 0;
    while let Some(rpc) = load.next() {
        let started = Instant::now();
        let answer = match command(&rpc) {
            Err(f) => Answer::Failure(f),
            Ok(request) => match stream.call(&request, ctx.timeout).await {
                Err(f) => Answer::Failure(f),
                Ok(resp) => match ozone_failure(&resp) {
                    Some(f) => Answer::Failure(f),
                    None => match load.judge(&resp) {
                        Ok(bytes) => Answer::Success { bytes },
                        Err(f) => Answer::Failure(f),
                    },
                },
            },
        };
        if measured {
            let ok = match &answer {
                Answer::Success { bytes } => Some(*bytes),
                _ => None,
            };
            ctx.recorder
                .borrow_mut()
                .record_rpc(&rpc, started.elapsed(), ok, None);
        }
        match answer {
            Answer::Success { bytes } => received += bytes,
            other => {
                load.failed();
                return other;
            }
        }
    }
    Answer::Success { bytes: received }
}

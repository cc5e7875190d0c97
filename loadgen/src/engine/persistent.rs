//! Workers of `--stream-mode persistent`: one long bidi stream per worker with up to `--pipeline`
//! requests in flight. A DataNode answers a stream's requests in order, so answers are matched to
//! requests first-in, first-out.
//!
//! When the stream fails (a gRPC status, a reset, the front request's deadline), every request in
//! flight on it fails with that cause, and the worker opens a new stream (after a backoff for
//! transport errors).

use super::WorkerContext;
use super::request::{Backoff, deadline_failure, ozone_failure};
use super::slots::Slot;
use crate::connection::Client;
use crate::outcome::{Answer, ErrorKind, Failure};
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
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

pub async fn worker(ctx: WorkerContext, mut client: Client, pipeline: usize) {
    let Some(request) = ctx.workload.pipelined_request() else {
        tracing::error!("this workload cannot be pipelined on a persistent stream");
        return;
    };
    let load = ctx.workload.worker(ctx.idx);
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
        match w.stream(&mut client).await {
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

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

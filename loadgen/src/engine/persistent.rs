//! Workers of `--stream-mode persistent`: one long bidi stream per worker with up to `--pipeline`
//! requests in flight. A DataNode answers a stream's requests in order, so answers are matched to
//! requests first-in, first-out.
//!
//! When the stream fails (a gRPC status, a reset, the front request's deadline), every request in
//! flight on it fails with that cause, and the worker opens a new stream (after a backoff for
//! transport errors).

use super::WorkerContext;
use super::recorder::Recorder;
use super::request::{Backoff, deadline_failure, judge};
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
    recorder: Recorder,
    inflight: VecDeque<InFlight>,
    /// A claimed request waiting for its intended time or a free pipeline place.
    pending: Option<Slot>,
    /// No more requests will be claimed.
    exhausted: bool,
    pipeline: usize,
    seq: u64,
}

/// How a stream ended.
enum StreamEnd {
    /// All requests sent and answered.
    Done,
    /// The stream failed; open another one.
    Failed { transport: bool },
}

pub async fn worker(ctx: WorkerContext, mut client: Client, pipeline: usize) {
    let recorder = Recorder::new(
        ctx.shared.clone(),
        ctx.flushes.clone(),
        ctx.workload.request_bytes(),
    );
    let mut w = Worker {
        ctx,
        recorder,
        inflight: VecDeque::with_capacity(pipeline),
        pending: None,
        exhausted: false,
        pipeline,
        seq: 0,
    };
    let mut stop = w.ctx.shared.stop_signal();
    let mut backoff = Backoff::new();
    loop {
        match w.stream(&mut client, &mut stop).await {
            StreamEnd::Done => break,
            StreamEnd::Failed { transport } => {
                if w.exhausted && w.pending.is_none() {
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
    /// Claims the next request into `pending` unless one is waiting or the run is over.
    fn refill(&mut self) {
        if self.pending.is_none() && !self.exhausted {
            self.pending = self.ctx.shared.slots.claim();
            self.exhausted = self.pending.is_none();
        }
    }

    fn next_request(&mut self) -> ContainerCommandRequestProto {
        self.seq += 1;
        self.ctx.workload.request(self.ctx.idx, self.seq - 1)
    }

    fn send(&mut self, tx: &mpsc::Sender<ContainerCommandRequestProto>, slot: Slot) {
        let req = self.next_request();
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
        let answer = judge(&*self.ctx.workload, resp);
        self.finish(front, answer);
    }

    fn finish(&mut self, f: InFlight, answer: Answer) {
        if self
            .recorder
            .record(&f.slot, f.sent, Instant::now(), answer)
            && !self.ctx.fail_at_end
        {
            self.ctx.shared.stop();
            self.exhausted = true;
            self.pending = None;
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

    async fn stream(
        &mut self,
        client: &mut Client,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> StreamEnd {
        let timeout = self.ctx.timeout;
        // The first request goes into the stream before the call is awaited: a server may send
        // its response headers only with the first answer.
        self.refill();
        let Some(first) = self.pending.take() else {
            return StreamEnd::Done;
        };
        if let Some(t) = first.intended
            && !super::wait_until(t, stop).await
        {
            self.exhausted = true;
            return StreamEnd::Done;
        }
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
            let room = self.inflight.len() < self.pipeline;
            if room {
                self.refill();
            }
            if self.exhausted && self.pending.is_none() && self.inflight.is_empty() {
                return StreamEnd::Done; // dropping `tx` half-closes the stream
            }
            // A request that is due and has room goes out at once.
            if room
                && let Some(slot) = self.pending
                && slot.intended.is_none_or(|t| t <= Instant::now())
            {
                self.pending = None;
                self.send(&tx, slot);
                continue;
            }
            let front_deadline = self.inflight.front().map(|f| f.sent + timeout);
            let due = self.pending.and_then(|s| s.intended).filter(|_| room);
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
                _ = sleep_until(due), if due.is_some() => {}
                _ = stop.wait_for(|s| *s), if !self.exhausted => {
                    self.exhausted = true;
                    self.pending = None;
                }
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

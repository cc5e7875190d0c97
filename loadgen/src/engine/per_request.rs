//! Workers of `--stream-mode per-request` (the default): one RPC outstanding each, a new bidi
//! stream per RPC, as Ozone's Java client (`XceiverClientGrpc.sendCommandAsync`).
//!
//! Each slot is one unit of the workload's state machine ([`crate::workload::WorkerLoad`]): the
//! worker sends the unit's RPCs in the order the state machine yields them, each under the
//! deadline, the retry policy and the client throttle, hands every answer back to be judged, and
//! records the unit (and, for multi-RPC units, each RPC under its kind). When the run ends the
//! state machine's closing RPCs (an output stream's last chunk and PutBlock) are still sent, so
//! everything written is committed, after Ctrl-C too.

use super::WorkerContext;
use super::request::{self, Backoff, Deadline};
use crate::connection::unary::{UnaryClient, UnaryConnection};
use crate::outcome::RequestCounts;
use crate::outcome::{Answer, ErrorKind, Failure};
use crate::workload::{Rpc, WorkerLoad};
use std::rc::Rc;
use std::time::Instant;

struct Sender {
    client: UnaryClient,
    deadline: Deadline,
    backoff: Backoff,
    /// Whether the unit is exactly one RPC (its statistics are the unit's).
    single: bool,
}

pub async fn worker(mut ctx: WorkerContext, conn: Rc<UnaryConnection>) {
    let mut s = Sender {
        client: conn.client().await,
        deadline: Deadline::new(ctx.timeout),
        backoff: Backoff::new(),
        single: ctx.workload.single_rpc(),
    };
    let mut stop = ctx.shared.stop_signal();
    let mut load = ctx.workload.worker(ctx.idx);
    let mut measured = false;
    while let Some(slot) = ctx.shared.slots.next().await {
        if !load.begin() {
            break;
        }
        measured = slot.measured;
        let sent = Instant::now();
        let (answer, counts) = s.unit(&mut ctx, &mut *load, measured).await;
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
            let pause = s.backoff.failed();
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        } else if ok {
            s.backoff.succeeded();
        }
    }
    if load.close() {
        // The closing RPCs are no unit of their own: a failure among them counts as one.
        let (answer, _) = s.unit(&mut ctx, &mut *load, measured).await;
        if let Answer::Failure(f) = answer {
            ctx.recorder.borrow_mut().record_close_failure(measured, f);
        }
    }
}

impl Sender {
    /// Sends the current unit's RPCs in order until one fails; returns the unit's answer and,
    /// for a single-RPC unit, its attempts' counts (multi-RPC units record them per RPC).
    async fn unit(
        &mut self,
        ctx: &mut WorkerContext,
        load: &mut dyn WorkerLoad,
        measured: bool,
    ) -> (Answer, Option<RequestCounts>) {
        let mut received = 0;
        while let Some(rpc) = load.next() {
            if self.single {
                // The unit is the RPC: its timing and counts are the unit's.
                let (answer, counts) = self.rpc(ctx, load, &rpc).await;
                if !matches!(answer, Answer::Success { .. }) {
                    load.failed();
                }
                return (answer, counts);
            }
            let started = Instant::now();
            let (answer, counts) = self.rpc(ctx, load, &rpc).await;
            if measured {
                let ok = match &answer {
                    Answer::Success { bytes } => Some(*bytes),
                    _ => None,
                };
                let mut rec = ctx.recorder.borrow_mut();
                rec.record_rpc(&rpc, started.elapsed(), ok, counts.as_ref());
            }
            match answer {
                Answer::Success { bytes } => received += bytes,
                Answer::Failure(f) => {
                    load.failed();
                    return (Answer::Failure(f), None);
                }
                Answer::LocallyRejected => {
                    // The unit cannot go on without this RPC: it fails.
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

    /// One RPC: its attempts, then the workload's judgement of the answer.
    async fn rpc(
        &mut self,
        ctx: &mut WorkerContext,
        load: &mut dyn WorkerLoad,
        rpc: &Rpc,
    ) -> (Answer, Option<RequestCounts>) {
        let (last, counts) = match ctx.resilience.as_mut() {
            Some(res) => {
                let (last, counts) =
                    super::resilience::request(&mut self.client, rpc, &mut self.deadline, res)
                        .await;
                (last, Some(counts))
            }
            None => (
                Some(
                    request::attempt(&mut self.client, rpc.frame.clone(), &mut self.deadline).await,
                ),
                None,
            ),
        };
        let answer = match last {
            None => Answer::LocallyRejected,
            Some(Err(f)) => Answer::Failure(f),
            Some(Ok(())) => match load.judge(self.client.response()) {
                Ok(bytes) => Answer::Success { bytes },
                Err(f) => Answer::Failure(f),
            },
        };
        (answer, counts)
    }
}

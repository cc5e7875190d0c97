//! Workers of `--stream-mode per-request` (the default): one request outstanding each, a new bidi
//! stream per request, as Ozone's Java client (`XceiverClientGrpc.sendCommandAsync`).

use super::WorkerContext;
use super::request::{self, Backoff, Deadline};
use crate::connection::unary::UnaryConnection;
use crate::outcome::{Answer, ErrorKind};
use std::rc::Rc;
use std::time::Instant;

pub async fn worker(mut ctx: WorkerContext, conn: Rc<UnaryConnection>) {
    let mut client = conn.client().await;
    let mut stop = ctx.shared.stop_signal();
    let mut backoff = Backoff::new();
    let mut deadline = Deadline::new(ctx.timeout);
    let mut seq = 0;
    while let Some(slot) = ctx.shared.slots.next().await {
        let frame = ctx.workload.framed_request(ctx.idx, seq);
        seq += 1;
        let sent = Instant::now();
        let (answer, counts) = match ctx.resilience.as_mut() {
            Some(res) => {
                let (a, c) = crate::resilience::request(
                    &mut client,
                    &*ctx.workload,
                    frame,
                    &mut deadline,
                    res,
                )
                .await;
                (a, Some(c))
            }
            None => (
                request::request(&mut client, &*ctx.workload, frame, &mut deadline).await,
                None,
            ),
        };
        let done = Instant::now();
        let transport = matches!(&answer, Answer::Failure(f) if f.kind == ErrorKind::Transport);
        let ok = matches!(answer, Answer::Success { .. });
        let failed =
            ctx.recorder
                .borrow_mut()
                .record_request(&slot, sent, done, answer, counts.as_ref());
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
}

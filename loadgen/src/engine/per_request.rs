//! Workers of `--stream-mode per-request` (the default): one request outstanding each, a new bidi
//! stream per request, as Ozone's Java client (`XceiverClientGrpc.sendCommandAsync`).

use super::WorkerContext;
use super::recorder::Recorder;
use super::request::{self, Backoff};
use crate::connection::Client;
use crate::outcome::{Answer, ErrorKind};
use std::time::Instant;

pub async fn worker(ctx: WorkerContext, mut client: Client) {
    let mut recorder = Recorder::new(
        ctx.shared.clone(),
        ctx.flushes.clone(),
        ctx.workload.request_bytes(),
    );
    let mut stop = ctx.shared.stop_signal();
    let mut backoff = Backoff::new();
    let mut seq = 0;
    while let Some(slot) = ctx.shared.slots.next().await {
        let req = ctx.workload.request(ctx.idx, seq);
        seq += 1;
        let sent = Instant::now();
        let answer = request::request(&mut client, &*ctx.workload, req, ctx.timeout).await;
        let done = Instant::now();
        let transport = matches!(&answer, Answer::Failure(f) if f.kind == ErrorKind::Transport);
        let ok = matches!(answer, Answer::Success { .. });
        if recorder.record(&slot, sent, done, answer) && !ctx.fail_at_end {
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

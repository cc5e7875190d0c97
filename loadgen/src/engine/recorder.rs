//! An I/O thread's side of the statistics: its workers record into the thread's own
//! [`WorkerStats`] (no lock: one thread; few, cache-warm histograms) and hand them to the
//! coordinator once per report interval, at the first answer after the interval's tick, and when
//! the thread's workers end (also when they are aborted: on drop). The coordinator
//! merges what it receives and hands the emptied statistics back for reuse, so memory stays
//! fixed however long the run and the histograms are not allocated again every interval.

use super::Shared;
use super::slots::Slot;
use crate::outcome::{Answer, Failure, SendTiming, Timing, WorkerStats};
use crate::workload::Rpc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

/// Statistics of one worker for one interval (`epoch`: the interval's index since the start).
pub struct Flush {
    pub epoch: u64,
    pub stats: WorkerStats,
    /// Where the emptied statistics go back for reuse.
    pub back: UnboundedSender<WorkerStats>,
}

pub struct Recorder {
    stats: WorkerStats,
    epoch: u64,
    shared: Arc<Shared>,
    tx: UnboundedSender<Flush>,
    back: UnboundedSender<WorkerStats>,
    returned: UnboundedReceiver<WorkerStats>,
    request_bytes: u64,
}

impl Recorder {
    /// `request_bytes`: the payload of a single-RPC unit (multi-RPC units count theirs per RPC).
    pub fn new(shared: Arc<Shared>, tx: UnboundedSender<Flush>, request_bytes: u64) -> Self {
        let (back, returned) = mpsc::unbounded_channel();
        Recorder {
            stats: WorkerStats::default(),
            epoch: shared.epoch.load(Relaxed),
            shared,
            tx,
            back,
            returned,
            request_bytes,
        }
    }

    /// Records one answered (or failed) request sent at `sent` and ended at `done` (persistent
    /// streams). Returns whether it was a measured failure (which stops the run without
    /// --fail-at-end).
    pub fn record(&mut self, slot: &Slot, sent: Instant, done: Instant, answer: Answer) -> bool {
        self.record_unit(slot, sent, done, answer, None, 0)
    }

    /// Records one RPC of a measured multi-RPC unit under its kind, with its attempts' counts;
    /// `received` is the payload its answer carried when it succeeded.
    pub fn record_rpc(
        &mut self,
        rpc: &Rpc,
        latency: Duration,
        received: Option<u64>,
        counts: Option<&crate::outcome::RequestCounts>,
    ) {
        if let Some(c) = counts {
            c.record_into(&mut self.stats);
        }
        self.stats.record_rpc(
            rpc.kind,
            rpc.request_bytes,
            latency,
            received,
            rpc.goodput_bytes,
        );
    }

    /// A failure of a worker's closing RPCs (no unit of their own): counted as a failure.
    pub fn record_close_failure(&mut self, measured: bool, failure: Failure) {
        if measured {
            self.stats
                .record_failure(Duration::ZERO, failure.kind, || failure.message);
        }
    }

    /// Records one unit (a request as the statistics count it) sent at `sent` and ended at
    /// `done`, with its retry and throttle counts (single-RPC units) and the application bytes
    /// it completed. Returns whether it was a measured failure.
    pub fn record_unit(
        &mut self,
        slot: &Slot,
        sent: Instant,
        done: Instant,
        answer: Answer,
        counts: Option<&crate::outcome::RequestCounts>,
        unit_bytes: u64,
    ) -> bool {
        let epoch = self.shared.epoch.load(Relaxed);
        if epoch != self.epoch {
            self.flush();
            self.epoch = epoch;
        }
        if !slot.measured {
            self.stats.warmup += 1;
            return false;
        }
        let failed = matches!(answer, Answer::Failure(_));
        if let Some(c) = counts {
            c.record_into(&mut self.stats);
        }
        let timing = match slot.intended {
            None => Timing {
                corrected: done - sent,
                uncorrected: done - sent,
                send: SendTiming::Unscheduled,
            },
            Some(intended) => {
                let off = sent.saturating_duration_since(intended);
                Timing {
                    corrected: done.saturating_duration_since(intended),
                    uncorrected: done - sent,
                    send: if slot.late {
                        SendTiming::Late(off)
                    } else {
                        SendTiming::OnTime(off)
                    },
                }
            }
        };
        self.stats
            .record(timing, answer, self.request_bytes, unit_bytes);
        self.shared.completed.fetch_add(1, Relaxed);
        failed
    }

    fn flush(&mut self) {
        if self.stats.requests() == 0 && self.stats.warmup == 0 {
            return;
        }
        let fresh = self.returned.try_recv().unwrap_or_default();
        let stats = std::mem::replace(&mut self.stats, fresh);
        let _ = self.tx.send(Flush {
            epoch: self.epoch,
            stats,
            back: self.back.clone(),
        });
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush();
    }
}

//! A worker's side of the statistics: it records into its own [`WorkerStats`] (no lock, no shared
//! histogram) and hands them to the coordinator once per report interval, at its first answer
//! after the interval's tick, and when it ends (also when it is aborted: on drop). The coordinator
//! merges what it receives, so memory stays fixed however long the run.

use super::Shared;
use super::slots::Slot;
use crate::outcome::{Answer, SendTiming, Timing, WorkerStats};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// Statistics of one worker for one interval (`epoch`: the interval's index since the start).
pub struct Flush {
    pub epoch: u64,
    pub stats: WorkerStats,
}

pub struct Recorder {
    stats: WorkerStats,
    epoch: u64,
    shared: Arc<Shared>,
    tx: UnboundedSender<Flush>,
    request_bytes: u64,
}

impl Recorder {
    pub fn new(shared: Arc<Shared>, tx: UnboundedSender<Flush>, request_bytes: u64) -> Self {
        Recorder {
            stats: WorkerStats::default(),
            epoch: shared.epoch.load(Relaxed),
            shared,
            tx,
            request_bytes,
        }
    }

    /// Records one answered (or failed) request sent at `sent` and ended at `done`. Returns
    /// whether it was a measured failure (which stops the run without --fail-at-end).
    pub fn record(&mut self, slot: &Slot, sent: Instant, done: Instant, answer: Answer) -> bool {
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
        self.stats.record(timing, answer, self.request_bytes);
        self.shared.completed.fetch_add(1, Relaxed);
        failed
    }

    fn flush(&mut self) {
        let stats = std::mem::take(&mut self.stats);
        if stats.requests() > 0 || stats.warmup > 0 {
            let _ = self.tx.send(Flush {
                epoch: self.epoch,
                stats,
            });
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush();
    }
}

//! Which request a worker sends next, and when: the run's shared request counter.
//!
//! Closed loop: the next request goes now (one atomic `fetch_add`).
//!
//! Open loop: request k is intended at `start + plan.time_of(k)`. A pacer thread ([`pace`])
//! releases each request when its time comes, as a permit of a fair semaphore; a free worker
//! waiting on the semaphore takes it at once (on time: the remaining gap is the generator's own
//! timer lag, reported apart). A permit that finds no worker waiting stays until a worker becomes
//! free: that request is *late* because every worker was busy at its intended time, and its
//! latency still counts from the intended time (coordinated omission corrected). The pacer sleeps
//! with the OS's fine-grained timer (tokio's timers have 1 ms granularity, too coarse here).

use crate::config::{Load, StopAfter};
use crate::schedule::Plan;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, TryAcquireError};

/// One request to send.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Open loop: when the request is meant to go out.
    pub intended: Option<Instant>,
    /// Taken after its intended time because every worker was busy then.
    pub late: bool,
    /// Sent after the warm-up: counts in the statistics.
    pub measured: bool,
}

pub struct Slots {
    start: Instant,
    /// End of the warm-up: measurement starts here.
    measure_start: Instant,
    end: Option<Instant>,
    mode: Mode,
    next: AtomicU64,
    stop: AtomicBool,
}

enum Mode {
    /// `limit`: measured requests to send (None: until `end`).
    Closed { limit: Option<u64> },
    /// `last`: one past the last request index to send. `due` holds a permit per released
    /// request not yet taken.
    Open {
        plan: Plan,
        last: Option<u64>,
        due: Arc<Semaphore>,
    },
}

/// Permits added once every request has been released, so that waiting workers wake and find
/// the run over.
const RELEASE_ALL: usize = 1 << 32;

impl Slots {
    pub fn new(load: &Load, stop: StopAfter, warmup: Duration, start: Instant) -> Self {
        let measure_start = start + warmup;
        let end = match stop {
            StopAfter::Elapsed(d) => Some(measure_start + d),
            StopAfter::Requests(_) => None,
        };
        let limit = match stop {
            StopAfter::Requests(n) => Some(n),
            StopAfter::Elapsed(_) => None,
        };
        let mode = match load {
            Load::Closed => Mode::Closed { limit },
            Load::Open(plan) => {
                let first_measured = plan.first_at_or_after(warmup.as_secs_f64());
                Mode::Open {
                    plan: plan.clone(),
                    last: limit.map(|n| first_measured + n),
                    due: Arc::new(Semaphore::new(0)),
                }
            }
        };
        Slots {
            start,
            measure_start,
            end,
            mode,
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    pub fn is_open_loop(&self) -> bool {
        matches!(self.mode, Mode::Open { .. })
    }

    /// The next request, or `None` when the run is over for this worker. Open loop: waits until
    /// a request is due. Cancel-safe: a request is taken only when the future completes.
    pub async fn next(&self) -> Option<Slot> {
        if self.stop.load(Relaxed) {
            return None;
        }
        match &self.mode {
            Mode::Closed { limit } => {
                let now = Instant::now();
                if now < self.measure_start {
                    return Some(Slot {
                        intended: None,
                        late: false,
                        measured: false,
                    });
                }
                if self.end.is_some_and(|end| now >= end) {
                    return None;
                }
                let seq = self.next.fetch_add(1, Relaxed);
                if limit.is_some_and(|limit| seq >= limit) {
                    return None;
                }
                Some(Slot {
                    intended: None,
                    late: false,
                    measured: true,
                })
            }
            Mode::Open { plan, last, due } => {
                let late = match due.try_acquire() {
                    Ok(permit) => {
                        permit.forget();
                        true
                    }
                    Err(TryAcquireError::Closed) => return None,
                    Err(TryAcquireError::NoPermits) => {
                        due.acquire().await.ok()?.forget();
                        false
                    }
                };
                let k = self.next.fetch_add(1, Relaxed);
                if last.is_some_and(|last| k >= last) {
                    return None;
                }
                let intended = self.start + Duration::from_secs_f64(plan.time_of(k));
                if self.end.is_some_and(|end| intended >= end) {
                    return None;
                }
                Some(Slot {
                    intended: Some(intended),
                    late,
                    measured: intended >= self.measure_start,
                })
            }
        }
    }

    /// Open loop: releases requests at their intended times until all are released or the run
    /// is stopped. Runs on a thread of its own.
    pub fn pace(&self) {
        let Mode::Open { plan, last, due } = &self.mode else {
            return;
        };
        set_fine_timer_slack();
        let mut k = 0u64;
        loop {
            if self.stop.load(Relaxed) {
                return;
            }
            let now = Instant::now();
            let mut released = 0;
            let next = loop {
                if last.is_some_and(|last| k >= last) {
                    break None;
                }
                let t = self.start + Duration::from_secs_f64(plan.time_of(k));
                if self.end.is_some_and(|end| t >= end) {
                    break None;
                }
                if t > now {
                    break Some(t);
                }
                k += 1;
                released += 1;
            };
            if released > 0 {
                due.add_permits(released);
            }
            match next {
                // Short naps keep a stop noticed quickly even at low rates.
                Some(t) => std::thread::sleep((t - now).min(Duration::from_millis(20))),
                None => {
                    due.add_permits(RELEASE_ALL);
                    return;
                }
            }
        }
    }

    /// No more requests: workers finish what they have in flight and stop.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
        if let Mode::Open { due, .. } = &self.mode {
            due.close();
        }
    }

    pub fn measure_start(&self) -> Instant {
        self.measure_start
    }
}

/// Lets the pacer's sleeps end within microseconds instead of the default 50 µs timer slack.
fn set_fine_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::RateSchedule;

    fn take_all(slots: &Slots) -> Vec<Slot> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut v = Vec::new();
            while let Some(s) = slots.next().await {
                v.push(s);
            }
            v
        })
    }

    #[test]
    fn closed_loop_hands_out_exactly_n_measured_requests() {
        let slots = Slots::new(
            &Load::Closed,
            StopAfter::Requests(5),
            Duration::ZERO,
            Instant::now(),
        );
        let claimed = take_all(&slots);
        assert_eq!(claimed.len(), 5);
        assert!(claimed.iter().all(|s| s.measured && s.intended.is_none()));
    }

    #[test]
    fn warmup_requests_are_not_measured_and_not_counted() {
        let slots = Slots::new(
            &Load::Closed,
            StopAfter::Requests(3),
            Duration::from_secs(3600),
            Instant::now(),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..10 {
            assert!(!rt.block_on(slots.next()).unwrap().measured);
        }
        slots.stop();
        assert!(rt.block_on(slots.next()).is_none());
    }

    #[test]
    fn open_loop_requests_follow_the_plan_and_late_ones_are_known() {
        // Started 50 ms ago at 100/s: requests 0–4 (0–40 ms) are due and nobody was waiting.
        let start = Instant::now() - Duration::from_millis(50);
        let plan = Plan::new(RateSchedule::Constant(100.0));
        // Warm-up 20 ms covers requests 0 and 1; then 3 measured ones.
        let slots = Slots::new(
            &Load::Open(plan),
            StopAfter::Requests(3),
            Duration::from_millis(20),
            start,
        );
        std::thread::scope(|s| {
            s.spawn(|| slots.pace());
        });
        let claimed = take_all(&slots);
        assert_eq!(claimed.len(), 5);
        assert_eq!(claimed.iter().filter(|s| s.measured).count(), 3);
        assert_eq!(claimed[3].intended, Some(start + Duration::from_millis(30)));
        assert!(claimed.iter().all(|s| s.late));
    }

    #[test]
    fn a_waiting_worker_gets_each_request_on_time() {
        let slots = Arc::new(Slots::new(
            &Load::Open(Plan::new(RateSchedule::Constant(200.0))),
            StopAfter::Elapsed(Duration::from_millis(100)),
            Duration::ZERO,
            Instant::now() + Duration::from_millis(20),
        ));
        let pacer = {
            let slots = Arc::clone(&slots);
            std::thread::spawn(move || slots.pace())
        };
        let claimed = take_all(&slots);
        pacer.join().unwrap();
        assert_eq!(claimed.len(), 20);
        assert!(
            claimed.iter().filter(|s| !s.late).count() >= 15,
            "{claimed:?}"
        );
    }

    #[test]
    fn stopping_wakes_waiting_workers() {
        let slots = Slots::new(
            &Load::Open(Plan::new(RateSchedule::Constant(0.001))),
            StopAfter::Requests(10),
            Duration::ZERO,
            Instant::now() + Duration::from_secs(3600),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let wait = slots.next();
            tokio::pin!(wait);
            assert!(
                tokio::time::timeout(Duration::from_millis(20), &mut wait)
                    .await
                    .is_err()
            );
            slots.stop();
            assert!(wait.await.is_none());
        });
    }
}

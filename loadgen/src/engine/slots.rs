//! Which request a worker sends next, and when: the run's shared request counter. Closed loop: the
//! next request goes now. Open loop: request k is intended at the plan's `time_of(k)`; whichever
//! worker is free claims the next k, so a k claimed after its intended time was late because every
//! worker was busy. One atomic `fetch_add` per request, no lock.

use crate::config::{Load, StopAfter};
use crate::engine::schedule::Plan;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One request to send.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Open loop: when the request is meant to go out.
    pub intended: Option<Instant>,
    /// Claimed after its intended time (every worker was busy).
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
    /// `last`: one past the last request index to send.
    Open { plan: Plan, last: Option<u64> },
}

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

    /// The next request, or `None` when the run is over for this worker.
    pub fn claim(&self) -> Option<Slot> {
        if self.stop.load(Relaxed) {
            return None;
        }
        let now = Instant::now();
        match &self.mode {
            Mode::Closed { limit } => {
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
            Mode::Open { plan, last } => {
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
                    late: now > intended,
                    measured: intended >= self.measure_start,
                })
            }
        }
    }

    /// No more requests: workers finish what they have in flight and stop.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    pub fn measure_start(&self) -> Instant {
        self.measure_start
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// When a time-bounded run ends.
    pub fn end(&self) -> Option<Instant> {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::schedule::RateSchedule;

    #[test]
    fn closed_loop_hands_out_exactly_n_measured_requests() {
        let slots = Slots::new(
            &Load::Closed,
            StopAfter::Requests(5),
            Duration::ZERO,
            Instant::now(),
        );
        let claimed: Vec<_> = std::iter::from_fn(|| slots.claim()).collect();
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
        for _ in 0..10 {
            assert!(!slots.claim().unwrap().measured);
        }
        slots.stop();
        assert!(slots.claim().is_none());
    }

    #[test]
    fn open_loop_slots_follow_the_plan_and_know_when_they_are_late() {
        let start = Instant::now() - Duration::from_millis(50);
        let plan = Plan::new(RateSchedule::Constant(100.0));
        // Warm-up 20 ms covers requests 0 and 1 (at 0 and 10 ms); then 3 measured ones.
        let slots = Slots::new(
            &Load::Open(plan),
            StopAfter::Requests(3),
            Duration::from_millis(20),
            start,
        );
        let claimed: Vec<_> = std::iter::from_fn(|| slots.claim()).collect();
        assert_eq!(claimed.len(), 5);
        assert_eq!(claimed.iter().filter(|s| s.measured).count(), 3);
        assert_eq!(claimed[3].intended, Some(start + Duration::from_millis(30)));
        // 0–40 ms are in the past (start was 50 ms ago): late.
        assert!(claimed.iter().all(|s| s.late));
        let future = Slots::new(
            &Load::Open(Plan::new(RateSchedule::Constant(1.0))),
            StopAfter::Elapsed(Duration::from_secs(10)),
            Duration::ZERO,
            Instant::now() + Duration::from_secs(1),
        );
        let s = future.claim().unwrap();
        assert!(!s.late && s.measured);
        assert_eq!(std::iter::from_fn(|| future.claim()).count(), 9);
    }
}

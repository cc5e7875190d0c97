//! The coordinator's side of the statistics: workers' interval flushes are gathered per interval
//! (epoch), and an interval is closed one interval after its end, so that workers have had the
//! chance to hand it over (a worker hands over at its first answer after a tick). A closed interval
//! becomes a time-series point, goes to the histogram log, and is merged into the run's totals.
//! A flush that arrives after its interval was closed counts in the next open one.
//!
//! Memory is fixed: at most a few open intervals, and a time series of at most [`MAX_POINTS`]
//! points (adjacent points are combined when it is full).

use super::recorder::Flush;
use crate::outcome::WorkerStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub const MAX_POINTS: usize = 2048;

/// One point of the time series (times relative to the end of the warm-up).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalPoint {
    pub t_s: f64,
    pub duration_s: f64,
    pub requests: u64,
    pub successes: u64,
    pub failures: u64,
    pub late_sends: u64,
    pub rate: f64,
    /// Successful requests' latency from the intended send time. After points were combined
    /// (long runs), the larger of the two.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Service time (from the actual send) at p99.
    pub uncorrected_p99_ms: f64,
    /// Payload bytes of the requests that succeeded in the interval, and per second (goodput).
    #[serde(default)]
    pub goodput_bytes: u64,
    #[serde(default)]
    pub goodput_bytes_per_s: f64,
    /// Retries, limit rejections by the target, attempts the client throttle delayed or
    /// rejected, and requests that ended locally rejected.
    #[serde(default)]
    pub retries: u64,
    #[serde(default)]
    pub rejections: u64,
    #[serde(default)]
    pub locally_throttled: u64,
    #[serde(default)]
    pub locally_rejected: u64,
}

impl IntervalPoint {
    fn of(t_s: f64, duration_s: f64, s: &WorkerStats) -> Self {
        let requests = s.requests();
        IntervalPoint {
            t_s,
            duration_s,
            requests,
            successes: s.success.count(),
            failures: s.failures(),
            late_sends: s.late_sends(),
            rate: requests as f64 / duration_s.max(1e-9),
            p50_ms: s.success.percentile_ms(50.0),
            p99_ms: s.success.percentile_ms(99.0),
            max_ms: s.success.max_ms(),
            uncorrected_p99_ms: s.service_time().percentile_ms(99.0),
            goodput_bytes: s.resilience.goodput_bytes,
            goodput_bytes_per_s: s.resilience.goodput_bytes as f64 / duration_s.max(1e-9),
            retries: s.resilience.retries,
            rejections: s.resilience.rejections,
            locally_throttled: s.resilience.locally_throttled(),
            locally_rejected: s.resilience.locally_rejected,
        }
    }

    /// Adds another process's point of the same interval (counts and rates add).
    pub fn add_resilience(&mut self, o: &IntervalPoint) {
        self.goodput_bytes += o.goodput_bytes;
        self.goodput_bytes_per_s += o.goodput_bytes_per_s;
        self.retries += o.retries;
        self.rejections += o.rejections;
        self.locally_throttled += o.locally_throttled;
        self.locally_rejected += o.locally_rejected;
    }

    /// Combines two adjacent points. Counts add; latency fields keep the larger value (an upper
    /// bound: percentiles of two intervals cannot be combined without their histograms).
    pub fn combine(&self, next: &IntervalPoint) -> IntervalPoint {
        let duration_s = next.t_s + next.duration_s - self.t_s;
        let requests = self.requests + next.requests;
        IntervalPoint {
            t_s: self.t_s,
            duration_s,
            requests,
            successes: self.successes + next.successes,
            failures: self.failures + next.failures,
            late_sends: self.late_sends + next.late_sends,
            rate: requests as f64 / duration_s.max(1e-9),
            p50_ms: self.p50_ms.max(next.p50_ms),
            p99_ms: self.p99_ms.max(next.p99_ms),
            max_ms: self.max_ms.max(next.max_ms),
            uncorrected_p99_ms: self.uncorrected_p99_ms.max(next.uncorrected_p99_ms),
            goodput_bytes: self.goodput_bytes + next.goodput_bytes,
            goodput_bytes_per_s: (self.goodput_bytes + next.goodput_bytes) as f64
                / duration_s.max(1e-9),
            retries: self.retries + next.retries,
            rejections: self.rejections + next.rejections,
            locally_throttled: self.locally_throttled + next.locally_throttled,
            locally_rejected: self.locally_rejected + next.locally_rejected,
        }
    }
}

/// Appends points; when full, combines neighbours pairwise (halving the resolution).
pub fn push_point(series: &mut Vec<IntervalPoint>, point: IntervalPoint) {
    if series.len() >= MAX_POINTS {
        let combined: Vec<_> = series
            .chunks(2)
            .map(|c| match c {
                [a, b] => a.combine(b),
                [a] => a.clone(),
                _ => unreachable!("chunks(2) yields one or two"),
            })
            .collect();
        *series = combined;
    }
    series.push(point);
}

/// Receives each closed interval (e.g. the histogram log).
pub trait IntervalSink {
    /// `start` is relative to the end of the warm-up.
    fn interval(&mut self, start: Duration, length: Duration, stats: &WorkerStats);
}

pub struct Live {
    interval: Duration,
    /// The warm-up's length: intervals are numbered from the run's start.
    warmup: Duration,
    open: BTreeMap<u64, WorkerStats>,
    /// Intervals below this index are closed.
    next_to_close: u64,
    pub total: WorkerStats,
    pub series: Vec<IntervalPoint>,
    sinks: Vec<Box<dyn IntervalSink + Send>>,
}

impl Live {
    pub fn new(
        interval: Duration,
        warmup: Duration,
        sinks: Vec<Box<dyn IntervalSink + Send>>,
    ) -> Self {
        Live {
            interval,
            warmup,
            open: BTreeMap::new(),
            next_to_close: 0,
            total: WorkerStats::default(),
            series: Vec::new(),
            sinks,
        }
    }

    pub fn add(&mut self, flush: Flush) {
        let Flush {
            epoch,
            mut stats,
            back,
        } = flush;
        let epoch = epoch.max(self.next_to_close);
        self.open.entry(epoch).or_default().merge(&stats);
        stats.reset();
        let _ = back.send(stats); // a worker that has ended no longer needs it
    }

    /// Closes the intervals that ended at least one interval before `epoch` began.
    pub fn tick(&mut self, epoch: u64) {
        while self.next_to_close + 1 < epoch {
            self.close(self.next_to_close, None);
        }
    }

    /// Closes everything at the end of the run, `elapsed` after its start.
    pub fn finish(&mut self, elapsed: Duration) {
        let last = (elapsed.as_secs_f64() / self.interval.as_secs_f64()) as u64;
        let last = last.max(self.open.keys().next_back().copied().unwrap_or(0));
        while self.next_to_close <= last {
            self.close(self.next_to_close, Some(elapsed));
        }
    }

    fn close(&mut self, epoch: u64, end: Option<Duration>) {
        let stats = self.open.remove(&epoch).unwrap_or_default();
        self.next_to_close = epoch + 1;
        self.total.merge(&stats);
        let from = self.interval * epoch as u32;
        let mut to = from + self.interval;
        if let Some(end) = end {
            to = to.min(end).max(from);
        }
        // Intervals of the warm-up carry no measurements; one that straddles its end starts there.
        if to <= self.warmup {
            return;
        }
        let from = from.max(self.warmup);
        let start = from - self.warmup;
        let length = to - from;
        if length.is_zero() && stats.requests() == 0 {
            return;
        }
        for sink in &mut self.sinks {
            sink.interval(start, length, &stats);
        }
        push_point(
            &mut self.series,
            IntervalPoint::of(start.as_secs_f64(), length.as_secs_f64(), &stats),
        );
    }

    /// Latency p99 (ms, from the intended send time) of the successful requests of the open
    /// interval `epoch` handed over so far; `None` if there are none or the interval is closed.
    pub fn p99_ms_of(&self, epoch: u64) -> Option<f64> {
        self.open
            .get(&epoch)
            .filter(|s| s.success.count() > 0)
            .map(|s| s.success.percentile_ms(99.0))
    }

    /// Failures received so far (closed and open intervals).
    pub fn failures(&self) -> u64 {
        self.total.failures() + self.open.values().map(WorkerStats::failures).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush(epoch: u64, n: u64) -> Flush {
        let mut stats = WorkerStats::default();
        for _ in 0..n {
            stats.record_success(Duration::from_millis(1));
        }
        let (back, _) = tokio::sync::mpsc::unbounded_channel();
        Flush { epoch, stats, back }
    }

    #[test]
    fn intervals_close_one_interval_late_and_late_flushes_move_on() {
        let mut live = Live::new(Duration::from_secs(1), Duration::ZERO, Vec::new());
        live.add(flush(0, 10));
        live.tick(1);
        assert!(
            live.series.is_empty(),
            "interval 0 stays open during interval 1"
        );
        live.add(flush(0, 5)); // a worker that answered only now
        live.add(flush(1, 7));
        live.tick(2);
        assert_eq!(live.series.len(), 1);
        assert_eq!(live.series[0].requests, 15);
        live.add(flush(0, 1)); // interval 0 is closed: counted in interval 1
        live.finish(Duration::from_millis(2500));
        let counts: Vec<_> = live.series.iter().map(|p| p.requests).collect();
        assert_eq!(counts, vec![15, 8, 0]);
        assert_eq!(live.total.success.count(), 23);
        assert!((live.series[2].duration_s - 0.5).abs() < 1e-9);
    }

    #[test]
    fn the_p99_of_an_open_interval_is_what_was_handed_over_so_far() {
        let mut live = Live::new(Duration::from_secs(1), Duration::ZERO, Vec::new());
        assert_eq!(live.p99_ms_of(0), None);
        live.add(flush(0, 10)); // 1 ms each
        let p99 = live.p99_ms_of(0).unwrap();
        assert!((1.0..1.01).contains(&p99), "{p99}");
        assert_eq!(live.p99_ms_of(1), None);
        live.tick(2);
        assert_eq!(live.p99_ms_of(0), None, "closed");
    }

    #[test]
    fn warmup_intervals_are_left_out_of_the_series() {
        let mut live = Live::new(
            Duration::from_secs(1),
            Duration::from_millis(1500),
            Vec::new(),
        );
        live.add(flush(1, 4));
        live.finish(Duration::from_secs(3));
        assert_eq!(live.series.len(), 2);
        assert_eq!(live.series[0].t_s, 0.0);
        assert!((live.series[0].duration_s - 0.5).abs() < 1e-9);
        assert_eq!(live.series[0].requests, 4);
    }

    #[test]
    fn the_series_stays_bounded() {
        let mut series = Vec::new();
        let mut stats = WorkerStats::default();
        stats.record_success(Duration::from_millis(1));
        for i in 0..(3 * MAX_POINTS) {
            push_point(&mut series, IntervalPoint::of(i as f64, 1.0, &stats));
        }
        assert!(series.len() <= MAX_POINTS);
        let total: u64 = series.iter().map(|p| p.requests).sum();
        assert_eq!(total, 3 * MAX_POINTS as u64);
        let covered: f64 = series.iter().map(|p| p.duration_s).sum();
        assert!((covered - 3.0 * MAX_POINTS as f64).abs() < 1e-6);
    }
}

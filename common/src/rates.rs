//! Dropwizard-style meter: the mean rate and the 1-, 5- and 15-minute exponentially weighted
//! moving averages that freon's report prints (metrics-core 3.2.6 `Meter`/`EWMA`). Ticks every
//! 5 s; events marked since the last tick form that tick's instant rate; the first tick sets the
//! average outright. Time is passed in, so the meter is deterministic and testable.

use std::time::Duration;

const TICK: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
struct Ewma {
    alpha: f64,
    rate: f64,
    initialized: bool,
}

impl Ewma {
    fn minutes(m: f64) -> Self {
        let alpha = 1.0 - (-TICK.as_secs_f64() / 60.0 / m).exp();
        Self {
            alpha,
            rate: 0.0,
            initialized: false,
        }
    }

    fn tick(&mut self, count: u64) {
        let instant = count as f64 / TICK.as_secs_f64();
        if self.initialized {
            self.rate += self.alpha * (instant - self.rate);
        } else {
            self.rate = instant;
            self.initialized = true;
        }
    }
}

/// Mean and moving-average rates of events over a run. `elapsed` arguments are time since start.
#[derive(Debug, Clone)]
pub struct Meter {
    count: u64,
    uncounted: u64,
    last_tick: Duration,
    m1: Ewma,
    m5: Ewma,
    m15: Ewma,
}

impl Default for Meter {
    fn default() -> Self {
        Self::new()
    }
}

impl Meter {
    pub fn new() -> Self {
        Self {
            count: 0,
            uncounted: 0,
            last_tick: Duration::ZERO,
            m1: Ewma::minutes(1.0),
            m5: Ewma::minutes(5.0),
            m15: Ewma::minutes(15.0),
        }
    }

    /// Records `n` events that happened by `elapsed`.
    pub fn mark(&mut self, n: u64, elapsed: Duration) {
        self.tick_if_necessary(elapsed);
        self.count += n;
        self.uncounted += n;
    }

    fn tick_if_necessary(&mut self, elapsed: Duration) {
        while elapsed >= self.last_tick + TICK {
            let n = std::mem::take(&mut self.uncounted);
            self.m1.tick(n);
            self.m5.tick(n);
            self.m15.tick(n);
            self.last_tick += TICK;
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Events per second over the whole run.
    pub fn mean_rate(&self, elapsed: Duration) -> f64 {
        if self.count == 0 || elapsed.is_zero() {
            0.0
        } else {
            self.count as f64 / elapsed.as_secs_f64()
        }
    }

    /// (1-minute, 5-minute, 15-minute) rates in events per second, as of `elapsed`.
    pub fn moving_rates(&mut self, elapsed: Duration) -> (f64, f64, f64) {
        self.tick_if_necessary(elapsed);
        (self.m1.rate, self.m5.rate, self.m15.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_tick_sets_the_rate_and_later_ticks_decay() {
        let mut m = Meter::new();
        // 1000 events/s for 5 s, marked each second.
        for s in 1..=5 {
            m.mark(1000, Duration::from_secs(s) - Duration::from_millis(1));
        }
        let (m1, m5, m15) = m.moving_rates(Duration::from_secs(5));
        assert_eq!((m1, m5, m15), (1000.0, 1000.0, 1000.0));
        // No more events: the 1-minute rate decays faster than the 15-minute one.
        let (m1, _, m15) = m.moving_rates(Duration::from_secs(65));
        assert!(m1 < 400.0 && m1 > 300.0, "{m1}");
        assert!(m15 > 900.0, "{m15}");
        assert!((m.mean_rate(Duration::from_secs(5)) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn short_runs_have_no_moving_rate_yet() {
        let mut m = Meter::new();
        m.mark(500, Duration::from_secs(1));
        assert_eq!(m.moving_rates(Duration::from_secs(2)), (0.0, 0.0, 0.0));
        assert_eq!(m.count(), 500);
    }
}

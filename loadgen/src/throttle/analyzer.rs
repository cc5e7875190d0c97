//! HADOOP-14660's client throttling analyzer (WASB `ClientThrottlingAnalyzer`, ABFS
//! `AbfsClientThrottlingAnalyzer`), throttling.md §2.1–2.3.
//!
//! Every response adds its bytes and one operation to the current window's "ok" or "failed"
//! counters. Once per analysis period `P` the window is closed and the sleep applied before every
//! send is recomputed from the percentage of *bytes* that failed:
//!
//! - below 0.1 %: sleep × 0.975, or × 0.75 once `consecutive no-error periods × P ≥ 150 s`;
//! - 0.1 % up to 1 %: sleep held (the no-error count is *not* reset);
//! - 1 % or more: the no-error count is reset and the delay needed to send everything at last
//!   period's successful rate, `(ok + failed) · T / ok − T` (or `5 · P` if nothing succeeded), is
//!   spread over last period's operations; the new sleep is `min(max(that, 1.05 · sleep) + 1 ms, P)`;
//! - the result is truncated to whole milliseconds (so 1 ms × 0.975 becomes 0).
//!
//! # No timer thread
//! The originals run the analysis from a fixed-rate `java.util.Timer`. Here windows advance from
//! the `now` passed to [`ClientThrottlingAnalyzer::suspend_duration`] and
//! [`ClientThrottlingAnalyzer::add_bytes_transferred`]: the first call starts the first window, and
//! a call at or after `start + P` closes every elapsed window (aligned to `start + k·P`, each of
//! length exactly `P`) in order, as the timer would have. Windows that elapsed without any call
//! are empty, count as error-free and decay the sleep, like the timer's runs over idle periods
//! (before HADOOP-18457 paused the timer when idle).
//!
//! # What counts (ABFS rules)
//! [`Outcome::Success`] counts as ok bytes, [`Outcome::Throttled`] as failed bytes;
//! [`Outcome::OtherFailure`] is not counted, and [`OpKind::Other`] operations are neither counted
//! nor delayed. Reads and writes have separate analyzers ([`AnalyzerThrottle`]).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{ClientThrottle, Decision, OpKind, Outcome};

/// `DEFAULT_ANALYSIS_PERIOD_MS` (ABFS `fs.azure.analysis.period`, allowed 1–30 s there).
pub const DEFAULT_ANALYSIS_PERIOD: Duration = Duration::from_secs(10);
/// Below this percentage of failed bytes the sleep decreases.
pub const MIN_ACCEPTABLE_ERROR_PERCENTAGE: f64 = 0.1;
/// Below this percentage (and at or above the minimum) the sleep is held.
pub const MAX_EQUILIBRIUM_ERROR_PERCENTAGE: f64 = 1.0;
pub const SLEEP_DECREASE_FACTOR: f64 = 0.975;
pub const RAPID_SLEEP_DECREASE_FACTOR: f64 = 0.75;
/// Error-free time after which the sleep decreases rapidly.
pub const RAPID_SLEEP_DECREASE_TRANSITION_PERIOD_MS: u64 = 150_000;
pub const SLEEP_INCREASE_FACTOR: f64 = 1.05;

/// Counters of one analysis window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowMetrics {
    pub bytes_ok: u64,
    pub bytes_failed: u64,
    pub ops_ok: u64,
    pub ops_failed: u64,
}

/// The analysis state without any clock: feed it one closed window at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SleepAnalysis {
    period_ms: u64,
    sleep_ms: u64,
    consecutive_no_error: u64,
}

impl SleepAnalysis {
    pub fn new(period: Duration) -> Self {
        let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
        Self {
            period_ms,
            sleep_ms: 0,
            consecutive_no_error: 0,
        }
    }

    pub fn sleep_ms(&self) -> u64 {
        self.sleep_ms
    }

    pub fn consecutive_no_error(&self) -> u64 {
        self.consecutive_no_error
    }

    /// `analyzeMetricsAndUpdateSleepDuration`: updates and returns the sleep (ms) after a window
    /// of `window_ms` with counters `m`.
    pub fn analyze(&mut self, m: &WindowMetrics, window_ms: u64) -> u64 {
        let bytes_failed = m.bytes_failed as f64;
        let bytes_ok = m.bytes_ok as f64;
        let ops = (m.ops_ok + m.ops_failed) as f64;
        let error_percentage = if bytes_failed <= 0.0 {
            0.0
        } else {
            100.0 * bytes_failed / (bytes_failed + bytes_ok)
        };
        let period = self.period_ms as f64;
        let sleep = self.sleep_ms as f64;
        let new_sleep = if error_percentage < MIN_ACCEPTABLE_ERROR_PERCENTAGE {
            self.consecutive_no_error = self.consecutive_no_error.saturating_add(1);
            let rapid = self.consecutive_no_error.saturating_mul(self.period_ms)
                >= RAPID_SLEEP_DECREASE_TRANSITION_PERIOD_MS;
            sleep
                * if rapid {
                    RAPID_SLEEP_DECREASE_FACTOR
                } else {
                    SLEEP_DECREASE_FACTOR
                }
        } else if error_percentage < MAX_EQUILIBRIUM_ERROR_PERCENTAGE {
            sleep
        } else {
            self.consecutive_no_error = 0;
            let t = window_ms as f64;
            let additional_delay = if bytes_ok > 0.0 {
                (bytes_ok + bytes_failed) * t / bytes_ok - t
            } else {
                5.0 * period
            };
            let spread = additional_delay / ops;
            (spread.max(sleep * SLEEP_INCREASE_FACTOR) + 1.0).min(period)
        };
        // Java's `(int) newSleepDuration`: truncation toward zero.
        self.sleep_ms = new_sleep as u64;
        self.sleep_ms
    }

    /// Records `periods` consecutive empty windows at once (an idle client).
    fn analyze_empty(&mut self, periods: u64) {
        let mut left = periods;
        while left > 0 && self.sleep_ms > 0 {
            self.analyze(&WindowMetrics::default(), self.period_ms);
            left -= 1;
        }
        // Nothing left to decay: only the no-error count moves.
        self.consecutive_no_error = self.consecutive_no_error.saturating_add(left);
    }
}

#[derive(Debug)]
struct State {
    analysis: SleepAnalysis,
    /// Start of the current window; `None` until the first call.
    window_start: Option<Instant>,
    window: WindowMetrics,
}

/// One analyzer (read or write) with its own windows and sleep.
#[derive(Debug)]
pub struct ClientThrottlingAnalyzer {
    period: Duration,
    state: Mutex<State>,
}

impl Default for ClientThrottlingAnalyzer {
    fn default() -> Self {
        Self::new(DEFAULT_ANALYSIS_PERIOD)
    }
}

impl ClientThrottlingAnalyzer {
    /// An analyzer with analysis period `period` (whole milliseconds; at least 1 ms).
    pub fn new(period: Duration) -> Self {
        let analysis = SleepAnalysis::new(period);
        Self {
            period: Duration::from_millis(analysis.period_ms),
            state: Mutex::new(State {
                analysis,
                window_start: None,
                window: WindowMetrics::default(),
            }),
        }
    }

    pub fn period(&self) -> Duration {
        self.period
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes every window that has elapsed by `now`.
    fn advance(&self, state: &mut State, now: Instant) {
        let Some(start) = state.window_start else {
            state.window_start = Some(now);
            return;
        };
        let elapsed = now.saturating_duration_since(start);
        if elapsed < self.period {
            return;
        }
        let periods =
            u64::try_from(elapsed.as_nanos() / self.period.as_nanos()).unwrap_or(u64::MAX);
        let closed = std::mem::take(&mut state.window);
        let period_ms = state.analysis.period_ms;
        state.analysis.analyze(&closed, period_ms);
        state.analysis.analyze_empty(periods - 1);
        let advance = u32::try_from(periods)
            .ok()
            .and_then(|p| self.period.checked_mul(p))
            .unwrap_or(elapsed);
        state.window_start = Some(start + advance);
    }

    /// `addBytesTransferred`: counts a response of `bytes` into the current window.
    pub fn add_bytes_transferred(&self, bytes: u64, failed: bool, now: Instant) {
        let mut state = self.lock();
        self.advance(&mut state, now);
        let w = &mut state.window;
        if failed {
            w.bytes_failed = w.bytes_failed.saturating_add(bytes);
            w.ops_failed += 1;
        } else {
            w.bytes_ok = w.bytes_ok.saturating_add(bytes);
            w.ops_ok += 1;
        }
    }

    /// `suspendIfNecessary`: how long to sleep before the send at `now` (zero: send at once).
    pub fn suspend_duration(&self, now: Instant) -> Duration {
        let mut state = self.lock();
        self.advance(&mut state, now);
        Duration::from_millis(state.analysis.sleep_ms)
    }

    /// The current sleep after closing the windows elapsed by `now`.
    pub fn sleep_ms(&self, now: Instant) -> u64 {
        self.suspend_duration(now).as_millis() as u64
    }

    /// Counters of the current (open) window, after closing the windows elapsed by `now`.
    pub fn current_window(&self, now: Instant) -> WindowMetrics {
        let mut state = self.lock();
        self.advance(&mut state, now);
        state.window
    }
}

/// The HADOOP-14660 throttle: a read analyzer and a write analyzer.
#[derive(Debug, Default)]
pub struct AnalyzerThrottle {
    pub read: ClientThrottlingAnalyzer,
    pub write: ClientThrottlingAnalyzer,
}

impl AnalyzerThrottle {
    pub fn new(period: Duration) -> Self {
        Self {
            read: ClientThrottlingAnalyzer::new(period),
            write: ClientThrottlingAnalyzer::new(period),
        }
    }

    pub fn analyzer(&self, op: OpKind) -> Option<&ClientThrottlingAnalyzer> {
        match op {
            OpKind::Read => Some(&self.read),
            OpKind::Write => Some(&self.write),
            OpKind::Other => None,
        }
    }
}

impl ClientThrottle for AnalyzerThrottle {
    fn before_send(&self, op: OpKind, _bytes: u64, now: Instant) -> Decision {
        match self.analyzer(op).map(|a| a.suspend_duration(now)) {
            Some(d) if !d.is_zero() => Decision::Sleep(d),
            _ => Decision::Proceed,
        }
    }

    fn on_result(&self, op: OpKind, bytes: u64, outcome: Outcome, now: Instant) {
        let Some(a) = self.analyzer(op) else { return };
        match outcome {
            Outcome::Success => a.add_bytes_transferred(bytes, false, now),
            Outcome::Throttled => a.add_bytes_transferred(bytes, true, now),
            Outcome::OtherFailure => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Duration = Duration::from_secs(10);
    const MB: u64 = 1 << 20;

    /// Drives one analyzer period by period with synthetic instants.
    struct Sim {
        a: ClientThrottlingAnalyzer,
        t0: Instant,
        period: u32,
    }

    impl Sim {
        fn new() -> Self {
            let a = ClientThrottlingAnalyzer::new(P);
            let t0 = Instant::now();
            assert_eq!(a.sleep_ms(t0), 0); // starts the first window at t0
            Self { a, t0, period: 0 }
        }

        /// One period with `ok` and `failed` requests of `bytes` each; returns the new sleep.
        fn period(&mut self, ok: u64, failed: u64, bytes: u64) -> u64 {
            let start = self.t0 + P * self.period;
            let n = ok + failed;
            for i in 0..n {
                let at = start + P.mul_f64((i as f64 + 0.5) / n as f64);
                self.a.add_bytes_transferred(bytes, i >= ok, at);
            }
            self.period += 1;
            self.a.sleep_ms(self.t0 + P * self.period)
        }
    }

    #[test]
    fn worked_example_ten_percent_of_a_thousand_requests_gives_2_ms() {
        let mut sim = Sim::new();
        // extra = T/0.9 − T ≈ 1111 ms, over 1000 requests ≈ 1.11 ms, + 1 → 2 ms.
        assert_eq!(sim.period(900, 100, MB), 2);
    }

    #[test]
    fn sleep_grows_at_one_percent_or_more() {
        let mut sim = Sim::new();
        assert_eq!(sim.period(900, 100, MB), 2);
        // 1.11 < 2 · 1.05 = 2.1 → 3.1 → 3; then 4.15 → 4; 5.2 → 5; 6.25 → 6.
        let grown: Vec<u64> = (0..4).map(|_| sim.period(900, 100, MB)).collect();
        assert_eq!(grown, [3, 4, 5, 6]);
        // Exactly 1 % of bytes failed still grows: 6 · 1.05 + 1 = 7.3 → 7.
        assert_eq!(sim.period(990, 10, MB), 7);
    }

    #[test]
    fn sleep_holds_between_a_tenth_and_one_percent() {
        let mut sim = Sim::new();
        sim.period(900, 100, MB);
        assert_eq!(sim.period(900, 100, MB), 3);
        // 0.5 % and 0.1 % (the lower bound holds, it does not decay).
        assert_eq!(sim.period(995, 5, MB), 3);
        assert_eq!(sim.period(999, 1, MB), 3);
        // 0.99 %: 1 failed byte-weighted request of 101.
        assert_eq!(sim.period(100, 1, MB), 3);
    }

    #[test]
    fn sleep_is_capped_at_one_period_and_uses_5p_without_success() {
        let mut sim = Sim::new();
        // Nothing succeeded, 10 ops: 5 · 10 000 / 10 + 1 = 5001.
        assert_eq!(sim.period(0, 10, MB), 5001);
        // One op: 50 000 + 1 capped at P.
        assert_eq!(sim.period(0, 1, MB), 10_000);
        // Growth from the cap stays at the cap.
        assert_eq!(sim.period(0, 1000, MB), 10_000);
        assert_eq!(sim.period(500, 500, MB), 10_000);
    }

    #[test]
    fn sleep_decays_slowly_then_rapidly_after_150_s() {
        let mut sim = Sim::new();
        assert_eq!(sim.period(0, 1, MB), 10_000);
        let mut expected = 10_000u64;
        for i in 1..=20u64 {
            // No-error period i: rapid once i · 10 s ≥ 150 s, i.e. from the 15th.
            let factor = if i >= 15 { 0.75 } else { 0.975 };
            expected = (expected as f64 * factor) as u64;
            // Failures below 0.1 % count as no error.
            let got = if i % 2 == 0 {
                sim.period(10_000, 0, MB)
            } else {
                sim.period(9_999, 1, MB)
            };
            assert_eq!(got, expected, "period {i}");
        }
        // Spot values of the slow phase: 10 000 → 9750 → 9506 (9506.25) → 9268 (9268.35).
        let mut check = SleepAnalysis::new(P);
        check.analyze(
            &WindowMetrics {
                bytes_failed: 1,
                ops_failed: 1,
                ..Default::default()
            },
            10_000,
        );
        let ok = WindowMetrics {
            bytes_ok: 1,
            ops_ok: 1,
            ..Default::default()
        };
        let slow: Vec<u64> = (0..3).map(|_| check.analyze(&ok, 10_000)).collect();
        assert_eq!(slow, [9750, 9506, 9268]);
    }

    #[test]
    fn a_hold_does_not_reset_the_no_error_count_but_an_increase_does() {
        let mut sim = Sim::new();
        assert_eq!(sim.period(0, 1, MB), 10_000);
        for _ in 0..14 {
            sim.period(1000, 0, MB);
        }
        let before = sim.a.sleep_ms(sim.t0 + P * sim.period);
        assert_eq!(sim.period(995, 5, MB), before); // hold
        // The 15th no-error period is rapid despite the hold in between.
        assert_eq!(sim.period(1000, 0, MB), (before as f64 * 0.75) as u64);

        // After an increase the count restarts: the next no-error period is slow again.
        let s = sim.period(900, 100, MB);
        assert_eq!(sim.period(1000, 0, MB), (s as f64 * 0.975) as u64);
    }

    #[test]
    fn truncation_drops_one_ms_to_zero() {
        let mut a = SleepAnalysis::new(P);
        let failed = WindowMetrics {
            bytes_ok: 0,
            bytes_failed: 1,
            ops_ok: 0,
            ops_failed: 1000,
        };
        assert_eq!(a.analyze(&failed, 10_000), 51); // 50 000 / 1000 + 1
        let mut b = SleepAnalysis::new(P);
        // 1 % of bytes failed, 1 000 000 ops: 0.1 ms + 1 → 1.
        let m = WindowMetrics {
            bytes_ok: 99,
            bytes_failed: 1,
            ops_ok: 990_000,
            ops_failed: 10_000,
        };
        assert_eq!(b.analyze(&m, 10_000), 1);
        assert_eq!(b.analyze(&WindowMetrics::default(), 10_000), 0); // 0.975 → 0
    }

    #[test]
    fn idle_periods_are_analysed_as_empty_windows() {
        let mut sim = Sim::new();
        assert_eq!(sim.period(0, 1, MB), 10_000);
        // 3 periods without any call: three slow decays at once.
        let t = sim.t0 + P * (sim.period + 3);
        let expected = ((((10_000.0 * 0.975) as u64) as f64 * 0.975) as u64) as f64 * 0.975;
        assert_eq!(sim.a.sleep_ms(t), expected as u64);
        // A long idle stretch decays all the way to zero and windows stay aligned.
        let far = sim.t0 + Duration::from_secs(3600) + Duration::from_millis(5);
        assert_eq!(sim.a.sleep_ms(far), 0);
        sim.a.add_bytes_transferred(7, true, far);
        assert_eq!(
            sim.a
                .current_window(far + Duration::from_millis(9994))
                .bytes_failed,
            7
        );
        assert_eq!(
            sim.a
                .current_window(far + Duration::from_millis(9995))
                .bytes_failed,
            0
        );
    }

    #[test]
    fn throttle_routes_reads_and_writes_to_separate_analyzers() {
        let t = AnalyzerThrottle::new(P);
        let t0 = Instant::now();
        assert_eq!(t.before_send(OpKind::Write, MB, t0), Decision::Proceed);
        assert_eq!(t.before_send(OpKind::Read, MB, t0), Decision::Proceed);
        for i in 0..1000u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 9);
            let outcome = if i % 10 == 0 {
                Outcome::Throttled
            } else {
                Outcome::Success
            };
            t.on_result(OpKind::Write, MB, outcome, at);
            // Other failures and other ops are not counted.
            t.on_result(OpKind::Read, MB, Outcome::OtherFailure, at);
            t.on_result(OpKind::Other, MB, Outcome::Throttled, at);
        }
        let next = t0 + P;
        assert_eq!(
            t.before_send(OpKind::Write, MB, next),
            Decision::Sleep(Duration::from_millis(2))
        );
        assert_eq!(t.before_send(OpKind::Read, MB, next), Decision::Proceed);
        assert_eq!(t.before_send(OpKind::Other, MB, next), Decision::Proceed);
    }
}

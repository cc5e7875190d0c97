//! Latency statistics: an HDR histogram of every request, in microseconds, with three significant
//! digits from 1 µs up to one hour. Memory is fixed (about 190 KiB per histogram) however long a
//! run lasts, and histograms merge exactly, so per-worker histograms can be combined at the end
//! and results of several processes can be combined later.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Highest trackable latency: one hour, in microseconds. Longer values are clamped to it.
const MAX_MICROS: u64 = 3_600_000_000;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, MAX_MICROS, 3)
            .expect("static histogram bounds are valid");
        Self { hist }
    }

    /// Records one latency. Sub-microsecond values count as 1 µs; values above an hour as an hour.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(MAX_MICROS)
            .clamp(1, MAX_MICROS);
        self.hist
            .record(micros)
            .expect("value clamped into the histogram's range");
    }

    /// Adds every value of `other` (exact: both share the same bucket layout).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.hist.add(&other.hist).expect("histograms share bounds");
    }

    pub fn reset(&mut self) {
        self.hist.reset();
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Smallest recorded value in milliseconds (0 when empty).
    pub fn min_ms(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.hist.min() as f64 / 1000.0
        }
    }

    pub fn max_ms(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }

    pub fn mean_ms(&self) -> f64 {
        self.hist.mean() / 1000.0
    }

    pub fn stddev_ms(&self) -> f64 {
        self.hist.stdev() / 1000.0
    }

    /// The value at `percentile` (0–100) in milliseconds.
    pub fn percentile_ms(&self, percentile: f64) -> f64 {
        self.hist.value_at_percentile(percentile) as f64 / 1000.0
    }

    /// Non-zero buckets as (value in µs, count), the exact, portable form used in JSON results.
    pub fn to_data(&self) -> HistogramData {
        HistogramData {
            unit: "us".to_string(),
            significant_digits: 3,
            buckets: self
                .hist
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    /// Rebuilds a histogram from [`HistogramData`]; values out of range are clamped.
    pub fn from_data(data: &HistogramData) -> Self {
        let mut h = Self::new();
        for &(value, count) in &data.buckets {
            h.hist
                .record_n(value.clamp(1, MAX_MICROS), count)
                .expect("value clamped into the histogram's range");
        }
        h
    }
}

/// Serializable form of a [`LatencyHistogram`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistogramData {
    pub unit: String,
    pub significant_digits: u8,
    pub buckets: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_within_three_digits() {
        let mut h = LatencyHistogram::new();
        for ms in 1..=1000u64 {
            h.record(Duration::from_micros(ms * 1000));
        }
        assert_eq!(h.count(), 1000);
        let p50 = h.percentile_ms(50.0);
        assert!((p50 - 500.0).abs() / 500.0 < 0.001, "{p50}");
        let p99 = h.percentile_ms(99.0);
        assert!((p99 - 990.0).abs() / 990.0 < 0.001, "{p99}");
        assert!((h.min_ms() - 1.0).abs() < 0.001);
    }

    #[test]
    fn merge_and_round_trip_are_exact() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for i in 0..5000u64 {
            a.record(Duration::from_micros(i * 37 % 100_000 + 1));
            b.record(Duration::from_micros(i * 91 % 3_000_000 + 1));
        }
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged.count(), 10_000);
        let back = LatencyHistogram::from_data(&merged.to_data());
        assert_eq!(back.count(), merged.count());
        for p in [50.0, 90.0, 99.0, 99.9, 100.0] {
            assert_eq!(back.percentile_ms(p), merged.percentile_ms(p));
        }
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_nanos(10));
        h.record(Duration::from_secs(10 * 3600));
        assert_eq!(h.count(), 2);
        assert!(h.max_ms() >= 3_600_000.0 * 0.999);
    }
}

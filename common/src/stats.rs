//! Latency statistics: an HDR histogram of every request, in microseconds, with three significant
//! digits from 1 µs up to one hour. Memory is fixed (about 190 KiB per histogram) however long a
//! run lasts, and histograms merge exactly, so per-worker histograms can be combined at the end
//! and results of several processes can be combined later. An empty histogram allocates nothing:
//! the buckets are created by the first value, so unused histograms (e.g. of failures) are free.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Highest trackable latency: one hour, in microseconds. Longer values are clamped to it.
const MAX_MICROS: u64 = 3_600_000_000;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    hist: Option<Histogram<u64>>,
}

fn new_hdr() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("static histogram bounds are valid")
}

/// Shared empty histogram for read access to a histogram that was never written.
fn empty_hdr() -> &'static Histogram<u64> {
    static EMPTY: std::sync::OnceLock<Histogram<u64>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(new_hdr)
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        Self { hist: None }
    }

    fn hdr(&self) -> &Histogram<u64> {
        self.hist.as_ref().unwrap_or_else(|| empty_hdr())
    }

    fn hdr_mut(&mut self) -> &mut Histogram<u64> {
        self.hist.get_or_insert_with(new_hdr)
    }

    /// Records one latency. Sub-microsecond values count as 1 µs; values above an hour as an hour.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(MAX_MICROS)
            .clamp(1, MAX_MICROS);
        self.hdr_mut()
            .record(micros)
            .expect("value clamped into the histogram's range");
    }

    /// Adds every value of `other` (exact: both share the same bucket layout).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.is_empty() {
            return; // cheap: per-worker histograms are often empty (failures, late sends)
        }
        match &mut self.hist {
            Some(h) => h.add(other.hdr()).expect("histograms share bounds"),
            None => self.hist = other.hist.clone(),
        }
    }

    /// The underlying HDR histogram (values in µs), e.g. for an interval log.
    pub fn as_hdr(&self) -> &Histogram<u64> {
        self.hdr()
    }

    /// Empties the histogram, keeping its buckets' memory for reuse.
    pub fn reset(&mut self) {
        if let Some(h) = &mut self.hist
            && !h.is_empty()
        {
            h.reset();
        }
    }

    pub fn count(&self) -> u64 {
        self.hist.as_ref().map_or(0, |h| h.len())
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Smallest recorded value in milliseconds (0 when empty).
    pub fn min_ms(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.hdr().min() as f64 / 1000.0
        }
    }

    pub fn max_ms(&self) -> f64 {
        self.hdr().max() as f64 / 1000.0
    }

    pub fn mean_ms(&self) -> f64 {
        self.hdr().mean() / 1000.0
    }

    pub fn stddev_ms(&self) -> f64 {
        self.hdr().stdev() / 1000.0
    }

    /// The value at `percentile` (0–100) in milliseconds.
    pub fn percentile_ms(&self, percentile: f64) -> f64 {
        self.hdr().value_at_percentile(percentile) as f64 / 1000.0
    }

    /// Non-zero buckets as (value in µs, count), the exact, portable form used in JSON results.
    pub fn to_data(&self) -> HistogramData {
        HistogramData {
            unit: "us".to_string(),
            significant_digits: 3,
            buckets: self
                .hdr()
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    /// Rebuilds a histogram from [`HistogramData`]; values out of range are clamped.
    pub fn from_data(data: &HistogramData) -> Self {
        let mut h = Self::new();
        for &(value, count) in &data.buckets {
            h.hdr_mut()
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
    fn empty_histograms_allocate_nothing_and_reset_keeps_memory() {
        let mut h = LatencyHistogram::new();
        assert!(h.hist.is_none());
        assert_eq!(
            (h.count(), h.max_ms(), h.percentile_ms(99.0)),
            (0, 0.0, 0.0)
        );
        let mut other = LatencyHistogram::new();
        h.merge(&other);
        assert!(h.hist.is_none());
        other.record(Duration::from_micros(700));
        h.merge(&other);
        assert_eq!(h.count(), 1);
        h.reset();
        assert!(h.hist.is_some() && h.is_empty());
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

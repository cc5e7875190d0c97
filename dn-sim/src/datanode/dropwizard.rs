//! A Dropwizard (Codahale metrics 3) `Timer` as Ratis 3.2.1 keeps one and Ozone 2.2.0's `/prom`
//! prints it: an exact count and a sample of the durations in an `ExponentiallyDecayingReservoir`
//! (1,028 samples, alpha 0.015: a forward-decaying priority sample biased to roughly the last five
//! minutes, rescaled every hour), whose `WeightedSnapshot` gives the quantiles. Prometheus's
//! `DropwizardExports` prints it as a summary of seconds: quantiles 0.5, 0.75, 0.95, 0.98, 0.99,
//! 0.999 (`nanos * (1.0 / 1e9)` as Java multiplies) and `_count`.
//!
//! Recording never waits: the count is an atomic, and a sample finds the reservoir busy (another
//! thread recording or a scrape) is left out of it, as a sample of low priority would be. The
//! quantiles stay a sample of the durations, as Dropwizard's are.

use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Dropwizard's `ExponentiallyDecayingReservoir` defaults.
const SIZE: usize = 1028;
const ALPHA: f64 = 0.015;
const RESCALE_EVERY: Duration = Duration::from_secs(3600);

/// The quantiles `DropwizardExports` prints, with their label values.
pub const QUANTILES: [(f64, &str); 6] = [
    (0.5, "0.5"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
];

pub struct Timer {
    count: AtomicU64,
    reservoir: Mutex<Reservoir>,
}

struct Reservoir {
    /// Dropwizard's clock ticks in whole seconds for the weights.
    epoch: Instant,
    start_secs: u64,
    next_rescale: Instant,
    samples: BinaryHeap<Sample>,
    rng: rand::rngs::SmallRng,
}

/// A kept sample, ordered so that the heap's top is the lowest priority (the one to evict).
struct Sample {
    priority: f64,
    weight: f64,
    nanos: u64,
}

impl PartialEq for Sample {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Sample {}
impl PartialOrd for Sample {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Sample {
    fn cmp(&self, other: &Self) -> Ordering {
        other.priority.total_cmp(&self.priority)
    }
}

impl Default for Timer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer {
    pub fn new() -> Self {
        let now = Instant::now();
        Self {
            count: AtomicU64::new(0),
            reservoir: Mutex::new(Reservoir {
                epoch: now,
                start_secs: 0,
                next_rescale: now + RESCALE_EVERY,
                // Grown on use: a DataNode's timers that never tick (most of them, with
                // `--datanodes`) cost no reservoir.
                samples: BinaryHeap::new(),
                rng: rand::rngs::SmallRng::seed_from_u64(0x5eed_d00d),
            }),
        }
    }

    /// Records one duration.
    pub fn update(&self, elapsed: Duration) {
        self.update_at(elapsed, Instant::now());
    }

    fn update_at(&self, elapsed: Duration, now: Instant) {
        self.count.fetch_add(1, Relaxed);
        let Ok(mut r) = self.reservoir.try_lock() else {
            return;
        };
        r.add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX), now);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// The quantiles of [`QUANTILES`] in nanoseconds, as `WeightedSnapshot.getValue` gives
    /// them (0 when nothing was sampled).
    pub fn quantiles_nanos(&self) -> [f64; 6] {
        let r = self.reservoir.lock().unwrap_or_else(|e| e.into_inner());
        let mut values: Vec<(u64, f64)> = r.samples.iter().map(|s| (s.nanos, s.weight)).collect();
        drop(r);
        let mut out = [0.0; 6];
        if values.is_empty() {
            return out;
        }
        values.sort_by_key(|&(nanos, _)| nanos);
        let total: f64 = values.iter().map(|&(_, w)| w).sum();
        // quantile[i]: the normalised weight of the values below values[i].
        let mut below = Vec::with_capacity(values.len());
        let mut acc = 0.0;
        for &(_, w) in &values {
            below.push(acc);
            acc += if total == 0.0 { 0.0 } else { w / total };
        }
        for (slot, &(q, _)) in out.iter_mut().zip(QUANTILES.iter()) {
            // Arrays.binarySearch, then the index of the greatest quantile below q.
            let pos = match below.binary_search_by(|x| x.total_cmp(&q)) {
                Ok(i) => i,
                Err(insert) => insert.saturating_sub(1),
            };
            *slot = values[pos.min(values.len() - 1)].0 as f64;
        }
        out
    }

    /// Hands the summary's series to `put(name, type, labels, value)`: a quantile line per
    /// [`QUANTILES`], labelled `quantile` before `labels`' own (`labels` is `{a="b",…,}`), and
    /// `_count`. The `_count` sample belongs to `name`'s family, so its suffix rides in front of
    /// its labels (`_count{…}`): the renderer prints `name` then the labels string.
    pub fn render_into(
        &self,
        name: &str,
        labels: &str,
        put: &mut dyn FnMut(String, &'static str, String, String),
    ) {
        let inner = labels.strip_prefix('{').unwrap_or(labels);
        for (nanos, (_, q)) in self.quantiles_nanos().into_iter().zip(QUANTILES) {
            put(
                name.into(),
                "summary",
                format!("{{quantile=\"{q}\",{inner}"),
                super::prom_text::java_double(nanos * (1.0 / 1e9)),
            );
        }
        put(
            name.into(),
            "summary",
            format!("_count{labels}"),
            super::prom_text::java_double(self.count() as f64),
        );
    }
}

impl Reservoir {
    fn add(&mut self, nanos: u64, now: Instant) {
        if now >= self.next_rescale {
            self.rescale(now);
        }
        let t = now.duration_since(self.epoch).as_secs() - self.start_secs;
        let weight = (ALPHA * t as f64).exp();
        // ThreadLocalRandom.nextDouble() is in [0, 1); a 0 would give an infinite priority.
        let u: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
        let sample = Sample {
            priority: weight / u,
            weight,
            nanos,
        };
        if self.samples.len() < SIZE {
            self.samples.push(sample);
        } else if self
            .samples
            .peek()
            .is_some_and(|lowest| lowest.priority < sample.priority)
        {
            self.samples.pop();
            self.samples.push(sample);
        }
    }

    /// Dropwizard's hourly rescale: weights and priorities relative to a new start.
    fn rescale(&mut self, now: Instant) {
        let old = self.start_secs;
        self.start_secs = now.duration_since(self.epoch).as_secs();
        self.next_rescale = now + RESCALE_EVERY;
        let factor = (-ALPHA * (self.start_secs - old) as f64).exp();
        let samples = std::mem::take(&mut self.samples);
        self.samples = samples
            .into_iter()
            .map(|s| Sample {
                priority: s.priority * factor,
                weight: s.weight * factor,
                nanos: s.nanos,
            })
            .filter(|s| s.weight != 0.0)
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &Timer) -> Vec<String> {
        let mut lines = Vec::new();
        t.render_into(
            "ratis_server_clientWriteRequest",
            "{instance=\"i\",group=\"group-G\",}",
            &mut |name, kind, labels, value| lines.push(format!("{kind} {name}{labels} {value}")),
        );
        lines
    }

    #[test]
    fn an_unused_timer_prints_zeros_as_a_real_datanode_does() {
        let lines = render(&Timer::new());
        assert_eq!(lines.len(), 7);
        assert_eq!(
            lines[0],
            "summary ratis_server_clientWriteRequest{quantile=\"0.5\",instance=\"i\",group=\"group-G\",} 0.0"
        );
        assert_eq!(
            lines[6],
            "summary ratis_server_clientWriteRequest_count{instance=\"i\",group=\"group-G\",} 0.0"
        );
    }

    #[test]
    fn seconds_are_printed_as_java_multiplies_them() {
        let t = Timer::new();
        t.update(Duration::from_nanos(55_294_194));
        let lines = render(&t);
        // The real DataNode's line for a single 55,294,194 ns sample.
        assert!(
            lines.contains(&"summary ratis_server_clientWriteRequest{quantile=\"0.999\",instance=\"i\",group=\"group-G\",} 0.055294194000000005".to_string()),
            "{lines:?}"
        );
        assert!(lines[6].ends_with(" 1.0"));
    }

    #[test]
    fn quantiles_of_equal_weights_are_the_sample_s_order_statistics() {
        let t = Timer::new();
        let now = Instant::now();
        for ms in 1..=100u64 {
            t.update_at(Duration::from_millis(ms), now);
        }
        let q = t.quantiles_nanos();
        // WeightedSnapshot: the value whose cumulative weight below is the greatest at most q,
        // i.e. sample floor(100 q) + 1 in exact arithmetic; Dropwizard sums the weights in
        // doubles as this does, which may land one sample lower.
        for (got, (quantile, _)) in q.iter().zip(QUANTILES) {
            let exact = ((quantile * 100.0).floor() + 1.0).min(100.0) * 1e6;
            assert!(
                (exact - 1e6..=exact).contains(got),
                "q{quantile}: {got} vs {exact}: {q:?}"
            );
        }
        assert_eq!(t.count(), 100);
    }

    #[test]
    fn the_reservoir_keeps_1028_samples_and_favours_recent_ones() {
        let t = Timer::new();
        let start = Instant::now();
        for _ in 0..5_000 {
            t.update_at(Duration::from_millis(1), start);
        }
        // Ten minutes on: newer samples weigh e^(0.015 × 600) ≈ 8,100 times as much.
        let later = start + Duration::from_secs(600);
        for _ in 0..2_000 {
            t.update_at(Duration::from_millis(100), later);
        }
        assert_eq!(t.count(), 7_000);
        assert_eq!(t.reservoir.lock().unwrap().samples.len(), SIZE);
        let q = t.quantiles_nanos();
        assert_eq!(q[0], 100e6, "the median is the recent duration: {q:?}");
    }

    #[test]
    fn an_hourly_rescale_keeps_the_order_of_the_samples() {
        let t = Timer::new();
        let start = Instant::now();
        for ms in 1..=10u64 {
            t.update_at(Duration::from_millis(ms), start);
        }
        t.update_at(Duration::from_millis(50), start + RESCALE_EVERY);
        let r = t.reservoir.lock().unwrap();
        assert_eq!(r.samples.len(), 11);
        assert!(
            r.samples
                .iter()
                .all(|s| s.weight.is_finite() && s.weight > 0.0)
        );
    }
}

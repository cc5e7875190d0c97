//! One shared storage device for chunk data: `--disk-bandwidth RATE` and `--disk-latency SPEC`.
//!
//! The device is a single timeline. A request of `B` bytes arriving at `t` is transferred from
//! `start = max(t, free_at)` to `end = start + B / bandwidth`, and `free_at` becomes `end`; the
//! caller waits `end − t` plus one latency sample. Large payloads therefore cost time in
//! proportion to their size across all handlers together, and an idle device gives no credit for
//! the time it was idle.
//!
//! The latency is added to the caller's wait but does not occupy the device: it models access
//! time on a device that overlaps requests (an SSD with a queue), while bandwidth is the resource
//! they share. `free_at` is an `AtomicU64` of nanoseconds since the model's epoch, advanced with
//! `compare_exchange`, so concurrent handlers never block each other.

use crate::sim::delay::DelaySpec;
use rand::Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiskModelError {
    #[error("--disk-bandwidth must be a positive number of bytes per second, not {0}")]
    Bandwidth(f64),
}

#[derive(Debug)]
pub struct DiskModel {
    epoch: Instant,
    /// Nanoseconds of transfer per byte; `None` = unlimited bandwidth.
    ns_per_byte: Option<f64>,
    bandwidth: Option<f64>,
    latency: Option<DelaySpec>,
    /// When the device finishes its last accepted transfer, in ns since `epoch`.
    free_at: AtomicU64,
}

fn since(epoch: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

impl DiskModel {
    /// A device with the given bandwidth (`None` = unlimited) and per-request latency (`None` =
    /// none), with its epoch now. With neither, [`reserve`](Self::reserve) always returns zero.
    pub fn new(
        bandwidth_bytes_per_sec: Option<f64>,
        latency: Option<DelaySpec>,
    ) -> Result<Self, DiskModelError> {
        Self::with_epoch(Instant::now(), bandwidth_bytes_per_sec, latency)
    }

    /// As [`new`](Self::new) with an explicit epoch: arrivals before it count as arriving at it.
    pub fn with_epoch(
        epoch: Instant,
        bandwidth_bytes_per_sec: Option<f64>,
        latency: Option<DelaySpec>,
    ) -> Result<Self, DiskModelError> {
        let ns_per_byte = match bandwidth_bytes_per_sec {
            None => None,
            Some(bw) if bw.is_finite() && bw > 0.0 => Some(1e9 / bw),
            Some(bw) => return Err(DiskModelError::Bandwidth(bw)),
        };
        Ok(DiskModel {
            epoch,
            ns_per_byte,
            bandwidth: bandwidth_bytes_per_sec,
            latency,
            free_at: AtomicU64::new(0),
        })
    }

    /// False when the model can only ever return zero, so the caller may skip it.
    pub fn is_enabled(&self) -> bool {
        self.ns_per_byte.is_some() || self.latency.is_some()
    }

    pub fn bandwidth(&self) -> Option<f64> {
        self.bandwidth
    }

    pub fn latency(&self) -> Option<&DelaySpec> {
        self.latency.as_ref()
    }

    /// The time the device needs to move `bytes`, without queueing.
    pub fn transfer_time(&self, bytes: u64) -> Duration {
        Duration::from_nanos(self.transfer_nanos(bytes))
    }

    fn transfer_nanos(&self, bytes: u64) -> u64 {
        match self.ns_per_byte {
            // Saturating float → int conversion; a u64 of ns is 584 years.
            Some(ns) => (bytes as f64 * ns).round() as u64,
            None => 0,
        }
    }

    /// Books a transfer of `bytes` arriving at `now` and returns how long the caller must wait
    /// before answering: queueing + transfer + one latency sample (drawn from `rng` only when a
    /// latency is configured).
    pub fn reserve<R: Rng + ?Sized>(&self, bytes: u64, now: Instant, rng: &mut R) -> Duration {
        let latency = self
            .latency
            .as_ref()
            .map_or(Duration::ZERO, |spec| spec.sample(rng));
        let transfer = self.transfer_nanos(bytes);
        if transfer == 0 {
            return latency;
        }
        let t = since(self.epoch, now);
        let mut free = self.free_at.load(Ordering::Acquire);
        let end = loop {
            let end = t.max(free).saturating_add(transfer);
            match self
                .free_at
                .compare_exchange_weak(free, end, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break end,
                Err(current) => free = current,
            }
        };
        Duration::from_nanos(end - t) + latency
    }

    /// Transfer time already booked ahead of `now` (for a gauge); zero when the device is idle.
    pub fn backlog(&self, now: Instant) -> Duration {
        let free = self.free_at.load(Ordering::Acquire);
        Duration::from_nanos(free.saturating_sub(since(self.epoch, now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    const MIB: u64 = 1 << 20;

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(0)
    }

    #[test]
    fn simultaneous_requests_queue_on_the_device() {
        let epoch = Instant::now();
        // 100 MiB/s: 4 MiB take 40 ms.
        let disk = DiskModel::with_epoch(epoch, Some(100.0 * MIB as f64), None).unwrap();
        let now = epoch + Duration::from_secs(1);
        for k in 1..=8u64 {
            let wait = disk.reserve(4 * MIB, now, &mut rng());
            assert_eq!(wait, Duration::from_millis(40 * k), "request {k}");
        }
        assert_eq!(disk.backlog(now), Duration::from_millis(320));
        assert_eq!(
            disk.backlog(now + Duration::from_millis(300)),
            Duration::from_millis(20)
        );
        assert_eq!(disk.backlog(now + Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn idle_device_gives_no_credit_and_partial_overlap_queues() {
        let epoch = Instant::now();
        let disk = DiskModel::with_epoch(epoch, Some(1e9), None).unwrap(); // 1 byte/ns
        let at = |ms: u64| epoch + Duration::from_millis(ms);
        let mut r = rng();
        assert_eq!(
            disk.reserve(10_000_000, at(0), &mut r),
            Duration::from_millis(10)
        );
        // Arrives after the device went idle: no queueing, no credit.
        assert_eq!(
            disk.reserve(10_000_000, at(100), &mut r),
            Duration::from_millis(10)
        );
        // Arrives 5 ms into that transfer: waits the remaining 5 ms, then its own 10 ms.
        assert_eq!(
            disk.reserve(10_000_000, at(105), &mut r),
            Duration::from_millis(15)
        );
        // Before the epoch counts as at the epoch.
        let early = DiskModel::with_epoch(at(50), Some(1e9), None).unwrap();
        assert_eq!(
            early.reserve(1_000_000, epoch, &mut r),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn concurrent_reservations_tile_the_timeline() {
        let epoch = Instant::now();
        let disk = DiskModel::with_epoch(epoch, Some(1e9), None).unwrap();
        let (threads, per_thread, bytes) = (4u64, 250u64, 1_000u64);
        let mut waits: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let disk = &disk;
                    s.spawn(move || {
                        let mut r = SmallRng::seed_from_u64(i);
                        (0..per_thread)
                            .map(|_| disk.reserve(bytes, epoch, &mut r).as_nanos() as u64)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        waits.sort_unstable();
        let expected: Vec<u64> = (1..=threads * per_thread).map(|k| k * bytes).collect();
        assert_eq!(waits, expected);
    }

    #[test]
    fn latency_adds_to_the_wait_but_not_to_the_device() {
        let epoch = Instant::now();
        let disk = DiskModel::with_epoch(epoch, Some(1e9), Some("1ms".parse().unwrap())).unwrap();
        let mut r = rng();
        assert_eq!(
            disk.reserve(1_000_000, epoch, &mut r),
            Duration::from_millis(2)
        );
        assert_eq!(
            disk.reserve(1_000_000, epoch, &mut r),
            Duration::from_millis(3)
        );
        assert_eq!(disk.backlog(epoch), Duration::from_millis(2));
        assert_eq!(disk.reserve(0, epoch, &mut r), Duration::from_millis(1));
        let latency_only = DiskModel::new(None, Some("uniform:1ms..2ms".parse().unwrap())).unwrap();
        let w = latency_only.reserve(32 * MIB, Instant::now(), &mut r);
        assert!(
            w >= Duration::from_millis(1) && w <= Duration::from_millis(2),
            "{w:?}"
        );
    }

    #[test]
    fn disabled_and_invalid() {
        let disk = DiskModel::new(None, None).unwrap();
        assert!(!disk.is_enabled());
        assert_eq!(
            disk.reserve(32 * MIB, Instant::now(), &mut rng()),
            Duration::ZERO
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(DiskModel::new(Some(bad), None).is_err(), "{bad}");
        }
        let disk = DiskModel::new(Some(common::units::parse_rate("500MiB/s").unwrap()), None);
        assert_eq!(
            disk.unwrap().transfer_time(500 * MIB),
            Duration::from_secs(1)
        );
    }
}

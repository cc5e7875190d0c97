//! Seeded randomness for the delay, disk and fault models without a shared lock on the hot path.
//!
//! Each gRPC stream (or any other unit of sequential work) takes its own [`SmallRng`] from an
//! [`RngFactory`] once, when it starts, and draws from it without synchronisation. Stream `i` is
//! seeded with `seed ^ splitmix64(i)`, where `i` counts the calls to [`RngFactory::for_stream`].
//!
//! Repeatability guarantee, stated exactly: for the same `--seed`, the `i`-th stream obtained
//! from the factory yields the same sequence of numbers, so the same requests, in the same order,
//! on that stream get the same delays and faults. What is *not* guaranteed across runs:
//! - which connection becomes stream `i` when several streams open concurrently (use
//!   [`RngFactory::stream`] with an index of your own if you can number streams deterministically);
//! - the draws when a stream's request sequence differs (another command mix, a retried request);
//! - wall-clock effects: the disk model's waits depend on arrival times, not only on draws.
//!
//! A single client that sends its requests in order on one stream gets identical draws run after
//! run. Models that draw from the same stream RNG consume from one sequence, so turning a model on
//! or off shifts the draws of the others; [`RngFactory::fork`] gives each model its own factory.

use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's output function (Steele, Lea, Flood 2014): a bijection on `u64` that spreads
/// consecutive counters over the whole range.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hands out independent, reproducibly seeded [`SmallRng`]s. Share it by reference or `Arc`;
/// only [`for_stream`](Self::for_stream) touches the atomic counter.
#[derive(Debug)]
pub struct RngFactory {
    seed: u64,
    next_stream: AtomicU64,
}

impl RngFactory {
    pub fn new(seed: u64) -> Self {
        RngFactory {
            seed,
            next_stream: AtomicU64::new(0),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The RNG for the next stream: stream numbers are handed out 0, 1, 2, … in call order.
    pub fn for_stream(&self) -> SmallRng {
        let index = self.next_stream.fetch_add(1, Ordering::Relaxed);
        self.stream(index)
    }

    /// The RNG of stream `index`, independent of the counter: the same `(seed, index)` always
    /// gives the same sequence.
    pub fn stream(&self, index: u64) -> SmallRng {
        SmallRng::seed_from_u64(self.seed ^ splitmix64(index))
    }

    /// A factory with its own seed derived from this one and `label` (e.g. `"delay"`, `"fault"`,
    /// `"disk"`), and its own stream counter, so that each model's draws do not depend on whether
    /// the other models are enabled.
    pub fn fork(&self, label: &str) -> RngFactory {
        // FNV-1a: stable across Rust releases, unlike `DefaultHasher`.
        let hash = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        RngFactory::new(splitmix64(self.seed ^ hash))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn first(rng: &mut SmallRng, n: usize) -> Vec<u64> {
        (0..n).map(|_| rng.random()).collect()
    }

    #[test]
    fn same_seed_same_streams() {
        let a = RngFactory::new(42);
        let b = RngFactory::new(42);
        for _ in 0..3 {
            assert_eq!(first(&mut a.for_stream(), 8), first(&mut b.for_stream(), 8));
        }
        assert_eq!(first(&mut a.stream(1), 8), first(&mut b.stream(1), 8));
    }

    #[test]
    fn streams_and_seeds_differ() {
        let f = RngFactory::new(42);
        let s0 = first(&mut f.for_stream(), 8);
        let s1 = first(&mut f.for_stream(), 8);
        assert_ne!(s0, s1);
        assert_eq!(s0, first(&mut f.stream(0), 8));
        assert_eq!(s1, first(&mut f.stream(1), 8));
        assert_ne!(s0, first(&mut RngFactory::new(43).stream(0), 8));
    }

    #[test]
    fn forks_are_stable_and_distinct() {
        let f = RngFactory::new(7);
        assert_eq!(
            f.fork("delay").seed(),
            RngFactory::new(7).fork("delay").seed()
        );
        assert_ne!(f.fork("delay").seed(), f.fork("fault").seed());
        assert_ne!(
            f.fork("delay").seed(),
            RngFactory::new(8).fork("delay").seed()
        );
    }

    #[test]
    fn splitmix_reference_values() {
        // First outputs of the reference SplitMix64 generator seeded with 0 (state += golden
        // gamma before each output): splitmix64(k · gamma) is its (k+1)-th output.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
    }
}

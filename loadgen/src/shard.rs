//! One test split over N loadgen processes (`--shard I/N`, or `--shards N` with the
//! `JOB_COMPLETION_INDEX` a Kubernetes Indexed Job sets): which part of the whole each shard does.
//!
//! The split is by request index, not by rounding a fraction: the whole test numbers its requests
//! 0, 1, 2, …, and shard I does those with index ≡ I (mod N). So the shards' shares of `-n` add up
//! to `-n` exactly and differ by at most one, and in the open loop shard I's k-th request is the
//! whole plan's request k·N + I, at the time the whole plan gives it ([`crate::schedule::Plan`]):
//! the union of the shards' send times is the one process's, for a constant rate, a step plan
//! or a ramp alike. A target list is dealt out the same way. Also here: `--start-at` (when the
//! measured phase begins, on the wall clock).
//!
//! Pure arithmetic and parsing; it knows no flags (the caller names them in its errors).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The environment variable a Kubernetes Indexed Job sets in each pod (0 … completions − 1).
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Shard `index` of `count` (0 ≤ index < count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// `I/N` with 0 ≤ I < N.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (i, n) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("'{s}' is not I/N (shard I of N, 0 ≤ I < N)"))?;
        let count = parse_count(n)?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| format!("'{i}' is not a shard index (0 ≤ I < N)"))?;
        Shard::new(index, count)
    }

    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 {
            return Err("the number of shards must be at least 1".into());
        }
        if index >= count {
            return Err(format!(
                "shard index {index} is not below the number of shards {count}"
            ));
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total` items numbered `first`, `first + 1`, …: those whose number
    /// is ≡ index (mod count). The parts of all shards add up to `total`, and differ by at most one.
    pub fn share(&self, total: u64, first: u64) -> u64 {
        let n = u64::from(self.count);
        let i = u64::from(self.index);
        // The first number ≥ first that is ≡ i (mod n), as an offset from first.
        let skip = (i + n - first % n) % n;
        if skip >= total {
            0
        } else {
            (total - skip - 1) / n + 1
        }
    }

    /// The targets this shard sends to. With at least as many targets as shards, shard I takes
    /// targets I, I + N, I + 2N, … (each target has exactly one shard); with fewer, shard I takes
    /// target I mod len (each target gets ⌊N/len⌋ or ⌈N/len⌉ shards).
    pub fn targets<T: Clone>(&self, list: &[T]) -> Vec<T> {
        let (i, n) = (self.index as usize, self.count as usize);
        if list.is_empty() {
            return Vec::new();
        }
        if list.len() >= n {
            list.iter().skip(i).step_by(n).cloned().collect()
        } else {
            vec![list[i % list.len()].clone()]
        }
    }
}

/// The number of shards: a whole number ≥ 1.
pub fn parse_count(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of shards (1 or more)"))?;
    if n == 0 {
        return Err("the number of shards must be at least 1".into());
    }
    Ok(n)
}

/// `--shards N` with the index from the environment (`JOB_COMPLETION_INDEX`): `env` is the
/// variable's value, `None` when it is not set.
pub fn from_env(count: u32, env: Option<&str>) -> Result<Shard, String> {
    let value = env.ok_or_else(|| {
        format!("{INDEX_ENV} is not set (an Indexed Job sets it; or give --shard I/N)")
    })?;
    let index: u32 = value
        .trim()
        .parse()
        .map_err(|_| format!("{INDEX_ENV}='{value}' is not a shard index (0 ≤ I < {count})"))?;
    Shard::new(index, count).map_err(|e| format!("{INDEX_ENV}={value}: {e}"))
}

/// `--start-at`: an RFC 3339 instant (`2026-12-03T18:00:00Z`, `…+02:00`, fractional seconds
/// allowed) or `+DURATION` from `now` (`+10s`).
pub fn parse_start_at(s: &str, now: SystemTime) -> Result<SystemTime, String> {
    let t = s.trim();
    if let Some(d) = t.strip_prefix('+') {
        let d = common::units::parse_duration(d).map_err(|e| format!("'{s}': {e}"))?;
        return now
            .checked_add(d)
            .ok_or_else(|| format!("'{s}' is too far in the future"));
    }
    parse_rfc3339(t).ok_or_else(|| {
        format!("'{s}' is neither an RFC 3339 instant (2026-12-03T18:00:00Z) nor +DURATION (+10s)")
    })
}

/// RFC 3339 with `Z` or a `±HH:MM` offset (humantime reads the UTC forms).
fn parse_rfc3339(t: &str) -> Option<SystemTime> {
    // The date and time are 19 characters; fractional seconds may follow, then the zone.
    if t.len() < 20 || !t.is_char_boundary(19) {
        return None;
    }
    let (zone_at, sign) = t[19..]
        .char_indices()
        .find(|(_, c)| matches!(c, 'Z' | 'z' | '+' | '-'))
        .map(|(i, c)| (19 + i, c))?;
    let local = &t[..zone_at];
    let utc = humantime::parse_rfc3339_weak(local).ok()?;
    match sign {
        'Z' | 'z' if zone_at + 1 == t.len() => Some(utc),
        '+' | '-' => {
            let zone = &t[zone_at + 1..];
            let (h, m) = zone.split_once(':')?;
            if h.len() != 2 || m.len() != 2 {
                return None;
            }
            let (h, m): (u64, u64) = (h.parse().ok()?, m.parse().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            let offset = Duration::from_secs(h * 3600 + m * 60);
            // Local time = UTC + offset, so UTC = local − offset.
            if sign == '+' {
                utc.checked_sub(offset)
            } else {
                utc.checked_add(offset)
            }
        }
        _ => None,
    }
}

/// Milliseconds since the Unix epoch, fractional (negative before it, which no run is).
pub fn unix_ms(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64() * 1000.0,
        Err(e) => -e.duration().as_secs_f64() * 1000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_total_and_differ_by_at_most_one() {
        // Property over many (total, count, first): no item lost or doubled to rounding.
        let mut cases = 0;
        for count in 1..=17u32 {
            for total in (0..200u64).chain([1_000_003, u64::MAX / 2]) {
                for first in [0u64, 1, 5, 999, 123_456_789] {
                    let shares: Vec<u64> = (0..count)
                        .map(|i| Shard::new(i, count).unwrap().share(total, first))
                        .collect();
                    assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {count}");
                    let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{shares:?}");
                    cases += 1;
                }
            }
        }
        assert!(cases > 10_000);
    }

    #[test]
    fn a_share_counts_exactly_the_indices_of_its_residue() {
        for count in 1..=7u32 {
            for first in 0..10u64 {
                for total in 0..30u64 {
                    for i in 0..count {
                        let by_hand = (first..first + total)
                            .filter(|g| g % u64::from(count) == u64::from(i))
                            .count() as u64;
                        assert_eq!(Shard::new(i, count).unwrap().share(total, first), by_hand);
                    }
                }
            }
        }
        // Without an offset, the remainder goes to the first shards.
        let shares: Vec<u64> = (0..4)
            .map(|i| Shard { index: i, count: 4 }.share(10, 0))
            .collect();
        assert_eq!(shares, [3, 3, 2, 2]);
    }

    #[test]
    fn targets_are_dealt_out_to_every_shard_and_each_target_is_used() {
        let list: Vec<String> = (0..5).map(|i| format!("dn{i}:9859")).collect();
        for count in 1..=12u32 {
            let mut used = vec![0; list.len()];
            for i in 0..count {
                let mine = Shard::new(i, count).unwrap().targets(&list);
                assert!(!mine.is_empty(), "shard {i}/{count} has no target");
                for t in &mine {
                    used[list.iter().position(|x| x == t).unwrap()] += 1;
                }
            }
            assert!(used.iter().all(|&u| u > 0), "{count}: {used:?}");
            if count as usize <= list.len() {
                assert!(used.iter().all(|&u| u == 1), "{count}: {used:?}");
            } else {
                let (lo, hi) = (used.iter().min().unwrap(), used.iter().max().unwrap());
                assert!(hi - lo <= 1, "{count}: {used:?}");
            }
        }
    }

    #[test]
    fn shard_flags_and_the_index_variable_are_checked() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse(" 0/1 "), Ok(Shard { index: 0, count: 1 }));
        for bad in ["4/4", "5/4", "0/0", "1", "a/4", "1/b", "-1/4", "", "/"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(from_env(3, Some("2")), Ok(Shard { index: 2, count: 3 }));
        for (env, want) in [
            (None, "not set"),
            (Some("3"), "not below"),
            (Some("x"), "not a shard index"),
            (Some(""), "not a shard index"),
            (Some("-1"), "not a shard index"),
        ] {
            let e = from_env(3, env).unwrap_err();
            assert!(e.contains(INDEX_ENV) && e.contains(want), "{env:?}: {e}");
        }
        assert!(parse_count("0").is_err());
        assert!(parse_count("x").is_err());
    }

    #[test]
    fn start_at_reads_rfc3339_and_relative_times() {
        let at = |s| parse_start_at(s, UNIX_EPOCH).map(unix_ms);
        assert_eq!(at("+10s"), Ok(10_000.0));
        assert_eq!(at("+1m"), Ok(60_000.0));
        assert_eq!(at("1970-01-01T00:00:10Z"), Ok(10_000.0));
        assert_eq!(at("1970-01-01T00:00:10.250Z"), Ok(10_250.0));
        assert_eq!(at("1970-01-01T02:00:10+02:00"), Ok(10_000.0));
        assert_eq!(at("1970-01-01T00:00:10-01:30"), Ok(5_410_000.0));
        assert_eq!(
            at("2026-12-03T18:00:00Z"),
            Ok(1_796_320_800_000.0),
            "a date of the future"
        );
        for bad in [
            "",
            "+",
            "+ten",
            "tomorrow",
            "2026-12-03T18:00:00",
            "2026-12-03T18:00:00+2",
            "2026-12-03T18:00:00+25:00",
            "2026-13-03T18:00:00Z",
            "2026-12-03 18:00:00Z junk",
            "2026-12-03T18:00:00Zjunk",
            "é2026-12-03T18:00:00Z",
        ] {
            assert!(at(bad).is_err(), "{bad}");
        }
    }
}

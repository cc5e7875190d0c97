//! Open-loop send plans (`--rate`, `--rate-schedule`): when the k-th request of a run is meant to
//! be sent, independent of when earlier answers came back.
//!
//! A plan is a rate r(t) in requests per second over time since the run's start. Its integral
//! N(t) counts the requests scheduled by time t; request k (0-based) is intended at the t where
//! N(t) = k, so request 0 goes at t = 0. Forms:
//!
//! - `R` (`--rate R`): constant, t_k = k / R;
//! - `step:start=A,step=S,every=D,end=B`: A/s for D, then A+S, A+2S, … until B, which holds;
//! - `ramp:from=A,to=B,over=D`: linear from A to B over D, then B holds.
//!
//! Everything here is pure arithmetic on `f64` seconds; the engine adds the run's start instant.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// At most this many steps in a step plan, so that the segment table stays small.
const MAX_STEPS: usize = 100_000;

#[derive(Clone, Debug, PartialEq)]
pub enum RateSchedule {
    Constant(f64),
    Step {
        start: f64,
        step: f64,
        every: Duration,
        end: f64,
    },
    Ramp {
        from: f64,
        to: f64,
        over: Duration,
    },
}

/// A piece of the plan with a constant rate: from `t` (seconds), `count` requests already planned.
#[derive(Clone, Copy, Debug)]
struct Segment {
    t: f64,
    count: f64,
    rate: f64,
}

/// A schedule ready for fast lookups (segments precomputed). A shard's plan
/// ([`Plan::sharded`]) is every `stride`-th request of the whole plan from `offset`: its request
/// k is the whole plan's request k·stride + offset, at the whole plan's time.
#[derive(Clone, Debug)]
pub struct Plan {
    schedule: RateSchedule,
    segments: Vec<Segment>,
    stride: u64,
    offset: u64,
}

impl RateSchedule {
    /// How long the plan takes to reach its final rate and hold it for one step (step plans), or
    /// the ramp's length; `None` for a constant rate, which has no natural end.
    pub fn natural_length(&self) -> Option<Duration> {
        match self {
            RateSchedule::Constant(_) => None,
            RateSchedule::Step { .. } => {
                let plan = Plan::new(self.clone());
                let last = plan.segments.last().expect("a step plan has segments");
                Some(Duration::from_secs_f64(last.t) + self.step_every())
            }
            RateSchedule::Ramp { over, .. } => Some(*over),
        }
    }

    fn step_every(&self) -> Duration {
        match self {
            RateSchedule::Step { every, .. } => *every,
            _ => Duration::ZERO,
        }
    }

    /// The highest rate the plan reaches.
    pub fn peak_rate(&self) -> f64 {
        match *self {
            RateSchedule::Constant(r) => r,
            RateSchedule::Step { start, end, .. } => start.max(end),
            RateSchedule::Ramp { from, to, .. } => from.max(to),
        }
    }
}

impl Plan {
    pub fn new(schedule: RateSchedule) -> Self {
        let segments = match schedule {
            RateSchedule::Constant(r) => vec![Segment {
                t: 0.0,
                count: 0.0,
                rate: r,
            }],
            RateSchedule::Step {
                start,
                step,
                every,
                end,
            } => {
                let d = every.as_secs_f64();
                let mut segments = Vec::new();
                let (mut t, mut count, mut rate) = (0.0, 0.0, start);
                loop {
                    segments.push(Segment { t, count, rate });
                    let reached = if step > 0.0 { rate >= end } else { rate <= end };
                    if reached || segments.len() >= MAX_STEPS {
                        break;
                    }
                    count += rate * d;
                    t += d;
                    rate = if step > 0.0 {
                        (rate + step).min(end)
                    } else {
                        (rate + step).max(end)
                    };
                }
                segments
            }
            // The ramp is handled analytically; one segment marks where the final rate holds.
            RateSchedule::Ramp { from, to, over } => {
                let d = over.as_secs_f64();
                vec![Segment {
                    t: d,
                    count: (from + to) / 2.0 * d,
                    rate: to,
                }]
            }
        };
        Plan {
            schedule,
            segments,
            stride: 1,
            offset: 0,
        }
    }

    /// Shard `index` of `count`: the whole plan's requests index, index + count, index + 2·count…
    pub fn sharded(mut self, index: u32, count: u32) -> Self {
        self.stride = u64::from(count.max(1));
        self.offset = u64::from(index);
        self
    }

    /// The whole test's schedule (of every shard together).
    pub fn schedule(&self) -> &RateSchedule {
        &self.schedule
    }

    /// Seconds from the run's start at which request `k` is intended.
    pub fn time_of(&self, k: u64) -> f64 {
        self.whole_time_of(k.saturating_mul(self.stride).saturating_add(self.offset))
    }

    /// Seconds at which the whole plan's request `k` is intended.
    fn whole_time_of(&self, k: u64) -> f64 {
        let k = k as f64;
        if let RateSchedule::Ramp { from, to, over } = self.schedule {
            let last = self.segments[0];
            if k < last.count {
                // N(t) = from·t + a·t², a = (to − from) / (2·over); the stable root of a·t² + b·t − k.
                let a = (to - from) / (2.0 * over.as_secs_f64());
                let b = from;
                let disc = (b * b + 4.0 * a * k).max(0.0);
                return 2.0 * k / (b + disc.sqrt());
            }
            return last.t + (k - last.count) / last.rate;
        }
        // The last segment whose start count is ≤ k.
        let i = self.segments.partition_point(|s| s.count <= k).max(1) - 1;
        let s = self.segments[i];
        s.t + (k - s.count) / s.rate
    }

    /// N(t): requests planned before `t` seconds (fractional).
    pub fn count_at(&self, t: f64) -> f64 {
        let whole = self.whole_count_at(t);
        ((whole - self.offset as f64) / self.stride as f64).max(0.0)
    }

    fn whole_count_at(&self, t: f64) -> f64 {
        if let RateSchedule::Ramp { from, to, over } = self.schedule {
            let last = self.segments[0];
            if t < last.t {
                let a = (to - from) / (2.0 * over.as_secs_f64());
                return from * t + a * t * t;
            }
            return last.count + (t - last.t) * last.rate;
        }
        let i = self.segments.partition_point(|s| s.t <= t).max(1) - 1;
        let s = self.segments[i];
        s.count + (t - s.t) * s.rate
    }

    /// The first request index intended at or after `t` seconds.
    pub fn first_at_or_after(&self, t: f64) -> u64 {
        let n = self.count_at(t);
        // Guard against rounding: step down while the previous one is still at or after t.
        let mut k = n.ceil().max(0.0) as u64;
        while k > 0 && self.time_of(k - 1) >= t {
            k -= 1;
        }
        k
    }

    /// The planned rate at `t` seconds (a shard's: its share of the whole).
    pub fn rate_at(&self, t: f64) -> f64 {
        self.whole_rate_at(t) / self.stride as f64
    }

    fn whole_rate_at(&self, t: f64) -> f64 {
        if let RateSchedule::Ramp { from, to, over } = self.schedule {
            let d = over.as_secs_f64();
            return if t < d {
                from + (to - from) * t / d
            } else {
                to
            };
        }
        let i = self.segments.partition_point(|s| s.t <= t).max(1) - 1;
        self.segments[i].rate
    }
}

impl fmt::Display for RateSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(*d).to_string();
        match self {
            RateSchedule::Constant(r) => write!(f, "{r}/s"),
            RateSchedule::Step {
                start,
                step,
                every,
                end,
            } => write!(
                f,
                "step:start={start},step={step},every={},end={end}",
                d(every)
            ),
            RateSchedule::Ramp { from, to, over } => {
                write!(f, "ramp:from={from},to={to},over={}", d(over))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(String);

const FORMS: &str =
    "expected step:start=R,step=R,every=DURATION,end=R or ramp:from=R,to=R,over=DURATION";

impl FromStr for RateSchedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |m: String| ScheduleError(format!("'{text}': {m}"));
        let (kind, params) = text
            .trim()
            .split_once(':')
            .ok_or_else(|| err(FORMS.into()))?;
        let mut values = std::collections::BTreeMap::new();
        for part in params.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| err(format!("'{part}' is not KEY=VALUE")))?;
            values.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
        let mut take = |key: &str| {
            values
                .remove(key)
                .ok_or_else(|| err(format!("missing {key}=; {FORMS}")))
        };
        let rate = |v: String| {
            common::units::parse_rate(&v).map_err(|e| ScheduleError(format!("'{text}': {e}")))
        };
        let duration = |v: String| match common::units::parse_duration(&v) {
            Ok(d) if !d.is_zero() => Ok(d),
            Ok(_) => Err(ScheduleError(format!("'{text}': {v} must be > 0"))),
            Err(e) => Err(ScheduleError(format!("'{text}': {e}"))),
        };
        let schedule = match kind.trim().to_ascii_lowercase().as_str() {
            "step" => {
                let start = rate(take("start")?)?;
                let step = rate(take("step")?)?;
                let every = duration(take("every")?)?;
                let end = rate(take("end")?)?;
                if start <= 0.0 || end <= 0.0 || step <= 0.0 {
                    return Err(err("start, step and end must be greater than 0".into()));
                }
                if end < start {
                    return Err(err("end must be at least start".into()));
                }
                if (end - start) / step > MAX_STEPS as f64 {
                    return Err(err(format!("more than {MAX_STEPS} steps")));
                }
                RateSchedule::Step {
                    start,
                    step,
                    every,
                    end,
                }
            }
            "ramp" => {
                let from = rate(take("from")?)?;
                let to = rate(take("to")?)?;
                let over = duration(take("over")?)?;
                if to <= 0.0 {
                    return Err(err("to must be greater than 0".into()));
                }
                RateSchedule::Ramp { from, to, over }
            }
            other => return Err(err(format!("unknown plan '{other}'; {FORMS}"))),
        };
        if let Some(extra) = values.keys().next() {
            return Err(err(format!("unknown key '{extra}'")));
        }
        Ok(schedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn constant_rate_spaces_requests_evenly() {
        let p = Plan::new(RateSchedule::Constant(1000.0));
        assert_eq!(p.time_of(0), 0.0);
        assert!(close(p.time_of(1), 0.001));
        assert!(close(p.time_of(2500), 2.5));
        assert!(close(p.count_at(3.0), 3000.0));
        assert_eq!(p.first_at_or_after(1.0), 1000);
        assert_eq!(p.first_at_or_after(1.0005), 1001);
    }

    #[test]
    fn steps_hold_each_rate_for_their_interval() {
        let s: RateSchedule = "step:start=1000,step=1000,every=10s,end=3000"
            .parse()
            .unwrap();
        let p = Plan::new(s.clone());
        // 10 s at 1000/s, 10 s at 2000/s, then 3000/s.
        assert!(close(p.time_of(10_000), 10.0));
        assert!(close(p.time_of(10_000 + 2000), 11.0));
        assert!(close(p.time_of(30_000), 20.0));
        assert!(close(p.time_of(33_000), 21.0));
        assert_eq!(p.rate_at(5.0), 1000.0);
        assert_eq!(p.rate_at(15.0), 2000.0);
        assert_eq!(p.rate_at(100.0), 3000.0);
        assert_eq!(s.natural_length(), Some(Duration::from_secs(30)));
        for k in [0u64, 1, 9_999, 10_000, 29_999, 30_000, 50_000] {
            assert!(close(p.count_at(p.time_of(k)), k as f64), "{k}");
        }
    }

    #[test]
    fn ramps_follow_the_integral_of_a_linear_rate() {
        let s: RateSchedule = "ramp:from=1000,to=3000,over=10s".parse().unwrap();
        let p = Plan::new(s.clone());
        // N(10 s) = (1000 + 3000) / 2 · 10 = 20000.
        assert!(close(p.time_of(20_000), 10.0));
        assert!(close(p.time_of(23_000), 11.0));
        assert!(close(p.rate_at(5.0), 2000.0));
        // N(5 s) = 1000·5 + 100·25 = 7500.
        assert!(close(p.time_of(7_500), 5.0));
        for k in [1u64, 100, 7_499, 19_999, 40_000] {
            assert!(close(p.count_at(p.time_of(k)), k as f64), "{k}");
            assert!(p.time_of(k) > p.time_of(k - 1));
        }
        // From zero, and downwards.
        let up = Plan::new("ramp:from=0,to=100,over=10s".parse().unwrap());
        assert!(close(up.time_of(500), 10.0));
        let down = Plan::new("ramp:from=3000,to=1000,over=10s".parse().unwrap());
        assert!(close(down.time_of(20_000), 10.0));
        assert!(down.time_of(1) < down.time_of(19_999) - down.time_of(19_998));
        assert_eq!(s.natural_length(), Some(Duration::from_secs(10)));
    }

    #[test]
    fn bad_plans_are_rejected_with_the_reason() {
        for (bad, needle) in [
            ("fast", "expected step"),
            ("step:start=1000,step=1000,every=10s", "missing end="),
            (
                "step:start=1000,step=0,every=10s,end=5000",
                "greater than 0",
            ),
            (
                "step:start=5000,step=10,every=1s,end=1000",
                "at least start",
            ),
            ("ramp:from=1,to=2,over=0s", "must be > 0"),
            ("ramp:from=1,to=2,over=1s,jitter=3", "unknown key 'jitter'"),
            ("sine:from=1", "unknown plan"),
            ("ramp:from=x,to=2,over=1s", "not a rate"),
        ] {
            let e = bad.parse::<RateSchedule>().unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }
}

#[cfg(test)]
mod shard_tests {
    use super::*;

    #[test]
    fn the_shards_send_times_together_are_the_whole_plans() {
        let plans = [
            RateSchedule::Constant(1000.0),
            "step:start=100,step=300,every=1s,end=1000".parse().unwrap(),
            "ramp:from=10,to=5000,over=3s".parse().unwrap(),
        ];
        for schedule in plans {
            let whole = Plan::new(schedule.clone());
            for count in [1u32, 2, 3, 4, 7] {
                let shards: Vec<Plan> = (0..count)
                    .map(|i| Plan::new(schedule.clone()).sharded(i, count))
                    .collect();
                for g in 0..5000u64 {
                    let (i, k) = (g % u64::from(count), g / u64::from(count));
                    // Bit for bit: the same arithmetic on the same whole-plan index.
                    assert_eq!(
                        shards[i as usize].time_of(k),
                        whole.time_of(g),
                        "{schedule} {g}"
                    );
                }
                // The shards' counts before t add up to the whole's (within a request each).
                for t in [0.0, 0.3, 1.0, 2.5, 4.0] {
                    let sum: f64 = shards.iter().map(|p| p.count_at(t)).sum();
                    assert!((sum - whole.count_at(t)).abs() <= f64::from(count), "{t}");
                    let rate: f64 = shards.iter().map(|p| p.rate_at(t)).sum();
                    assert!((rate - whole.rate_at(t)).abs() < 1e-6 * whole.rate_at(t));
                    // A shard's first request at or after t is the whole's first of its residue.
                    let first = whole.first_at_or_after(t);
                    for (i, p) in shards.iter().enumerate() {
                        let k = p.first_at_or_after(t);
                        let g = k * u64::from(count) + i as u64;
                        assert!(
                            g >= first && g < first + u64::from(count),
                            "{t} {i}: {g} vs {first}"
                        );
                    }
                }
            }
        }
    }
}

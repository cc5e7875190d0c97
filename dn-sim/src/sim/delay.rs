//! Per-request service delays: `--delay TYPE=SPEC`.
//!
//! SPEC forms (durations as in [`common::units::parse_duration`]):
//! - `2ms`: a constant;
//! - `uniform:1ms..3ms`: uniform between the two bounds, inclusive;
//! - `normal:mean=2ms,sd=500us`: normal; a negative draw becomes 0 (clamped, not redrawn);
//! - `lognormal:p50=1ms,p99=20ms`: log-normal with that median and 99th percentile
//!   (μ = ln p50, σ = (ln p99 − ln p50) / z₀.₉₉);
//! - `pareto:scale=1ms,shape=1.5`: Pareto type I (minimum `scale`, tail index `shape`);
//! - `percentiles:p50=1ms,p90=3ms,p99=12ms,p100=40ms`: an empirical distribution, sampled by
//!   inverse CDF with linear interpolation between the given points. p0 is 0 unless given; above
//!   the highest given percentile the sample is that percentile's value.
//!
//! Every sample is clamped to `[0, MAX_DELAY]` (the heavy tails of pareto, normal and lognormal
//! could otherwise produce absurd or overflowing durations); a spec whose given durations exceed
//! [`MAX_DELAY`] is rejected when parsed. Key order inside a form is free; [`Display`] writes the
//! canonical text, which parses back to an equal spec.
//!
//! [`Display`]: std::fmt::Display

use crate::sim::cmd_selector::{Assignment, CmdSelector, SelectorError};
use common::proto::Type;
use common::units::parse_duration;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The largest duration a spec may name and a sample may take.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// z such that Φ(z) = 0.99.
const Z_99: f64 = 2.326_347_874_040_841;

const FORMS: &str = "2ms | uniform:1ms..3ms | normal:mean=2ms,sd=500us | \
                     lognormal:p50=1ms,p99=20ms | pareto:scale=1ms,shape=1.5 | \
                     percentiles:p50=1ms,p90=3ms,p99=12ms,p100=40ms";

/// A delay distribution; see the module documentation for the text forms.
#[derive(Debug, Clone, PartialEq)]
pub enum DelaySpec {
    Constant(Duration),
    Uniform { low: Duration, high: Duration },
    Normal { mean: Duration, sd: Duration },
    LogNormal { p50: Duration, p99: Duration },
    Pareto { scale: Duration, shape: f64 },
    Percentiles(Vec<PercentilePoint>),
}

/// One point of an empirical distribution: `value` at percentile `pct` (0–100).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PercentilePoint {
    pub pct: f64,
    pub value: Duration,
}

/// A spec that does not parse or is invalid. The message is one line and lists the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a delay: {reason} (forms: {FORMS})")]
pub struct DelaySpecError {
    pub input: String,
    pub reason: String,
}

/// Formats a duration in the largest of `s`, `ms`, `us`, `ns` that represents it exactly, so that
/// [`parse_duration`] reads back the same value: `2ms`, `1500us`, `0s`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_string();
    }
    for (unit, factor) in [("s", 1_000_000_000u128), ("ms", 1_000_000), ("us", 1_000)] {
        if ns.is_multiple_of(factor) {
            return format!("{}{unit}", ns / factor);
        }
    }
    format!("{ns}ns")
}

/// Parses a duration for a spec, capped at [`MAX_DELAY`]; the error is a reason for a spec error.
pub(crate) fn parse_spec_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|_| format!("'{text}' is not a duration"))?;
    if d > MAX_DELAY {
        return Err(format!(
            "'{text}' is over the limit of {}",
            format_duration(MAX_DELAY)
        ));
    }
    Ok(d)
}

/// Splits `k1=v1,k2=v2` into the values of exactly the keys `KEYS`, in their order; any order,
/// no duplicates, no others.
fn key_values<'a, const N: usize>(text: &'a str, keys: [&str; N]) -> Result<[&'a str; N], String> {
    let mut values: [Option<&str>; N] = [None; N];
    for item in text.split(',') {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' is not KEY=VALUE"))?;
        let key = key.trim();
        let i = keys
            .iter()
            .position(|k| *k == key)
            .ok_or_else(|| format!("unknown key '{key}' (expected {})", keys.join(", ")))?;
        if values[i].replace(value.trim()).is_some() {
            return Err(format!("'{key}' is given twice"));
        }
    }
    let mut out = [""; N];
    for (i, value) in values.into_iter().enumerate() {
        out[i] = value.ok_or_else(|| format!("'{}' is missing", keys[i]))?;
    }
    Ok(out)
}

fn parse_percentiles(text: &str) -> Result<Vec<PercentilePoint>, String> {
    let mut points: Vec<PercentilePoint> = Vec::new();
    for item in text.split(',') {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' is not pNN=DURATION"))?;
        let key = key.trim();
        let pct: f64 = key
            .strip_prefix('p')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("'{key}' is not a percentile such as p50 or p99.9"))?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!("percentile '{key}' is outside p0..p100"));
        }
        let value = parse_spec_duration(value.trim())?;
        if let Some(prev) = points.last() {
            if pct <= prev.pct {
                return Err(format!(
                    "percentiles must increase: '{key}' follows p{}",
                    prev.pct
                ));
            }
            if value < prev.value {
                return Err(format!(
                    "values must not decrease: p{pct} = {} is below p{} = {}",
                    format_duration(value),
                    prev.pct,
                    format_duration(prev.value)
                ));
            }
        }
        points.push(PercentilePoint { pct, value });
    }
    Ok(points)
}

impl FromStr for DelaySpec {
    type Err = DelaySpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_spec(s.trim()).map_err(|reason| DelaySpecError {
            input: s.to_string(),
            reason,
        })
    }
}

fn parse_spec(t: &str) -> Result<DelaySpec, String> {
    let Some((form, rest)) = t.split_once(':') else {
        return parse_spec_duration(t).map(DelaySpec::Constant);
    };
    match form.trim() {
        "uniform" => {
            let (low, high) = rest
                .split_once("..")
                .ok_or_else(|| "uniform needs LOW..HIGH".to_string())?;
            let (low, high) = (parse_spec_duration(low)?, parse_spec_duration(high)?);
            if low > high {
                return Err("uniform needs LOW <= HIGH".into());
            }
            Ok(DelaySpec::Uniform { low, high })
        }
        "normal" => {
            let [mean, sd] = key_values(rest, ["mean", "sd"])?;
            Ok(DelaySpec::Normal {
                mean: parse_spec_duration(mean)?,
                sd: parse_spec_duration(sd)?,
            })
        }
        "lognormal" => {
            let [p50, p99] = key_values(rest, ["p50", "p99"])?;
            let (p50, p99) = (parse_spec_duration(p50)?, parse_spec_duration(p99)?);
            if p50.is_zero() {
                return Err("lognormal needs p50 > 0".into());
            }
            if p50 >= p99 {
                return Err("lognormal needs p50 < p99".into());
            }
            Ok(DelaySpec::LogNormal { p50, p99 })
        }
        "pareto" => {
            let [scale, shape] = key_values(rest, ["scale", "shape"])?;
            let scale = parse_spec_duration(scale)?;
            let shape: f64 = shape
                .parse()
                .map_err(|_| format!("shape '{shape}' is not a number"))?;
            if scale.is_zero() {
                return Err("pareto needs scale > 0".into());
            }
            if !(shape.is_finite() && shape > 0.0) {
                return Err("pareto needs a finite shape > 0".into());
            }
            Ok(DelaySpec::Pareto { scale, shape })
        }
        "percentiles" => parse_percentiles(rest).map(DelaySpec::Percentiles),
        other => Err(format!("unknown form '{other}'")),
    }
}

impl fmt::Display for DelaySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = format_duration;
        match self {
            DelaySpec::Constant(v) => f.write_str(&d(*v)),
            DelaySpec::Uniform { low, high } => write!(f, "uniform:{}..{}", d(*low), d(*high)),
            DelaySpec::Normal { mean, sd } => write!(f, "normal:mean={},sd={}", d(*mean), d(*sd)),
            DelaySpec::LogNormal { p50, p99 } => {
                write!(f, "lognormal:p50={},p99={}", d(*p50), d(*p99))
            }
            DelaySpec::Pareto { scale, shape } => {
                write!(f, "pareto:scale={},shape={shape}", d(*scale))
            }
            DelaySpec::Percentiles(points) => {
                f.write_str("percentiles:")?;
                for (i, p) in points.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(f, "{sep}p{}={}", p.pct, d(p.value))?;
                }
                Ok(())
            }
        }
    }
}

impl Serialize for DelaySpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DelaySpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

fn nanos(d: Duration) -> f64 {
    d.as_nanos() as f64
}

/// A sample in nanoseconds → a duration in `[0, MAX_DELAY]` (NaN → 0).
fn clamp_nanos(ns: f64) -> Duration {
    if ns >= nanos(MAX_DELAY) {
        MAX_DELAY
    } else if ns > 0.0 {
        Duration::from_nanos(ns.round() as u64)
    } else {
        Duration::ZERO
    }
}

impl DelaySpec {
    /// Draws one delay. Constant specs draw nothing; every other form draws exactly one number
    /// from `rng` (the normal forms use `rand_distr`'s ziggurat, which may draw more internally).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match self {
            DelaySpec::Constant(v) => *v,
            DelaySpec::Uniform { low, high } => {
                let (low, high) = (low.as_nanos() as u64, high.as_nanos() as u64);
                Duration::from_nanos(rng.random_range(low..=high))
            }
            DelaySpec::Normal { mean, sd } => {
                let z: f64 = rng.sample(StandardNormal);
                clamp_nanos(nanos(*mean) + nanos(*sd) * z)
            }
            DelaySpec::LogNormal { p50, p99 } => {
                let sigma = (nanos(*p99).ln() - nanos(*p50).ln()) / Z_99;
                let z: f64 = rng.sample(StandardNormal);
                clamp_nanos(nanos(*p50) * (sigma * z).exp())
            }
            DelaySpec::Pareto { scale, shape } => {
                // Inverse CDF with u in (0, 1]: x = scale · u^(−1/shape) ≥ scale.
                let u = 1.0 - rng.random::<f64>();
                clamp_nanos(nanos(*scale) * u.powf(-1.0 / shape))
            }
            DelaySpec::Percentiles(points) => {
                let u = rng.random::<f64>() * 100.0;
                clamp_nanos(percentile_inverse_cdf(points, u))
            }
        }
    }
}

/// Inverse CDF of the piecewise-linear distribution through `points` (and (p0, 0) unless p0 is
/// given), at percentile `u` in [0, 100). Returns nanoseconds.
fn percentile_inverse_cdf(points: &[PercentilePoint], u: f64) -> f64 {
    let i = points.partition_point(|p| p.pct <= u);
    let Some(hi) = points.get(i) else {
        return points.last().map_or(0.0, |p| nanos(p.value));
    };
    let (lo_pct, lo_ns) = match i.checked_sub(1) {
        Some(j) => (points[j].pct, nanos(points[j].value)),
        None => (0.0, 0.0),
    };
    let span = hi.pct - lo_pct;
    if span <= 0.0 {
        return nanos(hi.value);
    }
    lo_ns + (nanos(hi.value) - lo_ns) * (u - lo_pct) / span
}

/// `--delay` entries by command type; an entry for a type overrides `all`. Serialises as a JSON
/// object such as `{"all": "2ms", "write_chunk": "uniform:1ms..3ms"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DelayModel {
    entries: BTreeMap<CmdSelector, DelaySpec>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelayModelError {
    #[error("--delay {0}")]
    Entry(#[from] SelectorError),
    #[error("--delay for {0} is given twice")]
    Duplicate(CmdSelector),
}

impl DelayModel {
    pub fn new() -> Self {
        Self::default()
    }

    /// From parsed `TYPE=SPEC` entries; naming a target twice is an error.
    pub fn from_assignments(
        entries: impl IntoIterator<Item = Assignment<DelaySpec>>,
    ) -> Result<Self, DelayModelError> {
        let mut model = DelayModel::new();
        for Assignment { target, value } in entries {
            if model.entries.insert(target, value).is_some() {
                return Err(DelayModelError::Duplicate(target));
            }
        }
        Ok(model)
    }

    /// From `TYPE=SPEC` strings as given on the command line.
    pub fn from_args<S: AsRef<str>>(
        args: impl IntoIterator<Item = S>,
    ) -> Result<Self, DelayModelError> {
        let parsed = args
            .into_iter()
            .map(|a| a.as_ref().parse::<Assignment<DelaySpec>>())
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_assignments(parsed)
    }

    /// Sets (`Some`) or removes (`None`) the entry for `target`; returns the previous one.
    pub fn set(&mut self, target: CmdSelector, spec: Option<DelaySpec>) -> Option<DelaySpec> {
        match spec {
            Some(spec) => self.entries.insert(target, spec),
            None => self.entries.remove(&target),
        }
    }

    /// The entry given for exactly `target`.
    pub fn get(&self, target: CmdSelector) -> Option<&DelaySpec> {
        self.entries.get(&target)
    }

    /// The spec in effect for `cmd_type`: its own entry, else `all`, else none.
    pub fn spec_for(&self, cmd_type: Type) -> Option<&DelaySpec> {
        self.entries
            .get(&CmdSelector::Type(cmd_type))
            .or_else(|| self.entries.get(&CmdSelector::All))
    }

    /// The delay for one request of `cmd_type`; zero (and no draw) when no spec applies.
    pub fn sample<R: Rng + ?Sized>(&self, cmd_type: Type, rng: &mut R) -> Duration {
        self.spec_for(cmd_type)
            .map_or(Duration::ZERO, |spec| spec.sample(rng))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All entries, `all` first, then by type number.
    pub fn entries(&self) -> impl Iterator<Item = (CmdSelector, &DelaySpec)> {
        self.entries.iter().map(|(t, s)| (*t, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::RngFactory;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn samples(spec: &str, n: usize, seed: u64) -> Vec<f64> {
        let spec: DelaySpec = spec.parse().unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut v: Vec<f64> = (0..n).map(|_| nanos(spec.sample(&mut rng))).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Sample quantile of sorted data, q in [0, 1].
    fn quantile(sorted: &[f64], q: f64) -> f64 {
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    fn assert_close(actual: f64, expected: f64, rel: f64, what: &str) {
        let err = (actual - expected).abs() / expected;
        assert!(
            err <= rel,
            "{what}: {actual} vs {expected} ({:.2}% off)",
            err * 100.0
        );
    }

    #[test]
    fn parses_every_form() {
        use DelaySpec::*;
        let cases = [
            ("2ms", Constant(ms(2))),
            ("0", Constant(Duration::ZERO)),
            (" 1.5ms ", Constant(us(1500))),
            (
                "uniform:1ms..3ms",
                Uniform {
                    low: ms(1),
                    high: ms(3),
                },
            ),
            (
                "uniform:2ms..2ms",
                Uniform {
                    low: ms(2),
                    high: ms(2),
                },
            ),
            (
                "normal:mean=2ms,sd=500us",
                Normal {
                    mean: ms(2),
                    sd: us(500),
                },
            ),
            (
                "normal:sd=500us,mean=2ms",
                Normal {
                    mean: ms(2),
                    sd: us(500),
                },
            ),
            (
                "lognormal:p50=1ms,p99=20ms",
                LogNormal {
                    p50: ms(1),
                    p99: ms(20),
                },
            ),
            (
                "pareto:scale=1ms,shape=1.5",
                Pareto {
                    scale: ms(1),
                    shape: 1.5,
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<DelaySpec>(), Ok(want), "{text}");
        }
        let p = "percentiles:p50=1ms,p90=3ms,p99.9=12ms,p100=40ms".parse::<DelaySpec>();
        let pts = [
            (50.0, ms(1)),
            (90.0, ms(3)),
            (99.9, ms(12)),
            (100.0, ms(40)),
        ]
        .map(|(pct, value)| PercentilePoint { pct, value });
        assert_eq!(p, Ok(Percentiles(pts.to_vec())));
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "",
            "fast",
            "-2ms",
            "2h",
            "uniform:3ms..1ms",
            "uniform:1ms",
            "uniform:1ms..",
            "normal:mean=2ms",
            "normal:mean=2ms,sd=-1ms",
            "normal:mean=2ms,sd=1ms,sd=2ms",
            "normal:mean=2ms,sd=1ms,x=1",
            "normal:mean=NaN,sd=1ms",
            "lognormal:p50=20ms,p99=1ms",
            "lognormal:p50=1ms,p99=1ms",
            "lognormal:p50=0ms,p99=1ms",
            "pareto:scale=1ms,shape=0",
            "pareto:scale=1ms,shape=-1.5",
            "pareto:scale=1ms,shape=NaN",
            "pareto:scale=1ms,shape=inf",
            "pareto:scale=0ms,shape=1",
            "percentiles:",
            "percentiles:p50=3ms,p90=1ms",
            "percentiles:p90=1ms,p50=3ms",
            "percentiles:p50=1ms,p50=2ms",
            "percentiles:p101=1ms",
            "percentiles:p-1=1ms",
            "percentiles:pNaN=1ms",
            "percentiles:50=1ms",
            "gamma:k=1",
        ] {
            let err = bad.parse::<DelaySpec>().expect_err(bad).to_string();
            assert!(!err.contains('\n'), "{err}");
            assert!(err.contains("uniform:1ms..3ms"), "{err}");
        }
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for (text, canonical) in [
            ("2ms", "2ms"),
            ("1.5ms", "1500us"),
            ("0.5s", "500ms"),
            ("3", "3s"),
            ("0ms", "0s"),
            ("uniform:1ms..3ms", "uniform:1ms..3ms"),
            ("normal:sd=0.5ms,mean=2ms", "normal:mean=2ms,sd=500us"),
            ("lognormal:p99=20ms,p50=1ms", "lognormal:p50=1ms,p99=20ms"),
            ("pareto:scale=1ms,shape=1.50", "pareto:scale=1ms,shape=1.5"),
            (
                "percentiles:p0=1us,p99.9=5ms,p100=5ms",
                "percentiles:p0=1us,p99.9=5ms,p100=5ms",
            ),
        ] {
            let spec: DelaySpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), canonical);
            assert_eq!(canonical.parse::<DelaySpec>(), Ok(spec));
        }
    }

    #[test]
    fn serde_as_string() {
        let spec: DelaySpec = "uniform:1ms..3ms".parse().unwrap();
        assert_eq!(
            serde_json::to_string(&spec).unwrap(),
            r#""uniform:1ms..3ms""#
        );
        let back: DelaySpec = serde_json::from_str(r#""uniform:1ms..3ms""#).unwrap();
        assert_eq!(back, spec);
        let err = serde_json::from_str::<DelaySpec>(r#""uniform:3ms..1ms""#).unwrap_err();
        assert!(err.to_string().contains("LOW <= HIGH"), "{err}");
    }

    #[test]
    fn constant_and_uniform() {
        let v = samples("2ms", 10, 1);
        assert!(v.iter().all(|&x| x == 2e6));
        let v = samples("uniform:1ms..3ms", 20_000, 1);
        assert!(v[0] >= 1e6 && v[v.len() - 1] <= 3e6);
        assert_close(mean(&v), 2e6, 0.02, "uniform mean");
        assert_close(quantile(&v, 0.25), 1.5e6, 0.03, "uniform p25");
    }

    #[test]
    fn normal_mean_sd_and_truncation() {
        let v = samples("normal:mean=2ms,sd=500us", 20_000, 2);
        let m = mean(&v);
        let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert_close(m, 2e6, 0.02, "normal mean");
        assert_close(sd, 5e5, 0.05, "normal sd");
        // Half the mass is below 0: those draws become 0, none is negative.
        let v = samples("normal:mean=0s,sd=1ms", 20_000, 3);
        let zeros = v.iter().filter(|&&x| x == 0.0).count() as f64 / v.len() as f64;
        assert!(v[0] >= 0.0);
        assert!((zeros - 0.5).abs() < 0.03, "{zeros}");
    }

    #[test]
    fn lognormal_hits_its_percentiles() {
        // 50k samples: the sample p99's own standard error is then about 2%.
        let v = samples("lognormal:p50=1ms,p99=20ms", 50_000, 4);
        assert_close(quantile(&v, 0.50), 1e6, 0.10, "lognormal p50");
        assert_close(quantile(&v, 0.99), 20e6, 0.10, "lognormal p99");
    }

    #[test]
    fn pareto_minimum_and_median() {
        let v = samples("pareto:scale=1ms,shape=1.5", 20_000, 5);
        assert!(v[0] >= 1e6);
        // Median of Pareto(scale, shape) = scale · 2^(1/shape).
        assert_close(
            quantile(&v, 0.5),
            1e6 * 2f64.powf(1.0 / 1.5),
            0.05,
            "pareto p50",
        );
        assert_close(
            quantile(&v, 0.9),
            1e6 * 10f64.powf(1.0 / 1.5),
            0.10,
            "pareto p90",
        );
        // A very heavy tail is clamped, never overflows.
        let v = samples("pareto:scale=1h,shape=0.01", 1000, 6);
        assert!(v.iter().all(|&x| x == nanos(MAX_DELAY)));
    }

    #[test]
    fn percentile_list_is_reproduced() {
        let v = samples("percentiles:p50=1ms,p90=3ms,p99=12ms,p100=40ms", 20_000, 7);
        // Sampled quantiles inside each segment (where the density is not so thin that the
        // quantile estimate itself is noisy) are within 5% of the interpolated value …
        for (q, want) in [
            (0.25, 0.5e6),
            (0.5, 1e6),
            (0.7, 2e6),
            (0.8, 2.5e6),
            (0.945, 7.5e6),
        ] {
            assert_close(quantile(&v, q), want, 0.05, &format!("q{q}"));
        }
        // … and at the steep tail the empirical CDF at each given point is within 4 sigma.
        for (value, p) in [(1e6, 0.5), (3e6, 0.9), (12e6, 0.99), (26e6, 0.995)] {
            let cdf = v.iter().filter(|&&x| x <= value).count() as f64 / v.len() as f64;
            let sigma = (p * (1.0 - p) / v.len() as f64).sqrt();
            assert!(
                (cdf - p).abs() <= 4.0 * sigma,
                "F({value}) = {cdf}, want {p}"
            );
        }
        assert!(v[v.len() - 1] <= 40e6);
        // Above the last given point the sample stays at its value; p0 may be given.
        let v = samples("percentiles:p0=2ms,p50=4ms", 20_000, 8);
        assert!(v[0] >= 2e6);
        assert_close(quantile(&v, 0.25), 3e6, 0.05, "q0.25");
        assert_close(quantile(&v, 0.75), 4e6, 0.0, "q0.75");
    }

    #[test]
    fn same_seed_same_delays() {
        let model = DelayModel::from_args(["all=lognormal:p50=1ms,p99=20ms"]).unwrap();
        let draw = |factory: &RngFactory| {
            let mut rng = factory.for_stream();
            (0..100)
                .map(|_| model.sample(Type::Echo, &mut rng))
                .collect::<Vec<_>>()
        };
        let (a, b) = (RngFactory::new(9), RngFactory::new(9));
        assert_eq!(draw(&a), draw(&b));
        assert_ne!(draw(&a), draw(&RngFactory::new(10)));
    }

    #[test]
    fn model_per_type_overrides_all() {
        let model = DelayModel::from_args(["all=2ms", "write_chunk=5ms"]).unwrap();
        let mut rng = SmallRng::seed_from_u64(0);
        assert_eq!(model.sample(Type::Echo, &mut rng), ms(2));
        assert_eq!(model.sample(Type::WriteChunk, &mut rng), ms(5));
        let only_echo = DelayModel::from_args(["echo=1ms"]).unwrap();
        assert_eq!(only_echo.sample(Type::ReadChunk, &mut rng), Duration::ZERO);
        assert_eq!(
            DelayModel::from_args(["echo=1ms", "echo=2ms"]),
            Err(DelayModelError::Duplicate(CmdSelector::Type(Type::Echo)))
        );
        assert!(DelayModel::from_args(["echo:1ms"]).is_err());
        assert!(DelayModel::from_args(["echo=slow"]).is_err());
    }

    #[test]
    fn model_serde_as_map() {
        let model = DelayModel::from_args(["write_chunk=uniform:1ms..3ms", "all=2ms"]).unwrap();
        let json = serde_json::to_string(&model).unwrap();
        assert_eq!(json, r#"{"all":"2ms","write_chunk":"uniform:1ms..3ms"}"#);
        assert_eq!(serde_json::from_str::<DelayModel>(&json).unwrap(), model);
        assert!(serde_json::from_str::<DelayModel>(r#"{"nope":"2ms"}"#).is_err());
    }

    fn duration_strategy() -> impl Strategy<Value = Duration> {
        prop_oneof![
            (0u64..=3_600_000_000_000).prop_map(Duration::from_nanos),
            (0u64..=3_600_000).prop_map(Duration::from_millis),
            (0u64..=3_600_000_000).prop_map(Duration::from_micros),
        ]
    }

    fn spec_strategy() -> impl Strategy<Value = DelaySpec> {
        let d = duration_strategy;
        prop_oneof![
            d().prop_map(DelaySpec::Constant),
            (d(), d()).prop_map(|(a, b)| DelaySpec::Uniform {
                low: a.min(b),
                high: a.max(b)
            }),
            (d(), d()).prop_map(|(mean, sd)| DelaySpec::Normal { mean, sd }),
            (d(), d())
                .prop_filter("p50 < p99", |(a, b)| !a.is_zero() && a < b)
                .prop_map(|(p50, p99)| DelaySpec::LogNormal { p50, p99 }),
            (d(), 0.001f64..1000.0)
                .prop_filter("scale > 0", |(s, _)| !s.is_zero())
                .prop_map(|(scale, shape)| DelaySpec::Pareto { scale, shape }),
            proptest::collection::btree_map(0u32..=1000, d(), 1..6).prop_map(|m| {
                let mut values: Vec<Duration> = m.values().copied().collect();
                values.sort();
                DelaySpec::Percentiles(
                    m.keys()
                        .zip(values)
                        .map(|(k, value)| PercentilePoint {
                            pct: f64::from(*k) / 10.0,
                            value,
                        })
                        .collect(),
                )
            }),
        ]
    }

    proptest! {
        #[test]
        fn any_string_parses_or_errors_without_panic(s in "\\PC{0,40}") {
            let _ = s.parse::<DelaySpec>();
        }

        #[test]
        fn spec_like_strings_never_panic(
            s in "(uniform|normal|lognormal|pareto|percentiles)?:?[-0-9.a-z=,]{0,30}"
        ) {
            if let Ok(spec) = s.parse::<DelaySpec>() {
                let mut rng = SmallRng::seed_from_u64(0);
                prop_assert!(spec.sample(&mut rng) <= MAX_DELAY);
                prop_assert_eq!(spec.to_string().parse::<DelaySpec>(), Ok(spec));
            }
        }

        #[test]
        fn display_round_trips(spec in spec_strategy()) {
            let text = spec.to_string();
            prop_assert_eq!(text.parse::<DelaySpec>(), Ok(spec.clone()), "{}", text);
            let mut rng = SmallRng::seed_from_u64(1);
            prop_assert!(spec.sample(&mut rng) <= MAX_DELAY);
        }

        #[test]
        fn durations_format_exactly(d in duration_strategy()) {
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }
}

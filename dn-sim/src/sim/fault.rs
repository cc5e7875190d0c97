//! Injected failures: `--fault TYPE=KIND:PROBABILITY` (repeatable).
//!
//! KIND is one of
//! - an Ozone `Result` name (`IO_EXCEPTION`, `CONTAINER_NOT_FOUND`, …; `result:IO_EXCEPTION` is
//!   accepted too, case-insensitive): answer with that result and a DataNode-like message
//!   ([`result_message`]);
//! - `grpc:CODE`: fail the call with that gRPC status; CODE is a name (`UNAVAILABLE`,
//!   `resource_exhausted`, `Internal`: case and underscores are ignored) or a number (`14`);
//! - `drop`: never answer; `reset`: reset the stream;
//! - `stall:DURATION`: hold the handler that long, then answer normally.
//!
//! Several faults may be given for one type. They are mutually exclusive: one uniform number
//! `u ∈ [0, 1)` is drawn per request and compared with the cumulative probabilities in the order
//! given, so fault `i` fires with exactly its own probability `pᵢ` and none fires with `1 − Σpᵢ`.
//! A sum over 1 is an error. As for delays, the list given for a type replaces the `all` list for
//! that type (give `write_chunk=drop:0` to exempt a type from `all`).

use crate::sim::cmd_selector::{Assignment, CmdSelector, SelectorError};
use crate::sim::delay::{format_duration, parse_spec_duration};
use common::proto::{Result as OzoneResult, Type};
use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use tonic::Code;

/// Slack for the sum of probabilities written in decimal (0.7 + 0.2 + 0.1 > 1 in binary).
const SUM_TOLERANCE: f64 = 1e-9;

const FORMS: &str = "KIND:PROBABILITY, KIND = a Result name (IO_EXCEPTION, CONTAINER_NOT_FOUND, …) \
                     | grpc:UNAVAILABLE or grpc:14 | drop | reset | stall:2s, PROBABILITY in 0..1";

pub use common::grpc::{grpc_code_name, parse_grpc_code};

/// What an injected fault does to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Answer with this Ozone result (never `SUCCESS`) and [`result_message`].
    Result(OzoneResult),
    /// Fail the call with this gRPC status (never `OK`).
    Grpc(Code),
    /// Never answer.
    Drop,
    /// Reset the stream.
    Reset,
    /// Hold the handler this long, then answer normally.
    Stall(Duration),
}

impl FaultKind {
    /// A stable label for metrics: `result:IO_EXCEPTION`, `grpc:UNAVAILABLE`, `drop`, `reset`,
    /// `stall` (the stall duration is left out to keep label cardinality low).
    pub fn kind_label(&self) -> Cow<'static, str> {
        match self {
            FaultKind::Result(r) => Cow::Owned(format!("result:{}", r.as_str_name())),
            FaultKind::Grpc(code) => Cow::Borrowed(common::grpc::grpc_code_label(*code)),
            FaultKind::Drop => Cow::Borrowed("drop"),
            FaultKind::Reset => Cow::Borrowed("reset"),
            FaultKind::Stall(_) => Cow::Borrowed("stall"),
        }
    }
}

/// A DataNode-like `message` for an injected result. Where the DataNode's own text is known it
/// is used (`ContainerID 5 does not exist`); otherwise the text names the result and says that
/// dn-sim injected it.
pub fn result_message(result: OzoneResult, container_id: i64) -> String {
    match result {
        OzoneResult::ContainerNotFound => format!("ContainerID {container_id} does not exist"),
        OzoneResult::ClosedContainerIo => {
            "Requested operation not allowed as ContainerState is CLOSED".to_string()
        }
        OzoneResult::ContainerUnhealthy => {
            "Requested operation not allowed as ContainerState is UNHEALTHY".to_string()
        }
        OzoneResult::IoException => {
            format!(
                "java.io.IOException: Input/output error on container {container_id} (injected by dn-sim)"
            )
        }
        other => format!(
            "{} on container {container_id} (injected by dn-sim)",
            other.as_str_name()
        ),
    }
}

/// The status message for an injected gRPC failure.
pub fn grpc_message(code: Code) -> String {
    format!("{} (injected by dn-sim)", grpc_code_name(code))
}

fn parse_kind(t: &str) -> Result<FaultKind, String> {
    let t = t.trim();
    if t.eq_ignore_ascii_case("drop") {
        return Ok(FaultKind::Drop);
    }
    if t.eq_ignore_ascii_case("reset") {
        return Ok(FaultKind::Reset);
    }
    if let Some((prefix, arg)) = t.split_once(':') {
        return match prefix.trim().to_ascii_lowercase().as_str() {
            "stall" => parse_spec_duration(arg.trim()).map(FaultKind::Stall),
            "grpc" => match parse_grpc_code(arg) {
                Some(Code::Ok) => Err("grpc:OK is not a failure".into()),
                Some(code) => Ok(FaultKind::Grpc(code)),
                None => Err(format!("'{arg}' is not a gRPC status code")),
            },
            "result" => parse_result(arg),
            other => Err(format!("unknown fault kind '{other}'")),
        };
    }
    parse_result(t)
}

fn parse_result(text: &str) -> Result<FaultKind, String> {
    match OzoneResult::from_str_name(&text.trim().to_ascii_uppercase()) {
        Some(OzoneResult::Success) => Err("SUCCESS is not a failure".into()),
        Some(r) => Ok(FaultKind::Result(r)),
        None => Err(format!("unknown fault kind or Ozone result '{text}'")),
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKind::Result(r) => f.write_str(r.as_str_name()),
            FaultKind::Grpc(code) => f.write_str(common::grpc::grpc_code_label(*code)),
            FaultKind::Drop => f.write_str("drop"),
            FaultKind::Reset => f.write_str("reset"),
            FaultKind::Stall(d) => write!(f, "stall:{}", format_duration(*d)),
        }
    }
}

/// A fault that does not parse. One line; lists the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a fault: {reason} (forms: {FORMS})")]
pub struct FaultSpecError {
    pub input: String,
    pub reason: String,
}

impl FromStr for FaultKind {
    type Err = FaultSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_kind(s).map_err(|reason| FaultSpecError {
            input: s.to_string(),
            reason,
        })
    }
}

/// One `KIND:PROBABILITY` entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// In [0, 1].
    pub probability: f64,
}

impl FromStr for FaultSpec {
    type Err = FaultSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| FaultSpecError {
            input: s.to_string(),
            reason,
        };
        let (kind, p) = s
            .trim()
            .rsplit_once(':')
            .ok_or_else(|| err("missing ':PROBABILITY'".into()))?;
        let probability: f64 = p
            .trim()
            .parse()
            .map_err(|_| err(format!("'{p}' is not a probability")))?;
        if !(0.0..=1.0).contains(&probability) {
            return Err(err(format!("probability {p} is outside 0..1")));
        }
        Ok(FaultSpec {
            kind: parse_kind(kind).map_err(err)?,
            probability,
        })
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.probability)
    }
}

macro_rules! serde_as_string {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

serde_as_string!(FaultKind);
serde_as_string!(FaultSpec);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultPlanError {
    #[error("--fault {0}")]
    Entry(#[from] SelectorError),
    #[error("--fault probabilities for {target} add up to {sum}, over 1")]
    ProbabilitySum { target: CmdSelector, sum: f64 },
}

/// `--fault` entries by command type; the list for a type replaces the `all` list for it.
/// Serialises as a JSON object such as `{"all": ["grpc:UNAVAILABLE:0.01"], "write_chunk":
/// ["IO_EXCEPTION:0.05", "stall:2s:0.01"]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct FaultPlan {
    entries: BTreeMap<CmdSelector, Vec<FaultSpec>>,
}

fn check_sum(target: CmdSelector, specs: &[FaultSpec]) -> Result<(), FaultPlanError> {
    let sum: f64 = specs.iter().map(|s| s.probability).sum();
    if sum > 1.0 + SUM_TOLERANCE {
        return Err(FaultPlanError::ProbabilitySum { target, sum });
    }
    Ok(())
}

impl FaultPlan {
    pub fn new() -> Self {
        Self::default()
    }

    /// From parsed `TYPE=KIND:PROBABILITY` entries, appended per target in the order given.
    pub fn from_assignments(
        entries: impl IntoIterator<Item = Assignment<FaultSpec>>,
    ) -> Result<Self, FaultPlanError> {
        let mut plan = FaultPlan::new();
        for Assignment { target, value } in entries {
            plan.push(target, value)?;
        }
        Ok(plan)
    }

    /// From `TYPE=KIND:PROBABILITY` strings as given on the command line.
    pub fn from_args<S: AsRef<str>>(
        args: impl IntoIterator<Item = S>,
    ) -> Result<Self, FaultPlanError> {
        let parsed = args
            .into_iter()
            .map(|a| a.as_ref().parse::<Assignment<FaultSpec>>())
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_assignments(parsed)
    }

    /// Appends a fault for `target`; fails (leaving the plan unchanged) if the sum would pass 1.
    pub fn push(&mut self, target: CmdSelector, spec: FaultSpec) -> Result<(), FaultPlanError> {
        let mut specs = self.get(target).to_vec();
        specs.push(spec);
        self.set(target, specs)
    }

    /// Replaces the list for `target` (an empty list removes it).
    pub fn set(
        &mut self,
        target: CmdSelector,
        specs: Vec<FaultSpec>,
    ) -> Result<(), FaultPlanError> {
        check_sum(target, &specs)?;
        if specs.is_empty() {
            self.entries.remove(&target);
        } else {
            self.entries.insert(target, specs);
        }
        Ok(())
    }

    /// The list given for exactly `target`.
    pub fn get(&self, target: CmdSelector) -> &[FaultSpec] {
        self.entries.get(&target).map_or(&[], Vec::as_slice)
    }

    /// The list in effect for `cmd_type`: its own, else `all`'s, else empty.
    pub fn specs_for(&self, cmd_type: Type) -> &[FaultSpec] {
        self.entries
            .get(&CmdSelector::Type(cmd_type))
            .or_else(|| self.entries.get(&CmdSelector::All))
            .map_or(&[], Vec::as_slice)
    }

    /// Decides whether one request of `cmd_type` fails, and how. Draws one number from `rng`
    /// when any fault applies to the type, none otherwise.
    pub fn draw<R: Rng + ?Sized>(&self, cmd_type: Type, rng: &mut R) -> Option<&FaultKind> {
        let specs = self.specs_for(cmd_type);
        if specs.is_empty() {
            return None;
        }
        let u: f64 = rng.random();
        let mut cumulative = 0.0;
        for spec in specs {
            cumulative += spec.probability;
            if u < cumulative {
                return Some(&spec.kind);
            }
        }
        None
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All lists, `all` first, then by type number.
    pub fn entries(&self) -> impl Iterator<Item = (CmdSelector, &[FaultSpec])> {
        self.entries.iter().map(|(t, s)| (*t, s.as_slice()))
    }
}

impl<'de> Deserialize<'de> for FaultPlan {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = BTreeMap::<CmdSelector, Vec<FaultSpec>>::deserialize(deserializer)?;
        let mut plan = FaultPlan::new();
        for (target, specs) in entries {
            plan.set(target, specs).map_err(serde::de::Error::custom)?;
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::RngFactory;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn spec(kind: FaultKind, probability: f64) -> FaultSpec {
        FaultSpec { kind, probability }
    }

    #[test]
    fn parses_every_kind() {
        use FaultKind::*;
        let cases = [
            ("IO_EXCEPTION:0.1", Result(OzoneResult::IoException), 0.1),
            (
                "container_not_found:1",
                Result(OzoneResult::ContainerNotFound),
                1.0,
            ),
            (
                "result:DISK_OUT_OF_SPACE:0",
                Result(OzoneResult::DiskOutOfSpace),
                0.0,
            ),
            ("grpc:UNAVAILABLE:0.5", Grpc(Code::Unavailable), 0.5),
            (
                "grpc:resource_exhausted:0.5",
                Grpc(Code::ResourceExhausted),
                0.5,
            ),
            (
                "grpc:ResourceExhausted:0.5",
                Grpc(Code::ResourceExhausted),
                0.5,
            ),
            ("grpc:internal:0.5", Grpc(Code::Internal), 0.5),
            ("grpc:14:0.25", Grpc(Code::Unavailable), 0.25),
            ("grpc:8:0.25", Grpc(Code::ResourceExhausted), 0.25),
            ("drop:0.01", Drop, 0.01),
            ("reset:0.01", Reset, 0.01),
            ("stall:2s:0.05", Stall(Duration::from_secs(2)), 0.05),
            (
                "stall:1.5ms:1e-3",
                Stall(Duration::from_micros(1500)),
                0.001,
            ),
        ];
        for (text, kind, probability) in cases {
            assert_eq!(
                text.parse::<FaultSpec>(),
                Ok(spec(kind, probability)),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_bad_faults() {
        for bad in [
            "",
            "IO_EXCEPTION",
            "IO_EXCEPTION:",
            "IO_EXCEPTION:1.5",
            "IO_EXCEPTION:-0.1",
            "IO_EXCEPTION:NaN",
            "IO_EXCEPTION:inf",
            "SUCCESS:0.1",
            "NOT_A_RESULT:0.1",
            "grpc:OK:0.1",
            "grpc:0:0.1",
            "grpc:17:0.1",
            "grpc:SLOW:0.1",
            "grpc::0.1",
            "stall:0.1",
            "stall:-1s:0.1",
            "stall:2h:0.1",
            "explode:now:0.1",
        ] {
            let err = bad.parse::<FaultSpec>().expect_err(bad).to_string();
            assert!(!err.contains('\n'), "{err}");
            assert!(err.contains("grpc:UNAVAILABLE"), "{err}");
        }
    }

    #[test]
    fn display_round_trips_and_labels() {
        for (text, canonical, label) in [
            (
                "io_exception:0.10",
                "IO_EXCEPTION:0.1",
                "result:IO_EXCEPTION",
            ),
            (
                "result:CONTAINER_NOT_FOUND:1",
                "CONTAINER_NOT_FOUND:1",
                "result:CONTAINER_NOT_FOUND",
            ),
            ("grpc:14:0.5", "grpc:UNAVAILABLE:0.5", "grpc:UNAVAILABLE"),
            (
                "grpc:resource_exhausted:0.5",
                "grpc:RESOURCE_EXHAUSTED:0.5",
                "grpc:RESOURCE_EXHAUSTED",
            ),
            ("DROP:0.01", "drop:0.01", "drop"),
            ("reset:0.01", "reset:0.01", "reset"),
            ("stall:0.5s:0.2", "stall:500ms:0.2", "stall"),
        ] {
            let s: FaultSpec = text.parse().unwrap();
            assert_eq!(s.to_string(), canonical);
            assert_eq!(canonical.parse::<FaultSpec>(), Ok(s));
            assert_eq!(s.kind.kind_label(), label);
            assert_eq!(s.kind.to_string().parse::<FaultKind>(), Ok(s.kind));
        }
        for n in 1..=16 {
            let code = Code::from_i32(n);
            let kind = FaultKind::Grpc(code);
            assert_eq!(kind.to_string(), format!("grpc:{}", grpc_code_name(code)));
            assert_eq!(kind.to_string().parse::<FaultKind>(), Ok(kind));
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            result_message(OzoneResult::ContainerNotFound, 7),
            "ContainerID 7 does not exist"
        );
        assert!(result_message(OzoneResult::DiskOutOfSpace, 7).contains("DISK_OUT_OF_SPACE"));
        assert!(grpc_message(Code::Unavailable).starts_with("UNAVAILABLE"));
    }

    #[test]
    fn probability_lands_within_four_sigma() {
        let plan = FaultPlan::from_args(["echo=IO_EXCEPTION:0.1"]).unwrap();
        let (n, p) = (2000.0f64, 0.1f64);
        let sigma = (n * p * (1.0 - p)).sqrt();
        for seed in 0..20 {
            let mut rng = RngFactory::new(seed).for_stream();
            let hits = (0..2000)
                .filter(|_| plan.draw(Type::Echo, &mut rng).is_some())
                .count() as f64;
            assert!((hits - n * p).abs() < 4.0 * sigma, "seed {seed}: {hits}");
        }
    }

    #[test]
    fn several_faults_fire_with_their_own_probabilities() {
        let plan = FaultPlan::from_args([
            "write_chunk=IO_EXCEPTION:0.2",
            "write_chunk=grpc:UNAVAILABLE:0.3",
            "write_chunk=drop:0",
        ])
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(11);
        let n = 20_000;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..n {
            let label = plan
                .draw(Type::WriteChunk, &mut rng)
                .map_or("none".into(), |k| k.kind_label().into_owned());
            *counts.entry(label).or_default() += 1;
        }
        let frac = |k: &str| counts.get(k).copied().unwrap_or(0) as f64 / n as f64;
        assert!(
            (frac("result:IO_EXCEPTION") - 0.2).abs() < 0.015,
            "{counts:?}"
        );
        assert!((frac("grpc:UNAVAILABLE") - 0.3).abs() < 0.015, "{counts:?}");
        assert!((frac("none") - 0.5).abs() < 0.015, "{counts:?}");
        assert_eq!(frac("drop"), 0.0);
    }

    #[test]
    fn plan_rules() {
        let plan = FaultPlan::from_args(["all=drop:1", "echo=reset:1"]).unwrap();
        let mut rng = SmallRng::seed_from_u64(0);
        assert_eq!(plan.draw(Type::Echo, &mut rng), Some(&FaultKind::Reset));
        assert_eq!(plan.draw(Type::ReadChunk, &mut rng), Some(&FaultKind::Drop));
        let exempt = FaultPlan::from_args(["all=drop:1", "echo=drop:0"]).unwrap();
        assert_eq!(exempt.draw(Type::Echo, &mut rng), None);
        assert!(FaultPlan::new().draw(Type::Echo, &mut rng).is_none());
        assert!(
            FaultPlan::from_args(["all=drop:0.7", "all=reset:0.2", "all=stall:1s:0.1"]).is_ok()
        );
        assert!(matches!(
            FaultPlan::from_args(["echo=drop:0.7", "echo=reset:0.4"]),
            Err(FaultPlanError::ProbabilitySum { .. })
        ));
        // Sums are per target: these two lists never apply together.
        assert!(FaultPlan::from_args(["all=drop:0.7", "echo=reset:0.4"]).is_ok());
        assert!(FaultPlan::from_args(["echo=drop"]).is_err());
        assert!(FaultPlan::from_args(["nope=drop:0.1"]).is_err());
    }

    #[test]
    fn same_seed_same_faults() {
        let plan = FaultPlan::from_args(["all=drop:0.3", "all=grpc:INTERNAL:0.3"]).unwrap();
        let run = |seed| {
            let mut rng = RngFactory::new(seed).for_stream();
            (0..200)
                .map(|_| plan.draw(Type::GetBlock, &mut rng).copied())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn plan_serde() {
        let plan = FaultPlan::from_args([
            "write_chunk=IO_EXCEPTION:0.05",
            "write_chunk=stall:2s:0.01",
            "all=grpc:14:0.01",
        ])
        .unwrap();
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(
            json,
            r#"{"all":["grpc:UNAVAILABLE:0.01"],"write_chunk":["IO_EXCEPTION:0.05","stall:2s:0.01"]}"#
        );
        assert_eq!(serde_json::from_str::<FaultPlan>(&json).unwrap(), plan);
        let over = r#"{"echo":["drop:0.6","reset:0.6"]}"#;
        assert!(serde_json::from_str::<FaultPlan>(over).is_err());
    }

    proptest! {
        #[test]
        fn any_string_parses_or_errors_without_panic(s in "\\PC{0,40}") {
            let _ = s.parse::<FaultSpec>();
            let _ = FaultPlan::from_args([s.as_str()]);
        }

        #[test]
        fn fault_like_strings_round_trip(
            s in "(grpc|stall|result|drop|reset|IO_EXCEPTION)?:?[A-Za-z_0-9.]{0,12}:[-0-9.e]{0,6}"
        ) {
            if let Ok(spec) = s.parse::<FaultSpec>() {
                prop_assert_eq!(spec.to_string().parse::<FaultSpec>(), Ok(spec));
            }
        }

        #[test]
        fn probabilities_round_trip(p in 0.0f64..=1.0) {
            let s = spec(FaultKind::Drop, p);
            prop_assert_eq!(s.to_string().parse::<FaultSpec>(), Ok(s));
        }
    }
}

//! Scenario files: `conformance/scenarios/<family>.json`, one per command family (format in
//! `conformance/README.md`). Loading validates everything that can be checked without a target:
//! unknown keys, step shapes, names unique across files, versions, placeholders, and that every
//! request encodes.

use crate::placeholders::{self, Bindings, Needs};
use anyhow::{Context as _, anyhow, bail};
use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The Ozone versions scenarios can be limited to.
pub const VERSIONS: [&str; 3] = ["2.0", "2.1", "2.2"];

/// How a scenario's request steps are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamMode {
    /// A new bidi stream per request, half-closed at once (Ozone's Java client).
    #[default]
    PerRequest,
    /// One bidi stream for all steps; each answer is awaited before the next request.
    OneStream,
    /// Raft requests on one `ordered` stream of the Ratis client port (`crate::ratis`); a step
    /// with `ratis.grpc` goes per request to the gRPC port instead.
    Ratis,
}

impl StreamMode {
    pub fn name(self) -> &'static str {
        match self {
            StreamMode::PerRequest => "per-request",
            StreamMode::OneStream => "one-stream",
            StreamMode::Ratis => "ratis",
        }
    }
}

/// A DataNode configuration group: keys given to both targets with `-D key=value`.
pub type Config = BTreeMap<String, String>;

#[derive(Debug, Clone)]
pub struct Scenario {
    pub family: String,
    pub file: PathBuf,
    pub name: String,
    pub about: String,
    pub stream: StreamMode,
    pub config: Config,
    pub versions: Vec<String>,
    pub declared: Option<String>,
    pub steps: Vec<Step>,
    /// `$Ck` / `$NEWk` used.
    pub needs: Needs,
}

impl Scenario {
    pub fn runs_on(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    pub fn has_prom_step(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::Prom(_)))
    }
}

#[derive(Debug, Clone)]
pub struct Step {
    pub kind: StepKind,
    /// Whether its answers count (false: setup steps, shown but not compared).
    pub compare: bool,
    /// Sent this many times.
    pub repeat: u32,
    pub note: Option<String>,
    /// How it goes on the Ratis port (`ratis` scenarios only).
    pub ratis: crate::ratis::StepOptions,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    /// A request in the protobuf JSON mapping, placeholders not yet substituted.
    Request(Json),
    /// Bytes sent verbatim as the gRPC message.
    Raw(Vec<u8>),
    Sleep(Duration),
    /// Metric names whose deltas since the scenario's start are compared.
    Prom(Vec<String>),
    /// A Raft `watch` with no command (`ratis` scenarios: `{"ratis": {"type": "watch"}}`).
    Watch,
}

impl StepKind {
    /// A short label: the request's `cmdType`, `raw N bytes`, `sleep N ms`, `prom`.
    pub fn label(&self) -> String {
        match self {
            StepKind::Request(json) => match json.get("cmdType") {
                Some(Json::String(s)) => s.clone(),
                Some(other) => format!("cmdType {other}"),
                None => "request without cmdType".into(),
            },
            StepKind::Raw(bytes) => format!("raw {} bytes", bytes.len()),
            StepKind::Sleep(d) => format!("sleep {} ms", d.as_millis()),
            StepKind::Prom(_) => "prom".into(),
            StepKind::Watch => "watch".into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    family: String,
    #[serde(default)]
    #[allow(dead_code)]
    about: Option<String>,
    scenarios: Vec<ScenarioSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioSpec {
    name: String,
    #[serde(default)]
    about: String,
    #[serde(default)]
    stream: StreamMode,
    #[serde(default)]
    config: BTreeMap<String, Json>,
    #[serde(default)]
    versions: Option<Vec<String>>,
    #[serde(default)]
    declared: Option<String>,
    steps: Vec<StepSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepSpec {
    request: Option<Json>,
    raw_hex: Option<String>,
    sleep_ms: Option<u64>,
    prom: Option<Vec<String>>,
    compare: Option<bool>,
    repeat: Option<u32>,
    note: Option<String>,
    ratis: Option<crate::ratis::StepOptions>,
}

/// Bindings used to check at load time that every request substitutes and encodes.
fn dry_run_bindings() -> Bindings {
    Bindings {
        containers: (1..=9).collect(),
        new_containers: (1_000_001..=1_000_009).collect(),
        datanode_uuid: placeholders::OTHER_UUID.into(),
        pipeline: placeholders::OTHER_UUID.into(),
    }
}

fn parse_hex(text: &str) -> anyhow::Result<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        bail!("raw_hex has an odd number of hex digits");
    }
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).unwrap_or("??");
            u8::from_str_radix(s, 16).map_err(|_| anyhow!("raw_hex: {s:?} is not a hex byte"))
        })
        .collect()
}

fn config_value(key: &str, value: &Json) -> anyhow::Result<String> {
    match value {
        Json::String(s) => Ok(s.clone()),
        Json::Number(n) => Ok(n.to_string()),
        Json::Bool(b) => Ok(b.to_string()),
        other => bail!("config {key}: the value must be a string, number or boolean, not {other}"),
    }
}

fn step(spec: StepSpec, stream: StreamMode) -> anyhow::Result<Step> {
    let ratis = spec.ratis.clone().unwrap_or_default();
    if spec.ratis.is_some() && stream != StreamMode::Ratis {
        bail!("ratis options need \"stream\": \"ratis\"");
    }
    let watch = ratis.kind == crate::ratis::RaftKind::Watch;
    if watch && ratis.grpc {
        bail!("a watch goes on the Ratis port, not over gRPC");
    }
    if watch {
        if spec.request.is_some()
            || spec.raw_hex.is_some()
            || spec.sleep_ms.is_some()
            || spec.prom.is_some()
        {
            bail!("a watch step has no request, raw_hex, sleep_ms or prom");
        }
        return Ok(Step {
            kind: StepKind::Watch,
            compare: spec.compare.unwrap_or(true),
            repeat: spec.repeat.unwrap_or(1).max(1),
            note: spec.note,
            ratis,
        });
    }
    if spec.ratis.is_some() && spec.request.is_none() && spec.raw_hex.is_none() {
        bail!("ratis options go with a request or raw_hex step");
    }
    let given = [
        spec.request.is_some(),
        spec.raw_hex.is_some(),
        spec.sleep_ms.is_some(),
        spec.prom.is_some(),
    ]
    .iter()
    .filter(|g| **g)
    .count();
    if given != 1 {
        bail!("a step has exactly one of request, raw_hex, sleep_ms, prom");
    }
    let kind = if let Some(request) = spec.request {
        if !request.is_object() {
            bail!("request must be a JSON object");
        }
        let substituted = placeholders::substitute(&request, &dry_run_bindings())?;
        crate::proto::encode_request(&substituted)?;
        StepKind::Request(request)
    } else if let Some(hex) = spec.raw_hex {
        StepKind::Raw(parse_hex(&hex)?)
    } else if let Some(ms) = spec.sleep_ms {
        StepKind::Sleep(Duration::from_millis(ms))
    } else {
        let names = spec.prom.unwrap_or_default();
        if names.is_empty() {
            bail!("prom lists no metric names");
        }
        let valid = regex::Regex::new(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$").unwrap();
        if let Some(bad) = names.iter().find(|n| !valid.is_match(n)) {
            bail!("prom: {bad:?} is not a metric name");
        }
        StepKind::Prom(names)
    };
    if matches!(kind, StepKind::Sleep(_)) && spec.compare.is_some() {
        bail!("compare makes no sense on a sleep step");
    }
    let repeat = spec.repeat.unwrap_or(1);
    if repeat == 0 {
        bail!("repeat must be at least 1");
    }
    if repeat > 1 && matches!(kind, StepKind::Prom(_)) {
        bail!("repeat makes no sense on a prom step");
    }
    Ok(Step {
        kind,
        compare: spec.compare.unwrap_or(true),
        repeat,
        note: spec.note,
        ratis,
    })
}

fn scenario(family: &str, file: &Path, spec: ScenarioSpec) -> anyhow::Result<Scenario> {
    if spec.name.trim().is_empty() {
        bail!("a scenario has an empty name");
    }
    let ctx = || format!("scenario {:?}", spec.name);
    let versions = match spec.versions {
        Some(v) if v.is_empty() => bail!("{}: versions is empty", ctx()),
        Some(v) => {
            if let Some(bad) = v.iter().find(|x| !VERSIONS.contains(&x.as_str())) {
                bail!(
                    "{}: version {bad:?} is not one of {}",
                    ctx(),
                    VERSIONS.join(", ")
                );
            }
            v
        }
        None => VERSIONS.iter().map(|s| s.to_string()).collect(),
    };
    if spec.steps.is_empty() {
        bail!("{}: no steps", ctx());
    }
    let mut config = Config::new();
    for (key, value) in &spec.config {
        config.insert(key.clone(), config_value(key, value).with_context(ctx)?);
    }
    let mut needs = Needs::default();
    let mut steps = Vec::new();
    for (i, s) in spec.steps.into_iter().enumerate() {
        let step = step(s, spec.stream).with_context(|| format!("{}, step {}", ctx(), i + 1))?;
        if let StepKind::Request(json) = &step.kind {
            needs = needs.max(placeholders::needs(json)?);
        }
        steps.push(step);
    }
    if !steps.iter().any(|s| {
        matches!(
            s.kind,
            StepKind::Request(_) | StepKind::Raw(_) | StepKind::Watch
        )
    }) {
        bail!("{}: no request or raw_hex step", ctx());
    }
    if let Some(d) = &spec.declared
        && d.trim().is_empty()
    {
        bail!("{}: declared is empty", ctx());
    }
    Ok(Scenario {
        family: family.to_string(),
        file: file.to_path_buf(),
        name: spec.name,
        about: spec.about,
        stream: spec.stream,
        config,
        versions,
        declared: spec.declared,
        steps,
        needs,
    })
}

/// Loads one scenario file.
pub fn load_file(path: &Path) -> anyhow::Result<Vec<Scenario>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let spec: FileSpec =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    if spec.family.trim().is_empty() {
        bail!("{}: family is empty", path.display());
    }
    spec.scenarios
        .into_iter()
        .map(|s| scenario(&spec.family, path, s).with_context(|| path.display().to_string()))
        .collect()
}

/// The scenario files a path names: itself, or the `*.json` files of a directory (sorted).
pub fn files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        Ok(files)
    } else if path.exists() {
        Ok(vec![path.to_path_buf()])
    } else {
        bail!("{} does not exist", path.display())
    }
}

/// Loads every scenario of the given files and directories; names must be unique across them.
pub fn load(paths: &[PathBuf]) -> anyhow::Result<Vec<Scenario>> {
    let mut all = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for path in paths {
        for file in files(path)? {
            for s in load_file(&file)? {
                if let Some(first) = seen.insert(s.name.clone(), file.clone()) {
                    bail!(
                        "scenario name {:?} is used twice: {} and {}",
                        s.name,
                        first.display(),
                        file.display()
                    );
                }
                all.push(s);
            }
        }
    }
    if all.is_empty() {
        bail!("no scenarios found");
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn shipped() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }

    #[test]
    fn every_shipped_file_parses_and_names_are_unique() {
        let files = files(&shipped()).unwrap();
        assert!(!files.is_empty());
        let all = load(&[shipped()]).unwrap();
        let mut names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        for file in files {
            let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
            let scenarios = load_file(&file).unwrap();
            assert!(
                scenarios.iter().all(|s| s.family == stem),
                "{}: family must be the file name",
                file.display()
            );
        }
        let echo: Vec<_> = all.iter().filter(|s| s.family == "echo").collect();
        assert!(echo.len() >= 8, "echo.json has {} scenarios", echo.len());
    }

    fn load_text(text: &str) -> anyhow::Result<Vec<Scenario>> {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        load_file(f.path())
    }

    #[test]
    fn scenario_fields_and_defaults() {
        let s = load_text(
            r#"{"family": "x", "scenarios": [{"name": "a", "about": "A",
                "config": {"k": "v", "n": 3, "b": true}, "declared": "D1", "stream": "one-stream",
                "steps": [{"request": {"cmdType": "Echo", "containerID": "$C2", "echo": {}}},
                          {"raw_hex": "08 16", "compare": false, "repeat": 3, "note": "n"},
                          {"sleep_ms": 5}, {"prom": ["storage_container_metrics_num_echo"]},
                          {"request": {"cmdType": 99, "traceID": "$NEW3"}}]}]}"#,
        )
        .unwrap();
        let s = &s[0];
        assert_eq!(s.stream, StreamMode::OneStream);
        assert_eq!(s.config.get("n").unwrap(), "3");
        assert_eq!(s.config.get("b").unwrap(), "true");
        assert_eq!(s.versions, VERSIONS);
        assert_eq!(s.declared.as_deref(), Some("D1"));
        assert_eq!(
            s.needs,
            Needs {
                containers: 2,
                new_containers: 3
            }
        );
        assert!(matches!(&s.steps[1].kind, StepKind::Raw(b) if b == &[8, 0x16]));
        assert!(!s.steps[1].compare);
        assert_eq!(s.steps[1].repeat, 3);
        assert!(s.has_prom_step());
        assert_eq!(s.steps[0].kind.label(), "Echo");
        assert_eq!(s.steps[4].kind.label(), "cmdType 99");
        let d = load_text(r#"{"family": "x", "scenarios": [{"name": "b", "versions": ["2.1"], "steps": [{"raw_hex": ""}]}]}"#)
            .unwrap();
        assert_eq!(d[0].stream, StreamMode::PerRequest);
        assert!(d[0].runs_on("2.1") && !d[0].runs_on("2.2"));
    }

    #[test]
    fn mistakes_are_errors() {
        let bad = [
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": []}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "stepz": []}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"request": {}, "raw_hex": "00"}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"request": {"cmdTyp": 1}}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"request": {"containerID": "$C0"}}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"raw_hex": "0"}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"raw_hex": "zz"}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"sleep_ms": 1}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "versions": ["1.4"], "steps": [{"raw_hex": ""}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "stream": "two", "steps": [{"raw_hex": ""}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"raw_hex": "", "repeat": 0}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"raw_hex": ""}, {"prom": ["a b"]}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "", "steps": [{"raw_hex": ""}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "config": {"k": [1]}, "steps": [{"raw_hex": ""}]}]}"#,
            r#"{"family": "x", "scenarios": [{"name": "a", "steps": [{"raw_hex": ""}]}, {"name": "a", "steps": [{"raw_hex": ""}]}]}"#,
            "not json",
        ];
        for text in bad {
            let result = load_text(text).and_then(|s| {
                // duplicate names are found by `load`, across and within files
                let mut names: Vec<_> = s.iter().map(|s| &s.name).collect();
                names.sort();
                names.dedup();
                if names.len() != s.len() {
                    bail!("duplicate");
                }
                Ok(s)
            });
            assert!(result.is_err(), "accepted: {text}");
        }
    }

    #[test]
    fn names_are_unique_across_files() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["a.json", "b.json"] {
            std::fs::write(
                dir.path().join(f),
                r#"{"family": "x", "scenarios": [{"name": "same", "steps": [{"raw_hex": ""}]}]}"#,
            )
            .unwrap();
        }
        let err = load(&[dir.path().to_path_buf()]).unwrap_err().to_string();
        assert!(err.contains("used twice"), "{err}");
    }
}

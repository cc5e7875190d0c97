//! The run: load and select scenarios, hand out container IDs, start a pair of targets per
//! config group, play every scenario on both, judge, report.

use crate::cli::Args;
use crate::client::{Client, OneStream};
use crate::outcome::{Outcome, StepResult, Verdict};
use crate::placeholders::Bindings;
use crate::prom::{self, Snapshot};
use crate::ratis::RatisStream;
use crate::scenario::{self, Config, Scenario, StepKind, StreamMode};
use crate::target::{self, Endpoint, Process, SimOptions};
use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// A scenario with its container IDs.
#[derive(Debug, Clone)]
pub struct Planned {
    pub scenario: Scenario,
    pub containers: Vec<u64>,
    pub new_containers: Vec<u64>,
}

/// Hands out container IDs in scenario order, never twice.
pub fn allocate(
    scenarios: Vec<Scenario>,
    pool: &[u64],
    new_base: u64,
) -> anyhow::Result<Vec<Planned>> {
    let wanted: usize = scenarios.iter().map(|s| s.needs.containers).sum();
    if wanted > pool.len() {
        bail!(
            "the selected scenarios need {wanted} pre-created containers; --containers has {}",
            pool.len()
        );
    }
    let (mut next, mut next_new) = (0usize, 1u64);
    Ok(scenarios
        .into_iter()
        .map(|scenario| {
            let containers = pool[next..next + scenario.needs.containers].to_vec();
            next += scenario.needs.containers;
            let new_containers = (0..scenario.needs.new_containers as u64)
                .map(|k| new_base + next_new + k)
                .collect();
            next_new += scenario.needs.new_containers as u64;
            Planned {
                scenario,
                containers,
                new_containers,
            }
        })
        .collect())
}

/// Scenarios grouped by config, groups in order of first appearance.
pub fn groups(planned: Vec<Planned>) -> Vec<(Config, Vec<Planned>)> {
    let mut groups: Vec<(Config, Vec<Planned>)> = Vec::new();
    for p in planned {
        match groups.iter_mut().find(|(c, _)| *c == p.scenario.config) {
            Some((_, list)) => list.push(p),
            None => groups.push((p.scenario.config.clone(), vec![p])),
        }
    }
    groups
}

pub fn config_text(config: &Config) -> String {
    if config.is_empty() {
        "(none)".into()
    } else {
        config
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One target's connections and addresses.
struct Side {
    client: Client,
    /// To the Ratis client port, when the target has one and a scenario of the group needs it
    /// (else why not).
    ratis: Result<Client, String>,
    endpoint: Endpoint,
}

/// A step's message bytes for one side.
fn message(kind: &StepKind, bindings: &Bindings) -> anyhow::Result<Bytes> {
    match kind {
        StepKind::Request(json) => {
            let substituted = crate::placeholders::substitute(json, bindings)?;
            Ok(Bytes::from(crate::proto::encode_request(&substituted)?))
        }
        StepKind::Raw(bytes) => Ok(Bytes::from(bytes.clone())),
        _ => bail!("not a message step"),
    }
}

/// A connection to a target's Ratis client port, or why there is none.
async fn ratis_connection(
    endpoint: &Endpoint,
    wanted: bool,
    timeout: Duration,
) -> Result<Client, String> {
    if !wanted {
        return Err("no scenario of the group needs the Ratis port".into());
    }
    let addr = endpoint
        .ratis
        .as_deref()
        .ok_or("the target names no Ratis port")?;
    Client::connect(addr, timeout)
        .await
        .map_err(|e| format!("the Ratis port: {e:#}"))
}

/// A `ratis` scenario's stream on one side: its Ratis connection, pipeline and client id.
fn ratis_stream(side: &Side, scenario: &str) -> Result<RatisStream, String> {
    let client = side.ratis.clone()?;
    let pipeline = side
        .endpoint
        .pipeline
        .as_deref()
        .ok_or("the target names no pipeline")?;
    let pipeline = uuid::Uuid::parse_str(pipeline)
        .map_err(|e| format!("the target's pipeline {pipeline:?} is no UUID: {e}"))?;
    Ok(RatisStream::new(
        client,
        crate::ratis::Names {
            datanode_uuid: side.endpoint.uuid.clone(),
            pipeline,
            client_id: crate::ratis::client_id(scenario),
        },
    ))
}

/// A scrape of `/prom` once the listed metrics have stopped moving for `settle`: a real
/// DataNode's Prometheus sink shows the metrics system's last snapshot (taken every
/// `*.period`), so a single scrape may lag the requests just answered. `settle` zero: one scrape.
async fn settled_snapshot(
    http: Option<&str>,
    names: &[String],
    settle: Duration,
    own_group: Option<&str>,
) -> Result<Snapshot, String> {
    let http = http.ok_or("no HTTP address for /prom")?;
    let start = Instant::now();
    // the listed series' values (as bits) and since when they have been so
    type Reading = Vec<(String, String, u64)>;
    let mut last: Option<(Reading, Instant)> = None;
    loop {
        let text = prom::scrape(http).await.map_err(|e| format!("{e:#}"))?;
        let snapshot = prom::snapshot(&text, own_group);
        if settle.is_zero() {
            return Ok(snapshot);
        }
        let key: Reading = snapshot
            .values
            .iter()
            .filter(|((name, _), _)| names.contains(name))
            .map(|((n, l), v)| (n.clone(), l.clone(), v.to_bits()))
            .collect();
        let now = Instant::now();
        match &last {
            Some((previous, since)) if *previous == key => {
                if now.duration_since(*since) >= settle {
                    return Ok(snapshot);
                }
            }
            _ => last = Some((key, now)),
        }
        if now.duration_since(start) > settle + PROM_SETTLE_LIMIT {
            return Ok(snapshot);
        }
        tokio::time::sleep(PROM_POLL).await;
    }
}

/// How often `/prom` is polled while it settles, and how long past `--prom-settle` it may keep
/// moving before the last scrape is taken as it is.
const PROM_POLL: Duration = Duration::from_millis(200);
const PROM_SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// Plays a scenario on one side.
async fn play(side: &Side, planned: &Planned, settle: Duration) -> Vec<StepResult> {
    let scenario = &planned.scenario;
    let bindings = Bindings {
        containers: planned.containers.clone(),
        new_containers: planned.new_containers.clone(),
        datanode_uuid: side.endpoint.uuid.clone(),
        pipeline: side.endpoint.pipeline.clone().unwrap_or_default(),
    };
    let http = side.endpoint.http.as_deref();
    // Ratis's series of the target's own group only (a real DataNode's JVM holds others).
    let own_group = side
        .endpoint
        .pipeline
        .as_deref()
        .and_then(|p| uuid::Uuid::parse_str(p).ok())
        .map(prom::raft_group_name);
    let own_group = own_group.as_deref();
    let prom_names: Vec<String> = scenario
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Prom(names) => Some(names.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let baseline = if prom_names.is_empty() {
        None
    } else {
        Some(settled_snapshot(http, &prom_names, settle, own_group).await)
    };
    let mut stream: Option<OneStream> =
        (scenario.stream == StreamMode::OneStream).then(|| side.client.stream());
    // A `ratis` scenario's stream, or why there is none.
    let mut raft: Option<Result<RatisStream, String>> =
        (scenario.stream == StreamMode::Ratis).then(|| ratis_stream(side, &scenario.name));
    let mut results = Vec::new();
    for (i, step) in scenario.steps.iter().enumerate() {
        let mut push = |repeat: u32, answer: Json| {
            let normalized = crate::normalize::normalize_answer(&answer);
            results.push(StepResult {
                step: i + 1,
                repeat,
                repeats: step.repeat,
                label: step.kind.label(),
                compare: step.compare,
                answer,
                normalized,
            });
        };
        match &step.kind {
            StepKind::Sleep(d) => tokio::time::sleep(*d).await,
            StepKind::Prom(names) => {
                let answer = match &baseline {
                    Some(Ok(base)) => {
                        match settled_snapshot(http, names, settle, own_group).await {
                            Ok(now) => prom::answer(names, base, &now),
                            Err(e) => json!({"runner_error": format!("/prom: {e}")}),
                        }
                    }
                    Some(Err(e)) => json!({"runner_error": format!("/prom at the start: {e}")}),
                    None => unreachable!("a scenario with a prom step has a baseline"),
                };
                push(1, answer);
            }
            StepKind::Watch => {
                for r in 1..=step.repeat {
                    let answer = match raft.as_mut() {
                        Some(Ok(raft)) => raft.send(None, &step.ratis).await,
                        Some(Err(why)) => json!({"runner_error": why.clone()}),
                        None => json!({"runner_error": "a watch outside a ratis scenario"}),
                    };
                    push(r, answer);
                }
            }
            kind => {
                let bytes = match message(kind, &bindings) {
                    Ok(b) => b,
                    Err(e) => {
                        for r in 1..=step.repeat {
                            push(r, json!({"runner_error": format!("{e:#}")}));
                        }
                        continue;
                    }
                };
                for r in 1..=step.repeat {
                    let answer = match (raft.as_mut(), stream.as_mut()) {
                        (Some(Ok(raft)), _) => {
                            let mut answer = if step.ratis.grpc {
                                side.client.per_request(bytes.clone()).await
                            } else {
                                raft.send(Some(&bytes), &step.ratis).await
                            };
                            crate::ratis::relative_bcs_ids(&mut answer, raft.base());
                            answer
                        }
                        (Some(Err(why)), _) => json!({"runner_error": why.clone()}),
                        (None, Some(s)) => s.send(bytes.clone()).await,
                        (None, None) => side.client.per_request(bytes.clone()).await,
                    };
                    push(r, answer);
                }
            }
        }
    }
    results
}

/// How a side's target comes to be.
enum Launch {
    Given(Endpoint),
    Start,
}

struct Run {
    args: Args,
    sim_options: Option<SimOptions>,
    real_cmd: String,
    work: PathBuf,
}

impl Run {
    async fn start_real(
        &self,
        config: &Config,
        index: usize,
    ) -> anyhow::Result<(Endpoint, Option<Process>)> {
        match self.launch_real() {
            Launch::Given(e) => Ok((e, None)),
            Launch::Start => {
                let (e, p) = target::start_real(
                    &self.real_cmd,
                    &self.args.containers.text,
                    config,
                    &self.work,
                    index,
                    self.args.start_timeout,
                )
                .await?;
                Ok((e, Some(p)))
            }
        }
    }

    async fn start_sim(
        &self,
        config: &Config,
        index: usize,
    ) -> anyhow::Result<(Endpoint, Option<Process>)> {
        match self.launch_sim() {
            Launch::Given(e) => Ok((e, None)),
            Launch::Start => {
                let options = self.sim_options.as_ref().expect("sim options are resolved");
                let (e, p) = target::start_sim(
                    options,
                    &self.args.containers.text,
                    config,
                    &self.work,
                    index,
                    self.args.start_timeout,
                )
                .await?;
                Ok((e, Some(p)))
            }
        }
    }

    fn launch_real(&self) -> Launch {
        match (&self.args.real_addr, &self.args.real_uuid) {
            (Some(addr), Some(uuid)) => Launch::Given(Endpoint {
                addr: addr.clone(),
                uuid: uuid.clone(),
                http: self.args.real_http.clone(),
                ratis: self.args.real_ratis.clone(),
                pipeline: self.args.real_pipeline.clone(),
            }),
            _ => Launch::Start,
        }
    }

    fn launch_sim(&self) -> Launch {
        match (&self.args.sim_addr, &self.args.sim_uuid) {
            (Some(addr), Some(uuid)) => Launch::Given(Endpoint {
                addr: addr.clone(),
                uuid: uuid.clone(),
                http: self.args.sim_http.clone(),
                ratis: self.args.sim_ratis.clone(),
                pipeline: self.args.sim_pipeline.clone(),
            }),
            _ => Launch::Start,
        }
    }
}

async fn stop(processes: Vec<Option<Process>>) {
    for p in processes.into_iter().flatten() {
        p.stop().await;
    }
}

/// What a group of scenarios needs from a run, and what it gave.
#[derive(Serialize)]
struct GroupRecord {
    config: Config,
    real: Endpoint,
    sim: Endpoint,
}

/// The default scenario directory: `conformance/scenarios` from the working directory, or this
/// crate's own when run from elsewhere.
fn default_scenarios() -> PathBuf {
    let relative = PathBuf::from("conformance/scenarios");
    if relative.is_dir() {
        relative
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }
}

/// Checks `declared` ids against `docs/deviations.md` when that file exists.
fn check_declarations(scenarios: &[Scenario]) {
    let candidates = [
        PathBuf::from("docs/deviations.md"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/deviations.md"),
    ];
    let Some(text) = candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
    else {
        return;
    };
    for s in scenarios {
        if let Some(id) = &s.declared {
            let word = regex::Regex::new(&format!(r"(^|[^\w]){}([^\w]|$)", regex::escape(id)))
                .expect("an escaped id is a valid regex");
            if !word.is_match(&text) {
                eprintln!(
                    "conformance: warning: {} declares {id}, which docs/deviations.md does not mention",
                    s.name
                );
            }
        }
    }
}

/// Entry point of the binary: runs, prints, returns the exit code.
pub async fn main(args: Args) -> ExitCode {
    let interrupted = async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    };
    tokio::select! {
        code = run(args) => code,
        _ = interrupted => {
            // Dropping the run future drops its targets, which stops them.
            eprintln!("conformance: interrupted; targets stopped");
            ExitCode::from(130)
        }
    }
}

fn fatal(e: anyhow::Error) -> ExitCode {
    eprintln!("conformance: {e:#}");
    ExitCode::from(2)
}

async fn run(args: Args) -> ExitCode {
    let paths = if args.scenarios.is_empty() {
        vec![default_scenarios()]
    } else {
        args.scenarios.clone()
    };
    let all = match scenario::load(&paths) {
        Ok(s) => s,
        Err(e) => return fatal(e),
    };
    let total = all.len();
    let by_name: Vec<Scenario> = all
        .into_iter()
        .filter(|s| args.only.as_ref().is_none_or(|r| r.is_match(&s.name)))
        .collect();
    let matched = by_name.len();
    let selected: Vec<Scenario> = by_name
        .into_iter()
        .filter(|s| s.runs_on(&args.ozone_version))
        .collect();
    if matched > selected.len() {
        eprintln!(
            "conformance: {} scenario(s) are not for Ozone {} and are left out",
            matched - selected.len(),
            args.ozone_version
        );
    }
    check_declarations(&selected);
    if args.list {
        for s in &selected {
            println!(
                "{}\t{}\t{}\tversions {}\tconfig {}\tdeclared {}\t{}",
                s.name,
                s.family,
                s.stream.name(),
                s.versions.join(","),
                config_text(&s.config),
                s.declared.as_deref().unwrap_or("-"),
                s.about
            );
        }
        eprintln!(
            "conformance: {} of {total} scenario(s) listed",
            selected.len()
        );
        return ExitCode::SUCCESS;
    }
    if selected.is_empty() {
        return fatal(anyhow!(
            "no scenario selected (of {total}; --only, --ozone-version {})",
            args.ozone_version
        ));
    }
    let planned = match allocate(selected, &args.containers.ids, args.new_container_base) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    let mut groups = groups(planned);
    let given = args.real_addr.is_some() || args.sim_addr.is_some();
    if given && groups.len() > 1 {
        let keep = groups.iter().position(|(c, _)| c.is_empty()).unwrap_or(0);
        let kept = groups.swap_remove(keep);
        for (config, list) in &groups {
            eprintln!(
                "conformance: skipping {} scenario(s) with config {}: targets given by address serve one config group only ({})",
                list.len(),
                config_text(config),
                list.iter()
                    .map(|p| p.scenario.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        groups = vec![kept];
    }
    if given
        && let Some((config, _)) = groups.first()
        && !config.is_empty()
    {
        eprintln!(
            "conformance: assuming the given target(s) run with config {}",
            config_text(config)
        );
    }

    let (work, own_work) = match &args.work_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("conformance-{}", std::process::id())),
            true,
        ),
    };
    if let Err(e) = std::fs::create_dir_all(&work) {
        return fatal(anyhow!("cannot create {}: {e}", work.display()));
    }
    let sim_options = if args.sim_addr.is_none() {
        let flag = |flag: &str| {
            let flag = flag.trim().to_string();
            let cmd = args.sim_cmd.clone();
            async move {
                if flag.is_empty() {
                    None
                } else if target::help_mentions(&cmd, &flag).await {
                    Some(flag)
                } else {
                    eprintln!("conformance: `{cmd} --help` does not list {flag}; not passing it");
                    None
                }
            }
        };
        Some(SimOptions {
            command_line: args.sim_cmd.clone(),
            extra_args: args.sim_extra_args.clone(),
            uuid_flag: flag(&args.sim_uuid_flag).await,
            version_flag: flag(&args.sim_version_flag).await,
            ready_file: target::help_mentions(&args.sim_cmd, "--ready-file").await,
            pipeline_flag: target::help_mentions(&args.sim_cmd, "--pipeline-id").await,
            ozone_version: args.ozone_version.clone(),
        })
    } else {
        None
    };
    let real_cmd = args.real_cmd.clone().unwrap_or_else(|| {
        format!(
            "scripts/real-datanode.sh --ozone-version {}.0",
            args.ozone_version
        )
    });
    let run = Run {
        args,
        sim_options,
        real_cmd,
        work: work.clone(),
    };

    let mut outcomes = Vec::new();
    let mut records = Vec::new();
    let mut failure = None;
    let group_count = groups.len();
    for (index, (config, list)) in groups.into_iter().enumerate() {
        eprintln!(
            "conformance: config group {}/{group_count} ({}): {} scenario(s); starting targets",
            index + 1,
            config_text(&config),
            list.len()
        );
        match run_group(&run, &config, index, &list, &mut outcomes).await {
            Ok(record) => records.push(record),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }

    print!("{}", crate::report::render(&outcomes));
    if let Some(path) = &run.args.json
        && let Err(e) = write_json(path, &run.args.ozone_version, &records, &outcomes)
    {
        return fatal(e);
    }
    if let Some(e) = failure {
        eprintln!("conformance: logs are in {}", work.display());
        return fatal(e);
    }
    if own_work {
        let _ = std::fs::remove_dir_all(&work);
    }
    let (_, _, differ) = crate::report::totals(&outcomes);
    if differ > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn run_group(
    run: &Run,
    config: &Config,
    index: usize,
    list: &[Planned],
    outcomes: &mut Vec<Outcome>,
) -> anyhow::Result<GroupRecord> {
    let (real, sim) = tokio::join!(run.start_real(config, index), run.start_sim(config, index));
    let (real, sim) = match (real, sim) {
        (Ok(r), Ok(s)) => (r, s),
        (r, s) => {
            let mut errors = Vec::new();
            let mut processes = Vec::new();
            for (what, result) in [("real DataNode", r), ("dn-sim", s)] {
                match result {
                    Ok((_, p)) => processes.push(p),
                    Err(e) => errors.push(format!("{what}: {e:#}")),
                }
            }
            stop(processes).await;
            bail!("a target failed to start: {}", errors.join("; "));
        }
    };
    let (real_endpoint, real_process) = real;
    let (sim_endpoint, sim_process) = sim;
    eprintln!(
        "conformance: real DataNode {} (uuid {}, http {}); dn-sim {} (uuid {}, http {})",
        real_endpoint.addr,
        real_endpoint.uuid,
        real_endpoint.http.as_deref().unwrap_or("-"),
        sim_endpoint.addr,
        sim_endpoint.uuid,
        sim_endpoint.http.as_deref().unwrap_or("-"),
    );
    let timeout = run.args.answer_timeout;
    let clients = tokio::join!(
        Client::connect(&real_endpoint.addr, timeout),
        Client::connect(&sim_endpoint.addr, timeout)
    );
    let (real_client, sim_client) = match clients {
        (Ok(r), Ok(s)) => (r, s),
        (r, s) => {
            stop(vec![real_process, sim_process]).await;
            let e = r.err().or(s.err()).unwrap();
            return Err(e.context("a target does not accept gRPC connections"));
        }
    };
    // The Ratis ports only when a scenario of the group needs them.
    let wants_ratis = list.iter().any(|p| p.scenario.stream == StreamMode::Ratis);
    let (real_ratis, sim_ratis) = tokio::join!(
        ratis_connection(&real_endpoint, wants_ratis, timeout),
        ratis_connection(&sim_endpoint, wants_ratis, timeout)
    );
    let real_side = Side {
        client: real_client,
        ratis: real_ratis,
        endpoint: real_endpoint.clone(),
    };
    let sim_side = Side {
        client: sim_client,
        ratis: sim_ratis,
        endpoint: sim_endpoint.clone(),
    };
    for planned in list {
        let s = &planned.scenario;
        let settle = run.args.prom_settle;
        let (real, sim) = tokio::join!(
            play(&real_side, planned, settle),
            play(&sim_side, planned, settle)
        );
        let mut outcome = Outcome {
            name: s.name.clone(),
            family: s.family.clone(),
            about: s.about.clone(),
            declared: s.declared.clone(),
            real,
            sim,
            verdict: Verdict::Identical,
            differing: vec![],
        };
        outcome.judge();
        eprintln!(
            "conformance: {}: {}",
            s.name,
            match outcome.verdict {
                Verdict::Identical => "identical",
                Verdict::Declared => "declared difference",
                Verdict::Differ => "DIFFER",
            }
        );
        outcomes.push(outcome);
    }
    // Close the connections first: a server's graceful shutdown waits for open connections.
    drop((real_side, sim_side));
    stop(vec![real_process, sim_process]).await;
    Ok(GroupRecord {
        config: config.clone(),
        real: real_endpoint,
        sim: sim_endpoint,
    })
}

fn write_json(
    path: &Path,
    version: &str,
    groups: &[GroupRecord],
    outcomes: &[Outcome],
) -> anyhow::Result<()> {
    let (identical, declared, differ) = crate::report::totals(outcomes);
    let doc = json!({
        "ozone_version": version,
        "groups": groups,
        "scenarios": outcomes,
        "totals": {"identical": identical, "declared": declared, "differ": differ},
    });
    let text = serde_json::to_string_pretty(&doc)?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placeholders::Needs;

    fn scenario(name: &str, needs: Needs, config: &[(&str, &str)]) -> Scenario {
        Scenario {
            family: "f".into(),
            file: PathBuf::new(),
            name: name.into(),
            about: String::new(),
            stream: StreamMode::PerRequest,
            config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            versions: vec!["2.2".into()],
            declared: None,
            steps: vec![],
            needs,
        }
    }

    #[test]
    fn ids_are_never_reused_and_groups_keep_order() {
        let n = |c, k| Needs {
            containers: c,
            new_containers: k,
        };
        let planned = allocate(
            vec![
                scenario("a", n(2, 1), &[]),
                scenario("b", n(0, 2), &[("k", "v")]),
                scenario("c", n(1, 0), &[]),
            ],
            &[1, 2, 3, 4],
            1_000_000,
        )
        .unwrap();
        assert_eq!(planned[0].containers, vec![1, 2]);
        assert_eq!(planned[0].new_containers, vec![1_000_001]);
        assert_eq!(planned[1].containers, Vec::<u64>::new());
        assert_eq!(planned[1].new_containers, vec![1_000_002, 1_000_003]);
        assert_eq!(planned[2].containers, vec![3]);
        let g = groups(planned);
        assert_eq!(g.len(), 2);
        assert!(g[0].0.is_empty());
        assert_eq!(
            g[0].1
                .iter()
                .map(|p| p.scenario.name.as_str())
                .collect::<Vec<_>>(),
            ["a", "c"]
        );
        assert!(allocate(vec![scenario("a", n(5, 0), &[])], &[1, 2], 0).is_err());
    }

    #[test]
    fn runner_errors_always_differ() {
        let r = |answer: Json, compare| StepResult {
            step: 1,
            repeat: 1,
            repeats: 1,
            label: "x".into(),
            compare,
            normalized: answer.clone(),
            answer,
        };
        let mut o = Outcome {
            name: "n".into(),
            family: "f".into(),
            about: String::new(),
            declared: None,
            real: vec![
                r(json!({"runner_error": "e"}), false),
                r(json!({"response": {}}), false),
            ],
            sim: vec![
                r(json!({"runner_error": "e"}), false),
                r(json!({"response": {"a": 1}}), false),
            ],
            verdict: Verdict::Identical,
            differing: vec![],
        };
        o.judge();
        assert_eq!(o.differing, vec![0]);
        assert_eq!(o.verdict, Verdict::Differ);
    }
}

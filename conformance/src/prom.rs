//! `prom` steps: scrape a target's `/prom` (Prometheus text), normalise the series and compare,
//! per listed metric name, how much each series moved since the scenario started.
//!
//! - Series are keyed by their labels after normalisation: `hostname` and any label whose name
//!   contains `host` or `port`, or whose value looks like a UUID, an IP address, `HOST:PORT` or
//!   this machine's host name, are dropped; path-like values become `<path>` (see
//!   `normalize::normalize_string`), and a Raft group as Ratis names it (`group-` and 12 hex
//!   digits: `csm_metrics_*{raftgroupid=…}`, each target's own pipeline) `group-<id>`. Series
//!   that collapse into one key are added up; a sample repeated with the same name and labels
//!   counts once (the harness's JVM runs a DataNode, an SCM and an OM, each of which registers
//!   Ratis's exporter, so a real DataNode's Ratis series appear three times on its `/prom`; a
//!   DataNode in a JVM of its own shows each once).
//! - Ratis's series name their group in a `group` label (`ratis_*{instance=…,group=…}`), and a
//!   real DataNode's JVM also holds the Ratis servers of its SCM and OM: a `group` that is not
//!   the target's own pipeline drops the series.
//! - A counter's answer is its delta since the baseline scrape taken before the scenario's first
//!   step (a series absent then counts from 0). Gauges (`# TYPE … gauge`, or names ending in
//!   `_avg_time`, `_stdev_time`, `_min_time`, `_max_time`, `_imin_time`, `_imax_time`) and a
//!   summary's quantiles (durations) are compared for presence only, except Ratis's: its
//!   exporter types every Dropwizard counter `gauge`, and its gauges are counts and log
//!   indexes, so a `ratis_*` gauge's delta is compared (a summary's `_count` is a counter),
//!   except `ratis_server_peerCommitIndex` (see [`RACY_RATIS_GAUGES`]).
//! - The answer of a `prom` step: `{"prom": {NAME: {"type": T, "series": {LABELS: DELTA |
//!   "present"}}, …}}`, or `NAME: "absent"` when the target has no series of that name.

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Map, Value as Json, json};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Suffixes of Hadoop metrics2 rate statistics that are gauges.
const GAUGE_SUFFIXES: [&str; 6] = [
    "_avg_time",
    "_stdev_time",
    "_min_time",
    "_max_time",
    "_imin_time",
    "_imax_time",
];

/// Ratis gauges compared for presence only, because a real DataNode's value after a scenario
/// depends on a race. `ratis_server_peerCommitIndex` reads Ratis's commit-info cache, which
/// (Ratis 3.2.1, Ozone 2.2.0's) is updated only when a reply's or a group info's commit infos
/// are built (`RaftServerImpl.getCommitInfos`), not when the log commits: in a one-node group
/// the metadata entry Ratis appends after a commit may commit after the scenario's last reply,
/// and the gauge then trails by one until the next scenario's first reply (seen once in many
/// runs: +5 and then +1 where the real DataNode usually shows +6 and +0).
const RACY_RATIS_GAUGES: [&str; 1] = ["ratis_server_peerCommitIndex"];

/// At most this many unparsable samples are remembered per scrape.
const MAX_SKIPPED: usize = 1000;

/// The largest `/prom` body read.
const MAX_BODY: u64 = 64 << 20;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// A scrape, normalised: values by (name, label key), types by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub types: HashMap<String, String>,
    pub values: BTreeMap<(String, String), f64>,
    /// The starts of samples that did not parse.
    pub skipped: Vec<String>,
}

/// Parses the Prometheus text format (`# TYPE` lines, samples; other comments ignored). Hadoop's
/// sink writes label values with raw newlines (and unescaped quotes) in them, so a quoted value may
/// span lines. A sample that does not parse is skipped up to the end of its line, and parsing goes
/// on from the next; the start of each skipped line is returned (a real DataNode's JVM has a few
/// such SCM/OM series; the DataNode's own parse).
pub fn parse(text: &str) -> (HashMap<String, String>, Vec<Sample>, Vec<String>) {
    let mut types = HashMap::new();
    let mut samples = Vec::new();
    let mut skipped = Vec::new();
    let mut p = Parser { text, pos: 0 };
    loop {
        p.skip(|c| c.is_whitespace());
        let Some(c) = p.peek() else { break };
        if c == '#' {
            let line = p.rest_of_line();
            let mut words = line[1..].split_whitespace();
            if words.next() == Some("TYPE")
                && let (Some(name), Some(kind)) = (words.next(), words.next())
            {
                types.insert(name.to_string(), kind.to_string());
            }
            continue;
        }
        let start = p.pos;
        match p.sample() {
            Ok(sample) => samples.push(sample),
            Err(_) => {
                p.pos = start;
                let line = p.rest_of_line();
                if skipped.len() < MAX_SKIPPED {
                    skipped.push(line.chars().take(120).collect());
                }
            }
        }
    }
    (types, samples, skipped)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip(&mut self, f: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&f) {
            self.bump();
        }
    }

    fn take(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let start = self.pos;
        self.skip(f);
        &self.text[start..self.pos]
    }

    /// The rest of the current line, consuming its newline.
    fn rest_of_line(&mut self) -> &'a str {
        let line = self.take(|c| c != '\n');
        self.bump();
        line
    }

    fn sample(&mut self) -> anyhow::Result<Sample> {
        let name = self
            .take(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            .to_string();
        if name.is_empty() {
            bail!("no metric name");
        }
        let mut labels = Vec::new();
        if self.peek() == Some('{') {
            self.bump();
            loop {
                self.skip(|c| c == ',' || c.is_whitespace());
                if self.peek() == Some('}') {
                    self.bump();
                    break;
                }
                let key = self
                    .take(|c| c != '=' && c != '}' && c != '\n')
                    .trim()
                    .to_string();
                if self.bump() != Some('=') || self.bump() != Some('"') {
                    bail!("label {key} has no quoted value");
                }
                let mut value = String::new();
                loop {
                    match self.bump() {
                        Some('\\') => match self.bump() {
                            Some('n') => value.push('\n'),
                            Some(other) => value.push(other),
                            None => bail!("label {key}'s value is not closed"),
                        },
                        Some('"') => break,
                        Some(other) => value.push(other),
                        None => bail!("label {key}'s value is not closed"),
                    }
                }
                labels.push((key, value));
            }
        }
        self.skip(|c| c == ' ' || c == '\t');
        let value_text = self.take(|c| !c.is_whitespace());
        let value = match value_text {
            "+Inf" | "Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v
                .parse()
                .with_context(|| format!("{v:?} is not a number"))?,
        };
        // an optional timestamp, then the end of the line
        self.skip(|c| c == ' ' || c == '\t');
        self.take(|c| !c.is_whitespace());
        self.skip(|c| c == ' ' || c == '\t' || c == '\r');
        match self.bump() {
            None | Some('\n') => Ok(Sample {
                name,
                labels,
                value,
            }),
            Some(c) => Err(anyhow!("unexpected {c:?} after the value")),
        }
    }
}

fn local_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn looks_local(value: &str, hostname: Option<&str>) -> bool {
    static HOST_PORT: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let host_port = HOST_PORT.get_or_init(|| {
        regex::Regex::new(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+):\d{1,5}$").unwrap()
    });
    crate::normalize::is_uuid(value)
        || value.parse::<std::net::IpAddr>().is_ok()
        || host_port.is_match(value)
        || value == "localhost"
        || hostname.is_some_and(|h| value == h || value.split('.').next() == Some(h))
}

/// A pipeline's Raft group as Ratis prints its id: `group-` and the last 12 hex digits.
pub fn raft_group_name(pipeline: uuid::Uuid) -> String {
    let hex = pipeline.simple().to_string().to_uppercase();
    format!("group-{}", &hex[20..])
}

/// `group-XXXXXXXXXXXX`: a `RaftGroupId` as Ratis prints it.
fn is_raft_group_name(value: &str) -> bool {
    value
        .strip_prefix("group-")
        .is_some_and(|hex| hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The normalised label key of a series: `{a="x",b="y"}`, sorted, local labels dropped.
pub fn label_key(labels: &[(String, String)], hostname: Option<&str>) -> String {
    let mut kept: Vec<(String, String)> = labels
        .iter()
        .filter(|(k, v)| {
            let k = k.to_ascii_lowercase();
            !(k.contains("host") || k.contains("port") || looks_local(v, hostname))
        })
        .map(|(k, v)| {
            let v = if is_raft_group_name(v) {
                "group-<id>".to_string()
            } else {
                crate::normalize::normalize_string(v)
            };
            (k.clone(), v)
        })
        .collect();
    kept.sort();
    let inner: Vec<String> = kept
        .iter()
        .map(|(k, v)| format!("{k}={}", serde_json::to_string(v).unwrap()))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A scrape's text as a [`Snapshot`].
/// `own_group`: the target's pipeline as Ratis names its group (`group-XXXXXXXXXXXX`, see
/// [`raft_group_name`]); series of other groups are left out.
pub fn snapshot(text: &str, own_group: Option<&str>) -> Snapshot {
    let (types, samples, skipped) = parse(text);
    let hostname = local_hostname();
    let mut values: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut seen: std::collections::HashSet<(String, Vec<(String, String)>)> =
        std::collections::HashSet::new();
    for s in samples {
        if !seen.insert((s.name.clone(), s.labels.clone())) {
            continue;
        }
        let foreign = own_group.is_some_and(|own| {
            s.labels
                .iter()
                .any(|(k, v)| k == "group" && is_raft_group_name(v) && !v.eq_ignore_ascii_case(own))
        });
        if foreign {
            continue;
        }
        let key = (s.name.clone(), label_key(&s.labels, hostname.as_deref()));
        *values.entry(key).or_insert(0.0) += s.value;
    }
    Snapshot {
        types,
        values,
        skipped,
    }
}

/// Whether a metric is compared for presence only.
pub fn is_gauge(name: &str, kind: Option<&str>) -> bool {
    match kind {
        Some("summary") => true,
        Some("gauge") => !name.starts_with("ratis_") || RACY_RATIS_GAUGES.contains(&name),
        _ => GAUGE_SUFFIXES.iter().any(|s| name.ends_with(s)),
    }
}

fn number(delta: f64) -> Json {
    if delta.is_finite() && delta.fract() == 0.0 && delta.abs() < 9.0e15 {
        Json::from(delta as i64)
    } else if let Some(n) = serde_json::Number::from_f64(delta) {
        Json::Number(n)
    } else {
        Json::String(delta.to_string())
    }
}

/// The answer of a `prom` step: each listed metric's series and deltas since `base`.
pub fn answer(names: &[String], base: &Snapshot, now: &Snapshot) -> Json {
    let mut out = Map::new();
    for name in names {
        let series: Vec<(&String, f64)> = now
            .values
            .range((name.clone(), String::new())..)
            .take_while(|((n, _), _)| n == name)
            .map(|((_, labels), v)| (labels, *v))
            .collect();
        if series.is_empty() {
            let unparsable = now.skipped.iter().any(|l| {
                l.strip_prefix(name.as_str())
                    .is_some_and(|r| r.starts_with(['{', ' ', '\t']))
            });
            let what = if unparsable { "unparsable" } else { "absent" };
            out.insert(name.clone(), json!(what));
            continue;
        }
        let kind = now.types.get(name).map(String::as_str);
        let gauge = is_gauge(name, kind);
        let mut by_labels = Map::new();
        for (labels, value) in series {
            let entry = if gauge {
                json!("present")
            } else {
                let before = base
                    .values
                    .get(&(name.clone(), labels.clone()))
                    .copied()
                    .unwrap_or(0.0);
                number(value - before)
            };
            by_labels.insert(labels.clone(), entry);
        }
        out.insert(
            name.clone(),
            json!({"type": kind.unwrap_or("untyped"), "series": by_labels}),
        );
    }
    json!({ "prom": out })
}

/// A one-line summary of a prom answer: each metric's summed delta (`+1`), `present` or `absent`.
pub fn summary(prom: &Json) -> String {
    let Some(obj) = prom.as_object() else {
        return "prom ?".into();
    };
    let parts: Vec<String> = obj
        .iter()
        .map(|(name, v)| {
            let what = match v {
                Json::String(s) => s.clone(),
                Json::Object(o) => {
                    let series = o.get("series").and_then(Json::as_object);
                    let values: Vec<&Json> =
                        series.map(|s| s.values().collect()).unwrap_or_default();
                    if values.iter().all(|v| v.is_string()) {
                        "present".to_string()
                    } else {
                        let total: f64 = values.iter().filter_map(|v| v.as_f64()).sum();
                        let n = number(total);
                        if total >= 0.0 {
                            format!("+{n}")
                        } else {
                            n.to_string()
                        }
                    }
                }
                other => other.to_string(),
            };
            format!("{name} {what}")
        })
        .collect();
    format!("prom {}", parts.join(", "))
}

/// GET `http://ADDR/prom`: the body as text.
pub async fn scrape(addr: &str) -> anyhow::Result<String> {
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        // HTTP/1.0: servers answer without chunked encoding and close the connection.
        let request = format!(
            "GET /prom HTTP/1.0\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.take(MAX_BODY).read_to_end(&mut raw).await?;
        parse_http_response(&raw)
    };
    tokio::time::timeout(Duration::from_secs(30), fetch)
        .await
        .map_err(|_| anyhow!("GET http://{addr}/prom took over 30 s"))?
        .with_context(|| format!("GET http://{addr}/prom"))
}

fn parse_http_response(raw: &[u8]) -> anyhow::Result<String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("no HTTP response"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let mut lines = head.lines();
    let status = lines.next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("HTTP status {status:?}");
    }
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn dechunk(mut body: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("bad chunked body"))?;
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| anyhow!("bad chunk size {size_text:?}"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size {
            bail!("truncated chunk");
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP x help
# TYPE storage_container_metrics_num_echo counter
storage_container_metrics_num_echo{context="dfs",hostname="vm"} 3
# TYPE storage_container_metrics_latency_ns_echo_avg_time gauge
storage_container_metrics_latency_ns_echo_avg_time{context="dfs",hostname="vm"} 1234.5
# TYPE hdds_dispatcher_counter counter
hdds_dispatcher_counter{context="dfs",hostname="vm",type="Echo"} 7
hdds_dispatcher_counter{context="dfs",hostname="vm",type="WriteChunk"} 0
plain_metric 1.5e3
odd{a="x\"y\\z",b="3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab",c="127.0.0.1:9859",d="/data/disk1"} 2 1700000000000
"#;

    #[test]
    fn parses_and_normalises_labels() {
        let (types, samples, skipped) = parse(TEXT);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(types["hdds_dispatcher_counter"], "counter");
        assert_eq!(samples.len(), 6);
        assert_eq!(samples[4].name, "plain_metric");
        assert_eq!(samples[4].value, 1500.0);
        assert_eq!(samples[5].labels[0], ("a".into(), "x\"y\\z".into()));
        let snap = snapshot(TEXT, None);
        let keys: Vec<_> = snap.values.keys().cloned().collect();
        assert!(keys.contains(&(
            "storage_container_metrics_num_echo".into(),
            r#"{context="dfs"}"#.into()
        )));
        assert!(keys.contains(&("odd".into(), r#"{a="x\"y\\z",d="<path>"}"#.into())));
        assert!(keys.contains(&("plain_metric".into(), "{}".into())));
        assert_eq!(
            label_key(
                &[
                    ("port".into(), "9859".into()),
                    ("servername".into(), "vm.example.com:9859".into())
                ],
                None
            ),
            "{}"
        );
    }

    #[test]
    fn hadoop_label_values_with_newlines_and_bad_lines() {
        // What a real DataNode's JVM (MiniOzoneCluster) writes: raw newlines inside a label value.
        let text = "# TYPE om_x counter\nom_x{context=\"dfs\",ratisevents=\"a|b\n2026-12-01 08:38:12|c\",hostname=\"vm\"} 0\n\
                    bad{a=1} 2\nbad2 notanumber\nbad3{a=\"1\" 2\nafter{} 3\n";
        let (types, samples, skipped) = parse(text);
        assert_eq!(types["om_x"], "counter");
        assert_eq!(samples.len(), 2, "{samples:?}");
        assert_eq!(samples[0].labels[1].1, "a|b\n2026-12-01 08:38:12|c");
        assert_eq!(samples[1].name, "after");
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        let snap = snapshot(text, None);
        let a = answer(&["bad2".to_string(), "nothing".to_string()], &snap, &snap);
        assert_eq!(
            a,
            json!({"prom": {"bad2": "unparsable", "nothing": "absent"}})
        );
    }

    #[test]
    fn deltas_presence_and_absence() {
        let base = snapshot(TEXT, None);
        let later = TEXT
            .replace("hostname=\"vm\"} 3", "hostname=\"vm\"} 5")
            .replace("} 1234.5", "} 99")
            .replace("type=\"Echo\"} 7", "type=\"Echo\"} 8");
        let now = snapshot(&format!("{later}new_counter{{x=\"1\"}} 4\n"), None);
        let names: Vec<String> = [
            "storage_container_metrics_num_echo",
            "storage_container_metrics_latency_ns_echo_avg_time",
            "hdds_dispatcher_counter",
            "new_counter",
            "missing_metric",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a = answer(&names, &base, &now);
        assert_eq!(
            a,
            json!({"prom": {
                "storage_container_metrics_num_echo": {"type": "counter", "series": {"{context=\"dfs\"}": 2}},
                "storage_container_metrics_latency_ns_echo_avg_time": {"type": "gauge", "series": {"{context=\"dfs\"}": "present"}},
                "hdds_dispatcher_counter": {"type": "counter", "series": {
                    "{context=\"dfs\",type=\"Echo\"}": 1, "{context=\"dfs\",type=\"WriteChunk\"}": 0}},
                "new_counter": {"type": "untyped", "series": {"{x=\"1\"}": 4}},
                "missing_metric": "absent"
            }})
        );
        assert_eq!(
            summary(&a["prom"]),
            "prom hdds_dispatcher_counter +1, missing_metric absent, new_counter +4, \
             storage_container_metrics_latency_ns_echo_avg_time present, storage_container_metrics_num_echo +2"
        );
        assert!(is_gauge("x_avg_time", Some("counter")));
        assert!(is_gauge("hdds_dispatcher_concurrency", Some("gauge")));
        assert!(!is_gauge("x_num_ops", Some("counter")));
    }

    #[test]
    fn ratis_series_of_other_groups_in_the_jvm_are_left_out() {
        // A real DataNode's JVM: its pipeline's group, and SCM's and OM's Ratis groups.
        let text = "# TYPE ratis_server_retryCacheHitCount gauge\n\
            ratis_server_retryCacheHitCount{instance=\"1d808239-e08f-4aa1-bba6-d885f14ab141\",group=\"group-6BAD6CA4792A\",} 14.0\n\
            ratis_server_retryCacheHitCount{instance=\"17b49082-be15-4b23-ab44-00cea4d5afc9\",group=\"group-3BE759440D7C\",} 7.0\n\
            ratis_server_retryCacheHitCount{instance=\"om1\",group=\"group-C5BA1605619E\",} 3.0\n";
        let pipeline = uuid::Uuid::parse_str("b4d3916d-4bb9-4f3d-99ab-6bad6ca4792a").unwrap();
        let own = raft_group_name(pipeline);
        assert_eq!(own, "group-6BAD6CA4792A");
        let snap = snapshot(text, Some(&own));
        let values: Vec<f64> = snap.values.values().copied().collect();
        assert_eq!(values, [14.0], "{:?}", snap.values);
        // Without a pipeline every group is kept (and the DataNode's and SCM's add up).
        assert_eq!(snapshot(text, None).values.len(), 2);
        // The harness's JVM prints each Ratis series once per registered exporter: once counts.
        let tripled = text.replace(
            "ratis_server_retryCacheHitCount{instance=\"om1\"",
            "ratis_server_retryCacheHitCount{instance=\"1d808239-e08f-4aa1-bba6-d885f14ab141\",group=\"group-6BAD6CA4792A\",} 14.0\n\
             ratis_server_retryCacheHitCount{instance=\"1d808239-e08f-4aa1-bba6-d885f14ab141\",group=\"group-6BAD6CA4792A\",} 14.0\n\
             ratis_server_retryCacheHitCount{instance=\"om1\"",
        );
        let snap = snapshot(&tripled, Some(&own));
        assert_eq!(snap.values.values().copied().collect::<Vec<_>>(), [14.0]);
        // Ratis's Dropwizard counts are typed gauge and compared as counters; its timers'
        // quantiles for presence, their _count (no TYPE of its own) as a counter.
        assert!(!is_gauge("ratis_server_retryCacheHitCount", Some("gauge")));
        assert!(is_gauge("ratis_server_clientWriteRequest", Some("summary")));
        assert!(!is_gauge("ratis_server_clientWriteRequest_count", None));
        assert!(!is_gauge("ratis_state_machine_appliedIndex", Some("gauge")));
        assert!(is_gauge("ratis_server_peerCommitIndex", Some("gauge")));
    }

    #[test]
    fn a_raft_group_label_is_each_targets_own() {
        let labels = |group: &str| {
            vec![
                ("context".to_string(), "dfs".to_string()),
                ("raftgroupid".to_string(), group.to_string()),
                ("hostname".to_string(), "vm".to_string()),
            ]
        };
        let real = label_key(&labels("group-DC56E1BF5C12"), Some("vm"));
        assert_eq!(real, r#"{context="dfs",raftgroupid="group-<id>"}"#);
        assert_eq!(real, label_key(&labels("group-000000009858"), Some("vm")));
        assert_ne!(real, label_key(&labels("group-XYZ"), Some("vm")));
    }

    #[test]
    fn http_bodies() {
        let plain = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\na 1\n";
        assert_eq!(parse_http_response(plain).unwrap(), "a 1\n");
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n3;x=y\r\nb 2\r\n0\r\n\r\n";
        assert_eq!(parse_http_response(chunked).unwrap(), "a 1\nb 2");
        assert!(parse_http_response(b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(parse_http_response(b"garbage").is_err());
    }
}

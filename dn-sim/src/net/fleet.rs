//! Many DataNodes in one process (`--datanodes N`): N identities, each a [`RunningServer`] of its
//! own (UUID, client/Ratis ports, store, handler pool, simulation state, SCM endpoint) on the one
//! shared runtime, so an identity costs tasks and memory, never threads. One admin listener
//! serves them all: `/prom` and `/metrics` with a `datanode="UUID"` label on every series,
//! `GET /datanodes`, `POST /datanodes/I/stop` and `/start`, and each node's own `/prom`,
//! `/metrics` and `/config` under `/datanodes/I/`.
//!
//! Ports: a listener given port 0 is port 0 for every identity (each gets its own); a fixed port P
//! is P + I for identity I, so the N ports of each listener must not overlap another's.

use crate::datanode::store::{ContainerStore, StoreKind};
use crate::net::server::{Config, RunningServer, open_store, start_with_store};
use crate::sim::admission::Admission;
use anyhow::Context as _;
use axum::Router;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The most identities one process serves.
pub const MAX_DATANODES: u32 = 10_000;

/// How long `POST /datanodes/I/stop` waits for in-flight requests (at most the shutdown grace).
const STOP_GRACE: Duration = Duration::from_secs(2);

/// N identities sharing every setting but their UUID, ports and store.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// The settings of every identity; its `metrics_listen` is the fleet's admin listener.
    pub base: Config,
    /// One UUID per identity.
    pub uuids: Vec<String>,
}

impl FleetConfig {
    /// `n` identities of `base`: UUIDs kept in `DIR/dn-I/datanode.id` with `--store dir:DIR`
    /// (made on first start), else random. Refuses fixed ports whose ranges P..P+n overlap or
    /// pass 65535.
    pub fn new(base: Config, n: u32) -> Result<Self, String> {
        if !(1..=MAX_DATANODES).contains(&n) {
            return Err(format!("--datanodes must be 1 to {MAX_DATANODES}, not {n}"));
        }
        let listeners = [
            ("--listen", Some(base.listen)),
            ("--ratis-listen", base.ratis_listen),
            ("--ratis-admin-listen", base.ratis_admin_listen),
        ];
        let ranges: Vec<(&str, u32, u32)> = listeners
            .iter()
            .filter_map(|&(flag, addr)| addr.map(|a| (flag, u32::from(a.port()))))
            .filter(|&(_, port)| port != 0)
            .map(|(flag, port)| (flag, port, port + n - 1))
            .collect();
        for &(flag, first, last) in &ranges {
            if last > u32::from(u16::MAX) {
                return Err(format!(
                    "--datanodes {n}: {flag}'s ports {first}..={last} pass 65535"
                ));
            }
        }
        for (i, a) in ranges.iter().enumerate() {
            for b in &ranges[i + 1..] {
                if a.1 <= b.2 && b.1 <= a.2 {
                    return Err(format!(
                        "--datanodes {n}: {}'s ports {}..={} overlap {}'s {}..={} (identity I \
                         listens on port P+I; give ports at least {n} apart, or port 0)",
                        a.0, a.1, a.2, b.0, b.1, b.2
                    ));
                }
            }
        }
        let uuids = (0..n as usize)
            .map(|i| match &base.store {
                StoreKind::Dir(dir) if n > 1 => crate::net::scm::persisted_uuid(&node_dir(dir, i))
                    .map_err(|e| {
                        format!(
                            "--store {}: cannot keep identity {i}'s UUID: {e}",
                            base.store
                        )
                    }),
                _ if n == 1 => Ok(base.datanode_uuid.clone()),
                _ => Ok(uuid::Uuid::new_v4().to_string()),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { base, uuids })
    }

    pub fn len(&self) -> usize {
        self.uuids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uuids.is_empty()
    }

    /// Identity `i`'s configuration: its UUID, ports P+i (port 0 stays 0), its own store (under
    /// `DIR/dn-I` with `--store dir:DIR`), its own seed, no admin listener of its own.
    pub fn node_config(&self, i: usize) -> Config {
        let shift = |addr: SocketAddr| {
            let mut a = addr;
            if a.port() != 0 {
                a.set_port(a.port() + i as u16);
            }
            a
        };
        let mut c = self.base.clone();
        if self.len() > 1 {
            c.listen = shift(c.listen);
            c.ratis_listen = c.ratis_listen.map(shift);
            c.ratis_admin_listen = c.ratis_admin_listen.map(shift);
            if let StoreKind::Dir(dir) = &c.store {
                c.store = StoreKind::Dir(node_dir(dir, i));
            }
            c.seed = c.seed.wrapping_add(i as u64);
        }
        c.datanode_uuid = self.uuids[i].clone();
        c.metrics_listen = None;
        c
    }
}

/// Where identity `i` keeps its containers and `datanode.id` under `--store dir:DIR`.
pub fn node_dir(dir: &Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("dn-{i}"))
}

/// One identity: its configuration (ports set to the ones bound once started), its store (kept
/// across stop and start) and its server while it runs.
pub struct Node {
    index: usize,
    uuid: String,
    store: Arc<ContainerStore>,
    config: std::sync::Mutex<Config>,
    /// Serializes stop and start.
    op: tokio::sync::Mutex<()>,
    server: std::sync::Mutex<Option<Arc<Live>>>,
    /// The running server, taken out to be shut down (it owns its tasks).
    owned: tokio::sync::Mutex<Option<RunningServer>>,
}

/// What a running node's server shares with readers.
pub struct Live {
    pub admission: Arc<Admission>,
    pub scm: Arc<crate::net::scm::ScmStatus>,
    /// Whether the node talks to SCM (`--scm`).
    pub scm_configured: bool,
}

/// What a node is doing, as `GET /datanodes` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeView {
    pub index: usize,
    pub uuid: String,
    pub running: bool,
    pub client: SocketAddr,
    pub ratis: Option<SocketAddr>,
    pub ratis_admin: Option<SocketAddr>,
}

impl Node {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// What the node's server shares while it runs (for metrics and status).
    pub fn running(&self) -> Option<Arc<Live>> {
        self.server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn view(&self) -> NodeView {
        let c = self.config.lock().unwrap_or_else(|e| e.into_inner());
        NodeView {
            index: self.index,
            uuid: self.uuid.clone(),
            running: self.running().is_some(),
            client: c.listen,
            ratis: c.ratis_listen,
            ratis_admin: c.ratis_admin_listen,
        }
    }

    /// Binds the node's ports (the ones it had, when it ran before and they are free; else the
    /// configured ones) and serves; SCM's endpoint starts with it and registers the node.
    /// Nothing when it runs already.
    pub async fn start(&self) -> anyhow::Result<()> {
        let _op = self.op.lock().await;
        let mut owned = self.owned.lock().await;
        if owned.is_some() {
            return Ok(());
        }
        let config = self
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let server = start_with_store(config.clone(), Arc::clone(&self.store))
            .await
            .with_context(|| format!("DataNode {} ({})", self.index, self.uuid))?;
        {
            let mut c = self.config.lock().unwrap_or_else(|e| e.into_inner());
            c.listen = server.local_addr();
            c.ratis_listen = server.ratis_addr();
            c.ratis_admin_listen = server.ratis_admin_addr();
        }
        // Readers get the admission and status; `owned` keeps the tasks.
        let live = Live {
            admission: Arc::clone(server.admission()),
            scm: Arc::clone(server.scm_status()),
            scm_configured: config.scm.is_some(),
        };
        *self.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(live));
        *owned = Some(server);
        Ok(())
    }

    /// Stops serving: closes the node's listeners (new connections are refused) and stops its
    /// SCM endpoint, so SCM hears nothing more from it. In-flight requests get `STOP_GRACE`.
    /// Returns whether it was running.
    pub async fn stop(&self) -> bool {
        let _op = self.op.lock().await;
        let Some(server) = self.owned.lock().await.take() else {
            return false;
        };
        *self.server.lock().unwrap_or_else(|e| e.into_inner()) = None;
        server.shutdown_within(STOP_GRACE).await;
        true
    }
}

/// N identities serving on the current runtime, and their admin listener.
pub struct Fleet {
    nodes: Arc<Vec<Node>>,
    admin_addr: Option<SocketAddr>,
    admin: Option<tokio::task::JoinHandle<()>>,
}

/// Starts every identity of `config`, then the admin listener (`config.base.metrics_listen`).
pub async fn start(config: FleetConfig) -> anyhow::Result<Fleet> {
    let mut nodes = Vec::with_capacity(config.len());
    for i in 0..config.len() {
        let c = config.node_config(i);
        let store = open_store(&c).with_context(|| format!("DataNode {i}"))?;
        nodes.push(Node {
            index: i,
            uuid: c.datanode_uuid.clone(),
            store,
            config: std::sync::Mutex::new(c),
            op: tokio::sync::Mutex::new(()),
            server: std::sync::Mutex::new(None),
            owned: tokio::sync::Mutex::new(None),
        });
    }
    for node in &nodes {
        node.start().await?;
    }
    let nodes = Arc::new(nodes);
    let (admin_addr, admin) = match config.base.metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
            let bound = listener.local_addr()?;
            let app = router(Arc::clone(&nodes));
            let task = tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!("admin listener failed: {e}");
                }
            });
            (Some(bound), Some(task))
        }
        None => (None, None),
    };
    Ok(Fleet {
        nodes,
        admin_addr,
        admin,
    })
}

impl Fleet {
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Where `/datanodes`, `/prom` and the nodes' own endpoints are served, if anywhere.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Stops every node (each with the full shutdown grace) and the admin listener.
    pub async fn shutdown(self) {
        if let Some(task) = &self.admin {
            task.abort();
        }
        let mut stopping = Vec::new();
        for node in self.nodes.iter() {
            *node.server.lock().unwrap_or_else(|e| e.into_inner()) = None;
            if let Some(server) = node.owned.lock().await.take() {
                stopping.push(server.shutdown());
            }
        }
        futures_util::future::join_all(stopping).await;
    }
}

fn router(nodes: Arc<Vec<Node>>) -> Router {
    Router::new()
        .route("/prom", get(prom))
        .route("/metrics", get(metrics))
        .route("/datanodes", get(list))
        .route("/datanodes/{i}/stop", post(stop))
        .route("/datanodes/{i}/start", post(start_node))
        .route("/datanodes/{i}/prom", get(forward))
        .route("/datanodes/{i}/metrics", get(forward))
        .route("/datanodes/{i}/config", get(forward).put(forward))
        .with_state(nodes)
}

const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

fn view_json(v: &NodeView) -> Value {
    json!({
        "index": v.index,
        "uuid": v.uuid,
        "state": if v.running { "running" } else { "stopped" },
        "client": v.client.to_string(),
        "ratis": v.ratis.map(|a| a.to_string()),
        "ratis_admin": v.ratis_admin.map(|a| a.to_string()),
    })
}

fn node_json(node: &Node) -> Value {
    let mut v = view_json(&node.view());
    if let Some(live) = node.running()
        && live.scm_configured
    {
        let s = &live.scm;
        v["scm"] = json!({
            "registered": s.registered.load(Ordering::Acquire),
            "registrations": s.registrations.load(Ordering::Relaxed),
            "heartbeats": s.heartbeats.load(Ordering::Relaxed),
        });
    }
    v
}

async fn list(State(nodes): State<Arc<Vec<Node>>>) -> Response {
    let all: Vec<Value> = nodes.iter().map(node_json).collect();
    axum::Json(json!({ "datanodes": all })).into_response()
}

fn not_found(i: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "error": format!("no DataNode {i}") })),
    )
        .into_response()
}

fn find<'a>(nodes: &'a [Node], i: &str) -> Option<&'a Node> {
    i.parse::<usize>().ok().and_then(|i| nodes.get(i))
}

async fn stop(State(nodes): State<Arc<Vec<Node>>>, UrlPath(i): UrlPath<String>) -> Response {
    let Some(node) = find(&nodes, &i) else {
        return not_found(&i);
    };
    if node.stop().await {
        tracing::info!(index = node.index, uuid = %node.uuid, "DataNode stopped");
    }
    axum::Json(node_json(node)).into_response()
}

async fn start_node(State(nodes): State<Arc<Vec<Node>>>, UrlPath(i): UrlPath<String>) -> Response {
    let Some(node) = find(&nodes, &i) else {
        return not_found(&i);
    };
    match node.start().await {
        Ok(()) => axum::Json(node_json(node)).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "error": format!("{e:#}") })),
        )
            .into_response(),
    }
}

/// `/datanodes/I/prom`, `/metrics` and `/config`: the node's own admin endpoint
/// (`net::admin`), as a single dn-sim serves it.
async fn forward(
    State(nodes): State<Arc<Vec<Node>>>,
    UrlPath(i): UrlPath<String>,
    request: Request,
) -> Response {
    use tower::ServiceExt as _;
    let Some(node) = find(&nodes, &i) else {
        return not_found(&i);
    };
    let Some(live) = node.running() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "error": format!("DataNode {i} is stopped") })),
        )
            .into_response();
    };
    let (mut parts, body) = request.into_parts();
    let rest = parts
        .uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    parts.uri = match format!("/{rest}").parse() {
        Ok(uri) => uri,
        Err(_) => return not_found(&i),
    };
    let info = {
        let c = node.config.lock().unwrap_or_else(|e| e.into_inner());
        crate::net::admin::StaticInfo {
            listen: c.listen.to_string(),
            containers: c.containers.to_string(),
            seed: c.seed,
        }
    };
    let app = crate::net::admin::router(Arc::clone(&live.admission), info);
    match app.oneshot(Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

async fn prom(State(nodes): State<Arc<Vec<Node>>>) -> Response {
    exposition(&nodes, |a| a.metrics.render_prom(&a.pool))
}

async fn metrics(State(nodes): State<Arc<Vec<Node>>>) -> Response {
    exposition(&nodes, |a| a.metrics.render_metrics(&a.pool))
}

fn exposition(nodes: &[Node], render: impl Fn(&Admission) -> String) -> Response {
    let mut merged = Exposition::default();
    for node in nodes {
        if let Some(live) = node.running() {
            merged.add(&render(&live.admission), &node.uuid);
        }
    }
    ([(header::CONTENT_TYPE, EXPOSITION)], merged.finish()).into_response()
}

/// Prometheus text expositions of several nodes merged into one: every sample gets a
/// `datanode="UUID"` label, and each metric family's samples stay together under its one `# HELP`
/// and `# TYPE`, as the format requires.
#[derive(Default)]
pub struct Exposition {
    order: Vec<String>,
    families: std::collections::HashMap<String, (String, String)>,
}

impl Exposition {
    /// Adds one node's exposition, labelling its samples with `uuid`.
    pub fn add(&mut self, text: &str, uuid: &str) {
        let mut family = String::new();
        for line in text.lines() {
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix("# ") {
                let mut words = comment.split_whitespace();
                let (Some(kind), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                if kind != "HELP" && kind != "TYPE" {
                    continue;
                }
                if name != family {
                    family = name.to_owned();
                }
                let entry = self.entry(&family);
                // Each node has the same HELP and TYPE: keep the first node's.
                if !entry.0.lines().any(|l| l == line) {
                    entry.0.push_str(line);
                    entry.0.push('\n');
                }
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = &line[..name_end];
            // A sample outside its family's HELP/TYPE (or with none) is a family of its own.
            let of_family = name
                .strip_prefix(family.as_str())
                .is_some_and(|s| SUFFIXES.contains(&s));
            if !of_family {
                family = name.to_owned();
            }
            let labelled = label(line, name_end, uuid);
            let entry = self.entry(&family);
            entry.1.push_str(&labelled);
            entry.1.push('\n');
        }
    }

    fn entry(&mut self, family: &str) -> &mut (String, String) {
        if !self.families.contains_key(family) {
            self.order.push(family.to_owned());
        }
        self.families.entry(family.to_owned()).or_default()
    }

    pub fn finish(self) -> String {
        let mut out = String::new();
        for name in &self.order {
            if let Some((head, samples)) = self.families.get(name) {
                out.push_str(head);
                out.push_str(samples);
            }
        }
        out
    }
}

/// The endings of a family's sample names (summaries, histograms, counters).
const SUFFIXES: [&str; 6] = ["", "_bucket", "_sum", "_count", "_total", "_created"];

/// `line` (a sample whose name ends at `name_end`) with `datanode="uuid"` as its first label.
fn label(line: &str, name_end: usize, uuid: &str) -> String {
    let (name, rest) = line.split_at(name_end);
    match rest.strip_prefix('{') {
        Some(labels) if labels.starts_with('}') => format!("{name}{{datanode=\"{uuid}\"{labels}"),
        Some(labels) => format!("{name}{{datanode=\"{uuid}\",{labels}"),
        None => format!("{name}{{datanode=\"{uuid}\"}}{rest}"),
    }
}

/// Runs `config`'s identities until SIGINT or SIGTERM, then shuts them down.
pub async fn run_until_signal(
    config: FleetConfig,
    ready_file: Option<&Path>,
) -> anyhow::Result<()> {
    let n = config.len();
    let fleet = start(config).await?;
    if let Some(path) = ready_file {
        write_ready_file(&fleet, path)
            .with_context(|| format!("cannot write --ready-file {}", path.display()))?;
    }
    tracing::info!(datanodes = n, admin = ?fleet.admin_addr(), "dn-sim serving DataNodes");
    crate::net::server::wait_for_signal().await;
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    fleet.shutdown().await;
    Ok(())
}

/// The single node's lines (`client`, `admin`, `ratis`, `ratis-admin`: identity 0's, so a
/// reader of one dn-sim's file keeps working), then one line per identity: `datanode I UUID
/// client=ADDR[ ratis=ADDR][ ratis-admin=ADDR]`, written whole.
pub fn write_ready_file(fleet: &Fleet, path: &Path) -> std::io::Result<()> {
    let views: Vec<NodeView> = fleet.nodes().iter().map(Node::view).collect();
    let mut text = String::new();
    if let Some(first) = views.first() {
        text.push_str(&format!("client {}\n", first.client));
        if let Some(admin) = fleet.admin_addr() {
            text.push_str(&format!("admin {admin}\n"));
        }
        if let Some(r) = first.ratis {
            text.push_str(&format!("ratis {r}\n"));
        }
        if let Some(r) = first.ratis_admin {
            text.push_str(&format!("ratis-admin {r}\n"));
        }
    }
    for v in &views {
        text.push_str(&format!(
            "datanode {} {} client={}",
            v.index, v.uuid, v.client
        ));
        if let Some(r) = v.ratis {
            text.push_str(&format!(" ratis={r}"));
        }
        if let Some(r) = v.ratis_admin {
            text.push_str(&format!(" ratis-admin={r}"));
        }
        text.push('\n');
    }
    crate::net::server::write_whole(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_ports_shift_by_index_and_must_not_overlap() {
        let mut base = Config::loopback();
        base.listen.set_port(20000);
        base.ratis_listen = Some(SocketAddr::from(([127, 0, 0, 1], 21000)));
        let f = FleetConfig::new(base.clone(), 3).unwrap();
        let c = f.node_config(2);
        assert_eq!(c.listen.port(), 20002);
        assert_eq!(c.ratis_listen.unwrap().port(), 21002);
        assert_eq!(c.metrics_listen, None);
        assert_ne!(f.uuids[0], f.uuids[1]);
        base.ratis_listen = Some(SocketAddr::from(([127, 0, 0, 1], 20002)));
        let e = FleetConfig::new(base.clone(), 3).unwrap_err();
        assert!(e.contains("overlap"), "{e}");
        base.listen.set_port(65534);
        assert!(FleetConfig::new(base, 3).unwrap_err().contains("65535"));
    }

    #[test]
    fn port_zero_stays_zero_and_one_identity_keeps_its_config() {
        let base = Config::loopback();
        let f = FleetConfig::new(base.clone(), 4).unwrap();
        assert_eq!(f.node_config(3).listen.port(), 0);
        let one = FleetConfig::new(base.clone(), 1).unwrap();
        assert_eq!(one.node_config(0).datanode_uuid, base.datanode_uuid);
        assert_eq!(one.node_config(0).seed, base.seed);
        assert!(FleetConfig::new(base, 0).is_err());
    }

    #[test]
    fn uuids_are_kept_per_identity_under_the_store_dir() {
        let dir = tempfile::tempdir().unwrap();
        let mut base = Config::loopback();
        base.store = StoreKind::Dir(dir.path().to_owned());
        let first = FleetConfig::new(base.clone(), 3).unwrap().uuids;
        let again = FleetConfig::new(base, 3).unwrap().uuids;
        assert_eq!(first, again);
        assert!(dir.path().join("dn-2/datanode.id").exists());
        assert_ne!(first[0], first[2]);
    }

    #[test]
    fn merged_exposition_labels_every_sample_and_groups_families() {
        let node = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n\
                    # HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 3\nh_count 2\n\
                    bare{} 5\n";
        let mut e = Exposition::default();
        e.add(node, "u1");
        e.add(node, "u2");
        let text = e.finish();
        let expected = "# HELP a_total A.\n# TYPE a_total counter\n\
            a_total{datanode=\"u1\"} 1\na_total{datanode=\"u2\"} 1\n\
            # HELP h H.\n# TYPE h histogram\n\
            h_bucket{datanode=\"u1\",le=\"1\"} 2\nh_sum{datanode=\"u1\"} 3\nh_count{datanode=\"u1\"} 2\n\
            h_bucket{datanode=\"u2\",le=\"1\"} 2\nh_sum{datanode=\"u2\"} 3\nh_count{datanode=\"u2\"} 2\n\
            bare{datanode=\"u1\"} 5\nbare{datanode=\"u2\"} 5\n";
        assert_eq!(text, expected);
    }
}

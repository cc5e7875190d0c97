//! The DataNode's own metrics, with a real DataNode's names and layout on `/prom`:
//! `storage_container_metrics_*` (Hadoop metrics2 `ContainerMetrics`, labels `context="dfs"` and
//! `hostname`) and `hdds_dispatcher_{counter,time}` (labels `type` and `hostname`) and
//! `hdds_dispatcher_concurrency` (a counter, label `hostname`), one series per command type of the
//! `--ozone-version` release. These names break Prometheus naming rules (no `_total`, `counter`
//! and `ns` in names), as a real DataNode's do, so they are kept out of `/metrics`.
//!
//! Counting is a few relaxed atomic adds; only a scrape takes a lock (the previous interval's
//! sums, for `_avg_time`).

use crate::datanode::version::OzoneVersion;
use common::proto::Type;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

pub use crate::datanode::prom_text::MAX_TYPE;
use crate::datanode::prom_text::{interval_average, java_double};

/// One command type's DataNode metrics: `ContainerMetrics` (`num<T>`, `bytes<T>`, the
/// `latencyNs<T>` rate) and `HddsDispatcher` (`counter`, `time` in ms).
#[derive(Default)]
struct DnType {
    num: AtomicU64,
    bytes: AtomicU64,
    latency_count: AtomicU64,
    latency_total_ns: AtomicU64,
    dispatcher_counter: AtomicU64,
    dispatcher_time_ms: AtomicU64,
}

/// `ContainerMetrics` and `HddsDispatcher`'s metrics of one DataNode.
pub struct ContainerMetrics {
    version: OzoneVersion,
    hostname: String,
    /// Indexed by `Type` number; only the release's types are rendered.
    dn: Vec<DnType>,
    num_ops: AtomicU64,
    /// `HddsDispatcher.concurrency`: requests between arrival and answer.
    in_flight: AtomicI64,
    /// (count, total_ns) per type at the previous scrape, for `_avg_time` over the last interval as
    /// Hadoop's MutableRate reports it (0.0 for an interval without samples).
    previous: Mutex<Vec<(u64, u64)>>,
    /// The Raft groups the Ratis port hosts, their `CSMMetrics` and Ratis's own metrics
    /// (registered at start and when SCM creates a pipeline; only a scrape reads the list).
    groups: Mutex<Vec<GroupMetrics>>,
    /// SCM's commands (`CommandHandlerMetrics`, `DatanodeQueueMetrics`).
    pub commands: crate::datanode::command_metrics::CommandMetrics,
}

type GroupMetrics = (
    std::sync::Arc<crate::datanode::csm_metrics::CsmMetrics>,
    std::sync::Arc<crate::datanode::ratis_metrics::RatisMetrics>,
);

impl ContainerMetrics {
    /// Metrics of a DataNode of release `version` (its command types, its metric names).
    pub fn new(version: OzoneVersion) -> Self {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "dn-sim".into());
        Self {
            version,
            hostname,
            dn: (0..=MAX_TYPE).map(|_| DnType::default()).collect(),
            num_ops: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            previous: Mutex::new(vec![(0, 0); MAX_TYPE + 1]),
            groups: Mutex::new(Vec::new()),
            commands: crate::datanode::command_metrics::CommandMetrics::default(),
        }
    }

    /// Renders a Raft group's `CSMMetrics` (`csm_metrics_*`) and Ratis's metrics of it
    /// (`ratis_*`) with the DataNode's.
    pub fn register_group(
        &self,
        csm: std::sync::Arc<crate::datanode::csm_metrics::CsmMetrics>,
        ratis: std::sync::Arc<crate::datanode::ratis_metrics::RatisMetrics>,
    ) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((csm, ratis));
    }

    /// Stops rendering a group's metrics (its pipeline closed: Ozone unregisters `CSMMetrics`
    /// when the group is removed).
    pub fn unregister_group(&self, csm: &std::sync::Arc<crate::datanode::csm_metrics::CsmMetrics>) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(c, _)| !std::sync::Arc::ptr_eq(c, csm));
    }

    fn dn(&self, t: Type) -> &DnType {
        &self.dn[t as usize]
    }

    /// A request arrived (the DataNode counts an op before it checks anything, and its
    /// dispatcher counts the call).
    pub fn request_received(&self, t: Type) {
        self.num_ops.fetch_add(1, Relaxed);
        let m = self.dn(t);
        m.num.fetch_add(1, Relaxed);
        m.dispatcher_counter.fetch_add(1, Relaxed);
        self.in_flight.fetch_add(1, Relaxed);
    }

    /// An op the DataNode counts inside a request (`incContainerOpsMetrics`): the CreateContainer
    /// of an auto-create, the PutBlock piggybacked on a WriteChunk.
    pub fn inner_op(&self, t: Type) {
        self.num_ops.fetch_add(1, Relaxed);
        self.dn(t).num.fetch_add(1, Relaxed);
    }

    /// `latencyNs<T>`: recorded only when the handler ran (not for the dispatcher's pre-handler
    /// failures), from the request's arrival.
    pub fn handler_latency(&self, t: Type, elapsed: Duration) {
        let m = self.dn(t);
        m.latency_total_ns
            .fetch_add(elapsed.as_nanos() as u64, Relaxed);
        m.latency_count.fetch_add(1, Relaxed);
    }

    /// `bytes<T>`: what the DataNode's handler counts on its success path.
    pub fn datanode_bytes(&self, t: Type, bytes: u64) {
        self.dn(t).bytes.fetch_add(bytes, Relaxed);
    }

    /// A request was answered after `elapsed` (queue wait included): the dispatcher's `time` (ms)
    /// and its concurrency.
    pub fn request_done(&self, t: Type, elapsed: Duration) {
        self.dn(t)
            .dispatcher_time_ms
            .fetch_add(elapsed.as_millis() as u64, Relaxed);
        self.in_flight.fetch_sub(1, Relaxed);
    }

    /// The DataNode-named metrics as a real DataNode's `/prom` renders them
    /// (`PrometheusMetricsSink`): `# TYPE` and samples sorted by name, `ContainerMetrics` with
    /// labels `context="dfs",hostname`, `HddsDispatcher` with `type,hostname` (its
    /// `concurrency`, a counter, with `hostname` only); one series per command type of the
    /// release; integers for counters, Java doubles for gauges.
    pub fn render(&self) -> String {
        let host = &self.hostname;
        let scm = format!("{{context=\"dfs\",hostname=\"{host}\"}}");
        // name → (TYPE, [(labels, value)])
        let mut out: BTreeMap<String, Family> = BTreeMap::new();
        let mut put = |name: String, kind: &'static str, labels: String, value: String| {
            out.entry(name)
                .or_insert_with(|| (kind, Vec::new()))
                .1
                .push((labels, value));
        };
        let counter = |v: u64| v.to_string();
        let scm_name = |n: &str| format!("storage_container_metrics_{n}");
        put(
            scm_name("num_ops"),
            "counter",
            scm.clone(),
            counter(self.num_ops.load(Relaxed)),
        );
        let mut extras = vec![
            "container_delete_failed_non_empty",
            "container_delete_failed_block_count_not_zero",
            "container_force_delete",
            "num_read_state_machine",
            "bytes_read_state_machine",
        ];
        if self.version.at_least(OzoneVersion::V2_1) {
            extras.extend([
                "num_container_reconciled_without_changes",
                "num_container_reconciled_with_changes",
            ]);
        }
        for n in extras {
            put(scm_name(n), "counter", scm.clone(), "0".into());
        }
        let mut previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        for t in self.version.cmd_types() {
            let m = self.dn(t);
            let snake = t.snake_name();
            put(
                scm_name(&format!("num_{snake}")),
                "counter",
                scm.clone(),
                counter(m.num.load(Relaxed)),
            );
            put(
                scm_name(&format!("bytes_{snake}")),
                "counter",
                scm.clone(),
                counter(m.bytes.load(Relaxed)),
            );
            if self.version.at_least(OzoneVersion::V2_1) {
                put(
                    scm_name(&format!("bytes_for_closed_container_{snake}")),
                    "counter",
                    scm.clone(),
                    "0".into(),
                );
            }
            let (count, total) = (
                m.latency_count.load(Relaxed),
                m.latency_total_ns.load(Relaxed),
            );
            let avg = interval_average(&mut previous[t as usize], (count, total));
            put(
                scm_name(&format!("latency_ns_{snake}_num_ops")),
                "counter",
                scm.clone(),
                counter(count),
            );
            put(
                scm_name(&format!("latency_ns_{snake}_avg_time")),
                "gauge",
                scm.clone(),
                java_double(avg),
            );
            let typed = format!("{{type=\"{}\",hostname=\"{host}\"}}", t.as_str_name());
            put(
                "hdds_dispatcher_counter".into(),
                "counter",
                typed.clone(),
                counter(m.dispatcher_counter.load(Relaxed)),
            );
            put(
                "hdds_dispatcher_time".into(),
                "counter",
                typed,
                counter(m.dispatcher_time_ms.load(Relaxed)),
            );
        }
        drop(previous);
        for (csm, ratis) in self.groups.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            csm.render_into(self.version, host, &mut put);
            ratis.render_into(&mut put);
        }
        self.commands.render_into(host, &mut put);
        put(
            "hdds_dispatcher_concurrency".into(),
            "counter",
            format!("{{hostname=\"{host}\"}}"),
            self.in_flight.load(Relaxed).max(0).to_string(),
        );
        let mut text = String::new();
        for (name, (kind, mut series)) in out {
            series.sort();
            let _ = writeln!(text, "# TYPE {name} {kind}");
            for (labels, value) in series {
                let _ = writeln!(text, "{name}{labels} {value}");
            }
        }
        text
    }
}

/// One metric name's `# TYPE` and its (labels, value) samples.
type Family = (&'static str, Vec<(String, String)>);

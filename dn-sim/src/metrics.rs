//! Metrics, in two expositions:
//! - DataNode names (`/prom` only), so Ozone's own queries and Grafana dashboards work against
//!   dn-sim: `storage_container_metrics_*` (Hadoop metrics2 `ContainerMetrics`, labels
//!   `context="dfs"` and `hostname`) and `hdds_dispatcher_*` (shared/ozone/protocol.md §8). These
//!   names break Prometheus naming rules (no `_total`, `counter` and `ns` in names), as a real
//!   DataNode's do, so they are kept out of `/metrics`.
//! - Simulator internals with Prometheus conventions (`dn_sim_*`, `process_*`; on `/prom` and
//!   `/metrics`): requests by type and result, request duration and queue wait histograms in
//!   seconds, handlers, queue, connections, streams, bytes, faults, rejections, process CPU, memory
//!   and file descriptors. `/metrics` passes `promtool check metrics`.
//!
//! Each server has its own recorders (no global recorder), so several dn-sims in one process —
//! tests, loadgen's embedded one — keep separate numbers. Handles are registered once; recording a
//! request is a few atomic adds.

use common::proto::Type;
use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

const META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, None);

/// Highest `Type` number in the protocol (StreamInitWithPutBlock = 25).
const MAX_TYPE: usize = 25;

const DURATION_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
];

struct TypeMetrics {
    // DataNode names
    num: Counter,
    bytes: Counter,
    latency_num_ops: Counter,
    latency_avg_time: Gauge,
    dispatcher_counter: Counter,
    dispatcher_time_ms: Counter,
    total_ns: AtomicU64,
    count: AtomicU64,
    // simulator names
    success: Counter,
    duration: Histogram,
}

pub struct Metrics {
    dn: PrometheusRecorder,
    sim: PrometheusRecorder,
    types: Vec<Option<TypeMetrics>>,
    num_ops: Counter,
    dispatcher_concurrency: Gauge,
    queue_wait: Histogram,
    bytes_received: Counter,
    bytes_sent: Counter,
    connections_open: Gauge,
    streams_open: Gauge,
    handlers_busy: Gauge,
    handlers_total: Gauge,
    queue_depth: Gauge,
    process_cpu: Counter,
    process_rss: Gauge,
    process_fds: Gauge,
    /// (count, total_ns) per type at the previous scrape, for `_avg_time` over the last interval as
    /// Hadoop's MutableRate reports it.
    previous: Mutex<Vec<(u64, u64)>>,
}

fn key(name: &str, labels: &[(&str, String)]) -> Key {
    let labels: Vec<Label> = labels
        .iter()
        .map(|(k, v)| Label::new(k.to_string(), v.clone()))
        .collect();
    Key::from_parts(name.to_string(), labels)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "dn-sim".into());
        let dn = PrometheusBuilder::new()
            .add_global_label("context", "dfs")
            .add_global_label("hostname", hostname)
            .build_recorder();
        let sim = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
            .expect("non-empty buckets")
            .build_recorder();
        let describe =
            |r: &PrometheusRecorder, name: &'static str, unit: Option<Unit>, help: &'static str| {
                r.describe_counter(
                    KeyName::from_const_str(name),
                    unit,
                    SharedString::const_str(help),
                );
            };
        let types = (0..=MAX_TYPE as i32)
            .map(|n| {
                let t = Type::try_from(n).ok()?;
                let snake = t.snake_name();
                let type_label = vec![("type", t.as_str_name().to_string())];
                Some(TypeMetrics {
                    num: dn.register_counter(
                        &key(&format!("storage_container_metrics_num_{snake}"), &[]),
                        &META,
                    ),
                    bytes: dn.register_counter(
                        &key(&format!("storage_container_metrics_bytes_{snake}"), &[]),
                        &META,
                    ),
                    latency_num_ops: dn.register_counter(
                        &key(
                            &format!("storage_container_metrics_latency_ns_{snake}_num_ops"),
                            &[],
                        ),
                        &META,
                    ),
                    latency_avg_time: dn.register_gauge(
                        &key(
                            &format!("storage_container_metrics_latency_ns_{snake}_avg_time"),
                            &[],
                        ),
                        &META,
                    ),
                    dispatcher_counter: dn
                        .register_counter(&key("hdds_dispatcher_counter", &type_label), &META),
                    dispatcher_time_ms: dn
                        .register_counter(&key("hdds_dispatcher_time", &type_label), &META),
                    total_ns: AtomicU64::new(0),
                    count: AtomicU64::new(0),
                    success: sim.register_counter(
                        &key(
                            "dn_sim_requests_total",
                            &[
                                ("type", t.as_str_name().into()),
                                ("result", "SUCCESS".into()),
                            ],
                        ),
                        &META,
                    ),
                    duration: sim.register_histogram(
                        &key(
                            "dn_sim_request_duration_seconds",
                            &[("type", t.as_str_name().into())],
                        ),
                        &META,
                    ),
                })
            })
            .collect();
        describe(
            &sim,
            "dn_sim_requests_total",
            None,
            "Requests answered, by command type and result (Ozone Result, or GRPC_<code>, DROPPED, RESET)",
        );
        sim.describe_histogram(
            KeyName::from_const_str("dn_sim_request_duration_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "Time from a request's arrival to its answer, queue wait included",
            ),
        );
        sim.describe_histogram(
            KeyName::from_const_str("dn_sim_queue_wait_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str("Time requests waited for a free handler"),
        );
        describe(
            &sim,
            "dn_sim_received_bytes_total",
            Some(Unit::Bytes),
            "Request message bytes received",
        );
        describe(
            &sim,
            "dn_sim_sent_bytes_total",
            Some(Unit::Bytes),
            "Response message bytes sent",
        );
        describe(
            &sim,
            "dn_sim_faults_injected_total",
            None,
            "Faults injected (--fault), by kind",
        );
        describe(
            &sim,
            "dn_sim_rejected_requests_total",
            None,
            "Requests rejected before service, by reason",
        );
        describe(
            &sim,
            "process_cpu_seconds_total",
            Some(Unit::Seconds),
            "User and system CPU time of the process",
        );
        let gauge_help = [
            ("dn_sim_connections_open", "Open client connections"),
            ("dn_sim_streams_open", "Open send streams"),
            ("dn_sim_handlers_busy", "Handlers serving a request"),
            ("dn_sim_handlers", "Handlers in the pool (--handler-count)"),
            ("dn_sim_queue_depth", "Requests waiting for a handler"),
            (
                "process_resident_memory_bytes",
                "Resident memory of the process",
            ),
            ("process_open_fds", "Open file descriptors of the process"),
        ];
        for (name, help) in gauge_help {
            sim.describe_gauge(
                KeyName::from_const_str(name),
                None,
                SharedString::const_str(help),
            );
        }
        Self {
            num_ops: dn.register_counter(&key("storage_container_metrics_num_ops", &[]), &META),
            dispatcher_concurrency: dn
                .register_gauge(&key("hdds_dispatcher_concurrency", &[]), &META),
            queue_wait: sim.register_histogram(&key("dn_sim_queue_wait_seconds", &[]), &META),
            bytes_received: sim.register_counter(&key("dn_sim_received_bytes_total", &[]), &META),
            bytes_sent: sim.register_counter(&key("dn_sim_sent_bytes_total", &[]), &META),
            connections_open: sim.register_gauge(&key("dn_sim_connections_open", &[]), &META),
            streams_open: sim.register_gauge(&key("dn_sim_streams_open", &[]), &META),
            handlers_busy: sim.register_gauge(&key("dn_sim_handlers_busy", &[]), &META),
            handlers_total: sim.register_gauge(&key("dn_sim_handlers", &[]), &META),
            queue_depth: sim.register_gauge(&key("dn_sim_queue_depth", &[]), &META),
            process_cpu: sim.register_counter(&key("process_cpu_seconds_total", &[]), &META),
            process_rss: sim.register_gauge(&key("process_resident_memory_bytes", &[]), &META),
            process_fds: sim.register_gauge(&key("process_open_fds", &[]), &META),
            previous: Mutex::new(vec![(0, 0); MAX_TYPE + 1]),
            types,
            dn,
            sim,
        }
    }

    fn of(&self, t: Type) -> Option<&TypeMetrics> {
        self.types.get(t as usize).and_then(Option::as_ref)
    }

    /// A request arrived (the DataNode counts an op before it checks anything).
    pub fn request_received(&self, t: Type, message_bytes: usize) {
        self.num_ops.increment(1);
        if let Some(m) = self.of(t) {
            m.num.increment(1);
            m.dispatcher_counter.increment(1);
        }
        self.bytes_received.increment(message_bytes as u64);
    }

    /// A request was answered after `elapsed` (queue wait included) with `result` (an Ozone
    /// result name, or GRPC_<code>, DROPPED, RESET). `data_bytes` is the chunk data moved, counted
    /// as the DataNode's `bytes_<type>`.
    pub fn request_done(
        &self,
        t: Type,
        result: &str,
        elapsed: Duration,
        data_bytes: u64,
        response_bytes: usize,
    ) {
        let ns = elapsed.as_nanos() as u64;
        if let Some(m) = self.of(t) {
            m.latency_num_ops.increment(1);
            m.dispatcher_time_ms.increment(ns / 1_000_000);
            m.total_ns.fetch_add(ns, Relaxed);
            m.count.fetch_add(1, Relaxed);
            m.bytes.increment(data_bytes);
            m.duration.record(elapsed.as_secs_f64());
            if result == "SUCCESS" {
                m.success.increment(1);
            } else {
                let k = key(
                    "dn_sim_requests_total",
                    &[("type", t.as_str_name().into()), ("result", result.into())],
                );
                self.sim.register_counter(&k, &META).increment(1);
            }
        }
        self.bytes_sent.increment(response_bytes as u64);
    }

    pub fn queue_wait(&self, wait: Duration) {
        self.queue_wait.record(wait.as_secs_f64());
    }

    pub fn fault_injected(&self, kind: &str) {
        self.sim
            .register_counter(
                &key("dn_sim_faults_injected_total", &[("kind", kind.into())]),
                &META,
            )
            .increment(1);
    }

    pub fn rejected(&self, reason: &str) {
        self.sim
            .register_counter(
                &key(
                    "dn_sim_rejected_requests_total",
                    &[("reason", reason.into())],
                ),
                &META,
            )
            .increment(1);
    }

    pub fn connection_opened(&self) {
        self.connections_open.increment(1.0);
    }

    pub fn connection_closed(&self) {
        self.connections_open.decrement(1.0);
    }

    pub fn stream_opened(&self) {
        self.streams_open.increment(1.0);
    }

    pub fn stream_closed(&self) {
        self.streams_open.decrement(1.0);
    }

    /// Drains histogram samples into their buckets; call periodically so memory stays bounded
    /// between scrapes.
    pub fn upkeep(&self) {
        self.sim.handle().run_upkeep();
        self.dn.handle().run_upkeep();
    }

    fn refresh(&self, pool: &crate::pool::HandlerPool) {
        self.handlers_busy.set(pool.busy() as f64);
        self.dispatcher_concurrency.set(pool.busy() as f64);
        self.handlers_total.set(pool.size() as f64);
        self.queue_depth.set(pool.queued() as f64);
        let mut previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        for (i, m) in self.types.iter().enumerate() {
            let Some(m) = m else { continue };
            let (count, total) = (m.count.load(Relaxed), m.total_ns.load(Relaxed));
            let (pc, pt) = previous[i];
            if count > pc {
                m.latency_avg_time
                    .set((total - pt) as f64 / (count - pc) as f64);
                previous[i] = (count, total);
            }
        }
        drop(previous);
        if let Some(p) = ProcessStats::read() {
            self.process_cpu.absolute(p.cpu_seconds as u64);
            self.process_rss.set(p.resident_bytes as f64);
            self.process_fds.set(p.open_fds as f64);
        }
    }

    /// `/prom`: DataNode names, then the simulator's.
    pub fn render_prom(&self, pool: &crate::pool::HandlerPool) -> String {
        self.refresh(pool);
        let mut out = self.dn.handle().render();
        out.push_str(&self.sim.handle().render());
        out
    }

    /// `/metrics`: the simulator's metrics only, with Prometheus naming.
    pub fn render_metrics(&self, pool: &crate::pool::HandlerPool) -> String {
        self.refresh(pool);
        self.sim.handle().render()
    }
}

/// CPU, memory and descriptors of this process, from /proc (Linux).
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub open_fds: usize,
}

impl ProcessStats {
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name, which may contain spaces, closed by the last ')'.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, in clock ticks (USER_HZ = 100).
        let ticks: f64 =
            fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
        let rss_pages: u64 = fields.get(21)?.parse().ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .map(|d| d.count())
            .unwrap_or(0);
        Some(Self {
            cpu_seconds: ticks / 100.0,
            resident_bytes: rss_pages * 4096,
            open_fds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datanode_names_are_exposed_on_prom_only() {
        let m = Metrics::new();
        let pool = crate::pool::HandlerPool::new(4, None);
        m.request_received(Type::Echo, 20);
        m.request_done(Type::Echo, "SUCCESS", Duration::from_micros(1500), 0, 30);
        m.request_received(Type::WriteChunk, 4200);
        m.request_done(
            Type::WriteChunk,
            "CONTAINER_NOT_FOUND",
            Duration::from_millis(2),
            4096,
            10,
        );
        let prom = m.render_prom(&pool);
        assert!(
            prom.contains("storage_container_metrics_num_ops{context=\"dfs\""),
            "{prom}"
        );
        assert!(prom.contains("storage_container_metrics_num_echo{"));
        assert!(prom.contains("storage_container_metrics_bytes_write_chunk{"));
        assert!(prom.contains("storage_container_metrics_latency_ns_echo_avg_time{"));
        assert!(
            prom.lines()
                .any(|l| l.starts_with("hdds_dispatcher_counter{") && l.contains("type=\"Echo\"")),
            "{prom}"
        );
        assert!(prom.contains(
            "dn_sim_requests_total{type=\"WriteChunk\",result=\"CONTAINER_NOT_FOUND\"} 1"
        ));
        let avg = prom
            .lines()
            .find(|l| l.starts_with("storage_container_metrics_latency_ns_echo_avg_time{"))
            .unwrap();
        assert!(avg.ends_with(" 1500000"), "{avg}");
        let metrics = m.render_metrics(&pool);
        assert!(!metrics.contains("storage_container_metrics"));
        assert!(metrics.contains("dn_sim_request_duration_seconds_bucket"));
        assert!(metrics.contains("dn_sim_handlers 4"));
        assert!(metrics.contains("process_resident_memory_bytes"));
    }
}

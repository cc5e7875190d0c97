//! Metrics, in two expositions:
//! - DataNode names (`/prom` only): [`crate::datanode::metrics`], rendered as a real DataNode's
//!   `/prom` shows them, so Ozone's own queries and Grafana dashboards work against dn-sim.
//! - Simulator internals with Prometheus conventions (`dn_sim_*`, `process_*`; on `/prom` and
//!   `/metrics`): requests by type and result, request duration and queue wait histograms in
//!   seconds, handlers, queue, connections, streams, bytes, faults, rejections, process CPU,
//!   memory and file descriptors; `net` registers its frame and connection-limit series on the
//!   same recorder ([`Metrics::recorder`]). `/metrics` passes `promtool check metrics`.
//!
//! Each server has its own recorders (no global recorder), so several dn-sims in one process —
//! tests, loadgen's embedded one — keep separate numbers. Handles are registered once; recording a
//! request is a few atomic adds.

use crate::datanode::metrics::{ContainerMetrics, MAX_TYPE};
use crate::datanode::version::OzoneVersion;
use crate::sim::fault::FaultKind;
use common::proto::{Result as OzoneResult, Type};
use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use std::sync::OnceLock;
use std::time::Duration;

const META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, None);

const DURATION_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How a request was answered, as the `result` label of `dn_sim_requests_total` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// A response carrying this Ozone result (its number; one the protocol lacks is `UNKNOWN`).
    Result(i32),
    /// A gRPC status that ended the call: `GRPC_<code>`.
    Grpc(tonic::Code),
    /// No answer (`--fault drop`): `DROPPED`.
    Dropped,
    /// The stream was reset (`--fault reset`): `RESET`.
    Reset,
}

/// Slots for Ozone result numbers 0..RESULT_SLOTS (2.2.0 has 0..=49); a number outside them or
/// unknown to the protocol is counted as `UNKNOWN`.
const RESULT_SLOTS: usize = 64;
const UNKNOWN_SLOT: usize = RESULT_SLOTS;
const GRPC_SLOTS: usize = 17;
const DROPPED_SLOT: usize = RESULT_SLOTS + 1 + GRPC_SLOTS;
const RESET_SLOT: usize = DROPPED_SLOT + 1;
const ANSWER_SLOTS: usize = RESET_SLOT + 1;

impl Answered {
    fn slot(self) -> usize {
        match self {
            Answered::Result(n) => match usize::try_from(n) {
                Ok(i) if i < RESULT_SLOTS && OzoneResult::try_from(n).is_ok() => i,
                _ => UNKNOWN_SLOT,
            },
            Answered::Grpc(code) => RESULT_SLOTS + 1 + (code as usize).min(GRPC_SLOTS - 1),
            Answered::Dropped => DROPPED_SLOT,
            Answered::Reset => RESET_SLOT,
        }
    }

    /// The label: an Ozone result name, `GRPC_<code>`, `DROPPED` or `RESET`.
    pub fn label(self) -> String {
        match self {
            Answered::Result(n) => OzoneResult::try_from(n)
                .map_or("UNKNOWN", |r| r.as_str_name())
                .to_string(),
            Answered::Grpc(code) => format!("GRPC_{}", crate::sim::fault::grpc_code_name(code)),
            Answered::Dropped => "DROPPED".to_string(),
            Answered::Reset => "RESET".to_string(),
        }
    }
}

/// A counter per label value, each registered the first time it is counted (so an exposition
/// shows only what happened) and from then on a plain handle: the registry's lock and the
/// label's allocation are paid once per series, never per request.
struct LazyCounters {
    slots: Box<[OnceLock<Counter>]>,
}

impl LazyCounters {
    fn new(slots: usize) -> Self {
        Self {
            slots: (0..slots).map(|_| OnceLock::new()).collect(),
        }
    }

    fn get(&self, slot: usize, register: impl FnOnce() -> Counter) -> &Counter {
        self.slots[slot].get_or_init(register)
    }
}

/// One command type's simulator metrics.
struct SimType {
    /// `dn_sim_requests_total{type,result}` by [`Answered::slot`]; SUCCESS registered up front.
    answers: LazyCounters,
    duration: Histogram,
}

/// Slots of `dn_sim_faults_injected_total{kind}`: a result per Ozone result number, a gRPC code,
/// drop, reset, stall.
const FAULT_SLOTS: usize = RESULT_SLOTS + GRPC_SLOTS + 3;

fn fault_slot(kind: &FaultKind) -> usize {
    match kind {
        FaultKind::Result(r) => (*r as usize).min(RESULT_SLOTS - 1),
        FaultKind::Grpc(code) => RESULT_SLOTS + (*code as usize).min(GRPC_SLOTS - 1),
        FaultKind::Drop => RESULT_SLOTS + GRPC_SLOTS,
        FaultKind::Reset => RESULT_SLOTS + GRPC_SLOTS + 1,
        FaultKind::Stall(_) => RESULT_SLOTS + GRPC_SLOTS + 2,
    }
}

/// The reasons of `dn_sim_rejected_requests_total{reason}`: the service limits' and the queue's.
const REJECT_REASONS: [&str; 4] = ["ingress", "egress", "ops", "queue_full"];

/// A server's metrics: the DataNode's own and the simulator's.
pub struct Metrics {
    /// The DataNode's `ContainerMetrics` and `HddsDispatcher` series.
    pub datanode: ContainerMetrics,
    sim: PrometheusRecorder,
    types: Vec<Option<SimType>>,
    faults: LazyCounters,
    rejections: LazyCounters,
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
    /// Called on every scrape to bring gauges kept elsewhere up to date (the in-flight budget's):
    /// set once at start, so metrics knows none of the modules that keep them.
    on_scrape: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

fn key(name: &str, labels: &[(&str, String)]) -> Key {
    let labels: Vec<Label> = labels
        .iter()
        .map(|(k, v)| Label::new(k.to_string(), v.clone()))
        .collect();
    Key::from_parts(name.to_string(), labels)
}

fn requests_key(t: Type, answered: Answered) -> Key {
    key(
        "dn_sim_requests_total",
        &[
            ("type", t.as_str_name().into()),
            ("result", answered.label()),
        ],
    )
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(OzoneVersion::default())
    }
}

impl Metrics {
    /// Metrics of a DataNode of release `version` (its command types, its metric names).
    pub fn new(version: OzoneVersion) -> Self {
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
                let answers = LazyCounters::new(ANSWER_SLOTS);
                let success = Answered::Result(OzoneResult::Success as i32);
                answers.get(success.slot(), || {
                    sim.register_counter(&requests_key(t, success), &META)
                });
                Some(SimType {
                    answers,
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
            "dn_sim_tls_handshake_failures_total",
            None,
            "Client connections closed because their TLS handshake failed or timed out",
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
            datanode: ContainerMetrics::new(version),
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
            on_scrape: OnceLock::new(),
            types,
            faults: LazyCounters::new(FAULT_SLOTS),
            rejections: LazyCounters::new(REJECT_REASONS.len()),
            sim,
        }
    }

    fn of(&self, t: Type) -> Option<&SimType> {
        self.types.get(t as usize).and_then(Option::as_ref)
    }

    /// A request arrived: the DataNode's counts and the bytes received.
    pub fn request_received(&self, t: Type, message_bytes: usize) {
        self.datanode.request_received(t);
        self.bytes_received.increment(message_bytes as u64);
    }

    /// A request was answered after `elapsed` (queue wait included) with `result` (an Ozone
    /// result name, or GRPC_<code>, DROPPED, RESET): the dispatcher's `time` (ms) and the
    /// simulator's metrics.
    pub fn request_done(
        &self,
        t: Type,
        answered: Answered,
        elapsed: Duration,
        response_bytes: usize,
    ) {
        self.datanode.request_done(t, elapsed);
        if let Some(m) = self.of(t) {
            m.duration.record(elapsed.as_secs_f64());
            m.answers
                .get(answered.slot(), || {
                    self.sim.register_counter(&requests_key(t, answered), &META)
                })
                .increment(1);
        }
        self.bytes_sent.increment(response_bytes as u64);
    }

    pub fn queue_wait(&self, wait: Duration) {
        self.queue_wait.record(wait.as_secs_f64());
    }

    pub fn fault_injected(&self, kind: &FaultKind) {
        self.faults
            .get(fault_slot(kind), || {
                let label = kind.kind_label().into_owned();
                self.sim.register_counter(
                    &key("dn_sim_faults_injected_total", &[("kind", label)]),
                    &META,
                )
            })
            .increment(1);
    }

    /// A request rejected before service; `reason` is one of [`REJECT_REASONS`].
    pub fn rejected(&self, reason: &'static str) {
        let slot = REJECT_REASONS
            .iter()
            .position(|r| *r == reason)
            .expect("a known rejection reason");
        self.rejections
            .get(slot, || {
                self.sim.register_counter(
                    &key(
                        "dn_sim_rejected_requests_total",
                        &[("reason", reason.into())],
                    ),
                    &META,
                )
            })
            .increment(1);
    }

    /// A TLS handshake that failed (`reason`: `error`, `timeout`, or `over_limit`: refused because
    /// `--max-connections` handshakes were in progress); rare, so registered on use.
    pub fn tls_handshake_failed(&self, reason: &'static str) {
        self.sim
            .register_counter(
                &key(
                    "dn_sim_tls_handshake_failures_total",
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

    /// The recorder of `/metrics`, for modules that register their own series.
    pub fn recorder(&self) -> &PrometheusRecorder {
        &self.sim
    }

    /// Runs `refresh` on every scrape, before rendering (at most one, set at start: a second
    /// is ignored).
    pub fn on_scrape(&self, refresh: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_scrape.set(Box::new(refresh));
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
    }

    fn refresh(&self, pool: &crate::sim::pool::HandlerPool) {
        self.handlers_busy.set(pool.busy() as f64);
        self.handlers_total.set(pool.size() as f64);
        self.queue_depth.set(pool.queued() as f64);
        if let Some(refresh) = self.on_scrape.get() {
            refresh();
        }
        if let Some(p) = ProcessStats::read() {
            self.process_cpu.absolute(p.cpu_seconds as u64);
            self.process_rss.set(p.resident_bytes as f64);
            self.process_fds.set(p.open_fds as f64);
        }
    }

    /// `/prom`: DataNode names, then the simulator's.
    pub fn render_prom(&self, pool: &crate::sim::pool::HandlerPool) -> String {
        self.refresh(pool);
        let mut out = self.datanode.render();
        out.push_str(&self.sim.handle().render());
        out
    }

    /// `/metrics`: the simulator's metrics only, with Prometheus naming.
    pub fn render_metrics(&self, pool: &crate::sim::pool::HandlerPool) -> String {
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

    fn sample<'a>(prom: &'a str, prefix: &str) -> &'a str {
        prom.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{prom}"))
    }

    #[test]
    fn every_result_and_fault_has_a_slot_of_its_own() {
        // The slot tables clamp out-of-range numbers; a protocol that grew past them would fold
        // two labels into one series. Every result the protocol knows, and every gRPC code, must
        // get a distinct slot.
        let results: Vec<OzoneResult> = (0..10_000)
            .filter_map(|n| OzoneResult::try_from(n).ok())
            .collect();
        assert!(results.len() > 40, "{} results", results.len());
        let codes = (0..64).map(tonic::Code::from);
        let mut answer_slots = std::collections::HashSet::new();
        let mut fault_slots = std::collections::HashSet::new();
        for r in &results {
            assert!(
                answer_slots.insert(Answered::Result(*r as i32).slot()),
                "{r:?}"
            );
            assert!(
                fault_slots.insert(fault_slot(&FaultKind::Result(*r))),
                "{r:?}"
            );
        }
        let mut seen_codes = std::collections::HashSet::new();
        for code in codes {
            if !seen_codes.insert(code as i32) {
                continue; // Code::from maps every unknown number to Unknown.
            }
            assert!(answer_slots.insert(Answered::Grpc(code).slot()), "{code:?}");
            assert!(
                fault_slots.insert(fault_slot(&FaultKind::Grpc(code))),
                "{code:?}"
            );
        }
        assert_eq!(seen_codes.len(), GRPC_SLOTS);
        for a in [Answered::Dropped, Answered::Reset] {
            assert!(answer_slots.insert(a.slot()));
        }
        for f in [
            FaultKind::Drop,
            FaultKind::Reset,
            FaultKind::Stall(Duration::ZERO),
        ] {
            assert!(fault_slots.insert(fault_slot(&f)));
        }
        assert!(answer_slots.iter().all(|&s| s < ANSWER_SLOTS));
        assert!(fault_slots.iter().all(|&s| s < FAULT_SLOTS));
    }

    #[test]
    fn datanode_names_are_exposed_on_prom_only() {
        let m = Metrics::new(OzoneVersion::V2_2);
        let pool = crate::sim::pool::HandlerPool::new(4, None);
        m.request_received(Type::Echo, 20);
        m.datanode
            .handler_latency(Type::Echo, Duration::from_micros(1500));
        m.request_done(
            Type::Echo,
            Answered::Result(OzoneResult::Success as i32),
            Duration::from_micros(1500),
            30,
        );
        m.request_received(Type::WriteChunk, 4200);
        m.request_done(
            Type::WriteChunk,
            Answered::Result(OzoneResult::ContainerNotFound as i32),
            Duration::from_millis(2),
            10,
        );
        let prom = m.render_prom(&pool);
        assert!(
            prom.contains("storage_container_metrics_num_ops{context=\"dfs\",hostname=\""),
            "{prom}"
        );
        assert!(prom.contains("# TYPE storage_container_metrics_num_ops counter\n"));
        assert!(sample(&prom, "storage_container_metrics_num_echo{").ends_with(" 1"));
        assert!(sample(&prom, "storage_container_metrics_bytes_write_chunk{").ends_with(" 0"));
        // No handler sample for the failed WriteChunk (a pre-handler failure).
        assert!(
            sample(
                &prom,
                "storage_container_metrics_latency_ns_write_chunk_num_ops{"
            )
            .ends_with(" 0")
        );
        assert!(prom.contains("# TYPE storage_container_metrics_latency_ns_echo_avg_time gauge\n"));
        let avg = sample(&prom, "storage_container_metrics_latency_ns_echo_avg_time{");
        assert!(avg.ends_with(" 1500000.0"), "{avg}");
        // The next interval has no samples: Hadoop's MutableRate then shows 0.0.
        let again = m.render_prom(&pool);
        let avg = sample(
            &again,
            "storage_container_metrics_latency_ns_echo_avg_time{",
        );
        assert!(avg.ends_with(" 0.0"), "{avg}");
        let echo = sample(&prom, "hdds_dispatcher_counter{type=\"Echo\",");
        assert!(
            echo.starts_with("hdds_dispatcher_counter{type=\"Echo\",hostname=\""),
            "{echo}"
        );
        assert!(echo.ends_with(" 1"));
        assert!(prom.contains("# TYPE hdds_dispatcher_concurrency counter\n"));
        assert!(sample(&prom, "hdds_dispatcher_concurrency{hostname=\"").ends_with(" 0"));
        assert!(!prom.contains("hdds_dispatcher_counter{context"));
        assert!(prom.contains(
            "dn_sim_requests_total{type=\"WriteChunk\",result=\"CONTAINER_NOT_FOUND\"} 1"
        ));
        let metrics = m.render_metrics(&pool);
        assert!(!metrics.contains("storage_container_metrics"));
        assert!(!metrics.contains("hdds_dispatcher"));
        assert!(metrics.contains("dn_sim_request_duration_seconds_bucket"));
        assert!(metrics.contains("dn_sim_handlers 4"));
        assert!(metrics.contains("process_resident_memory_bytes"));
    }

    #[test]
    fn each_release_lists_its_own_command_types_and_counters() {
        let pool = crate::sim::pool::HandlerPool::new(1, None);
        let count =
            |prom: &str, prefix: &str| prom.lines().filter(|l| l.starts_with(prefix)).count();
        for (v, types) in [
            (OzoneVersion::V2_0, 22),
            (OzoneVersion::V2_1, 23),
            (OzoneVersion::V2_2, 24),
        ] {
            // The DataNode names only (dn-sim's own metrics cover every type of the protocol).
            let prom: String = Metrics::new(v)
                .render_prom(&pool)
                .lines()
                .filter(|l| !l.contains("dn_sim_"))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(count(&prom, "hdds_dispatcher_counter{"), types, "{v}");
            assert_eq!(count(&prom, "hdds_dispatcher_time{"), types, "{v}");
            assert_eq!(
                count(&prom, "storage_container_metrics_latency_ns_"),
                2 * types,
                "{v}"
            );
            assert!(!prom.contains("StreamInitWithPutBlock"), "{v}");
            assert!(!prom.contains("stream_init_with_put_block"), "{v}");
            assert_eq!(
                prom.contains("GetContainerChecksumInfo"),
                v >= OzoneVersion::V2_1
            );
            assert_eq!(prom.contains("type=\"ReadBlock\""), v >= OzoneVersion::V2_2);
            assert_eq!(
                prom.contains("storage_container_metrics_bytes_for_closed_container_echo{"),
                v >= OzoneVersion::V2_1
            );
            assert_eq!(
                prom.contains("storage_container_metrics_num_container_reconciled_with_changes{"),
                v >= OzoneVersion::V2_1
            );
            assert!(prom.contains("storage_container_metrics_container_force_delete{"));
        }
    }

    #[test]
    fn each_answer_fault_and_rejection_counts_in_its_own_series() {
        let m = Metrics::new(OzoneVersion::V2_2);
        let pool = crate::sim::pool::HandlerPool::new(1, None);
        let ms = Duration::from_millis(1);
        let answers = [
            Answered::Result(OzoneResult::Success as i32),
            Answered::Result(OzoneResult::ContainerNotFound as i32),
            Answered::Result(OzoneResult::ContainerNotFound as i32),
            Answered::Result(9999),
            Answered::Grpc(tonic::Code::ResourceExhausted),
            Answered::Dropped,
            Answered::Reset,
        ];
        for a in answers {
            m.request_received(Type::ReadChunk, 10);
            m.request_done(Type::ReadChunk, a, ms, 0);
        }
        for kind in [
            FaultKind::Result(OzoneResult::IoException),
            FaultKind::Grpc(tonic::Code::Unavailable),
            FaultKind::Grpc(tonic::Code::Unavailable),
            FaultKind::Drop,
            FaultKind::Stall(ms),
        ] {
            m.fault_injected(&kind);
        }
        m.rejected("ops");
        m.rejected("queue_full");
        m.rejected("ops");
        let text = m.render_metrics(&pool);
        let count = |series: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(series))
                .unwrap_or_else(|| panic!("no {series} in\n{text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let req = |result: &str| {
            count(&format!(
                "dn_sim_requests_total{{type=\"ReadChunk\",result=\"{result}\"}}"
            ))
        };
        assert_eq!(req("SUCCESS"), 1.0);
        assert_eq!(req("CONTAINER_NOT_FOUND"), 2.0);
        assert_eq!(req("UNKNOWN"), 1.0);
        assert_eq!(req("GRPC_RESOURCE_EXHAUSTED"), 1.0);
        assert_eq!(req("DROPPED"), 1.0);
        assert_eq!(req("RESET"), 1.0);
        // SUCCESS is registered up front for every type; nothing else before it happens.
        assert!(text.contains("dn_sim_requests_total{type=\"Echo\",result=\"SUCCESS\"} 0"));
        assert!(!text.contains("type=\"Echo\",result=\"CONTAINER_NOT_FOUND\""));
        let fault = |kind: &str| count(&format!("dn_sim_faults_injected_total{{kind=\"{kind}\"}}"));
        assert_eq!(fault("result:IO_EXCEPTION"), 1.0);
        assert_eq!(fault("grpc:UNAVAILABLE"), 2.0);
        assert_eq!(fault("drop"), 1.0);
        assert_eq!(fault("stall"), 1.0);
        assert!(!text.contains("kind=\"reset\""));
        let rejected =
            |r: &str| count(&format!("dn_sim_rejected_requests_total{{reason=\"{r}\"}}"));
        assert_eq!(rejected("ops"), 2.0);
        assert_eq!(rejected("queue_full"), 1.0);
    }
}

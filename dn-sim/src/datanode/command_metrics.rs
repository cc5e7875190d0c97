//! What a DataNode's `/prom` says of SCM's commands (Ozone 2.2.0): `CommandHandlerMetrics`
//! (`command_handler_metrics_*{context="CommandHandlerMetrics",command,hostname}`, one series per
//! registered command handler) and `DatanodeQueueMetrics` (`datanode_queue_metrics_*_size
//! {hostname}`: the state context's and the dispatcher's queue of each command type, and the
//! incremental-report, container-action and pipeline-action queues of each SCM). Names and
//! labels as a real 2.2.0 DataNode in a cluster prints them.
//!
//! dn-sim executes a command when its heartbeat's answer arrives, so its queues are always
//! empty; what it counts is what arrived, what ran and for how long.

use common::scm::proto::scm_command_proto::Type;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The command handlers a 2.2.0 DataNode registers (`DatanodeStateMachine`), with the maximum
/// size of the thread pools of those that have one (their defaults: `hdds.datanode
/// .close.container.threads`... as a real DataNode's `/prom` shows them).
const HANDLERS: [(Type, Option<u32>); 11] = [
    (Type::CloseContainerCommand, Some(3)),
    (Type::ClosePipelineCommand, None),
    (Type::CreatePipelineCommand, None),
    (Type::DeleteBlocksCommand, Some(5)),
    (Type::DeleteContainerCommand, Some(2)),
    (Type::FinalizeNewLayoutVersionCommand, None),
    (Type::ReconcileContainerCommand, None),
    (Type::ReconstructEcContainersCommand, None),
    (Type::RefreshVolumeUsageInfo, None),
    (Type::ReplicateContainerCommand, None),
    (Type::SetNodeOperationalStateCommand, None),
];

/// Highest SCM command type number (`unknownScmCommand` is 0).
const MAX_TYPE: usize = 32;

#[derive(Default)]
struct Counts {
    received: AtomicU64,
    invoked: AtomicU64,
    run_ms: AtomicU64,
}

/// SCM's commands as the DataNode's metrics count them.
pub struct CommandMetrics {
    counts: Box<[Counts]>,
    /// The SCM's host name as the queue gauges name it (`InetSocketAddress.getHostName`, set
    /// with `--scm`).
    scm_host: OnceLock<String>,
}

impl Default for CommandMetrics {
    fn default() -> Self {
        Self {
            counts: (0..=MAX_TYPE).map(|_| Counts::default()).collect(),
            scm_host: OnceLock::new(),
        }
    }
}

impl CommandMetrics {
    fn counts(&self, t: Type) -> Option<&Counts> {
        self.counts.get(t as usize)
    }

    /// The SCM this DataNode talks to: `host` as Java's `getHostName` gives it.
    pub fn set_scm_host(&self, host: String) {
        let _ = self.scm_host.set(host);
    }

    /// A command arrived in a heartbeat's answer (`increaseCommandCount`).
    pub fn received(&self, t: Type) {
        if let Some(c) = self.counts(t) {
            c.received.fetch_add(1, Relaxed);
        }
    }

    /// A handler ran a command for `took` (its `invocationCount` and `totalRunTime`).
    pub fn invoked(&self, t: Type, took: Duration) {
        if let Some(c) = self.counts(t) {
            c.invoked.fetch_add(1, Relaxed);
            c.run_ms.fetch_add(took.as_millis() as u64, Relaxed);
        }
    }

    /// Adds the two families to a `/prom` rendering: `put(name, TYPE, labels, value)`.
    pub fn render_into(
        &self,
        host: &str,
        put: &mut impl FnMut(String, &'static str, String, String),
    ) {
        for (t, pool) in HANDLERS {
            let c = self.counts(t).expect("a handler's type is in range");
            let labels = format!(
                "{{context=\"CommandHandlerMetrics\",command=\"{}\",hostname=\"{host}\"}}",
                t.as_str_name()
            );
            let invoked = c.invoked.load(Relaxed);
            let run_ms = c.run_ms.load(Relaxed);
            let mut gauge = |metric: &str, value: u64| {
                put(
                    format!("command_handler_metrics_{metric}"),
                    "gauge",
                    labels.clone(),
                    value.to_string(),
                )
            };
            gauge("total_run_time_ms", run_ms);
            gauge("avg_run_time_ms", run_ms.checked_div(invoked).unwrap_or(0));
            gauge("queue_waiting_task_count", 0);
            gauge("invocation_count", invoked);
            if let Some(max) = pool {
                gauge("thread_pool_active_pool_size", 0);
                gauge("thread_pool_max_pool_size", max.into());
            }
            gauge("command_received_count", c.received.load(Relaxed));
        }
        let labels = format!("{{hostname=\"{host}\"}}");
        let mut queue = |name: String| put(name, "gauge", labels.clone(), "0".into());
        for t in (0..=MAX_TYPE as i32).filter_map(|t| Type::try_from(t).ok()) {
            let command = capitalize(t.as_str_name());
            for prefix in ["StateContextCommandQueue", "CommandDispatcherCommandQueue"] {
                queue(prometheus_name(
                    "DatanodeQueueMetrics",
                    &format!("{prefix}{command}Size"),
                ));
            }
        }
        if let Some(scm) = self.scm_host.get() {
            let scm = upper_underscore_to_upper_camel(scm);
            for prefix in [
                "IncrementalReportQueue",
                "ContainerActionQueue",
                "PipelineActionQueue",
            ] {
                queue(prometheus_name(
                    "DatanodeQueueMetrics",
                    &format!("{prefix}{}Size", capitalize(&scm)),
                ));
            }
        }
    }
}

/// `StringUtils.capitalize`: the first character upper case.
fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Guava's `CaseFormat.UPPER_UNDERSCORE.to(UPPER_CAMEL, s)`: each `_`-separated word with its
/// first letter upper case and the rest lower case, joined.
fn upper_underscore_to_upper_camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let lower = w.to_lowercase();
            capitalize(&lower)
        })
        .collect()
}

/// `PrometheusMetricsSinkUtil.prometheusName` (Ozone 2.2.0): record and metric names joined,
/// split before each capital that starts a word (`(?<!(^|[A-Z_]))(?=[A-Z])|(?<!^)(?=[A-Z][a-z])`),
/// joined with `_`, lower case, every run of other characters one `_`.
pub fn prometheus_name(record: &str, metric: &str) -> String {
    let base: Vec<char> = format!("{}{}", capitalize(record), capitalize(metric))
        .chars()
        .collect();
    let mut joined = String::with_capacity(base.len() + 8);
    for (i, &c) in base.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            let prev = base[i - 1];
            let after_lower = !(prev.is_ascii_uppercase() || prev == '_');
            let starts_word = base.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if after_lower || starts_word {
                joined.push('_');
            }
        }
        joined.push(c);
    }
    let lower = joined.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut in_run = false;
    for c in lower.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `command_handler_metrics` and `datanode_queue_metrics` line a real Ozone 2.2.0
    /// DataNode printed after one createPipelineCommand (235 ms), its SCM at `localhost`.
    const REAL: &str = include_str!("../../tests/fixtures/real-dn-2.2.0-command-metrics.prom");

    #[test]
    fn names_labels_and_values_are_a_real_datanode_s() {
        let metrics = CommandMetrics::default();
        metrics.set_scm_host("localhost".into());
        metrics.received(Type::CreatePipelineCommand);
        metrics.invoked(Type::CreatePipelineCommand, Duration::from_millis(235));
        let mut ours: Vec<String> = Vec::new();
        let mut types = std::collections::BTreeSet::new();
        metrics.render_into("vm", &mut |name, kind, labels, value| {
            types.insert(format!("# TYPE {name} {kind}"));
            ours.push(format!("{name}{labels} {value}"));
        });
        ours.extend(types);
        ours.sort();
        let mut real: Vec<String> = REAL.lines().map(str::to_owned).collect();
        real.sort();
        assert_eq!(ours, real);
    }

    #[test]
    fn the_sink_s_names() {
        assert_eq!(
            prometheus_name(
                "DatanodeQueueMetrics",
                "StateContextCommandQueueReconstructECContainersCommandSize"
            ),
            "datanode_queue_metrics_state_context_command_queue_reconstruct_ec_containers_command_size"
        );
        assert_eq!(
            prometheus_name(
                "DatanodeQueueMetrics",
                "PipelineActionQueueScm-0.ozone.svcSize"
            ),
            "datanode_queue_metrics_pipeline_action_queue_scm_0_ozone_svc_size"
        );
        assert_eq!(upper_underscore_to_upper_camel("localhost"), "Localhost");
        assert_eq!(upper_underscore_to_upper_camel("SCM_HOST"), "ScmHost");
    }
}

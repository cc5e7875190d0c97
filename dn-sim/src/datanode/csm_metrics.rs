//! `CSMMetrics`: the metrics Ozone's `ContainerStateMachine` keeps per Raft group, with a real
//! DataNode's names and layout on `/prom` (Ozone 2.2.0, read off a real DataNode's `/prom`):
//! `csm_metrics_<name>{context="dfs",raftgroupid="group-XXXXXXXXXXXX",hostname="H"}`, eighteen
//! counters and the `_num_ops`/`_avg_time` pair of 54 rates (six of the state machine's phases,
//! then `<Type>Ms` and `queueingDelay<Type>Ns` for every command type of the release).
//!
//! What counts, as `ContainerStateMachine` counts it:
//! - a Raft write: `pending_apply_transactions` up at `startTransaction` (and down when its apply
//!   completes: a write refused at `startTransaction` leaves it up, as on a real DataNode), a
//!   refusal as `num_container_not_open_verify_failures` or
//!   `num_start_transaction_verify_failures`; then `start_transaction_complete_ns`,
//!   `until_apply_transaction_ns`, `num_apply_transaction_ops`, `queueing_delay_<type>_ns`,
//!   `transaction_latency_ms` and `<type>_ms`, `apply_transaction_ns`, and
//!   `num_apply_transaction_fails` for an answer that fails the apply;
//! - a WriteChunk also writes state machine data: `num_write_state_machine_ops`,
//!   `write_state_machine_queueing_latency_ns`, `write_state_machine_data_ns`,
//!   `num_bytes_written_count`, and once applied `num_bytes_committed_count` (PutSmallFile adds
//!   its `writeChunk` length too, which is 0);
//! - a Raft read: `num_query_state_machine_ops`.
//!
//! The counts are exact; the times are dn-sim's own phases (the write of state machine data is
//! the chunk write on its chunk writer, `sim::raft`).

use crate::datanode::version::OzoneVersion;
use common::proto::Type;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The counters, in the order of `CSMMetrics`'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    WriteStateMachineOps,
    QueryStateMachineOps,
    ApplyTransactionOps,
    ReadStateMachineOps,
    BytesWrittenCount,
    BytesCommittedCount,
    WriteStateMachineFails,
    WriteDataFails,
    QueryStateMachineFails,
    ApplyTransactionFails,
    ReadStateMachineFails,
    ReadStateMachineMissCount,
    StartTransactionVerifyFailures,
    ContainerNotOpenVerifyFailures,
    DataCacheMiss,
    DataCacheHit,
    EvictedCacheCount,
}

const COUNTERS: [(Counter, &str); 17] = [
    (Counter::WriteStateMachineOps, "num_write_state_machine_ops"),
    (Counter::QueryStateMachineOps, "num_query_state_machine_ops"),
    (Counter::ApplyTransactionOps, "num_apply_transaction_ops"),
    (Counter::ReadStateMachineOps, "num_read_state_machine_ops"),
    (Counter::BytesWrittenCount, "num_bytes_written_count"),
    (Counter::BytesCommittedCount, "num_bytes_committed_count"),
    (
        Counter::WriteStateMachineFails,
        "num_write_state_machine_fails",
    ),
    (Counter::WriteDataFails, "num_write_data_fails"),
    (
        Counter::QueryStateMachineFails,
        "num_query_state_machine_fails",
    ),
    (
        Counter::ApplyTransactionFails,
        "num_apply_transaction_fails",
    ),
    (
        Counter::ReadStateMachineFails,
        "num_read_state_machine_fails",
    ),
    (
        Counter::ReadStateMachineMissCount,
        "num_read_state_machine_miss_count",
    ),
    (
        Counter::StartTransactionVerifyFailures,
        "num_start_transaction_verify_failures",
    ),
    (
        Counter::ContainerNotOpenVerifyFailures,
        "num_container_not_open_verify_failures",
    ),
    (Counter::DataCacheMiss, "num_data_cache_miss"),
    (Counter::DataCacheHit, "num_data_cache_hit"),
    (Counter::EvictedCacheCount, "num_evicted_cache_count"),
];

/// The rates of the state machine's phases (`MutableRate`s: a count and a total).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `transactionLatencyMs`: startTransaction to the apply's answer, in ms.
    TransactionLatencyMs,
    /// `applyTransactionNs`: the apply, in ns.
    ApplyTransactionNs,
    /// `writeStateMachineDataNs`: a WriteChunk's data write, in ns.
    WriteStateMachineDataNs,
    /// `writeStateMachineQueueingLatencyNs`: until the data write starts, in ns.
    WriteStateMachineQueueingLatencyNs,
    /// `untilApplyTransactionNs`: startTransaction to the apply's start, in ns.
    UntilApplyTransactionNs,
    /// `startTransactionCompleteNs`: the startTransaction checks, in ns.
    StartTransactionCompleteNs,
}

const PHASES: [(Phase, &str); 6] = [
    (Phase::TransactionLatencyMs, "transaction_latency_ms"),
    (Phase::ApplyTransactionNs, "apply_transaction_ns"),
    (
        Phase::WriteStateMachineDataNs,
        "write_state_machine_data_ns",
    ),
    (
        Phase::WriteStateMachineQueueingLatencyNs,
        "write_state_machine_queueing_latency_ns",
    ),
    (Phase::UntilApplyTransactionNs, "until_apply_transaction_ns"),
    (
        Phase::StartTransactionCompleteNs,
        "start_transaction_complete_ns",
    ),
];

use crate::datanode::prom_text::{MAX_TYPE, interval_average, java_double};

/// A `MutableRate`: samples and their total, in the rate's unit.
#[derive(Default)]
struct Rate {
    count: AtomicU64,
    total: AtomicU64,
}

impl Rate {
    fn add(&self, value: u64) {
        self.count.fetch_add(1, Relaxed);
        self.total.fetch_add(value, Relaxed);
    }

    fn read(&self) -> (u64, u64) {
        (self.count.load(Relaxed), self.total.load(Relaxed))
    }
}

/// One group's `CSMMetrics`. Counting is relaxed atomic adds; a scrape takes the lock of the
/// previous interval's sums (for `_avg_time`).
pub struct CsmMetrics {
    /// `raftgroupid`: `group-` and the group's last 12 hex digits, upper case.
    group: String,
    counters: [AtomicU64; 17],
    pending_apply: AtomicI64,
    phases: [Rate; 6],
    /// `<Type>Ms`, by `Type` number.
    ops_latency_ms: Vec<Rate>,
    /// `queueingDelay<Type>Ns`, by `Type` number.
    queueing_delay_ns: Vec<Rate>,
    /// (count, total) of every rate at the previous scrape: phases, then the per-type pairs.
    previous: Mutex<Vec<(u64, u64)>>,
}

impl CsmMetrics {
    pub fn new(group: uuid::Uuid) -> Self {
        let hex = group.simple().to_string().to_uppercase();
        CsmMetrics {
            group: format!("group-{}", &hex[20..]),
            counters: Default::default(),
            pending_apply: AtomicI64::new(0),
            phases: Default::default(),
            ops_latency_ms: (0..=MAX_TYPE).map(|_| Rate::default()).collect(),
            queueing_delay_ns: (0..=MAX_TYPE).map(|_| Rate::default()).collect(),
            previous: Mutex::new(vec![(0, 0); PHASES.len() + 2 * (MAX_TYPE + 1)]),
        }
    }

    pub fn add(&self, counter: Counter, n: u64) {
        self.counters[counter as usize].fetch_add(n, Relaxed);
    }

    pub fn get(&self, counter: Counter) -> u64 {
        self.counters[counter as usize].load(Relaxed)
    }

    /// `incPendingApplyTransactions` (startTransaction) and `decPendingApplyTransactions` (an
    /// apply completed).
    pub fn pending_apply(&self, delta: i64) {
        self.pending_apply.fetch_add(delta, Relaxed);
    }

    pub fn pending_apply_transactions(&self) -> i64 {
        self.pending_apply.load(Relaxed)
    }

    /// A sample of `phase`, in its unit (ms for `TransactionLatencyMs`, else ns).
    pub fn phase(&self, phase: Phase, elapsed: Duration) {
        let value = match phase {
            Phase::TransactionLatencyMs => elapsed.as_millis(),
            _ => elapsed.as_nanos(),
        };
        self.phases[phase as usize].add(u64::try_from(value).unwrap_or(u64::MAX));
    }

    /// `incPipelineLatencyMs`: `transactionLatencyMs` and `<type>Ms`.
    pub fn pipeline_latency(&self, t: Type, elapsed: Duration) {
        self.phase(Phase::TransactionLatencyMs, elapsed);
        if let Some(rate) = self.ops_latency_ms.get(t as usize) {
            rate.add(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
        }
    }

    /// `recordQueueingDelay`: `queueingDelay<type>Ns`.
    pub fn queueing_delay(&self, t: Type, elapsed: Duration) {
        if let Some(rate) = self.queueing_delay_ns.get(t as usize) {
            rate.add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        }
    }

    /// Every series, for `ContainerMetrics::render`: `put(name, type, labels, value)`.
    pub fn render_into(
        &self,
        version: OzoneVersion,
        hostname: &str,
        put: &mut dyn FnMut(String, &'static str, String, String),
    ) {
        let labels = format!(
            "{{context=\"dfs\",raftgroupid=\"{}\",hostname=\"{hostname}\"}}",
            self.group
        );
        let name = |n: &str| format!("csm_metrics_{n}");
        for (counter, n) in COUNTERS {
            put(
                name(n),
                "counter",
                labels.clone(),
                self.get(counter).to_string(),
            );
        }
        put(
            name("pending_apply_transactions"),
            "counter",
            labels.clone(),
            self.pending_apply_transactions().to_string(),
        );
        let mut previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        let mut rate = |slot: usize, n: String, now: (u64, u64)| {
            let avg = interval_average(&mut previous[slot], now);
            let count = now.0;
            put(
                name(&format!("{n}_num_ops")),
                "counter",
                labels.clone(),
                count.to_string(),
            );
            put(
                name(&format!("{n}_avg_time")),
                "gauge",
                labels.clone(),
                java_double(avg),
            );
        };
        for (i, (phase, n)) in PHASES.iter().enumerate() {
            rate(i, n.to_string(), self.phases[*phase as usize].read());
        }
        for t in version.cmd_types() {
            let snake = t.snake_name();
            let i = t as usize;
            rate(
                PHASES.len() + i,
                format!("{snake}_ms"),
                self.ops_latency_ms[i].read(),
            );
            rate(
                PHASES.len() + MAX_TYPE + 1 + i,
                format!("queueing_delay_{snake}_ns"),
                self.queueing_delay_ns[i].read(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(m: &CsmMetrics) -> String {
        let mut lines = Vec::new();
        m.render_into(OzoneVersion::V2_2, "h", &mut |name, kind, labels, value| {
            lines.push(format!("{name} {kind} {labels} {value}"));
        });
        lines.join("\n")
    }

    #[test]
    fn names_labels_and_counts_are_a_real_datanodes() {
        let m =
            CsmMetrics::new(uuid::Uuid::parse_str("52d7e4a6-cbba-40c4-b7a6-dc56e1bf5c12").unwrap());
        m.add(Counter::ApplyTransactionOps, 2);
        m.pending_apply(1);
        m.pipeline_latency(Type::Echo, Duration::from_millis(3));
        m.queueing_delay(Type::WriteChunk, Duration::from_nanos(500));
        let text = render(&m);
        let labels = r#"{context="dfs",raftgroupid="group-DC56E1BF5C12",hostname="h"}"#;
        for line in [
            format!("csm_metrics_num_apply_transaction_ops counter {labels} 2"),
            format!("csm_metrics_pending_apply_transactions counter {labels} 1"),
            format!("csm_metrics_echo_ms_num_ops counter {labels} 1"),
            format!("csm_metrics_echo_ms_avg_time gauge {labels} 3.0"),
            format!("csm_metrics_transaction_latency_ms_num_ops counter {labels} 1"),
            format!("csm_metrics_queueing_delay_write_chunk_ns_avg_time gauge {labels} 500.0"),
            format!("csm_metrics_num_data_cache_hit counter {labels} 0"),
        ] {
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
        // 18 counters and 54 rates × 2 on 2.2.0 (24 command types), as a real DataNode's /prom.
        assert_eq!(text.lines().count(), 18 + 54 * 2);
        // The interval's average: no sample since the last scrape is 0.0.
        assert!(render(&m).contains(&format!("csm_metrics_echo_ms_avg_time gauge {labels} 0.0")));
    }
}

//! Ratis's own metrics of a Raft group, as a real DataNode exports them on `/prom` (Ratis 3.2.1's
//! Dropwizard registries through Ozone 2.2.0's exporter, read off a real DataNode's `/prom`):
//! `ratis_<registry>_<name>{instance="<DataNode UUID>",group="group-XXXXXXXXXXXX",}` (the
//! trailing comma is the exporter's), every Dropwizard counter and gauge typed `gauge`, values
//! as Java prints a double. The counts dn-sim keeps, as Ratis counts them:
//! - `ratis_log_worker_appendEntryCount`: every entry appended to the log, of which
//!   `stateMachineLogEntryCount` (the writes), `metadataLogEntryCount` (a commit index that rose)
//!   and `configLogEntryCount` (the group's configuration: one, at the group's start);
//! - `ratis_server_numFailedClientWriteOnServer`: writes answered with an exception (`…Read…`
//!   and `…Watch…` stay 0: dn-sim answers no read or watch with one);
//! - `ratis_server_numPendingRequestInQueue`: writes between arrival and reply;
//! - `ratis_state_machine_appliedIndex`: the last log index applied (the commit index in a
//!   one-node group).
//!
//! Not kept: Ratis's timers (`clientWriteRequest` and the others, Dropwizard summaries of
//! decaying reservoirs), the log worker's flushes and batches (dn-sim's log device has no batch
//! model), the retry cache's counters.

use crate::datanode::prom_text::java_double;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// Which kind of log entry was appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    StateMachine,
    Metadata,
}

pub struct RatisMetrics {
    labels: String,
    state_machine_entries: AtomicU64,
    metadata_entries: AtomicU64,
    failed_writes: AtomicU64,
    pending_writes: AtomicI64,
    applied_index: AtomicU64,
}

/// The group's configuration entry, index 0 of every group's log.
const CONFIG_ENTRIES: u64 = 1;

impl RatisMetrics {
    /// The metrics of `group` on the DataNode `datanode_uuid`.
    pub fn new(group: uuid::Uuid, datanode_uuid: &str) -> Self {
        let hex = group.simple().to_string().to_uppercase();
        Self {
            labels: format!(
                "{{instance=\"{datanode_uuid}\",group=\"group-{}\",}}",
                &hex[20..]
            ),
            state_machine_entries: AtomicU64::new(0),
            metadata_entries: AtomicU64::new(0),
            failed_writes: AtomicU64::new(0),
            pending_writes: AtomicI64::new(0),
            applied_index: AtomicU64::new(0),
        }
    }

    pub fn appended(&self, entry: Entry) {
        match entry {
            Entry::StateMachine => &self.state_machine_entries,
            Entry::Metadata => &self.metadata_entries,
        }
        .fetch_add(1, Relaxed);
    }

    pub fn write_failed(&self) {
        self.failed_writes.fetch_add(1, Relaxed);
    }

    pub fn pending_write(&self, delta: i64) {
        self.pending_writes.fetch_add(delta, Relaxed);
    }

    pub fn applied(&self, index: u64) {
        self.applied_index.fetch_max(index, Relaxed);
    }

    /// Hands every series to `put(name, type, labels, value)`.
    pub fn render_into(&self, put: &mut dyn FnMut(String, &'static str, String, String)) {
        let sm = self.state_machine_entries.load(Relaxed);
        let metadata = self.metadata_entries.load(Relaxed);
        let series: [(&str, f64); 9] = [
            (
                "ratis_log_worker_appendEntryCount",
                (sm + metadata + CONFIG_ENTRIES) as f64,
            ),
            ("ratis_log_worker_stateMachineLogEntryCount", sm as f64),
            ("ratis_log_worker_metadataLogEntryCount", metadata as f64),
            (
                "ratis_log_worker_configLogEntryCount",
                CONFIG_ENTRIES as f64,
            ),
            (
                "ratis_server_numFailedClientWriteOnServer",
                self.failed_writes.load(Relaxed) as f64,
            ),
            ("ratis_server_numFailedClientReadOnServer", 0.0),
            ("ratis_server_numFailedClientWatchOnServer", 0.0),
            (
                "ratis_server_numPendingRequestInQueue",
                self.pending_writes.load(Relaxed).max(0) as f64,
            ),
            (
                "ratis_state_machine_appliedIndex",
                self.applied_index.load(Relaxed) as f64,
            ),
        ];
        for (name, value) in series {
            put(
                name.into(),
                "gauge",
                self.labels.clone(),
                java_double(value),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_as_a_real_datanode_renders_them() {
        let m = RatisMetrics::new(
            uuid::Uuid::parse_str("c4f4b7cb-f9f1-4d00-bbbc-604370539351").unwrap(),
            "56b9cf4f-8d9f-4cac-abbb-ae003ef1bfc8",
        );
        for _ in 0..3 {
            m.appended(Entry::StateMachine);
        }
        m.appended(Entry::Metadata);
        m.write_failed();
        m.applied(5);
        m.applied(4);
        let mut lines = Vec::new();
        m.render_into(&mut |name, kind, labels, value| {
            lines.push(format!("{kind} {name}{labels} {value}"))
        });
        // The label layout and the value format of a real 2.2.0 DataNode's line.
        assert!(lines.contains(&"gauge ratis_log_worker_appendEntryCount{instance=\"56b9cf4f-8d9f-4cac-abbb-ae003ef1bfc8\",group=\"group-604370539351\",} 5.0".to_string()), "{lines:?}");
        assert!(lines.iter().any(|l| {
            l.starts_with("gauge ratis_server_numFailedClientWriteOnServer{") && l.ends_with(" 1.0")
        }));
        assert!(lines.iter().any(
            |l| l.starts_with("gauge ratis_state_machine_appliedIndex{") && l.ends_with(" 5.0")
        ));
    }
}

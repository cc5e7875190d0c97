//! Ratis's own metrics of a Raft group, as a real DataNode exports them on `/prom` (Ratis 3.2.1's
//! Dropwizard registries through Ozone 2.2.0's exporter, read off a real DataNode's `/prom`):
//! `ratis_<registry>_<name>{instance="<DataNode UUID>",group="group-XXXXXXXXXXXX",}` (the
//! trailing comma is the exporter's), every Dropwizard counter and gauge typed `gauge`, values
//! as Java prints a double. The counts dn-sim keeps, as Ratis counts them:
//! - `ratis_log_worker_appendEntryCount`: every entry appended to the log, of which
//!   `stateMachineLogEntryCount` (the writes), `metadataLogEntryCount` (a commit index that rose)
//!   and `configLogEntryCount` (the group's configuration: one, at the group's start);
//! - `ratis_server_numFailedClient{Write,Read,StaleRead,Watch}OnServer`: calls of a hosted group
//!   answered with an exception or ended by one (`RaftServerImpl.incFailedRequestCount`);
//!   `…Stream…` and `numInstallSnapshot` stay 0 (no streams, no followers);
//! - `ratis_server_numPendingRequestInQueue`: writes between arrival and reply;
//! - `ratis_server_retryCache{Hit,Miss}Count` and `…Rate` (Guava's cache statistics): a first
//!   write misses the cache and hits it again when its entry is applied
//!   (`replyPendingRequest`); a retry hits it once, or twice when the entry it finds failed
//!   (`queryCache` looks again before it replaces the entry);
//! - `ratis_state_machine_appliedIndex`, `…applyCompletedIndex` and
//!   `ratis_server_peerCommitIndex{…,follower="<DataNode UUID>",}`: the last index applied, which
//!   in a one-node group is its commit index.
//!
//! And Ratis's timers of client calls (`RaftServerMetricsImpl`), from a call's arrival at its
//! group to its reply, as Dropwizard summaries of seconds ([`Timer`]):
//! `ratis_server_clientWriteRequest`, `…clientReadRequest`, `…clientStaleReadRequest`, and a
//! watch's by its replication level, `…clientWatchRequest` (MAJORITY),
//! `…clientWatch_ALLRequest`, `…clientWatch_MAJORITY_COMMITTEDRequest`,
//! `…clientWatch_ALL_COMMITTEDRequest` (and `…clientWatch_UNRECOGNIZEDRequest`, Java's enum's
//! extra value, always empty).
//!
//! And, when a profile models the group's log worker (`[ratis.log]`, `sim::raft::LogWorker`),
//! `ratis_log_worker_flushCount`: the flushes it made (without that model dn-sim has no flushes
//! to count, and leaves the series out).
//!
//! Not kept: the log worker's timers and batch sizes, the retry cache's entry count (Ratis's
//! entries leave as clients report replies received; dn-sim's cache is bounded by count), leader
//! election and follower series.

use crate::datanode::dropwizard::Timer;
use crate::datanode::prom_text::java_double;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Which kind of log entry was appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    StateMachine,
    Metadata,
}

/// A client call of a group, as Ratis times and counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Write,
    Read,
    StaleRead,
    /// A watch with its `ReplicationLevel` number (MAJORITY 0, ALL 1, MAJORITY_COMMITTED 2,
    /// ALL_COMMITTED 3; another number is Java's UNRECOGNIZED).
    Watch(i32),
}

/// The timers' names, in [`Call::slot`] order.
const TIMERS: [&str; 8] = [
    "ratis_server_clientWriteRequest",
    "ratis_server_clientReadRequest",
    "ratis_server_clientStaleReadRequest",
    "ratis_server_clientWatchRequest",
    "ratis_server_clientWatch_ALLRequest",
    "ratis_server_clientWatch_MAJORITY_COMMITTEDRequest",
    "ratis_server_clientWatch_ALL_COMMITTEDRequest",
    "ratis_server_clientWatch_UNRECOGNIZEDRequest",
];

impl Call {
    fn slot(self) -> usize {
        match self {
            Call::Write => 0,
            Call::Read => 1,
            Call::StaleRead => 2,
            Call::Watch(level @ 0..=3) => 3 + level as usize,
            Call::Watch(_) => 7,
        }
    }

    /// The `numFailedClient…OnServer` counter of the call.
    fn failed_slot(self) -> usize {
        match self {
            Call::Write => 0,
            Call::Read => 1,
            Call::StaleRead => 2,
            Call::Watch(_) => 3,
        }
    }
}

pub struct RatisMetrics {
    labels: String,
    /// `labels` with the `follower` of `peerCommitIndex` (the DataNode itself).
    follower_labels: String,
    state_machine_entries: AtomicU64,
    metadata_entries: AtomicU64,
    /// Write, Read, StaleRead, Watch.
    failed: [AtomicU64; 4],
    pending_writes: AtomicI64,
    applied_index: AtomicU64,
    retry_hits: AtomicU64,
    retry_misses: AtomicU64,
    /// The group's log closed after a failure: its registry (`ratis_log_worker_*`) is gone.
    log_closed: std::sync::atomic::AtomicBool,
    /// A log worker is modelled: `flushes` is served.
    log_worker: std::sync::atomic::AtomicBool,
    flushes: AtomicU64,
    timers: [Timer; 8],
}

/// The group's configuration entry, index 0 of every group's log.
const CONFIG_ENTRIES: u64 = 1;

impl RatisMetrics {
    /// The metrics of `group` on the DataNode `datanode_uuid`.
    pub fn new(group: uuid::Uuid, datanode_uuid: &str) -> Self {
        let hex = group.simple().to_string().to_uppercase();
        let labels = format!(
            "{{instance=\"{datanode_uuid}\",group=\"group-{}\",",
            &hex[20..]
        );
        Self {
            follower_labels: format!("{labels}follower=\"{datanode_uuid}\",}}"),
            labels: format!("{labels}}}"),
            state_machine_entries: AtomicU64::new(0),
            metadata_entries: AtomicU64::new(0),
            failed: Default::default(),
            pending_writes: AtomicI64::new(0),
            applied_index: AtomicU64::new(0),
            retry_hits: AtomicU64::new(0),
            retry_misses: AtomicU64::new(0),
            log_closed: Default::default(),
            log_worker: Default::default(),
            flushes: AtomicU64::new(0),
            timers: Default::default(),
        }
    }

    /// A call of the group ended after `elapsed`, `failed` if with an exception.
    pub fn call(&self, call: Call, elapsed: Duration, failed: bool) {
        self.timers[call.slot()].update(elapsed);
        if failed {
            self.failed[call.failed_slot()].fetch_add(1, Relaxed);
        }
    }

    /// A retry-cache lookup that found the call (`hit`) or made its entry.
    pub fn retry_cache_lookup(&self, hit: bool) {
        if hit {
            &self.retry_hits
        } else {
            &self.retry_misses
        }
        .fetch_add(1, Relaxed);
    }

    pub fn appended(&self, entry: Entry) {
        match entry {
            Entry::StateMachine => &self.state_machine_entries,
            Entry::Metadata => &self.metadata_entries,
        }
        .fetch_add(1, Relaxed);
    }

    /// The group's log has a modelled worker, whose flushes are counted from now.
    pub fn log_worker_modelled(&self) {
        self.log_worker.store(true, Relaxed);
    }

    /// The log worker made a flush.
    pub fn flushed(&self) {
        self.flushes.fetch_add(1, Relaxed);
    }

    /// The log worker's flushes so far.
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(Relaxed)
    }

    /// The group's log closed: Ratis unregisters its log worker's metrics.
    pub fn log_closed(&self) {
        self.log_closed.store(true, Relaxed);
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
        let hits = self.retry_hits.load(Relaxed) as f64;
        let misses = self.retry_misses.load(Relaxed) as f64;
        let lookups = hits + misses;
        let applied = self.applied_index.load(Relaxed) as f64;
        let failed = |i: usize| self.failed[i].load(Relaxed) as f64;
        let series: [(&str, f64); 17] = [
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
            ("ratis_server_numFailedClientWriteOnServer", failed(0)),
            ("ratis_server_numFailedClientReadOnServer", failed(1)),
            ("ratis_server_numFailedClientStaleReadOnServer", failed(2)),
            ("ratis_server_numFailedClientWatchOnServer", failed(3)),
            ("ratis_server_numFailedClientStreamOnServer", 0.0),
            ("ratis_server_numInstallSnapshot", 0.0),
            ("ratis_server_retryCacheHitCount", hits),
            ("ratis_server_retryCacheMissCount", misses),
            // Guava's CacheStats: a hit rate of 1 and a miss rate of 0 before any lookup.
            (
                "ratis_server_retryCacheHitRate",
                if lookups == 0.0 { 1.0 } else { hits / lookups },
            ),
            (
                "ratis_server_retryCacheMissRate",
                if lookups == 0.0 {
                    0.0
                } else {
                    misses / lookups
                },
            ),
            (
                "ratis_server_numPendingRequestInQueue",
                self.pending_writes.load(Relaxed).max(0) as f64,
            ),
            ("ratis_state_machine_appliedIndex", applied),
            ("ratis_state_machine_applyCompletedIndex", applied),
        ];
        let log_closed = self.log_closed.load(Relaxed);
        for (name, value) in series {
            if log_closed && name.starts_with("ratis_log_worker_") {
                continue;
            }
            put(
                name.into(),
                "gauge",
                self.labels.clone(),
                java_double(value),
            );
        }
        // A Dropwizard counter of the log worker's registry, as appendEntryCount is.
        if self.log_worker.load(Relaxed) && !log_closed {
            put(
                "ratis_log_worker_flushCount".into(),
                "gauge",
                self.labels.clone(),
                java_double(self.flush_count() as f64),
            );
        }
        put(
            "ratis_server_peerCommitIndex".into(),
            "gauge",
            self.follower_labels.clone(),
            java_double(applied),
        );
        for (timer, name) in self.timers.iter().zip(TIMERS) {
            timer.render_into(name, &self.labels, put);
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
        m.call(Call::Write, Duration::from_millis(3), true);
        m.call(Call::Watch(3), Duration::from_millis(7), false);
        m.retry_cache_lookup(false);
        m.retry_cache_lookup(true);
        m.retry_cache_lookup(true);
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
        let has = |line: &str| lines.iter().any(|l| l == line);
        let labels =
            "instance=\"56b9cf4f-8d9f-4cac-abbb-ae003ef1bfc8\",group=\"group-604370539351\",";
        assert!(
            has(&format!(
                "gauge ratis_server_peerCommitIndex{{{labels}follower=\"56b9cf4f-8d9f-4cac-abbb-ae003ef1bfc8\",}} 5.0"
            )),
            "{lines:?}"
        );
        assert!(has(&format!(
            "gauge ratis_server_retryCacheHitRate{{{labels}}} 0.6666666666666666"
        )));
        assert!(has(&format!(
            "summary ratis_server_clientWriteRequest{{quantile=\"0.5\",{labels}}} 0.003"
        )));
        assert!(has(&format!(
            "summary ratis_server_clientWatch_ALL_COMMITTEDRequest_count{{{labels}}} 1.0"
        )));
        assert!(has(&format!(
            "summary ratis_server_clientWatchRequest_count{{{labels}}} 0.0"
        )));
        assert!(has(&format!(
            "gauge ratis_server_numFailedClientWatchOnServer{{{labels}}} 0.0"
        )));
    }
}

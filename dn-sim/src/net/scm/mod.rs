//! dn-sim as a DataNode of a real Ozone cluster (`--scm HOST:PORT`): a client of SCM's DataNode
//! port (Hadoop RPC, `StorageContainerDatanodeProtocol`) that registers the node and heartbeats
//! with its reports. [`rpc`] is one connection (the codec is `common::hrpc`), [`reports`] builds
//! what the DataNode tells SCM from the store, [`endpoint`] is the conversation and the commands.

pub mod endpoint;
pub mod reports;
pub mod rpc;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

/// How to reach SCM and how often to talk to it.
#[derive(Clone, Debug)]
pub struct ScmConfig {
    /// SCM's DataNode port, `HOST:PORT` (`--scm`, or `ozone.scm.names` with
    /// `ozone.scm.datanode.port`).
    pub address: String,
    /// `hdds.heartbeat.interval` (30 s).
    pub heartbeat_interval: Duration,
    /// `hdds.container.report.interval` (60 min): how often a heartbeat carries a full container
    /// report; the ones between carry incremental reports of what changed.
    pub container_report_interval: Duration,
    /// How long a call to SCM may take before the connection is given up.
    pub rpc_timeout: Duration,
    /// The host name the node registers with (SCM replaces it with the name of the address the
    /// call came from).
    pub hostname: String,
}

impl ScmConfig {
    pub fn new(address: String) -> Self {
        Self {
            address,
            heartbeat_interval: common::scm::DEFAULT_HEARTBEAT_INTERVAL,
            container_report_interval: Duration::from_secs(3600),
            rpc_timeout: Duration::from_secs(15),
            hostname: default_hostname(),
        }
    }
}

/// The machine's host name (Linux's), else `localhost`.
pub fn default_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The DataNode's UUID kept in `DIR/datanode.id` (a line `uuid: UUID`, as the `uuid` of a real
/// DataNode's YAML `datanode.id`): read when there, else made at random and written (DIR is
/// created if needed), so a restarted dn-sim with the same `--store dir:` is the same node to SCM.
pub fn persisted_uuid(dir: &std::path::Path) -> std::io::Result<String> {
    let path = dir.join("datanode.id");
    match std::fs::read_to_string(&path) {
        Ok(text) => text
            .lines()
            .find_map(|l| l.trim().strip_prefix("uuid:"))
            .map(str::trim)
            .and_then(|u| u.parse::<uuid::Uuid>().ok())
            .map(|u| u.to_string())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} has no `uuid: UUID` line", path.display()),
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            let uuid = uuid::Uuid::new_v4().to_string();
            let tmp = dir.join("datanode.id.tmp");
            std::fs::write(&tmp, format!("uuid: {uuid}\n"))?;
            std::fs::rename(&tmp, &path)?;
            Ok(uuid)
        }
        Err(e) => Err(e),
    }
}

/// What the endpoint has done, for tests and logs.
#[derive(Debug, Default)]
pub struct ScmStatus {
    /// Registered and heartbeating.
    pub registered: AtomicBool,
    /// Successful registrations (more than one: SCM asked again).
    pub registrations: AtomicU64,
    /// Heartbeats SCM answered.
    pub heartbeats: AtomicU64,
    /// Commands SCM sent.
    pub commands: AtomicU64,
    /// Commands dn-sim does not execute (listed in docs/deviations.md).
    pub not_executed: AtomicU64,
    /// Connections that ended in an error.
    pub failures: AtomicU64,
}

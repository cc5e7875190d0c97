//! What a DataNode tells SCM about itself, built from dn-sim's configuration and store the way
//! Ozone 2.2.0's DataNode builds it: `DatanodeDetailsProto` (`DatanodeDetails.toProtoBuilder`),
//! the node report (`StorageReportProto` per volume, `MetadataStorageReportProto`), container
//! replicas (`KeyValueContainer.getContainerReport`) and incremental reports of what changed.

use crate::datanode::store::Container;
use crate::datanode::store::ContainerStore;
use common::proto::container_data_proto::State as StoreState;
use common::scm::proto::{
    ContainerReplicaProto, ContainerReportsProto, DatanodeDetailsProto, DatanodeIdProto,
    ExtendedDatanodeDetailsProto, IncrementalContainerReportProto, LayoutVersionProto,
    MetadataStorageReportProto, NodeOperationalState, NodeReportProto, Port, StorageReportProto,
    StorageTypeProto, Uuid as UuidProto, container_replica_proto::State as ReplicaState,
};
use std::collections::HashMap;

/// `DatanodeVersion.CURRENT` of Ozone 2.2.0 (`STREAM_BLOCK_SUPPORT`): what clients read as the
/// node's wire version (ReadBlock streaming, PutBlock piggybacked on WriteChunk).
pub const DATANODE_CURRENT_VERSION: i32 = 3;

/// Who the DataNode is: its UUID, names and the ports it serves.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    pub uuid: uuid::Uuid,
    pub hostname: String,
    pub ip_address: String,
    /// (`DatanodeDetails.Port.Name`, port), the ports actually bound.
    pub ports: Vec<(&'static str, u16)>,
    /// The release the node says it runs (`ExtendedDatanodeDetailsProto.version`).
    pub version: &'static str,
    /// When the node started, ms since the epoch (`setupTime`).
    pub setup_time_ms: i64,
    /// How many volumes the node reports (`--volumes`); capacity is split evenly among them.
    pub volumes: u32,
    /// SCM's name for the node in its topology (its UUID) and its rack, from the registration.
    pub network_name: Option<String>,
    pub network_location: Option<String>,
}

impl NodeIdentity {
    /// `DatanodeDetailsProto`: the UUID three ways (string, `uuid128`, `id`), address, ports,
    /// operational state and wire version.
    /// Takes the names SCM registered the node with (`SCMRegisteredResponseProto`), as a real
    /// DataNode does before its first heartbeat.
    pub fn adopt(
        &mut self,
        hostname: Option<&str>,
        ip_address: Option<&str>,
        network_name: Option<&str>,
        network_location: Option<&str>,
    ) {
        let given = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_owned);
        if let Some(h) = given(hostname) {
            self.hostname = h;
        }
        if let Some(ip) = given(ip_address) {
            self.ip_address = ip;
        }
        if let Some(n) = given(network_name) {
            self.network_name = Some(n);
        }
        if let Some(l) = given(network_location) {
            self.network_location = Some(l);
        }
    }

    pub fn details(
        &self,
        op_state: Option<NodeOperationalState>,
        op_expiry: i64,
    ) -> DatanodeDetailsProto {
        let (msb, lsb) = self.uuid.as_u64_pair();
        let uuid = UuidProto {
            most_sig_bits: msb as i64,
            least_sig_bits: lsb as i64,
        };
        DatanodeDetailsProto {
            uuid: Some(self.uuid.to_string()),
            ip_address: self.ip_address.clone(),
            host_name: self.hostname.clone(),
            ports: self
                .ports
                .iter()
                .map(|&(name, value)| Port {
                    name: name.to_owned(),
                    value: value.into(),
                })
                .collect(),
            network_name: self.network_name.clone(),
            network_location: self.network_location.clone(),
            persisted_op_state: op_state.map(|s| s as i32),
            persisted_op_state_expiry: Some(op_expiry),
            current_version: Some(DATANODE_CURRENT_VERSION),
            uuid128: Some(uuid),
            id: Some(DatanodeIdProto { uuid }),
            ..Default::default()
        }
    }

    /// What Register carries: the details plus the release and start time.
    pub fn extended(&self) -> ExtendedDatanodeDetailsProto {
        ExtendedDatanodeDetailsProto {
            datanode_details: self.details(None, 0),
            version: Some(self.version.to_owned()),
            setup_time: Some(self.setup_time_ms),
            revision: Some("dn-sim".to_owned()),
            build_date: None,
        }
    }

    /// The node report: one storage report per volume (the store's capacity and use split
    /// evenly), one metadata volume (the store's metadata account).
    pub fn node_report(&self, store: &ContainerStore) -> NodeReportProto {
        let volumes = u64::from(self.volumes.max(1));
        let capacity = store.capacity() / volumes;
        let used = (store.used() / volumes).min(capacity);
        let location = |what: &str, i: u64| match store.kind() {
            crate::datanode::store::StoreKind::Dir(_) => {
                format!("{}/{what}{i}", store.root().display())
            }
            kind => format!("/dn-sim/{kind}/{what}{i}"),
        };
        let storage_report = (0..volumes)
            .map(|i| StorageReportProto {
                // Stable per node and volume, as a real volume's storage ID is.
                storage_uuid: format!(
                    "DS-{}",
                    uuid::Uuid::from_u128(self.uuid.as_u128().wrapping_add(i as u128 + 1))
                ),
                storage_location: location("hdds", i),
                capacity: Some(capacity),
                scm_used: Some(used),
                remaining: Some(capacity - used),
                storage_type: Some(StorageTypeProto::Disk as i32),
                failed: Some(false),
                committed: Some(0),
                free_space_to_spare: Some(0),
                reserved: Some(0),
                fs_capacity: Some(capacity),
                fs_available: Some(capacity - used),
            })
            .collect();
        let meta_capacity = store.metadata_capacity();
        let meta_used = store.metadata_used().min(meta_capacity);
        NodeReportProto {
            storage_report,
            metadata_storage_report: vec![MetadataStorageReportProto {
                storage_location: location("metadata", 0),
                storage_type: Some(StorageTypeProto::Disk as i32),
                capacity: Some(meta_capacity),
                scm_used: Some(meta_used),
                remaining: Some(meta_capacity - meta_used),
                failed: Some(false),
            }],
            db_storage_report: vec![],
        }
    }
}

/// The DataNode's layout: software and metadata both at Ozone 2.2.0's latest (a finalized node).
pub fn layout_version() -> LayoutVersionProto {
    LayoutVersionProto {
        metadata_layout_version: common::scm::LAYOUT_VERSION,
        software_layout_version: common::scm::LAYOUT_VERSION,
    }
}

/// A replica as a container report lists it; `None` for states the DataNode does not report
/// (RECOVERING: an EC reconstruction's target still being written).
pub fn replica(container: &Container, origin: &str) -> Option<ContainerReplicaProto> {
    let state = match container.state() {
        StoreState::Open => ReplicaState::Open,
        StoreState::Closing => ReplicaState::Closing,
        StoreState::QuasiClosed => ReplicaState::QuasiClosed,
        StoreState::Closed => ReplicaState::Closed,
        StoreState::Unhealthy => ReplicaState::Unhealthy,
        StoreState::Invalid => ReplicaState::Invalid,
        StoreState::Deleted => ReplicaState::Deleted,
        StoreState::Recovering => return None,
    };
    Some(ContainerReplicaProto {
        container_id: container.id(),
        state: state as i32,
        used: Some(container.bytes_used() as i64),
        key_count: Some(container.block_count() as i64),
        read_count: Some(0),
        write_count: Some(0),
        read_bytes: Some(0),
        write_bytes: Some(0),
        delete_transaction_id: Some(container.delete_transaction_id()),
        block_commit_sequence_id: Some(container.bcs_id()),
        origin_node_id: Some(origin.to_owned()),
        replica_index: Some(container.replica_index()),
        is_empty: Some(container.is_empty()),
        ..Default::default()
    })
}

/// What SCM last heard of each container, to send only what changed in incremental reports.
#[derive(Default)]
pub struct ReportedReplicas {
    last: HashMap<i64, ContainerReplicaProto>,
}

impl ReportedReplicas {
    /// A full container report of every container; what it says becomes the last reported.
    pub fn full(&mut self, store: &ContainerStore, origin: &str) -> ContainerReportsProto {
        self.last.clear();
        let reports: Vec<_> = store
            .containers()
            .iter()
            .filter_map(|c| replica(c, origin))
            .collect();
        for r in &reports {
            self.last.insert(r.container_id, r.clone());
        }
        ContainerReportsProto { reports }
    }

    /// The replicas that changed since the last report (new, different, or gone: DELETED), as
    /// one incremental report; `None` when nothing changed.
    pub fn incremental(
        &mut self,
        store: &ContainerStore,
        origin: &str,
    ) -> Option<IncrementalContainerReportProto> {
        let mut changed = Vec::new();
        let mut seen = std::collections::HashSet::with_capacity(self.last.len());
        for c in store.containers() {
            let Some(r) = replica(&c, origin) else {
                continue;
            };
            seen.insert(r.container_id);
            if self.last.get(&r.container_id) != Some(&r) {
                self.last.insert(r.container_id, r.clone());
                changed.push(r);
            }
        }
        let gone: Vec<i64> = self
            .last
            .keys()
            .filter(|id| !seen.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(mut r) = self.last.remove(&id) {
                r.state = ReplicaState::Deleted as i32;
                changed.push(r);
            }
        }
        (!changed.is_empty()).then_some(IncrementalContainerReportProto { report: changed })
    }
}

/// The pipeline report (`XceiverServerRatis.getPipelineReport`): each group SCM created, and
/// whether this DataNode leads it.
pub fn pipeline_reports(
    reports: &[crate::net::raft_groups::GroupReport],
) -> common::scm::proto::PipelineReportsProto {
    common::scm::proto::PipelineReportsProto {
        pipeline_report: reports
            .iter()
            .map(|r| {
                #[allow(deprecated)] // (bytesWritten: left out, as the DataNode leaves it.)
                common::scm::proto::PipelineReport {
                    pipeline_id: pipeline_id_proto(r.group),
                    is_leader: r.is_leader,
                    bytes_written: None,
                }
            })
            .collect(),
    }
}

/// The pipeline actions (`XceiverServerRatis.triggerPipelineClose`): CLOSE for each group in
/// `reports` that failed and is not in `sent` (a DataNode asks once per pipeline while its close
/// is in progress); the groups asked about are added to `sent`.
pub fn pipeline_actions(
    reports: &[crate::net::raft_groups::GroupReport],
    sent: &mut std::collections::HashSet<uuid::Uuid>,
    datanode: uuid::Uuid,
) -> Option<common::scm::proto::PipelineActionsProto> {
    use crate::net::raft_groups::GroupFailure;
    use common::scm::proto::close_pipeline_info::Reason;
    use common::scm::proto::{ClosePipelineInfo, PipelineAction, pipeline_action::Action};
    let actions: Vec<PipelineAction> = reports
        .iter()
        .filter_map(|r| Some((r, r.failure?)))
        .filter(|(r, _)| sent.insert(r.group))
        .map(|(r, failure)| {
            let role = if r.is_leader { "LEADER" } else { "FOLLOWER" };
            let (reason, detail) = match failure {
                GroupFailure::ApplyTransaction => (
                    Reason::StatemachineTransactionFailed,
                    format!(
                        "Ratis Transaction failure in datanode {datanode} with role {role} \
                         .Triggering pipeline close action."
                    ),
                ),
                GroupFailure::Log => (
                    Reason::PipelineLogFailed,
                    "the chunk data of a log entry could not be written".to_owned(),
                ),
            };
            PipelineAction {
                action: Action::Close as i32,
                close_pipeline: Some(ClosePipelineInfo {
                    pipeline_id: pipeline_id_proto(r.group),
                    reason: Some(reason as i32),
                    detailed_reason: Some(detail),
                }),
            }
        })
        .collect();
    (!actions.is_empty()).then_some(common::scm::proto::PipelineActionsProto {
        pipeline_actions: actions,
    })
}

/// `PipelineID.getProtobuf`: the UUID as a string and as two longs.
pub fn pipeline_id_proto(id: uuid::Uuid) -> common::scm::proto::PipelineId {
    let (msb, lsb) = id.as_u64_pair();
    common::scm::proto::PipelineId {
        id: Some(id.to_string()),
        uuid128: Some(UuidProto {
            most_sig_bits: msb as i64,
            least_sig_bits: lsb as i64,
        }),
    }
}

/// The UUID a `PipelineID` names (`uuid128`, else the string form).
pub fn pipeline_uuid(id: &common::scm::proto::PipelineId) -> Option<uuid::Uuid> {
    match (&id.uuid128, &id.id) {
        (Some(u), _) => Some(uuid::Uuid::from_u64_pair(
            u.most_sig_bits as u64,
            u.least_sig_bits as u64,
        )),
        (None, Some(s)) => s.parse().ok(),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datanode::store::StoreKind;

    fn identity() -> NodeIdentity {
        NodeIdentity {
            uuid: uuid::Uuid::from_u128(0x1234),
            hostname: "h".into(),
            ip_address: "127.0.0.1".into(),
            ports: vec![("STANDALONE", 9859), ("RATIS", 9858)],
            version: "2.2.0",
            setup_time_ms: 1,
            volumes: 2,
            network_name: None,
            network_location: None,
        }
    }

    #[test]
    fn details_carry_the_uuid_three_ways() {
        let d = identity().details(None, 0);
        assert_eq!(d.persisted_op_state, None);
        assert_eq!(
            d.uuid.as_deref(),
            Some("00000000-0000-0000-0000-000000001234")
        );
        assert_eq!(d.uuid128.unwrap().least_sig_bits, 0x1234);
        assert_eq!(d.id.unwrap().uuid.most_sig_bits, 0);
        assert_eq!(d.ports.len(), 2);
        assert_eq!(d.current_version, Some(3));
    }

    #[test]
    fn node_report_splits_capacity_over_volumes() {
        let store = ContainerStore::new(StoreKind::Memory, 10 << 30, None).unwrap();
        let r = identity().node_report(&store);
        assert_eq!(r.storage_report.len(), 2);
        assert_eq!(r.storage_report[0].capacity, Some(5 << 30));
        assert_eq!(r.storage_report[0].remaining, Some(5 << 30));
        assert_ne!(
            r.storage_report[0].storage_uuid,
            r.storage_report[1].storage_uuid
        );
        assert_eq!(r.metadata_storage_report.len(), 1);
    }

    #[test]
    fn incremental_reports_only_changes_and_deletions() {
        let store = ContainerStore::in_memory();
        store.get_or_create(1);
        store.get_or_create(2);
        let mut reported = ReportedReplicas::default();
        assert_eq!(reported.full(&store, "dn").reports.len(), 2);
        assert!(reported.incremental(&store, "dn").is_none());
        store.get(2).unwrap().close("dn").unwrap();
        store.get_or_create(3);
        let icr = reported.incremental(&store, "dn").unwrap();
        let ids: Vec<_> = icr
            .report
            .iter()
            .map(|r| (r.container_id, r.state))
            .collect();
        assert_eq!(
            ids,
            vec![
                (2, ReplicaState::Closed as i32),
                (3, ReplicaState::Open as i32)
            ]
        );
        assert!(store.remove(1));
        let icr = reported.incremental(&store, "dn").unwrap();
        assert_eq!(icr.report.len(), 1);
        assert_eq!(icr.report[0].container_id, 1);
        assert_eq!(icr.report[0].state, ReplicaState::Deleted as i32);
        assert!(reported.incremental(&store, "dn").is_none());
    }
}

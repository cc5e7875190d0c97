//! The Raft groups (pipelines) the Ratis port hosts: the one-node groups given at start
//! (`--pipeline-id`) and the groups SCM creates with `createPipelineCommand` and removes with
//! `closePipelineCommand` (Ozone 2.2.0's `CreatePipelineCommandHandler`,
//! `ClosePipelineCommandHandler`). A request looks its group up without a lock (an [`ArcSwap`]
//! of the map); SCM's commands, rare, replace the map whole under a mutex of their own.
//!
//! Of a group SCM creates, dn-sim keeps who its members are and who leads: the member with the
//! highest priority in the command (SCM gives its suggested leader the higher one), the first of
//! the list on a tie. The leader answers clients; the others answer with `NotLeaderException`
//! naming it, as Ratis followers do. There is no Raft between DataNodes: the leader commits alone
//! and the followers store nothing (docs/deviations.md).

use crate::datanode::state_machine::ContainerStateMachine;
use crate::sim::admission::Admission;
use crate::sim::raft::{GroupExecutors, RaftModel};
use arc_swap::ArcSwap;
use common::ratis::proto::common::RaftPeerProto;
use common::scm::proto::DatanodeDetailsProto;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A hosted group: its state machine and the executors its commands are applied on.
pub struct Group {
    pub sm: Arc<ContainerStateMachine>,
    pub executors: GroupExecutors,
    /// Created by SCM (and so reported to it in pipeline reports), not given at start.
    pub from_scm: bool,
    /// The order groups were added in (`groupList` lists them so).
    added: u64,
}

/// What a pipeline report says of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupReport {
    pub group: uuid::Uuid,
    pub is_leader: bool,
    /// Why the DataNode asks SCM to close the pipeline, if it does: an apply failed, or a
    /// chunk write failed and closed the log.
    pub failure: Option<GroupFailure>,
}

/// A failure after which a DataNode asks SCM to close the pipeline (`XceiverServerRatis
/// .handleApplyTransactionFailure`, `.handleNodeLogFailure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupFailure {
    ApplyTransaction,
    Log,
}

/// Why `createPipelineCommand` added nothing.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddError {
    #[error("pipeline {0} is already hosted")]
    Exists(uuid::Uuid),
    #[error("pipeline {0} does not name this DataNode among its members")]
    NotAMember(uuid::Uuid),
    #[error("pipeline {group}: member {index} has no UUID")]
    NoUuid { group: uuid::Uuid, index: usize },
    #[error("pipeline {0}: the priorities do not match the members")]
    Priorities(uuid::Uuid),
}

pub struct RaftGroups {
    map: ArcSwap<HashMap<uuid::Uuid, Arc<Group>>>,
    /// Serialises SCM's changes (a read-copy-update of `map`); requests never take it.
    changes: Mutex<u64>,
    raft: Arc<RaftModel>,
    admission: Arc<Admission>,
    /// This DataNode's UUID (its Raft peer id) and Ratis address.
    datanode_uuid: String,
    address: String,
}

impl RaftGroups {
    /// The groups `pipelines` (one node each) of the DataNode `datanode_uuid` whose Ratis port
    /// is `address`; their metrics are rendered with the DataNode's.
    pub fn new(
        pipelines: &[uuid::Uuid],
        datanode_uuid: &str,
        address: String,
        raft: Arc<RaftModel>,
        admission: Arc<Admission>,
    ) -> Self {
        let groups = Self {
            map: ArcSwap::from_pointee(HashMap::new()),
            changes: Mutex::new(0),
            raft,
            admission,
            datanode_uuid: datanode_uuid.to_owned(),
            address,
        };
        for &id in pipelines {
            let sm = ContainerStateMachine::new(id, datanode_uuid, groups.address.clone());
            // (Distinct ids: `--pipeline-id` given twice is one group.)
            let _ = groups.insert(sm, false);
        }
        groups
    }

    /// The group `id`, if hosted.
    pub fn get(&self, id: &uuid::Uuid) -> Option<Arc<Group>> {
        self.map.load().get(id).cloned()
    }

    /// Every hosted group's state machine, in the order they were added.
    pub fn machines(&self) -> Vec<Arc<ContainerStateMachine>> {
        let map = self.map.load();
        let mut groups: Vec<&Arc<Group>> = map.values().collect();
        groups.sort_by_key(|g| g.added);
        groups.iter().map(|g| Arc::clone(&g.sm)).collect()
    }

    /// The groups SCM created, as a pipeline report lists them (`XceiverServerRatis
    /// .getPipelineReport`).
    pub fn reports(&self) -> Vec<GroupReport> {
        let mut reports: Vec<GroupReport> = self
            .map
            .load()
            .values()
            .filter(|g| g.from_scm)
            .map(|g| GroupReport {
                group: g.sm.group(),
                is_leader: g.sm.leader().is_none(),
                failure: if g.sm.log_open().is_err() {
                    Some(GroupFailure::Log)
                } else if !g.sm.is_healthy() {
                    Some(GroupFailure::ApplyTransaction)
                } else {
                    None
                },
            })
            .collect();
        reports.sort_by_key(|r| r.group);
        reports
    }

    /// `createPipelineCommand`: hosts the group `id` with the members `nodes` (SCM's
    /// `DatanodeDetailsProto`s, this DataNode among them) and their `priorities` (empty, or one
    /// per member).
    pub fn add_from_scm(
        &self,
        id: uuid::Uuid,
        nodes: &[DatanodeDetailsProto],
        priorities: &[i32],
    ) -> Result<(), AddError> {
        if !priorities.is_empty() && priorities.len() != nodes.len() {
            return Err(AddError::Priorities(id));
        }
        let mut peers = Vec::with_capacity(nodes.len());
        for (index, node) in nodes.iter().enumerate() {
            let priority = priorities.get(index).copied().unwrap_or(0);
            peers.push(raft_peer(node, priority).ok_or(AddError::NoUuid { group: id, index })?);
        }
        let me = peers
            .iter()
            .position(|p| p.id == self.datanode_uuid.as_bytes())
            .ok_or(AddError::NotAMember(id))?;
        // The highest priority leads; the first of the list on a tie (max_by_key keeps the last
        // maximum, hence the reversed index).
        let leader = peers
            .iter()
            .enumerate()
            .max_by_key(|(i, p)| (p.priority, std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
            .expect("this DataNode is a member");
        let leader = (leader != me).then(|| peers[leader].clone());
        let others = peers
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != me)
            .map(|(_, p)| p.clone())
            .collect();
        let sm = ContainerStateMachine::member(
            id,
            &self.datanode_uuid,
            self.address.clone(),
            others,
            leader,
        );
        self.insert(sm, true)
    }

    /// `closePipelineCommand`: stops hosting the group `id`. False when it was not hosted.
    pub fn remove(&self, id: &uuid::Uuid) -> bool {
        let _change = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.map.load_full();
        let Some(group) = current.get(id) else {
            return false;
        };
        self.admission
            .metrics
            .datanode
            .unregister_group(&group.sm.metrics);
        let mut next = HashMap::clone(&current);
        next.remove(id);
        self.map.store(Arc::new(next));
        true
    }

    fn insert(&self, sm: ContainerStateMachine, from_scm: bool) -> Result<(), AddError> {
        let mut added = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.map.load_full();
        let id = sm.group();
        if current.contains_key(&id) {
            return Err(AddError::Exists(id));
        }
        let sm = Arc::new(sm);
        self.admission
            .metrics
            .datanode
            .register_group(Arc::clone(&sm.metrics), Arc::clone(&sm.ratis_metrics));
        let group = Group {
            executors: self.raft.group_executors(&sm.ratis_metrics),
            sm,
            from_scm,
            added: *added,
        };
        *added += 1;
        let mut next = HashMap::clone(&current);
        next.insert(id, Arc::new(group));
        self.map.store(Arc::new(next));
        Ok(())
    }
}

/// A member as Ratis knows it (`RatisHelper.toRaftPeer`, Ozone 2.2.0): the DataNode's UUID as
/// its id, `IP:port` of its RATIS_SERVER, RATIS (client) and RATIS_ADMIN ports (each falling back
/// to RATIS, as `DatanodeDetails.getPort` does), and its priority. None without a UUID.
fn raft_peer(node: &DatanodeDetailsProto, priority: i32) -> Option<RaftPeerProto> {
    let uuid = node.uuid.clone().filter(|u| !u.is_empty()).or_else(|| {
        let id = node.id.map(|i| i.uuid).or(node.uuid128)?;
        Some(
            uuid::Uuid::from_u64_pair(id.most_sig_bits as u64, id.least_sig_bits as u64)
                .to_string(),
        )
    })?;
    let port = |name: &str| {
        let find = |n: &str| node.ports.iter().find(|p| p.name == n).map(|p| p.value);
        find(name)
            .or_else(|| find("RATIS"))
            .map(|p| format!("{}:{p}", node.ip_address))
            .unwrap_or_default()
    };
    Some(RaftPeerProto {
        id: bytes::Bytes::from(uuid.into_bytes()),
        address: port("RATIS_SERVER"),
        client_address: port("RATIS"),
        admin_address: port("RATIS_ADMIN"),
        data_stream_address: port("RATIS_DATASTREAM"),
        priority: priority.max(0) as u32,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::scm::proto::Port;

    fn node(uuid: &str, port: u32) -> DatanodeDetailsProto {
        DatanodeDetailsProto {
            uuid: Some(uuid.to_owned()),
            ip_address: "127.0.0.1".into(),
            host_name: "h".into(),
            ports: vec![Port {
                name: "RATIS".into(),
                value: port,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_peer_s_addresses_fall_back_to_the_ratis_port() {
        let p = raft_peer(&node("u1", 9858), 1).unwrap();
        assert_eq!(&p.id[..], b"u1");
        assert_eq!(p.address, "127.0.0.1:9858");
        assert_eq!(p.client_address, "127.0.0.1:9858");
        assert_eq!(p.admin_address, "127.0.0.1:9858");
        assert_eq!(p.priority, 1);
        let mut n = node("", 1);
        n.uuid = None;
        assert!(raft_peer(&n, 0).is_none(), "no UUID, no peer");
    }
}

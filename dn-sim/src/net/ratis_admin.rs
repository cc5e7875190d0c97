//! The DataNode's Ratis admin port (`hdds.container.ratis.admin.port`, 9857):
//! `ratis.grpc.AdminProtocolService` as Ratis 3.2.1 serves it. dn-sim answers `groupList` (the
//! groups this DataNode hosts: how a client finds the pipeline of a DataNode it knows only by
//! address) and `groupInfo`; the calls that change a group (configuration, leadership, group
//! and snapshot management) are not simulated and fail with UNIMPLEMENTED.

use common::ratis::proto::common::{
    GroupInfoReplyProto, GroupInfoRequestProto, GroupListReplyProto, GroupListRequestProto,
    GroupManagementRequestProto, LeaderElectionManagementRequestProto, RaftClientReplyProto,
    RaftGroupIdProto, RaftGroupProto, RaftPeerRole, RaftRpcReplyProto, RaftRpcRequestProto,
    RoleInfoProto, SetConfigurationRequestProto, SnapshotManagementRequestProto,
    TransferLeadershipRequestProto,
};
use common::ratis::proto::grpc::admin_protocol_service_server::AdminProtocolService;
use std::sync::Arc;
use tonic::{Request, Response, Status};

use crate::net::raft_groups::RaftGroups;

pub struct RatisAdmin {
    /// The hosted groups.
    groups: Arc<RaftGroups>,
    /// This DataNode's id as a Raft peer (`replyId`).
    peer: bytes::Bytes,
}

impl RatisAdmin {
    pub fn new(groups: Arc<RaftGroups>, peer: &str) -> Self {
        Self {
            groups,
            peer: bytes::Bytes::copy_from_slice(peer.as_bytes()),
        }
    }

    /// `RaftClientReply`'s header for an admin call: the request's ids, this peer, success.
    fn reply_header(&self, rpc: Option<&RaftRpcRequestProto>) -> RaftRpcReplyProto {
        let rpc = rpc.cloned().unwrap_or_default();
        RaftRpcReplyProto {
            requestor_id: rpc.requestor_id,
            reply_id: self.peer.clone(),
            raft_group_id: rpc.raft_group_id,
            call_id: rpc.call_id,
            success: true,
        }
    }
}

/// What Ratis's admin service answers when the request's ids do not parse
/// (`ClientProtoUtils.toGroupListRequest`: an empty `replyId`, a group id that is not 16 bytes,
/// a requestor id that is not 16 bytes): the exception escapes the handler and grpc-java ends
/// the call with UNKNOWN (Ratis 3.2.1, as a real Ozone 2.2.0 DataNode's admin port answers).
fn ids_unparsable(rpc: Option<&RaftRpcRequestProto>) -> Option<Status> {
    let parses = rpc.is_some_and(|rpc| {
        !rpc.reply_id.is_empty()
            && rpc.requestor_id.len() == 16
            && rpc.raft_group_id.as_ref().is_some_and(|g| g.id.len() == 16)
    });
    (!parses).then(|| Status::unknown("Application error processing RPC"))
}

fn not_simulated(call: &str) -> Status {
    Status::unimplemented(format!(
        "dn-sim's Ratis admin port serves groupList and groupInfo, not {call}"
    ))
}

#[tonic::async_trait]
impl AdminProtocolService for RatisAdmin {
    async fn set_configuration(
        &self,
        _: Request<SetConfigurationRequestProto>,
    ) -> Result<Response<RaftClientReplyProto>, Status> {
        Err(not_simulated("setConfiguration"))
    }

    async fn transfer_leadership(
        &self,
        _: Request<TransferLeadershipRequestProto>,
    ) -> Result<Response<RaftClientReplyProto>, Status> {
        Err(not_simulated("transferLeadership"))
    }

    async fn group_management(
        &self,
        _: Request<GroupManagementRequestProto>,
    ) -> Result<Response<RaftClientReplyProto>, Status> {
        Err(not_simulated("groupManagement"))
    }

    async fn snapshot_management(
        &self,
        _: Request<SnapshotManagementRequestProto>,
    ) -> Result<Response<RaftClientReplyProto>, Status> {
        Err(not_simulated("snapshotManagement"))
    }

    async fn leader_election_management(
        &self,
        _: Request<LeaderElectionManagementRequestProto>,
    ) -> Result<Response<RaftClientReplyProto>, Status> {
        Err(not_simulated("leaderElectionManagement"))
    }

    /// `RaftServerProxy.groupListAsync`: every group this server hosts.
    async fn group_list(
        &self,
        request: Request<GroupListRequestProto>,
    ) -> Result<Response<GroupListReplyProto>, Status> {
        let request = request.into_inner();
        if let Some(status) = ids_unparsable(request.rpc_request.as_ref()) {
            return Err(status);
        }
        Ok(Response::new(GroupListReplyProto {
            rpc_reply: Some(self.reply_header(request.rpc_request.as_ref())),
            group_id: self
                .groups
                .machines()
                .iter()
                .map(|sm| RaftGroupIdProto {
                    id: common::ratis::id_bytes(sm.group()),
                })
                .collect(),
        }))
    }

    /// `RaftServerImpl.getGroupInfo`: the group, its members, this server's role. An unknown
    /// group is Ratis's `GroupMismatchException`.
    async fn group_info(
        &self,
        request: Request<GroupInfoRequestProto>,
    ) -> Result<Response<GroupInfoReplyProto>, Status> {
        let request = request.into_inner();
        if let Some(status) = ids_unparsable(request.rpc_request.as_ref()) {
            return Err(status);
        }
        let wanted = request
            .group_id
            .as_ref()
            .and_then(|g| common::ratis::id_from_bytes(&g.id));
        let Some(group) = wanted.and_then(|id| self.groups.get(&id)) else {
            let group = request.group_id.map(|g| g.id).unwrap_or_default();
            return Err(crate::net::ratis_service::group_mismatch(
                std::str::from_utf8(&self.peer).unwrap_or_default(),
                &group,
            ));
        };
        let sm = &group.sm;
        let role = if sm.leader().is_some() {
            RaftPeerRole::Follower
        } else {
            RaftPeerRole::Leader
        };
        Ok(Response::new(GroupInfoReplyProto {
            rpc_reply: Some(self.reply_header(request.rpc_request.as_ref())),
            group: Some(RaftGroupProto {
                group_id: Some(RaftGroupIdProto {
                    id: common::ratis::id_bytes(sm.group()),
                }),
                peers: sm.peers(),
            }),
            role: Some(RoleInfoProto {
                self_: Some(sm.peer().clone()),
                role: role as i32,
                ..Default::default()
            }),
            is_raft_storage_healthy: true,
            commit_infos: sm.commit_infos(),
            ..Default::default()
        }))
    }
}

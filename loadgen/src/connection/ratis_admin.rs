//! `--ratis-admin`: which pipeline a DataNode hosts, asked of its Ratis admin port
//! (`ratis.grpc.AdminProtocolService/groupList`, as `ratis sh group list` asks it). One unary
//! call before the run, over tonic.

use common::ratis::proto::common::{GroupListRequestProto, RaftGroupIdProto, RaftRpcRequestProto};
use common::ratis::proto::grpc::admin_protocol_service_client::AdminProtocolServiceClient;
use std::time::Duration;

/// Why no single group came back.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The admin port could not be reached (exit code 2, as an unreachable target).
    #[error("cannot ask the Ratis admin port {addr} (--ratis-admin) for its groups: {reason}")]
    Unreachable { addr: String, reason: String },
    /// It answered, with no group or several (exit code 2: name one with --pipeline-id).
    #[error("the Ratis admin port {addr} (--ratis-admin) {found}; name one with --pipeline-id")]
    NotOne { addr: String, found: String },
}

/// The one Raft group the DataNode at `addr` hosts (its `groupList`), within `timeout`.
pub async fn the_one_group(addr: &str, timeout: Duration) -> Result<uuid::Uuid, DiscoveryError> {
    let unreachable = |reason: String| DiscoveryError::Unreachable {
        addr: addr.to_string(),
        reason,
    };
    let uri = super::target_uri(addr, false).map_err(|e| unreachable(e.to_string()))?;
    let channel = tonic::transport::Endpoint::from_shared(uri)
        .map_err(|e| unreachable(e.to_string()))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let call = async {
        let channel = channel
            .connect()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        // Ratis parses every id of the request (`ClientProtoUtils.toGroupListRequest`): a
        // missing one is an exception on the server (UNKNOWN "Application error processing
        // RPC"). The server's peer id is not known yet and not checked; the group is Ratis's
        // empty group id.
        let request = GroupListRequestProto {
            rpc_request: Some(RaftRpcRequestProto {
                requestor_id: common::ratis::id_bytes(uuid::Uuid::new_v4()),
                reply_id: bytes::Bytes::copy_from_slice(addr.as_bytes()),
                raft_group_id: Some(RaftGroupIdProto {
                    id: common::ratis::id_bytes(uuid::Uuid::nil()),
                }),
                ..Default::default()
            }),
        };
        AdminProtocolServiceClient::new(channel)
            .group_list(request)
            .await
            .map_err(|status| unreachable(format!("{:?}: {}", status.code(), status.message())))
    };
    let reply = tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| unreachable(format!("no answer within {timeout:?}")))??
        .into_inner();
    let groups: Vec<uuid::Uuid> = reply
        .group_id
        .iter()
        .filter_map(|g| common::ratis::id_from_bytes(&g.id))
        .collect();
    match groups.as_slice() {
        [one] => Ok(*one),
        [] => Err(DiscoveryError::NotOne {
            addr: addr.to_string(),
            found: "hosts no Raft group".into(),
        }),
        many => Err(DiscoveryError::NotOne {
            addr: addr.to_string(),
            found: format!(
                "hosts {} Raft groups ({})",
                many.len(),
                many.iter()
                    .map(|g| g.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

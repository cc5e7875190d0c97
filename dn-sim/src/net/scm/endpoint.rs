//! The DataNode's conversation with SCM (Ozone 2.2.0's `EndpointStateMachine`: GetVersion,
//! Register, then a heartbeat every `hdds.heartbeat.interval`), and what it does with the
//! commands heartbeats bring back. It runs beside the client ports and never stops them: while SCM
//! is unreachable it retries with a growing pause (up to the heartbeat interval, at least 1 s and
//! at most 30 s) and goes on heartbeating, registering again when SCM says `reregisterCommand`
//! (an SCM that restarted or forgot the node).

use super::reports::{
    NodeIdentity, ReportedReplicas, layout_version, pipeline_actions, pipeline_reports,
    pipeline_uuid,
};
use super::rpc::{RpcConnection, RpcError};
use super::{ScmConfig, ScmStatus};
use crate::datanode::store::ContainerStore;
use crate::net::raft_groups::RaftGroups;
use common::proto::container_data_proto::State as StoreState;
use common::scm::proto::scm_command_proto::Type as CommandType;
use common::scm::proto::{
    CommandQueueReportProto, CommandStatus, CommandStatusReportsProto,
    ContainerBlocksDeletionAckProto, NodeOperationalState, ReplicationType, ScmCommandProto,
    ScmDatanodeRequest, ScmDatanodeResponse, ScmHeartbeatRequestProto, ScmRegisterRequestProto,
    ScmVersionRequestProto, Status, Type, command_status::Status as CommandState,
    container_blocks_deletion_ack_proto::DeleteBlockTransactionResult,
    scm_registered_response_proto::ErrorCode,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Now, ms since the epoch (command deadlines).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The one connection's user (simple authentication, as a DataNode without Kerberos).
const USER: &str = "dn-sim";

/// Why a connection's conversation ended.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error(transparent)]
    Rpc(#[from] RpcError),
    #[error("SCM answered {what} with status ERROR: {message}")]
    Refused { what: &'static str, message: String },
    #[error("SCM refused the registration ({0:?}): its layout version differs")]
    NotPermitted(ErrorCode),
    #[error("SCM's answer to {0} lacks its response")]
    Incomplete(&'static str),
}

/// The endpoint's state across connections.
pub struct Endpoint {
    config: ScmConfig,
    node: NodeIdentity,
    store: Arc<ContainerStore>,
    status: Arc<ScmStatus>,
    registered: bool,
    replicas: ReportedReplicas,
    last_full_report: Option<Instant>,
    /// Set by SCM (`setNodeOperationalStateCommand`); none until then, as a new DataNode's.
    op_state: Option<NodeOperationalState>,
    op_expiry: i64,
    /// Command statuses not yet reported (deleteBlocks's only, as a real DataNode's).
    statuses: Vec<CommandStatus>,
    /// The Ratis port's groups (none without a Ratis port): what createPipeline and
    /// closePipeline change and pipeline reports list.
    groups: Option<Arc<RaftGroups>>,
    /// The DataNode's metrics, which count SCM's commands (`CommandHandlerMetrics`).
    admission: Arc<crate::sim::admission::Admission>,
    /// Failed groups SCM was asked to close (once each, as `isPipelineCloseInProgress` skips).
    close_asked: std::collections::HashSet<uuid::Uuid>,
    /// A command changed a container or left a status: heartbeat now rather than at the next
    /// tick, as a real DataNode triggers a heartbeat for an incremental report
    /// (`StateContext.addIncrementalReport`, `triggerHeartbeat`), or a pipeline was added (a
    /// DataNode triggers a heartbeat then, `XceiverServerRatis.sendPipelineReport`).
    heartbeat_now: bool,
}

impl Endpoint {
    pub fn new(
        config: ScmConfig,
        node: NodeIdentity,
        store: Arc<ContainerStore>,
        status: Arc<ScmStatus>,
        groups: Option<Arc<RaftGroups>>,
        admission: Arc<crate::sim::admission::Admission>,
    ) -> Self {
        // The queues' names carry SCM's host as Java's `getHostName` gives it: a loopback
        // address resolves to `localhost`.
        let host = config
            .address
            .rsplit_once(':')
            .map_or(config.address.as_str(), |(h, _)| h)
            .trim_matches(['[', ']']);
        let host = match host.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_loopback() => "localhost".to_owned(),
            _ => host.to_owned(),
        };
        admission.metrics.datanode.commands.set_scm_host(host);
        Self {
            config,
            node,
            store,
            status,
            registered: false,
            replicas: ReportedReplicas::default(),
            last_full_report: None,
            op_state: None,
            op_expiry: 0,
            statuses: Vec::new(),
            groups,
            close_asked: Default::default(),
            admission,
            heartbeat_now: false,
        }
    }

    /// Talks to SCM until the task is aborted.
    pub async fn run(mut self) {
        let cap = self
            .config
            .heartbeat_interval
            .clamp(Duration::from_secs(1), Duration::from_secs(30));
        let mut pause = Duration::from_millis(250);
        loop {
            let started = Instant::now();
            let error = self.session().await;
            self.status.failures.fetch_add(1, Ordering::Relaxed);
            // A session that heartbeated for a while starts its retries from the bottom again.
            if started.elapsed() > cap {
                pause = Duration::from_millis(250);
            }
            tracing::warn!(scm = %self.config.address, error = %error, retry_in = ?pause,
                "SCM connection failed; still serving clients");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(cap);
        }
    }

    /// One connection: GetVersion, Register when not registered, heartbeats. Returns only with
    /// the error that ended it.
    async fn session(&mut self) -> SessionError {
        let mut conn = match RpcConnection::connect(
            &self.config.address,
            common::scm::PROTOCOL,
            common::scm::PROTOCOL_VERSION,
            USER,
            self.config.rpc_timeout,
        )
        .await
        {
            Ok(c) => c,
            Err(e) => return e.into(),
        };
        if let Err(e) = self.get_version(&mut conn).await {
            return e;
        }
        loop {
            if !self.registered
                && let Err(e) = self.register(&mut conn).await
            {
                return e;
            }
            let mut tick = tokio::time::interval(self.config.heartbeat_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while self.registered {
                if !std::mem::take(&mut self.heartbeat_now) {
                    tick.tick().await;
                }
                if let Err(e) = self.heartbeat(&mut conn).await {
                    return e;
                }
            }
        }
    }

    async fn submit(
        &self,
        conn: &mut RpcConnection,
        request: ScmDatanodeRequest,
        what: &'static str,
    ) -> Result<ScmDatanodeResponse, SessionError> {
        let response: ScmDatanodeResponse = conn
            .call(common::scm::METHOD, &request, self.config.rpc_timeout)
            .await?;
        if response.status != Status::Ok as i32 || response.success == Some(false) {
            return Err(SessionError::Refused {
                what,
                message: response.message.unwrap_or_default(),
            });
        }
        Ok(response)
    }

    async fn get_version(&mut self, conn: &mut RpcConnection) -> Result<(), SessionError> {
        let request = ScmDatanodeRequest {
            cmd_type: Type::GetVersion as i32,
            get_version_request: Some(ScmVersionRequestProto {}),
            ..Default::default()
        };
        let response = self.submit(conn, request, "GetVersion").await?;
        let version = response
            .get_version_response
            .ok_or(SessionError::Incomplete("GetVersion"))?;
        let cluster = version
            .keys
            .iter()
            .find(|kv| kv.key == "clusterID")
            .and_then(|kv| kv.value.clone())
            .unwrap_or_default();
        tracing::info!(scm = %self.config.address, software_version = version.software_version,
            cluster = %cluster, "SCM answered GetVersion");
        Ok(())
    }

    async fn register(&mut self, conn: &mut RpcConnection) -> Result<(), SessionError> {
        let started = Instant::now();
        let request = ScmDatanodeRequest {
            cmd_type: Type::Register as i32,
            register_request: Some(ScmRegisterRequestProto {
                extended_datanode_details: self.node.extended(),
                node_report: self.node.node_report(&self.store),
                container_report: self.replicas.full(&self.store, &self.uuid()),
                pipeline_reports: pipeline_reports(&self.group_reports()),
                data_node_layout_version: Some(layout_version()),
            }),
            ..Default::default()
        };
        self.last_full_report = Some(Instant::now());
        let response = self.submit(conn, request, "Register").await?;
        let registered = response
            .register_response
            .ok_or(SessionError::Incomplete("Register"))?;
        let code =
            ErrorCode::try_from(registered.error_code).unwrap_or(ErrorCode::ErrorNodeNotPermitted);
        if code != ErrorCode::Success {
            return Err(SessionError::NotPermitted(code));
        }
        // As a real DataNode (RegisterEndpointTask): the names SCM saw become the node's own.
        self.node.adopt(
            registered.hostname.as_deref(),
            registered.ip_address.as_deref(),
            registered.network_name.as_deref(),
            registered.network_location.as_deref(),
        );
        self.registered = true;
        self.status.registered.store(true, Ordering::Release);
        self.status.registrations.fetch_add(1, Ordering::Relaxed);
        tracing::info!(scm = %self.config.address, uuid = %registered.datanode_uuid,
            cluster = %registered.cluster_id, took = ?started.elapsed(), "registered with SCM");
        Ok(())
    }

    async fn heartbeat(&mut self, conn: &mut RpcConnection) -> Result<(), SessionError> {
        let uuid = self.uuid();
        let full_due = self
            .last_full_report
            .is_none_or(|t| t.elapsed() >= self.config.container_report_interval);
        let (container_report, incremental) = if full_due {
            self.last_full_report = Some(Instant::now());
            (Some(self.replicas.full(&self.store, &uuid)), vec![])
        } else {
            (
                None,
                self.replicas
                    .incremental(&self.store, &uuid)
                    .into_iter()
                    .collect(),
            )
        };
        let statuses = std::mem::take(&mut self.statuses);
        let groups = self.group_reports();
        let asked_before = self.close_asked.clone();
        let actions = pipeline_actions(&groups, &mut self.close_asked, self.node.uuid);
        let request = ScmDatanodeRequest {
            cmd_type: Type::SendHeartbeat as i32,
            send_heartbeat_request: Some(ScmHeartbeatRequestProto {
                datanode_details: self.node.details(self.op_state, self.op_expiry),
                node_report: Some(self.node.node_report(&self.store)),
                container_report,
                incremental_container_report: incremental,
                command_status_reports: if statuses.is_empty() {
                    vec![]
                } else {
                    vec![CommandStatusReportsProto {
                        cmd_status: statuses.clone(),
                    }]
                },
                container_actions: None,
                pipeline_actions: actions,
                pipeline_reports: Some(pipeline_reports(&groups)),
                data_node_layout_version: Some(layout_version()),
                // Only types with commands queued, as a real DataNode (HeartbeatEndpointTask):
                // dn-sim queues none.
                command_queue_report: Some(CommandQueueReportProto::default()),
            }),
            ..Default::default()
        };
        let response = match self.submit(conn, request, "SendHeartbeat").await {
            Ok(r) => r,
            Err(e) => {
                // Not delivered: report them with the next heartbeat.
                self.statuses = statuses;
                self.close_asked = asked_before;
                // A full report is owed after a lost heartbeat (its changes may be lost too).
                self.last_full_report = None;
                return Err(e);
            }
        };
        self.status.heartbeats.fetch_add(1, Ordering::Relaxed);
        let Some(answer) = response.send_heartbeat_response else {
            return Err(SessionError::Incomplete("SendHeartbeat"));
        };
        for command in answer.commands {
            self.execute(command).await;
        }
        Ok(())
    }

    /// What the DataNode does with a command (Ozone 2.2.0's command handlers). Executed:
    /// reregister, setNodeOperationalState (reported back in every heartbeat's details),
    /// refreshVolumeUsageInfo and finalizeNewLayoutVersion (nothing to do: every heartbeat carries
    /// a fresh node report, and the layout is already the newest), closeContainer, deleteContainer
    /// and deleteBlocks (see their functions), createPipeline and closePipeline (the Ratis port's
    /// groups, reported in pipeline reports; an EC pipeline has no group). The others are not
    /// executed: the container or pipeline simply never reports the change, which SCM treats as a DataNode that has not got there (it retries or
    /// times out), listed in docs/deviations.md. What changed reaches SCM in an incremental
    /// container report at once: the next heartbeat goes without waiting for its tick.
    async fn execute(&mut self, command: ScmCommandProto) {
        self.status.commands.fetch_add(1, Ordering::Relaxed);
        let kind =
            CommandType::try_from(command.command_type).unwrap_or(CommandType::UnknownScmCommand);
        self.admission.metrics.datanode.commands.received(kind);
        let started = Instant::now();
        self.handle(kind, command).await;
        // (Counted for every type; only the registered handlers' series are rendered.)
        self.admission
            .metrics
            .datanode
            .commands
            .invoked(kind, started.elapsed());
    }

    async fn handle(&mut self, kind: CommandType, command: ScmCommandProto) {
        match kind {
            CommandType::ReregisterCommand => {
                tracing::info!("SCM asks to register again");
                self.registered = false;
                self.status.registered.store(false, Ordering::Release);
            }
            CommandType::SetNodeOperationalStateCommand => {
                if let Some(c) = command.set_node_operational_state_command_proto {
                    self.op_state = NodeOperationalState::try_from(c.node_operational_state)
                        .ok()
                        .or(self.op_state);
                    self.op_expiry = c.state_expiry_epoch_seconds;
                    tracing::info!(state = ?self.op_state, "SCM set the operational state");
                }
            }
            CommandType::RefreshVolumeUsageInfo | CommandType::FinalizeNewLayoutVersionCommand => {}
            CommandType::CreatePipelineCommand => {
                let Some(c) = command.create_pipeline_command_proto else {
                    return;
                };
                let Some(groups) = &self.groups else {
                    self.status.not_executed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("SCM asks for a pipeline, but this dn-sim serves no Ratis port");
                    return;
                };
                let Some(id) = pipeline_uuid(&c.pipeline_id) else {
                    tracing::warn!("createPipeline without a pipeline id");
                    return;
                };
                if c.r#type != ReplicationType::Ratis as i32 {
                    tracing::warn!(pipeline = %id, "createPipeline of a type other than RATIS");
                    return;
                }
                match groups.add_from_scm(id, &c.datanode, &c.priority) {
                    Ok(()) => {
                        self.heartbeat_now = true;
                        tracing::info!(pipeline = %id, members = c.datanode.len(),
                            "created pipeline");
                    }
                    // Already there: a repeated command (SCM resends until it hears).
                    Err(crate::net::raft_groups::AddError::Exists(_)) => self.heartbeat_now = true,
                    Err(e) => tracing::warn!(error = %e, "cannot create pipeline"),
                }
            }
            CommandType::ClosePipelineCommand => {
                let Some(c) = command.close_pipeline_command_proto else {
                    return;
                };
                if let (Some(groups), Some(id)) = (&self.groups, pipeline_uuid(&c.pipeline_id))
                    && groups.remove(&id)
                {
                    self.close_asked.remove(&id);
                    tracing::info!(pipeline = %id, "closed pipeline");
                }
            }
            CommandType::CloseContainerCommand => {
                if let Some(c) = command.close_container_command_proto {
                    // A RATIS container closes through its pipeline's Raft group when this node
                    // hosts it (`XceiverServerRatis.isExist`): CLOSED on every replica.
                    let through_raft = match (&self.groups, pipeline_uuid(&c.pipeline_id)) {
                        (Some(groups), Some(id)) => groups.get(&id).is_some_and(|g| g.from_scm),
                        _ => false,
                    };
                    self.close_container(c.container_id, c.force.unwrap_or(false) || through_raft);
                    self.heartbeat_now = true;
                }
            }
            CommandType::DeleteContainerCommand => {
                if let Some(c) = command.delete_container_command_proto {
                    let expired = command
                        .deadline_ms_since_epoch
                        .is_some_and(|d| d > 0 && now_ms() > d);
                    if expired {
                        tracing::info!(
                            container = c.container_id,
                            "delete container command past its deadline: not processed"
                        );
                    } else {
                        self.delete_container(c.container_id, c.force).await;
                        self.heartbeat_now = true;
                    }
                }
            }
            CommandType::DeleteBlocksCommand => {
                if let Some(c) = command.delete_blocks_command_proto {
                    let status = self.delete_blocks(c, kind);
                    self.statuses.push(status);
                    self.heartbeat_now = true;
                }
            }
            other => {
                self.status.not_executed.fetch_add(1, Ordering::Relaxed);
                tracing::info!(command = ?other, "SCM command not executed by dn-sim");
            }
        }
    }

    fn group_reports(&self) -> Vec<crate::net::raft_groups::GroupReport> {
        self.groups
            .as_ref()
            .map(|g| g.reports())
            .unwrap_or_default()
    }

    /// closeContainer (`CloseContainerCommandHandler`): an unknown container is only logged; an
    /// OPEN or CLOSING one becomes CLOSED with `force` (SCM sets it for every container that is
    /// not RATIS: EC's) or when its RATIS pipeline's group is hosted here (the close goes through
    /// Raft), else QUASI_CLOSED; a QUASI_CLOSED one becomes CLOSED with `force`. Writes then answer
    /// CLOSED_CONTAINER_IO; reads go on.
    fn close_container(&self, id: i64, force: bool) {
        let Some(container) = self.store.get(id) else {
            tracing::info!(
                container = id,
                "container does not exist in datanode: close container failed"
            );
            return;
        };
        let uuid = self.uuid();
        let result = match (container.state(), force) {
            (StoreState::QuasiClosed, false) | (StoreState::Closed, _) => Ok(()),
            (StoreState::Open | StoreState::Closing | StoreState::QuasiClosed, true) => {
                container.close(&uuid)
            }
            (StoreState::Open | StoreState::Closing, false) => container.quasi_close(&uuid),
            (state, _) => {
                tracing::debug!(container = id, ?state, "cannot close the container");
                Ok(())
            }
        };
        match result {
            Ok(()) => tracing::info!(container = id, force, state = ?container.state(),
                "closed container for SCM"),
            Err(e) => tracing::error!(container = id, error = %e.message, "can't close container"),
        }
    }

    /// deleteContainer (`KeyValueHandler.deleteInternal`): without `force` an OPEN or non-empty
    /// container stays (logged, as the DataNode's error); else it is removed with its data.
    async fn delete_container(&self, id: i64, force: bool) {
        let Some(container) = self.store.get(id) else {
            return;
        };
        if let Err(e) = container.check_delete(force) {
            tracing::error!(container = id, error = %e.message,
                "exception occurred while deleting the container");
            return;
        }
        self.store.remove_async(id).await;
        tracing::info!(container = id, force, "deleted container for SCM");
    }

    /// deleteBlocks (`DeleteBlocksCommandHandler`): each transaction of a container the node
    /// holds succeeds and becomes the container's `deleteTransactionId`; one of a container it
    /// does not hold fails (CONTAINER_NOT_FOUND). The command is EXECUTED and its
    /// `ContainerBlocksDeletionACK` rides the next heartbeat's command status report. The
    /// blocks' data stays (a DataNode deletes it later, in its block-deleting service).
    fn delete_blocks(
        &self,
        c: common::scm::proto::DeleteBlocksCommandProto,
        kind: CommandType,
    ) -> CommandStatus {
        let results = c
            .deleted_blocks_transactions
            .iter()
            .map(|tx| {
                let success = match self.store.get(tx.container_id) {
                    Some(container) => {
                        container.note_delete_transaction(tx.tx_id);
                        true
                    }
                    None => false,
                };
                DeleteBlockTransactionResult {
                    tx_id: tx.tx_id,
                    container_id: tx.container_id,
                    success,
                }
            })
            .collect();
        CommandStatus {
            cmd_id: c.cmd_id,
            status: CommandState::Executed as i32,
            r#type: kind as i32,
            msg: None,
            block_deletion_ack: Some(ContainerBlocksDeletionAckProto {
                results,
                dn_id: self.uuid(),
            }),
        }
    }

    fn uuid(&self) -> String {
        self.node.uuid.to_string()
    }
}

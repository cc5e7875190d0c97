//! The DataNode's own parts, as Ozone names them: [`dispatcher`] (HddsDispatcher: routing by
//! command type, the DataNode's metrics of each answer), [`keyvalue`] (KeyValueHandler: one
//! function per command type, Echo included), [`envelope`] (response envelopes), [`payload`]
//! (response payloads), [`store`] (containers, blocks and their bytes), [`container_ids`] (the
//! `--containers` list), [`metrics`] (`ContainerMetrics` and `HddsDispatcher`'s metrics with a
//! real DataNode's names; [`ratis_metrics`] and [`dropwizard`] for Ratis's, [`command_metrics`]
//! for SCM's commands), [`version`] (the
//! release whose behaviour is modelled), [`timer`] (the handler's clock) and [`state_machine`]
//! (ContainerStateMachine: what a Raft group of the Ratis port does with a container command,
//! its log indices, watches and retry cache).
//!
//! Nothing here uses [`crate::sim`] or [`crate::net`]: the model of the DataNode is the same
//! whichever front end (the gRPC port, a Ratis port, an in-process null target) feeds it.

pub mod command_metrics;
pub mod container_ids;
pub mod csm_metrics;
pub mod dispatcher;
pub mod dropwizard;
pub mod envelope;
pub mod keyvalue;
pub mod metrics;
pub mod payload;
pub mod prom_text;
pub mod ratis_metrics;
pub mod state_machine;
pub mod store;
pub mod timer;
pub mod version;

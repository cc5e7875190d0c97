//! dn-sim: a simulated Apache Ozone DataNode. It serves the DataNode client protocol
//! (`hadoop.hdds.datanode.XceiverClientProtocolService/send`) with the result codes, envelopes and
//! wire rules of a real DataNode, so that loadgen or a real Ozone client can measure the client
//! path without a cluster.
//!
//! Modules mirror the DataNode's parts: [`service`] (stream handling, GrpcXceiverService),
//! [`dispatcher`] (HddsDispatcher + KeyValueHandler), [`containers`] (the container set),
//! [`server`] (XceiverServerGrpc: bind, serve, stop).

pub mod cli;
pub mod containers;
pub mod dispatcher;
pub mod payload;
pub mod server;
pub mod service;

pub use server::{Config, EmbeddedServer, RunningServer, run_until_signal, start};

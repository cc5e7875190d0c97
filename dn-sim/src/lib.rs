//! dn-sim: a simulated Apache Ozone DataNode. It serves the DataNode client protocol
//! (`hadoop.hdds.datanode.XceiverClientProtocolService/send`) with the result codes, envelopes and
//! wire rules of a real DataNode, so that loadgen or a real Ozone client can measure the client
//! path without a cluster.
//!
//! Modules mirror the DataNode's parts: [`service`] (stream handling, GrpcXceiverService),
//! [`admission`] (the simulation around the DataNode: limits, pool, delays, faults, disk,
//! metrics), [`dispatcher`] (HddsDispatcher: routing, the DataNode's metrics), [`envelope`]
//! (response envelopes), [`keyvalue`] (KeyValueHandler: one function per command type, Echo
//! included, and the dispatcher's container checks), [`store`] (containers,
//! blocks and their bytes: memory, discard or block files), [`containers`] (the `--containers`
//! list), [`server`] (XceiverServerGrpc: bind, serve, stop), [`tls`] (its TLS: `hdds.grpc.tls.enabled`).
//!
//! Models that the request path consults (pure: no sockets, no tasks):
//! - [`delay`]: per-request service delays by command type (`--delay`);
//! - [`disk`]: one shared storage device for chunk data (`--disk-bandwidth`, `--disk-latency`);
//! - [`fault`]: injected failures by command type (`--fault`);
//! - [`rng`]: seeded per-stream random number generators (`--seed`);
//! - [`target`]: the `TYPE=` part shared by `--delay` and `--fault`.

pub mod admin;
pub mod admission;
pub mod cli;
pub mod connections;
pub mod containers;
pub mod delay;
pub mod disk;
pub mod dispatcher;
pub mod envelope;
pub mod fault;
pub mod health;
pub mod inflight;
pub mod keyvalue;
pub mod limits;
pub mod metrics;
pub mod payload;
pub mod pool;
pub mod reset;
pub mod rng;
pub mod server;
pub mod service;
pub mod service_limits;
pub mod settings;
pub mod store;
pub mod target;
pub mod timer;
pub mod tls;
pub mod version;

pub use server::{Config, EmbeddedServer, RunningServer, run_until_signal, start};

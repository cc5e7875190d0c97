//! dn-sim: a simulated Apache Ozone DataNode. It serves the DataNode client protocol
//! (`hadoop.hdds.datanode.XceiverClientProtocolService/send`) with the result codes, envelopes and
//! wire rules of a real DataNode, so that loadgen or a real Ozone client can measure the client
//! path without a cluster.
//!
//! Three rooms, each using only the ones below it (`dn-sim/tests/layers.rs` checks it):
//! - [`net`]: what serves the DataNode to clients: the listener, the gRPC service, connection
//!   limits, TLS, the in-flight budget, health and the admin endpoint;
//! - [`sim`]: the simulation around the DataNode: admission (service limits, the handler pool,
//!   injected delays and faults, the shared disk), live settings, the simulator's own metrics;
//! - [`datanode`]: the DataNode's own parts: the dispatcher, the key-value handler, envelopes,
//!   payloads, the container store and the DataNode's metrics. It knows nothing of the other two.
//!
//! [`cli`] turns flags into a [`Config`] and is used only by the binary.

pub mod cli;
pub mod datanode;
pub mod net;
pub mod sim;

pub use net::server::{Config, EmbeddedServer, RunningServer, run_until_signal, start};

//! Shared vocabulary of dn-sim and loadgen: the Ozone DataNode client protocol (generated from
//! `proto/`), the wire rules a real DataNode enforces on it, Ozone-style size and duration parsing,
//! and the latency statistics both sides report.
//!
//! Architecture invariant: this crate performs no I/O, opens no sockets and spawns no tasks.

pub mod checksum;
pub mod codec;
pub mod grpc;
pub mod hrpc;
pub mod http2;
pub mod proto;
pub mod rates;
pub mod ratis;
pub mod scm;
pub mod stats;
pub mod token_bucket;
pub mod units;
pub mod wire;

/// Ozone's maximum gRPC message size on server and client (`OzoneConsts.OZONE_SCM_CHUNK_MAX_SIZE`).
pub const MAX_MESSAGE_SIZE: usize = 32 * 1024 * 1024;

/// The DataNode's client ("STANDALONE") port, `hdds.container.ipc.port`.
pub const DEFAULT_PORT: u16 = 9859;

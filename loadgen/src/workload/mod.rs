//! Workloads: what the requests are. The engine decides when and where they are sent, retries
//! them and keeps the statistics; a workload only builds requests and judges their answers.
//!
//! A workload hands each engine worker a [`WorkerLoad`]: a per-worker state machine. The engine
//! gives it one *unit* of work per slot (an echo, an application `write()`, a block read), asks it
//! for the unit's RPCs one at a time ([`WorkerLoad::next`]) and hands back each answer
//! ([`WorkerLoad::judge`]); data-integrity checks live in `judge`. One RPC is outstanding per
//! worker, in the order the state machine yields them (Ozone's `BlockOutputStream` and
//! `BlockInputStream` do the same). Statistics are kept per unit and per [`RpcKind`].
//!
//! Workloads know no flags, no engine and no statistics: their settings are plain values (the
//! flags are resolved into them elsewhere). They use the protocol types, the domain
//! (`outcome`, `throttle`) and the encoding helper of the transport (`connection::unary`).

pub mod block;
pub mod block_writer;
pub mod echo;

use crate::connection::http2::RequestBody;
use crate::outcome::Failure;
use crate::throttle::OpKind;
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};

pub use crate::outcome::RpcKind;

/// One RPC to send.
#[derive(Clone, Debug)]
pub struct Rpc {
    pub kind: RpcKind,
    /// The request as a gRPC-framed message, possibly in segments (a WriteChunk's data is one of
    /// its own); retries send the same `Bytes`, not a copy.
    pub frame: RequestBody,
    /// Application payload bytes the request carries (bytes sent).
    pub request_bytes: u64,
    /// Payload bytes that count as goodput when the RPC succeeds (written or read data).
    pub goodput_bytes: u64,
    /// What the client throttle is told about the RPC.
    pub throttle_op: OpKind,
    pub throttle_bytes: u64,
}

/// A workload: shared, read-only settings and data; each worker gets its own state machine.
pub trait Workload: Send + Sync + 'static {
    /// The state machine of worker `idx` (it lives on that worker's I/O thread).
    fn worker(&self, idx: usize) -> Box<dyn WorkerLoad>;

    /// Whether a unit is always exactly one RPC (echo): then the unit's statistics are the RPC's
    /// and no per-kind statistics are kept.
    fn single_rpc(&self) -> bool {
        false
    }

    /// For `--stream-mode persistent` (pipelined, answers in order): the request of every unit,
    /// if the workload's units are independent single RPCs; `None` if it cannot be pipelined.
    fn pipelined_request(&self) -> Option<ContainerCommandRequestProto> {
        None
    }

    /// Single-RPC workloads: the payload bytes of the request and of its expected answer
    /// (bytes/s, goodput, the throttle of persistent streams).
    fn single_rpc_bytes(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// How one unit of work ended, as far as the workload is concerned.
pub trait WorkerLoad {
    /// Starts the next unit (one slot of the engine). False when this worker has no more work
    /// (e.g. every block has been read): the worker ends.
    fn begin(&mut self) -> bool;

    /// The next RPC of the current unit (or of the closing, see [`close`](Self::close)), or
    /// `None` when it is complete.
    fn next(&mut self) -> Option<Rpc>;

    /// Judges a `result == SUCCESS` answer to the RPC [`next`](Self::next) returned last: the
    /// payload bytes it carried, or a failure (a data-integrity error).
    fn judge(&mut self, resp: &ContainerCommandResponseProto) -> Result<u64, Failure>;

    /// The RPC `next` returned last failed for good (after retries): the unit is abandoned, and
    /// the state machine goes on from a consistent state.
    fn failed(&mut self) {}

    /// Payload bytes of the unit that just completed (an application write's size).
    fn unit_bytes(&self) -> u64 {
        0
    }

    /// No more units: starts the closing RPCs (an output stream's last chunk and PutBlock),
    /// yielded by `next`. False when there are none.
    fn close(&mut self) -> bool {
        false
    }
}

//! Workloads: what each request is. The engine decides when and where requests go; a workload
//! only builds them and judges their answers.

pub mod block_writer;
pub mod echo;

use bytes::Bytes;
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};

pub trait Workload: Send + Sync + 'static {
    /// The `seq`-th request of worker `worker`.
    fn request(&self, worker: usize, seq: u64) -> ContainerCommandRequestProto;

    /// The same request as a gRPC-framed message, for the per-request stream path. Workloads
    /// whose requests do not change build it once and hand out clones (a reference count).
    fn framed_request(&self, worker: usize, seq: u64) -> Bytes {
        crate::connection::unary::grpc_frame(&self.request(worker, seq))
    }

    /// Bytes of application payload a request carries (for bytes/s).
    fn request_bytes(&self) -> u64 {
        0
    }

    /// Bytes of application payload a successful answer is expected to carry (for the client
    /// throttle's read/write accounting).
    fn response_bytes_hint(&self) -> u64 {
        0
    }

    /// Bytes of application payload in a successful answer.
    fn response_bytes(&self, resp: &ContainerCommandResponseProto) -> u64;
}

//! Workloads: what each request is. The engine decides when and where requests go; a workload
//! only builds them and judges their answers.

pub mod block_writer;
pub mod echo;

use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};

pub trait Workload: Send + Sync + 'static {
    /// The `seq`-th request of worker `worker`.
    fn request(&self, worker: usize, seq: u64) -> ContainerCommandRequestProto;

    /// Bytes of application payload a request carries (for bytes/s).
    fn request_bytes(&self) -> u64 {
        0
    }

    /// Bytes of application payload in a successful answer.
    fn response_bytes(&self, resp: &ContainerCommandResponseProto) -> u64;
}

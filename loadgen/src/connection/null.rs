//! `--target null`: a DataNode in loadgen's own process, with no network. Each request (the same
//! pre-encoded gRPC frame the HTTP/2 path would send) is decoded and handed straight to dn-sim's
//! dispatcher and store, and the answer object is handed back without being encoded: no socket,
//! no HTTP/2, no response encoding. The answers are dn-sim's (WriteChunk → SUCCESS, PutBlock →
//! the committed block length, Echo with its payload, GetBlock/ReadChunk from a memory store), so
//! the workload judges them as it judges a real DataNode's. What is left is what HDDS-15612's JMH
//! benchmark measured with its mocked RPCs: the client's own work (copy, checksum, request
//! encoding) plus the DataNode's bookkeeping.

use super::http2::RequestBody;
use crate::outcome::{ErrorKind, Failure};
use bytes::Buf;
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
use common::wire::RequiredFields;
use dn_sim::datanode::container_ids::ContainerIds;
use dn_sim::datanode::store::{ContainerStore, StoreKind};
use dn_sim::sim::admission::{Admission, AdmissionConfig, Outcome};
use prost::Message;
use rand::rngs::SmallRng;
use std::sync::Arc;
use tonic::Code;

/// How every report names this target.
pub const NAME: &str = "null (in-process, no network)";

/// The in-process DataNode: one admission (dn-sim's simulation and DataNode) and store shared by every I/O thread.
pub struct NullDataNode {
    admission: Admission,
    rngs: dn_sim::sim::rng::RngFactory,
}

impl NullDataNode {
    /// A DataNode with `store` (discard keeps lengths and metadata only, so memory stays flat),
    /// unbounded capacity, `containers` created OPEN, and dn-sim's defaults otherwise (10
    /// handlers, no delays, faults or limits).
    pub fn new(store: StoreKind, containers: &ContainerIds) -> Result<Arc<Self>, String> {
        let defaults = dn_sim::Config::default();
        let store = ContainerStore::new(store, u64::MAX / 2, None).map_err(|e| e.to_string())?;
        store.precreate(containers);
        let admission = Admission::from_config(Arc::new(store), AdmissionConfig::default())
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(NullDataNode {
            admission,
            rngs: dn_sim::sim::rng::RngFactory::new(defaults.seed),
        }))
    }

    /// A random generator for one client (dn-sim's per-stream draws).
    pub fn rng(&self) -> SmallRng {
        self.rngs.for_stream()
    }

    /// Answers one gRPC-framed request into `into`, as dn-sim's service would: the request is
    /// checked and decoded as dn-sim's codec does, then dispatched.
    pub async fn answer(
        &self,
        frame: RequestBody,
        rng: &mut SmallRng,
        into: &mut ContainerCommandResponseProto,
    ) -> Result<(), Failure> {
        // grpc-java's marshaller failure, which dn-sim's service sends as UNKNOWN.
        let invalid = |m: String| {
            Failure::new(
                ErrorKind::Grpc(Code::Unknown as i32),
                format!("{}: {m}", common::codec::INVALID_PROTOBUF),
            )
        };
        // A WriteChunk's data is a segment of its own (the network path writes it to the socket
        // without a copy); it is checked and decoded in its pieces, so the data reaches the
        // dispatcher as the same `Bytes`, never copied.
        let [head, data, tail] = frame.parts();
        if head.len() < 5 || head[0] != 0 {
            return Err(invalid("not an uncompressed gRPC frame".into()));
        }
        let message = head.slice(5..);
        ContainerCommandRequestProto::check_required_parts(&[&message, data, tail])
            .map_err(|e| invalid(e.to_string()))?;
        // A chain of `Bytes` hands a `bytes` field lying inside one piece out as a slice of it.
        let req =
            ContainerCommandRequestProto::decode(message.chain(data.clone()).chain(tail.clone()))
                .map_err(|e| invalid(e.to_string()))?;
        let outcome = self.admission.dispatch(req, rng, false).await;
        // An answer that is ready at once would let this worker run on without ever giving way
        // to the other workers of its I/O thread; a real RPC always waits for its answer.
        tokio::task::yield_now().await;
        match outcome {
            Outcome::Answer(resp) => {
                *into = resp;
                Ok(())
            }
            Outcome::Fail(status) => Err(Failure::new(
                ErrorKind::Grpc(status.code() as i32),
                status.message().to_string(),
            )),
            // No answer, ever: the caller's deadline fires.
            Outcome::Drop => std::future::pending().await,
            Outcome::Reset => Err(Failure::new(
                ErrorKind::Transport,
                "the stream was reset (RST_STREAM CANCEL)",
            )),
        }
    }
}

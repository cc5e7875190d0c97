//! Echo (freon dn-echo): a read-only Echo with a request payload the DataNode ignores and a
//! response payload of `payloadSizeResp` bytes. A unit is one Echo; the request is encoded once
//! and every send shares it.

use super::{Rpc, RpcKind, WorkerLoad, Workload};
use crate::outcome::Failure;
use bytes::Bytes;
use common::proto::{
    ContainerCommandRequestProto, ContainerCommandResponseProto, EchoRequestProto, Type,
};

/// What each echo asks for.
#[derive(Clone, Debug)]
pub struct EchoConfig {
    pub payload_req_bytes: usize,
    pub payload_resp_bytes: i32,
    pub sleep_time_ms: i32,
    pub read_only: bool,
}

pub struct Echo {
    template: ContainerCommandRequestProto,
    rpc: Rpc,
    response_len: u64,
}

impl Echo {
    pub fn new(config: &EchoConfig, container_id: i64, datanode_uuid: &str) -> Self {
        // Built once; a persistent stream's requests clone the template, which shares the
        // payload by reference count instead of copying it.
        let payload = Bytes::from(vec![0x5a; config.payload_req_bytes]);
        let template = ContainerCommandRequestProto {
            cmd_type: Type::Echo as i32,
            container_id,
            datanode_uuid: datanode_uuid.to_string(),
            echo: Some(EchoRequestProto {
                payload: Some(payload),
                payload_size_resp: Some(config.payload_resp_bytes),
                sleep_time_ms: Some(config.sleep_time_ms),
                read_only: Some(config.read_only),
            }),
            ..Default::default()
        };
        let request_len = config.payload_req_bytes as u64;
        let response_len = config.payload_resp_bytes.max(0) as u64;
        let (throttle_op, throttle_bytes) = crate::throttle::op_of(request_len, response_len);
        Self {
            rpc: Rpc {
                kind: RpcKind::Echo,
                frame: crate::connection::unary::grpc_frame(&template).into(),
                request_bytes: request_len,
                goodput_bytes: request_len,
                throttle_op,
                throttle_bytes,
            },
            template,
            response_len,
        }
    }
}

impl Workload for Echo {
    fn worker(&self, _idx: usize) -> Box<dyn WorkerLoad> {
        Box::new(EchoWorker {
            rpc: self.rpc.clone(),
            pending: false,
        })
    }

    fn single_rpc(&self) -> bool {
        true
    }

    fn pipelined_request(&self) -> Option<ContainerCommandRequestProto> {
        Some(self.template.clone())
    }

    fn single_rpc_bytes(&self) -> (u64, u64) {
        (self.rpc.request_bytes, self.response_len)
    }
}

struct EchoWorker {
    rpc: Rpc,
    /// The unit's one RPC is still to be sent.
    pending: bool,
}

impl WorkerLoad for EchoWorker {
    fn begin(&mut self) -> bool {
        self.pending = true;
        true
    }

    fn next(&mut self) -> Option<Rpc> {
        if std::mem::take(&mut self.pending) {
            Some(self.rpc.clone())
        } else {
            None
        }
    }

    fn judge(&mut self, resp: &ContainerCommandResponseProto) -> Result<u64, Failure> {
        Ok(echo_bytes(resp))
    }
}

/// Payload bytes of an Echo answer.
pub fn echo_bytes(resp: &ContainerCommandResponseProto) -> u64 {
    resp.echo
        .as_ref()
        .and_then(|e| e.payload.as_ref())
        .map_or(0, |p| p.len() as u64)
}

//! Echo (freon dn-echo): a read-only Echo with a request payload the DataNode ignores and a
//! response payload of `payloadSizeResp` bytes.

use super::Workload;
use crate::config::EchoConfig;
use bytes::Bytes;
use common::proto::{
    ContainerCommandRequestProto, ContainerCommandResponseProto, EchoRequestProto, Type,
};

pub struct Echo {
    template: ContainerCommandRequestProto,
    /// The template, gRPC-framed once.
    framed: Bytes,
    payload_len: u64,
    response_len: u64,
}

impl Echo {
    pub fn new(config: &EchoConfig, container_id: i64, datanode_uuid: &str) -> Self {
        // Built once; each request clones the template, which shares the payload by reference
        // count instead of copying it.
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
        Self {
            framed: crate::connection::unary::grpc_frame(&template),
            template,
            payload_len: config.payload_req_bytes as u64,
            response_len: config.payload_resp_bytes.max(0) as u64,
        }
    }
}

impl Workload for Echo {
    fn request(&self, _worker: usize, _seq: u64) -> ContainerCommandRequestProto {
        self.template.clone()
    }

    fn framed_request(&self, _worker: usize, _seq: u64) -> Bytes {
        self.framed.clone()
    }

    fn request_bytes(&self) -> u64 {
        self.payload_len
    }

    fn response_bytes_hint(&self) -> u64 {
        self.response_len
    }

    fn response_bytes(&self, resp: &ContainerCommandResponseProto) -> u64 {
        resp.echo
            .as_ref()
            .and_then(|e| e.payload.as_ref())
            .map_or(0, |p| p.len() as u64)
    }
}

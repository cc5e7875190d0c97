//! Per-request logic, in the order of Ozone's `HddsDispatcher.dispatchRequest`
//! (shared/ozone/protocol.md §4): look up the container, route by `cmdType`, build the response
//! envelope. Application errors are normal responses with `result != SUCCESS`; only failures the
//! real DataNode reports through `onError` become a gRPC status.

use crate::containers::ContainerIds;
use crate::payload::PayloadSource;
use common::proto::{
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    EchoResponseProto, Result as OzoneResult, Type,
};
use std::time::Duration;
use tonic::Status;

pub struct Dispatcher {
    containers: ContainerIds,
    payloads: PayloadSource,
}

impl Dispatcher {
    pub fn new(containers: ContainerIds) -> Self {
        Self {
            containers,
            payloads: PayloadSource::new(),
        }
    }

    /// Serves one request. `Err` is a gRPC status that fails the whole stream.
    pub async fn dispatch(&self, mut req: Request) -> Result<Response, Status> {
        let Ok(cmd) = Type::try_from(req.cmd_type) else {
            // The codec rejects unknown required enum values before this point; kept for safety.
            return Ok(error(
                &mut req,
                OzoneResult::UnsupportedRequest,
                "Unsupported request type".into(),
            ));
        };
        if cmd != Type::CreateContainer && !self.containers.contains(req.container_id) {
            let msg = format!("ContainerID {} does not exist", req.container_id);
            return Ok(error(&mut req, OzoneResult::ContainerNotFound, msg));
        }
        match cmd {
            Type::Echo => self.echo(req).await,
            other => {
                let msg = format!("Unsupported request type {}", other.as_str_name());
                Ok(error(&mut req, OzoneResult::UnsupportedRequest, msg))
            }
        }
    }

    /// `KeyValueHandler.handleEcho`: sleep `sleepTimeMs` on the handler, answer `payloadSizeResp`
    /// bytes of random data; the request payload is ignored.
    async fn echo(&self, mut req: Request) -> Result<Response, Status> {
        let Some(echo) = req.echo.take() else {
            let msg = "Echo request has no echo field".to_string();
            return Ok(error(&mut req, OzoneResult::MalformedRequest, msg));
        };
        let size = echo.payload_size_resp.unwrap_or(0);
        if size < 0 {
            // The DN allocates `new byte[size]`, which throws; the dispatcher answers with
            // CONTAINER_INTERNAL_ERROR (protocol.md §5).
            let msg = format!("java.lang.NegativeArraySizeException: {size}");
            return Ok(error(&mut req, OzoneResult::ContainerInternalError, msg));
        }
        let size = size as usize;
        if size > common::MAX_MESSAGE_SIZE {
            // A real DN would build the response and the client would refuse it as too large.
            return Err(Status::resource_exhausted(format!(
                "gRPC message exceeds maximum size {}: {size}",
                common::MAX_MESSAGE_SIZE
            )));
        }
        if let Some(ms) = echo.sleep_time_ms.filter(|&ms| ms > 0) {
            tokio::time::sleep(Duration::from_millis(ms as u64)).await;
        }
        let mut resp = envelope(&mut req, OzoneResult::Success);
        resp.echo = Some(EchoResponseProto {
            payload: Some(self.payloads.slice(size)),
        });
        Ok(resp)
    }
}

/// The response envelope every answer shares: `cmdType` and `traceID` ("" when absent) copied,
/// `clientId`/`callId` copied only when both are set (protocol.md §2).
pub fn envelope(req: &mut Request, result: OzoneResult) -> Response {
    let (client_id, call_id) = match (req.client_id.take(), req.call_id) {
        (Some(client), Some(call)) => (Some(client), Some(call)),
        _ => (None, None),
    };
    Response {
        cmd_type: req.cmd_type,
        trace_id: Some(req.trace_id.take().unwrap_or_default()),
        result: result as i32,
        client_id,
        call_id,
        ..Default::default()
    }
}

/// An error answer: the envelope plus the exception text in `message`.
pub fn error(req: &mut Request, result: OzoneResult, message: String) -> Response {
    let mut resp = envelope(req, result);
    resp.message = Some(message);
    resp
}

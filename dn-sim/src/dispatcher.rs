//! Per-request logic, in the order of Ozone's `HddsDispatcher.dispatchRequest`
//! (shared/ozone/protocol.md §4): route by `cmdType` (Echo here, everything else to
//! [`KeyValueHandler`], which also runs the container checks), build the response envelope.
//! Application errors are normal responses with `result != SUCCESS`; only failures the real
//! DataNode reports through `onError` become a gRPC status.

use crate::keyvalue::KeyValueHandler;
use crate::payload::PayloadSource;
use crate::store::ContainerStore;
use common::proto::{
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    EchoResponseProto, Result as OzoneResult, Type,
};
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

pub struct Dispatcher {
    keyvalue: KeyValueHandler,
    payloads: PayloadSource,
}

impl Dispatcher {
    pub fn new(store: Arc<ContainerStore>) -> Self {
        Self {
            keyvalue: KeyValueHandler::new(store),
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
        match cmd {
            Type::Echo => self.echo(req).await,
            other => Ok(self.keyvalue.handle(other, req).await),
        }
    }

    /// `KeyValueHandler.handleEcho`: sleep `sleepTimeMs` on the handler, answer `payloadSizeResp`
    /// bytes of random data; the request payload is ignored.
    async fn echo(&self, mut req: Request) -> Result<Response, Status> {
        let container = match self.keyvalue.store().lookup(req.container_id) {
            Ok(c) => c,
            Err(e) => return Ok(error(&mut req, e.result, e.message)),
        };
        let Some(echo) = req.echo.take() else {
            let msg = "Echo request has no echo field".to_string();
            return Ok(error(&mut req, OzoneResult::MalformedRequest, msg));
        };
        let size = echo.payload_size_resp.unwrap_or(0);
        if size < 0 {
            // The DN allocates `new byte[size]`, which throws; the dispatcher answers with
            // CONTAINER_INTERNAL_ERROR (protocol.md §5), and a non-read-only echo is a failed
            // write, which marks the container UNHEALTHY (§4 step 8).
            if echo.read_only != Some(true) {
                container.mark_unhealthy();
            }
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

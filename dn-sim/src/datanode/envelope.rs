//! The response envelope every answer of the DataNode shares, and error answers.

use common::proto::{
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    Result as OzoneResult,
};

/// The response envelope every answer shares: `cmdType` and `traceID` ("" when absent) copied.
/// `clientId`/`callId` (fields 100/101) exist in no release 2.0–2.2: a real DataNode parses them
/// as unknown fields and never answers them, whatever the request carries.
pub fn envelope(req: &mut Request, result: OzoneResult) -> Response {
    Response {
        cmd_type: req.cmd_type,
        trace_id: Some(req.trace_id.take().unwrap_or_default()),
        result: result as i32,
        ..Default::default()
    }
}

/// An error answer: the envelope plus the exception text in `message`.
pub fn error(req: &mut Request, result: OzoneResult, message: String) -> Response {
    let mut resp = envelope(req, result);
    resp.message = Some(message);
    resp
}

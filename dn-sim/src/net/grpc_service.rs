//! `XceiverClientProtocolService.send`: one bidirectional stream carries requests that are
//! answered one each, in order. Both client patterns work: the Java client's one request per
//! stream followed by half-close, and many requests on one long stream.

use crate::datanode::version::OzoneVersion;
use crate::sim::admission::{Admission, Outcome};
use crate::sim::rng::RngFactory;
use crate::sim::stages::Direction;
use common::proto::xceiver_client_protocol_service_server::XceiverClientProtocolService;
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
use futures_util::Stream;
use prost::Message;
use std::pin::Pin;
use std::sync::Arc;
use tonic::{Code, Request, Response, Status, Streaming};

pub struct XceiverService {
    admission: Arc<Admission>,
    rngs: RngFactory,
}

impl XceiverService {
    pub fn new(admission: Arc<Admission>, rngs: RngFactory) -> Self {
        Self { admission, rngs }
    }
}

type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<ContainerCommandResponseProto, Status>> + Send>>;

/// What the server knows of the connection a stream came on (tonic puts it in each request's
/// extensions): its address and, when a profile models event loops (`sim::stages`), its ticket
/// from the loops' round-robin chooser (its loop is the ticket modulo the loops of the moment).
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    pub tcp: tonic::transport::server::TcpConnectInfo,
    pub event_loop: Option<usize>,
}

/// Counts a stream as open for as long as its response stream lives; knows its connection's
/// event loop, if loops are modelled.
struct OpenStream(Arc<Admission>, Option<usize>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.metrics.stream_closed();
    }
}

impl OpenStream {
    /// A message passes the stream's event loop (nothing without a modelled loop).
    async fn pass_loop(&self, direction: Direction, bytes: impl FnOnce() -> usize) {
        if let (Some(loops), Some(i)) = (&self.0.stages.event_loops, self.1) {
            loops.pass(i, direction, bytes()).await;
        }
    }
}

#[tonic::async_trait]
impl XceiverClientProtocolService for XceiverService {
    type sendStream = ResponseStream;

    async fn send(
        &self,
        request: Request<Streaming<ContainerCommandRequestProto>>,
    ) -> Result<Response<ResponseStream>, Status> {
        // `early` limit rejections come before the stream's request is read (Trailers-Only).
        let limits = &self.admission.limits;
        let early = limits.is_limited()
            && limits.policy().timing == crate::sim::service_limits::RejectTiming::Early;
        if early && let Err(rejection) = limits.check_early(std::time::Instant::now()) {
            self.admission.metrics.rejected(rejection.reason.label());
            return Err(limits.status(rejection));
        }
        self.admission.metrics.stream_opened();
        let event_loop = match &self.admission.stages.event_loops {
            Some(_) => request
                .extensions()
                .get::<ConnectionInfo>()
                .and_then(|c| c.event_loop),
            None => None,
        };
        let open = OpenStream(Arc::clone(&self.admission), event_loop);
        // The response stream pulls the next request only after the previous answer was taken,
        // which keeps one stream's requests in order and needs no task or channel per stream.
        // An inbound error (a request that fails to parse, or one over the message limit) ends the
        // stream with the status the release's grpc-java sends (`inbound_error`). Each stream
        // draws its delays and faults from its own seeded generator. `answered`: a response went
        // out on this stream (grpc-java has then sent the headers).
        // With an early check, the stream's first request has been charged its ops token.
        // The stream's share of the in-flight budget (`crate::net::inflight_budget`), when the server has one.
        let budget = request
            .extensions()
            .get::<Arc<crate::net::inflight_budget::StreamCharge>>()
            .cloned();
        let state = (
            (request.into_inner(), budget),
            open,
            self.rngs.for_stream(),
            false,
            early,
            false,
        );
        let responses = futures_util::stream::unfold(
            state,
            |((mut inbound, budget), open, mut rng, ended, charged, answered)| async move {
                // Polled again: the previous answer is out (or all but h2's send buffer of it).
                if let Some(b) = &budget {
                    b.release_all();
                }
                if ended {
                    return None;
                }
                let version = open.0.version;
                let item = match inbound.message().await {
                    Ok(Some(req)) if !version.defines_cmd_type(req.cmd_type) => {
                        tracing::debug!(
                            cmd_type = req.cmd_type,
                            "request failed to parse: cmdType {} is not a command type of Ozone {version}",
                            req.cmd_type
                        );
                        Err(version.parse_failure_status())
                    }
                    Ok(Some(req)) => {
                        let req = match &budget {
                            Some(b) => {
                                let (req, compacted) =
                                    crate::net::inflight_budget::compact(req, b.last_message_len());
                                if let Some(kept) = compacted {
                                    // The stream holds only this request's prefix and bytes now.
                                    b.release_all();
                                    b.charge(kept + 5);
                                }
                                b.charge(crate::net::inflight_budget::decoded_extra(&req));
                                let answer = crate::net::inflight_budget::expected_answer(
                                    open.0.store(),
                                    &req,
                                )
                                .await;
                                if let Err(status) = b.reserve(answer).await {
                                    b.release_all();
                                    return Some((
                                        Err(status),
                                        ((inbound, budget), open, rng, true, false, answered),
                                    ));
                                }
                                req
                            }
                            None => req,
                        };
                        open.pass_loop(Direction::Request, || req.encoded_len())
                            .await;
                        let outcome = open.0.dispatch(req, &mut rng, charged).await;
                        // An answer or a status goes out through the loop; a drop or a reset
                        // writes no message.
                        match &outcome {
                            Outcome::Answer(resp) => {
                                open.pass_loop(Direction::Response, || resp.encoded_len())
                                    .await
                            }
                            Outcome::Fail(_) => open.pass_loop(Direction::Response, || 0).await,
                            Outcome::Drop | Outcome::Reset => {}
                        }
                        // The request is done: its bytes go, the answer's come.
                        if let Some(b) = &budget {
                            b.release_all();
                            if let Outcome::Answer(resp) = &outcome {
                                b.charge(resp.encoded_len() as u64);
                            }
                        }
                        match outcome {
                            Outcome::Answer(resp) => Ok(resp),
                            Outcome::Fail(status) => Err(status),
                            Outcome::Reset => Err(crate::net::reset::reset_status()),
                            Outcome::Drop => std::future::pending().await,
                        }
                    }
                    Ok(None) => return None,
                    Err(status) => Err(inbound_error(status, version, answered)),
                };
                let ended = item.is_err();
                let answered = answered || item.is_ok();
                Some((item, ((inbound, budget), open, rng, ended, false, answered)))
            },
        );
        Ok(Response::new(Box::pin(responses)))
    }
}

/// The status a real DataNode of `version` ends the stream with when the inbound request fails
/// before it reaches the service (tonic's decoder, `common::codec::OzoneCodec`):
/// - a request that fails to parse (garbage, a missing required field at any depth, an unknown
///   value of a required enum): UNKNOWN, described per release (`parse_failure_status`); the
///   parser's reason is only logged (debug);
/// - a request over the 32 MiB limit: grpc-java's deframer fails it with RESOURCE_EXHAUSTED
///   "gRPC message exceeds maximum size 33554432: <length>". Ozone 2.1.0/2.2.0 (grpc ≥ 1.64)
///   send that status while the stream has sent no headers (no earlier answer) and otherwise
///   RST_STREAM(CANCEL); 2.0.0 (grpc 1.58) always resets the stream with CANCEL.
///
/// Anything else (a transport error) is passed on.
pub fn inbound_error(status: Status, version: OzoneVersion, answered: bool) -> Status {
    if status.code() == Code::Internal
        && status
            .message()
            .starts_with(common::codec::INVALID_PROTOBUF)
    {
        tracing::debug!(reason = status.message(), "request failed to parse");
        return version.parse_failure_status();
    }
    if status.code() == Code::OutOfRange
        && let Some(len) = oversize_length(status.message())
    {
        tracing::debug!(
            length = len,
            limit = common::MAX_MESSAGE_SIZE,
            "request over the message size limit"
        );
        let text = format!(
            "gRPC message exceeds maximum size {}: {len}",
            common::MAX_MESSAGE_SIZE
        );
        if version.at_least(OzoneVersion::V2_1) && !answered {
            return Status::resource_exhausted(text);
        }
        return crate::net::reset::cancel_status(&text);
    }
    status
}

/// The length in tonic's "Error, decoded message length too large: found N bytes, the limit is:
/// M bytes".
pub(crate) fn oversize_length(message: &str) -> Option<u64> {
    let rest = message.strip_prefix("Error, decoded message length too large: found ")?;
    rest.split_once(' ')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_large() -> Status {
        Status::out_of_range(
            "Error, decoded message length too large: found 34603065 bytes, the limit is: 33554432 bytes",
        )
    }

    #[test]
    fn parse_failures_become_the_release_s_unknown() {
        let parse = || {
            Status::internal(format!(
                "{}: truncated or malformed message",
                common::codec::INVALID_PROTOBUF
            ))
        };
        for v in OzoneVersion::ALL {
            for answered in [false, true] {
                let s = inbound_error(parse(), v, answered);
                assert_eq!(s.code(), Code::Unknown);
                assert_eq!(s.message(), v.parse_failure_status().message());
            }
        }
        assert_eq!(
            inbound_error(parse(), OzoneVersion::V2_0, false).message(),
            ""
        );
        assert_eq!(
            inbound_error(parse(), OzoneVersion::V2_2, false).message(),
            "Application error processing RPC"
        );
    }

    #[test]
    fn oversize_requests_per_release() {
        for v in [OzoneVersion::V2_1, OzoneVersion::V2_2] {
            let s = inbound_error(too_large(), v, false);
            assert_eq!(s.code(), Code::ResourceExhausted);
            assert_eq!(
                s.message(),
                "gRPC message exceeds maximum size 33554432: 34603065"
            );
            // After an answer the headers are out: the stream is reset (CANCEL).
            let s = inbound_error(too_large(), v, true);
            assert_eq!(s.code(), Code::Cancelled);
            assert!(s.metadata().contains_key("x-dn-sim-reset"));
        }
        let s = inbound_error(too_large(), OzoneVersion::V2_0, false);
        assert_eq!(s.code(), Code::Cancelled);
        assert!(s.metadata().contains_key("x-dn-sim-reset"));
    }

    #[test]
    fn other_errors_pass_through() {
        let s = inbound_error(Status::cancelled("h2"), OzoneVersion::V2_2, false);
        assert_eq!((s.code(), s.message()), (Code::Cancelled, "h2"));
        assert_eq!(oversize_length("found 1 bytes"), None);
    }
}

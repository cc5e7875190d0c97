//! The `reset` fault: end a stream with RST_STREAM instead of a gRPC status. A tonic handler can
//! only end a stream with trailers, so the dispatcher returns a status carrying a marker, and this
//! layer turns the marked trailers into a body error, on which the HTTP/2 server resets the
//! stream. The client sees a transport-level stream error, as after a crash or a proxy reset.

use bytes::Bytes;
use http_body::{Body, Frame};
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::Status;

const MARKER: &str = "x-dn-sim-reset";

/// The status the dispatcher returns for a `reset` fault.
pub fn reset_status() -> Status {
    let mut status = Status::internal("stream reset by dn-sim (--fault reset)");
    status
        .metadata_mut()
        .insert(MARKER, "1".parse().expect("static ASCII value"));
    status
}

/// A status that ends the stream with RST_STREAM(CANCEL) instead: what grpc-java's Netty server
/// sends when it cancels a stream (e.g. an over-limit request on Ozone 2.0.0, or on 2.1.0/2.2.0
/// once the stream has sent headers).
pub fn cancel_status(why: &str) -> Status {
    let mut status = Status::cancelled(why.to_string());
    status
        .metadata_mut()
        .insert(MARKER, CANCEL.parse().expect("static ASCII value"));
    status
}

const CANCEL: &str = "cancel";

/// Wraps response bodies so that marked trailers become a stream reset.
#[derive(Clone, Copy, Debug, Default)]
pub struct ResetLayer;

impl<S> tower::Layer<S> for ResetLayer {
    type Service = ResetService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ResetService(inner)
    }
}

#[derive(Clone, Debug)]
pub struct ResetService<S>(S);

impl<S, Req> tower::Service<Req> for ResetService<S>
where
    S: tower::Service<Req, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let fut = self.0.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            Ok(resp.map(|body| tonic::body::Body::new(ResetBody(body))))
        })
    }
}

struct ResetBody(tonic::body::Body);

#[derive(Debug, thiserror::Error)]
#[error("stream reset by dn-sim (--fault reset)")]
struct ResetError;

/// hyper resets the stream with the `h2::Reason` it finds in a body error's sources.
#[derive(Debug, thiserror::Error)]
#[error("stream cancelled by dn-sim")]
struct CancelError(#[source] h2::Error);

impl Body for ResetBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.0).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(mark) = frame.trailers_ref().and_then(|t| t.get(MARKER)) {
                    if mark == CANCEL {
                        let cancel = h2::Error::from(h2::Reason::CANCEL);
                        return Poll::Ready(Some(Err(Box::new(CancelError(cancel)))));
                    }
                    return Poll::Ready(Some(Err(Box::new(ResetError))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(status))) => Poll::Ready(Some(Err(Box::new(status)))),
            other => other.map(|o| o.map(|r| r.map_err(|s| Box::new(s) as Self::Error))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}

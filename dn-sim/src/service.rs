//! `XceiverClientProtocolService.send`: one bidirectional stream carries requests that are
//! answered one each, in order. Both client patterns work: the Java client's one request per
//! stream followed by half-close, and many requests on one long stream.

use crate::dispatcher::{Dispatcher, Outcome};
use crate::rng::RngFactory;
use common::proto::xceiver_client_protocol_service_server::XceiverClientProtocolService;
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

pub struct XceiverService {
    dispatcher: Arc<Dispatcher>,
    rngs: RngFactory,
}

impl XceiverService {
    pub fn new(dispatcher: Arc<Dispatcher>, rngs: RngFactory) -> Self {
        Self { dispatcher, rngs }
    }
}

type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<ContainerCommandResponseProto, Status>> + Send>>;

/// Counts a stream as open for as long as its response stream lives.
struct OpenStream(Arc<Dispatcher>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.metrics.stream_closed();
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
        let limits = &self.dispatcher.limits;
        let early = limits.is_limited()
            && limits.policy().timing == crate::service_limits::RejectTiming::Early;
        if early && let Err(rejection) = limits.check_early(std::time::Instant::now()) {
            self.dispatcher.metrics.rejected(rejection.reason.label());
            return Err(limits.status(rejection));
        }
        self.dispatcher.metrics.stream_opened();
        let open = OpenStream(Arc::clone(&self.dispatcher));
        // The response stream pulls the next request only after the previous answer was taken,
        // which keeps one stream's requests in order and needs no task or channel per stream.
        // An inbound error (e.g. a request that fails the required-field check) is forwarded as
        // the stream's status, as grpc-java does, and ends the stream. Each stream draws its
        // delays and faults from its own seeded generator.
        // With an early check, the stream's first request has been charged its ops token.
        let state = (
            request.into_inner(),
            open,
            self.rngs.for_stream(),
            false,
            early,
        );
        let responses = futures_util::stream::unfold(
            state,
            |(mut inbound, open, mut rng, ended, charged)| async move {
                if ended {
                    return None;
                }
                let item = match inbound.message().await {
                    Ok(Some(req)) => match open.0.dispatch(req, &mut rng, charged).await {
                        Outcome::Answer(resp) => Ok(resp),
                        Outcome::Fail(status) => Err(status),
                        Outcome::Reset => Err(crate::reset::reset_status()),
                        Outcome::Drop => std::future::pending().await,
                    },
                    Ok(None) => return None,
                    Err(status) => Err(status),
                };
                let ended = item.is_err();
                Some((item, (inbound, open, rng, ended, false)))
            },
        );
        Ok(Response::new(Box::pin(responses)))
    }
}

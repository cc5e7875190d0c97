//! `XceiverClientProtocolService.send`: one bidirectional stream carries requests that are
//! answered one each, in order. Both client patterns work: the Java client's one request per
//! stream followed by half-close, and many requests on one long stream.

use crate::dispatcher::Dispatcher;
use common::proto::xceiver_client_protocol_service_server::XceiverClientProtocolService;
use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

pub struct XceiverService {
    dispatcher: Arc<Dispatcher>,
}

impl XceiverService {
    pub fn new(dispatcher: Arc<Dispatcher>) -> Self {
        Self { dispatcher }
    }
}

type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<ContainerCommandResponseProto, Status>> + Send>>;

#[tonic::async_trait]
impl XceiverClientProtocolService for XceiverService {
    type sendStream = ResponseStream;

    async fn send(
        &self,
        request: Request<Streaming<ContainerCommandRequestProto>>,
    ) -> Result<Response<ResponseStream>, Status> {
        // The response stream pulls the next request only after the previous answer was taken,
        // which keeps one stream's requests in order and needs no task or channel per stream.
        // An inbound error (e.g. a request that fails the required-field check) is forwarded as
        // the stream's status, as grpc-java does, and ends the stream.
        let state = (request.into_inner(), Arc::clone(&self.dispatcher), false);
        let responses =
            futures_util::stream::unfold(state, |(mut inbound, dispatcher, failed)| async move {
                if failed {
                    return None;
                }
                match inbound.message().await {
                    Ok(Some(req)) => {
                        let resp = dispatcher.dispatch(req).await;
                        let failed = resp.is_err();
                        Some((resp, (inbound, dispatcher, failed)))
                    }
                    Ok(None) => None,
                    Err(status) => Some((Err(status), (inbound, dispatcher, true))),
                }
            });
        Ok(Response::new(Box::pin(responses)))
    }
}

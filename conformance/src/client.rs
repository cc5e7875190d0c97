//! The gRPC side: raw messages on `XceiverClientProtocolService/send`, one stream per request or
//! one stream for a whole scenario, and each answer as JSON.
//!
//! An answer is one of
//! - `{"response": <the decoded ContainerCommandResponseProto>}`,
//! - `{"status": {"code": "INTERNAL", "message": "…"}}` (a gRPC status that ended the call),
//! - `{"no_answer": "<why>"}` (the stream ended without an answer, or none came in time),
//! - `{"undecodable": {"error": "…", "bytes": "…"}}` (a message that is not a response).

use bytes::Bytes;
use grpc_client::raw::RawCodec;
use serde_json::{Value as Json, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::Streaming;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

/// The method every request goes to.
pub const SEND_PATH: &str = "/hadoop.hdds.datanode.XceiverClientProtocolService/send";

/// Message limit of the client, both ways: above the DataNode's 32 MiB, so that over-limit
/// requests reach the server and its answer is what gets compared.
pub const MAX_MESSAGE: usize = 64 << 20;

/// `{"status": {"code": NAME, "message": …}}`
pub fn status_answer(status: &Status) -> Json {
    json!({"status": {"code": common::grpc::grpc_code_name(status.code()), "message": status.message()}})
}

/// `{"no_answer": why}`
pub fn no_answer(why: impl Into<String>) -> Json {
    json!({"no_answer": why.into()})
}

/// The answer a message from the server stands for.
pub fn message_answer(bytes: &[u8]) -> Json {
    match crate::proto::decode_response(bytes) {
        Ok(json) => json!({"response": json}),
        Err(e) => json!({"undecodable": {
            "error": e.to_string(),
            "bytes": crate::normalize::normalize_bytes(bytes),
        }}),
    }
}

/// One connection to a target.
#[derive(Clone)]
pub struct Client {
    channel: Channel,
    timeout: Duration,
}

impl Client {
    /// Connects to `addr` (`HOST:PORT`, plain text). `timeout` bounds each answer.
    pub async fn connect(addr: &str, timeout: Duration) -> anyhow::Result<Client> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true);
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to {addr}: {e}"))?;
        Ok(Client { channel, timeout })
    }

    /// How long each answer may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A raw-bytes gRPC client on the connection, with [`MAX_MESSAGE`] both ways.
    pub fn grpc(&self) -> tonic::client::Grpc<Channel> {
        tonic::client::Grpc::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// Sends one message on a new stream, half-closed at once, and returns the first answer.
    pub async fn per_request(&self, message: Bytes) -> Json {
        let mut grpc = self.grpc();
        let call = async move {
            if let Err(e) = grpc.ready().await {
                return no_answer(format!("connection not ready: {e}"));
            }
            let request = Request::new(tokio_stream::once(message));
            let path = tonic::codegen::http::uri::PathAndQuery::from_static(SEND_PATH);
            match grpc.streaming(request, path, RawCodec).await {
                Err(status) => status_answer(&status),
                Ok(response) => next_answer(&mut response.into_inner()).await,
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => no_answer(format!("no answer within {} s", self.timeout.as_secs())),
        }
    }

    /// A stream for a one-stream scenario, opened with its first message.
    pub fn stream(&self) -> OneStream {
        OneStream {
            client: self.clone(),
            state: State::NotOpen,
        }
    }
}

async fn next_answer(stream: &mut Streaming<Bytes>) -> Json {
    match stream.message().await {
        Ok(Some(bytes)) => message_answer(&bytes),
        Ok(None) => no_answer("the stream ended without an answer"),
        Err(status) => status_answer(&status),
    }
}

enum State {
    NotOpen,
    Open {
        tx: mpsc::Sender<Bytes>,
        inbound: Box<Streaming<Bytes>>,
    },
    /// Why later steps get no answer.
    Ended(String),
}

/// All of a scenario's requests on one bidi stream; each answer is awaited before the next
/// request goes out, so answers pair with requests in order.
pub struct OneStream {
    client: Client,
    state: State,
}

impl OneStream {
    pub async fn send(&mut self, message: Bytes) -> Json {
        let timeout = self.client.timeout;
        let late = || no_answer(format!("no answer within {} s", timeout.as_secs()));
        match std::mem::replace(&mut self.state, State::Ended(String::new())) {
            State::Ended(why) => {
                self.state = State::Ended(why.clone());
                no_answer(why)
            }
            State::NotOpen => {
                let (tx, rx) = mpsc::channel(16);
                // The first message is queued before the call starts: a server may send its
                // headers only with its first answer.
                let _ = tx.send(message).await;
                let mut grpc = self.client.grpc();
                let open = async move {
                    grpc.ready()
                        .await
                        .map_err(|e| Status::unavailable(format!("connection not ready: {e}")))?;
                    let path = tonic::codegen::http::uri::PathAndQuery::from_static(SEND_PATH);
                    grpc.streaming(Request::new(ReceiverStream::new(rx)), path, RawCodec)
                        .await
                };
                match tokio::time::timeout(timeout, open).await {
                    Err(_) => {
                        self.state = State::Ended("an earlier answer timed out".into());
                        late()
                    }
                    Ok(Err(status)) => {
                        self.state = State::Ended(format!(
                            "the stream had ended (status {})",
                            common::grpc::grpc_code_name(status.code())
                        ));
                        status_answer(&status)
                    }
                    Ok(Ok(response)) => {
                        let inbound = Box::new(response.into_inner());
                        self.state = State::Open { tx, inbound };
                        self.receive(timeout).await
                    }
                }
            }
            State::Open { tx, inbound } => {
                if tx.send(message).await.is_err() {
                    self.state = State::Ended("the stream is closed".into());
                    return no_answer("the request stream is closed");
                }
                self.state = State::Open { tx, inbound };
                self.receive(timeout).await
            }
        }
    }

    async fn receive(&mut self, timeout: Duration) -> Json {
        let State::Open { inbound, .. } = &mut self.state else {
            return no_answer("the stream is not open");
        };
        match tokio::time::timeout(timeout, next_answer(inbound)).await {
            Err(_) => {
                self.state = State::Ended("an earlier answer timed out".into());
                no_answer(format!("no answer within {} s", timeout.as_secs()))
            }
            Ok(answer) => {
                if let Some(obj) = answer.as_object()
                    && !obj.contains_key("response")
                    && !obj.contains_key("undecodable")
                {
                    let why = match obj.get("status") {
                        Some(s) => format!(
                            "the stream had ended (status {})",
                            s["code"].as_str().unwrap_or("?")
                        ),
                        None => "the stream had ended".to_string(),
                    };
                    self.state = State::Ended(why);
                }
                answer
            }
        }
    }
}

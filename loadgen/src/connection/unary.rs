//! The per-request stream path on plain HTTP/2 (the `h2` crate), without tonic's channel: one
//! request = one new HTTP/2 stream carrying one pre-encoded gRPC message, half-closed at once,
//! then the answer and the trailers — exactly what Ozone's Java client puts on the wire
//! (`XceiverClientGrpc.sendCommandAsync`), at a fraction of the CPU per request, so that loadgen
//! is not the bottleneck. The long-lived streams of `--stream-mode persistent` use tonic.
//!
//! Each connection is shared by its workers through clones of one `SendRequest` (no lock). When
//! the connection breaks, the first worker to notice re-establishes it (under a lock taken only
//! on that path); the others pick up the new one.

use crate::outcome::{Answer, ErrorKind, Failure};
use crate::workload::Workload;
use bytes::{Buf, Bytes, BytesMut};
use common::proto::ContainerCommandResponseProto;
use common::wire::RequiredFields;
use h2::client::SendRequest;
use http::{HeaderValue, Method, Request, Uri};
use prost::Message;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tonic::Code;

const PATH: &str = "/hadoop.hdds.datanode.XceiverClientProtocolService/send";

/// One HTTP/2 connection to the target, re-established when it breaks. Must be opened and used
/// inside a `LocalSet` (loadgen's I/O threads).
pub struct UnaryConnection {
    hostport: String,
    uri: Uri,
    connect_timeout: Duration,
    /// `grpc-timeout`, as the Java client sends its deadline.
    grpc_timeout: HeaderValue,
    current: tokio::sync::Mutex<(u64, SendRequest<Bytes>)>,
}

/// A worker's handle on a connection.
pub struct UnaryClient {
    conn: Arc<UnaryConnection>,
    generation: u64,
    send: SendRequest<Bytes>,
    /// Responses are decoded into this one (a response is 1.3 KB: decoding in place saves
    /// copying it up the call chain and allocating per request).
    response: Box<ContainerCommandResponseProto>,
}

async fn handshake(hostport: &str, timeout: Duration) -> Result<SendRequest<Bytes>, String> {
    let connect = async {
        let tcp = TcpStream::connect(hostport)
            .await
            .map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(8 << 20)
            .initial_connection_window_size(32 << 20)
            .max_frame_size(1 << 20)
            .max_send_buffer_size(4 << 20)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| e.to_string())?;
        // The connection task runs on the same thread and queue as its workers (an I/O thread's
        // LocalSet), so waking one from the other is a local queue push.
        tokio::task::spawn_local(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
        });
        Ok::<_, String>(send)
    };
    match tokio::time::timeout(timeout, connect).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

impl UnaryConnection {
    /// Opens the connection (eagerly: an unreachable target fails at once).
    pub async fn connect(
        hostport: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Arc<Self>, String> {
        let send = handshake(hostport, connect_timeout).await?;
        let uri: Uri = format!("http://{hostport}{PATH}")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let millis = request_timeout.as_millis().clamp(1, 99_999_999);
        Ok(Arc::new(UnaryConnection {
            hostport: hostport.to_string(),
            uri,
            connect_timeout,
            grpc_timeout: HeaderValue::from_str(&format!("{millis}m")).expect("ASCII digits"),
            current: tokio::sync::Mutex::new((0, send)),
        }))
    }

    pub async fn client(self: &Arc<Self>) -> UnaryClient {
        let guard = self.current.lock().await;
        UnaryClient {
            conn: Arc::clone(self),
            generation: guard.0,
            send: guard.1.clone(),
            response: Box::default(),
        }
    }
}

fn transport(message: impl Into<String>) -> Failure {
    Failure::new(ErrorKind::Transport, message)
}

fn h2_failure(e: &h2::Error) -> Failure {
    transport(crate::connection::error_chain(e))
}

impl UnaryClient {
    /// Replaces a broken connection (or takes the one another worker already made).
    async fn reconnect(&mut self) -> Result<(), Failure> {
        let mut guard = self.conn.current.lock().await;
        if guard.0 == self.generation {
            let send = handshake(&self.conn.hostport, self.conn.connect_timeout)
                .await
                .map_err(|e| {
                    transport(format!("cannot reconnect to {}: {e}", self.conn.hostport))
                })?;
            *guard = (guard.0 + 1, send);
        }
        self.generation = guard.0;
        self.send = guard.1.clone();
        Ok(())
    }

    /// One request on a new stream: `frame` is the gRPC-framed request message; the answer is
    /// judged by `workload`. The caller bounds the time; dropping this future resets the stream.
    pub async fn call(&mut self, frame: Bytes, workload: &dyn Workload) -> Answer {
        match self.exchange(frame).await {
            Ok(()) => crate::engine::request::judge(workload, &self.response),
            Err(failure) => Answer::Failure(failure),
        }
    }

    /// Sends `frame` and decodes the answer into `self.response`.
    async fn exchange(&mut self, frame: Bytes) -> Result<(), Failure> {
        if futures_util::future::poll_fn(|cx| self.send.poll_ready(cx))
            .await
            .is_err()
        {
            self.reconnect().await?;
            futures_util::future::poll_fn(|cx| self.send.poll_ready(cx))
                .await
                .map_err(|e| h2_failure(&e))?;
        }
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.conn.uri.clone();
        let headers = request.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
        headers.insert("grpc-timeout", self.conn.grpc_timeout.clone());
        let (response, mut stream) = match self.send.send_request(request, false) {
            Ok(r) => r,
            Err(e) => {
                // The connection went away between ready and send (e.g. GOAWAY).
                let failure = h2_failure(&e);
                let _ = self.reconnect().await;
                return Err(failure);
            }
        };
        stream.send_data(frame, true).map_err(|e| h2_failure(&e))?;
        let response = response.await.map_err(|e| h2_failure(&e))?;
        let (parts, mut body) = response.into_parts();
        // A trailers-only answer carries its status in the headers.
        check_status(&parts.headers)?;
        if parts.status != http::StatusCode::OK {
            return Err(Failure::new(
                ErrorKind::Grpc(http_to_grpc(parts.status) as i32),
                format!("HTTP status {}", parts.status),
            ));
        }
        let mut data = Bytes::new();
        let mut more: Option<BytesMut> = None;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| h2_failure(&e))?;
            let _ = body.flow_control().release_capacity(chunk.len());
            match &mut more {
                Some(buf) => buf.extend_from_slice(&chunk),
                None if data.is_empty() => data = chunk,
                None => {
                    // A message over several DATA frames: one buffer of the size the gRPC
                    // length prefix announces (bounded by the 32 MiB message limit).
                    let announced = if data.len() >= 5 {
                        5 + u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize
                    } else {
                        0
                    };
                    let capacity = announced
                        .min(5 + common::MAX_MESSAGE_SIZE)
                        .max(data.len() + chunk.len());
                    let mut buf = BytesMut::with_capacity(capacity);
                    buf.extend_from_slice(&data);
                    buf.extend_from_slice(&chunk);
                    more = Some(buf);
                }
            }
        }
        let trailers = body.trailers().await.map_err(|e| h2_failure(&e))?;
        if let Some(trailers) = &trailers {
            check_status(trailers)?;
        }
        let data = more.map_or(data, BytesMut::freeze);
        decode_message(data, &mut self.response)
    }
}

/// A failure for a non-OK `grpc-status`.
fn check_status(headers: &http::HeaderMap) -> Result<(), Failure> {
    let Some(code) = headers.get("grpc-status") else {
        return Ok(());
    };
    let code: i32 = code
        .to_str()
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(Code::Unknown as i32);
    if code == Code::Ok as i32 {
        return Ok(());
    }
    let message = headers
        .get("grpc-message")
        .map(|m| percent_decode(m.as_bytes()))
        .unwrap_or_default();
    let kind = if code == Code::DeadlineExceeded as i32 {
        ErrorKind::Deadline
    } else {
        ErrorKind::Grpc(code)
    };
    let mut failure = Failure::new(kind, message);
    failure.pushback = headers
        .get(crate::retry::PUSHBACK_METADATA_KEY)
        .map(|v| crate::retry::Pushback::parse(v.to_str().unwrap_or("-1")));
    Err(failure)
}

/// `grpc-message` is percent-encoded.
fn percent_decode(raw: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match (
            raw[i],
            raw.get(i + 1).copied().and_then(hex),
            raw.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// gRPC's mapping of HTTP statuses of non-gRPC answers (e.g. from a proxy).
fn http_to_grpc(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// One gRPC-framed message → `into`, with Ozone's required-field check.
fn decode_message(
    mut data: Bytes,
    into: &mut ContainerCommandResponseProto,
) -> Result<(), Failure> {
    let invalid = |m: String| Failure::new(ErrorKind::Grpc(Code::Internal as i32), m);
    if data.len() < 5 {
        return Err(invalid("the stream ended without a response".to_string()));
    }
    if data[0] != 0 {
        return Err(invalid("compressed responses are not supported".into()));
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    data.advance(5);
    if data.len() < len {
        return Err(invalid(format!(
            "truncated message: {} of {len} bytes",
            data.len()
        )));
    }
    let message = data.slice(..len);
    ContainerCommandResponseProto::check_required(&message)
        .map_err(|e| invalid(format!("{}: {e}", common::codec::INVALID_PROTOBUF)))?;
    into.clear();
    into.merge(message)
        .map_err(|e| invalid(format!("{}: {e}", common::codec::INVALID_PROTOBUF)))
}

/// Frames an encoded message for gRPC: no compression, 4-byte big-endian length.
pub fn grpc_frame(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.extend_from_slice(&[0]);
    buf.extend_from_slice(&(len as u32).to_be_bytes());
    message
        .encode(&mut buf)
        .expect("a BytesMut with enough capacity");
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::proto::{Result as OzoneResult, Type};

    #[test]
    fn frames_and_statuses_round_trip() {
        let resp = ContainerCommandResponseProto {
            cmd_type: Type::Echo as i32,
            result: OzoneResult::Success as i32,
            ..Default::default()
        };
        let framed = grpc_frame(&resp);
        assert_eq!(framed[0], 0);
        let mut into = ContainerCommandResponseProto {
            message: Some("left over".into()),
            ..Default::default()
        };
        decode_message(framed, &mut into).unwrap();
        assert_eq!(into, resp);
        assert!(decode_message(Bytes::from_static(&[0, 0, 0]), &mut into).is_err());
        let mut h = http::HeaderMap::new();
        assert!(check_status(&h).is_ok());
        h.insert("grpc-status", HeaderValue::from_static("0"));
        assert!(check_status(&h).is_ok());
        h.insert("grpc-status", HeaderValue::from_static("14"));
        h.insert(
            "grpc-message",
            HeaderValue::from_static("over%20the%20limit%"),
        );
        let f = check_status(&h).unwrap_err();
        assert_eq!(f.kind, ErrorKind::Grpc(Code::Unavailable as i32));
        assert_eq!(f.message, "over the limit%");
        assert_eq!(f.pushback, None);
        h.insert("grpc-retry-pushback-ms", HeaderValue::from_static("250"));
        assert_eq!(
            check_status(&h).unwrap_err().pushback,
            Some(crate::retry::Pushback::RetryAfter(Duration::from_millis(
                250
            )))
        );
        assert_eq!(
            http_to_grpc(http::StatusCode::SERVICE_UNAVAILABLE),
            Code::Unavailable
        );
    }
}

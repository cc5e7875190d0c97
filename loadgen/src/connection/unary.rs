//! The per-request stream path: one request = one new HTTP/2 stream carrying one pre-encoded gRPC
//! message, half-closed at once, then the answer and the trailers — exactly what Ozone's Java
//! client puts on the wire (`XceiverClientGrpc.sendCommandAsync`). It runs on loadgen's own
//! minimal HTTP/2 client ([`super::http2`]) at a fraction of the CPU per request of a generic
//! stack, so that loadgen is not the bottleneck. The long-lived streams of
//! `--stream-mode persistent` use tonic.
//!
//! Each connection is shared by the workers of one I/O thread. When it breaks (or the server
//! sends GOAWAY), the first worker to notice opens a new one (under a lock taken only on that
//! path); the others pick it up.

use super::http2::{self, GrpcHead, RequestBody, StreamError};
use super::null::NullDataNode;
use crate::outcome::{ErrorKind, Failure};
use bytes::{Buf, Bytes, BytesMut};
use common::proto::ContainerCommandResponseProto;
use common::wire::RequiredFields;
use prost::Message;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

const PATH: &str = "/hadoop.hdds.datanode.XceiverClientProtocolService/send";

/// One HTTP/2 connection to the target, re-established when it breaks. Must be opened and used
/// inside a `LocalSet` (loadgen's I/O threads).
pub struct UnaryConnection {
    /// `--target null`: requests are answered in-process and the HTTP/2 fields are unused.
    null: Option<Arc<NullDataNode>>,
    hostport: String,
    /// `--tls`: every (re)connect runs a TLS handshake.
    tls: Option<Arc<super::tls::TargetTls>>,
    connect_timeout: Duration,
    /// `grpc-timeout`, as the Java client sends its deadline.
    grpc_timeout: String,
    /// The connection in use and its generation (bumped by every reconnect).
    current: RefCell<(u64, Option<Rc<http2::Connection>>)>,
    /// Held while reconnecting, so that one worker reconnects and the others wait for it.
    reconnecting: tokio::sync::Mutex<()>,
}

/// A worker's handle on a connection.
pub struct UnaryClient {
    conn: Rc<UnaryConnection>,
    /// `None` with `--target null`.
    h2: Option<Rc<http2::Connection>>,
    /// `--target null`: the in-process DataNode and this client's random draws.
    null: Option<(Arc<NullDataNode>, rand::rngs::SmallRng)>,
    /// The buffer response bodies are received into, reused from call to call.
    body: BytesMut,
    /// The last response's body: `response`'s byte fields are slices of it until it is cleared,
    /// then it becomes `body` again (no allocation per response).
    last_body: Option<Bytes>,
    /// Responses are decoded into this one (decoding in place saves copying it up the call
    /// chain and allocating per request).
    response: Box<ContainerCommandResponseProto>,
}

impl UnaryConnection {
    /// Opens the connection (eagerly: an unreachable target fails at once).
    pub async fn connect(
        hostport: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
        tls: Option<Arc<super::tls::TargetTls>>,
    ) -> Result<Rc<Self>, String> {
        let millis = request_timeout.as_millis().clamp(1, 99_999_999);
        let grpc_timeout = format!("{millis}m");
        let h2 = http2::Connection::connect_with(
            hostport,
            hostport,
            PATH,
            &grpc_timeout,
            connect_timeout,
            tls.as_deref(),
        )
        .await?;
        Ok(Rc::new(UnaryConnection {
            null: None,
            hostport: hostport.to_string(),
            tls,
            connect_timeout,
            grpc_timeout,
            current: RefCell::new((0, Some(h2))),
            reconnecting: tokio::sync::Mutex::new(()),
        }))
    }

    /// A connection to the in-process DataNode of `--target null` (no socket is opened).
    pub fn null(node: Arc<NullDataNode>) -> Rc<Self> {
        Rc::new(UnaryConnection {
            null: Some(node),
            hostport: super::null::NAME.to_string(),
            tls: None,
            connect_timeout: Duration::ZERO,
            grpc_timeout: String::new(),
            current: RefCell::new((0, None)),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    pub async fn client(self: &Rc<Self>) -> UnaryClient {
        UnaryClient {
            conn: Rc::clone(self),
            h2: self.current.borrow().1.clone(),
            null: self.null.as_ref().map(|n| (Arc::clone(n), n.rng())),
            body: BytesMut::new(),
            last_body: None,
            response: Box::default(),
        }
    }
}

fn transport(message: impl Into<String>) -> Failure {
    Failure::new(ErrorKind::Transport, message)
}

impl UnaryClient {
    /// Replaces a connection that takes no new streams (or takes the one another worker
    /// already made).
    async fn reconnect(&mut self) -> Result<(), Failure> {
        let _one_at_a_time = self.conn.reconnecting.lock().await;
        let current = self.conn.current.borrow().1.clone();
        if !current.is_some_and(|c| c.is_usable()) {
            let fresh = http2::Connection::connect_with(
                &self.conn.hostport,
                &self.conn.hostport,
                PATH,
                &self.conn.grpc_timeout,
                self.conn.connect_timeout,
                self.conn.tls.as_deref(),
            )
            .await
            .map_err(|e| transport(format!("cannot reconnect to {}: {e}", self.conn.hostport)))?;
            let mut cur = self.conn.current.borrow_mut();
            *cur = (cur.0 + 1, Some(fresh));
        }
        self.h2 = self.conn.current.borrow().1.clone();
        Ok(())
    }

    /// One request on a new stream: `frame` is the gRPC-framed request message; on `Ok` the
    /// answer is in [`response`](Self::response). The caller bounds the time; dropping this
    /// future resets the stream.
    pub async fn call(&mut self, frame: RequestBody) -> Result<(), Failure> {
        self.exchange(frame).await
    }

    /// The answer of the last successful [`call`](Self::call) (its byte fields share the
    /// received body).
    pub fn response(&self) -> &ContainerCommandResponseProto {
        &self.response
    }

    /// The body buffer back from the last response (whose fields are cleared first).
    fn take_body(&mut self) -> BytesMut {
        self.response.clear();
        let mut body = match self.last_body.take() {
            Some(last) => last.try_into_mut().unwrap_or_default(),
            None => std::mem::take(&mut self.body),
        };
        body.clear();
        body
    }

    /// Sends `frame` and decodes the answer into `self.response`.
    async fn exchange(&mut self, frame: RequestBody) -> Result<(), Failure> {
        let body = self.take_body();
        if let Some((node, rng)) = &mut self.null {
            self.body = body;
            // Boxed, as the connect below: dn-sim's dispatcher is a future of about 23 KB, the
            // connect (TCP, TLS, HTTP/2 handshake) of 1.4 KB; inline they would make every
            // call's future that large, and every call would move it twice (a memcpy that was
            // 12-16 % of loadgen's CPU at 0 B echoes).
            return Box::pin(node.answer(frame, rng, &mut self.response)).await;
        }
        if !self.h2.as_ref().is_some_and(|h| h.is_usable()) {
            self.body = body;
            Box::pin(self.reconnect()).await?;
            let body = std::mem::take(&mut self.body);
            return self.exchange_on(frame, body).await;
        }
        self.exchange_on(frame, body).await
    }

    async fn exchange_on(&mut self, frame: RequestBody, body: BytesMut) -> Result<(), Failure> {
        let h2 = self.h2.as_ref().expect("an HTTP/2 connection");
        match h2.exchange(frame, body).await {
            Ok(response) => {
                if let Some(failure) = head_failure(&response.head) {
                    self.body = response.body;
                    return Err(failure);
                }
                let body = response.body.freeze();
                self.last_body = Some(body.clone());
                decode_message(body, &mut self.response)
            }
            Err((error, body)) => {
                self.body = body;
                Err(match error {
                    StreamError::Transport(m) => transport(m),
                    StreamError::Grpc(code, m) => Failure::new(ErrorKind::Grpc(code as i32), m),
                    StreamError::Protocol(m) => Failure::new(ErrorKind::Protocol, m),
                })
            }
        }
    }
}

/// A failure for a non-OK `grpc-status`, or for a non-gRPC HTTP answer.
fn head_failure(head: &GrpcHead) -> Option<Failure> {
    match head.grpc_status {
        Some(code) if code != Code::Ok as i32 => {
            let message = head
                .grpc_message
                .as_deref()
                .map(percent_decode)
                .unwrap_or_default();
            let kind = if code == Code::DeadlineExceeded as i32 {
                ErrorKind::Deadline
            } else {
                ErrorKind::Grpc(code)
            };
            let mut failure = Failure::new(kind, message);
            failure.pushback = head
                .pushback
                .as_deref()
                .map(|v| crate::retry::Pushback::parse(std::str::from_utf8(v).unwrap_or("-1")));
            Some(failure)
        }
        _ if head.http_status != 200 => Some(Failure::new(
            ErrorKind::Grpc(http_to_grpc(head.http_status) as i32),
            format!("HTTP status {}", head.http_status),
        )),
        _ => None,
    }
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
fn http_to_grpc(status: u16) -> Code {
    match status {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// One gRPC-framed message merged into `into` (which the caller has cleared), with Ozone's
/// required-field check.
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
        let mut into = ContainerCommandResponseProto::default();
        decode_message(framed, &mut into).unwrap();
        assert_eq!(into, resp);
        assert!(decode_message(Bytes::from_static(&[0, 0, 0]), &mut into).is_err());
        let mut h = GrpcHead {
            http_status: 200,
            ..Default::default()
        };
        assert!(head_failure(&h).is_none());
        h.grpc_status = Some(0);
        assert!(head_failure(&h).is_none());
        h.grpc_status = Some(14);
        h.grpc_message = Some(b"over%20the%20limit%".to_vec());
        let f = head_failure(&h).unwrap();
        assert_eq!(f.kind, ErrorKind::Grpc(Code::Unavailable as i32));
        assert_eq!(f.message, "over the limit%");
        assert_eq!(f.pushback, None);
        h.pushback = Some(b"250".to_vec());
        assert_eq!(
            head_failure(&h).unwrap().pushback,
            Some(crate::retry::Pushback::RetryAfter(Duration::from_millis(
                250
            )))
        );
        h.grpc_status = Some(4);
        assert_eq!(head_failure(&h).unwrap().kind, ErrorKind::Deadline);
        let proxy = GrpcHead {
            http_status: 503,
            ..Default::default()
        };
        assert_eq!(
            head_failure(&proxy).unwrap().kind,
            ErrorKind::Grpc(Code::Unavailable as i32)
        );
    }

    /// A call's future is created and moved twice for every request (into the deadline's
    /// `select!`, then pinned), so its size is a per-request memcpy; the rare paths (the
    /// in-process DataNode's dispatcher, the reconnect) are boxed to keep it small.
    #[tokio::test(flavor = "current_thread")]
    async fn a_calls_future_stays_small() {
        use crate::connection::null::NullDataNode;
        use dn_sim::datanode::container_ids::ContainerIds;
        use dn_sim::datanode::store::StoreKind;
        let node = NullDataNode::new(StoreKind::Discard, &ContainerIds::single(1)).unwrap();
        let mut client = UnaryConnection::null(node).client().await;
        let call = client.call(RequestBody::default());
        let size = std::mem::size_of_val(&call);
        assert!(size <= 2048, "a call's future is {size} bytes");
    }
}

//! A minimal HTTP/2 client connection (RFC 9113) for unary gRPC calls, built for loadgen's hot
//! path: one request = one new stream carrying one pre-encoded gRPC message, half-closed at once,
//! then the answer and the trailers.
//!
//! Why not the `h2` crate: for 0-byte echoes the generic stack (stream store, `http` header maps,
//! HPACK encoding of every request, a task wake-up per frame) cost ~8 µs of CPU per request where
//! h2load spends ~7, and on a two-core machine every client microsecond is taken from the
//! DataNode under test. Here a request is a memcpy of a header block encoded once per connection
//! plus its DATA frame into a write buffer that one task flushes for all workers, and a response
//! is decoded by one task that wakes the one worker waiting for it.
//!
//! What it implements: the preface and SETTINGS exchange (it waits for the server's SETTINGS
//! before the first request, so `SETTINGS_MAX_CONCURRENT_STREAMS` is known), flow control both
//! ways (requests larger than the server's windows wait for WINDOW_UPDATE; received DATA is
//! acknowledged at half the advertised windows), HPACK decoding with the dynamic table
//! (`loona-hpack`), CONTINUATION, padding, PING, RST_STREAM both ways (a dropped call — a
//! deadline — resets its stream), GOAWAY (streams above the last one are failed so that they can
//! be retried; new calls go to a new connection), and stream-id exhaustion. Server push is
//! disabled; request headers never use the dynamic table (always legal).
//!
//! Everything runs on one thread: the connection task and the workers share the state through an
//! `Rc<RefCell<_>>` and no borrow is held across an await.
//!
//! The socket is a `Socket` ([`io`]): plain TCP, read and written with `try_read_buf`/`try_write*` as
//! before TLS existed, or TLS (`--tls`, [`super::tls`]) through tokio-rustls's poll functions.
//! One match per read or write call, no trait object: the plain path costs what it did.
//!
//! The pieces, along h2's seams: [`state`] is the connection state machine (streams, the frames
//! received, settings, flow control, errors answered with RST_STREAM or GOAWAY); [`io`] the socket
//! and the connection's task that reads and writes it; [`frame`], [`flow`], [`hpack`] and
//! [`body`] the frame payloads, the windows, the header blocks and the request bodies.

use bytes::BytesMut;
use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::time::Duration;

mod body;
mod flow;
mod frame;
mod hpack;
mod io;
mod state;
#[cfg(test)]
mod tests;

pub use body::RequestBody;
pub use hpack::RequestBlocks;

use state::{Inner, StreamGuard};

/// How a stream ended, as the worker sees it.
#[derive(Debug)]
pub enum StreamError {
    /// The connection or the stream failed (closed, reset, refused, GOAWAY): nothing about the
    /// request's fate is known; the message says what happened.
    Transport(String),
    /// The response broke a gRPC rule (e.g. a message over the size limit).
    Grpc(tonic::Code, String),
    /// The server broke HTTP/2 (a connection or stream error of RFC 9113, answered with GOAWAY
    /// or RST_STREAM) or gRPC's framing (an answer that ends without `grpc-status`).
    Protocol(String),
}

/// The header fields of a response that gRPC cares about (response headers and trailers).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GrpcHead {
    /// `:status` of the response headers (0 until they arrive).
    pub http_status: u16,
    /// `grpc-status` from the trailers, or from the headers of a trailers-only answer.
    pub grpc_status: Option<i32>,
    /// `grpc-message`, still percent-encoded.
    pub grpc_message: Option<Vec<u8>>,
    /// `grpc-retry-pushback-ms`, as sent.
    pub pushback: Option<Vec<u8>>,
}

/// A finished exchange: the head fields and the response body (gRPC-framed message bytes).
#[derive(Debug)]
pub struct Response {
    pub head: GrpcHead,
    pub body: BytesMut,
}

/// One HTTP/2 connection, shared by the workers of one I/O thread (`Rc`; not `Send`).
pub struct Connection {
    inner: Rc<RefCell<Inner>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut inner = self.inner.borrow_mut();
        inner.abandoned = true;
        inner.notify_task();
    }
}

/// RFC 9113 §7 error code names; "error code N" for a code it does not define.
pub fn error_code_name(code: u32) -> String {
    common::http2::error_code_name(code)
        .map_or_else(|| format!("error code {code}"), str::to_string)
}

impl Connection {
    /// Connects, sends the preface and our SETTINGS, and waits for the server's SETTINGS.
    /// Must be called inside a `LocalSet`: the connection's task is spawned there.
    pub async fn connect(
        hostport: &str,
        authority: &str,
        path: &str,
        grpc_timeout: &str,
        timeout: Duration,
    ) -> Result<Rc<Connection>, String> {
        Self::connect_with(hostport, authority, path, grpc_timeout, timeout, None).await
    }

    /// [`Connection::connect`], over TLS when `tls` is given (the TLS handshake counts in
    /// `timeout`).
    pub async fn connect_with(
        hostport: &str,
        authority: &str,
        path: &str,
        grpc_timeout: &str,
        timeout: Duration,
        tls: Option<&super::tls::TargetTls>,
    ) -> Result<Rc<Connection>, String> {
        let handshake = async {
            let sock = io::open(hostport, tls).await?;
            let mut inner = Inner::new(RequestBlocks::with_scheme(
                authority,
                path,
                grpc_timeout,
                tls.is_some(),
            ));
            let io = io::handshake(sock, &mut inner, tls.is_some()).await?;
            Ok::<_, String>((inner, io))
        };
        let (inner, io) = match tokio::time::timeout(timeout, handshake).await {
            Ok(r) => r?,
            Err(_) => return Err(format!("no answer within {timeout:?}")),
        };
        let inner = Rc::new(RefCell::new(inner));
        tokio::task::spawn_local(io::drive(io, Rc::clone(&inner)));
        Ok(Rc::new(Connection { inner }))
    }

    /// Whether new streams can start here (false: closed, failed, GOAWAY, or ids used up).
    pub fn is_usable(&self) -> bool {
        self.inner.borrow().closed.is_none()
    }

    /// Why the connection takes no new streams.
    pub fn closed_reason(&self) -> Option<String> {
        self.inner.borrow().closed.clone()
    }

    /// One exchange: opens a stream (waiting for MAX_CONCURRENT_STREAMS room), sends the request
    /// (`frame`, a gRPC-framed message, possibly in segments) with END_STREAM, and waits for the
    /// answer. The request goes out in DATA frames as large as the server's
    /// SETTINGS_MAX_FRAME_SIZE and its windows allow; segments over 16 KiB are written from the
    /// caller's memory (vectored writes), not copied. `body` is a buffer the response body is
    /// written into (reused across calls by the caller). Dropping the future resets the stream.
    pub async fn exchange(
        self: &Rc<Self>,
        frame: impl Into<RequestBody>,
        body: BytesMut,
    ) -> Result<Response, (StreamError, BytesMut)> {
        let frame = frame.into();
        // Wait for room.
        let opened = poll_fn(|cx| self.inner.borrow_mut().poll_room(cx)).await;
        if let Err(why) = opened {
            return Err((StreamError::Transport(why), body));
        }
        let id = self.inner.borrow_mut().open_stream(frame, body);
        let mut guard = StreamGuard::new(&self.inner, id);
        poll_fn(|cx| guard.poll_outcome(cx)).await
    }
}

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
//! The socket is a [`Socket`]: plain TCP, read and written with `try_read_buf`/`try_write*` as
//! before TLS existed, or TLS (`--tls`, [`super::tls`]) through tokio-rustls's poll functions.
//! One match per read or write call, no trait object: the plain path costs what it did.

use bytes::{Buf, Bytes, BytesMut};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWrite, Interest};
use tokio::net::TcpStream;

mod body;
mod flow;
mod frame;
mod hpack;

pub use body::RequestBody;
pub use hpack::RequestBlocks;

use common::http2::error_code::{CANCEL, NO_ERROR};
use common::http2::flags::{ACK, END_HEADERS, END_STREAM};
use common::http2::frame_type::{
    CONTINUATION, DATA, GOAWAY, HEADERS, PING, PUSH_PROMISE, RST_STREAM, SETTINGS, WINDOW_UPDATE,
};
use common::http2::{FrameHeader, Http2Error, PREFACE, encode, setting};
use flow::{CONNECTION_WINDOW, DEFAULT_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW};
use hpack::HpackMode;

const DEFAULT_MAX_FRAME: usize = 16_384;
/// A response header block (all its CONTINUATIONs) larger than this is a hostile server.
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// Client stream ids are odd and below 2^31.
const LAST_STREAM_ID: u32 = common::http2::MAX_STREAM_ID;

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

/// Identity hashing for stream ids (they are distinct small integers).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, n: u32) {
        // Spread the odd ids over the table's buckets.
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type StreamMap = HashMap<u32, Stream, BuildHasherDefault<IdHasher>>;

struct Stream {
    waker: Option<Waker>,
    head: GrpcHead,
    /// The response headers arrived (the next header block is the trailers).
    headers_seen: bool,
    body: BytesMut,
    /// Request bytes not yet sent for lack of flow-control window.
    pending: RequestBody,
    /// What the peer lets this stream send.
    send_window: i64,
    /// Received DATA bytes not yet given back with a WINDOW_UPDATE.
    recv_unacked: u32,
    /// `Some` once the stream is over (the worker takes it).
    outcome: Option<Result<(), StreamError>>,
}

/// A header block being received (HEADERS + CONTINUATION frames).
struct PartialBlock {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
}

struct Inner {
    /// Set when the connection can take no new streams (closed, failed, GOAWAY, ids used up).
    closed: Option<String>,
    /// Every handle was dropped: the task closes the socket and ends.
    abandoned: bool,
    next_id: u32,
    streams: StreamMap,
    /// Streams opened and not yet closed from our side (what MAX_CONCURRENT_STREAMS counts).
    open: usize,
    max_concurrent: usize,
    /// Workers waiting for `open < max_concurrent`.
    slot_waiters: VecDeque<Waker>,
    /// Streams with request bytes waiting for window, oldest first.
    blocked: VecDeque<u32>,
    conn_send_window: i64,
    peer_initial_window: i64,
    peer_max_frame: usize,
    conn_recv_unacked: u32,
    /// The pre-encoded request header blocks, and which one the next request carries.
    request_blocks: RequestBlocks,
    hpack_mode: HpackMode,
    /// Output not yet written: large request payloads as shared segments (no copy), then the
    /// small frames in `out` (always after every segment).
    segments: VecDeque<Bytes>,
    out: Vec<u8>,
    out_pos: usize,
    task_waker: Option<Waker>,
    task_notified: bool,
    hpack: loona_hpack::Decoder<'static>,
    partial: Option<PartialBlock>,
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

/// The connection is over: the reason is recorded in `Inner::closed` and every stream failed.
#[derive(Debug)]
struct Closed;

impl Inner {
    fn notify_task(&mut self) {
        if !self.task_notified {
            self.task_notified = true;
            if let Some(w) = &self.task_waker {
                w.wake_by_ref();
            }
        }
    }

    /// The request's HEADERS; `end_stream` for a request without a body.
    fn push_request_headers(&mut self, id: u32, end_stream: bool) {
        let (block, size_update) = match self.hpack_mode {
            HpackMode::First => {
                self.hpack_mode = HpackMode::Indexed;
                (&self.request_blocks.first, false)
            }
            HpackMode::Indexed => (&self.request_blocks.indexed, false),
            HpackMode::Plain(update) => {
                self.hpack_mode = HpackMode::Plain(false);
                (&self.request_blocks.plain, update)
            }
        };
        let len = block.len() + usize::from(size_update);
        let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
        encode::header(&mut self.out, len, HEADERS, flags, id);
        if size_update {
            self.out.push(0x20); // dynamic table size update to 0
        }
        self.out.extend_from_slice(block);
    }

    /// Queues a large payload without copying it, after everything already queued.
    fn push_segment(&mut self, data: Bytes) {
        if self.out.len() > self.out_pos {
            self.segments
                .push_back(Bytes::copy_from_slice(&self.out[self.out_pos..]));
        }
        self.out.clear();
        self.out_pos = 0;
        self.segments.push_back(data);
    }

    fn send_rst(&mut self, stream: u32, code: u32) {
        encode::rst_stream(&mut self.out, stream, code);
    }

    fn send_window_update(&mut self, stream: u32, increment: u32) {
        encode::window_update(&mut self.out, stream, increment);
    }

    /// Sends as much of `stream`'s pending request as the windows allow. True when all is sent.
    fn send_pending(&mut self, id: u32) -> bool {
        let max_frame = self.peer_max_frame;
        loop {
            let conn_window = self.conn_send_window;
            let Some(s) = self.streams.get_mut(&id) else {
                return true;
            };
            if s.pending.is_empty() {
                return true;
            }
            let n = (s.pending.len() as i64)
                .min(s.send_window)
                .min(conn_window)
                .min(max_frame as i64);
            if n <= 0 {
                return false;
            }
            let n = n as usize;
            // The frame's payload as pieces of the body's segments (slices, not copies).
            let mut pieces: [Bytes; 3] = Default::default();
            let mut left = n;
            for piece in &mut pieces {
                if left == 0 {
                    break;
                }
                let take = s.pending.chunk().len().min(left);
                *piece = s.pending.copy_to_bytes(take);
                left -= take;
            }
            s.send_window -= n as i64;
            let last = s.pending.is_empty();
            self.conn_send_window -= n as i64;
            encode::header(
                &mut self.out,
                n,
                DATA,
                if last { END_STREAM } else { 0 },
                id,
            );
            for piece in pieces {
                if piece.len() <= 16 * 1024 {
                    self.out.extend_from_slice(&piece);
                } else {
                    self.push_segment(piece);
                }
            }
            if last {
                return true;
            }
        }
    }

    /// Retries the streams waiting for window, oldest first.
    fn send_blocked(&mut self) {
        while let Some(&id) = self.blocked.front() {
            if self.send_pending(id) {
                self.blocked.pop_front();
            } else {
                break;
            }
        }
        self.notify_task();
    }

    /// A stream is over from our side: it no longer counts against the concurrency limit.
    fn release_slot(&mut self) {
        self.open = self.open.saturating_sub(1);
        if let Some(w) = self.slot_waiters.pop_front() {
            w.wake();
        }
    }

    /// Ends a stream with an outcome and wakes its worker.
    fn finish(&mut self, id: u32, outcome: Result<(), StreamError>) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.outcome.is_some() {
            return;
        }
        let unsent = !s.pending.is_empty();
        s.pending = RequestBody::default();
        s.outcome = Some(outcome);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        if unsent {
            // The server answered before it had the whole request (e.g. an early rejection):
            // stop sending it.
            self.blocked.retain(|&b| b != id);
            self.send_rst(id, NO_ERROR);
        }
        self.release_slot();
    }

    /// The connection is over: every stream still running fails, no new one starts.
    fn fail_all(&mut self, why: String) {
        self.fail_all_with(why, StreamError::Transport);
    }

    /// [`Inner::fail_all`] with the kind of error the streams end with.
    fn fail_all_with(&mut self, why: String, error: fn(String) -> StreamError) {
        if self.closed.is_none() {
            self.closed = Some(why.clone());
        }
        let ids: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| s.outcome.is_none())
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.finish(id, Err(error(why.clone())));
        }
        self.blocked.clear();
        for w in self.slot_waiters.drain(..) {
            w.wake();
        }
    }

    /// A connection error found in what the server sent: GOAWAY with its code, then every
    /// stream in flight fails as a protocol error.
    fn connection_error(&mut self, error: &Http2Error) {
        // The last stream id of a client's GOAWAY names server-initiated streams: none.
        encode::goaway(&mut self.out, 0, error.code(), error.reason().as_bytes());
        self.notify_task();
        self.fail_all_with(
            format!("HTTP/2 protocol error from the server: {error}"),
            StreamError::Protocol,
        );
    }

    /// A stream error: RST_STREAM with its code, and the stream's request fails as a protocol
    /// error; the connection goes on.
    fn stream_error(&mut self, stream: u32, error: &Http2Error) {
        let live = self
            .streams
            .get(&stream)
            .is_some_and(|s| s.outcome.is_none());
        if live {
            self.finish(
                stream,
                Err(StreamError::Protocol(format!(
                    "HTTP/2 protocol error from the server: {error}"
                ))),
            );
        }
        self.send_rst(stream, error.code());
        self.notify_task();
    }

    /// Handles every complete frame at the start of `buf`; returns how many bytes were used.
    /// `Err` = the connection cannot go on (already failed).
    fn on_frames(&mut self, buf: &[u8]) -> Result<usize, Closed> {
        let mut used = 0;
        while let Some(h) = FrameHeader::from_prefix(&buf[used..]) {
            let len = h.len() as usize;
            if len > MAX_FRAME_SIZE as usize {
                self.connection_error(&Http2Error::frame_size(format!(
                    "a frame of {len} bytes (limit {MAX_FRAME_SIZE})"
                )));
                return Err(Closed);
            }
            if buf.len() - used < h.frame_len() {
                break;
            }
            let payload = &buf[used + 9..used + h.frame_len()];
            used += h.frame_len();
            match self.on_frame(h.kind(), h.flags(), h.stream_id(), payload) {
                Ok(()) => {}
                Err(e @ Http2Error::Stream { stream, .. }) => self.stream_error(stream, &e),
                Err(e @ Http2Error::Connection { .. }) => {
                    self.connection_error(&e);
                    return Err(Closed);
                }
            }
        }
        Ok(used)
    }

    fn on_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> Result<(), Http2Error> {
        if let Some(p) = &self.partial
            && (kind != CONTINUATION || stream != p.stream)
        {
            return Err(Http2Error::protocol(
                "a header block interrupted by another frame",
            ));
        }
        match kind {
            DATA => self.on_data(flags, stream, payload),
            HEADERS => {
                let fragment = frame::headers_fragment(flags, payload)?;
                let block = PartialBlock {
                    stream,
                    end_stream: flags & END_STREAM != 0,
                    block: fragment.to_vec(),
                };
                if flags & END_HEADERS != 0 {
                    self.on_header_block(block)
                } else {
                    self.partial = Some(block);
                    Ok(())
                }
            }
            CONTINUATION => {
                let Some(mut block) = self.partial.take() else {
                    return Err(Http2Error::protocol("CONTINUATION without HEADERS"));
                };
                if block.block.len() + payload.len() > MAX_HEADER_BLOCK {
                    return Err(Http2Error::protocol("a header block over 1 MiB"));
                }
                block.block.extend_from_slice(payload);
                if flags & END_HEADERS != 0 {
                    self.on_header_block(block)
                } else {
                    self.partial = Some(block);
                    Ok(())
                }
            }
            RST_STREAM => {
                let code = frame::rst_stream(payload)?;
                self.finish(
                    stream,
                    Err(StreamError::Transport(format!(
                        "stream reset by the server: {}",
                        error_code_name(code)
                    ))),
                );
                Ok(())
            }
            SETTINGS => {
                if let Some(params) = frame::settings(flags, payload)? {
                    for (id, value) in params {
                        self.on_setting(id, value)?;
                    }
                    encode::settings_ack(&mut self.out);
                    self.notify_task();
                }
                Ok(())
            }
            PING => {
                let data = frame::ping(payload)?;
                if flags & ACK == 0 {
                    encode::ping(&mut self.out, true, data);
                    self.notify_task();
                }
                Ok(())
            }
            GOAWAY => {
                let (last, code, debug) = frame::goaway(payload)?;
                let why = format!(
                    "the server closed the connection (GOAWAY {}{})",
                    error_code_name(code),
                    match std::str::from_utf8(debug) {
                        Ok(d) if !d.is_empty() => format!(": {d}"),
                        _ => String::new(),
                    }
                );
                if self.closed.is_none() {
                    self.closed = Some(why.clone());
                }
                // Streams the server never processed can be retried elsewhere.
                let refused: Vec<u32> = self
                    .streams
                    .iter()
                    .filter(|&(&id, s)| id > last && s.outcome.is_none())
                    .map(|(&id, _)| id)
                    .collect();
                for id in refused {
                    self.finish(id, Err(StreamError::Transport(why.clone())));
                }
                for w in self.slot_waiters.drain(..) {
                    w.wake();
                }
                Ok(())
            }
            WINDOW_UPDATE => {
                let inc = i64::from(frame::window_update(stream, payload)?);
                if stream == 0 {
                    self.conn_send_window = flow::grow(self.conn_send_window, inc, 0)?;
                } else if let Some(s) = self.streams.get_mut(&stream)
                    && s.outcome.is_none()
                {
                    s.send_window = flow::grow(s.send_window, inc, stream)?;
                }
                if !self.blocked.is_empty() {
                    self.send_blocked();
                }
                Ok(())
            }
            PUSH_PROMISE => Err(Http2Error::protocol(
                "PUSH_PROMISE although push is disabled",
            )),
            // PRIORITY and unknown frame types are ignored (RFC 9113 §5.5).
            _ => Ok(()),
        }
    }

    fn on_setting(&mut self, id: u16, value: u32) -> Result<(), Http2Error> {
        match id {
            setting::MAX_CONCURRENT_STREAMS => {
                self.max_concurrent = value as usize;
                // More room: let waiting workers in.
                let room = self.max_concurrent.saturating_sub(self.open);
                for _ in 0..room {
                    match self.slot_waiters.pop_front() {
                        Some(w) => w.wake(),
                        None => break,
                    }
                }
            }
            // Applies to every stream, by the difference; a stream window it pushes past 2^31-1
            // is a connection error (§6.9.2).
            setting::INITIAL_WINDOW_SIZE => {
                let value = i64::from(frame::initial_window(value)?);
                let delta = value - self.peer_initial_window;
                self.peer_initial_window = value;
                for st in self.streams.values_mut() {
                    st.send_window = flow::grow(st.send_window, delta, 0)?;
                }
                if delta > 0 && !self.blocked.is_empty() {
                    self.send_blocked();
                }
            }
            setting::MAX_FRAME_SIZE => {
                self.peer_max_frame = frame::max_frame_size(value)? as usize;
            }
            // The server's decoder table, which our request blocks use. Smaller than the
            // default: no dynamic table from now on.
            setting::HEADER_TABLE_SIZE
                if value < 4096 && !matches!(self.hpack_mode, HpackMode::Plain(_)) =>
            {
                self.hpack_mode = HpackMode::Plain(true);
            }
            _ => {}
        }
        Ok(())
    }

    fn on_data(&mut self, flags: u8, stream: u32, payload: &[u8]) -> Result<(), Http2Error> {
        // The whole frame counts against the windows, padding included.
        let len = payload.len() as u32;
        self.conn_recv_unacked += len;
        if self.conn_recv_unacked >= CONNECTION_WINDOW / 2 {
            let inc = std::mem::take(&mut self.conn_recv_unacked);
            self.send_window_update(0, inc);
            self.notify_task();
        }
        let data = frame::unpad(flags, payload)?;
        let end = flags & END_STREAM != 0;
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(()); // a stream we reset or gave up on
        };
        if s.outcome.is_some() {
            return Ok(());
        }
        if s.body.len() + data.len() > 5 + common::MAX_MESSAGE_SIZE {
            let message = format!(
                "gRPC message exceeds maximum size {}",
                common::MAX_MESSAGE_SIZE
            );
            self.finish(
                stream,
                Err(StreamError::Grpc(tonic::Code::ResourceExhausted, message)),
            );
            self.send_rst(stream, CANCEL);
            self.notify_task();
            return Ok(());
        }
        s.body.extend_from_slice(data);
        if end {
            let outcome = answer_outcome(&s.head);
            self.finish(stream, outcome);
        } else {
            s.recv_unacked += len;
            if s.recv_unacked >= STREAM_WINDOW / 2 {
                let inc = std::mem::take(&mut s.recv_unacked);
                self.send_window_update(stream, inc);
                self.notify_task();
            }
        }
        Ok(())
    }

    fn on_header_block(&mut self, block: PartialBlock) -> Result<(), Http2Error> {
        // Every block is decoded, also for streams nobody waits for: the HPACK table depends on it.
        let mut head = GrpcHead::default();
        let decoded = self.hpack.decode_with_cb(
            &block.block,
            |name: Cow<[u8]>, value: Cow<[u8]>| match &*name {
                b":status" => {
                    head.http_status = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0)
                }
                b"grpc-status" => {
                    head.grpc_status = Some(
                        std::str::from_utf8(&value)
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(tonic::Code::Unknown as i32),
                    )
                }
                b"grpc-message" => head.grpc_message = Some(value.into_owned()),
                b"grpc-retry-pushback-ms" => head.pushback = Some(value.into_owned()),
                _ => {}
            },
        );
        if let Err(e) = decoded {
            // A failed decode leaves the table out of step with the server's: fatal.
            return Err(Http2Error::connection(
                common::http2::error_code::COMPRESSION_ERROR,
                format!("HPACK: {e:?}"),
            ));
        }
        let Some(s) = self.streams.get_mut(&block.stream) else {
            return Ok(());
        };
        if s.outcome.is_some() {
            return Ok(());
        }
        if !s.headers_seen {
            s.headers_seen = true;
            let grpc = head.grpc_status.take();
            let message = head.grpc_message.take();
            let pushback = head.pushback.take();
            s.head.http_status = head.http_status;
            // Trailers-only: the status is in the headers.
            if grpc.is_some() {
                s.head.grpc_status = grpc;
                s.head.grpc_message = message;
                s.head.pushback = pushback;
            }
        } else {
            if head.grpc_status.is_some() {
                s.head.grpc_status = head.grpc_status;
            }
            if head.grpc_message.is_some() {
                s.head.grpc_message = head.grpc_message;
            }
            if head.pushback.is_some() {
                s.head.pushback = head.pushback;
            }
        }
        if block.end_stream {
            let outcome = answer_outcome(&s.head);
            self.finish(block.stream, outcome);
        }
        Ok(())
    }
}

/// How an answer that ended (END_STREAM) went: a gRPC answer (`:status` 200) must carry a
/// `grpc-status`, in its trailers or trailers-only headers; without one it is a protocol error,
/// never a success. Other HTTP statuses are left to the caller (gRPC maps them to codes).
fn answer_outcome(head: &GrpcHead) -> Result<(), StreamError> {
    if head.http_status == 200 && head.grpc_status.is_none() {
        return Err(StreamError::Protocol(
            "the answer ended without grpc-status".to_string(),
        ));
    }
    Ok(())
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
            let tcp = TcpStream::connect(hostport)
                .await
                .map_err(|e| e.to_string())?;
            tcp.set_nodelay(true).map_err(|e| e.to_string())?;
            let sock = match tls {
                None => Socket::Plain(tcp),
                Some(tls) => Socket::Tls(Box::new(tls.handshake(tcp, hostport).await?)),
            };
            let mut inner = Inner {
                closed: None,
                abandoned: false,
                next_id: 1,
                streams: StreamMap::default(),
                open: 0,
                max_concurrent: usize::MAX,
                slot_waiters: VecDeque::new(),
                blocked: VecDeque::new(),
                conn_send_window: DEFAULT_WINDOW,
                peer_initial_window: DEFAULT_WINDOW,
                peer_max_frame: DEFAULT_MAX_FRAME,
                conn_recv_unacked: 0,
                request_blocks: RequestBlocks::with_scheme(
                    authority,
                    path,
                    grpc_timeout,
                    tls.is_some(),
                ),
                hpack_mode: HpackMode::First,
                segments: VecDeque::new(),
                out: Vec::with_capacity(64 * 1024),
                out_pos: 0,
                task_waker: None,
                task_notified: false,
                hpack: loona_hpack::Decoder::new(),
                partial: None,
            };
            inner.out.extend_from_slice(PREFACE);
            encode::settings(
                &mut inner.out,
                &[
                    (setting::ENABLE_PUSH, 0),
                    (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                    (setting::MAX_FRAME_SIZE, MAX_FRAME_SIZE),
                ],
            );
            inner.send_window_update(0, CONNECTION_WINDOW - DEFAULT_WINDOW as u32);
            let mut io = Io {
                sock,
                rbuf: BytesMut::with_capacity(64 * 1024),
            };
            // Write the preface, then read frames until the server's first SETTINGS.
            poll_fn(|cx| io.poll_write_out(&mut inner, cx))
                .await
                .map_err(|e| e.to_string())?;
            loop {
                let n = io.read_some().await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err(match tls {
                        // A TLS server closes on a client's plain-text preface.
                        None => "the server closed the connection during the HTTP/2 \
                                     handshake (a TLS port? then give --tls and --tls-ca)"
                            .to_string(),
                        Some(_) => "the server closed the connection during the HTTP/2 \
                                        handshake"
                            .to_string(),
                    });
                }
                if let Some(h) = FrameHeader::from_prefix(&io.rbuf) {
                    if h.kind() != SETTINGS || h.has_flag(ACK) {
                        return Err(
                            "the server did not start with HTTP/2 SETTINGS (is it a gRPC server?)"
                                .to_string(),
                        );
                    }
                    if io.rbuf.len() >= h.frame_len() {
                        break;
                    }
                }
            }
            let used = inner
                .on_frames(&io.rbuf)
                .map_err(|Closed| inner.closed.clone().unwrap_or_default())?;
            let _ = io.rbuf.split_to(used);
            Ok::<_, String>((inner, io))
        };
        let (inner, io) = match tokio::time::timeout(timeout, handshake).await {
            Ok(r) => r?,
            Err(_) => return Err(format!("no answer within {timeout:?}")),
        };
        let inner = Rc::new(RefCell::new(inner));
        tokio::task::spawn_local(drive(io, Rc::clone(&inner)));
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
        let opened = poll_fn(|cx| {
            let mut inner = self.inner.borrow_mut();
            if let Some(why) = &inner.closed {
                return Poll::Ready(Err(why.clone()));
            }
            if inner.open < inner.max_concurrent {
                Poll::Ready(Ok(()))
            } else {
                inner.slot_waiters.push_back(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
        if let Err(why) = opened {
            return Err((StreamError::Transport(why), body));
        }
        let id = {
            let mut inner = self.inner.borrow_mut();
            let inner = &mut *inner;
            let id = inner.next_id;
            inner.next_id += 2;
            if inner.next_id > LAST_STREAM_ID {
                inner.closed = Some("stream ids used up".to_string());
            }
            inner.open += 1;
            inner.push_request_headers(id, frame.is_empty());
            let window = inner.peer_initial_window;
            inner.streams.insert(
                id,
                Stream {
                    waker: None,
                    head: GrpcHead::default(),
                    headers_seen: false,
                    body,
                    pending: frame,
                    send_window: window,
                    recv_unacked: 0,
                    outcome: None,
                },
            );
            if inner.blocked.is_empty() && inner.send_pending(id) {
                // sent whole
            } else {
                inner.blocked.push_back(id);
            }
            inner.notify_task();
            id
        };
        let mut guard = StreamGuard {
            inner: &self.inner,
            id,
            done: false,
        };
        poll_fn(|cx| guard.poll_outcome(cx)).await
    }
}

/// Resets the stream if the exchange is dropped before its end (a deadline, an abort).
struct StreamGuard<'a> {
    inner: &'a Rc<RefCell<Inner>>,
    id: u32,
    done: bool,
}

impl StreamGuard<'_> {
    fn poll_outcome(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response, (StreamError, BytesMut)>> {
        let mut inner = self.inner.borrow_mut();
        let Some(s) = inner.streams.get_mut(&self.id) else {
            self.done = true;
            return Poll::Ready(Err((
                StreamError::Transport("the stream vanished".into()),
                BytesMut::new(),
            )));
        };
        if s.outcome.is_none() {
            match &s.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => s.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        let s = inner.streams.remove(&self.id).expect("just found");
        self.done = true;
        Poll::Ready(match s.outcome.expect("checked") {
            Ok(()) => Ok(Response {
                head: s.head,
                body: s.body,
            }),
            Err(e) => Err((e, s.body)),
        })
    }
}

impl Drop for StreamGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = self.inner.borrow_mut();
        if let Some(s) = inner.streams.remove(&self.id)
            && s.outcome.is_none()
        {
            // (On a connection that already failed the frame is never written: harmless.)
            inner.blocked.retain(|&b| b != self.id);
            inner.send_rst(self.id, CANCEL);
            inner.notify_task();
            inner.release_slot();
        }
    }
}

/// The connection's byte stream: plain TCP or TLS over it.
enum Socket {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Socket {
    fn into_tcp(self) -> TcpStream {
        match self {
            Self::Plain(tcp) => tcp,
            Self::Tls(tls) => tls.into_inner().0,
        }
    }
}

/// The socket and the read buffer, owned by the connection task.
struct Io {
    sock: Socket,
    rbuf: BytesMut,
}

impl Io {
    /// Reads what is available (at least one byte, or 0 at EOF).
    async fn read_some(&mut self) -> io::Result<usize> {
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < 16 * 1024 {
                self.rbuf.reserve(64 * 1024);
            }
            let tcp = match &mut self.sock {
                Socket::Plain(tcp) => tcp,
                Socket::Tls(tls) => return tls.read_buf(&mut self.rbuf).await,
            };
            tcp.readable().await?;
            match tcp.try_read_buf(&mut self.rbuf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes queued output until done or the socket is full.
    fn poll_write_out(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let result = if inner.segments.is_empty() {
                if inner.out_pos == inner.out.len() {
                    inner.out.clear();
                    inner.out_pos = 0;
                    return match &mut self.sock {
                        Socket::Plain(_) => Poll::Ready(Ok(())),
                        // rustls may still hold records the socket had no room for.
                        Socket::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
                    };
                }
                match &mut self.sock {
                    Socket::Plain(tcp) => tcp.try_write(&inner.out[inner.out_pos..]),
                    Socket::Tls(tls) => {
                        ready!(Pin::new(tls.as_mut()).poll_write(cx, &inner.out[inner.out_pos..]))
                    }
                }
            } else {
                let mut slices = [IoSlice::new(&[]); 32];
                let mut n = 0;
                for s in inner.segments.iter().take(31) {
                    slices[n] = IoSlice::new(s);
                    n += 1;
                }
                if inner.segments.len() <= 31 && inner.out_pos < inner.out.len() {
                    slices[n] = IoSlice::new(&inner.out[inner.out_pos..]);
                    n += 1;
                }
                match &mut self.sock {
                    Socket::Plain(tcp) => tcp.try_write_vectored(&slices[..n]),
                    Socket::Tls(tls) => {
                        ready!(Pin::new(tls.as_mut()).poll_write_vectored(cx, &slices[..n]))
                    }
                }
            };
            match result {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(mut written) => {
                    while written > 0 {
                        if let Some(front) = inner.segments.front_mut() {
                            if written >= front.len() {
                                written -= front.len();
                                inner.segments.pop_front();
                            } else {
                                let _ = front.split_to(written);
                                written = 0;
                            }
                        } else {
                            inner.out_pos += written;
                            written = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let Socket::Plain(tcp) = &self.sock else {
                        return Poll::Pending; // tokio-rustls registered the waker
                    };
                    match tcp.poll_write_ready(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Reads and handles frames until the socket has nothing more. `Ready(Err)` = the
    /// connection is over (the reason is already recorded).
    fn poll_read_frames(
        &mut self,
        inner: &mut Inner,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Closed>> {
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < 16 * 1024 {
                self.rbuf.reserve(64 * 1024);
            }
            let offered = self.rbuf.capacity() - self.rbuf.len();
            let read = match &mut self.sock {
                Socket::Plain(tcp) => tcp.try_read_buf(&mut self.rbuf),
                Socket::Tls(tls) => {
                    let reading = tls.read_buf(&mut self.rbuf);
                    match std::pin::pin!(reading).poll(cx) {
                        Poll::Ready(r) => r,
                        // Nothing decrypted: the waker is registered with the socket.
                        Poll::Pending => return Poll::Ready(Ok(())),
                    }
                }
            };
            match read {
                Ok(0) => {
                    inner.fail_all("the server closed the connection".to_string());
                    return Poll::Ready(Err(Closed));
                }
                Ok(n) => {
                    if let (true, Socket::Plain(tcp)) = (n < offered, &self.sock) {
                        // A short read drained the socket: drop tokio's readiness now instead of
                        // learning it from one more read that fails with EAGAIN (about one
                        // syscall in three on this path). Safe: data arriving later raises a new
                        // edge, and tokio keeps readiness that is newer than what was read here.
                        let _ = tcp.try_io(Interest::READABLE, || {
                            Err::<(), _>(io::ErrorKind::WouldBlock.into())
                        });
                    }
                    let used = inner.on_frames(&self.rbuf)?;
                    let _ = self.rbuf.split_to(used);
                    // A frame larger than what is buffered: make room for all of it.
                    if let Some(h) = FrameHeader::from_prefix(&self.rbuf) {
                        self.rbuf.reserve(h.frame_len());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let Socket::Plain(tcp) = &self.sock else {
                        return Poll::Ready(Ok(()));
                    };
                    match tcp.poll_read_ready(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(e)) => {
                            inner.fail_all(format!("connection failed: {e}"));
                            return Poll::Ready(Err(Closed));
                        }
                        Poll::Pending => return Poll::Ready(Ok(())),
                    }
                }
                Err(e) => {
                    inner.fail_all(format!("connection failed: {e}"));
                    return Poll::Ready(Err(Closed));
                }
            }
        }
    }
}

/// The connection's task: reads and dispatches frames, writes what the workers queued.
async fn drive(mut io: Io, inner: Rc<RefCell<Inner>>) {
    poll_fn(|cx| {
        let mut guard = inner.borrow_mut();
        let inner = &mut *guard;
        inner.task_notified = false;
        match &inner.task_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => inner.task_waker = Some(cx.waker().clone()),
        }
        if inner.abandoned {
            return Poll::Ready(());
        }
        let read = io.poll_read_frames(inner, cx);
        // Write also after a failure: a GOAWAY may be queued.
        let wrote = io.poll_write_out(inner, cx);
        if let Poll::Ready(Err(e)) = &wrote {
            inner.fail_all(format!("connection failed: {e}"));
            return Poll::Ready(());
        }
        match read {
            Poll::Ready(Err(Closed)) => Poll::Ready(()),
            _ => {
                // Closed for new streams and nothing left in flight: done.
                if inner.closed.is_some() && inner.open == 0 && wrote.is_ready() {
                    return Poll::Ready(());
                }
                Poll::Pending
            }
        }
    })
    .await;
    let _ = io
        .sock
        .into_tcp()
        .into_std()
        .map(|s| s.shutdown(std::net::Shutdown::Both));
}

#[cfg(test)]
mod tests {
    use super::hpack::hpack_int;
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc7541_examples() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix.
        let mut b = Vec::new();
        hpack_int(&mut b, 0, 5, 10);
        assert_eq!(b, [10]);
        b.clear();
        hpack_int(&mut b, 0, 5, 1337);
        assert_eq!(b, [31, 154, 10]);
    }

    fn decode(d: &mut loona_hpack::Decoder<'static>, block: &[u8]) -> Vec<(String, String)> {
        d.decode(block)
            .unwrap()
            .into_iter()
            .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    #[test]
    fn request_blocks_decode_to_the_grpc_headers_and_index_after_the_first() {
        let blocks = RequestBlocks::new("dn1:9859", "/p/send", "30000m");
        let mut d = loona_hpack::Decoder::new();
        let headers = decode(&mut d, &blocks.first);
        let get = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get(":method"), Some("POST"));
        assert_eq!(get(":scheme"), Some("http"));
        assert_eq!(get(":path"), Some("/p/send"));
        assert_eq!(get(":authority"), Some("dn1:9859"));
        assert_eq!(get("content-type"), Some("application/grpc"));
        assert_eq!(get("te"), Some("trailers"));
        assert_eq!(get("grpc-timeout"), Some("30000m"));
        assert!(get("user-agent").unwrap().starts_with("loadgen/"));
        // Later requests name the same fields by index, in the same order, many times over.
        assert_eq!(blocks.indexed.len(), 8);
        for _ in 0..3 {
            assert_eq!(decode(&mut d, &blocks.indexed), headers);
        }
        // Without a dynamic table: the same fields, and nothing indexed.
        let mut fresh = loona_hpack::Decoder::new();
        assert_eq!(decode(&mut fresh, &blocks.plain), headers);
        assert!(fresh.decode(&blocks.indexed).is_err());
    }

    #[test]
    fn a_request_body_reads_its_segments_in_order_and_slices_within_one() {
        let data = Bytes::from(vec![7u8; 100]);
        let mut b = RequestBody::new(
            Bytes::from_static(b"head"),
            data.clone(),
            Bytes::from_static(b"tail"),
        );
        assert_eq!(b.len(), 108);
        assert!(b.as_single().is_none());
        assert_eq!(b.chunk(), b"head");
        assert_eq!(&b.copy_to_bytes(2)[..], b"he");
        // Across a boundary: copied.
        assert_eq!(&b.copy_to_bytes(4)[..], b"ad\x07\x07");
        // Within one segment: a slice of the caller's memory.
        let mid = b.copy_to_bytes(90);
        assert_eq!(mid.as_ptr(), data[2..].as_ptr());
        b.advance(10);
        assert_eq!(b.chunk(), b"il");
        assert_eq!(b.remaining(), 2);
        let one = RequestBody::from(Bytes::from_static(b"x"));
        assert_eq!(one.as_single().map(|b| &b[..]), Some(&b"x"[..]));
        assert!(RequestBody::default().is_empty());
        assert_eq!(RequestBody::default().as_single().map(Bytes::len), Some(0));
    }

    #[test]
    fn error_codes_have_names() {
        assert_eq!(error_code_name(7), "REFUSED_STREAM");
        assert_eq!(error_code_name(99), "error code 99");
    }
}

/// The client against the `h2` crate's server with tight settings: two concurrent streams,
/// 1,000-byte windows, 16 KiB frames — requests must wait for room and for window updates.
#[cfg(test)]
mod against_h2_server {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Server {
        addr: String,
        max_seen: Arc<AtomicUsize>,
    }

    /// FNV-1a of a request body, as the test server answers it.
    fn fnv(bytes: &[u8]) -> u32 {
        bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
    }

    /// Answers each request with its body length and FNV-1a hash (each 4 bytes, big-endian) in a
    /// DATA frame and
    /// `grpc-status: 0` trailers; a body starting with `s` is answered after 300 ms, one
    /// starting with `g` makes the server send GOAWAY instead of answering.
    async fn server() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let max_seen = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&max_seen);
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut conn = h2::server::Builder::new()
                .max_concurrent_streams(2)
                .initial_window_size(1000)
                .handshake::<_, Bytes>(tcp)
                .await
                .unwrap();
            let open = Arc::new(AtomicUsize::new(0));
            let (goaway_tx, mut goaway_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
            loop {
                // The accept loop drives the connection; each request runs on its own task.
                let (req, mut respond) = tokio::select! {
                    next = conn.accept() => match next {
                        Some(Ok(r)) => r,
                        _ => break,
                    },
                    Some(()) = goaway_rx.recv() => {
                        conn.graceful_shutdown();
                        continue;
                    }
                };
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                seen.fetch_max(now, Ordering::SeqCst);
                let open = Arc::clone(&open);
                let goaway = goaway_tx.clone();
                tokio::spawn(async move {
                    let mut body = req.into_body();
                    let mut got = Vec::new();
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk.unwrap();
                        let _ = body.flow_control().release_capacity(chunk.len());
                        got.extend_from_slice(&chunk);
                    }
                    if got.first() == Some(&b'g') {
                        let _ = goaway.send(());
                        open.fetch_sub(1, Ordering::SeqCst);
                        return;
                    }
                    if got.first() == Some(&b's') {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    let response = http::Response::builder()
                        .status(200)
                        .header("content-type", "application/grpc")
                        .body(())
                        .unwrap();
                    if let Ok(mut send) = respond.send_response(response, false) {
                        let mut answer = (got.len() as u32).to_be_bytes().to_vec();
                        answer.extend_from_slice(&fnv(&got).to_be_bytes());
                        let _ = send.send_data(Bytes::from(answer), false);
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                        let _ = send.send_trailers(trailers);
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Server { addr, max_seen }
    }

    async fn connect(addr: &str) -> Rc<Connection> {
        Connection::connect(addr, addr, "/t", "1000m", Duration::from_secs(5))
            .await
            .unwrap()
    }

    fn length_of(r: &Response) -> u32 {
        u32::from_be_bytes(r.body[..4].try_into().unwrap())
    }

    #[tokio::test]
    async fn large_requests_wait_for_windows_and_streams_for_room() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let srv = server().await;
                let conn = connect(&srv.addr).await;
                let mut calls = Vec::new();
                for i in 0..12usize {
                    let c = Rc::clone(&conn);
                    // 0 B … 220 KiB: many frames, far beyond the 1,000-byte windows.
                    let body = Bytes::from(vec![b'x'; i * 20 * 1024]);
                    calls.push(tokio::task::spawn_local(async move {
                        (i, c.exchange(body, BytesMut::new()).await)
                    }));
                }
                for call in calls {
                    let (i, r) = call.await.unwrap();
                    let r = r.map_err(|(e, _)| e).unwrap();
                    assert_eq!(r.head.http_status, 200);
                    assert_eq!(r.head.grpc_status, Some(0));
                    assert_eq!(length_of(&r) as usize, i * 20 * 1024);
                }
                assert!(srv.max_seen.load(Ordering::SeqCst) <= 2);
                assert!(conn.is_usable());
            })
            .await;
    }

    #[tokio::test]
    async fn segmented_bodies_arrive_whole_and_in_order() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let srv = server().await;
                let conn = connect(&srv.addr).await;
                let mut calls = Vec::new();
                for i in 0..6usize {
                    let c = Rc::clone(&conn);
                    // A small head, a large middle (copied into no buffer), a small tail; sizes
                    // that put frame boundaries inside and across the segments.
                    let head = Bytes::from(vec![b'h' ^ i as u8; 7 + i * 3000]);
                    let data: Vec<u8> = (0..(i * 37_000 + 1)).map(|k| (k % 251) as u8).collect();
                    let tail = Bytes::from(vec![b't'; i * 5]);
                    let body = RequestBody::new(head, Bytes::from(data), tail);
                    let expected = (body.len(), fnv(&body.to_vec()));
                    calls.push(tokio::task::spawn_local(async move {
                        (expected, c.exchange(body, BytesMut::new()).await)
                    }));
                }
                for call in calls {
                    let ((len, hash), r) = call.await.unwrap();
                    let r = r.map_err(|(e, _)| e).unwrap();
                    assert_eq!(r.head.grpc_status, Some(0));
                    assert_eq!(length_of(&r) as usize, len);
                    assert_eq!(u32::from_be_bytes(r.body[4..8].try_into().unwrap()), hash);
                }
            })
            .await;
    }

    #[tokio::test]
    async fn a_dropped_call_resets_its_stream_and_the_connection_goes_on() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let srv = server().await;
                let conn = connect(&srv.addr).await;
                let slow = conn.exchange(Bytes::from_static(b"slow"), BytesMut::new());
                assert!(
                    tokio::time::timeout(Duration::from_millis(50), slow)
                        .await
                        .is_err()
                );
                for _ in 0..5 {
                    let r = conn
                        .exchange(Bytes::from_static(b"fast"), BytesMut::new())
                        .await
                        .map_err(|(e, _)| e)
                        .unwrap();
                    assert_eq!(length_of(&r), 4);
                }
            })
            .await;
    }

    #[tokio::test]
    async fn goaway_closes_the_connection_for_new_streams() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let srv = server().await;
                let conn = connect(&srv.addr).await;
                let r = conn
                    .exchange(Bytes::from_static(b"go away"), BytesMut::new())
                    .await;
                assert!(r.is_err(), "the stream was never answered");
                // The stream's reset may come before the GOAWAY: wait for the GOAWAY.
                for _ in 0..200 {
                    if !conn.is_usable() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(!conn.is_usable());
                let why = conn.closed_reason().unwrap();
                assert!(why.contains("GOAWAY"), "{why}");
                let again = conn
                    .exchange(Bytes::from_static(b"x"), BytesMut::new())
                    .await;
                assert!(matches!(again, Err((StreamError::Transport(_), _))));
            })
            .await;
    }

    /// A server that sends its SETTINGS, reads the client's first request, then writes `script`
    /// and returns all the client sent after its preface (until the client closes or 2 s pass).
    async fn scripted(script: Vec<u8>) -> (String, tokio::task::JoinHandle<Vec<u8>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut hello = Vec::new();
            encode::settings(&mut hello, &[]);
            tcp.write_all(&hello).await.unwrap();
            // Everything the client sends, from its preface on, so that frames are parsed
            // from a frame boundary.
            let mut all = vec![0u8; 256 * 1024];
            let mut got = tcp.read(&mut all).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            got += tcp.read(&mut all[got..]).await.unwrap_or(0);
            all.truncate(got);
            tcp.write_all(&script).await.unwrap();
            let _ = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut all)).await;
            all.split_off(PREFACE.len())
        });
        (addr, server)
    }

    /// The frames in `bytes` as (type, stream, first 4 payload bytes as a code).
    fn frames_of(bytes: &[u8]) -> Vec<(u8, u32, u32)> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(h) = FrameHeader::from_prefix(&bytes[at..]) {
            if at + h.frame_len() > bytes.len() {
                break;
            }
            let p = &bytes[at + 9..at + h.frame_len()];
            let code_at = if h.kind() == GOAWAY { 4 } else { 0 };
            let code = p
                .get(code_at..code_at + 4)
                .map_or(0, |c| u32::from_be_bytes(c.try_into().unwrap()));
            out.push((h.kind(), h.stream_id(), code));
            at += h.frame_len();
        }
        out
    }

    /// Runs one exchange (a body of 100 KiB, beyond the default window, so that it waits for
    /// window) against `script`; the exchange's result and what the client sent after.
    async fn exchange_against(
        script: Vec<u8>,
    ) -> (Result<Response, StreamError>, Vec<(u8, u32, u32)>) {
        let (addr, server) = scripted(script).await;
        let local = tokio::task::LocalSet::new();
        let result = local
            .run_until(async {
                let conn = connect(&addr).await;
                let r = tokio::time::timeout(
                    Duration::from_secs(5),
                    conn.exchange(Bytes::from(vec![b'x'; 100 << 10]), BytesMut::new()),
                )
                .await
                .expect("the exchange ended");
                drop(conn);
                r.map_err(|(e, _)| e)
            })
            .await;
        (result, frames_of(&server.await.unwrap()))
    }

    fn window_update(stream: u32, inc: u32) -> Vec<u8> {
        let mut b = Vec::new();
        encode::window_update(&mut b, stream, inc);
        b
    }

    use common::http2::error_code::{FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, PROTOCOL_ERROR};

    #[tokio::test]
    async fn a_zero_stream_window_increment_resets_that_stream_as_a_protocol_error() {
        let (r, sent) = exchange_against(window_update(1, 0)).await;
        assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
        assert!(sent.contains(&(RST_STREAM, 1, PROTOCOL_ERROR)), "{sent:?}");
        assert!(!sent.iter().any(|f| f.0 == GOAWAY), "{sent:?}");
    }

    #[tokio::test]
    async fn a_zero_connection_window_increment_is_a_connection_error() {
        let (r, sent) = exchange_against(window_update(0, 0)).await;
        assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
        assert!(sent.contains(&(GOAWAY, 0, PROTOCOL_ERROR)), "{sent:?}");
    }

    #[tokio::test]
    async fn windows_past_2_31_minus_1_are_flow_control_errors() {
        // The 100 KiB request used both default windows up (0 left): the second increment of
        // 2^31-1 overflows whatever the first let the client send.
        let twice = |stream| {
            [
                window_update(stream, MAX_WINDOW_INC),
                window_update(stream, MAX_WINDOW_INC),
            ]
            .concat()
        };
        let (r, sent) = exchange_against(twice(1)).await;
        assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
        assert!(
            sent.contains(&(RST_STREAM, 1, FLOW_CONTROL_ERROR)),
            "{sent:?}"
        );
        let (r, sent) = exchange_against(twice(0)).await;
        assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
        assert!(sent.contains(&(GOAWAY, 0, FLOW_CONTROL_ERROR)), "{sent:?}");
    }

    const MAX_WINDOW_INC: u32 = common::http2::MAX_WINDOW;

    #[tokio::test]
    async fn settings_that_overflow_windows_or_have_bad_lengths_are_connection_errors() {
        let settings = |p: &[(u16, u32)]| {
            let mut b = Vec::new();
            encode::settings(&mut b, p);
            b
        };
        // Above 2^31-1 (§6.5.2).
        let (r, sent) =
            exchange_against(settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)])).await;
        assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
        assert!(sent.contains(&(GOAWAY, 0, FLOW_CONTROL_ERROR)), "{sent:?}");
        // The open stream's window grown past 2^31-1 by the change (§6.9.2).
        let mut script = window_update(1, MAX_WINDOW_INC);
        script.extend(settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]));
        let (r, sent) = exchange_against(script).await;
        assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
        assert!(sent.contains(&(GOAWAY, 0, FLOW_CONTROL_ERROR)), "{sent:?}");
        // An ACK with a payload, a length not a multiple of 6 (§6.5).
        let mut ack = Vec::new();
        encode::frame(&mut ack, SETTINGS, ACK, 0, &[0; 6]);
        let (_, sent) = exchange_against(ack).await;
        assert!(sent.contains(&(GOAWAY, 0, FRAME_SIZE_ERROR)), "{sent:?}");
        let mut odd = Vec::new();
        encode::frame(&mut odd, SETTINGS, 0, 0, &[0; 7]);
        let (_, sent) = exchange_against(odd).await;
        assert!(sent.contains(&(GOAWAY, 0, FRAME_SIZE_ERROR)), "{sent:?}");
    }

    #[tokio::test]
    async fn an_answer_without_grpc_status_is_a_protocol_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut conn = h2::server::handshake(tcp).await.unwrap();
            while let Some(Ok((_req, mut respond))) = conn.accept().await {
                let response = http::Response::builder()
                    .status(200)
                    .header("content-type", "application/grpc")
                    .body(())
                    .unwrap();
                let mut send = respond.send_response(response, false).unwrap();
                let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
                let mut trailers = http::HeaderMap::new();
                trailers.insert("x-other", http::HeaderValue::from_static("1"));
                let _ = send.send_trailers(trailers);
            }
        });
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let conn = connect(&addr).await;
                let r = conn
                    .exchange(Bytes::from_static(b"x"), BytesMut::new())
                    .await;
                assert!(matches!(r, Err((StreamError::Protocol(_), _))), "{r:?}");
                // A stream-level failure: the connection goes on.
                assert!(conn.is_usable());
            })
            .await;
    }

    #[tokio::test]
    async fn a_server_that_is_not_http2_is_refused_at_connect() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            use tokio::io::AsyncWriteExt;
            let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        });
        let local = tokio::task::LocalSet::new();
        let err = local
            .run_until(Connection::connect(
                &addr,
                &addr,
                "/t",
                "1000m",
                Duration::from_secs(5),
            ))
            .await
            .err()
            .unwrap();
        assert!(err.contains("SETTINGS") || err.contains("closed"), "{err}");
    }
}

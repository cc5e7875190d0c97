//! The connection state machine: the streams and their bookkeeping, the frames the server
//! sends (`on_frame`), the settings it applies, flow control as it is granted and used, and the
//! errors found in what it sent, answered with RST_STREAM (a stream error) or GOAWAY (a
//! connection error). Frames to send are queued in `Inner::out`/`segments`; the connection's task
//! ([`super::io`]) writes them.

use bytes::{Buf, Bytes, BytesMut};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use common::http2::error_code::{CANCEL, NO_ERROR};
use common::http2::flags::{ACK, END_HEADERS, END_STREAM};
use common::http2::frame_type::{
    CONTINUATION, DATA, GOAWAY, HEADERS, PING, PUSH_PROMISE, RST_STREAM, SETTINGS, WINDOW_UPDATE,
};
use common::http2::{FrameHeader, Http2Error, PREFACE, encode, setting};

use super::body::RequestBody;
use super::flow::{self, CONNECTION_WINDOW, DEFAULT_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW};
use super::frame;
use super::hpack::{HpackMode, RequestBlocks};
use super::{GrpcHead, Response, StreamError, error_code_name};

const DEFAULT_MAX_FRAME: usize = 16_384;
/// A response header block (all its CONTINUATIONs) larger than this is a hostile server.
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// Client stream ids are odd and below 2^31.
const LAST_STREAM_ID: u32 = common::http2::MAX_STREAM_ID;

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

/// The connection's state, shared by its task and its workers (`Rc<RefCell<_>>`).
pub(super) struct Inner {
    /// Set when the connection can take no new streams (closed, failed, GOAWAY, ids used up).
    pub(super) closed: Option<String>,
    /// Every handle was dropped: the task closes the socket and ends.
    pub(super) abandoned: bool,
    next_id: u32,
    streams: StreamMap,
    /// Streams opened and not yet closed from our side (what MAX_CONCURRENT_STREAMS counts).
    pub(super) open: usize,
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
    pub(super) segments: VecDeque<Bytes>,
    pub(super) out: Vec<u8>,
    pub(super) out_pos: usize,
    pub(super) task_waker: Option<Waker>,
    pub(super) task_notified: bool,
    hpack: loona_hpack::Decoder<'static>,
    partial: Option<PartialBlock>,
}

/// The connection is over: the reason is recorded in `Inner::closed` and every stream failed.
#[derive(Debug)]
pub(super) struct Closed;

impl Inner {
    /// The state of a new connection, the client's preface, SETTINGS and connection
    /// WINDOW_UPDATE queued: the server's SETTINGS are still to come.
    pub(super) fn new(request_blocks: RequestBlocks) -> Self {
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
            request_blocks,
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
        inner
    }
    pub(super) fn notify_task(&mut self) {
        if !self.task_notified {
            self.task_notified = true;
            if let Some(w) = &self.task_waker {
                w.wake_by_ref();
            }
        }
    }

    /// Whether a new stream can open now: `Ready(Ok)` when there is room under
    /// MAX_CONCURRENT_STREAMS, `Ready(Err)` (why) when the connection takes no new streams;
    /// otherwise the worker waits for room.
    pub(super) fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        if let Some(why) = &self.closed {
            return Poll::Ready(Err(why.clone()));
        }
        if self.open < self.max_concurrent {
            Poll::Ready(Ok(()))
        } else {
            self.slot_waiters.push_back(cx.waker().clone());
            Poll::Pending
        }
    }

    /// Opens a stream for a request (room checked by [`Inner::poll_room`]): queues its HEADERS
    /// and as much of `frame` as the windows allow, the rest waits for window; `body` receives
    /// the answer. Returns the stream's id.
    pub(super) fn open_stream(&mut self, frame: RequestBody, body: BytesMut) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        if self.next_id > LAST_STREAM_ID {
            self.closed = Some("stream ids used up".to_string());
        }
        self.open += 1;
        self.push_request_headers(id, frame.is_empty());
        let window = self.peer_initial_window;
        self.streams.insert(
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
        if self.blocked.is_empty() && self.send_pending(id) {
            // sent whole
        } else {
            self.blocked.push_back(id);
        }
        self.notify_task();
        id
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
    pub(super) fn fail_all(&mut self, why: String) {
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
    pub(super) fn on_frames(&mut self, buf: &[u8]) -> Result<usize, Closed> {
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

/// Resets the stream if the exchange is dropped before its end (a deadline, an abort).
pub(super) struct StreamGuard<'a> {
    inner: &'a Rc<RefCell<Inner>>,
    id: u32,
    done: bool,
}

impl<'a> StreamGuard<'a> {
    pub(super) fn new(inner: &'a Rc<RefCell<Inner>>, id: u32) -> Self {
        StreamGuard {
            inner,
            id,
            done: false,
        }
    }

    pub(super) fn poll_outcome(
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

//! Limits on what one client connection may cost, and metrics of what connections did.
//!
//! Two pieces sit between the listener and tonic's HTTP/2 server:
//! - [`guard`] wraps the stream of accepted sockets: beyond `--max-connections` open ones, a new
//!   socket is closed at once (counted as refused), so the accepted ones never wait for it.
//! - [`TappedConnection`] wraps each accepted socket and reads the frame headers going by in
//!   both directions (nine bytes per frame, no copy, no allocation): it counts frames received by
//!   type and the GOAWAY and RST_STREAM frames the server sends by error code, which is the only
//!   way to see them (hyper logs a connection's error at debug level and drops it); it notices a
//!   bad client preface; it closes a connection whose preface and first SETTINGS do not arrive
//!   within `--handshake-timeout` (grpc-java's 120 s `handshakeTimeout`, which h2 lacks); and it
//!   enforces grpc-java's keepalive policy (`KeepAliveEnforcer`), which h2 also lacks: a client
//!   that PINGs more often than `--permit-keepalive-time` gets strikes, and after
//!   `--max-ping-strikes` a GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and the connection closed.
//!
//! The HTTP/2 limits h2 itself enforces (streams, header list size, resets) are set on tonic's
//! builder by [`http2_limits`].
//!
//! The tap reads plaintext HTTP/2: it must wrap the stream that carries it (under TLS, the
//! decrypted side). Put below TLS, it sees a ClientHello first and stands aside.

use metrics::{Counter, Key, KeyName, Label, Recorder, SharedString};
use metrics_exporter_prometheus::PrometheusRecorder;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tonic::transport::Server;
use tonic::transport::server::Connected;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;
const ENHANCE_YOUR_CALM: u32 = 0xb;
/// The first byte of a TLS record carrying a ClientHello.
const TLS_HANDSHAKE: u8 = 0x16;

/// Connection and HTTP/2 limits. Defaults: a real Ozone 2.2.0 DataNode's where it has a limit
/// (grpc-java 1.75's `NettyServerBuilder` as `XceiverServerGrpc` builds it), a safe bound where
/// it has none (documented per field and in docs/dn-sim.md).
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionLimits {
    /// Open client connections; beyond it new ones are closed at once. A DataNode has no such
    /// limit (Netty accepts whatever its 256-deep backlog hands it).
    pub max_connections: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS. A DataNode advertises 2^31-1 (no limit).
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE, bytes: a DataNode's 8 KiB (grpc-java's default).
    pub max_header_list_size: u32,
    /// Streams a client may reset before the server accepted them, per connection, before h2
    /// answers GOAWAY ENHANCE_YOUR_CALM "too_many_resets" (h2's defence against rapid reset).
    /// A DataNode counts no resets (`maxRstFramesPerWindow` is off).
    pub max_pending_accept_reset_streams: usize,
    /// Streams the server may reset for a client's errors, per connection, before h2 answers
    /// GOAWAY ENHANCE_YOUR_CALM "too_many_internal_resets" (hyper's 1024; tonic would lift it).
    pub max_local_error_reset_streams: usize,
    /// Server keepalive PINGs after this long without traffic; `None` = none. Ozone 2.2.0: 5 min
    /// (2.0.0 and 2.1.0: grpc-java's 2 h).
    pub keepalive_time: Option<Duration>,
    /// A keepalive PING unanswered this long closes the connection. Ozone 2.2.0: 30 s (2.0.0 and
    /// 2.1.0: 20 s).
    pub keepalive_timeout: Duration,
    /// Client PINGs closer together than this are strikes (grpc-java's `permitKeepAliveTime`,
    /// 5 min; a DataNode does not change it).
    pub permit_keepalive_time: Duration,
    /// Strikes allowed; one more closes the connection (grpc-java's `MAX_PING_STRIKES`, 2).
    pub max_ping_strikes: u32,
    /// Time for a client to send the preface and its first SETTINGS (grpc-java's 120 s).
    pub handshake_timeout: Duration,
    /// The listening socket's accept queue: Ozone 2.2.0's `hdds.datanode.grpc.so.backlog`, 256
    /// (2.0.0 and 2.1.0 leave Netty's default, the kernel's `somaxconn`). Connections the kernel
    /// drops when it is full are seen by no counter of dn-sim's.
    pub so_backlog: u32,
    /// HTTP/2 receive window per stream (SETTINGS_INITIAL_WINDOW_SIZE): request bytes a client
    /// may send on one stream before dn-sim has read them. See [`STREAM_WINDOW`].
    pub stream_window: u32,
    /// HTTP/2 receive window per connection: the most unread request bytes one connection can
    /// leave in dn-sim's memory. See [`STREAM_WINDOW`].
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE. See [`STREAM_WINDOW`].
    pub max_frame_size: u32,
}

/// HTTP/2 receive settings dn-sim advertises by default. They govern how clients send requests to
/// dn-sim, not what dn-sim answers. A real DataNode (grpc-java on Netty) advertises a 1 MiB window
/// and Netty's 16 KiB MAX_FRAME_SIZE (`--http2-stream-window 1MB --http2-connection-window 1MB
/// --http2-max-frame-size 16KB` behave so); dn-sim's defaults are tuned for its own receive
/// path instead (`scripts/bench-write.sh`): windows that hold a whole 4 MB chunk per stream and
/// several streams' worth per connection, so a writer is never stalled on WINDOW_UPDATEs, and
/// 1 MiB frames. With 16 KiB frames every DATA frame wakes the stream's task and is copied into
/// tonic's message buffer on its own (256 wake-ups per 4 MB WriteChunk); with 1 MiB frames
/// dn-sim's CPU per MB written halved (0.50 → 0.34 ms/MB, 4 writers) and its profile is left with
/// the two copies it cannot avoid: the kernel's and tonic's into one buffer per message.
pub const STREAM_WINDOW: u32 = 8 << 20;
/// See [`STREAM_WINDOW`].
pub const CONNECTION_WINDOW: u32 = 32 << 20;
/// See [`STREAM_WINDOW`]; 2^20 of HTTP/2's 2^14..2^24-1.
pub const MAX_FRAME_SIZE: u32 = 1 << 20;

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_concurrent_streams: 1024,
            max_header_list_size: 8 << 10,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 1024,
            keepalive_time: Some(Duration::from_secs(300)),
            keepalive_timeout: Duration::from_secs(30),
            permit_keepalive_time: Duration::from_secs(300),
            max_ping_strikes: 2,
            handshake_timeout: Duration::from_secs(120),
            so_backlog: 256,
            stream_window: STREAM_WINDOW,
            connection_window: CONNECTION_WINDOW,
            max_frame_size: MAX_FRAME_SIZE,
        }
    }
}

/// The flags of [`ConnectionLimits`], flattened into `dn-sim`'s command line.
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectionArgs {
    /// Open client connections; beyond it new ones are closed at once (a DataNode has no limit).
    #[arg(long, env = "DN_SIM_MAX_CONNECTIONS", default_value_t = 4096, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// HTTP/2 streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS; a DataNode: unlimited).
    #[arg(long, env = "DN_SIM_MAX_CONCURRENT_STREAMS", default_value_t = 1024, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_streams: u32,
    /// Largest request header list (SETTINGS_MAX_HEADER_LIST_SIZE), e.g. 8KB (a DataNode's).
    #[arg(long, env = "DN_SIM_MAX_HEADER_LIST_SIZE", default_value = "8KB", value_parser = parse_header_list_size)]
    pub max_header_list_size: u32,
    /// Streams a client may reset before they are served, per connection, before GOAWAY
    /// ENHANCE_YOUR_CALM (h2's rapid-reset defence; a DataNode counts none).
    #[arg(long, env = "DN_SIM_MAX_PENDING_ACCEPT_RESET_STREAMS", default_value_t = 20, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_pending_accept_reset_streams: u64,
    /// Streams reset for a client's errors, per connection, before GOAWAY ENHANCE_YOUR_CALM.
    #[arg(long, env = "DN_SIM_MAX_LOCAL_ERROR_RESET_STREAMS", default_value_t = 1024, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_local_error_reset_streams: u64,
    /// Server keepalive PING after this long without traffic, or `none` (Ozone 2.2.0: 5m).
    #[arg(long, env = "DN_SIM_KEEPALIVE_TIME", default_value = "5m", value_parser = parse_optional_duration)]
    pub keepalive_time: OptionalDuration,
    /// How long a keepalive PING may go unanswered before the connection is closed (2.2.0: 30s).
    #[arg(long, env = "DN_SIM_KEEPALIVE_TIMEOUT", default_value = "30s", value_parser = parse_positive_duration)]
    pub keepalive_timeout: Duration,
    /// Client PINGs closer together than this are strikes (grpc-java's permitKeepAliveTime).
    #[arg(long, env = "DN_SIM_PERMIT_KEEPALIVE_TIME", default_value = "5m", value_parser = parse_duration)]
    pub permit_keepalive_time: Duration,
    /// PING strikes allowed; one more gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
    #[arg(long, env = "DN_SIM_MAX_PING_STRIKES", default_value_t = 2, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(0..))]
    pub max_ping_strikes: u32,
    /// Time for a new connection's preface and first SETTINGS before it is closed.
    #[arg(long, env = "DN_SIM_HANDSHAKE_TIMEOUT", default_value = "120s", value_parser = parse_positive_duration)]
    pub handshake_timeout: Duration,
    /// Accept queue of the client port (hdds.datanode.grpc.so.backlog; 2.2.0: 256).
    #[arg(long, env = "DN_SIM_SO_BACKLOG", default_value_t = 256, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=65_535))]
    pub so_backlog: u32,
    /// HTTP/2 receive window per stream, 1KB to 2GB-1 (a DataNode: 1MB).
    #[arg(long, env = "DN_SIM_HTTP2_STREAM_WINDOW", default_value = "8MB", value_parser = parse_window)]
    pub http2_stream_window: u32,
    /// HTTP/2 receive window per connection, 1KB to 2GB-1: the most unread request bytes one
    /// connection can leave in dn-sim's memory (a DataNode: 1MB).
    #[arg(long, env = "DN_SIM_HTTP2_CONNECTION_WINDOW", default_value = "32MB", value_parser = parse_window)]
    pub http2_connection_window: u32,
    /// Largest HTTP/2 frame dn-sim accepts (SETTINGS_MAX_FRAME_SIZE), 16KB to 16MB-1 (a DataNode:
    /// 16KB).
    #[arg(long, env = "DN_SIM_HTTP2_MAX_FRAME_SIZE", default_value = "1MB", value_parser = parse_frame_size)]
    pub http2_max_frame_size: u32,
}

/// A duration or `none`.
#[derive(Clone, Copy, Debug)]
pub struct OptionalDuration(pub Option<Duration>);

fn parse_duration(s: &str) -> Result<Duration, String> {
    common::units::parse_duration(s).map_err(|e| e.to_string())
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be greater than zero".into()),
        d => Ok(d),
    }
}

fn parse_optional_duration(s: &str) -> Result<OptionalDuration, String> {
    if s == "none" {
        return Ok(OptionalDuration(None));
    }
    parse_positive_duration(s).map(|d| OptionalDuration(Some(d)))
}

fn parse_header_list_size(s: &str) -> Result<u32, String> {
    match common::units::parse_size(s).map_err(|e| e.to_string())? {
        0 => Err("must be greater than zero".into()),
        n => u32::try_from(n).map_err(|_| format!("'{s}' is over 4 GiB")),
    }
}

/// A flow-control window: 1 KiB to 2^31-1 bytes (RFC 9113 §6.9.2's largest).
fn parse_window(s: &str) -> Result<u32, String> {
    match common::units::parse_size(s).map_err(|e| e.to_string())? {
        n if n < 1 << 10 => Err(format!("'{s}' is under 1KB")),
        n if n > (1 << 31) - 1 => Err(format!("'{s}' is over 2GB-1, HTTP/2's largest window")),
        n => Ok(n as u32),
    }
}

/// SETTINGS_MAX_FRAME_SIZE: 2^14 to 2^24-1 bytes (RFC 9113 §6.5.2).
fn parse_frame_size(s: &str) -> Result<u32, String> {
    match common::units::parse_size(s).map_err(|e| e.to_string())? {
        n if n < 1 << 14 => Err(format!("'{s}' is under 16KB, HTTP/2's smallest frame size")),
        n if n > (1 << 24) - 1 => Err(format!("'{s}' is over 16MB-1, HTTP/2's largest frame size")),
        n => Ok(n as u32),
    }
}

impl ConnectionArgs {
    pub fn limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: self.max_connections as usize,
            max_concurrent_streams: self.max_concurrent_streams,
            max_header_list_size: self.max_header_list_size,
            max_pending_accept_reset_streams: self.max_pending_accept_reset_streams as usize,
            max_local_error_reset_streams: self.max_local_error_reset_streams as usize,
            keepalive_time: self.keepalive_time.0,
            keepalive_timeout: self.keepalive_timeout,
            permit_keepalive_time: self.permit_keepalive_time,
            max_ping_strikes: self.max_ping_strikes,
            handshake_timeout: self.handshake_timeout,
            so_backlog: self.so_backlog,
            stream_window: self.http2_stream_window,
            connection_window: self.http2_connection_window,
            max_frame_size: self.http2_max_frame_size,
        }
    }
}

/// Binds the client port with an accept queue of `backlog` (Rust's standard library would give
/// 128), SO_REUSEADDR as the standard library sets it.
pub fn bind(addr: SocketAddr, backlog: u32) -> io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The HTTP/2 limits h2 enforces itself, set on tonic's builder. Every one is set explicitly:
/// tonic passes its own `None`s down and so would lift hyper's defaults (200 streams, 1024 local
/// error resets).
pub fn http2_limits(server: Server, limits: &ConnectionLimits) -> Server {
    server
        .max_concurrent_streams(limits.max_concurrent_streams)
        .http2_max_header_list_size(limits.max_header_list_size)
        .http2_max_pending_accept_reset_streams(Some(limits.max_pending_accept_reset_streams))
        .http2_max_local_error_reset_streams(Some(limits.max_local_error_reset_streams))
        .http2_keepalive_interval(limits.keepalive_time)
        .http2_keepalive_timeout(Some(limits.keepalive_timeout))
        .initial_stream_window_size(Some(limits.stream_window))
        .initial_connection_window_size(Some(limits.connection_window))
        .max_frame_size(Some(limits.max_frame_size))
}

/// HTTP/2 error codes (RFC 9113 §7) as metric labels; index = code, the last (`UNKNOWN`) for any
/// other.
const ERROR_CODES: [&str; common::http2::ERROR_CODE_NAMES.len() + 1] = {
    let names = common::http2::ERROR_CODE_NAMES;
    let mut labels = ["UNKNOWN"; common::http2::ERROR_CODE_NAMES.len() + 1];
    let mut i = 0;
    while i < names.len() {
        labels[i] = names[i];
        i += 1;
    }
    labels
};

/// Frame types (RFC 9113 §6) as metric labels; index = type, the last for any other.
const FRAME_TYPES: [&str; 11] = [
    "DATA",
    "HEADERS",
    "PRIORITY",
    "RST_STREAM",
    "SETTINGS",
    "PUSH_PROMISE",
    "PING",
    "GOAWAY",
    "WINDOW_UPDATE",
    "CONTINUATION",
    "UNKNOWN",
];

/// Why a connection ended, as the label of `dn_sim_connections_closed_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed it, or a graceful GOAWAY (NO_ERROR) ended it.
    Normal,
    /// A read or write failed (typically the client reset the TCP connection).
    IoError,
    /// The server sent GOAWAY with an error code (a protocol error, a limit h2 enforces).
    GoawayError,
    /// The first bytes were not the HTTP/2 client preface.
    BadPreface,
    /// No preface and SETTINGS within `--handshake-timeout`.
    HandshakeTimeout,
    /// More PING strikes than `--max-ping-strikes`.
    TooManyPings,
}

const CLOSE_REASONS: [(CloseReason, &str); 6] = [
    (CloseReason::Normal, "normal"),
    (CloseReason::IoError, "io_error"),
    (CloseReason::GoawayError, "goaway_error"),
    (CloseReason::BadPreface, "bad_preface"),
    (CloseReason::HandshakeTimeout, "handshake_timeout"),
    (CloseReason::TooManyPings, "too_many_pings"),
];

/// Counters of what connections did, registered once on the server's recorder; recording is an
/// atomic add on a handle picked by index.
#[derive(Clone)]
pub struct ConnectionMetrics {
    accepted: Counter,
    refused: Counter,
    closed: [Counter; CLOSE_REASONS.len()],
    frames_received: [Counter; FRAME_TYPES.len()],
    goaways_sent: [Counter; ERROR_CODES.len()],
    resets_sent: [Counter; ERROR_CODES.len()],
}

impl ConnectionMetrics {
    pub fn register(recorder: &PrometheusRecorder) -> Self {
        let meta = metrics::Metadata::new(module_path!(), metrics::Level::INFO, None);
        let counter = |name: &'static str, label: Option<(&'static str, &'static str)>| {
            let labels: Vec<Label> = label.map(|(k, v)| Label::new(k, v)).into_iter().collect();
            recorder.register_counter(&Key::from_parts(name, labels), &meta)
        };
        let help = [
            (
                "dn_sim_connections_accepted_total",
                "Client connections accepted",
            ),
            (
                "dn_sim_connections_refused_total",
                "Client connections closed on arrival: --max-connections were open",
            ),
            (
                "dn_sim_connections_closed_total",
                "Client connections ended, by reason",
            ),
            (
                "dn_sim_http2_frames_received_total",
                "HTTP/2 frames received from clients, by type",
            ),
            (
                "dn_sim_http2_goaways_sent_total",
                "HTTP/2 GOAWAY frames sent, by error code",
            ),
            (
                "dn_sim_http2_resets_sent_total",
                "HTTP/2 RST_STREAM frames sent, by error code",
            ),
        ];
        for (name, text) in help {
            recorder.describe_counter(
                KeyName::from_const_str(name),
                None,
                SharedString::const_str(text),
            );
        }
        Self {
            accepted: counter("dn_sim_connections_accepted_total", None),
            refused: counter("dn_sim_connections_refused_total", None),
            closed: CLOSE_REASONS.map(|(_, reason)| {
                counter("dn_sim_connections_closed_total", Some(("reason", reason)))
            }),
            frames_received: FRAME_TYPES
                .map(|t| counter("dn_sim_http2_frames_received_total", Some(("type", t)))),
            goaways_sent: ERROR_CODES
                .map(|c| counter("dn_sim_http2_goaways_sent_total", Some(("code", c)))),
            resets_sent: ERROR_CODES
                .map(|c| counter("dn_sim_http2_resets_sent_total", Some(("code", c)))),
        }
    }

    fn closed(&self, reason: CloseReason) {
        let i = CLOSE_REASONS
            .iter()
            .position(|(r, _)| *r == reason)
            .unwrap_or(0);
        self.closed[i].increment(1);
    }
}

fn code_index(code: u32) -> usize {
    (code as usize).min(ERROR_CODES.len() - 1)
}

/// What every connection of one server shares: the limits, the metrics, the open count.
struct Shared {
    limits: ConnectionLimits,
    metrics: ConnectionMetrics,
    open: AtomicUsize,
}

/// Wraps a stream of accepted sockets: each becomes a [`TappedConnection`], or is closed at once
/// when `limits.max_connections` are open.
pub fn guard<S>(incoming: S, limits: ConnectionLimits, metrics: ConnectionMetrics) -> Guarded<S> {
    Guarded {
        incoming,
        shared: Arc::new(Shared {
            limits,
            metrics,
            open: AtomicUsize::new(0),
        }),
    }
}

/// See [`guard`].
pub struct Guarded<S> {
    incoming: S,
    shared: Arc<Shared>,
}

impl<S, IO, E> futures_util::Stream for Guarded<S>
where
    S: futures_util::Stream<Item = Result<IO, E>> + Unpin,
{
    type Item = Result<TappedConnection<IO>, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let io = match ready!(Pin::new(&mut self.incoming).poll_next(cx)) {
                Some(Ok(io)) => io,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            };
            let shared = &self.shared;
            if shared.open.fetch_add(1, Relaxed) >= shared.limits.max_connections {
                // Dropping the socket closes it; the accept loop goes straight on to the next.
                shared.open.fetch_sub(1, Relaxed);
                shared.metrics.refused.increment(1);
                drop(io);
                continue;
            }
            shared.metrics.accepted.increment(1);
            return Poll::Ready(Some(Ok(TappedConnection::new(io, Arc::clone(shared)))));
        }
    }
}

/// An event of a [`FrameScanner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrameEvent {
    /// A frame header: type, flags, stream ID.
    Frame { kind: u8, flags: u8, stream: u32 },
    /// The error code of an RST_STREAM or GOAWAY frame.
    ErrorCode { kind: u8, code: u32 },
}

/// Follows HTTP/2 frames through a byte stream cut anywhere: frame headers are collected, payloads
/// skipped, except the four bytes of an RST_STREAM's or GOAWAY's error code.
#[derive(Default)]
struct FrameScanner {
    head: [u8; 9],
    head_len: u8,
    /// Payload bytes of the current frame not yet passed.
    payload_left: u32,
    /// Payload bytes of the current frame passed.
    payload_at: u32,
    kind: u8,
    /// Where the current frame's error code starts in its payload, if it has one.
    code_at: Option<u32>,
    code: [u8; 4],
    code_len: u8,
}

impl FrameScanner {
    /// Between two frames (so a frame of our own may be written here).
    fn at_boundary(&self) -> bool {
        self.head_len == 0 && self.payload_left == 0
    }

    fn feed(&mut self, mut data: &[u8], mut on: impl FnMut(FrameEvent)) {
        while !data.is_empty() {
            if self.payload_left == 0 {
                let take = (9 - self.head_len as usize).min(data.len());
                self.head[self.head_len as usize..][..take].copy_from_slice(&data[..take]);
                self.head_len += take as u8;
                data = &data[take..];
                if self.head_len < 9 {
                    return;
                }
                self.head_len = 0;
                let h = self.head;
                let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
                self.kind = h[3];
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                on(FrameEvent::Frame {
                    kind: h[3],
                    flags: h[4],
                    stream,
                });
                self.payload_left = len;
                self.payload_at = 0;
                self.code_len = 0;
                self.code_at = match h[3] {
                    RST_STREAM => Some(0),
                    GOAWAY => Some(4),
                    _ => None,
                };
                continue;
            }
            let take = (self.payload_left as usize).min(data.len());
            if let Some(at) = self.code_at.filter(|_| self.code_len < 4) {
                for (i, &b) in data[..take].iter().enumerate() {
                    let pos = self.payload_at + i as u32;
                    if pos >= at + 4 {
                        break;
                    }
                    if pos >= at {
                        self.code[self.code_len as usize] = b;
                        self.code_len += 1;
                    }
                }
                if self.code_len == 4 {
                    on(FrameEvent::ErrorCode {
                        kind: self.kind,
                        code: u32::from_be_bytes(self.code),
                    });
                }
            }
            self.payload_at += take as u32;
            self.payload_left -= take as u32;
            data = &data[take..];
        }
    }
}

/// A client connection whose HTTP/2 frames are counted and whose handshake and PINGs are policed
/// (see the module's documentation).
pub struct TappedConnection<IO> {
    io: IO,
    shared: Arc<Shared>,
    /// Bytes of the client preface received so far (24 = all).
    preface_len: u8,
    /// Whether the preface and the first SETTINGS frame have arrived.
    handshaken: bool,
    /// Bytes received, when they are TLS records rather than HTTP/2.
    tls_bytes: Option<usize>,
    handshake_deadline: Option<Pin<Box<Sleep>>>,
    inbound: FrameScanner,
    outbound: FrameScanner,
    /// The highest stream a client opened (a GOAWAY's last-stream-ID).
    last_stream: u32,
    accepted_at: Instant,
    /// grpc-java's `KeepAliveEnforcer`: when the last valid PING came, strikes since.
    last_valid_ping: Instant,
    ping_strikes: u32,
    /// Why the connection ends, once known (the first reason wins).
    reason: Option<CloseReason>,
    /// Set when the tap itself ends the connection: reads and writes fail from then on.
    killed: bool,
}

impl<IO> TappedConnection<IO> {
    fn new(io: IO, shared: Arc<Shared>) -> Self {
        let now = Instant::now();
        let deadline = Box::pin(tokio::time::sleep_until(
            now + shared.limits.handshake_timeout,
        ));
        Self {
            io,
            shared,
            preface_len: 0,
            handshaken: false,
            tls_bytes: None,
            handshake_deadline: Some(deadline),
            inbound: FrameScanner::default(),
            outbound: FrameScanner::default(),
            last_stream: 0,
            accepted_at: now,
            last_valid_ping: now,
            ping_strikes: 0,
            reason: None,
            killed: false,
        }
    }

    fn note(&mut self, reason: CloseReason) {
        self.reason.get_or_insert(reason);
    }

    /// Scans bytes received; returns whether the connection must end now.
    fn scan_inbound(&mut self, mut data: &[u8]) -> bool {
        if self.preface_len == 0 && data.first() == Some(&TLS_HANDSHAKE) {
            // Ciphertext: the tap was put below a TLS layer. It stands aside (no frames, no PING
            // policy) rather than end every TLS connection; the handshake timeout still holds
            // until as many bytes came as a plaintext preface and SETTINGS take.
            self.tls_bytes = Some(0);
            self.preface_len = u8::MAX;
        }
        if let Some(received) = self.tls_bytes.as_mut() {
            *received += data.len();
            if *received >= PREFACE.len() + 9 {
                self.handshake_deadline = None;
            }
            return false;
        }
        if self.preface_len < 24 {
            let take = (24 - self.preface_len as usize).min(data.len());
            if data[..take] != PREFACE[self.preface_len as usize..][..take] {
                // h2 closes the connection itself; the rest is not HTTP/2 to scan.
                self.note(CloseReason::BadPreface);
                self.preface_len = u8::MAX;
                return false;
            }
            self.preface_len += take as u8;
            data = &data[take..];
        }
        if self.preface_len != 24 {
            return false;
        }
        let mut pings = 0u32;
        let metrics = &self.shared.metrics;
        let (mut first_settings, mut last_stream) = (false, self.last_stream);
        let handshaken = self.handshaken;
        self.inbound.feed(data, |event| {
            if let FrameEvent::Frame {
                kind,
                flags,
                stream,
            } = event
            {
                metrics.frames_received[(kind as usize).min(FRAME_TYPES.len() - 1)].increment(1);
                match kind {
                    SETTINGS if !handshaken => first_settings = true,
                    PING if flags & ACK == 0 => pings += 1,
                    HEADERS => last_stream = last_stream.max(stream),
                    _ => {}
                }
            }
        });
        self.last_stream = last_stream;
        if first_settings {
            self.handshaken = true;
            self.handshake_deadline = None;
        }
        for _ in 0..pings {
            if !self.ping_acceptable() {
                return true;
            }
        }
        false
    }

    /// grpc-java's `KeepAliveEnforcer.pingAcceptable` (with calls outstanding, the lenient case).
    fn ping_acceptable(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.last_valid_ping + self.shared.limits.permit_keepalive_time {
            self.last_valid_ping = now;
            return true;
        }
        self.ping_strikes += 1;
        self.ping_strikes <= self.shared.limits.max_ping_strikes
    }

    fn scan_outbound(&mut self, data: &[u8]) {
        let metrics = &self.shared.metrics;
        let (mut answered, mut goaway_error) = (false, false);
        self.outbound.feed(data, |event| match event {
            FrameEvent::Frame { kind, .. } => answered |= kind == HEADERS || kind == DATA,
            FrameEvent::ErrorCode { kind, code } if kind == GOAWAY => {
                metrics.goaways_sent[code_index(code)].increment(1);
                goaway_error |= code != 0;
            }
            FrameEvent::ErrorCode { code, .. } => {
                metrics.resets_sent[code_index(code)].increment(1)
            }
        });
        if answered {
            // grpc-java resets the strikes whenever it sends HEADERS or DATA.
            self.last_valid_ping = self.accepted_at;
            self.ping_strikes = 0;
        }
        if goaway_error {
            self.note(CloseReason::GoawayError);
        }
    }
}

impl<IO: AsyncWrite + Unpin> TappedConnection<IO> {
    /// Ends the connection for too many PINGs: a GOAWAY ENHANCE_YOUR_CALM "too_many_pings" as
    /// grpc-java sends it, if the server's output is between frames and the socket takes it now.
    fn kill_for_pings(&mut self, cx: &mut Context<'_>) -> io::Error {
        self.note(CloseReason::TooManyPings);
        self.killed = true;
        if self.outbound.at_boundary() {
            const DEBUG: &[u8] = b"too_many_pings";
            let mut frame = [0u8; 9 + 8 + DEBUG.len()];
            frame[..3].copy_from_slice(&((8 + DEBUG.len()) as u32).to_be_bytes()[1..]);
            frame[3] = GOAWAY;
            frame[9..13].copy_from_slice(&self.last_stream.to_be_bytes());
            frame[13..17].copy_from_slice(&ENHANCE_YOUR_CALM.to_be_bytes());
            frame[17..].copy_from_slice(DEBUG);
            if let Poll::Ready(Ok(n)) = Pin::new(&mut self.io).poll_write(cx, &frame) {
                let metrics = &self.shared.metrics;
                if n == frame.len() {
                    metrics.goaways_sent[ENHANCE_YOUR_CALM as usize].increment(1);
                }
                let _ = Pin::new(&mut self.io).poll_flush(cx);
            }
        }
        io::Error::new(io::ErrorKind::ConnectionAborted, "too_many_pings")
    }
}

impl<IO> Drop for TappedConnection<IO> {
    fn drop(&mut self) {
        self.shared.open.fetch_sub(1, Relaxed);
        self.shared
            .metrics
            .closed(self.reason.unwrap_or(CloseReason::Normal));
    }
}

impl<IO: Connected> Connected for TappedConnection<IO> {
    type ConnectInfo = IO::ConnectInfo;
    fn connect_info(&self) -> IO::ConnectInfo {
        self.io.connect_info()
    }
}

fn killed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection ended by dn-sim",
    )
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for TappedConnection<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.killed {
            return Poll::Ready(Err(killed_error()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if self.scan_inbound(&buf.filled()[before..]) {
                    return Poll::Ready(Err(self.kill_for_pings(cx)));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                self.note(CloseReason::IoError);
                Poll::Ready(Err(e))
            }
            Poll::Pending => {
                if let Some(deadline) = self.handshake_deadline.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    self.note(CloseReason::HandshakeTimeout);
                    self.killed = true;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no HTTP/2 preface and SETTINGS within --handshake-timeout",
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for TappedConnection<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.killed {
            return Poll::Ready(Err(killed_error()));
        }
        let result = ready!(Pin::new(&mut self.io).poll_write(cx, buf));
        match &result {
            Ok(n) => self.scan_outbound(&buf[..*n]),
            Err(_) => self.note(CloseReason::IoError),
        }
        Poll::Ready(result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.killed {
            return Poll::Ready(Err(killed_error()));
        }
        let result = ready!(Pin::new(&mut self.io).poll_write_vectored(cx, bufs));
        match &result {
            Ok(n) => {
                let mut left = *n;
                for b in bufs {
                    if left == 0 {
                        break;
                    }
                    let take = left.min(b.len());
                    self.scan_outbound(&b[..take]);
                    left -= take;
                }
            }
            Err(_) => self.note(CloseReason::IoError),
        }
        Poll::Ready(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend(payload);
        f
    }

    fn events(bytes: &[u8], cut: usize) -> Vec<FrameEvent> {
        let mut scanner = FrameScanner::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(cut) {
            scanner.feed(piece, |e| out.push(e));
        }
        assert!(scanner.at_boundary());
        out
    }

    #[test]
    fn frames_and_error_codes_are_found_however_the_bytes_are_cut() {
        let mut bytes = frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]);
        bytes.extend(frame(HEADERS, 0x5, 3, &[0x82; 40]));
        bytes.extend(frame(RST_STREAM, 0, 3, &8u32.to_be_bytes()));
        bytes.extend(frame(DATA, 0, 5, &[7; 100_000]));
        let mut goaway = 5u32.to_be_bytes().to_vec();
        goaway.extend(11u32.to_be_bytes());
        goaway.extend(b"too_many_resets");
        bytes.extend(frame(GOAWAY, 0, 0, &goaway));
        let expected = vec![
            FrameEvent::Frame {
                kind: SETTINGS,
                flags: 0,
                stream: 0,
            },
            FrameEvent::Frame {
                kind: HEADERS,
                flags: 0x5,
                stream: 3,
            },
            FrameEvent::Frame {
                kind: RST_STREAM,
                flags: 0,
                stream: 3,
            },
            FrameEvent::ErrorCode {
                kind: RST_STREAM,
                code: 8,
            },
            FrameEvent::Frame {
                kind: DATA,
                flags: 0,
                stream: 5,
            },
            FrameEvent::Frame {
                kind: GOAWAY,
                flags: 0,
                stream: 0,
            },
            FrameEvent::ErrorCode {
                kind: GOAWAY,
                code: 11,
            },
        ];
        for cut in [1, 2, 3, 5, 9, 10, 17, 4096, bytes.len()] {
            assert_eq!(events(&bytes, cut), expected, "cut every {cut} bytes");
        }
    }

    #[test]
    fn defaults_are_a_datanodes_where_it_has_a_limit() {
        let d = ConnectionLimits::default();
        // grpc-java 1.75 (Ozone 2.2.0): 8 KiB metadata, permitKeepAliveTime 5 min, 2 strikes,
        // 120 s handshake; Ozone 2.2.0's XceiverServerGrpc: keepalive 5 min / 30 s.
        assert_eq!(d.max_header_list_size, 8192);
        assert_eq!(d.permit_keepalive_time, Duration::from_secs(300));
        assert_eq!(d.max_ping_strikes, 2);
        assert_eq!(d.handshake_timeout, Duration::from_secs(120));
        assert_eq!(d.keepalive_time, Some(Duration::from_secs(300)));
        assert_eq!(d.keepalive_timeout, Duration::from_secs(30));
        assert_eq!(d.so_backlog, 256);
    }
}

#[cfg(test)]
mod flag_tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        connections: ConnectionArgs,
    }

    fn parse(args: &[&str]) -> Result<ConnectionLimits, String> {
        let argv = std::iter::once("dn-sim").chain(args.iter().copied());
        Flags::try_parse_from(argv)
            .map(|f| f.connections.limits())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn flag_defaults_are_the_limits_defaults() {
        assert_eq!(parse(&[]).unwrap(), ConnectionLimits::default());
    }

    #[test]
    fn flags_set_limits_and_bad_values_name_the_flag() {
        let l = parse(&[
            "--max-connections",
            "8",
            "--max-header-list-size",
            "16KB",
            "--keepalive-time",
            "none",
            "--max-ping-strikes",
            "0",
        ])
        .unwrap();
        assert_eq!(
            (l.max_connections, l.max_header_list_size, l.keepalive_time),
            (8, 16384, None)
        );
        assert_eq!(l.max_ping_strikes, 0);
        for (flag, bad) in [
            ("--max-connections", "0"),
            ("--max-concurrent-streams", "-1"),
            ("--max-header-list-size", "0"),
            ("--max-header-list-size", "8GB"),
            ("--handshake-timeout", "0s"),
            ("--keepalive-time", "soon"),
        ] {
            let err = parse(&[flag, bad]).unwrap_err();
            assert!(err.contains(flag), "{flag} {bad}: {err}");
        }
    }
}

#[cfg(test)]
mod tap_tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn shared(handshake_timeout: Duration) -> Arc<Shared> {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        Arc::new(Shared {
            limits: ConnectionLimits {
                handshake_timeout,
                ..ConnectionLimits::default()
            },
            metrics: ConnectionMetrics::register(&recorder),
            open: AtomicUsize::new(1),
        })
    }

    #[tokio::test]
    async fn a_silent_client_is_cut_off_and_a_tls_client_is_left_alone() {
        let (_client, server) = tokio::io::duplex(1024);
        let mut silent = TappedConnection::new(server, shared(Duration::from_millis(50)));
        let mut buf = [0u8; 64];
        let err = silent.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(silent.reason, Some(CloseReason::HandshakeTimeout));

        let (mut client, server) = tokio::io::duplex(1024);
        let mut tls = TappedConnection::new(server, shared(Duration::from_millis(50)));
        // A ClientHello's first 45 bytes: more than a plaintext preface and SETTINGS.
        let mut hello = vec![TLS_HANDSHAKE, 3, 1, 0, 40];
        hello.resize(45, 0);
        client.write_all(&hello).await.unwrap();
        assert_eq!(tls.read(&mut buf).await.unwrap(), 45);
        let later = tokio::time::timeout(Duration::from_millis(200), tls.read(&mut buf)).await;
        assert!(later.is_err(), "still waiting for bytes, not timed out");
        assert_eq!(tls.reason, None);

        // A record header and no more is still a client that never says hello.
        let (mut client, server) = tokio::io::duplex(1024);
        let mut stalled = TappedConnection::new(server, shared(Duration::from_millis(50)));
        client.write_all(&hello[..5]).await.unwrap();
        assert_eq!(stalled.read(&mut buf).await.unwrap(), 5);
        let err = stalled.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}

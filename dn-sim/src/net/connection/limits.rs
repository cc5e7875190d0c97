//! Connection and HTTP/2 limits: [`ConnectionLimits`] and its defaults, the flags that set them,
//! the client port's socket and the limits h2 enforces itself, set on tonic's builder.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tonic::transport::Server;

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

#[cfg(test)]
mod tests {
    use super::*;

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

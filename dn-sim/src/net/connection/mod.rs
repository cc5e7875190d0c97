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

mod guard;
mod limits;
mod metrics;
mod scanner;
mod tap;

pub use guard::{Guarded, guard};
pub use limits::{
    CONNECTION_WINDOW, ConnectionArgs, ConnectionLimits, MAX_FRAME_SIZE, OptionalDuration,
    STREAM_WINDOW, bind, http2_limits,
};
pub use metrics::{CloseReason, ConnectionMetrics};
pub use tap::TappedConnection;

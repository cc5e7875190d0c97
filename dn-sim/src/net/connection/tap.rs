//! [`TappedConnection`]: counts each connection's HTTP/2 frames, enforces the handshake timeout
//! and the PING policy (see the module `net::connection`).

use super::guard::Shared;
use super::metrics::{CloseReason, FRAME_TYPES, code_index};
use super::scanner::{FrameEvent, FrameScanner};
use common::http2::error_code::ENHANCE_YOUR_CALM;
use common::http2::flags::ACK;
use common::http2::frame_type::{DATA, GOAWAY, HEADERS, PING, SETTINGS};
use common::http2::{FRAME_HEADER_LEN, FrameHeader, PREFACE};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;

/// The first byte of a TLS record carrying a ClientHello.
const TLS_HANDSHAKE: u8 = 0x16;

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
    pub(super) fn new(io: IO, shared: Arc<Shared>) -> Self {
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
            if *received >= PREFACE.len() + FRAME_HEADER_LEN {
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
            let mut frame = [0u8; FRAME_HEADER_LEN + 8 + DEBUG.len()];
            let header = FrameHeader::new((8 + DEBUG.len()) as u32, GOAWAY, 0, 0);
            frame[..FRAME_HEADER_LEN].copy_from_slice(&header.encode());
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
mod tap_tests {
    use super::super::{ConnectionLimits, ConnectionMetrics};
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
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

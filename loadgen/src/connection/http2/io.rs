//! The connection's byte stream and its task: the [`Socket`] (plain TCP, or TLS through
//! tokio-rustls's poll functions: one match per read or write call, no trait object), the
//! handshake's I/O, and [`drive`], the read-write loop that hands what it reads to the state
//! machine ([`super::state`]) and writes what the state machine and the workers queued.

use bytes::BytesMut;
use std::cell::RefCell;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncReadExt, AsyncWrite, Interest};
use tokio::net::TcpStream;

use common::http2::FrameHeader;
use common::http2::flags::ACK;
use common::http2::frame_type::SETTINGS;

use super::super::tls::TargetTls;
use super::state::{Closed, Inner};

/// Opens the byte stream: TCP (no Nagle), then TLS over it when `tls` is given.
pub(super) async fn open(hostport: &str, tls: Option<&TargetTls>) -> Result<Socket, String> {
    let tcp = TcpStream::connect(hostport)
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(match tls {
        None => Socket::Plain(tcp),
        Some(tls) => Socket::Tls(Box::new(tls.handshake(tcp, hostport).await?)),
    })
}

/// Writes the preface `inner` has queued, then reads frames until the server's first SETTINGS
/// and hands them to `inner`. `tls`: whether `sock` is TLS (for the error message).
pub(super) async fn handshake(sock: Socket, inner: &mut Inner, tls: bool) -> Result<Io, String> {
    let mut io = Io {
        sock,
        rbuf: BytesMut::with_capacity(64 * 1024),
    };
    // Write the preface, then read frames until the server's first SETTINGS.
    poll_fn(|cx| io.poll_write_out(inner, cx))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let n = io.read_some().await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(if tls {
                "the server closed the connection during the HTTP/2 handshake".to_string()
            } else {
                // A TLS server closes on a client's plain-text preface.
                "the server closed the connection during the HTTP/2 \
                 handshake (a TLS port? then give --tls and --tls-ca)"
                    .to_string()
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
    Ok(io)
}

/// The connection's byte stream: plain TCP or TLS over it.
pub(super) enum Socket {
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
pub(super) struct Io {
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
pub(super) async fn drive(mut io: Io, inner: Rc<RefCell<Inner>>) {
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

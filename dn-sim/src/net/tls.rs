//! TLS on the client port, as an Ozone DataNode with `hdds.grpc.tls.enabled=true` (and
//! `ozone.security.enabled=true`, without which a real DataNode serves plain text).
//!
//! What a real DataNode does (Ozone 2.0.0–2.2.0, `XceiverServerGrpc`): Netty's
//! `SslContextBuilder.forServer(keyManager)` configured by grpc-java's `GrpcSslContexts` (ALPN
//! `h2`, HTTP/2's cipher suites), with no trust manager and no client-auth mode, so it never asks
//! for a client certificate. TLS versions are the provider's defaults (TLS 1.2 and 1.3 with
//! `hdds.grpc.tls.provider=OPENSSL`); 2.2.0 added `hdds.grpc.tls.protocols` and
//! `hdds.grpc.tls.ciphers` to restrict them. dn-sim does the same with rustls: TLS 1.2 and 1.3
//! (or what `hdds.grpc.tls.protocols` names), ALPN `h2`, and `--tls-client-ca` as an extension:
//! mutual TLS, a client certificate signed by that CA required.
//!
//! Handshakes run in tasks of their own, each within a timeout (Netty's `SslHandler` default is
//! 10 s), so a client that connects and never completes its handshake delays nobody else.
//!
//! The PEM loaders and the client side ([`ClientTls`]) live in grpc-client, shared with
//! `dn-sim healthcheck` and loadgen.

use rustls::{ServerConfig, SupportedProtocolVersion};
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::TcpIncoming;

// The client side and the PEM loaders live in grpc-client (one copy, shared with loadgen).
pub use grpc_client::{
    ClientTls, NoClientCertificate, TonicConnector, describe_handshake_error, host_of, load_certs,
    load_key, load_roots, provider,
};

/// How long a client may take to complete its handshake: Netty's `SslHandler` default.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS versions a server accepts (`hdds.grpc.tls.protocols`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsVersions {
    /// TLS 1.2 and 1.3: what a DataNode with the default OPENSSL provider accepts.
    #[default]
    Both,
    Tls12,
    Tls13,
}

impl TlsVersions {
    /// Parses `hdds.grpc.tls.protocols`: a comma-separated list of `TLSv1.2` and `TLSv1.3`
    /// (empty: both). Older versions are refused: rustls does not speak them.
    pub fn parse(value: &str) -> Result<Self, String> {
        let (mut v12, mut v13) = (false, false);
        for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "TLSv1.2" => v12 = true,
                "TLSv1.3" => v13 = true,
                other => {
                    return Err(format!(
                        "hdds.grpc.tls.protocols: '{other}' is not TLSv1.2 or TLSv1.3 \
                         (dn-sim speaks no older TLS)"
                    ));
                }
            }
        }
        Ok(match (v12, v13) {
            (true, false) => Self::Tls12,
            (false, true) => Self::Tls13,
            _ => Self::Both,
        })
    }

    fn rustls(self) -> &'static [&'static SupportedProtocolVersion] {
        static BOTH: [&SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static TLS12: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        static TLS13: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            Self::Both => &BOTH,
            Self::Tls12 => &TLS12,
            Self::Tls13 => &TLS13,
        }
    }
}

/// TLS on the client port: `--tls-cert`, `--tls-key`, `--tls-client-ca`.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// PEM certificate chain, the server's certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA bundle: when set, clients must present a certificate it signed (mutual TLS).
    pub client_ca: Option<PathBuf>,
    pub versions: TlsVersions,
    pub handshake_timeout: Duration,
}

impl ServerTls {
    pub fn new(cert: PathBuf, key: PathBuf) -> Self {
        Self {
            cert,
            key,
            client_ca: None,
            versions: TlsVersions::Both,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// The rustls configuration; errors name the flag whose file is wrong.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let provider = provider();
        let certs = load_certs(&self.cert).map_err(|e| format!("--tls-cert {e}"))?;
        let key = load_key(&self.key).map_err(|e| format!("--tls-key {e}"))?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(self.versions.rustls())
            .map_err(|e| format!("TLS versions: {e}"))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let roots = load_roots(path).map_err(|e| format!("--tls-client-ca {e}"))?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| format!("--tls-client-ca {}: {e}", path.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "--tls-key {} does not fit --tls-cert {}: {e}",
                self.key.display(),
                self.cert.display()
            )
        })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A client connection's byte stream: plain TCP or TLS over it. An enum rather than a trait
/// object, so the plain path pays one match per read or write call and no dynamic dispatch.
pub enum ServerStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl ServerStream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for ServerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// What a failed handshake is told to: `error` or `timeout` (dn-sim counts them in
/// `dn_sim_tls_handshake_failures_total`).
pub type OnHandshakeFailure = Arc<dyn Fn(&'static str) + Send + Sync>;

/// Accepted connections after their TLS handshakes: each handshake runs in a task of its own
/// within `timeout`, and only completed ones are handed on. A failed or timed-out handshake
/// closes that connection, is logged and reported to `failed`. Accepting stops when the
/// returned stream is dropped (the server stopped).
pub fn handshakes(
    mut incoming: TcpIncoming,
    config: Arc<ServerConfig>,
    timeout: Duration,
    max_pending: usize,
    failed: OnHandshakeFailure,
) -> ReceiverStream<io::Result<ServerStream>> {
    let (tx, rx) = mpsc::channel(64);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    // Handshakes in progress are bounded like connections (`--max-connections`): a flood of
    // clients that connect and never finish costs at most that many sockets and TLS states for
    // the handshake timeout; beyond it a new socket is closed at once.
    let pending = Arc::new(tokio::sync::Semaphore::new(max_pending.max(1)));
    tokio::spawn(async move {
        loop {
            let tcp = tokio::select! {
                _ = tx.closed() => return,
                next = incoming.next() => match next {
                    None => return,
                    Some(Ok(tcp)) => tcp,
                    Some(Err(e)) => {
                        if tx.send(Err(e)).await.is_err() {
                            return;
                        }
                        continue;
                    }
                },
            };
            let Ok(permit) = Arc::clone(&pending).try_acquire_owned() else {
                drop(tcp);
                failed("over_limit");
                continue;
            };
            let (acceptor, tx, failed) = (acceptor.clone(), tx.clone(), Arc::clone(&failed));
            tokio::spawn(async move {
                let _permit = permit;
                let peer = tcp.peer_addr().ok();
                match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(ServerStream::Tls(Box::new(tls)))).await;
                    }
                    Ok(Err(e)) => {
                        tracing::info!(?peer, "TLS handshake failed: {e}");
                        failed("error");
                    }
                    Err(_) => {
                        tracing::info!(?peer, "TLS handshake not completed within {timeout:?}");
                        failed("timeout");
                    }
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

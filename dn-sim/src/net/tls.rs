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
//! The PEM loaders and [`client_config`] are shared with `dn-sim healthcheck` and loadgen.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::TcpIncoming;

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

/// rustls with the ring provider, named explicitly so that no process-wide default is needed.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {}", path.display(), pem_error(e)))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM CERTIFICATE in it", path.display()));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: {}", path.display(), pem_error(e)))
}

/// A trust store of the certificates of a PEM CA bundle.
pub fn load_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| format!("{}: not a CA certificate: {e}", path.display()))?;
    }
    Ok(roots)
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => "no PEM item of the right kind".into(),
        other => format!("not PEM: {other:?}"),
    }
}

/// A client's TLS: the CA that signed the server's certificate, and optionally a client
/// certificate and key for mutual TLS. ALPN `h2`, TLS 1.2 and 1.3.
pub struct ClientTls {
    pub config: Arc<ClientConfig>,
    /// Set when a server asked for a client certificate and none was configured: with TLS 1.3
    /// the client's side of the handshake completes before the server refuses, so without this
    /// the refusal would surface later as a bare "received fatal alert".
    asked_for_certificate: Arc<AtomicBool>,
}

impl ClientTls {
    /// `ca`: PEM CA bundle; `identity`: PEM certificate chain and key. Errors name the file and
    /// the flag (`flags`: the names of the CA, certificate and key flags, in that order).
    pub fn new(
        ca: &Path,
        identity: Option<(&Path, &Path)>,
        flags: [&str; 3],
    ) -> Result<Self, String> {
        let roots = load_roots(ca).map_err(|e| format!("{} {e}", flags[0]))?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(TlsVersions::Both.rustls())
            .map_err(|e| format!("TLS versions: {e}"))?
            .with_root_certificates(roots);
        let asked_for_certificate = Arc::new(AtomicBool::new(false));
        let mut config = match identity {
            Some((cert, key)) => {
                let certs = load_certs(cert).map_err(|e| format!("{} {e}", flags[1]))?;
                let key_der = load_key(key).map_err(|e| format!("{} {e}", flags[2]))?;
                builder.with_client_auth_cert(certs, key_der).map_err(|e| {
                    format!(
                        "{} {} does not fit {} {}: {e}",
                        flags[2],
                        key.display(),
                        flags[1],
                        cert.display()
                    )
                })?
            }
            None => builder.with_client_cert_resolver(Arc::new(NoClientCertificate(Arc::clone(
                &asked_for_certificate,
            )))),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            asked_for_certificate,
        })
    }

    /// Whether a server asked this client for a certificate it did not have.
    pub fn was_asked_for_certificate(&self) -> bool {
        self.asked_for_certificate.load(Ordering::Relaxed)
    }

    /// Runs a handshake on `tcp` for `server_name`. The error is one line naming `target`: what
    /// went wrong in words (wrong CA, wrong name, a client certificate required, not TLS).
    pub async fn connect(
        &self,
        tcp: TcpStream,
        server_name: &str,
        target: &str,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|_| format!("'{server_name}' is not a DNS name or IP address"))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.config));
        match connector.connect(name, tcp).await {
            Ok(tls) if self.was_asked_for_certificate() => {
                drop(tls);
                Err(no_client_certificate(target))
            }
            Ok(tls) => Ok(tls),
            Err(_) if self.was_asked_for_certificate() => Err(no_client_certificate(target)),
            Err(e) => Err(describe_handshake_error(&e, target, server_name)),
        }
    }
}

/// A tonic `Channel`'s connector: TCP to `addr`, then the TLS handshake for `server_name`.
#[derive(Clone)]
pub struct TonicConnector {
    pub tls: Arc<ClientTls>,
    pub addr: String,
    pub server_name: String,
}

type Connecting = Pin<
    Box<
        dyn std::future::Future<
                Output = io::Result<
                    hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>,
                >,
            > + Send,
    >,
>;

impl tower::Service<http::Uri> for TonicConnector {
    type Response = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: http::Uri) -> Connecting {
        let this = self.clone();
        Box::pin(async move {
            let tcp = TcpStream::connect(&this.addr).await?;
            tcp.set_nodelay(true)?;
            let tls = this
                .tls
                .connect(tcp, &this.server_name, &this.addr)
                .await
                .map_err(io::Error::other)?;
            Ok(hyper_util::rt::TokioIo::new(tls))
        })
    }
}

/// The host part of `HOST:PORT` (`[::1]:9859` gives `::1`): the name a certificate is checked
/// against unless told otherwise.
pub fn host_of(hostport: &str) -> &str {
    let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn no_client_certificate(target: &str) -> String {
    format!(
        "TLS handshake with {target} failed: the server requires a client certificate \
         (mutual TLS) and none was given"
    )
}

/// Records that the server asked for a certificate; offers none.
#[derive(Debug)]
struct NoClientCertificate(Arc<AtomicBool>);

impl rustls::client::ResolvesClientCert for NoClientCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.store(true, Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

/// One line for a failed client handshake with `target`.
pub fn describe_handshake_error(e: &io::Error, target: &str, server_name: &str) -> String {
    use rustls::{AlertDescription, CertificateError, Error};
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<Error>()) else {
        return format!("TLS handshake with {target} failed: {e}");
    };
    let what = match tls {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "certificate verify failed: UnknownIssuer (the server's certificate is not signed \
             by the CA given)"
                .to_string()
        }
        Error::InvalidCertificate(
            c @ (CertificateError::NotValidForName
            | CertificateError::NotValidForNameContext { .. }),
        ) => format!(
            "certificate verify failed: {c} (checked for '{server_name}': the host of the \
             target unless --tls-server-name says otherwise)"
        ),
        Error::InvalidCertificate(c) => format!("certificate verify failed: {c}"),
        Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the server requires a client certificate (mutual TLS) and none was given".into()
        }
        Error::AlertReceived(
            a @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::DecryptError),
        ) => format!("the server refused the client certificate (alert {a:?})"),
        Error::InvalidMessage(_) | Error::InappropriateMessage { .. } => {
            format!("the server did not answer with TLS ({tls}); is its port plain text?")
        }
        other => other.to_string(),
    };
    format!("TLS handshake with {target} failed: {what}")
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

//! The client side of gRPC over TLS, shared by loadgen, `dn-sim healthcheck` and dn-sim's
//! server TLS (the PEM loaders and [`provider`]): rustls with the ring provider, ALPN `h2`,
//! TLS 1.2 and 1.3, a tonic `Channel` connector, and a codec of raw bytes ([`raw::RawCodec`]).
//! No server, no I/O beyond a client's TCP.

pub mod raw;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::net::TcpStream;

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
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
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
pub struct NoClientCertificate(pub Arc<AtomicBool>);

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

//! TLS to the target (`--tls`, `--tls-ca`, `--tls-client-cert`/`--tls-client-key`,
//! `--tls-server-name`), for both transports: the HTTP/2 client of per-request streams
//! ([`super::http2`], its socket an enum of plain TCP and TLS) and tonic's `Channel` of persistent
//! streams (a connector that runs the handshake). rustls with ALPN `h2`, TLS 1.2 and 1.3, as a
//! secure DataNode (Ozone 2.0.0–2.2.0, `hdds.grpc.tls.enabled`) serves; the PEM loading, the
//! handshake and its one-line errors are dn-sim's ([`grpc_client::ClientTls`]).

use grpc_client::ClientTls;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpStream;

/// The `--tls*` flags as given (checked by [`TargetTls::from_flags`]).
#[derive(Clone, Debug, Default)]
pub struct TlsFlags {
    pub tls: bool,
    pub ca: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub server_name: Option<String>,
}

/// TLS to one target: the client configuration and the name its certificate must carry.
pub struct TargetTls {
    client: Arc<ClientTls>,
    server_name: String,
}

impl std::fmt::Debug for TargetTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TargetTls {
    /// Checks the flags and loads the files: `Ok(None)` without `--tls`. `target` is `--target`
    /// (`None`: the embedded dn-sim). Every error is one line naming the flag.
    pub fn from_flags(flags: &TlsFlags, target: Option<&str>) -> Result<Option<Arc<Self>>, String> {
        if !flags.tls {
            let given = [
                ("--tls-ca", flags.ca.is_some()),
                ("--tls-client-cert", flags.client_cert.is_some()),
                ("--tls-client-key", flags.client_key.is_some()),
                ("--tls-server-name", flags.server_name.is_some()),
            ];
            return match given.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(format!("{flag} needs --tls")),
                None => Ok(None),
            };
        }
        let target = match target {
            Some("null") => {
                return Err("--tls: --target null opens no connection to encrypt".into());
            }
            None => {
                return Err(
                    "--tls needs --target: the embedded dn-sim serves plain text (start a dn-sim \
                     with --tls-cert and aim --target at it)"
                        .into(),
                );
            }
            Some(t) => t,
        };
        let Some(ca) = &flags.ca else {
            return Err(
                "--tls needs --tls-ca PEM: the CA that signed the DataNode's certificate \
                 (loadgen uses no system trust store)"
                    .into(),
            );
        };
        let identity = match (&flags.client_cert, &flags.client_key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (Some(_), None) => return Err("--tls-client-cert needs --tls-client-key".into()),
            (None, Some(_)) => return Err("--tls-client-key needs --tls-client-cert".into()),
            (None, None) => None,
        };
        let client = ClientTls::new(
            ca,
            identity,
            ["--tls-ca", "--tls-client-cert", "--tls-client-key"],
        )?;
        let hostport = ["https://", "http://"]
            .iter()
            .find_map(|scheme| target.trim().strip_prefix(scheme))
            .unwrap_or(target.trim());
        let server_name = match &flags.server_name {
            Some(name) => name.clone(),
            None => grpc_client::host_of(hostport.trim_end_matches('/')).to_string(),
        };
        rustls::pki_types::ServerName::try_from(server_name.clone()).map_err(|_| {
            match flags.server_name {
                Some(_) => {
                    format!("--tls-server-name: '{server_name}' is not a DNS name or IP address")
                }
                None => {
                    format!("--target {target}: '{server_name}' is not a DNS name or IP address")
                }
            }
        })?;
        Ok(Some(Arc::new(Self {
            client: Arc::new(client),
            server_name,
        })))
    }

    /// The handshake on a connected socket; the error is one line naming `hostport`.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        hostport: &str,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        self.client.connect(tcp, &self.server_name, hostport).await
    }

    /// tonic's connector for `hostport`.
    pub fn connector(&self, hostport: &str) -> grpc_client::TonicConnector {
        grpc_client::TonicConnector {
            tls: Arc::clone(&self.client),
            addr: hostport.to_string(),
            server_name: self.server_name.clone(),
        }
    }
}

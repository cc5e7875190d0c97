//! The gRPC health protocol (`grpc.health.v1.Health`). dn-sim serves it beside the client
//! protocol, and `dn-sim healthcheck` asks it, so a container's healthcheck needs no shell, curl
//! or grpc_health_probe: the image's one binary checks itself.

use clap::Args;
use common::proto::xceiver_client_protocol_service_server::SERVICE_NAME;
use std::time::Duration;
use tonic::transport::Endpoint;
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus as WireStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};

/// The service name a healthcheck asks about by default: the DataNode client protocol.
pub const XCEIVER_SERVICE: &str = SERVICE_NAME;

/// The health service: SERVING for the server as a whole (`""`) and for
/// `hadoop.hdds.datanode.XceiverClientProtocolService` while dn-sim serves.
pub async fn service() -> HealthServer<impl Health> {
    let (reporter, server) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(XCEIVER_SERVICE, ServingStatus::Serving)
        .await;
    server
}

/// `dn-sim healthcheck`: asks a dn-sim's health service whether it is SERVING.
#[derive(Args, Debug, Clone)]
pub struct HealthcheckArgs {
    /// Client port of the dn-sim to check, HOST:PORT.
    #[arg(
        long,
        env = "DN_SIM_HEALTHCHECK_ADDR",
        default_value = "127.0.0.1:9859"
    )]
    pub addr: String,

    /// Give up after this long, connecting and answering together (e.g. 2s, 500ms).
    #[arg(long, default_value = "2s", value_parser = parse_timeout)]
    pub timeout: Duration,

    /// Service to ask about; '' is the server as a whole.
    #[arg(long, default_value = XCEIVER_SERVICE)]
    pub service: String,

    /// Check over TLS (a dn-sim with --tls-cert): the PEM CA bundle that signed its certificate.
    #[arg(long, env = "DN_SIM_HEALTHCHECK_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<std::path::PathBuf>,

    /// Client certificate (PEM) for a dn-sim with --tls-client-ca; needs --tls-client-key.
    #[arg(long, env = "DN_SIM_HEALTHCHECK_TLS_CLIENT_CERT", value_name = "PEM")]
    pub tls_client_cert: Option<std::path::PathBuf>,

    /// The private key (PEM) of --tls-client-cert.
    #[arg(long, env = "DN_SIM_HEALTHCHECK_TLS_CLIENT_KEY", value_name = "PEM")]
    pub tls_client_key: Option<std::path::PathBuf>,

    /// The name the server's certificate must carry (default: the host of --addr).
    #[arg(long, env = "DN_SIM_HEALTHCHECK_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
}

impl HealthcheckArgs {
    /// Checks the TLS flags' combination: `--tls-client-cert` and `--tls-client-key` go
    /// together, and they and `--tls-server-name` need `--tls-ca`. The error names the flag.
    pub fn check_flags(&self) -> Result<(), String> {
        match (&self.tls_client_cert, &self.tls_client_key) {
            (Some(_), None) => return Err("--tls-client-cert needs --tls-client-key".into()),
            (None, Some(_)) => return Err("--tls-client-key needs --tls-client-cert".into()),
            _ => {}
        }
        if self.tls_ca.is_none() {
            if self.tls_client_cert.is_some() {
                return Err("--tls-client-cert needs --tls-ca".into());
            }
            if self.tls_server_name.is_some() {
                return Err("--tls-server-name needs --tls-ca".into());
            }
        }
        Ok(())
    }

    /// The TLS client of `--tls-ca` and friends; `None` = plain text.
    pub fn tls(&self) -> Result<Option<grpc_client::ClientTls>, String> {
        self.check_flags()?;
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let identity = self
            .tls_client_cert
            .as_deref()
            .zip(self.tls_client_key.as_deref());
        grpc_client::ClientTls::new(
            ca,
            identity,
            ["--tls-ca", "--tls-client-cert", "--tls-client-key"],
        )
        .map(Some)
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    match common::units::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("must be greater than zero".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs one health check on a runtime of its own. `Ok` (SERVING) and `Err` (anything else: not
/// serving, unknown service, no answer in time, cannot connect) each carry a one-line message.
pub fn healthcheck(args: &HealthcheckArgs) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let tls = args.tls()?.map(|tls| grpc_client::TonicConnector {
        tls: std::sync::Arc::new(tls),
        addr: args.addr.clone(),
        server_name: args
            .tls_server_name
            .clone()
            .unwrap_or_else(|| grpc_client::host_of(&args.addr).to_string()),
    });
    runtime.block_on(check_with(&args.addr, &args.service, args.timeout, tls))
}

/// Asks `addr`'s `grpc.health.v1.Health/Check` about `service`, within `timeout`.
pub async fn check(addr: &str, service: &str, timeout: Duration) -> Result<String, String> {
    check_with(addr, service, timeout, None).await
}

/// [`check`], over TLS when `tls` is given.
pub async fn check_with(
    addr: &str,
    service: &str,
    timeout: Duration,
    tls: Option<grpc_client::TonicConnector>,
) -> Result<String, String> {
    let what = if service.is_empty() {
        format!("{addr} (server)")
    } else {
        format!("{addr} {service}")
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| format!("{what}: not HOST:PORT ({e})"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let ask = async {
        let connected = match tls {
            None => endpoint.connect().await,
            Some(connector) => endpoint.connect_with_connector(connector).await,
        };
        let channel =
            connected.map_err(|e| format!("{what}: cannot connect: {}", error_chain(&e)))?;
        HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: service.to_string(),
            })
            .await
            .map(|r| r.into_inner().status())
            .map_err(|s| {
                // A transport failure (e.g. a TLS alert after the handshake) is in the source.
                let cause = std::error::Error::source(&s)
                    .map(|c| format!(": {}", error_chain(c)))
                    .unwrap_or_default();
                format!("{what}: {:?}: {}{cause}", s.code(), s.message())
            })
    };
    match tokio::time::timeout(timeout, ask).await {
        Err(_) => Err(format!("{what}: no answer within {timeout:?}")),
        Ok(Err(e)) => Err(e),
        Ok(Ok(WireStatus::Serving)) => Ok(format!("{what}: SERVING")),
        Ok(Ok(status)) => Err(format!("{what}: {}", status.as_str_name())),
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // hyper and tonic repeat a cause's text in their own; say each part once.
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

//! Connections to the target: one HTTP/2 connection per `--clients`, opened eagerly so that an
//! unreachable target fails fast with a clear message. Per-request streams use the lean
//! [`unary`] client on plain HTTP/2; persistent streams use tonic's `Channel`. `--target null`
//! answers per-request streams in-process ([`null`]), with no connection at all.

pub mod http2;
pub mod null;
pub mod unary;

use anyhow::{Context, bail};
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient;
use std::time::Duration;
use tonic::transport::Channel;

pub type Client = XceiverClientProtocolServiceClient<Channel>;

/// Where a run's requests go.
#[derive(Clone)]
pub enum Endpoint {
    /// A DataNode's client port, `http://HOST:PORT`.
    Uri(String),
    /// `--target null`: the in-process DataNode.
    Null(std::sync::Arc<null::NullDataNode>),
}

/// Normalizes `HOST:PORT` (or `http://HOST:PORT`) to a URI; TLS is not supported yet.
pub fn target_uri(target: &str) -> anyhow::Result<String> {
    let t = target.trim();
    if let Some(rest) = t.strip_prefix("https://") {
        bail!("--target {rest}: TLS is not supported; use a plain-text DataNode port");
    }
    let hostport = t.strip_prefix("http://").unwrap_or(t).trim_end_matches('/');
    let Some((host, port)) = hostport.rsplit_once(':') else {
        bail!("--target '{target}' must be HOST:PORT (the DataNode's port is 9859)");
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        bail!("--target '{target}' must be HOST:PORT with a port number from 1 to 65535");
    }
    Ok(format!("http://{hostport}"))
}

/// Opens `count` connections to `uri`.
pub async fn connect(
    uri: &str,
    count: usize,
    connect_timeout: Duration,
) -> anyhow::Result<Vec<Client>> {
    let endpoint = tonic::transport::Endpoint::from_shared(uri.to_string())
        .with_context(|| format!("invalid target {uri}"))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(32 << 20));
    let mut clients = Vec::with_capacity(count);
    for _ in 0..count {
        let channel = match tokio::time::timeout(connect_timeout, endpoint.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => bail!("cannot connect to {}: {}", &uri[7..], error_chain(&e)),
            Err(_) => bail!(
                "cannot connect to {}: no answer within {:?}",
                &uri[7..],
                connect_timeout
            ),
        };
        clients.push(
            XceiverClientProtocolServiceClient::new(channel)
                .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
                .max_encoding_message_size(common::MAX_MESSAGE_SIZE),
        );
    }
    Ok(clients)
}

/// Opens `count` connections for the per-request stream path.
pub async fn connect_unary(
    uri: &str,
    count: usize,
    connect_timeout: Duration,
    request_timeout: Duration,
) -> anyhow::Result<Vec<std::rc::Rc<unary::UnaryConnection>>> {
    let hostport = &uri[7..];
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        match unary::UnaryConnection::connect(hostport, connect_timeout, request_timeout).await {
            Ok(c) => conns.push(c),
            Err(e) => bail!("cannot connect to {hostport}: {e}"),
        }
    }
    Ok(conns)
}

/// "transport error: connection refused" rather than only the outermost layer.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_normalized_or_rejected() {
        assert_eq!(target_uri("dn1:9859").unwrap(), "http://dn1:9859");
        assert_eq!(
            target_uri("http://127.0.0.1:9859/").unwrap(),
            "http://127.0.0.1:9859"
        );
        assert_eq!(target_uri("[::1]:9859").unwrap(), "http://[::1]:9859");
        for bad in ["dn1", "dn1:", ":9859", "dn1:99999", "https://dn1:9859"] {
            assert!(target_uri(bad).is_err(), "{bad}");
        }
    }
}

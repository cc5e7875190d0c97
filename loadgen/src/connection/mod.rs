//! Connections to the target: one HTTP/2 connection per `--clients`, opened eagerly so that an
//! unreachable target fails fast with a clear message. Per-request streams use the lean
//! [`unary`] client on plain HTTP/2; persistent streams use tonic's `Channel`. `--target null`
//! answers per-request streams in-process ([`null`]), with no connection at all. With `--tls`
//! both transports run a TLS handshake first ([`tls`]).

pub mod http2;
// Without the embedded dn-sim a stand-in keeps the type of `Endpoint::Null`, with no value.
#[cfg_attr(not(feature = "embedded-dn-sim"), path = "null_absent.rs")]
pub mod null;
pub mod ratis_admin;
pub mod tls;
pub mod unary;

use anyhow::{Context, bail};
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient;
use std::time::Duration;
use tonic::transport::Channel;

pub type Client = XceiverClientProtocolServiceClient<Channel>;

/// A client of a DataNode's Ratis client port (`--ratis`).
pub type RatisClient =
    common::ratis::proto::grpc::raft_client_protocol_service_client::RaftClientProtocolServiceClient<
        Channel,
    >;

/// Where a run's requests go.
#[derive(Clone)]
pub enum Endpoint {
    /// DataNodes' client ports, `http://HOST:PORT` (connection c goes to the c-th mod their
    /// number, never none), and the TLS to speak to them (`--tls`).
    Uri(Vec<String>, Option<std::sync::Arc<tls::TargetTls>>),
    /// `--target null`: the in-process DataNode.
    Null(std::sync::Arc<null::NullDataNode>),
}

/// Normalizes `HOST:PORT` (or `http://HOST:PORT`) to a URI, `http://HOST:PORT` in either case
/// (the address is what matters; `tls` says how to speak). `https://HOST:PORT` needs `tls`.
pub fn target_uri(target: &str, tls: bool) -> anyhow::Result<String> {
    let t = target.trim();
    let t = match t.strip_prefix("https://") {
        Some(rest) if tls => rest,
        Some(rest) => bail!("--target https://{rest} needs --tls (and --tls-ca)"),
        None => t,
    };
    let hostport = t.strip_prefix("http://").unwrap_or(t).trim_end_matches('/');
    let Some((host, port)) = hostport.rsplit_once(':') else {
        bail!("--target '{target}' must be HOST:PORT (the DataNode's port is 9859)");
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        bail!("--target '{target}' must be HOST:PORT with a port number from 1 to 65535");
    }
    Ok(format!("http://{hostport}"))
}

/// Opens `count` connections to `uri` (`http://HOST:PORT`), over TLS when `tls` is given.
pub async fn connect(
    uri: &str,
    count: usize,
    connect_timeout: Duration,
    tls: Option<&tls::TargetTls>,
) -> anyhow::Result<Vec<Client>> {
    Ok(channels(uri, count, connect_timeout, tls)
        .await?
        .into_iter()
        .map(|channel| {
            XceiverClientProtocolServiceClient::new(channel)
                .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
                .max_encoding_message_size(common::MAX_MESSAGE_SIZE)
        })
        .collect())
}

/// Opens `count` connections to the Ratis client port at `uri`, with Ratis's message limit.
pub async fn connect_ratis(
    uri: &str,
    count: usize,
    connect_timeout: Duration,
    tls: Option<&tls::TargetTls>,
) -> anyhow::Result<Vec<RatisClient>> {
    Ok(channels(uri, count, connect_timeout, tls)
        .await?
        .into_iter()
        .map(|channel| {
            RatisClient::new(channel)
                .max_decoding_message_size(common::ratis::MAX_MESSAGE_SIZE)
                .max_encoding_message_size(common::ratis::MAX_MESSAGE_SIZE)
        })
        .collect())
}

/// `count` tonic channels to `uri`, each its own HTTP/2 connection.
async fn channels(
    uri: &str,
    count: usize,
    connect_timeout: Duration,
    tls: Option<&tls::TargetTls>,
) -> anyhow::Result<Vec<Channel>> {
    // With TLS the requests say `:scheme https`; the connector runs the handshake.
    let uri = match tls {
        Some(_) => format!("https://{}", &uri[7..]),
        None => uri.to_string(),
    };
    let hostport = uri.split_once("://").map_or(uri.as_str(), |(_, h)| h);
    let endpoint = tonic::transport::Endpoint::from_shared(uri.clone())
        .with_context(|| format!("invalid target {uri}"))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(32 << 20));
    let mut clients = Vec::with_capacity(count);
    for _ in 0..count {
        let connecting = async {
            match tls {
                None => endpoint.connect().await,
                Some(tls) => {
                    endpoint
                        .connect_with_connector(tls.connector(hostport))
                        .await
                }
            }
        };
        let channel = match tokio::time::timeout(connect_timeout, connecting).await {
            // tonic's own connect timeout (the same duration, kept for the Channel's reconnects)
            // may fire first: the same one line as the HTTP/2 client's.
            Ok(Err(e)) if !timed_out(&e) => {
                bail!("cannot connect to {hostport}: {}", error_chain(&e))
            }
            Ok(Ok(channel)) => channel,
            _ => bail!("cannot connect to {hostport}: no answer within {connect_timeout:?}"),
        };
        clients.push(channel);
    }
    Ok(clients)
}

/// Opens `count` connections for the per-request stream path.
pub async fn connect_unary(
    uri: &str,
    count: usize,
    connect_timeout: Duration,
    request_timeout: Duration,
    tls: Option<&std::sync::Arc<tls::TargetTls>>,
) -> anyhow::Result<Vec<std::rc::Rc<unary::UnaryConnection>>> {
    let hostport = &uri[7..];
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        match unary::UnaryConnection::connect(
            hostport,
            connect_timeout,
            request_timeout,
            tls.cloned(),
        )
        .await
        {
            Ok(c) => conns.push(c),
            Err(e) => bail!("cannot connect to {hostport}: {e}"),
        }
    }
    Ok(conns)
}

/// Whether `e` is, or was caused by, a timer's expiry (tonic's connect timeout arrives as an
/// `io::Error` of kind `TimedOut`).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        let io_timeout = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if io_timeout || e.is::<tokio::time::error::Elapsed>() {
            return true;
        }
        next = e.source();
    }
    false
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
        assert_eq!(target_uri("dn1:9859", false).unwrap(), "http://dn1:9859");
        assert_eq!(
            target_uri("http://127.0.0.1:9859/", false).unwrap(),
            "http://127.0.0.1:9859"
        );
        assert_eq!(
            target_uri("[::1]:9859", false).unwrap(),
            "http://[::1]:9859"
        );
        for bad in ["dn1", "dn1:", ":9859", "dn1:99999", "https://dn1:9859"] {
            assert!(target_uri(bad, false).is_err(), "{bad}");
        }
        // https:// is only a way of saying --tls.
        assert_eq!(
            target_uri("https://dn1:9859", true).unwrap(),
            "http://dn1:9859"
        );
        let err = target_uri("https://dn1:9859", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs --tls"), "{err}");
    }
}

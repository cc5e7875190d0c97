//! Helpers the dn-sim test crates share.

/// A `dn-sim` binary as a child process (memory, metrics, kill and restart); not every test
/// crate uses all of it.
#[allow(dead_code)]
pub mod process;

/// Test certificates made at run time (rcgen): a CA, server and client certificates.
#[allow(dead_code)]
pub mod certs;

/// Polls a condition until a deadline: how a test waits for something to happen.
#[allow(unused_imports)]
pub use process::wait_until;

use bytes::Bytes;
use grpc_client::raw::RawCodec;
use std::net::SocketAddr;
use tonic::transport::Channel;

/// One raw message on a new stream to the server at `addr`: the first answer's bytes, or the
/// status that ended the call.
#[allow(dead_code)] // not every test crate sends raw bytes
pub async fn send_raw(addr: SocketAddr, bytes: &'static [u8]) -> Result<Bytes, tonic::Status> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(common::proto::SEND_PATH);
    let request = tonic::Request::new(tokio_stream::once(Bytes::from_static(bytes)));
    let mut inbound = grpc.streaming(request, path, RawCodec).await?.into_inner();
    inbound
        .message()
        .await?
        .ok_or_else(|| tonic::Status::unknown("no response"))
}

/// One HTTP/1.1 request to dn-sim's admin listener at `addr` (`body` as JSON, empty for none):
/// the status and the body.
#[allow(dead_code)] // not every test crate talks to the admin listener
pub async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: dn-sim\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .expect("an HTTP response with a header");
    (status, body)
}

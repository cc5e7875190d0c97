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

use bytes::{Buf, BufMut, Bytes};
use std::net::SocketAddr;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;

/// Sends and receives messages as bytes, so that a request can lack fields prost would always
/// encode (and no required-field check runs on either side).
#[derive(Clone, Copy, Default)]
pub struct RawCodec;
pub struct RawEncoder;
pub struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// One raw message on a new stream to the server at `addr`: the first answer's bytes, or the
/// status that ended the call.
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

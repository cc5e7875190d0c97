//! The gRPC codec every generated client and server stub uses: prost encoding, plus Ozone's
//! proto2 `required` rule on decode (see [`crate::wire`]). A request or response that a Java peer
//! would refuse to parse fails with INTERNAL "Invalid protobuf byte sequence", the status
//! grpc-java's protobuf marshaller produces, instead of decoding into silent defaults. That is
//! what a client sees for a bad response; a Java *server* never sends it: its `ServerImpl` closes
//! the call with UNKNOWN instead, which dn-sim's service does (`dn_sim::service::inbound_error`).

use crate::wire::RequiredFields;
use bytes::Buf;
use prost::Message;
use std::marker::PhantomData;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// The status description grpc-java uses when a message fails to parse.
pub const INVALID_PROTOBUF: &str = "Invalid protobuf byte sequence";

#[derive(Debug, Clone)]
pub struct OzoneCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for OzoneCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for OzoneCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + RequiredFields + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = OzoneEncoder<T>;
    type Decoder = OzoneDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        OzoneEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        OzoneDecoder(PhantomData)
    }
}

#[derive(Debug)]
pub struct OzoneEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for OzoneEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The whole message at once: without it the buffer grows by doubling while prost writes
        // (a 4 MB ReadChunk answer was copied at each doubling).
        buf.reserve(item.encoded_len());
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding failed: {e}")))
    }
}

#[derive(Debug)]
pub struct OzoneDecoder<U>(PhantomData<U>);

impl<U: Message + Default + RequiredFields> Decoder for OzoneDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // DecodeBuf is backed by one contiguous BytesMut, so the check reads it in place and
        // prost then takes `bytes` fields from it without copying. The fallback copies once, only
        // if that ever changes.
        if src.chunk().len() == src.remaining() {
            U::check_required(src.chunk()).map_err(|e| invalid(&e))?;
            U::decode(src).map(Some).map_err(|e| invalid(&e))
        } else {
            let bytes = src.copy_to_bytes(src.remaining());
            U::check_required(&bytes).map_err(|e| invalid(&e))?;
            U::decode(bytes).map(Some).map_err(|e| invalid(&e))
        }
    }
}

fn invalid(cause: &dyn std::fmt::Display) -> Status {
    Status::internal(format!("{INVALID_PROTOBUF}: {cause}"))
}

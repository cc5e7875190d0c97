//! A tonic codec that sends and receives messages as the bytes they are: how a test or the
//! differential runner sends a request prost would never encode (a missing required field, an
//! unknown enum value, garbage) and sees the server's answer undecoded.

use bytes::{Buf as _, BufMut as _, Bytes};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Messages as bytes, both ways.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCodec;

/// [`RawCodec`]'s encoder: the bytes as given.
#[derive(Debug)]
pub struct RawEncoder;

/// [`RawCodec`]'s decoder: the message's bytes, undecoded.
#[derive(Debug)]
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
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

//! The frame layer of RFC 9113 §4 and §6: constants, the 9-byte frame header, frame encoders and
//! the parse error. Encoders write into any [`BufMut`] (a `Vec<u8>` or a `BytesMut`) so that the
//! caller's buffer is reused and nothing is allocated per frame.

use bytes::BufMut;
use std::borrow::Cow;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Every frame starts with a header of this many bytes (§4.1).
pub const FRAME_HEADER_LEN: usize = 9;

/// The largest stream id, and the reserved bit's mask (§4.1, §5.1.1).
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// The largest flow-control window (§6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Frame types (§6); `u8` constants so that they work as `match` patterns on a header's type.
pub mod frame_type {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (§6). ACK and END_STREAM share a bit: which one it is depends on the type.
pub mod flags {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameter ids (§6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes (§7); their names are [`super::ERROR_CODE_NAMES`].
pub mod error_code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const SETTINGS_TIMEOUT: u32 = 0x4;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const CONNECT_ERROR: u32 = 0xa;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
    pub const INADEQUATE_SECURITY: u32 = 0xc;
    pub const HTTP_1_1_REQUIRED: u32 = 0xd;
}

/// The names of the frame types, indexed by type (0x0 to 0x9), for messages and metric labels.
pub const FRAME_TYPE_NAMES: [&str; 10] = [
    "DATA",
    "HEADERS",
    "PRIORITY",
    "RST_STREAM",
    "SETTINGS",
    "PUSH_PROMISE",
    "PING",
    "GOAWAY",
    "WINDOW_UPDATE",
    "CONTINUATION",
];

/// The name of frame type `kind`, or `None` for an extension type (which §5.5 says to ignore).
pub const fn frame_type_name(kind: u8) -> Option<&'static str> {
    if (kind as usize) < FRAME_TYPE_NAMES.len() {
        Some(FRAME_TYPE_NAMES[kind as usize])
    } else {
        None
    }
}

/// A frame header (§4.1): 24-bit payload length, type, flags, 31-bit stream id (the reserved
/// bit is dropped on parse and never sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FrameHeader {
    len: u32,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl FrameHeader {
    /// A header for a payload of `len` bytes (`len` must fit 24 bits; stream's top bit is cut).
    pub const fn new(len: u32, kind: u8, flags: u8, stream: u32) -> Self {
        debug_assert!(len < 1 << 24);
        FrameHeader {
            len: len & 0x00ff_ffff,
            kind,
            flags,
            stream: stream & MAX_STREAM_ID,
        }
    }

    /// Parses the nine header bytes; every bit pattern is a header (no failure, no allocation).
    pub const fn parse(h: &[u8; FRAME_HEADER_LEN]) -> Self {
        FrameHeader {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_STREAM_ID,
        }
    }

    /// The header at the start of `buf`, or `None` when fewer than nine bytes are there.
    pub fn from_prefix(buf: &[u8]) -> Option<Self> {
        buf.first_chunk::<FRAME_HEADER_LEN>().map(Self::parse)
    }

    /// The header's nine bytes.
    pub const fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let l = self.len.to_be_bytes();
        let s = self.stream.to_be_bytes();
        [
            l[1], l[2], l[3], self.kind, self.flags, s[0], s[1], s[2], s[3],
        ]
    }

    pub fn write_to(&self, out: &mut impl BufMut) {
        out.put_slice(&self.encode());
    }

    /// Payload length.
    pub const fn len(&self) -> u32 {
        self.len
    }

    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Payload length plus the header.
    pub const fn frame_len(&self) -> usize {
        FRAME_HEADER_LEN + self.len as usize
    }

    pub const fn kind(&self) -> u8 {
        self.kind
    }

    pub const fn flags(&self) -> u8 {
        self.flags
    }

    pub const fn has_flag(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub const fn stream_id(&self) -> u32 {
        self.stream
    }

    /// The frame type's name, `None` for an extension type.
    pub const fn type_name(&self) -> Option<&'static str> {
        frame_type_name(self.kind)
    }

    /// Where an RST_STREAM's (0) or GOAWAY's (4, after the last stream id) error code starts in
    /// the payload; `None` for types without one.
    pub const fn error_code_offset(&self) -> Option<u32> {
        match self.kind {
            frame_type::RST_STREAM => Some(0),
            frame_type::GOAWAY => Some(4),
            _ => None,
        }
    }
}

/// An HTTP/2 error found while parsing what the peer sent: a connection error (answered with
/// GOAWAY) or a stream error (answered with RST_STREAM), with its RFC 9113 code and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Http2Error {
    #[error("HTTP/2 connection error {}: {reason}", code_label(*code))]
    Connection {
        code: u32,
        reason: Cow<'static, str>,
    },
    #[error("HTTP/2 stream error {} on stream {stream}: {reason}", code_label(*code))]
    Stream {
        stream: u32,
        code: u32,
        reason: Cow<'static, str>,
    },
}

fn code_label(code: u32) -> Cow<'static, str> {
    super::error_code_name(code).map_or_else(|| format!("0x{code:x}").into(), Cow::Borrowed)
}

impl Http2Error {
    pub fn connection(code: u32, reason: impl Into<Cow<'static, str>>) -> Self {
        Http2Error::Connection {
            code,
            reason: reason.into(),
        }
    }

    pub fn stream(stream: u32, code: u32, reason: impl Into<Cow<'static, str>>) -> Self {
        Http2Error::Stream {
            stream,
            code,
            reason: reason.into(),
        }
    }

    /// A PROTOCOL_ERROR connection error.
    pub fn protocol(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::connection(error_code::PROTOCOL_ERROR, reason)
    }

    /// A FRAME_SIZE_ERROR connection error.
    pub fn frame_size(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::connection(error_code::FRAME_SIZE_ERROR, reason)
    }

    /// A FLOW_CONTROL_ERROR connection error.
    pub fn flow_control(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::connection(error_code::FLOW_CONTROL_ERROR, reason)
    }

    /// The RFC 9113 error code to send.
    pub fn code(&self) -> u32 {
        match self {
            Http2Error::Connection { code, .. } | Http2Error::Stream { code, .. } => *code,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Http2Error::Connection { reason, .. } | Http2Error::Stream { reason, .. } => reason,
        }
    }

    /// The stream of a stream error, `None` for a connection error.
    pub fn stream_id(&self) -> Option<u32> {
        match self {
            Http2Error::Connection { .. } => None,
            Http2Error::Stream { stream, .. } => Some(*stream),
        }
    }
}

/// Frame encoders (§6): each writes one whole frame, header and payload, into `out`.
pub mod encode {
    use super::{FrameHeader, PREFACE, flags, frame_type};
    use bytes::BufMut;

    /// Any frame: header, then `payload`.
    pub fn frame(out: &mut impl BufMut, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        header(out, payload.len(), kind, flags, stream);
        out.put_slice(payload);
    }

    /// A frame header alone, for a payload the caller writes (or sends from elsewhere) next.
    pub fn header(out: &mut impl BufMut, len: usize, kind: u8, flags: u8, stream: u32) {
        FrameHeader::new(len as u32, kind, flags, stream).write_to(out);
    }

    /// The client preface.
    pub fn preface(out: &mut impl BufMut) {
        out.put_slice(PREFACE);
    }

    /// SETTINGS with these (id, value) parameters, in order.
    pub fn settings(out: &mut impl BufMut, params: &[(u16, u32)]) {
        header(out, 6 * params.len(), frame_type::SETTINGS, 0, 0);
        for &(id, value) in params {
            out.put_u16(id);
            out.put_u32(value);
        }
    }

    pub fn settings_ack(out: &mut impl BufMut) {
        header(out, 0, frame_type::SETTINGS, flags::ACK, 0);
    }

    pub fn window_update(out: &mut impl BufMut, stream: u32, increment: u32) {
        header(out, 4, frame_type::WINDOW_UPDATE, 0, stream);
        out.put_u32(increment);
    }

    pub fn ping(out: &mut impl BufMut, ack: bool, data: &[u8; 8]) {
        header(
            out,
            8,
            frame_type::PING,
            if ack { flags::ACK } else { 0 },
            0,
        );
        out.put_slice(data);
    }

    pub fn rst_stream(out: &mut impl BufMut, stream: u32, code: u32) {
        header(out, 4, frame_type::RST_STREAM, 0, stream);
        out.put_u32(code);
    }

    pub fn goaway(out: &mut impl BufMut, last_stream: u32, code: u32, debug: &[u8]) {
        header(out, 8 + debug.len(), frame_type::GOAWAY, 0, 0);
        out.put_u32(last_stream & super::MAX_STREAM_ID);
        out.put_u32(code);
        out.put_slice(debug);
    }

    /// HEADERS carrying `block` (a whole block with END_HEADERS, or its first fragment).
    pub fn headers(
        out: &mut impl BufMut,
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        block: &[u8],
    ) {
        let f = if end_stream { flags::END_STREAM } else { 0 }
            | if end_headers { flags::END_HEADERS } else { 0 };
        frame(out, frame_type::HEADERS, f, stream, block);
    }

    pub fn continuation(out: &mut impl BufMut, stream: u32, end_headers: bool, fragment: &[u8]) {
        let f = if end_headers { flags::END_HEADERS } else { 0 };
        frame(out, frame_type::CONTINUATION, f, stream, fragment);
    }

    pub fn data(out: &mut impl BufMut, stream: u32, end_stream: bool, payload: &[u8]) {
        let f = if end_stream { flags::END_STREAM } else { 0 };
        frame(out, frame_type::DATA, f, stream, payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_parses_and_encodes_the_rfc_layout() {
        // A 16,384-byte DATA frame with END_STREAM on stream 3 (§4.1: 24-bit length first).
        let bytes = [0x00, 0x40, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03];
        let h = FrameHeader::parse(&bytes);
        assert_eq!(h.len(), 16_384);
        assert_eq!(h.kind(), frame_type::DATA);
        assert!(h.has_flag(flags::END_STREAM));
        assert_eq!(h.stream_id(), 3);
        assert_eq!(h.frame_len(), 16_393);
        assert_eq!(h.encode(), bytes);
        assert_eq!(h.type_name(), Some("DATA"));
    }

    #[test]
    fn the_reserved_bit_is_dropped_and_lengths_use_24_bits() {
        let h = FrameHeader::parse(&[0xff, 0xff, 0xff, 0x0a, 0xff, 0x80, 0, 0, 1]);
        assert_eq!(h.len(), (1 << 24) - 1);
        assert_eq!(h.stream_id(), 1);
        assert_eq!(h.type_name(), None);
        assert_eq!(FrameHeader::from_prefix(&[0; 8]), None);
        assert_eq!(
            FrameHeader::from_prefix(&[0, 0, 8, 6, 1, 0, 0, 0, 0, 0xaa]).map(|h| h.kind()),
            Some(frame_type::PING)
        );
        assert_eq!(
            FrameHeader::new(0, 0, 0, 0x8000_0005).encode()[5..],
            [0, 0, 0, 5]
        );
    }

    #[test]
    fn error_codes_sit_where_rst_stream_and_goaway_put_them() {
        let at = |kind| FrameHeader::new(8, kind, 0, 0).error_code_offset();
        assert_eq!(at(frame_type::RST_STREAM), Some(0));
        assert_eq!(at(frame_type::GOAWAY), Some(4));
        assert_eq!(at(frame_type::DATA), None);
    }

    #[test]
    fn encoders_write_the_rfc_bytes() {
        let mut out = Vec::new();
        encode::settings_ack(&mut out);
        assert_eq!(out, [0, 0, 0, 4, 1, 0, 0, 0, 0]);
        out.clear();
        encode::settings(&mut out, &[(setting::INITIAL_WINDOW_SIZE, 65_535)]);
        assert_eq!(out, [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0xff, 0xff]);
        out.clear();
        encode::window_update(&mut out, 1, 1000);
        assert_eq!(out, [0, 0, 4, 8, 0, 0, 0, 0, 1, 0, 0, 0x03, 0xe8]);
        out.clear();
        encode::rst_stream(&mut out, 5, error_code::CANCEL);
        assert_eq!(out, [0, 0, 4, 3, 0, 0, 0, 0, 5, 0, 0, 0, 8]);
        out.clear();
        encode::goaway(&mut out, 7, error_code::ENHANCE_YOUR_CALM, b"x");
        assert_eq!(
            out,
            [0, 0, 9, 7, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0xb, b'x']
        );
        out.clear();
        encode::ping(&mut out, true, b"12345678");
        assert_eq!(&out[..9], [0, 0, 8, 6, 1, 0, 0, 0, 0]);
        let mut buf = bytes::BytesMut::new();
        encode::headers(&mut buf, 1, true, true, &[0x82]);
        encode::continuation(&mut buf, 1, true, &[]);
        encode::data(&mut buf, 1, false, b"ab");
        assert_eq!(
            &buf[..],
            [
                0, 0, 1, 1, 5, 0, 0, 0, 1, 0x82, 0, 0, 0, 9, 4, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0,
                1, b'a', b'b'
            ]
        );
        out.clear();
        encode::preface(&mut out);
        assert_eq!(out, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    }

    #[test]
    fn errors_carry_their_code_and_name_it() {
        let e = Http2Error::frame_size("SETTINGS ACK with a payload");
        assert_eq!(e.code(), error_code::FRAME_SIZE_ERROR);
        assert_eq!(e.stream_id(), None);
        assert_eq!(
            e.to_string(),
            "HTTP/2 connection error FRAME_SIZE_ERROR: SETTINGS ACK with a payload"
        );
        let s = Http2Error::stream(3, error_code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
        assert_eq!(s.stream_id(), Some(3));
        assert!(s.to_string().contains("PROTOCOL_ERROR on stream 3"));
        assert_eq!(
            Http2Error::connection(0x42, "x").to_string(),
            "HTTP/2 connection error 0x42: x"
        );
    }

    #[test]
    fn type_names_follow_the_type_numbers() {
        assert_eq!(
            frame_type_name(frame_type::CONTINUATION),
            Some("CONTINUATION")
        );
        assert_eq!(
            frame_type_name(frame_type::WINDOW_UPDATE),
            Some("WINDOW_UPDATE")
        );
        assert_eq!(frame_type_name(10), None);
    }
}

//! Payload parsing of the frames the client receives, on top of `common::http2`'s frame header
//! and constants. Parsers return an [`Http2Error`] with the RFC 9113 code to answer with.

use common::http2::{Http2Error, MAX_WINDOW, error_code, flags};

/// The payload of a DATA or HEADERS frame without its padding (§6.1: padding as long as the
/// payload or longer is a PROTOCOL_ERROR).
pub(super) fn unpad(frame_flags: u8, payload: &[u8]) -> Result<&[u8], Http2Error> {
    if frame_flags & flags::PADDED == 0 {
        return Ok(payload);
    }
    let bad = || Http2Error::protocol("padding longer than the frame");
    let (&pad, rest) = payload.split_first().ok_or_else(bad)?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|end| &rest[..end])
        .ok_or_else(bad)
}

/// A HEADERS frame's header block fragment: padding and the priority fields removed (§6.2).
pub(super) fn headers_fragment(frame_flags: u8, payload: &[u8]) -> Result<&[u8], Http2Error> {
    let fragment = unpad(frame_flags, payload)?;
    if frame_flags & flags::PRIORITY == 0 {
        return Ok(fragment);
    }
    fragment
        .get(5..)
        .ok_or_else(|| Http2Error::protocol("HEADERS too short for its priority fields"))
}

/// A SETTINGS frame (§6.5): `None` for an ACK, else its (id, value) parameters.
pub(super) fn settings(
    frame_flags: u8,
    payload: &[u8],
) -> Result<Option<impl Iterator<Item = (u16, u32)> + '_>, Http2Error> {
    if frame_flags & flags::ACK != 0 {
        if !payload.is_empty() {
            return Err(Http2Error::frame_size("a SETTINGS ACK with a payload"));
        }
        return Ok(None);
    }
    if !payload.len().is_multiple_of(6) {
        return Err(Http2Error::frame_size(
            "a SETTINGS payload not a multiple of 6 bytes",
        ));
    }
    Ok(Some(payload.chunks_exact(6).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
        )
    })))
}

/// SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1 is a FLOW_CONTROL_ERROR (§6.5.2).
pub(super) fn initial_window(value: u32) -> Result<u32, Http2Error> {
    if value > MAX_WINDOW {
        return Err(Http2Error::flow_control(
            "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
        ));
    }
    Ok(value)
}

/// SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1 is a PROTOCOL_ERROR (§6.5.2).
pub(super) fn max_frame_size(value: u32) -> Result<u32, Http2Error> {
    if !(16_384..=16_777_215).contains(&value) {
        return Err(Http2Error::protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
    }
    Ok(value)
}

/// A WINDOW_UPDATE's increment (§6.9): 4 bytes or FRAME_SIZE_ERROR; 0 is a PROTOCOL_ERROR, of
/// the stream for a stream's window, of the connection for the connection's.
pub(super) fn window_update(stream: u32, payload: &[u8]) -> Result<u32, Http2Error> {
    let Ok(&bytes) = <&[u8; 4]>::try_from(payload) else {
        return Err(Http2Error::frame_size("a WINDOW_UPDATE not of 4 bytes"));
    };
    match u32::from_be_bytes(bytes) & MAX_WINDOW {
        0 if stream == 0 => Err(Http2Error::protocol(
            "a connection WINDOW_UPDATE with an increment of 0",
        )),
        0 => Err(Http2Error::stream(
            stream,
            error_code::PROTOCOL_ERROR,
            "a WINDOW_UPDATE with an increment of 0",
        )),
        inc => Ok(inc),
    }
}

/// An RST_STREAM's error code (§6.4: 4 bytes or FRAME_SIZE_ERROR).
pub(super) fn rst_stream(payload: &[u8]) -> Result<u32, Http2Error> {
    <&[u8; 4]>::try_from(payload)
        .map(|b| u32::from_be_bytes(*b))
        .map_err(|_| Http2Error::frame_size("an RST_STREAM not of 4 bytes"))
}

/// A GOAWAY's last stream id, error code and debug data (§6.8).
pub(super) fn goaway(payload: &[u8]) -> Result<(u32, u32, &[u8]), Http2Error> {
    if payload.len() < 8 {
        return Err(Http2Error::frame_size("a GOAWAY shorter than 8 bytes"));
    }
    let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    Ok((last & common::http2::MAX_STREAM_ID, code, &payload[8..]))
}

/// A PING's opaque data (§6.7: 8 bytes or FRAME_SIZE_ERROR).
pub(super) fn ping(payload: &[u8]) -> Result<&[u8; 8], Http2Error> {
    <&[u8; 8]>::try_from(payload).map_err(|_| Http2Error::frame_size("a PING not of 8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::http2::error_code::{FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, PROTOCOL_ERROR};
    use common::http2::setting;

    #[test]
    fn padding_is_removed_or_rejected() {
        assert_eq!(unpad(0, b"abc"), Ok(&b"abc"[..]));
        assert_eq!(unpad(flags::PADDED, &[2, b'x', 0, 0]), Ok(&b"x"[..]));
        assert_eq!(
            unpad(flags::PADDED, &[5, b'x']).unwrap_err().code(),
            PROTOCOL_ERROR
        );
        assert!(unpad(flags::PADDED, &[]).is_err());
        assert_eq!(
            headers_fragment(flags::PRIORITY, &[0, 0, 0, 1, 9, 0x88]),
            Ok(&[0x88][..])
        );
        assert!(headers_fragment(flags::PRIORITY, &[0, 0]).is_err());
    }

    #[test]
    fn settings_lengths_are_checked() {
        // §6.5: an ACK with a payload and a length not a multiple of 6 are FRAME_SIZE_ERRORs.
        assert_eq!(
            settings(flags::ACK, &[0; 6]).err().unwrap().code(),
            FRAME_SIZE_ERROR
        );
        assert_eq!(settings(0, &[0; 7]).err().unwrap().code(), FRAME_SIZE_ERROR);
        assert!(settings(flags::ACK, &[]).unwrap().is_none());
        let params: Vec<_> = settings(0, &[0, 4, 0, 0, 0xff, 0xff])
            .unwrap()
            .unwrap()
            .collect();
        assert_eq!(params, [(setting::INITIAL_WINDOW_SIZE, 65_535)]);
        assert_eq!(
            initial_window(1 << 31).unwrap_err().code(),
            FLOW_CONTROL_ERROR
        );
        assert_eq!(initial_window(MAX_WINDOW), Ok(MAX_WINDOW));
        assert!(max_frame_size(16_383).is_err() && max_frame_size(1 << 24).is_err());
    }

    #[test]
    fn a_zero_window_increment_is_a_stream_or_connection_error() {
        let stream = window_update(3, &[0, 0, 0, 0]).unwrap_err();
        assert_eq!(
            (stream.stream_id(), stream.code()),
            (Some(3), PROTOCOL_ERROR)
        );
        let conn = window_update(0, &[0x80, 0, 0, 0]).unwrap_err();
        assert_eq!((conn.stream_id(), conn.code()), (None, PROTOCOL_ERROR));
        assert_eq!(
            window_update(0, &[0, 0, 1]).unwrap_err().code(),
            FRAME_SIZE_ERROR
        );
        assert_eq!(window_update(1, &[0, 0, 1, 0]), Ok(256));
    }

    #[test]
    fn fixed_size_payloads_are_checked() {
        assert_eq!(rst_stream(&[0, 0, 0, 8]), Ok(8));
        assert_eq!(rst_stream(&[0, 0, 8]).unwrap_err().code(), FRAME_SIZE_ERROR);
        assert_eq!(
            goaway(&[0x80, 0, 0, 1, 0, 0, 0, 2, b'x']),
            Ok((1, 2, &b"x"[..]))
        );
        assert!(goaway(&[0; 7]).is_err());
        assert!(ping(&[0; 8]).is_ok() && ping(&[0; 9]).is_err());
    }
}

//! Flow-control windows (RFC 9113 §6.9): what we advertise, and the overflow rule for the
//! windows the peer grants.

use common::http2::{Http2Error, MAX_WINDOW, error_code};

/// What we advertise: a stream window of 8 MiB, a connection window of 32 MiB (4 MB chunks
/// and their responses flow without waiting for a window update), frames up to 1 MiB.
pub(super) const STREAM_WINDOW: u32 = 8 << 20;
pub(super) const CONNECTION_WINDOW: u32 = 32 << 20;
pub(super) const MAX_FRAME_SIZE: u32 = 1 << 20;
/// HTTP/2's defaults before the peer's SETTINGS say otherwise.
pub(super) const DEFAULT_WINDOW: i64 = 65_535;

/// `window` grown by `by` (a WINDOW_UPDATE's increment or a SETTINGS_INITIAL_WINDOW_SIZE
/// change), or the FLOW_CONTROL_ERROR of a window past 2^31-1 (§6.9.1, §6.9.2): a stream error of
/// `stream`, a connection error when `stream` is 0.
pub(super) fn grow(window: i64, by: i64, stream: u32) -> Result<i64, Http2Error> {
    let grown = window + by;
    if grown <= i64::from(MAX_WINDOW) {
        return Ok(grown);
    }
    Err(if stream == 0 {
        Http2Error::flow_control("a flow-control window past 2^31-1")
    } else {
        Http2Error::stream(
            stream,
            error_code::FLOW_CONTROL_ERROR,
            "a stream's flow-control window past 2^31-1",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_grow_up_to_2_31_minus_1() {
        let max = i64::from(MAX_WINDOW);
        assert_eq!(grow(DEFAULT_WINDOW, max - DEFAULT_WINDOW, 0), Ok(max));
        let conn = grow(DEFAULT_WINDOW, max, 0).unwrap_err();
        assert_eq!(
            (conn.stream_id(), conn.code()),
            (None, error_code::FLOW_CONTROL_ERROR)
        );
        let stream = grow(1, max, 5).unwrap_err();
        assert_eq!(stream.stream_id(), Some(5));
        // A window may be negative after a SETTINGS shrink; growing it back is fine.
        assert_eq!(grow(-10, 20, 1), Ok(10));
    }
}

//! HTTP/2 (RFC 9113) without I/O: frame types, flags, setting ids and error codes, the 9-byte
//! frame header, encoders of the frames loadgen's client and dn-sim's attack tests write, and a
//! typed parse error carrying the RFC error code. loadgen's client, dn-sim's frame scanner and the
//! attack tests share it so that the wire constants exist once.

pub mod frame;

pub use frame::{
    FRAME_HEADER_LEN, FRAME_TYPE_NAMES, FrameHeader, Http2Error, MAX_STREAM_ID, MAX_WINDOW,
    PREFACE, encode, error_code, flags, frame_type, frame_type_name, setting,
};

/// The names of HTTP/2's error codes, indexed by code (0x0 to 0xd).
pub const ERROR_CODE_NAMES: [&str; 14] = [
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
];

/// The name of error `code`, or `None` for a code RFC 9113 does not define.
pub fn error_code_name(code: u32) -> Option<&'static str> {
    ERROR_CODE_NAMES.get(code as usize).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_indexed_by_code() {
        assert_eq!(error_code_name(0x0), Some("NO_ERROR"));
        assert_eq!(error_code_name(0x8), Some("CANCEL"));
        assert_eq!(error_code_name(0xb), Some("ENHANCE_YOUR_CALM"));
        assert_eq!(error_code_name(0xd), Some("HTTP_1_1_REQUIRED"));
        assert_eq!(error_code_name(0xe), None);
    }
}

//! HTTP/2 error codes (RFC 9113 §7) by name, for messages and metric labels.

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

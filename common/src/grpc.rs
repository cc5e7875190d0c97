//! gRPC status codes by their canonical names, for messages, metric labels and flags.

use tonic::Code;

/// gRPC status codes by number, with their canonical names and metric labels.
const GRPC_CODES: [(Code, &str, &str); 17] = [
    (Code::Ok, "OK", "grpc:OK"),
    (Code::Cancelled, "CANCELLED", "grpc:CANCELLED"),
    (Code::Unknown, "UNKNOWN", "grpc:UNKNOWN"),
    (
        Code::InvalidArgument,
        "INVALID_ARGUMENT",
        "grpc:INVALID_ARGUMENT",
    ),
    (
        Code::DeadlineExceeded,
        "DEADLINE_EXCEEDED",
        "grpc:DEADLINE_EXCEEDED",
    ),
    (Code::NotFound, "NOT_FOUND", "grpc:NOT_FOUND"),
    (Code::AlreadyExists, "ALREADY_EXISTS", "grpc:ALREADY_EXISTS"),
    (
        Code::PermissionDenied,
        "PERMISSION_DENIED",
        "grpc:PERMISSION_DENIED",
    ),
    (
        Code::ResourceExhausted,
        "RESOURCE_EXHAUSTED",
        "grpc:RESOURCE_EXHAUSTED",
    ),
    (
        Code::FailedPrecondition,
        "FAILED_PRECONDITION",
        "grpc:FAILED_PRECONDITION",
    ),
    (Code::Aborted, "ABORTED", "grpc:ABORTED"),
    (Code::OutOfRange, "OUT_OF_RANGE", "grpc:OUT_OF_RANGE"),
    (Code::Unimplemented, "UNIMPLEMENTED", "grpc:UNIMPLEMENTED"),
    (Code::Internal, "INTERNAL", "grpc:INTERNAL"),
    (Code::Unavailable, "UNAVAILABLE", "grpc:UNAVAILABLE"),
    (Code::DataLoss, "DATA_LOSS", "grpc:DATA_LOSS"),
    (
        Code::Unauthenticated,
        "UNAUTHENTICATED",
        "grpc:UNAUTHENTICATED",
    ),
];

fn entry(code: Code) -> &'static (Code, &'static str, &'static str) {
    // `Code` discriminants are the wire numbers 0..=16, the index of each entry.
    &GRPC_CODES[code as usize]
}

/// The canonical name of a gRPC code (`UNAVAILABLE`).
pub fn grpc_code_name(code: Code) -> &'static str {
    entry(code).1
}

/// Parses a gRPC code by name (case and underscores ignored) or number.
pub fn parse_grpc_code(text: &str) -> Option<Code> {
    let t = text.trim();
    if let Ok(n) = t.parse::<usize>() {
        return GRPC_CODES.get(n).map(|e| e.0);
    }
    let squash = |s: &str| s.replace('_', "").to_ascii_lowercase();
    let wanted = squash(t);
    GRPC_CODES
        .iter()
        .find(|(_, name, _)| squash(name) == wanted)
        .map(|e| e.0)
}

/// The metric label of a gRPC code (`grpc:UNAVAILABLE`).
pub fn grpc_code_label(code: Code) -> &'static str {
    entry(code).2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_round_trip() {
        for (code, name, label) in GRPC_CODES {
            assert_eq!(grpc_code_name(code), name);
            assert_eq!(parse_grpc_code(name), Some(code));
            assert_eq!(parse_grpc_code(&(code as i32).to_string()), Some(code));
            assert_eq!(grpc_code_label(code), label);
        }
        assert_eq!(
            parse_grpc_code("resource_exhausted"),
            Some(Code::ResourceExhausted)
        );
        assert_eq!(parse_grpc_code("17"), None);
        assert_eq!(parse_grpc_code("nope"), None);
    }
}

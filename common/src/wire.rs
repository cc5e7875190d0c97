//! Proto2 `required` field enforcement at the wire level.
//!
//! prost decodes a proto2 message with a missing `required` field into a default value, but Ozone's
//! Java parser rejects it, and a real DataNode then fails the whole call (gRPC UNKNOWN from its
//! grpc-java server; a Java client reports INTERNAL "Invalid protobuf byte sequence"). This module
//! walks the encoded bytes once, without allocating, and reports the first required field that is
//! absent in the message or in any nested message that is present. A required enum field whose
//! value is not a known enum value counts as absent, as in Java (the value goes to the
//! unknown-field set).
//! The per-message tables are generated from the `.proto` by `build.rs`.

use std::fmt;

/// What `build.rs` records about one message type.
#[derive(Debug)]
pub struct MessageSpec {
    /// Full proto name without the leading dot, e.g. `hadoop.hdds.datanode.ChunkInfo`.
    pub name: &'static str,
    /// Field numbers labelled `required`.
    pub required: &'static [i32],
    /// (field number, index into `MESSAGE_SPECS`) for every message-typed field.
    pub nested: &'static [(i32, usize)],
    /// (field number, known values) for every required enum field.
    pub required_enums: &'static [(i32, &'static [i32])],
}

include!(concat!(env!("OUT_DIR"), "/wire_spec.rs"));

/// Java's protobuf parser gives up at this nesting depth (CodedInputStream's recursion limit).
const MAX_DEPTH: u32 = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The bytes end inside a field, a length is out of range, or a varint is too long.
    Truncated,
    /// Wire type 3, 4, 6 or 7, or field number 0.
    InvalidTag,
    /// Nested deeper than the Java parser accepts.
    TooDeep,
    /// A `required` field is absent (or, for an enum, has an unknown value).
    MissingRequired { message: &'static str, field: i32 },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "truncated or malformed message"),
            WireError::InvalidTag => write!(f, "invalid tag"),
            WireError::TooDeep => write!(f, "message nested too deeply"),
            WireError::MissingRequired { message, field } => {
                write!(f, "message {message} is missing required field {field}")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// A message type whose encoded form can be checked against its required fields.
pub trait RequiredFields {
    /// Index of this type in [`MESSAGE_SPECS`].
    const SPEC: usize;

    /// Checks `buf`, the encoding of one `Self`.
    fn check_required(buf: &[u8]) -> Result<(), WireError> {
        check(buf, Self::SPEC, 0)
    }

    /// Checks the encoding of one `Self` given in pieces (as a WriteChunk is sent: its data a
    /// segment of its own), without joining them.
    fn check_required_parts(parts: &[&[u8]]) -> Result<(), WireError> {
        let parts = Parts::new(parts);
        check_range(&parts, 0, parts.len, Self::SPEC, 0)
    }
}

/// What the check reads: a byte by position. Only the fields' keys and lengths are read; the
/// contents of `bytes` and `string` fields are skipped, so a message in pieces is checked
/// without a copy.
trait WireBytes {
    fn byte(&self, i: usize) -> Option<u8>;
}

impl WireBytes for [u8] {
    #[inline]
    fn byte(&self, i: usize) -> Option<u8> {
        self.get(i).copied()
    }
}

/// A message as consecutive pieces (at most a handful).
struct Parts<'a> {
    parts: &'a [&'a [u8]],
    len: usize,
}

impl<'a> Parts<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Self {
        Parts {
            parts,
            len: parts.iter().map(|p| p.len()).sum(),
        }
    }
}

impl WireBytes for Parts<'_> {
    #[inline]
    fn byte(&self, mut i: usize) -> Option<u8> {
        for p in self.parts {
            if i < p.len() {
                return Some(p[i]);
            }
            i -= p.len();
        }
        None
    }
}

impl RequiredFields for crate::proto::ContainerCommandRequestProto {
    const SPEC: usize = SPEC_ContainerCommandRequestProto;
}

impl RequiredFields for crate::proto::ContainerCommandResponseProto {
    const SPEC: usize = SPEC_ContainerCommandResponseProto;
}

/// The spec table entry for a message by its short name (for tests and tools).
pub fn spec_by_name(short_name: &str) -> Option<usize> {
    MESSAGE_SPECS
        .iter()
        .position(|m| m.name.rsplit('.').next() == Some(short_name))
}

fn read_varint<B: WireBytes + ?Sized>(
    buf: &B,
    end: usize,
    pos: &mut usize,
) -> Result<u64, WireError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        if *pos >= end {
            return Err(WireError::Truncated);
        }
        let b = buf.byte(*pos).ok_or(WireError::Truncated)?;
        *pos += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err(WireError::Truncated)
}

fn skip(end: usize, pos: &mut usize, n: usize) -> Result<(), WireError> {
    let to = pos.checked_add(n).ok_or(WireError::Truncated)?;
    if to > end {
        return Err(WireError::Truncated);
    }
    *pos = to;
    Ok(())
}

/// Checks one message of type `MESSAGE_SPECS[spec]` encoded in `buf`.
pub fn check(buf: &[u8], spec: usize, depth: u32) -> Result<(), WireError> {
    check_range(buf, 0, buf.len(), spec, depth)
}

/// Checks one message of type `MESSAGE_SPECS[spec]` encoded in `buf[start..end]`.
fn check_range<B: WireBytes + ?Sized>(
    buf: &B,
    start: usize,
    end: usize,
    spec: usize,
    depth: u32,
) -> Result<(), WireError> {
    if depth > MAX_DEPTH {
        return Err(WireError::TooDeep);
    }
    let spec = &MESSAGE_SPECS[spec];
    // At most 64 required fields per message; Ozone's largest has 3.
    let mut seen: u64 = 0;
    let mut pos = start;
    while pos < end {
        let key = read_varint(buf, end, &mut pos)?;
        let field = i32::try_from(key >> 3).map_err(|_| WireError::InvalidTag)?;
        if field == 0 {
            return Err(WireError::InvalidTag);
        }
        let required_slot = spec.required.iter().position(|&f| f == field);
        let mut present = true;
        match key & 7 {
            0 => {
                let v = read_varint(buf, end, &mut pos)?;
                if let Some((_, values)) = spec.required_enums.iter().find(|(f, _)| *f == field) {
                    // proto2 enums are int32; an unknown value leaves the field unset in Java.
                    present = values.contains(&(v as i64 as i32));
                }
            }
            1 => skip(end, &mut pos, 8)?,
            5 => skip(end, &mut pos, 4)?,
            2 => {
                let len = usize::try_from(read_varint(buf, end, &mut pos)?)
                    .map_err(|_| WireError::Truncated)?;
                let from = pos;
                skip(end, &mut pos, len)?;
                if let Some((_, child)) = spec.nested.iter().find(|(f, _)| *f == field) {
                    check_range(buf, from, pos, *child, depth + 1)?;
                }
            }
            _ => return Err(WireError::InvalidTag),
        }
        if let Some(slot) = required_slot {
            if present {
                seen |= 1 << slot;
            } else {
                seen &= !(1 << slot);
            }
        }
    }
    for (slot, &field) in spec.required.iter().enumerate() {
        if seen & (1 << slot) == 0 {
            return Err(WireError::MissingRequired {
                message: spec.name,
                field,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::*;
    use prost::Message;

    fn echo_request() -> ContainerCommandRequestProto {
        ContainerCommandRequestProto {
            cmd_type: Type::Echo as i32,
            container_id: 1,
            datanode_uuid: "x".into(),
            echo: Some(EchoRequestProto::default()),
            ..Default::default()
        }
    }

    #[test]
    fn complete_request_passes() {
        let bytes = echo_request().encode_to_vec();
        assert_eq!(ContainerCommandRequestProto::check_required(&bytes), Ok(()));
    }

    #[test]
    fn each_missing_envelope_field_is_found() {
        // 08 16 = cmdType, 18 01 = containerID, 22 01 78 = datanodeUuid
        let cases: [(&[u8], i32); 3] = [
            (&[0x18, 0x01, 0x22, 0x01, 0x78], 1),
            (&[0x08, 0x16, 0x22, 0x01, 0x78], 3),
            (&[0x08, 0x16, 0x18, 0x01], 4),
        ];
        for (bytes, field) in cases {
            assert_eq!(
                ContainerCommandRequestProto::check_required(bytes),
                Err(WireError::MissingRequired {
                    message: "hadoop.hdds.datanode.ContainerCommandRequestProto",
                    field
                })
            );
        }
    }

    #[test]
    fn unknown_cmd_type_counts_as_missing() {
        let bytes = [0x08, 0x63, 0x18, 0x01, 0x22, 0x01, 0x78]; // cmdType = 99
        assert!(matches!(
            ContainerCommandRequestProto::check_required(&bytes),
            Err(WireError::MissingRequired { field: 1, .. })
        ));
    }

    #[test]
    fn nested_required_fields_are_checked() {
        // WriteChunk envelope whose writeChunk(17).blockID(1) has containerID but no localID.
        let bytes = [
            0x08, 0x0c, 0x18, 0x01, 0x22, 0x01, 0x78, 0x8a, 0x01, 0x04, 0x0a, 0x02, 0x08, 0x01,
        ];
        assert_eq!(
            ContainerCommandRequestProto::check_required(&bytes),
            Err(WireError::MissingRequired {
                message: "hadoop.hdds.datanode.DatanodeBlockID",
                field: 2
            })
        );
        // Absent optional sub-messages are not checked: an Echo without `echo` passes the wire check.
        assert_eq!(
            ContainerCommandRequestProto::check_required(&bytes[..7]),
            Ok(())
        );
    }

    #[test]
    fn truncated_and_garbage_input_is_an_error_not_a_panic() {
        let bytes = echo_request().encode_to_vec();
        for cut in 1..bytes.len() {
            let _ = ContainerCommandRequestProto::check_required(&bytes[..cut]);
        }
        assert_eq!(
            ContainerCommandRequestProto::check_required(&[0x0a, 0xff]),
            Err(WireError::Truncated)
        );
        assert_eq!(
            ContainerCommandRequestProto::check_required(&[0x00]),
            Err(WireError::InvalidTag)
        );
        assert_eq!(
            ContainerCommandRequestProto::check_required(&[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
            ]),
            Err(WireError::Truncated)
        );
    }

    #[test]
    fn spec_table_matches_the_field_table() {
        let chunk = &MESSAGE_SPECS[spec_by_name("ChunkInfo").unwrap()];
        assert_eq!(chunk.required, &[1, 2, 3, 5]);
        let put_block = &MESSAGE_SPECS[spec_by_name("PutBlockResponseProto").unwrap()];
        assert_eq!(put_block.required, &[1]);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = ContainerCommandRequestProto::check_required(&bytes);
            let _ = ContainerCommandResponseProto::check_required(&bytes);
        }

        /// A message in three pieces, split anywhere, checks exactly as the whole does: valid
        /// requests (an Echo, with a field dropped or not) and arbitrary bytes alike.
        #[test]
        fn pieces_check_as_the_whole(
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
            drop_field in proptest::prelude::any::<bool>(),
            use_garbage in proptest::prelude::any::<bool>(),
            a in 0usize..200,
            b in 0usize..200,
        ) {
            let bytes = if use_garbage {
                garbage
            } else {
                let mut req = echo_request();
                if drop_field {
                    req.cmd_type = 999;
                }
                req.encode_to_vec()
            };
            let (x, y) = (a.min(b).min(bytes.len()), a.max(b).min(bytes.len()));
            let parts: [&[u8]; 3] = [&bytes[..x], &bytes[x..y], &bytes[y..]];
            proptest::prop_assert_eq!(
                ContainerCommandRequestProto::check_required_parts(&parts),
                ContainerCommandRequestProto::check_required(&bytes)
            );
        }
    }
}

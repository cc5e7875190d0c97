//! Apache Ratis's client protocol as an Ozone DataNode serves it (Ratis 3.2.1 in Ozone 2.2.0):
//! the generated messages and service stubs ([`proto`]), the ids it carries, and Ozone's
//! embedding of a container command in a Raft message (`ContainerCommandRequestMessage`).
//!
//! The wire is standard gRPC: Ratis's shading renames Java packages only.

use crate::proto::{ContainerCommandRequestProto as Request, Type};
use crate::wire::RequiredFields as _;
use bytes::{BufMut as _, Bytes, BytesMut};
use prost::Message as _;

#[allow(
    non_camel_case_types,
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all
)]
pub mod proto {
    //! `proto/ratis/`: `Raft.proto` (package `ratis.common`) and `Grpc.proto` (`ratis.grpc`).
    pub mod common {
        include!(concat!(env!("OUT_DIR"), "/ratis.common.rs"));
    }
    pub mod grpc {
        include!(concat!(env!("OUT_DIR"), "/ratis.grpc.rs"));
    }
}

/// The DataNode's Ratis client port, `hdds.container.ratis.ipc.port`.
pub const DEFAULT_RATIS_PORT: u16 = 9858;
/// The DataNode's Ratis admin port (`hdds.container.ratis.admin.port`): `groupList`, `groupInfo`.
pub const DEFAULT_RATIS_ADMIN_PORT: u16 = 9857;

/// The stream of requests answered in the order of their sliding-window `seqNum`.
pub const ORDERED_PATH: &str = "/ratis.grpc.RaftClientProtocolService/ordered";
/// The stream of requests answered as each completes (watches, blocking calls).
pub const UNORDERED_PATH: &str = "/ratis.grpc.RaftClientProtocolService/unordered";

/// `raft.grpc.message.size.max` as a DataNode sets it (`XceiverServerRatis`): the larger of
/// 32 MiB and the appender buffer, plus 1 MiB; 33 MiB with Ozone 2.2.0's defaults.
pub const MAX_MESSAGE_SIZE: usize = (32 << 20) + (1 << 20);

/// How many requests one Ozone Ratis client keeps outstanding
/// (`hdds.ratis.raft.client.async.outstanding-requests.max`).
pub const CLIENT_OUTSTANDING_REQUESTS: usize = 32;

/// `ClientVersion.CURRENT` of Ozone 2.2.0 (`BUCKET_LAYOUT_SUPPORT`): what
/// The header of a client's request on an `ordered` stream, as Ratis's `OrderedAsync` fills it:
/// requestor (the client id), reply id (the server's peer id), group, call id, `toLeader`, and
/// the sliding window's `seqNum` (`isFirst` on a window's first request). The ids are `Bytes`
/// the caller keeps, so a request costs reference counts, not copies.
pub fn ordered_rpc(
    requestor: Bytes,
    reply_id: Bytes,
    group: proto::common::RaftGroupIdProto,
    call_id: u64,
    seq_num: u64,
    is_first: bool,
) -> proto::common::RaftRpcRequestProto {
    proto::common::RaftRpcRequestProto {
        requestor_id: requestor,
        reply_id,
        raft_group_id: Some(group),
        call_id,
        to_leader: true,
        sliding_window_entry: Some(proto::common::SlidingWindowEntry { seq_num, is_first }),
        ..Default::default()
    }
}

/// `ContainerCommandRequestMessage.toMessage` sets when a request has no `version`.
pub const CLIENT_VERSION_CURRENT: u32 = 3;

/// A Java-serialized empty `StackTraceElement[]`: the `stacktrace` of a
/// `StateMachineExceptionProto` the client can read (empty bytes make it fail "Failed to
/// readObject").
pub const EMPTY_STACK_TRACE: [u8; 55] = [
    0xac, 0xed, 0x00, 0x05, 0x75, 0x72, 0x00, 0x1e, 0x5b, 0x4c, 0x6a, 0x61, 0x76, 0x61, 0x2e, 0x6c,
    0x61, 0x6e, 0x67, 0x2e, 0x53, 0x74, 0x61, 0x63, 0x6b, 0x54, 0x72, 0x61, 0x63, 0x65, 0x45, 0x6c,
    0x65, 0x6d, 0x65, 0x6e, 0x74, 0x3b, 0x02, 0x46, 0x2a, 0x3c, 0x3c, 0xfd, 0x22, 0x39, 0x02, 0x00,
    0x00, 0x78, 0x70, 0x00, 0x00, 0x00, 0x00,
];

/// The metadata key grpc-java puts the Java class of a failing call's exception under; the Ratis
/// client rebuilds the exception from it and the status description (`GrpcUtil`).
pub const EXCEPTION_TYPE_KEY: &str = "exception-type";

/// The class of the exception an unknown group gets.
pub const GROUP_MISMATCH_EXCEPTION: &str =
    "org.apache.ratis.protocol.exceptions.GroupMismatchException";

/// A Ratis id on the wire: 16 bytes, most significant half first, as `java.util.UUID` writes it
/// (`RaftGroupId`, `ClientId`, and Ozone's pipeline ids).
pub fn id_bytes(id: uuid::Uuid) -> Bytes {
    Bytes::copy_from_slice(id.as_bytes())
}

/// The id in 16 wire bytes; `None` for any other length.
pub fn id_from_bytes(bytes: &[u8]) -> Option<uuid::Uuid> {
    uuid::Uuid::from_slice(bytes).ok()
}

/// Why a Raft message is not a container command (`ContainerCommandRequestMessage.toProto`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    /// Shorter than its 4-byte header length, or a header length past the end.
    #[error("message of {len} bytes cannot hold a header of {header} bytes")]
    Truncated { len: usize, header: i64 },
    /// The header is not a `ContainerCommandRequestProto` (or lacks a required field).
    #[error("Protocol message: {0}")]
    Invalid(String),
    /// The header's `pipelineID` names another group (the words Ozone 2.2.0 uses).
    #[error("ID mismatched: PipelineID {pipeline} does not match the groupId {group}")]
    PipelineMismatch { pipeline: String, group: String },
}

/// `ContainerCommandRequestMessage.toMessage`: a 4-byte big-endian length, the request without
/// its chunk data (WriteChunk's `data`, PutSmallFile's `data`), then that data. Sets `version`
/// to [`CLIENT_VERSION_CURRENT`] when absent, as Ozone's client does.
pub fn encode_message(request: &Request) -> Bytes {
    let mut header = request.clone();
    if header.version.is_none() {
        header.version = Some(CLIENT_VERSION_CURRENT);
    }
    let data = match Type::try_from(header.cmd_type) {
        Ok(Type::WriteChunk) => header.write_chunk.as_mut().and_then(|w| w.data.take()),
        Ok(Type::PutSmallFile) => header
            .put_small_file
            .as_mut()
            .map(|p| std::mem::take(&mut p.data)),
        _ => None,
    }
    .unwrap_or_default();
    let len = header.encoded_len();
    let mut out = BytesMut::with_capacity(4 + len + data.len());
    out.put_u32(len as u32);
    header
        .encode(&mut out)
        .expect("a BytesMut with room for the header");
    out.put_slice(&data);
    out.freeze()
}

/// `ContainerCommandRequestMessage.toProto`: the request a Raft message holds, with its data
/// re-attached (a slice of `content`, not a copy). With `group`, a `pipelineID` must name it and
/// an absent one is set to it.
pub fn decode_message(content: &Bytes, group: Option<uuid::Uuid>) -> Result<Request, MessageError> {
    let truncated = |header: i64| MessageError::Truncated {
        len: content.len(),
        header,
    };
    let Some(head) = content.get(..4) else {
        return Err(truncated(-1));
    };
    // Java reads a signed int: a length of 2^31 or more is negative there.
    let header_len = i32::from_be_bytes(head.try_into().expect("4 bytes"));
    let end = usize::try_from(header_len)
        .ok()
        .and_then(|n| n.checked_add(4))
        .filter(|&end| end <= content.len())
        .ok_or_else(|| truncated(i64::from(header_len)))?;
    let header = content.slice(4..end);
    Request::check_required(&header).map_err(|e| MessageError::Invalid(e.to_string()))?;
    let mut request = Request::decode(header).map_err(|e| MessageError::Invalid(e.to_string()))?;
    if let Some(group) = group {
        let group = group.hyphenated().to_string();
        match &request.pipeline_id {
            Some(pipeline) if *pipeline != group => {
                return Err(MessageError::PipelineMismatch {
                    pipeline: pipeline.clone(),
                    group,
                });
            }
            Some(_) => {}
            None => request.pipeline_id = Some(group),
        }
    }
    let data = content.slice(end..);
    match Type::try_from(request.cmd_type) {
        Ok(Type::WriteChunk) => {
            if let Some(w) = request.write_chunk.as_mut() {
                w.data = Some(data);
            }
        }
        Ok(Type::PutSmallFile) => {
            if let Some(p) = request.put_small_file.as_mut() {
                p.data = data;
            }
        }
        _ => {}
    }
    Ok(request)
}

/// Whether Ozone's client sends `request` as a Raft read (`HddsUtils.isReadOnly`): the read
/// commands, and Echo with `readOnly`; everything else is a Raft write.
pub fn is_read_only(request: &Request) -> bool {
    match Type::try_from(request.cmd_type) {
        Ok(
            Type::ReadChunk
            | Type::GetBlock
            | Type::ReadContainer
            | Type::ReadBlock
            | Type::ListBlock
            | Type::GetSmallFile
            | Type::ListContainer
            | Type::ListChunk
            | Type::GetCommittedBlockLength
            | Type::GetContainerChecksumInfo,
        ) => true,
        Ok(Type::Echo) => request
            .echo
            .as_ref()
            .is_some_and(|e| e.read_only == Some(true)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ChunkInfo, DatanodeBlockId, EchoRequestProto, WriteChunkRequestProto};

    fn write_chunk(data: &'static [u8]) -> Request {
        Request {
            cmd_type: Type::WriteChunk as i32,
            container_id: 7,
            datanode_uuid: "dn".into(),
            write_chunk: Some(WriteChunkRequestProto {
                block_id: DatanodeBlockId {
                    container_id: 7,
                    local_id: 1,
                    block_commit_sequence_id: None,
                    replica_index: None,
                },
                chunk_data: Some(ChunkInfo {
                    chunk_name: "c".into(),
                    offset: 0,
                    len: data.len() as u64,
                    ..Default::default()
                }),
                data: Some(Bytes::from_static(data)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_write_chunk_travels_with_its_data_after_the_header() {
        let request = write_chunk(b"0123456789");
        let content = encode_message(&request);
        let header_len = u32::from_be_bytes(content[..4].try_into().unwrap()) as usize;
        assert_eq!(&content[4 + header_len..], b"0123456789");
        let header = Request::decode(&content[4..4 + header_len]).unwrap();
        assert_eq!(
            header.write_chunk.unwrap().data,
            None,
            "data not in the header"
        );
        assert_eq!(header.version, Some(CLIENT_VERSION_CURRENT));

        let group = uuid::Uuid::from_u128(0x1234);
        let back = decode_message(&content, Some(group)).unwrap();
        assert_eq!(back.pipeline_id.as_deref(), Some(&*group.to_string()));
        assert_eq!(
            back.write_chunk.unwrap().data.as_deref(),
            Some(&b"0123456789"[..])
        );
    }

    #[test]
    fn a_pipeline_id_of_another_group_is_refused_in_ozones_words() {
        let mut request = write_chunk(b"x");
        request.pipeline_id = Some("00000000-0000-0000-0000-000000000001".into());
        let content = encode_message(&request);
        let err = decode_message(&content, Some(uuid::Uuid::from_u128(2))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ID mismatched: PipelineID 00000000-0000-0000-0000-000000000001 does not match \
             the groupId 00000000-0000-0000-0000-000000000002"
        );
        assert!(decode_message(&content, Some(uuid::Uuid::from_u128(1))).is_ok());
    }

    #[test]
    fn short_lengths_past_the_end_and_negative_ones_are_errors_not_panics() {
        for content in [
            &b""[..],
            b"\x00\x00",
            b"\x00\x00\x00\x09abc",
            b"\xff\xff\xff\xff",
            b"\x7f\xff\xff\xff",
        ] {
            let err = decode_message(&Bytes::copy_from_slice(content), None).unwrap_err();
            assert!(
                matches!(err, MessageError::Truncated { .. }),
                "{content:?}: {err}"
            );
        }
        // A header lacking required fields (cmdType, containerID, datanodeUuid).
        let err = decode_message(&Bytes::from_static(b"\x00\x00\x00\x00"), None).unwrap_err();
        assert!(matches!(err, MessageError::Invalid(_)), "{err}");
    }

    #[test]
    fn echo_is_a_read_only_with_read_only_set_and_a_write_otherwise() {
        let echo = |read_only| Request {
            cmd_type: Type::Echo as i32,
            echo: Some(EchoRequestProto {
                read_only,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(is_read_only(&echo(Some(true))));
        assert!(!is_read_only(&echo(Some(false))));
        assert!(!is_read_only(&echo(None)));
        assert!(!is_read_only(&write_chunk(b"")));
        let get_block = Request {
            cmd_type: Type::GetBlock as i32,
            ..Default::default()
        };
        assert!(is_read_only(&get_block));
    }

    #[test]
    fn ids_are_sixteen_bytes_most_significant_first() {
        let id = uuid::Uuid::parse_str("01234567-89ab-cdef-0123-456789abcdef").unwrap();
        let bytes = id_bytes(id);
        assert_eq!(bytes[0], 0x01);
        assert_eq!(bytes[15], 0xef);
        assert_eq!(id_from_bytes(&bytes), Some(id));
        assert_eq!(id_from_bytes(&bytes[..15]), None);
    }
}

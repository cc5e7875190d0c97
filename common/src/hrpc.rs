//! Hadoop RPC's wire, without I/O: what a DataNode sends SCM and how SCM answers, as Ozone 2.2.0's
//! fork of Hadoop's IPC client writes and reads it (`org.apache.hadoop.ipc_.Client`,
//! `ProtobufRpcEngine`, `RpcWritable`; the wire is Hadoop's, unchanged).
//!
//! A connection starts with [`connection_header`] (`hrpc`, version 9, service class, auth
//! protocol NONE), then the connection context ([`encode_connection_context`], call id -3, never
//! answered), then calls ([`encode_call`]). Every request and response is a frame: a 4-byte
//! big-endian length, then varint-delimited protobuf messages. A response is
//! `RpcResponseHeaderProto` and, on success, the delimited response message ([`parse_response`]).
//!
//! Responses come from a server that may be hostile or broken: every length is checked against
//! the frame before it is used, a frame's length against a maximum ([`response_length`]) before
//! anything is allocated, and nothing here panics on any input.

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use prost::Message;

#[allow(
    non_camel_case_types,
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all
)]
pub mod proto {
    //! `proto/hadoop/`: `RpcHeader.proto`, `IpcConnectionContext.proto`, `ProtobufRpcEngine.proto`
    //! (package `hadoop.common`), as Ozone 2.2.0 ships them.
    include!(concat!(env!("OUT_DIR"), "/hadoop.common.rs"));
}

use proto::rpc_request_header_proto::OperationProto;
use proto::rpc_response_header_proto::RpcStatusProto;
use proto::{
    IpcConnectionContextProto, RequestHeaderProto, RpcKindProto, RpcRequestHeaderProto,
    RpcResponseHeaderProto, UserInformationProto,
};

/// The first four bytes of a connection (`RpcConstants.HEADER`).
pub const MAGIC: [u8; 4] = *b"hrpc";
/// `RpcConstants.CURRENT_VERSION`: 9 since HADOOP-8990.
pub const CURRENT_VERSION: u8 = 9;
/// `Server.AuthProtocol.NONE`: no SASL (a cluster without Kerberos). SASL would be -33.
pub const AUTH_PROTOCOL_NONE: u8 = 0;
/// The connection context's call id (`RpcConstants.CONNECTION_CONTEXT_CALL_ID`).
pub const CONNECTION_CONTEXT_CALL_ID: i32 = -3;
/// A ping's call id (`RpcConstants.PING_CALL_ID`).
pub const PING_CALL_ID: i32 = -4;
/// The retry count of the connection context (`RpcConstants.INVALID_RETRY_COUNT`).
pub const INVALID_RETRY_COUNT: i32 = -1;
/// `ipc.maximum.response.length`'s default: 128 MB.
pub const DEFAULT_MAX_RESPONSE_LENGTH: usize = 128 << 20;

/// The seven bytes that open a connection: magic, version, service class, auth protocol.
pub fn connection_header(service_class: u8) -> [u8; 7] {
    let [h, r, p, c] = MAGIC;
    [
        h,
        r,
        p,
        c,
        CURRENT_VERSION,
        service_class,
        AUTH_PROTOCOL_NONE,
    ]
}

/// `ProtoUtil.makeRpcRequestHeader`: a protobuf-engine call, the final packet.
pub fn request_header(call_id: i32, retry_count: i32, client_id: Bytes) -> RpcRequestHeaderProto {
    RpcRequestHeaderProto {
        rpc_kind: Some(RpcKindProto::RpcProtocolBuffer as i32),
        rpc_op: Some(OperationProto::RpcFinalPacket as i32),
        call_id,
        client_id,
        retry_count: Some(retry_count),
        trace_info: None,
        caller_context: None,
        state_id: None,
    }
}

/// The connection context frame (`Client.writeConnectionContext`): call id -3, the protocol the
/// connection is for and, as with simple authentication, the effective user.
pub fn encode_connection_context(
    client_id: &Bytes,
    protocol: &str,
    user: &str,
    out: &mut BytesMut,
) {
    let header = request_header(
        CONNECTION_CONTEXT_CALL_ID,
        INVALID_RETRY_COUNT,
        client_id.clone(),
    );
    let context = IpcConnectionContextProto {
        user_info: Some(UserInformationProto {
            effective_user: Some(user.to_owned()),
            real_user: None,
        }),
        protocol: Some(protocol.to_owned()),
    };
    put_frame(out, &[&Delimited(&header), &Delimited(&context)]);
}

/// One call of a protobuf protocol.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Ascending from 0 per client; answered with the same id.
    pub call_id: i32,
    /// 0 on a first attempt.
    pub retry_count: i32,
    /// The client's 16-byte id, the same on every call.
    pub client_id: &'a Bytes,
    /// The method, e.g. `submitRequest`.
    pub method: &'a str,
    /// The protocol's name (`@ProtocolInfo.protocolName`).
    pub protocol: &'a str,
    /// The protocol's version (`@ProtocolInfo.protocolVersion`).
    pub protocol_version: u64,
}

/// A call's frame (`Client.Connection.sendRpcRequest` with `ProtobufRpcEngine`'s
/// `RpcProtobufRequest`): `RpcRequestHeaderProto`, `RequestHeaderProto`, the request.
pub fn encode_call(call: &Call<'_>, request: &impl Message, out: &mut BytesMut) {
    let header = request_header(call.call_id, call.retry_count, call.client_id.clone());
    let engine = RequestHeaderProto {
        method_name: call.method.to_owned(),
        declaring_class_protocol_name: call.protocol.to_owned(),
        client_protocol_version: call.protocol_version,
    };
    put_frame(
        out,
        &[
            &Delimited(&header),
            &Delimited(&engine),
            &Delimited(request),
        ],
    );
}

/// A message written with its varint length, as `writeDelimitedTo` does.
struct Delimited<'a, M: Message>(&'a M);

trait Part {
    fn len(&self) -> usize;
    fn put(&self, out: &mut BytesMut);
}

impl<M: Message> Part for Delimited<'_, M> {
    fn len(&self) -> usize {
        let n = self.0.encoded_len();
        prost::encoding::encoded_len_varint(n as u64) + n
    }
    fn put(&self, out: &mut BytesMut) {
        // Infallible: `reserve` below made room.
        let _ = self.0.encode_length_delimited(out);
    }
}

fn put_frame(out: &mut BytesMut, parts: &[&dyn Part]) {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(4 + total);
    out.put_u32(total as u32);
    for p in parts {
        p.put(out);
    }
}

/// What went wrong with a response.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HrpcError {
    /// A length prefix that is zero or negative (`Client.IpcStreams.readResponse`).
    #[error("RPC response has invalid length of {0}")]
    InvalidLength(i32),
    /// A length prefix over the client's maximum (`ipc.maximum.response.length`).
    #[error("RPC response has a length of {length} exceeds maximum data length {max}")]
    TooLong {
        /// The announced length.
        length: usize,
        /// The client's maximum.
        max: usize,
    },
    /// A server older than RPC version 9 answers the connection header with length -1
    /// (`Client.IpcStreams.readResponse`): almost certainly a version mismatch.
    #[error("the server answered with a pre-version-9 error (RPC version mismatch)")]
    VersionMismatch,
    /// Bytes that are not a response: a bad varint, a length past the frame, a message that does
    /// not decode, a required field missing, bytes left over.
    #[error("malformed RPC response: {0}")]
    Malformed(&'static str),
    /// The server's exception (`RemoteException`): status ERROR (the connection goes on) or
    /// FATAL (the server closes it).
    #[error("{class}: {message}")]
    Remote {
        /// The call it answers.
        call_id: u32,
        /// `true` for FATAL.
        fatal: bool,
        /// `exceptionClassName`, or Hadoop's placeholder when absent.
        class: String,
        /// `errorMsg`, or Hadoop's placeholder when absent.
        message: String,
        /// `errorDetail` (`RpcErrorCodeProto`), if sent.
        detail: Option<i32>,
    },
}

/// The frame length announced by a response's 4-byte prefix, checked before anything is
/// allocated for it. `first` is true for a connection's first response, where -1 is a pre-v9
/// server's error.
pub fn response_length(prefix: [u8; 4], max: usize, first: bool) -> Result<usize, HrpcError> {
    let length = i32::from_be_bytes(prefix);
    if first && length == -1 {
        return Err(HrpcError::VersionMismatch);
    }
    if length <= 0 {
        return Err(HrpcError::InvalidLength(length));
    }
    let length = length as usize;
    if length > max {
        return Err(HrpcError::TooLong { length, max });
    }
    Ok(length)
}

/// A successful response: its header and the bytes of the response message (without the
/// message's varint length; decode them with the method's response type).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The response header.
    pub header: RpcResponseHeaderProto,
    /// The response message's bytes, a slice of the frame.
    pub body: Bytes,
}

/// Parses one response frame (the bytes after the 4-byte length). A response with status ERROR
/// or FATAL is [`HrpcError::Remote`]; the header's call id tells which call it answers.
pub fn parse_response(frame: Bytes) -> Result<Response, HrpcError> {
    let mut rest = frame;
    let header_bytes = take_delimited(&mut rest)?;
    if !has_fields(&header_bytes, &[1, 2]) {
        return Err(HrpcError::Malformed(
            "RpcResponseHeaderProto lacks callId or status",
        ));
    }
    let header = RpcResponseHeaderProto::decode(header_bytes)
        .map_err(|_| HrpcError::Malformed("RpcResponseHeaderProto does not decode"))?;
    match RpcStatusProto::try_from(header.status) {
        Ok(RpcStatusProto::Success) => {
            let body = take_delimited(&mut rest)?;
            if !rest.is_empty() {
                return Err(HrpcError::Malformed("RPC response length mismatch"));
            }
            Ok(Response { header, body })
        }
        Ok(status) => {
            if !rest.is_empty() {
                return Err(HrpcError::Malformed("RPC response length mismatch"));
            }
            Err(HrpcError::Remote {
                call_id: header.call_id,
                fatal: status == RpcStatusProto::Fatal,
                class: header
                    .exception_class_name
                    .unwrap_or_else(|| "ServerDidNotSetExceptionClassName".into()),
                message: header
                    .error_msg
                    .unwrap_or_else(|| "ServerDidNotSetErrorMsg".into()),
                detail: header.error_detail,
            })
        }
        Err(_) => Err(HrpcError::Malformed("unknown RpcStatusProto")),
    }
}

/// Takes a varint-delimited message off the front of `buf`, checking its length against what
/// is there.
fn take_delimited(buf: &mut Bytes) -> Result<Bytes, HrpcError> {
    let length = prost::encoding::decode_varint(buf)
        .map_err(|_| HrpcError::Malformed("bad varint length"))?;
    if length > buf.len() as u64 {
        return Err(HrpcError::Malformed(
            "message length past the end of the frame",
        ));
    }
    Ok(buf.split_to(length as usize))
}

/// Whether a well-formed message's top level has every one of `fields` (proto2 `required`,
/// which prost does not enforce). Malformed bytes answer false.
pub fn has_fields(message: &[u8], fields: &[u32]) -> bool {
    let mut seen = 0u64;
    let mut buf = message;
    while buf.has_remaining() {
        let Ok(key) = prost::encoding::decode_varint(&mut buf) else {
            return false;
        };
        let field = key >> 3;
        if field < 64 {
            seen |= 1 << field;
        }
        let skip = match key & 7 {
            0 => match prost::encoding::decode_varint(&mut buf) {
                Ok(_) => 0,
                Err(_) => return false,
            },
            1 => 8,
            2 => match prost::encoding::decode_varint(&mut buf) {
                Ok(n) => n,
                Err(_) => return false,
            },
            5 => 4,
            _ => return false,
        };
        if skip > buf.len() as u64 {
            return false;
        }
        buf.advance(skip as usize);
    }
    fields.iter().all(|&f| f < 64 && seen & (1 << f) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_id() -> Bytes {
        Bytes::from_static(&[7u8; 16])
    }

    /// Splits a frame into its delimited parts, checking the 4-byte length.
    fn parts(frame: &[u8]) -> Vec<Bytes> {
        let length = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(length, frame.len() - 4, "frame length");
        let mut rest = Bytes::copy_from_slice(&frame[4..]);
        let mut out = vec![];
        while !rest.is_empty() {
            out.push(take_delimited(&mut rest).unwrap());
        }
        out
    }

    fn success(call_id: u32, body: &impl Message) -> Bytes {
        let header = RpcResponseHeaderProto {
            call_id,
            status: RpcStatusProto::Success as i32,
            server_ipc_version_num: Some(9),
            client_id: Some(client_id()),
            ..Default::default()
        };
        let mut out = BytesMut::new();
        header.encode_length_delimited(&mut out).unwrap();
        body.encode_length_delimited(&mut out).unwrap();
        out.freeze()
    }

    #[test]
    fn connection_header_is_hrpc_9_class_auth_none() {
        assert_eq!(&connection_header(0), b"hrpc\x09\x00\x00");
    }

    #[test]
    fn connection_context_carries_call_id_minus_3_and_the_protocol() {
        let mut out = BytesMut::new();
        encode_connection_context(&client_id(), "p.Proto", "dn", &mut out);
        let p = parts(&out);
        assert_eq!(p.len(), 2);
        let header = RpcRequestHeaderProto::decode(p[0].clone()).unwrap();
        assert_eq!(header.call_id, -3);
        assert_eq!(header.retry_count, Some(-1));
        assert_eq!(header.rpc_kind, Some(2));
        assert_eq!(header.rpc_op, Some(0));
        assert_eq!(header.client_id, client_id());
        // sint32 -3 is zigzag 5: the key 0x18 then 0x05.
        assert!(p[0].windows(2).any(|w| w == [0x18, 0x05]));
        let context = IpcConnectionContextProto::decode(p[1].clone()).unwrap();
        assert_eq!(context.protocol.as_deref(), Some("p.Proto"));
        assert_eq!(
            context.user_info.unwrap().effective_user.as_deref(),
            Some("dn")
        );
    }

    #[test]
    fn call_is_three_delimited_messages_behind_the_total_length() {
        let request = RpcResponseHeaderProto {
            call_id: 99,
            ..Default::default()
        };
        let mut out = BytesMut::new();
        let id = client_id();
        let call = Call {
            call_id: 4,
            retry_count: 0,
            client_id: &id,
            method: "submitRequest",
            protocol: "org.apache.hadoop.ozone.protocol.StorageContainerDatanodeProtocol",
            protocol_version: 1,
        };
        encode_call(&call, &request, &mut out);
        let p = parts(&out);
        assert_eq!(p.len(), 3);
        let header = RpcRequestHeaderProto::decode(p[0].clone()).unwrap();
        assert_eq!((header.call_id, header.retry_count), (4, Some(0)));
        let engine = RequestHeaderProto::decode(p[1].clone()).unwrap();
        assert_eq!(engine.method_name, "submitRequest");
        assert_eq!(engine.declaring_class_protocol_name, call.protocol);
        assert_eq!(engine.client_protocol_version, 1);
        assert_eq!(
            RpcResponseHeaderProto::decode(p[2].clone()).unwrap(),
            request
        );
    }

    #[test]
    fn success_gives_the_body() {
        let body = UserInformationProto {
            effective_user: Some("x".into()),
            real_user: None,
        };
        let r = parse_response(success(5, &body)).unwrap();
        assert_eq!(r.header.call_id, 5);
        assert_eq!(UserInformationProto::decode(r.body).unwrap(), body);
    }

    #[test]
    fn error_and_fatal_are_remote_exceptions() {
        for (status, fatal) in [
            (RpcStatusProto::Error, false),
            (RpcStatusProto::Fatal, true),
        ] {
            let header = RpcResponseHeaderProto {
                call_id: 3,
                status: status as i32,
                exception_class_name: Some("java.io.IOException".into()),
                error_msg: Some("boom".into()),
                error_detail: Some(1),
                ..Default::default()
            };
            let frame = Bytes::from(header.encode_length_delimited_to_vec());
            let err = parse_response(frame).unwrap_err();
            assert_eq!(
                err,
                HrpcError::Remote {
                    call_id: 3,
                    fatal,
                    class: "java.io.IOException".into(),
                    message: "boom".into(),
                    detail: Some(1),
                }
            );
        }
    }

    #[test]
    fn lengths_are_checked_before_allocation() {
        assert_eq!(response_length([0, 0, 0, 5], 10, false), Ok(5));
        assert_eq!(
            response_length([0, 0, 0, 0], 10, false),
            Err(HrpcError::InvalidLength(0))
        );
        assert_eq!(
            response_length([0xff; 4], 10, true),
            Err(HrpcError::VersionMismatch)
        );
        assert_eq!(
            response_length([0xff; 4], 10, false),
            Err(HrpcError::InvalidLength(-1))
        );
        assert_eq!(
            response_length([0x7f, 0, 0, 0], 10, false),
            Err(HrpcError::TooLong {
                length: 0x7f00_0000,
                max: 10
            })
        );
    }

    #[test]
    fn truncated_trailing_and_headerless_frames_are_malformed() {
        let good = success(1, &UserInformationProto::default());
        for cut in 0..good.len() {
            assert!(
                matches!(
                    parse_response(good.slice(..cut)),
                    Err(HrpcError::Malformed(_))
                ),
                "cut at {cut}"
            );
        }
        let mut long = BytesMut::from(&good[..]);
        long.put_u8(0);
        assert_eq!(
            parse_response(long.freeze()),
            Err(HrpcError::Malformed("RPC response length mismatch"))
        );
        // A header without its required status.
        let frame = Bytes::from_static(&[2, 0x08, 0x01, 0]);
        assert!(matches!(
            parse_response(frame),
            Err(HrpcError::Malformed(_))
        ));
        // A varint length that never ends, and one past the end.
        assert!(parse_response(Bytes::from_static(&[0xff; 11])).is_err());
        assert!(parse_response(Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x08])).is_err());
    }

    #[test]
    fn has_fields_reads_keys_only() {
        let header = RpcResponseHeaderProto {
            call_id: 1,
            status: 0,
            error_msg: Some("m".into()),
            ..Default::default()
        };
        let bytes = header.encode_to_vec();
        // prost writes proto2 required fields even at their defaults.
        assert!(has_fields(&bytes, &[1, 2]));
        assert!(!has_fields(&bytes, &[1, 2, 4]));
        assert!(!has_fields(&[0x0a, 0x05, 1], &[1]));
        assert!(!has_fields(&[0x0b], &[1]));
    }
}

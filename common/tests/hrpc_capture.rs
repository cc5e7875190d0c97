//! `common::hrpc` against the bytes of a real exchange: a real Ozone 2.2.0 DataNode registering
//! with a real 2.2.0 SCM (`scripts/real-cluster.sh --datanodes 1`, captured on loopback with
//! tcpdump and reassembled per direction). `fixtures/scm-2.2.0-datanode-to-scm.bin` is what the
//! DataNode sent (connection header, context, GetVersion, Register, three heartbeats),
//! `fixtures/scm-2.2.0-scm-to-datanode.bin` SCM's answers (the capture ends before the last).
//!
//! Our encoder must produce the DataNode's bytes exactly from the same values, and our parser
//! must read SCM's.

use bytes::{Bytes, BytesMut};
use common::hrpc::proto::{IpcConnectionContextProto, RequestHeaderProto, RpcRequestHeaderProto};
use common::hrpc::{self, Call};
use common::scm::proto::scm_registered_response_proto::ErrorCode;
use common::scm::proto::{ScmDatanodeRequest, ScmDatanodeResponse, Status, Type};
use prost::Message;

const SENT: &[u8] = include_bytes!("fixtures/scm-2.2.0-datanode-to-scm.bin");
const ANSWERED: &[u8] = include_bytes!("fixtures/scm-2.2.0-scm-to-datanode.bin");

/// Splits a stream into frames (each with its 4-byte length).
fn frames(mut stream: &[u8]) -> Vec<&[u8]> {
    let mut out = vec![];
    while !stream.is_empty() {
        let n = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
        out.push(&stream[..4 + n]);
        stream = &stream[4 + n..];
    }
    out
}

fn parts(frame: &[u8]) -> Vec<Bytes> {
    let mut rest = Bytes::copy_from_slice(&frame[4..]);
    let mut out = vec![];
    while !rest.is_empty() {
        let n = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
        out.push(rest.split_to(n));
    }
    out
}

#[test]
fn our_encoder_writes_the_real_datanodes_bytes() {
    assert_eq!(&SENT[..7], &hrpc::connection_header(0));
    let frames = frames(&SENT[7..]);
    assert_eq!(frames.len(), 6);

    let context = parts(frames[0]);
    let header = RpcRequestHeaderProto::decode(context[0].clone()).unwrap();
    assert_eq!(header.call_id, hrpc::CONNECTION_CONTEXT_CALL_ID);
    let client_id = header.client_id.clone();
    assert_eq!(client_id.len(), 16);
    let ctx = IpcConnectionContextProto::decode(context[1].clone()).unwrap();
    assert_eq!(ctx.protocol.as_deref(), Some(common::scm::PROTOCOL));
    let user = ctx.user_info.unwrap().effective_user.unwrap();
    let mut ours = BytesMut::new();
    hrpc::encode_connection_context(&client_id, common::scm::PROTOCOL, &user, &mut ours);
    assert_eq!(&ours[..], frames[0], "connection context");

    let mut kinds = vec![];
    for frame in &frames[1..] {
        let p = parts(frame);
        assert_eq!(p.len(), 3);
        let header = RpcRequestHeaderProto::decode(p[0].clone()).unwrap();
        let engine = RequestHeaderProto::decode(p[1].clone()).unwrap();
        assert_eq!(engine.method_name, common::scm::METHOD);
        assert_eq!(engine.declaring_class_protocol_name, common::scm::PROTOCOL);
        assert_eq!(
            engine.client_protocol_version,
            common::scm::PROTOCOL_VERSION
        );
        let request = ScmDatanodeRequest::decode(p[2].clone()).unwrap();
        kinds.push(Type::try_from(request.cmd_type).unwrap());
        let mut ours = BytesMut::new();
        hrpc::encode_call(
            &Call {
                call_id: header.call_id,
                retry_count: header.retry_count.unwrap(),
                client_id: &client_id,
                method: common::scm::METHOD,
                protocol: common::scm::PROTOCOL,
                protocol_version: common::scm::PROTOCOL_VERSION,
            },
            &request,
            &mut ours,
        );
        assert_eq!(&ours[..], *frame, "{:?}", kinds.last());
    }
    assert_eq!(
        kinds,
        [
            Type::GetVersion,
            Type::Register,
            Type::SendHeartbeat,
            Type::SendHeartbeat,
            Type::SendHeartbeat
        ]
    );
}

#[test]
fn our_parser_reads_the_real_scms_answers() {
    let calls: Vec<(i32, Type, Option<String>)> = frames(&SENT[7..])[1..]
        .iter()
        .map(|f| {
            let p = parts(f);
            let header = RpcRequestHeaderProto::decode(p[0].clone()).unwrap();
            let request = ScmDatanodeRequest::decode(p[2].clone()).unwrap();
            let uuid = request
                .register_request
                .map(|r| r.extended_datanode_details.datanode_details.uuid.unwrap());
            (
                header.call_id,
                Type::try_from(request.cmd_type).unwrap(),
                uuid,
            )
        })
        .collect();
    let answers = frames(ANSWERED);
    assert_eq!(answers.len(), 5);
    for (i, (frame, (call_id, kind, uuid))) in answers.iter().zip(&calls).enumerate() {
        let length = hrpc::response_length(
            frame[..4].try_into().unwrap(),
            hrpc::DEFAULT_MAX_RESPONSE_LENGTH,
            i == 0,
        )
        .unwrap();
        assert_eq!(length, frame.len() - 4);
        let response = hrpc::parse_response(Bytes::copy_from_slice(&frame[4..])).unwrap();
        assert_eq!(response.header.call_id, *call_id as u32);
        assert_eq!(response.header.server_ipc_version_num, Some(9));
        let answer = ScmDatanodeResponse::decode(response.body).unwrap();
        assert_eq!(answer.cmd_type, *kind as i32);
        assert_eq!(answer.status, Status::Ok as i32);
        match kind {
            Type::GetVersion => {
                let v = answer.get_version_response.unwrap();
                assert!(v.keys.iter().any(|kv| kv.key == "clusterID"));
            }
            Type::Register => {
                let r = answer.register_response.unwrap();
                assert_eq!(r.error_code, ErrorCode::Success as i32);
                assert_eq!(Some(&r.datanode_uuid), uuid.as_ref());
            }
            Type::SendHeartbeat => assert!(answer.send_heartbeat_response.is_some()),
        }
    }
}

//! Arbitrary bytes as what SCM (or anything listening on its port) answers dn-sim's Hadoop RPC
//! client: the first four bytes as a frame's length prefix (`common::hrpc::response_length`,
//! checked against a 1 MiB maximum, as the first response and as a later one), the rest as a
//! response frame (`parse_response`) and, when it parses, its body as the SCM protocol's
//! `SCMDatanodeResponse`. Nothing may panic or allocate beyond the input, and a frame the parser
//! accepts must parse to the same thing again after re-encoding its header and body.
#![no_main]

use bytes::{Bytes, BytesMut};
use common::hrpc::{self, HrpcError};
use common::scm::proto::ScmDatanodeResponse;
use libfuzzer_sys::fuzz_target;
use prost::Message;

const MAX: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if let Some(prefix) = data.get(..4) {
        let prefix: [u8; 4] = prefix.try_into().unwrap();
        for first in [true, false] {
            match hrpc::response_length(prefix, MAX, first) {
                Ok(n) => assert!(n > 0 && n <= MAX),
                Err(HrpcError::VersionMismatch) => assert!(first),
                Err(_) => {}
            }
        }
    }
    let frame = Bytes::copy_from_slice(data.get(4..).unwrap_or(&[]));
    match hrpc::parse_response(frame) {
        Ok(response) => {
            let _ = ScmDatanodeResponse::decode(response.body.clone());
            let mut again = BytesMut::new();
            response.header.encode_length_delimited(&mut again).unwrap();
            prost::encoding::encode_varint(response.body.len() as u64, &mut again);
            again.extend_from_slice(&response.body);
            let reparsed = hrpc::parse_response(again.freeze()).expect("re-encoded response parses");
            assert_eq!(reparsed, response);
        }
        Err(HrpcError::Remote { .. } | HrpcError::Malformed(_)) => {}
        Err(other) => panic!("parse_response cannot fail with {other:?}"),
    }
});

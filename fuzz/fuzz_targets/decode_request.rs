//! Arbitrary bytes as a request (and, with the same bytes, a response): the proto2 required-field
//! check (`common::wire`, what `OzoneCodec` runs before prost) and prost's decode must never panic,
//! and whatever both accept must survive a round trip:
//! - decode(encode(m)) == m, and `encoded_len` is the encoding's length;
//! - the re-encoding passes the required check again (prost writes every `required` field, so a
//!   message the check let through cannot lose one on the way out).
#![no_main]

use common::proto::{ContainerCommandRequestProto, ContainerCommandResponseProto};
use common::wire::RequiredFields;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::fmt::Debug;

fn one<M: Message + Default + PartialEq + Debug + RequiredFields>(data: &[u8]) {
    let checked = M::check_required(data);
    let decoded = M::decode(data);
    if let (Ok(()), Ok(m)) = (checked, decoded) {
        let bytes = m.encode_to_vec();
        assert_eq!(bytes.len(), m.encoded_len());
        let again = M::decode(bytes.as_slice()).expect("a re-encoded message decodes");
        assert_eq!(again, m, "decode(encode(m)) != m");
        if let Err(e) = M::check_required(&bytes) {
            panic!("the re-encoding of an accepted message fails the required check: {e}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    one::<ContainerCommandRequestProto>(data);
    one::<ContainerCommandResponseProto>(data);
});

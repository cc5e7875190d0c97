//! Arbitrary bytes at the Ratis port's two decoders and its state machine's first check: as a
//! `RaftClientRequestProto` (what tonic's prost codec decodes) and as the `content` of a Raft
//! message (`common::ratis::decode_message`, Ozone's `ContainerCommandRequestMessage.toProto`).
//! Nothing may panic, and a message the decoder accepts must survive Ozone's encoding:
//! `decode(encode(m)) == m` (with `version` set as `toMessage` sets it). Every accepted command
//! then meets `ContainerStateMachine::start_transaction` over a store with an OPEN, a CLOSED and
//! no container, as a write and as a read.
#![no_main]

use bytes::Bytes;
use common::ratis::proto::common::RaftClientRequestProto;
use dn_sim::datanode::container_ids::ContainerIds;
use dn_sim::datanode::state_machine::ContainerStateMachine;
use dn_sim::datanode::store::{ContainerStore, StoreKind};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::sync::OnceLock;

const GROUP: u128 = 0x9858;

fn store() -> &'static ContainerStore {
    static STORE: OnceLock<ContainerStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let store = ContainerStore::new(StoreKind::Discard, 1 << 30, None).unwrap();
        store.precreate(&"1-2".parse::<ContainerIds>().unwrap());
        store.get(2).unwrap().close("dn").unwrap();
        store
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = RaftClientRequestProto::decode(data);
    let content = Bytes::copy_from_slice(data);
    let group = uuid::Uuid::from_u128(GROUP);
    let Ok(request) = common::ratis::decode_message(&content, Some(group)) else {
        return;
    };
    let again = common::ratis::decode_message(&common::ratis::encode_message(&request), Some(group))
        .expect("Ozone's encoding of an accepted message decodes");
    let mut expected = request.clone();
    expected
        .version
        .get_or_insert(common::ratis::CLIENT_VERSION_CURRENT);
    assert_eq!(again, expected, "decode(encode(m)) != m");
    let sm = ContainerStateMachine::new(group, "dn", "127.0.0.1:9858".into());
    let _ = sm.start_transaction(store(), &request, false);
    let _ = sm.start_transaction(store(), &request, true);
});

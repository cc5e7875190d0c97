//! The SCM–DataNode protocol of Ozone 2.2.0 (`ScmServerDatanodeHeartbeatProtocol.proto` with
//! `hdds.proto`): the generated messages and the names a call carries over Hadoop RPC
//! (`crate::hrpc`). One method, `submitRequest(SCMDatanodeRequest)`, whose `cmdType` is
//! GetVersion, Register or SendHeartbeat.

#[allow(
    non_camel_case_types,
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all
)]
pub mod proto {
    //! `proto/hdds/`: `hdds.proto` and `ScmServerDatanodeHeartbeatProtocol.proto` (package
    //! `hadoop.hdds`), as Ozone 2.2.0 ships them.
    include!(concat!(env!("OUT_DIR"), "/hadoop.hdds.rs"));
}

/// `StorageContainerDatanodeProtocolPB`'s `@ProtocolInfo.protocolName`.
pub const PROTOCOL: &str = "org.apache.hadoop.ozone.protocol.StorageContainerDatanodeProtocol";
/// `StorageContainerDatanodeProtocolPB`'s `@ProtocolInfo.protocolVersion`.
pub const PROTOCOL_VERSION: u64 = 1;
/// The protocol's one method.
pub const METHOD: &str = "submitRequest";
/// SCM's DataNode port, `ozone.scm.datanode.port`.
pub const DEFAULT_DATANODE_PORT: u16 = 9861;
/// `HDDSLayoutFeature`'s latest in Ozone 2.2.0 (`STORAGE_SPACE_DISTRIBUTION`, 10): SCM registers
/// a DataNode only with its own software layout version, and a finalized DataNode's metadata
/// layout version equals it (else SCM keeps it HEALTHY_READONLY).
pub const LAYOUT_VERSION: u32 = 10;
/// `hdds.heartbeat.interval`'s default: 30 s.
pub const DEFAULT_HEARTBEAT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::proto::*;
    use prost::Message as _;

    /// Field numbers on the wire, as SCM parses them: a Register request's pieces.
    #[test]
    fn register_request_golden_bytes() {
        let port = Port {
            name: "STANDALONE".into(),
            value: 9859,
        };
        // name = 1 (string), value = 2 (varint: 9859 = 0x83 0x4d)
        assert_eq!(
            port.encode_to_vec(),
            b"\x0a\x0aSTANDALONE\x10\x83\x4d".to_vec()
        );
        let layout = LayoutVersionProto {
            metadata_layout_version: 10,
            software_layout_version: 10,
        };
        assert_eq!(layout.encode_to_vec(), vec![0x08, 10, 0x10, 10]);
        let request = ScmDatanodeRequest {
            cmd_type: Type::GetVersion as i32,
            get_version_request: Some(ScmVersionRequestProto {}),
            ..Default::default()
        };
        // cmdType = 1, getVersionRequest = 3 (empty message)
        assert_eq!(request.encode_to_vec(), vec![0x08, 0x01, 0x1a, 0x00]);
    }
}

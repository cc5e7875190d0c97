//! Types generated from `proto/DatanodeClientProtocol.proto` (package `hadoop.hdds.datanode`), plus
//! small helpers over them.

#[allow(
    non_camel_case_types,
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/hadoop.hdds.datanode.rs"));
}

pub use generated::*;

/// Full gRPC path of the one method the DataNode serves on its client port.
pub const SEND_PATH: &str = "/hadoop.hdds.datanode.XceiverClientProtocolService/send";

impl Type {
    /// Lower snake case of the type name, as Hadoop metrics2 renders it in Prometheus names
    /// (`WriteChunk` → `write_chunk`, `GetCommittedBlockLength` → `get_committed_block_length`).
    pub fn snake_name(self) -> String {
        camel_to_snake(self.as_str_name())
    }
}

/// `WriteChunk` → `write_chunk`.
pub fn camel_to_snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn hex(b: &[u8]) -> String {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Golden bytes computed by hand from Ozone's field table (and answered by a real DataNode in
    /// the conformance suite).
    #[test]
    fn echo_request_golden_bytes() {
        let req = ContainerCommandRequestProto {
            cmd_type: Type::Echo as i32,
            container_id: 1,
            datanode_uuid: "x".into(),
            echo: Some(EchoRequestProto {
                payload_size_resp: Some(10),
                read_only: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            hex(&req.encode_to_vec()),
            "08 16 18 01 22 01 78 d2 01 04 10 0a 20 01"
        );
    }

    /// WriteChunk with a ChunkInfo carrying ChecksumData. Bytes derived by hand from the field
    /// numbers of Ozone's DatanodeClientProtocol.proto:
    /// - 08 0c: cmdType(1) = WriteChunk(12); 18 05: containerID(3) = 5; 22 02 64 6e: datanodeUuid "dn"
    /// - 8a 01 LEN: writeChunk(17), tag (17<<3|2)=138 → 8a 01
    ///   - 0a 04 08 05 10 07: blockID(1){containerID=5, localID=7}
    ///   - 12 LEN: chunkData(2){ 0a 03 "c_0" chunkName; 10 00 offset 0; 18 04 len 4;
    ///     2a 0a checksumData(5){ 08 02 type CRC32; 10 04 bytesPerChecksum 4; 1a 04 checksum } }
    ///   - 1a 04 "abcd": data(3)
    #[test]
    fn write_chunk_request_golden_bytes() {
        let req = ContainerCommandRequestProto {
            cmd_type: Type::WriteChunk as i32,
            container_id: 5,
            datanode_uuid: "dn".into(),
            write_chunk: Some(WriteChunkRequestProto {
                block_id: DatanodeBlockId {
                    container_id: 5,
                    local_id: 7,
                    ..Default::default()
                },
                chunk_data: Some(ChunkInfo {
                    chunk_name: "c_0".into(),
                    offset: 0,
                    len: 4,
                    checksum_data: ChecksumData {
                        r#type: ChecksumType::Crc32 as i32,
                        bytes_per_checksum: 4,
                        checksums: vec![bytes::Bytes::from_static(&[0xed, 0x82, 0xcd, 0x11])],
                    },
                    ..Default::default()
                }),
                data: Some(bytes::Bytes::from_static(b"abcd")),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            hex(&req.encode_to_vec()),
            "08 0c 18 05 22 02 64 6e 8a 01 23 0a 04 08 05 10 07 12 15 0a 03 63 5f 30 10 00 18 04 \
             2a 0a 08 02 10 04 1a 04 ed 82 cd 11 1a 04 61 62 63 64"
        );
    }

    /// PutBlock response: cmdType(1)=PutBlock(6), traceID(2)="", result(3)=SUCCESS(1),
    /// putBlock(11){ committedBlockLength(1){ blockID(1){1, 2}, blockLength(2)=1024 (80 08) } }.
    #[test]
    fn put_block_response_golden_bytes() {
        let resp = ContainerCommandResponseProto {
            cmd_type: Type::PutBlock as i32,
            trace_id: Some(String::new()),
            result: Result::Success as i32,
            put_block: Some(PutBlockResponseProto {
                committed_block_length: GetCommittedBlockLengthResponseProto {
                    block_id: DatanodeBlockId {
                        container_id: 1,
                        local_id: 2,
                        ..Default::default()
                    },
                    block_length: 1024,
                },
            }),
            ..Default::default()
        };
        assert_eq!(
            hex(&resp.encode_to_vec()),
            "08 06 12 00 18 01 5a 0b 0a 09 0a 04 08 01 10 02 10 80 08"
        );
    }

    #[test]
    fn snake_names_match_hadoop_metrics() {
        assert_eq!(Type::Echo.snake_name(), "echo");
        assert_eq!(Type::WriteChunk.snake_name(), "write_chunk");
        assert_eq!(
            Type::GetCommittedBlockLength.snake_name(),
            "get_committed_block_length"
        );
    }
}

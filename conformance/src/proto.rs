//! The protocol seen through reflection: scenario JSON → request bytes, response bytes → JSON.
//!
//! The descriptors come from `proto/DatanodeClientProtocol.proto`, compiled by `build.rs`.
//! Requests are built as prost-reflect `DynamicMessage`s from the protobuf JSON mapping and encoded
//! without any proto2 `required` check (scenarios omit required fields on purpose). Responses are
//! decoded the same way and rendered with JSON names, listing only the fields present on the wire,
//! so "absent" and "set to the default" stay apart.

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MapKey, MessageDescriptor, Value,
};
use serde_json::{Map, Value as Json};
use std::sync::OnceLock;

static FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/datanode.fds"));

pub const REQUEST: &str = "hadoop.hdds.datanode.ContainerCommandRequestProto";
pub const RESPONSE: &str = "hadoop.hdds.datanode.ContainerCommandResponseProto";

/// The descriptors of `DatanodeClientProtocol.proto`.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("build.rs wrote a valid descriptor set")
    })
}

fn message(name: &str) -> MessageDescriptor {
    pool()
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} is in the proto"))
}

pub fn request_descriptor() -> MessageDescriptor {
    message(REQUEST)
}

pub fn response_descriptor() -> MessageDescriptor {
    message(RESPONSE)
}

/// Encodes a request given in the protobuf JSON mapping (placeholders already substituted).
/// Unknown field names and enum names are errors; unknown enum numbers are encoded as given;
/// required fields are not enforced.
pub fn encode_request(json: &Json) -> anyhow::Result<Vec<u8>> {
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let msg = DynamicMessage::deserialize_with_options(request_descriptor(), json, &options)
        .context("not a ContainerCommandRequestProto in the protobuf JSON mapping")?;
    Ok(msg.encode_to_vec())
}

/// Decodes a response into JSON: JSON field names, only fields present on the wire, 64-bit
/// integers as strings, bytes as base64, enums by name (by number when the proto has no such
/// value), unknown fields as `"#<number>": "<unknown field, N bytes>"`.
pub fn decode_response(bytes: &[u8]) -> Result<Json, prost::DecodeError> {
    let msg = DynamicMessage::decode(response_descriptor(), bytes)?;
    Ok(message_to_json(&msg))
}

/// A `DynamicMessage` as JSON (see [`decode_response`]).
pub fn message_to_json(msg: &DynamicMessage) -> Json {
    let mut map = Map::new();
    for (field, value) in msg.fields() {
        map.insert(
            field.json_name().to_string(),
            value_to_json(value, &field.kind()),
        );
    }
    for unknown in msg.unknown_fields() {
        map.insert(
            format!("#{}", unknown.number()),
            Json::String(format!("<unknown field, {} bytes>", unknown.encoded_len())),
        );
    }
    Json::Object(map)
}

fn value_to_json(value: &Value, kind: &Kind) -> Json {
    match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::I64(n) => Json::String(n.to_string()),
        Value::U64(n) => Json::String(n.to_string()),
        Value::F32(f) => serde_json::Number::from_f64(f64::from(*f))
            .map_or_else(|| Json::String(f.to_string()), Json::Number),
        Value::F64(f) => serde_json::Number::from_f64(*f)
            .map_or_else(|| Json::String(f.to_string()), Json::Number),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(BASE64.encode(b)),
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => e
                .get_value(*n)
                .map_or_else(|| Json::from(*n), |v| Json::String(v.name().to_string())),
            _ => Json::from(*n),
        },
        Value::Message(m) => message_to_json(m),
        Value::List(items) => Json::Array(items.iter().map(|v| value_to_json(v, kind)).collect()),
        Value::Map(entries) => {
            let value_kind = match kind {
                Kind::Message(m) if m.is_map_entry() => m.map_entry_value_field().kind(),
                other => other.clone(),
            };
            let mut map = Map::new();
            for (key, value) in entries {
                let key = match key {
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                    MapKey::String(s) => s.clone(),
                };
                map.insert(key, value_to_json(value, &value_kind));
            }
            Json::Object(map)
        }
    }
}

/// The name of a `Result` enum value, for summaries (`"SUCCESS"`, or the number).
pub fn result_name(json: &Json) -> String {
    match json {
        Json::String(s) => s.clone(),
        Json::Null => "(no result)".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::proto::{ContainerCommandRequestProto, EchoRequestProto, Type};
    use serde_json::json;

    #[test]
    fn echo_request_encodes_like_the_generated_type() {
        let bytes = encode_request(&json!({
            "cmdType": "Echo", "containerID": 1, "datanodeUuid": "x",
            "echo": {"payloadSizeResp": 10, "readOnly": true}
        }))
        .unwrap();
        let expected = ContainerCommandRequestProto {
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
        assert_eq!(bytes, expected.encode_to_vec());
    }

    #[test]
    fn required_fields_are_not_enforced_and_unknown_enum_numbers_encode() {
        // cmdType 99 (no such Type), no containerID, no datanodeUuid.
        let bytes = encode_request(&json!({"cmdType": 99})).unwrap();
        assert_eq!(bytes, vec![0x08, 99]);
        assert!(encode_request(&json!({})).unwrap().is_empty());
        // int64 as a string
        let bytes = encode_request(&json!({"containerID": "300"})).unwrap();
        assert_eq!(bytes, vec![0x18, 0xac, 0x02]);
    }

    #[test]
    fn unknown_names_are_errors() {
        assert!(encode_request(&json!({"cmdTyp": "Echo"})).is_err());
        assert!(encode_request(&json!({"cmdType": "Ekko"})).is_err());
    }

    #[test]
    fn responses_show_presence_not_defaults() {
        // cmdType=Echo, result=SUCCESS, traceID="" (present but empty), echo{payload=""}
        let bytes = [0x08, 22, 0x12, 0, 0x18, 1, 0xba, 0x01, 2, 0x0a, 0];
        let json = decode_response(&bytes).unwrap();
        assert_eq!(
            json,
            json!({"cmdType": "Echo", "traceID": "", "result": "SUCCESS", "echo": {"payload": ""}})
        );
        // result absent, cmdType unknown number, an unknown field 50 (varint)
        let json = decode_response(&[0x08, 99, 0x90, 0x03, 1]).unwrap();
        assert_eq!(
            json,
            json!({"cmdType": 99, "#50": "<unknown field, 3 bytes>"})
        );
    }
}

//! Normalisation of answers before they are compared: every rule that hides what legitimately
//! differs between two DataNodes (random payloads, local paths, ids, clocks) lives here.
//!
//! Rules, applied to an answer's JSON (see [`normalize_answer`]):
//! - `echo.payload` (the `payload` of an `EchoResponseProto`) → `"<N bytes>"`: its content is random.
//! - any other bytes field longer than [`MAX_LITERAL_BYTES`] → `"<N bytes sha256:XXXXXXXXXXXX>"`
//!   (the first 12 hex digits of its SHA-256); shorter ones stay base64.
//! - in every string (and every 64-bit integer, which the JSON mapping renders as a string):
//!   UUIDs → `<uuid>`; absolute paths with at least two components → `<path>`; decimal numbers of
//!   12 or more digits that are plausible millisecond timestamps (years 2000–2099) → `<time>`.
//! - in a `containerData` object: `containerPath`, `dbPath`, `originNodeId`, `originPipelineId`
//!   → `<local>`.
//!
//! Prometheus answers are normalised when they are built (`prom.rs`), not here.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost_reflect::{Kind, MessageDescriptor};
use regex::Regex;
use serde_json::Value as Json;
use sha2::Digest as _;
use std::sync::OnceLock;

/// Bytes fields up to this length are kept (base64); longer ones become a length and a hash.
pub const MAX_LITERAL_BYTES: usize = 64;

/// `containerData` fields that name local things (paths, node and pipeline ids).
pub const LOCAL_CONTAINER_FIELDS: [&str; 4] = [
    "containerPath",
    "dbPath",
    "originNodeId",
    "originPipelineId",
];

/// Millisecond timestamps from 2000-01-01 (inclusive) to 2100-01-01 (exclusive).
const TIME_MS_RANGE: std::ops::Range<u64> = 946_684_800_000..4_102_444_800_000;

const ECHO_RESPONSE: &str = "hadoop.hdds.datanode.EchoResponseProto";

struct Patterns {
    uuid: Regex,
    path: Regex,
    number: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        uuid: Regex::new(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
            .unwrap(),
        // A path starts the string or follows a space or a delimiter, and has ≥ 2 components.
        path: Regex::new(r#"(^|[\s=:,;(\[{"'])((?:/[\w.\-+~@<>]+){2,}/?)"#).unwrap(),
        number: Regex::new(r"\b\d{12,}\b").unwrap(),
    })
}

/// Whether `s` is a UUID in the usual 8-4-4-4-12 hex form.
pub fn is_uuid(s: &str) -> bool {
    patterns()
        .uuid
        .find(s)
        .is_some_and(|m| m.start() == 0 && m.end() == s.len())
}

/// The string rules: UUIDs, absolute paths and millisecond timestamps.
pub fn normalize_string(s: &str) -> String {
    let p = patterns();
    let s = p.uuid.replace_all(s, "<uuid>");
    let s = p.path.replace_all(&s, "${1}<path>");
    let s = p.number.replace_all(&s, |caps: &regex::Captures<'_>| {
        let digits = &caps[0];
        match digits.parse::<u64>() {
            Ok(n) if TIME_MS_RANGE.contains(&n) => "<time>".to_string(),
            _ => digits.to_string(),
        }
    });
    s.into_owned()
}

/// `"<N bytes>"`.
pub fn bytes_length(len: usize) -> String {
    format!("<{len} bytes>")
}

/// `"<N bytes sha256:XXXXXXXXXXXX>"`.
pub fn bytes_digest(data: &[u8]) -> String {
    let digest = sha2::Sha256::digest(data);
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("<{} bytes sha256:{hex}>", data.len())
}

/// The bytes rule for a value that is not an echo payload: kept as base64 up to
/// [`MAX_LITERAL_BYTES`], a length and a hash beyond.
pub fn normalize_bytes(data: &[u8]) -> Json {
    if data.len() > MAX_LITERAL_BYTES {
        Json::String(bytes_digest(data))
    } else {
        Json::String(BASE64.encode(data))
    }
}

/// Normalises one answer (`{"response": …}`, `{"status": …}`, `{"no_answer": …}`, `{"prom": …}`,
/// `{"undecodable": …}`, `{"raft_reply": …}`), returning the normalised copy.
pub fn normalize_answer(answer: &Json) -> Json {
    let mut out = answer.clone();
    if let Some(obj) = out.as_object_mut() {
        for (key, value) in obj.iter_mut() {
            match key.as_str() {
                "response" => normalize_message(&crate::proto::response_descriptor(), value, false),
                "raft_reply" => normalize_raft_reply(value),
                "prom" => {}
                _ => normalize_untyped(value),
            }
        }
    }
    out
}

/// A Raft reply (`crate::ratis`, ids and indexes already shown as `$DN`, `$BASE+k`, …): the
/// container command's answer it carries as any answer, the rest by the string rules.
fn normalize_raft_reply(reply: &mut Json) {
    let message = reply.as_object_mut().and_then(|o| o.remove("message"));
    normalize_untyped(reply);
    if let (Some(mut message), Some(obj)) = (message, reply.as_object_mut()) {
        message = normalize_answer(&message);
        obj.insert("message".into(), message);
    }
}

/// Normalises a message's JSON (as `proto::message_to_json` renders it) in place, guided by its
/// descriptor. `container_data` says the object is a `containerData` value.
pub fn normalize_message(desc: &MessageDescriptor, json: &mut Json, container_data: bool) {
    let Some(obj) = json.as_object_mut() else {
        normalize_untyped(json);
        return;
    };
    for (key, value) in obj.iter_mut() {
        if container_data && LOCAL_CONTAINER_FIELDS.contains(&key.as_str()) {
            *value = Json::String("<local>".into());
            continue;
        }
        let Some(field) = desc.get_field_by_json_name(key) else {
            normalize_untyped(value);
            continue;
        };
        let kind = field.kind();
        let is_echo_payload = desc.full_name() == ECHO_RESPONSE && field.name() == "payload";
        let child_container_data = key == "containerData";
        for_each_item(value, &mut |item| match &kind {
            Kind::Bytes => {
                if let Json::String(b64) = item {
                    match BASE64.decode(b64.as_bytes()) {
                        Ok(data) if is_echo_payload => {
                            *item = Json::String(bytes_length(data.len()))
                        }
                        Ok(data) => *item = normalize_bytes(&data),
                        Err(_) => {}
                    }
                }
            }
            Kind::Message(m) => normalize_message(m, item, child_container_data),
            _ => normalize_untyped(item),
        });
    }
}

/// Applies `f` to a value, or to each element of an array value (repeated fields).
fn for_each_item(value: &mut Json, f: &mut dyn FnMut(&mut Json)) {
    match value {
        Json::Array(items) => items.iter_mut().for_each(f),
        other => f(other),
    }
}

/// The string rules on every string inside `json`.
pub fn normalize_untyped(json: &mut Json) {
    match json {
        Json::String(s) => *s = normalize_string(s),
        Json::Array(items) => items.iter_mut().for_each(normalize_untyped),
        Json::Object(obj) => {
            for (key, value) in obj.iter_mut() {
                if key == "containerData" {
                    for_each_item(value, &mut |item| {
                        if let Some(o) = item.as_object_mut() {
                            for k in LOCAL_CONTAINER_FIELDS {
                                if let Some(v) = o.get_mut(k) {
                                    *v = Json::String("<local>".into());
                                }
                            }
                        }
                    });
                }
                normalize_untyped(value);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uuids_paths_and_timestamps_in_strings() {
        assert_eq!(
            normalize_string(
                "DN 3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab is not 3F2B8C1E-9A4D-4E1B-8F0A-1234567890AB"
            ),
            "DN <uuid> is not <uuid>"
        );
        assert_eq!(
            normalize_string(
                "Unable to find the chunk file. chunk info : /data/hdds/hdds/CID-x/current/containerDir0/5/chunks/1.block"
            ),
            "Unable to find the chunk file. chunk info : <path>"
        );
        assert_eq!(normalize_string("/tmp/a"), "<path>");
        assert_eq!(normalize_string("path=/var/lib/ozone/"), "path=<path>");
        assert_eq!(normalize_string("(/a/b/c.db)"), "(<path>)");
        // not paths: one component, relative, inside a URL or a unit
        assert_eq!(normalize_string("/tmp"), "/tmp");
        assert_eq!(normalize_string("a/b/c"), "a/b/c");
        assert_eq!(
            normalize_string("http://host:9882/prom"),
            "http://host:9882/prom"
        );
        assert_eq!(normalize_string("20 MB/s"), "20 MB/s");
        // a uuid inside a path is still a path
        assert_eq!(
            normalize_string("/data/3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab/current"),
            "<path>"
        );
        // millisecond timestamps of 2000..2099 only
        assert_eq!(normalize_string("at 1764576000000 ms"), "at <time> ms");
        assert_eq!(normalize_string("1764576000000"), "<time>");
        assert_eq!(normalize_string("946684800000"), "<time>");
        assert_eq!(normalize_string("946684799999"), "946684799999");
        assert_eq!(normalize_string("111677748019200001"), "111677748019200001");
        assert_eq!(
            normalize_string("ContainerID 5 does not exist"),
            "ContainerID 5 does not exist"
        );
        assert_eq!(normalize_string("12345678901"), "12345678901");
        assert!(is_uuid("3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab"));
        assert!(!is_uuid("x3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab"));
    }

    #[test]
    fn bytes_rules() {
        assert_eq!(bytes_length(10), "<10 bytes>");
        assert_eq!(normalize_bytes(b"abc"), json!("YWJj"));
        assert_eq!(normalize_bytes(&[0u8; 64]), json!(BASE64.encode([0u8; 64])));
        // sha256 of 65 zero bytes starts with 98ce42deef51
        let long = normalize_bytes(&[0u8; 65]);
        let text = long.as_str().unwrap();
        assert!(text.starts_with("<65 bytes sha256:"), "{text}");
        assert_eq!(text.len(), "<65 bytes sha256:".len() + 12 + 1);
        assert_eq!(bytes_digest(b""), "<0 bytes sha256:e3b0c44298fc>");
    }

    #[test]
    fn answers_by_their_descriptor() {
        let payload = BASE64.encode([7u8; 10]);
        let clientid = BASE64.encode([1u8; 100]);
        let answer = json!({"response": {
            "cmdType": "Echo", "result": "SUCCESS", "traceID": "trace-3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab",
            "echo": {"payload": payload}, "clientId": clientid,
            "message": "ContainerID 5 does not exist",
            "readContainer": {"containerData": {"containerID": "5", "containerPath": "/data/x/5",
                "bytesUsed": "1764576000000", "#12": "<unknown field, 3 bytes>"}}
        }});
        let n = normalize_answer(&answer);
        let r = &n["response"];
        assert_eq!(r["echo"]["payload"], "<10 bytes>");
        assert_eq!(r["traceID"], "trace-<uuid>");
        assert!(
            r["clientId"]
                .as_str()
                .unwrap()
                .starts_with("<100 bytes sha256:")
        );
        assert_eq!(r["message"], "ContainerID 5 does not exist");
        let cd = &r["readContainer"]["containerData"];
        assert_eq!(cd["containerPath"], "<local>");
        assert_eq!(cd["containerID"], "5");
        assert_eq!(cd["bytesUsed"], "<time>");
        assert_eq!(cd["#12"], "<unknown field, 3 bytes>");
        // an empty payload is "<0 bytes>", which tells it from an absent one
        let n = normalize_answer(&json!({"response": {"echo": {"payload": ""}}}));
        assert_eq!(n["response"]["echo"]["payload"], "<0 bytes>");
        let n = normalize_answer(&json!({"response": {"echo": {}}}));
        assert_eq!(n["response"]["echo"], json!({}));
    }

    #[test]
    fn repeated_bytes_and_statuses() {
        let big = BASE64.encode([9u8; 100]);
        let answer =
            json!({"response": {"readChunk": {"dataBuffers": {"buffers": [big, "AQI="]}}}});
        let n = normalize_answer(&answer);
        let buffers = n["response"]["readChunk"]["dataBuffers"]["buffers"]
            .as_array()
            .unwrap();
        assert!(
            buffers[0]
                .as_str()
                .unwrap()
                .starts_with("<100 bytes sha256:")
        );
        assert_eq!(buffers[1], "AQI=");
        let n = normalize_answer(&json!({"status": {"code": "INTERNAL",
            "message": "Invalid protobuf byte sequence at /tmp/x/y"}}));
        assert_eq!(
            n,
            json!({"status": {"code": "INTERNAL", "message": "Invalid protobuf byte sequence at <path>"}})
        );
        // untyped containerData (an unknown message) still hides local fields
        let mut v = json!({"containerData": [{"dbPath": "/a/b", "originNodeId": "n1"}]});
        normalize_untyped(&mut v);
        assert_eq!(
            v,
            json!({"containerData": [{"dbPath": "<local>", "originNodeId": "<local>"}]})
        );
        // prom answers are left alone
        let p = json!({"prom": {"x": "3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab"}});
        assert_eq!(normalize_answer(&p), p);
    }
}

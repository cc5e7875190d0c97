//! Placeholders in scenario requests, substituted before the JSON is decoded into a message.
//!
//! In any string value:
//! - `$C1` … `$C9`: the scenario's pre-created OPEN containers (distinct, never reused);
//! - `$NEW1` … `$NEW9`: container IDs that exist nowhere (never reused);
//! - `$DN`: the target's DataNode UUID; `$OTHER_UUID`: a fixed UUID that is no DataNode's;
//! - `$PIPELINE`: the target's pipeline (its Raft group on the Ratis port).
//!
//! As a whole string value:
//! - `$bytes:N` / `$bytes:N:S`: N bytes of the deterministic pattern [`pattern`] (seed S, default
//!   0), as base64;
//! - in a `checksumData` object, `"checksums": "$checksums"`: the correct Ozone checksums of the
//!   request's data (`writeChunk.data` or `putSmallFile.data`) for the object's `type` and
//!   `bytesPerChecksum`. Modifiers, `:`-separated after `$checksums`: `wrong` (every checksum's
//!   first byte flipped), `short` (one checksum fewer), `bytes:N[:S]` (checksums of that pattern
//!   instead of the request's data, e.g. for a PutBlock or ReadChunk naming a chunk written before).

use anyhow::{Context as _, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::proto::ChecksumType;
use regex::Regex;
use serde_json::Value as Json;
use std::sync::OnceLock;

/// A UUID that is not the DataNode's (for `$OTHER_UUID`).
pub const OTHER_UUID: &str = "0badc0de-0000-4000-8000-00000000beef";

/// The largest `$bytes:N`.
pub const MAX_PATTERN_BYTES: usize = 256 << 20;

/// What one scenario is given on one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bindings {
    /// `$C1`, `$C2`, …
    pub containers: Vec<u64>,
    /// `$NEW1`, `$NEW2`, …
    pub new_containers: Vec<u64>,
    /// `$DN`
    pub datanode_uuid: String,
    /// `$PIPELINE` (empty when the target names none)
    pub pipeline: String,
}

/// How many `$Ck` and `$NEWk` a scenario uses (the highest k of each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    pub containers: usize,
    pub new_containers: usize,
}

impl Needs {
    pub fn max(self, other: Needs) -> Needs {
        Needs {
            containers: self.containers.max(other.containers),
            new_containers: self.new_containers.max(other.new_containers),
        }
    }
}

fn token() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"\$([A-Z][A-Z_0-9]*)").unwrap())
}

enum Token {
    Container(usize),
    New(usize),
    Dn,
    OtherUuid,
    Pipeline,
}

fn parse_token(name: &str) -> Option<Token> {
    let index = |digits: &str| match digits.parse::<usize>() {
        Ok(k @ 1..=9) if digits.len() == 1 => Some(k),
        _ => None,
    };
    match name {
        "DN" => Some(Token::Dn),
        "OTHER_UUID" => Some(Token::OtherUuid),
        "PIPELINE" => Some(Token::Pipeline),
        _ => {
            if let Some(d) = name.strip_prefix("NEW") {
                index(d).map(Token::New)
            } else if let Some(d) = name.strip_prefix('C') {
                index(d).map(Token::Container)
            } else {
                None
            }
        }
    }
}

/// The `$Ck` / `$NEWk` a JSON value uses; an unknown `$NAME` is an error.
pub fn needs(json: &Json) -> anyhow::Result<Needs> {
    let mut needs = Needs::default();
    let mut error = None;
    visit_strings(json, &mut |s| {
        for caps in token().captures_iter(s) {
            match parse_token(&caps[1]) {
                Some(Token::Container(k)) => needs.containers = needs.containers.max(k),
                Some(Token::New(k)) => needs.new_containers = needs.new_containers.max(k),
                Some(_) => {}
                None => error = Some(anyhow!("unknown placeholder ${} in {s:?}", &caps[1])),
            }
        }
    });
    match error {
        Some(e) => Err(e),
        None => Ok(needs),
    }
}

fn visit_strings(json: &Json, f: &mut dyn FnMut(&str)) {
    match json {
        Json::String(s) => f(s),
        Json::Array(items) => items.iter().for_each(|v| visit_strings(v, f)),
        Json::Object(obj) => obj.values().for_each(|v| visit_strings(v, f)),
        _ => {}
    }
}

/// Byte `i` of the pattern with seed `seed`: `(i * 31 + 7 + seed * 101) % 251` (seed 0:
/// `(i * 31 + 7) % 251`).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let offset = (7 + seed.wrapping_mul(101) % 251) % 251;
    let mut value = offset; // (i * 31 + offset) % 251, kept incrementally
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        out.push(value as u8);
        value = (value + 31) % 251;
    }
    out
}

/// Parses `$bytes:N` or `$bytes:N:S` (the part after `$bytes:`).
fn parse_bytes_spec(spec: &str) -> anyhow::Result<(usize, u64)> {
    let mut parts = spec.split(':');
    let len: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .with_context(|| format!("$bytes:{spec}: N is not a byte count"))?;
    if len > MAX_PATTERN_BYTES {
        bail!("$bytes:{spec}: at most {MAX_PATTERN_BYTES} bytes");
    }
    let seed = match parts.next() {
        Some(s) => s
            .parse()
            .with_context(|| format!("$bytes:{spec}: S is not a number"))?,
        None => 0,
    };
    if parts.next().is_some() {
        bail!("$bytes:{spec}: expected $bytes:N or $bytes:N:S");
    }
    Ok((len, seed))
}

/// Substitutes every placeholder of `json` (a request) with `bindings`.
pub fn substitute(json: &Json, bindings: &Bindings) -> anyhow::Result<Json> {
    let mut out = json.clone();
    substitute_strings(&mut out, bindings)?;
    let data = request_data(&out)?;
    fill_checksums(&mut out, data.as_deref())?;
    Ok(out)
}

fn substitute_strings(json: &mut Json, b: &Bindings) -> anyhow::Result<()> {
    match json {
        Json::String(s) => {
            if let Some(spec) = s.strip_prefix("$bytes:") {
                let (len, seed) = parse_bytes_spec(spec)?;
                *s = BASE64.encode(pattern(len, seed));
            } else if s.starts_with("$checksums") {
                // filled in by fill_checksums, which also rejects it outside checksumData
            } else {
                *s = substitute_tokens(s, b)?;
            }
        }
        Json::Array(items) => {
            for v in items {
                substitute_strings(v, b)?;
            }
        }
        Json::Object(obj) => {
            for v in obj.values_mut() {
                substitute_strings(v, b)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn substitute_tokens(s: &str, b: &Bindings) -> anyhow::Result<String> {
    let mut error = None;
    let pick = |ids: &[u64], k: usize, what: &str| {
        ids.get(k - 1)
            .map(|id| id.to_string())
            .ok_or_else(|| anyhow!("{what}{k} was not allocated"))
    };
    let out = token().replace_all(s, |caps: &regex::Captures<'_>| {
        let value = match parse_token(&caps[1]) {
            Some(Token::Container(k)) => pick(&b.containers, k, "$C"),
            Some(Token::New(k)) => pick(&b.new_containers, k, "$NEW"),
            Some(Token::Dn) => Ok(b.datanode_uuid.clone()),
            Some(Token::OtherUuid) => Ok(OTHER_UUID.to_string()),
            Some(Token::Pipeline) => Ok(b.pipeline.clone()),
            None => Err(anyhow!("unknown placeholder ${} in {s:?}", &caps[1])),
        };
        value.unwrap_or_else(|e| {
            error.get_or_insert(e);
            String::new()
        })
    });
    match error {
        Some(e) => Err(e),
        None => Ok(out.into_owned()),
    }
}

/// The data a plain `$checksums` refers to: `writeChunk.data` or `putSmallFile.data`.
fn request_data(json: &Json) -> anyhow::Result<Option<Vec<u8>>> {
    for (parent, field) in [("writeChunk", "data"), ("putSmallFile", "data")] {
        if let Some(Json::String(b64)) = json.get(parent).and_then(|p| p.get(field)) {
            let data = BASE64
                .decode(b64.as_bytes())
                .with_context(|| format!("{parent}.{field} is not base64"))?;
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// The checksum list `$checksums…` stands for.
pub fn checksums_for(
    spec: &str,
    kind: &Json,
    bytes_per_checksum: &Json,
    request_data: Option<&[u8]>,
) -> anyhow::Result<Vec<Vec<u8>>> {
    let rest = spec
        .strip_prefix("$checksums")
        .ok_or_else(|| anyhow!("{spec:?} is not $checksums…"))?;
    let (mut wrong, mut short, mut explicit) = (false, false, None);
    let mut tokens = rest.split(':').skip(1);
    if !rest.is_empty() && !rest.starts_with(':') {
        bail!("{spec:?}: expected $checksums[:wrong][:short][:bytes:N[:S]]");
    }
    while let Some(t) = tokens.next() {
        match t {
            "wrong" => wrong = true,
            "short" => short = true,
            "bytes" => {
                let len = tokens
                    .next()
                    .ok_or_else(|| anyhow!("{spec:?}: bytes needs N"))?;
                let mut spec_text = len.to_string();
                // an optional seed: a number right after N
                let mut peek = tokens.clone();
                if let Some(seed) = peek.next().filter(|s| s.parse::<u64>().is_ok()) {
                    spec_text = format!("{len}:{seed}");
                    tokens.next();
                }
                let (len, seed) = parse_bytes_spec(&spec_text)?;
                explicit = Some(pattern(len, seed));
            }
            other => bail!("{spec:?}: unknown modifier {other:?} (wrong, short, bytes:N[:S])"),
        }
    }
    let data: &[u8] = match &explicit {
        Some(d) => d,
        None => request_data.ok_or_else(|| {
            anyhow!("{spec}: the request has no writeChunk.data or putSmallFile.data (use $checksums:bytes:N[:S])")
        })?,
    };
    let kind = checksum_type(kind)?;
    let bpc = match bytes_per_checksum {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
    .and_then(|n| u32::try_from(n).ok())
    .ok_or_else(|| anyhow!("{spec}: checksumData.bytesPerChecksum must be set to a number"))?;
    let computed =
        common::checksum::compute(kind, bpc, data).map_err(|e| anyhow!("{spec}: {e}"))?;
    let mut list: Vec<Vec<u8>> = computed.checksums.iter().map(|c| c.to_vec()).collect();
    if wrong {
        for c in &mut list {
            if let Some(first) = c.first_mut() {
                *first ^= 0xff;
            }
        }
    }
    if short {
        list.pop();
    }
    Ok(list)
}

fn checksum_type(kind: &Json) -> anyhow::Result<ChecksumType> {
    let t = match kind {
        Json::String(name) => ChecksumType::from_str_name(name),
        Json::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .and_then(|n| ChecksumType::try_from(n).ok()),
        _ => None,
    };
    t.ok_or_else(|| {
        anyhow!("checksumData.type must be NONE, CRC32, CRC32C, SHA256 or MD5 for $checksums, not {kind}")
    })
}

fn fill_checksums(json: &mut Json, data: Option<&[u8]>) -> anyhow::Result<()> {
    match json {
        Json::Object(obj) => {
            for (key, value) in obj.iter_mut() {
                if key == "checksumData"
                    && let Some(cd) = value.as_object_mut()
                    && let Some(Json::String(spec)) = cd.get("checksums")
                    && spec.starts_with("$checksums")
                {
                    let spec = spec.clone();
                    let kind = cd.get("type").cloned().unwrap_or(Json::Null);
                    let bpc = cd.get("bytesPerChecksum").cloned().unwrap_or(Json::Null);
                    let list = checksums_for(&spec, &kind, &bpc, data)?;
                    cd.insert(
                        "checksums".into(),
                        Json::Array(
                            list.iter()
                                .map(|c| Json::String(BASE64.encode(c)))
                                .collect(),
                        ),
                    );
                    continue;
                }
                fill_checksums(value, data)?;
            }
        }
        Json::Array(items) => {
            for v in items {
                fill_checksums(v, data)?;
            }
        }
        Json::String(s) if s.starts_with("$checksums") => {
            bail!("{s} must be the \"checksums\" of a checksumData object")
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bindings() -> Bindings {
        Bindings {
            containers: vec![5, 6],
            new_containers: vec![1_000_001],
            datanode_uuid: "3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab".into(),
            pipeline: "00000000-0000-4000-8000-000000009858".into(),
        }
    }

    fn decode_list(v: &Json) -> Vec<Vec<u8>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| BASE64.decode(s.as_str().unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn ids_and_uuids() {
        let req = json!({"containerID": "$C2", "datanodeUuid": "$DN", "traceID": "t-$NEW1-$OTHER_UUID",
            "pipelineID": "$C1", "n": 3, "list": ["$C1"]});
        let out = substitute(&req, &bindings()).unwrap();
        assert_eq!(
            out,
            json!({"containerID": "6", "datanodeUuid": "3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab",
                "traceID": format!("t-1000001-{OTHER_UUID}"), "pipelineID": "5", "n": 3, "list": ["5"]})
        );
        assert_eq!(
            needs(&req).unwrap(),
            Needs {
                containers: 2,
                new_containers: 1
            }
        );
        assert!(substitute(&json!({"containerID": "$C3"}), &bindings()).is_err());
        assert!(needs(&json!({"x": "$C10"})).is_err());
        assert!(needs(&json!({"x": "$DNX"})).is_err());
        // lower-case dollars are left alone
        assert_eq!(
            substitute(&json!({"traceID": "$lower"}), &bindings()).unwrap(),
            json!({"traceID": "$lower"})
        );
    }

    #[test]
    fn byte_patterns() {
        let p = pattern(300, 0);
        for (i, b) in p.iter().enumerate() {
            assert_eq!(usize::from(*b), (i * 31 + 7) % 251);
        }
        let s = pattern(300, 3);
        for (i, b) in s.iter().enumerate() {
            assert_eq!(usize::from(*b), (i * 31 + 7 + 3 * 101) % 251);
        }
        let out = substitute(&json!({"echo": {"payload": "$bytes:10"}}), &bindings()).unwrap();
        assert_eq!(
            BASE64
                .decode(out["echo"]["payload"].as_str().unwrap())
                .unwrap(),
            pattern(10, 0)
        );
        let out = substitute(&json!({"p": "$bytes:0"}), &bindings()).unwrap();
        assert_eq!(out["p"], "");
        assert!(substitute(&json!({"p": "$bytes:x"}), &bindings()).is_err());
        assert!(substitute(&json!({"p": "$bytes:1:2:3"}), &bindings()).is_err());
    }

    fn write_chunk(data_b64: &str, kind: &str, bpc: u32, spec: &str) -> Json {
        json!({"cmdType": "WriteChunk", "writeChunk": {
            "blockID": {"containerID": "$C1", "localID": 1},
            "chunkData": {"chunkName": "c", "offset": 0, "len": 9,
                "checksumData": {"type": kind, "bytesPerChecksum": bpc, "checksums": spec}},
            "data": data_b64}})
    }

    #[test]
    fn checksums_of_the_request_data() {
        let data = BASE64.encode(b"123456789");
        let sums = |kind: &str, bpc: u32, spec: &str| {
            let out = substitute(&write_chunk(&data, kind, bpc, spec), &bindings()).unwrap();
            assert_eq!(out["writeChunk"]["chunkData"]["checksumData"]["type"], kind);
            decode_list(&out["writeChunk"]["chunkData"]["checksumData"]["checksums"])
        };
        assert_eq!(
            sums("CRC32", 9, "$checksums"),
            vec![0xCBF4_3926u32.to_be_bytes().to_vec()]
        );
        assert_eq!(
            sums("CRC32C", 9, "$checksums"),
            vec![0xE306_9283u32.to_be_bytes().to_vec()]
        );
        assert_eq!(
            sums("CRC32", 16384, "$checksums"),
            vec![0xCBF4_3926u32.to_be_bytes().to_vec()]
        );
        assert!(sums("NONE", 9, "$checksums").is_empty());
        // windows: 9 bytes at 4 per checksum = 3 checksums, the last over "9"
        let three = sums("CRC32", 4, "$checksums");
        assert_eq!(three.len(), 3);
        assert_eq!(three[0], crc32(b"1234"));
        assert_eq!(three[2], crc32(b"9"));
        let sha = sums("SHA256", 9, "$checksums");
        assert_eq!(sha.len(), 1);
        assert_eq!(sha[0].len(), 32);
        assert_eq!(&sha[0][..4], &[0x15, 0xe2, 0xb0, 0xd3]);
        let md5 = sums("MD5", 9, "$checksums");
        assert_eq!(&md5[0][..4], &[0x25, 0xf9, 0xe7, 0x94]);
        // wrong: every value's first byte flipped; short: one fewer
        let wrong = sums("CRC32", 4, "$checksums:wrong");
        assert_eq!(wrong.len(), 3);
        for (w, r) in wrong.iter().zip(&three) {
            assert_eq!(w[0], r[0] ^ 0xff);
            assert_eq!(w[1..], r[1..]);
        }
        assert_eq!(sums("CRC32", 4, "$checksums:short"), three[..2].to_vec());
        // by number, bytesPerChecksum as a string
        let req = json!({"writeChunk": {"data": data, "chunkData": {"checksumData":
            {"type": 2, "bytesPerChecksum": "9", "checksums": "$checksums"}}}});
        let out = substitute(&req, &bindings()).unwrap();
        assert_eq!(
            decode_list(&out["writeChunk"]["chunkData"]["checksumData"]["checksums"]),
            vec![0xCBF4_3926u32.to_be_bytes().to_vec()]
        );
    }

    #[test]
    fn checksums_of_bytes_placeholders_and_explicit_data() {
        // writeChunk.data given as $bytes: the checksums are of the substituted data
        let req = write_chunk("$bytes:1000:4", "CRC32", 256, "$checksums");
        let out = substitute(&req, &bindings()).unwrap();
        let list = decode_list(&out["writeChunk"]["chunkData"]["checksumData"]["checksums"]);
        let data = pattern(1000, 4);
        assert_eq!(list.len(), 4);
        assert_eq!(list[3], crc32(&data[768..]));
        // putSmallFile.data
        let req = json!({"putSmallFile": {"data": "$bytes:9", "chunkInfo": {"checksumData":
            {"type": "CRC32", "bytesPerChecksum": 9, "checksums": "$checksums"}}}});
        let out = substitute(&req, &bindings()).unwrap();
        assert_eq!(
            decode_list(&out["putSmallFile"]["chunkInfo"]["checksumData"]["checksums"]),
            vec![crc32(&pattern(9, 0))]
        );
        // a PutBlock naming a chunk written before: explicit data, with a seed and a modifier
        let req = json!({"putBlock": {"blockData": {"chunks": [{"checksumData":
            {"type": "CRC32", "bytesPerChecksum": 100, "checksums": "$checksums:bytes:1000:4:short"}}]}}});
        let out = substitute(&req, &bindings()).unwrap();
        let list =
            decode_list(&out["putBlock"]["blockData"]["chunks"][0]["checksumData"]["checksums"]);
        assert_eq!(list.len(), 9);
        assert_eq!(list[0], crc32(&data[..100]));
        // errors: no data, unknown type, missing bytesPerChecksum, bad modifier, outside checksumData
        let no_data = json!({"putBlock": {"checksumData": {"type": "CRC32", "bytesPerChecksum": 1, "checksums": "$checksums"}}});
        assert!(substitute(&no_data, &bindings()).is_err());
        assert!(substitute(&write_chunk("AA==", "CRC64", 9, "$checksums"), &bindings()).is_err());
        assert!(substitute(&write_chunk("AA==", "CRC32", 0, "$checksums"), &bindings()).is_err());
        assert!(
            substitute(
                &write_chunk("AA==", "CRC32", 9, "$checksums:bogus"),
                &bindings()
            )
            .is_err()
        );
        assert!(substitute(&write_chunk("AA==", "CRC32", 9, "$checksumsX"), &bindings()).is_err());
        assert!(substitute(&json!({"traceID": "$checksums"}), &bindings()).is_err());
    }

    fn crc32(data: &[u8]) -> Vec<u8> {
        common::checksum::compute(ChecksumType::Crc32, u32::MAX, data)
            .unwrap()
            .checksums[0]
            .to_vec()
    }

    #[test]
    fn substituted_requests_encode() {
        let req = write_chunk("$bytes:9", "CRC32", 9, "$checksums");
        let out = substitute(&req, &bindings()).unwrap();
        crate::proto::encode_request(&out).unwrap();
    }
}

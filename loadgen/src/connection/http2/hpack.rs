//! HPACK (RFC 7541): the request header blocks, encoded once per connection. Responses are
//! decoded by `loona-hpack` in the connection's state ([`super::Inner`]).

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1), `first` holding the pattern bits.
pub(super) fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

fn hpack_str(out: &mut Vec<u8>, s: &str) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// A literal header field (RFC 7541 §6.2): `pattern`/`prefix` choose with incremental indexing
/// (0x40, 6 bits) or without indexing (0x00, 4 bits); `name` is a static-table index or a new name.
fn literal(out: &mut Vec<u8>, pattern: u8, prefix: u32, name: Result<usize, &str>, value: &str) {
    match name {
        Ok(index) => hpack_int(out, pattern, prefix, index),
        Err(name) => {
            out.push(pattern);
            hpack_str(out, name);
        }
    }
    hpack_str(out, value);
}

/// The header block of every request on a connection, encoded once: POST, http, the path and
/// authority, `content-type: application/grpc`, `te: trailers`, the deadline as `grpc-timeout`
/// (as the Java client sends it) and a `user-agent`.
///
/// Like grpc-java's and nghttp2's encoders, the first request adds the six non-static fields to
/// the server's HPACK dynamic table and every later request names them by index: 8 bytes instead
/// of ~130, and the server decodes no strings per request. The table never changes after that
/// (nothing else is ever added), so the indexes stay valid for the connection's life. If the
/// server allows a table smaller than the default 4,096 bytes, the blocks are sent as plain
/// literals after a size update to 0.
#[derive(Debug, Clone)]
pub struct RequestBlocks {
    /// First request: literals with incremental indexing.
    pub first: Vec<u8>,
    /// Later requests: all indexed.
    pub indexed: Vec<u8>,
    /// No dynamic table: literals without indexing.
    pub plain: Vec<u8>,
}

impl RequestBlocks {
    pub fn new(authority: &str, path: &str, grpc_timeout: &str) -> Self {
        Self::with_scheme(authority, path, grpc_timeout, false)
    }

    /// [`RequestBlocks::new`] with `:scheme https` when `https` (a TLS connection).
    pub fn with_scheme(authority: &str, path: &str, grpc_timeout: &str, https: bool) -> Self {
        const USER_AGENT: &str = concat!("loadgen/", env!("CARGO_PKG_VERSION"));
        // Static table: 1 :authority, 4 :path, 31 content-type, 58 user-agent.
        let fields: [(Result<usize, &str>, &str); 6] = [
            (Ok(4), path),
            (Ok(1), authority),
            (Ok(31), "application/grpc"),
            (Err("te"), "trailers"),
            (Err("grpc-timeout"), grpc_timeout),
            (Ok(58), USER_AGENT),
        ];
        // :method POST (static 3), :scheme http (static 6) or https (static 7).
        let start = [0x80 | 3, 0x80 | if https { 7 } else { 6 }];
        let mut first = start.to_vec();
        let mut plain = start.to_vec();
        let mut indexed = start.to_vec();
        for (i, (name, value)) in fields.iter().enumerate() {
            literal(&mut first, 0x40, 6, *name, value);
            literal(&mut plain, 0x00, 4, *name, value);
            // Dynamic entries are numbered from 62, the newest first.
            hpack_int(&mut indexed, 0x80, 7, 62 + fields.len() - 1 - i);
        }
        RequestBlocks {
            first,
            indexed,
            plain,
        }
    }
}

/// Which request block the next request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HpackMode {
    First,
    Indexed,
    /// Plain literals; `true`: the next block starts with a table size update to 0.
    Plain(bool),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc7541_examples() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix.
        let mut b = Vec::new();
        hpack_int(&mut b, 0, 5, 10);
        assert_eq!(b, [10]);
        b.clear();
        hpack_int(&mut b, 0, 5, 1337);
        assert_eq!(b, [31, 154, 10]);
    }

    fn decode(d: &mut loona_hpack::Decoder<'static>, block: &[u8]) -> Vec<(String, String)> {
        d.decode(block)
            .unwrap()
            .into_iter()
            .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    #[test]
    fn request_blocks_decode_to_the_grpc_headers_and_index_after_the_first() {
        let blocks = RequestBlocks::new("dn1:9859", "/p/send", "30000m");
        let mut d = loona_hpack::Decoder::new();
        let headers = decode(&mut d, &blocks.first);
        let get = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get(":method"), Some("POST"));
        assert_eq!(get(":scheme"), Some("http"));
        assert_eq!(get(":path"), Some("/p/send"));
        assert_eq!(get(":authority"), Some("dn1:9859"));
        assert_eq!(get("content-type"), Some("application/grpc"));
        assert_eq!(get("te"), Some("trailers"));
        assert_eq!(get("grpc-timeout"), Some("30000m"));
        assert!(get("user-agent").unwrap().starts_with("loadgen/"));
        // Later requests name the same fields by index, in the same order, many times over.
        assert_eq!(blocks.indexed.len(), 8);
        for _ in 0..3 {
            assert_eq!(decode(&mut d, &blocks.indexed), headers);
        }
        // Without a dynamic table: the same fields, and nothing indexed.
        let mut fresh = loona_hpack::Decoder::new();
        assert_eq!(decode(&mut fresh, &blocks.plain), headers);
        assert!(fresh.decode(&blocks.indexed).is_err());
    }
}

//! gRPC request bodies: a request message in up to three shared segments, sent without a copy.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// A request body as up to three segments sent in order, each without a copy: e.g. a gRPC
/// message's envelope, a large `bytes` field referencing the caller's buffer, and the fields
/// after it. A `Bytes` converts into a one-segment body. As a [`Buf`] it reads the segments in
/// order, and `copy_to_bytes` within one segment is a slice of it (no copy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestBody {
    parts: [Bytes; 3],
}

impl RequestBody {
    pub fn new(head: Bytes, data: Bytes, tail: Bytes) -> Self {
        RequestBody {
            parts: [head, data, tail],
        }
    }

    /// The segments, in order (some may be empty).
    pub fn parts(&self) -> &[Bytes; 3] {
        &self.parts
    }

    /// The whole body when it is one segment (no copy), `None` when it has several.
    pub fn as_single(&self) -> Option<&Bytes> {
        let mut nonempty = self.parts.iter().filter(|p| !p.is_empty());
        match (nonempty.next(), nonempty.next()) {
            (None, _) => Some(&self.parts[0]),
            (Some(p), None) => Some(p),
            _ => None,
        }
    }

    /// The segments concatenated (a copy; for tests and checks off the hot path).
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.concat()
    }

    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Bytes::is_empty)
    }
}

impl From<Bytes> for RequestBody {
    fn from(b: Bytes) -> Self {
        RequestBody::new(b, Bytes::new(), Bytes::new())
    }
}

impl Buf for RequestBody {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        self.parts
            .iter()
            .find(|p| !p.is_empty())
            .map_or(&[][..], |p| &p[..])
    }

    fn advance(&mut self, mut cnt: usize) {
        for p in &mut self.parts {
            let n = cnt.min(p.len());
            p.advance(n);
            cnt -= n;
        }
        assert!(cnt == 0, "advanced past the end of a request body");
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        if let Some(p) = self.parts.iter_mut().find(|p| !p.is_empty())
            && p.len() >= len
        {
            return p.split_to(len);
        }
        assert!(
            len <= self.len(),
            "copy_to_bytes past the end of a request body"
        );
        let mut out = BytesMut::with_capacity(len);
        out.put((&mut *self).take(len));
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_body_reads_its_segments_in_order_and_slices_within_one() {
        let data = Bytes::from(vec![7u8; 100]);
        let mut b = RequestBody::new(
            Bytes::from_static(b"head"),
            data.clone(),
            Bytes::from_static(b"tail"),
        );
        assert_eq!(b.len(), 108);
        assert!(b.as_single().is_none());
        assert_eq!(b.chunk(), b"head");
        assert_eq!(&b.copy_to_bytes(2)[..], b"he");
        // Across a boundary: copied.
        assert_eq!(&b.copy_to_bytes(4)[..], b"ad\x07\x07");
        // Within one segment: a slice of the caller's memory.
        let mid = b.copy_to_bytes(90);
        assert_eq!(mid.as_ptr(), data[2..].as_ptr());
        b.advance(10);
        assert_eq!(b.chunk(), b"il");
        assert_eq!(b.remaining(), 2);
        let one = RequestBody::from(Bytes::from_static(b"x"));
        assert_eq!(one.as_single().map(|b| &b[..]), Some(&b"x"[..]));
        assert!(RequestBody::default().is_empty());
        assert_eq!(RequestBody::default().as_single().map(Bytes::len), Some(0));
    }
}

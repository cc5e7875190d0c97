//! Memory backend: a block's bytes as `Bytes` segments keyed by block offset.
//!
//! ## Trade-off: keep the received `Bytes`, or copy into one buffer per block?
//! A WriteChunk's `data` arrives as a `Bytes` slice of the gRPC receive buffer (the codec decodes
//! without copying). Large writes are kept as that slice: storing a 4 MiB chunk costs no memcpy,
//! and a read that falls inside one written chunk (the normal case: reads follow the chunk and
//! checksum boundaries the writer used) is answered with a slice of it, again without a copy.
//! The alternative, one growing `BytesMut` per block, costs a copy of every byte written, but
//! holds exactly the block's length and always reads as one slice. On a 2-core machine measuring
//! the client path, the per-write memcpy is the more visible cost, so segments it is. The price:
//! - a kept slice pins its receive buffer, which may be somewhat larger than the data;
//! - an overwrite that splits a segment keeps the old allocation alive for the parts that survive
//!   (a part smaller than half the segment is copied out instead, so the old buffer can go);
//! - a read spanning several segments is copied into one buffer.
//!
//! So real memory may exceed the logical length counted against `--capacity`, by at most about
//! the size of the buffers in flight, not by a multiple of the data.
//!
//! Small writes (under [`SMALL`]) are different: keeping each as a slice would pin a receive
//! buffer per kilobyte and grow the segment map by one entry per write. They are appended to a
//! `BytesMut` tail instead (one copy per byte, no re-copying), frozen into a segment when it
//! fills, when a large write follows, or when an overwrite needs the map. Reads of the tail copy
//! (it is at most [`SMALL`] bytes).

use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;

/// Writes below this size are copied into the tail buffer rather than kept as slices.
pub(super) const SMALL: usize = 64 << 10;

#[derive(Debug, Default)]
pub(super) struct Segments {
    /// Non-overlapping segments covering `[0, len - tail.len())` with no gaps.
    frozen: BTreeMap<u64, Bytes>,
    /// The last `tail.len()` bytes of the block, collected from small appends.
    tail: BytesMut,
    len: u64,
}

impl Segments {
    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.len
    }

    fn tail_start(&self) -> u64 {
        self.len - self.tail.len() as u64
    }

    /// Writes `data` at `offset`, which must be at most [`len`](Self::len): appends at the end,
    /// overwrites below it (extending the block if the write runs past the end).
    pub fn write(&mut self, offset: u64, data: Bytes) {
        assert!(
            offset <= self.len,
            "offset {offset} beyond length {}",
            self.len
        );
        if data.is_empty() {
            return;
        }
        if offset == self.len {
            self.append(data);
        } else {
            self.freeze_tail();
            self.overwrite(offset, data);
        }
    }

    fn append(&mut self, data: Bytes) {
        if data.len() < SMALL {
            if self.tail.len() + data.len() > SMALL {
                self.freeze_tail();
            }
            if self.tail.capacity() - self.tail.len() < data.len() {
                self.tail.reserve(SMALL);
            }
            self.tail.extend_from_slice(&data);
            self.len += data.len() as u64;
        } else {
            self.freeze_tail();
            let offset = self.len;
            self.len += data.len() as u64;
            self.frozen.insert(offset, data);
        }
    }

    /// Moves the tail into the segment map without copying (the tail keeps its spare capacity).
    fn freeze_tail(&mut self) {
        if !self.tail.is_empty() {
            let start = self.tail_start();
            self.frozen.insert(start, self.tail.split().freeze());
        }
    }

    /// Replaces `[offset, offset + data.len())`; the tail must be frozen.
    fn overwrite(&mut self, offset: u64, data: Bytes) {
        let end = offset + data.len() as u64;
        let mut kept: Vec<(u64, Bytes)> = Vec::new();
        // Only the last segment starting before `offset` can reach into the range.
        if let Some((&start, seg)) = self.frozen.range(..offset).next_back()
            && start + seg.len() as u64 > offset
        {
            let seg = self.frozen.remove(&start).expect("segment just seen");
            kept.push((start, part(&seg, 0, (offset - start) as usize)));
            if start + seg.len() as u64 > end {
                kept.push((end, part(&seg, (end - start) as usize, seg.len())));
            }
        }
        let inside: Vec<u64> = self.frozen.range(offset..end).map(|(&s, _)| s).collect();
        for start in inside {
            let seg = self.frozen.remove(&start).expect("segment just seen");
            if start + seg.len() as u64 > end {
                kept.push((end, part(&seg, (end - start) as usize, seg.len())));
            }
        }
        self.frozen.extend(kept);
        let data = if data.len() < SMALL {
            Bytes::copy_from_slice(&data)
        } else {
            data
        };
        self.frozen.insert(offset, data);
        self.len = self.len.max(end);
    }

    /// `[offset, offset + len)` (which must lie within the block) in pieces of `piece` bytes, the
    /// last possibly shorter. A piece inside one segment is a slice of it, without copying.
    pub fn read(&self, offset: u64, len: u64, piece: u64) -> Vec<Bytes> {
        let end = offset + len;
        assert!(
            end <= self.len,
            "read [{offset}, {end}) beyond length {}",
            self.len
        );
        let piece = piece.max(1);
        let mut out = Vec::with_capacity(len.div_ceil(piece) as usize);
        let mut at = offset;
        while at < end {
            let next = end.min(at + piece);
            out.push(self.gather(at, next));
            at = next;
        }
        out
    }

    fn gather(&self, a: u64, b: u64) -> Bytes {
        let tail_start = self.tail_start();
        let mut parts: Vec<Bytes> = Vec::new();
        if a < tail_start {
            let first = self
                .frozen
                .range(..=a)
                .next_back()
                .map_or(0, |(&start, _)| start);
            for (&start, seg) in self.frozen.range(first..b.min(tail_start)) {
                let lo = a.max(start);
                let hi = b.min(start + seg.len() as u64);
                if lo < hi {
                    parts.push(seg.slice((lo - start) as usize..(hi - start) as usize));
                }
            }
        }
        if b > tail_start {
            let lo = (a.max(tail_start) - tail_start) as usize;
            let hi = (b - tail_start) as usize;
            parts.push(Bytes::copy_from_slice(&self.tail[lo..hi]));
        }
        if parts.len() == 1 {
            return parts.pop().expect("one part");
        }
        let mut joined = BytesMut::with_capacity((b - a) as usize);
        for p in &parts {
            joined.extend_from_slice(p);
        }
        joined.freeze()
    }
}

/// `seg[lo..hi]`: a slice sharing the segment's buffer, or a copy when it is less than half of
/// the segment, so that a mostly overwritten segment's buffer can be freed.
fn part(seg: &Bytes, lo: usize, hi: usize) -> Bytes {
    if (hi - lo) * 2 < seg.len() {
        Bytes::copy_from_slice(&seg[lo..hi])
    } else {
        seg.slice(lo..hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Bytes {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>()
            .into()
    }

    fn all(s: &Segments) -> Vec<u8> {
        s.read(0, s.len(), s.len().max(1)).concat()
    }

    #[test]
    fn large_writes_are_kept_and_read_back_without_copying() {
        let mut s = Segments::default();
        let a = pattern(SMALL * 2, 1);
        let b = pattern(SMALL * 3, 2);
        s.write(0, a.clone());
        s.write(a.len() as u64, b.clone());
        // A read inside the first write is a slice of the received buffer.
        let piece = s.read(16, 100, 100).pop().unwrap();
        assert_eq!(piece.as_ptr(), a[16..].as_ptr());
        // V1-style pieces aligned with the writes: every one a slice.
        let pieces = s.read(0, (a.len() + b.len()) as u64, SMALL as u64);
        assert_eq!(pieces.len(), 5);
        assert_eq!(pieces[2].as_ptr(), b.as_ptr());
        assert_eq!(pieces.concat(), [a.as_ref(), b.as_ref()].concat());
    }

    #[test]
    fn small_appends_collect_in_the_tail() {
        let mut s = Segments::default();
        let mut model = Vec::new();
        for i in 0..200 {
            let d = pattern(1000 + i, i as u8);
            model.extend_from_slice(&d);
            s.write(s.len(), d);
        }
        assert!(
            s.frozen.len() <= model.len() / SMALL + 1,
            "{}",
            s.frozen.len()
        );
        assert_eq!(all(&s), model);
        // A read across frozen segments and the tail.
        let mid = (model.len() - 500) as u64;
        assert_eq!(
            s.read(mid - 300, 800, 800).concat(),
            &model[mid as usize - 300..][..800]
        );
    }

    #[test]
    fn overwrites_split_segments_and_may_extend() {
        let mut s = Segments::default();
        let mut model = pattern(SMALL * 4, 3).to_vec();
        s.write(0, Bytes::from(model.clone()));
        for (offset, len, seed) in [(10, 20, 4), (SMALL - 5, 10, 5), (3 * SMALL, 2 * SMALL, 6)] {
            let d = pattern(len, seed);
            s.write(offset as u64, d.clone());
            if model.len() < offset + len {
                model.resize(offset + len, 0);
            }
            model[offset..offset + len].copy_from_slice(&d);
            assert_eq!(all(&s), model);
        }
        assert_eq!(s.len(), (SMALL * 5) as u64);
    }
}

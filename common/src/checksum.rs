//! Ozone chunk checksums (`ChecksumData`), computed and verified as
//! `hadoop-hdds/common/.../ozone/common/Checksum.java` does.
//!
//! - One checksum per `bytesPerChecksum` window of a chunk's data; the last window may be shorter,
//!   so `len` bytes have `ceil(len / bytesPerChecksum)` checksums.
//! - CRC32 is the IEEE polynomial (`java.util.zip.CRC32`, zlib), CRC32C the Castagnoli one
//!   (`java.util.zip.CRC32C`); each CRC is stored as 4 bytes big-endian. CRC32 is computed with
//!   crc32fast, CRC32C with crc-fast (both AVX-512 VPCLMULQDQ / PCLMULQDQ with runtime detection;
//!   the fastest of the candidates scripts/bench-checksum.sh compares). SHA256 is stored as its
//!   32-byte digest, MD5 as its 16-byte digest.
//! - NONE has an empty `checksums` list, but `type` and `bytesPerChecksum` are still set.
//!
//! [`Checksum::compute`] (or [`compute`]) does a whole chunk at once. [`RunningChecksum`] gives the
//! same result from slices of any size fed as writes arrive (HDDS-15612: checksum while the data is
//! cache-hot instead of over the whole buffer at flush time); it keeps only the open window's
//! running state. [`verify`] checks a whole chunk; [`verify_at`] and [`verify_buffers`] check a
//! part of a chunk that starts on a window boundary (a ReadChunk of part of a chunk, or the
//! `dataBuffers` of a V1 ReadChunk response) against the whole chunk's `ChecksumData`.

use crate::proto::{ChecksumData, ChecksumType};
use bytes::Bytes;
use sha2::Digest as _;
use std::ops::ControlFlow;

/// Length of the longest digest (SHA256).
const MAX_DIGEST_LEN: usize = 32;

/// Ozone's default chunk size (`ozone.scm.chunk.size` = 4 MB = 4 MiB); [`RunningChecksum::new`]
/// reserves room for the checksums of one such chunk.
const DEFAULT_CHUNK_SIZE: u64 = 4 << 20;

/// At most this many checksums are reserved up front when the chunk length is not known.
const MAX_DEFAULT_RESERVE: u64 = 1024;

/// Never reserve more than this many bytes of checksums up front (a 4 MiB chunk at the 16 KiB
/// default needs 1 KiB for CRCs, 8 KiB for SHA256); beyond it the buffer grows as needed.
const MAX_RESERVE_BYTES: usize = 1 << 20;

/// The crate that computes CRC32 in this module (named by benchmarks and reports).
pub const CRC32_CRATE: &str = "crc32fast";

/// The crate that computes CRC32C in this module (named by benchmarks and reports).
pub const CRC32C_CRATE: &str = "crc-fast";

/// Every checksum type, in protocol order (for callers that iterate over them, and tests).
pub const ALL_TYPES: [ChecksumType; 5] = [
    ChecksumType::None,
    ChecksumType::Crc32,
    ChecksumType::Crc32c,
    ChecksumType::Sha256,
    ChecksumType::Md5,
];

/// A checksum type and window size that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumError {
    #[error("bytesPerChecksum must be at least 1")]
    ZeroBytesPerChecksum,
    #[error("{0} is not a ChecksumType (NONE=1, CRC32=2, CRC32C=3, SHA256=4, MD5=5)")]
    UnknownType(i32),
}

/// Converts the wire value of `ChecksumData.type` into a [`ChecksumType`].
pub fn type_from_proto(value: i32) -> Result<ChecksumType, ChecksumError> {
    ChecksumType::try_from(value).map_err(|_| ChecksumError::UnknownType(value))
}

/// Length in bytes of one stored checksum of `kind` (0 for NONE).
pub const fn digest_len(kind: ChecksumType) -> usize {
    match kind {
        ChecksumType::None => 0,
        ChecksumType::Crc32 | ChecksumType::Crc32c => 4,
        ChecksumType::Sha256 => 32,
        ChecksumType::Md5 => 16,
    }
}

/// One-shot: the `ChecksumData` of a whole chunk. Same as
/// `Checksum::new(kind, bytes_per_checksum)?.compute(data)`.
pub fn compute(
    kind: ChecksumType,
    bytes_per_checksum: u32,
    data: &[u8],
) -> Result<ChecksumData, ChecksumError> {
    Ok(Checksum::new(kind, bytes_per_checksum)?.compute(data))
}

/// A validated checksum configuration: a type and a non-zero `bytesPerChecksum`, like Java's
/// `Checksum(type, bytesPerChecksum)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checksum {
    kind: ChecksumType,
    bytes_per_checksum: u32,
}

impl Checksum {
    pub fn new(kind: ChecksumType, bytes_per_checksum: u32) -> Result<Self, ChecksumError> {
        if bytes_per_checksum == 0 {
            return Err(ChecksumError::ZeroBytesPerChecksum);
        }
        Ok(Self {
            kind,
            bytes_per_checksum,
        })
    }

    /// From wire values, e.g. a request's `type` and `bytesPerChecksum`.
    pub fn from_proto(kind: i32, bytes_per_checksum: u32) -> Result<Self, ChecksumError> {
        Self::new(type_from_proto(kind)?, bytes_per_checksum)
    }

    /// The configuration an existing `ChecksumData` was computed with.
    pub fn of(data: &ChecksumData) -> Result<Self, ChecksumError> {
        Self::from_proto(data.r#type, data.bytes_per_checksum)
    }

    pub fn kind(&self) -> ChecksumType {
        self.kind
    }

    pub fn bytes_per_checksum(&self) -> u32 {
        self.bytes_per_checksum
    }

    /// Length in bytes of one stored checksum (0 for NONE).
    pub fn digest_len(&self) -> usize {
        digest_len(self.kind)
    }

    /// Number of windows `len` bytes span: `ceil(len / bytesPerChecksum)`.
    pub fn windows(&self, len: u64) -> u64 {
        len.div_ceil(u64::from(self.bytes_per_checksum))
    }

    /// Number of entries in the `checksums` list for `len` bytes (0 for NONE).
    pub fn checksum_count(&self, len: u64) -> u64 {
        if self.kind == ChecksumType::None {
            0
        } else {
            self.windows(len)
        }
    }

    /// The `ChecksumData` of a whole chunk. The checksums share one allocation.
    pub fn compute(&self, data: &[u8]) -> ChecksumData {
        let mut running = RunningChecksum::with_capacity(*self, data.len() as u64);
        running.update(data);
        running.finish()
    }

    /// A computation fed piece by piece; see [`RunningChecksum`].
    pub fn running(&self) -> RunningChecksum {
        RunningChecksum::new(*self)
    }

    /// `ChecksumData` with this type and `bytesPerChecksum` and the given checksums.
    fn data(&self, checksums: Vec<Bytes>) -> ChecksumData {
        ChecksumData {
            r#type: self.kind as i32,
            bytes_per_checksum: self.bytes_per_checksum,
            checksums,
        }
    }
}

/// The running state of the open window.
#[derive(Clone)]
enum State {
    None,
    Crc32(crc32fast::Hasher),
    Crc32c(crc_fast::Digest),
    Sha256(sha2::Sha256),
    Md5(md5::Md5),
}

impl State {
    fn new(kind: ChecksumType) -> Self {
        match kind {
            ChecksumType::None => State::None,
            ChecksumType::Crc32 => State::Crc32(crc32fast::Hasher::new()),
            ChecksumType::Crc32c => {
                State::Crc32c(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi))
            }
            ChecksumType::Sha256 => State::Sha256(sha2::Sha256::new()),
            ChecksumType::Md5 => State::Md5(md5::Md5::new()),
        }
    }

    #[inline]
    fn update(&mut self, data: &[u8]) {
        match self {
            State::None => {}
            State::Crc32(h) => h.update(data),
            State::Crc32c(d) => d.update(data),
            State::Sha256(h) => h.update(data),
            State::Md5(h) => h.update(data),
        }
    }

    /// Writes the open window's checksum to the front of `out`, returns its length, and starts a
    /// new window.
    #[inline]
    fn finish_window(&mut self, out: &mut [u8; MAX_DIGEST_LEN]) -> usize {
        match self {
            State::None => 0,
            State::Crc32(h) => {
                let crc = h.clone().finalize();
                h.reset();
                out[..4].copy_from_slice(&crc.to_be_bytes());
                4
            }
            State::Crc32c(d) => {
                // A 32-bit CRC: the upper half of crc-fast's u64 is always zero.
                let crc = d.finalize_reset() as u32;
                out[..4].copy_from_slice(&crc.to_be_bytes());
                4
            }
            State::Sha256(h) => {
                out[..32].copy_from_slice(&h.finalize_reset());
                32
            }
            State::Md5(h) => {
                out[..16].copy_from_slice(&h.finalize_reset());
                16
            }
        }
    }
}

/// Splits a byte stream into windows and hands each finished window's checksum to a callback.
#[derive(Clone)]
struct Windows {
    state: State,
    bytes_per_checksum: usize,
    /// Bytes in the open window, always below `bytes_per_checksum`.
    filled: usize,
}

impl Windows {
    fn new(checksum: Checksum) -> Self {
        Self {
            state: State::new(checksum.kind),
            // u32 always fits in usize on the 32- and 64-bit targets this crate builds for.
            bytes_per_checksum: checksum.bytes_per_checksum as usize,
            filled: 0,
        }
    }

    /// Feeds `data`; calls `done` with the checksum of every window it completes and stops early
    /// when `done` breaks.
    #[inline]
    fn update(
        &mut self,
        mut data: &[u8],
        done: &mut impl FnMut(&[u8]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if let State::None = self.state {
            // Nothing to compute and no checksums to report.
            return ControlFlow::Continue(());
        }
        while !data.is_empty() {
            let take = (self.bytes_per_checksum - self.filled).min(data.len());
            let (head, rest) = data.split_at(take);
            self.state.update(head);
            self.filled += take;
            data = rest;
            if self.filled == self.bytes_per_checksum {
                self.close(done)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Finishes a partly filled last window, if any.
    fn finish(&mut self, done: &mut impl FnMut(&[u8]) -> ControlFlow<()>) -> ControlFlow<()> {
        if self.filled > 0 {
            self.close(done)
        } else {
            ControlFlow::Continue(())
        }
    }

    #[inline]
    fn close(&mut self, done: &mut impl FnMut(&[u8]) -> ControlFlow<()>) -> ControlFlow<()> {
        let mut digest = [0u8; MAX_DIGEST_LEN];
        let len = self.state.finish_window(&mut digest);
        self.filled = 0;
        if len == 0 {
            ControlFlow::Continue(())
        } else {
            done(&digest[..len])
        }
    }
}

/// An incremental checksum computation over one chunk: feed the chunk's bytes in slices of any
/// size with [`update`](Self::update), in order, then [`finish`](Self::finish). The result equals
/// [`Checksum::compute`] over the concatenation of the slices.
///
/// Windows are checksummed as they fill; only the open window's running state is kept (a running
/// CRC, or a SHA256/MD5 hasher). `update` allocates nothing except when the buffer of finished
/// checksums (4, 16 or 32 bytes each, reserved up front) has to grow. All checksums of a chunk end
/// up in one shared allocation.
#[derive(Clone)]
pub struct RunningChecksum {
    checksum: Checksum,
    windows: Windows,
    /// Finished checksums, concatenated.
    digests: Vec<u8>,
    len: u64,
}

impl std::fmt::Debug for RunningChecksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningChecksum")
            .field("checksum", &self.checksum)
            .field("len", &self.len)
            .field("finished_windows", &self.finished_windows())
            .finish()
    }
}

impl RunningChecksum {
    /// Reserves room for the checksums of one default-size (4 MiB) chunk, at most 1024 of them.
    pub fn new(checksum: Checksum) -> Self {
        let count = checksum
            .checksum_count(DEFAULT_CHUNK_SIZE)
            .min(MAX_DEFAULT_RESERVE);
        Self::reserving(checksum, count)
    }

    /// Reserves room for exactly the checksums of `expected_len` bytes (capped at 1 MiB of
    /// checksum bytes), so that feeding that many bytes never reallocates.
    pub fn with_capacity(checksum: Checksum, expected_len: u64) -> Self {
        Self::reserving(checksum, checksum.checksum_count(expected_len))
    }

    fn reserving(checksum: Checksum, count: u64) -> Self {
        let bytes = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .saturating_mul(checksum.digest_len())
            .min(MAX_RESERVE_BYTES);
        Self {
            checksum,
            windows: Windows::new(checksum),
            digests: Vec::with_capacity(bytes),
            len: 0,
        }
    }

    pub fn checksum(&self) -> Checksum {
        self.checksum
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Windows completed so far (not counting the open one; 0 for NONE).
    pub fn finished_windows(&self) -> usize {
        match self.checksum.digest_len() {
            0 => 0,
            n => self.digests.len() / n,
        }
    }

    /// Feeds the next bytes of the chunk.
    pub fn update(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        let digests = &mut self.digests;
        let _ = self.windows.update(data, &mut |d: &[u8]| {
            digests.extend_from_slice(d);
            ControlFlow::Continue(())
        });
    }

    /// Closes the last (possibly short) window and returns the chunk's `ChecksumData`.
    pub fn finish(mut self) -> ChecksumData {
        self.take(0)
    }

    /// Like [`finish`](Self::finish), but leaves `self` ready for the next chunk, with the same
    /// reservation.
    pub fn finish_reset(&mut self) -> ChecksumData {
        let capacity = self.digests.capacity();
        self.take(capacity)
    }

    /// Finishes the chunk and starts a new one with `capacity` bytes reserved for checksums.
    fn take(&mut self, capacity: usize) -> ChecksumData {
        let digests = &mut self.digests;
        let _ = self.windows.finish(&mut |d: &[u8]| {
            digests.extend_from_slice(d);
            ControlFlow::Continue(())
        });
        let digests = std::mem::replace(&mut self.digests, Vec::with_capacity(capacity));
        self.len = 0;
        let n = self.checksum.digest_len();
        if n == 0 {
            return self.checksum.data(Vec::new());
        }
        let all = Bytes::from(digests);
        let checksums = (0..all.len())
            .step_by(n)
            .map(|i| all.slice(i..i + n))
            .collect();
        self.checksum.data(checksums)
    }
}

/// Why data does not match its `ChecksumData`. Window indexes and offsets are relative to the
/// start of the chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("ChecksumData has bytesPerChecksum 0")]
    ZeroBytesPerChecksum,
    #[error("ChecksumData type {0} is not a ChecksumType")]
    UnknownType(i32),
    #[error("offset {offset} is not a multiple of bytesPerChecksum {bytes_per_checksum}")]
    Misaligned {
        offset: u64,
        bytes_per_checksum: u32,
    },
    #[error("ChecksumData has {found} checksums, the data needs {expected}")]
    Count { expected: u64, found: usize },
    #[error("checksum {index} is {found} bytes long, the type needs {expected}")]
    EntryLength {
        index: usize,
        expected: usize,
        found: usize,
    },
    #[error(
        "checksum mismatch in window {index} at chunk offset {offset}: stored {}, computed {}",
        hex(stored),
        hex(computed)
    )]
    Window {
        index: usize,
        offset: u64,
        stored: Bytes,
        computed: Bytes,
    },
}

impl From<ChecksumError> for Mismatch {
    fn from(e: ChecksumError) -> Self {
        match e {
            ChecksumError::ZeroBytesPerChecksum => Mismatch::ZeroBytesPerChecksum,
            ChecksumError::UnknownType(t) => Mismatch::UnknownType(t),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Verifies a whole chunk against its `ChecksumData`: the list must hold exactly one checksum per
/// window, each of the type's length, and every window must match. The error names the first
/// window that does not. Problems with the `ChecksumData` itself (type, `bytesPerChecksum`,
/// count, entry lengths) are reported before any data is hashed.
///
/// As in Java's `Checksum.verifyChecksum`, type NONE verifies without looking at the data or the
/// rest of the `ChecksumData`.
pub fn verify(data: &[u8], expected: &ChecksumData) -> Result<(), Mismatch> {
    verify_impl(&[data], 0, expected, true)
}

/// Verifies `data`, the part of a chunk that starts at chunk offset `offset`, against the whole
/// chunk's `ChecksumData`. `offset` must be a multiple of `bytesPerChecksum`; only the windows
/// `data` covers are checked (a short last window of `data` is compared with the stored checksum
/// of that window, so it matches only at the end of the chunk).
pub fn verify_at(data: &[u8], offset: u64, expected: &ChecksumData) -> Result<(), Mismatch> {
    verify_impl(&[data], offset, expected, false)
}

/// [`verify_at`] for data that arrives in several buffers (a V1 ReadChunk's `dataBuffers`), read
/// as one contiguous range starting at chunk offset `offset`. The buffers may split the data
/// anywhere, not only at window boundaries.
pub fn verify_buffers<B: AsRef<[u8]>>(
    buffers: &[B],
    offset: u64,
    expected: &ChecksumData,
) -> Result<(), Mismatch> {
    verify_impl(buffers, offset, expected, false)
}

fn verify_impl<B: AsRef<[u8]>>(
    buffers: &[B],
    offset: u64,
    expected: &ChecksumData,
    whole_chunk: bool,
) -> Result<(), Mismatch> {
    let kind = type_from_proto(expected.r#type)?;
    if kind == ChecksumType::None {
        return Ok(());
    }
    let checksum = Checksum::new(kind, expected.bytes_per_checksum)?;
    let bpc = u64::from(checksum.bytes_per_checksum);
    if !offset.is_multiple_of(bpc) {
        return Err(Mismatch::Misaligned {
            offset,
            bytes_per_checksum: checksum.bytes_per_checksum,
        });
    }
    let len: u64 = buffers.iter().map(|b| b.as_ref().len() as u64).sum();
    let first = offset / bpc;
    let needed = first.saturating_add(checksum.windows(len));
    let found = expected.checksums.len();
    let count_ok = if whole_chunk {
        needed == found as u64
    } else {
        needed <= found as u64
    };
    if !count_ok {
        return Err(Mismatch::Count {
            expected: needed,
            found,
        });
    }
    // Both now fit in usize: they are at most `found`.
    let (first, needed) = (first as usize, needed as usize);
    let digest_len = checksum.digest_len();
    let stored = &expected.checksums[first..needed];
    if let Some((i, c)) = stored
        .iter()
        .enumerate()
        .find(|(_, c)| c.len() != digest_len)
    {
        return Err(Mismatch::EntryLength {
            index: first + i,
            expected: digest_len,
            found: c.len(),
        });
    }

    let mut windows = Windows::new(checksum);
    let mut next = 0usize;
    let mut mismatch = None;
    // `windows` yields exactly `stored.len()` checksums, one per covered window.
    let mut compare = |computed: &[u8]| {
        let entry = &stored[next];
        next += 1;
        if computed == &entry[..] {
            ControlFlow::Continue(())
        } else {
            let index = first + next - 1;
            mismatch = Some(Mismatch::Window {
                index,
                offset: (index as u64).saturating_mul(bpc),
                stored: entry.clone(),
                computed: Bytes::copy_from_slice(computed),
            });
            ControlFlow::Break(())
        }
    };
    let flow = buffers
        .iter()
        .try_for_each(|b| windows.update(b.as_ref(), &mut compare));
    if flow.is_continue() {
        let _ = windows.finish(&mut compare);
    }
    match mismatch {
        Some(m) => Err(m),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CHECK: &[u8] = b"123456789";

    fn data(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
            .collect()
    }

    fn checksums(cd: &ChecksumData) -> Vec<Vec<u8>> {
        cd.checksums.iter().map(|c| c.to_vec()).collect()
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn crc_check_values_are_big_endian() {
        let crc32 = compute(ChecksumType::Crc32, 16 * 1024, CHECK).unwrap();
        assert_eq!(
            checksums(&crc32),
            vec![0xCBF4_3926u32.to_be_bytes().to_vec()]
        );
        assert_eq!(checksums(&crc32), vec![vec![0xcb, 0xf4, 0x39, 0x26]]);
        let crc32c = compute(ChecksumType::Crc32c, 9, CHECK).unwrap();
        assert_eq!(checksums(&crc32c), vec![vec![0xe3, 0x06, 0x92, 0x83]]);
        assert_eq!(crc32c.r#type, ChecksumType::Crc32c as i32);
        assert_eq!(crc32c.bytes_per_checksum, 9);
    }

    /// The CRC32 of "abcd" in the WriteChunk golden bytes of proto.rs.
    #[test]
    fn crc32_matches_the_write_chunk_golden_bytes() {
        let cd = compute(ChecksumType::Crc32, 4, b"abcd").unwrap();
        assert_eq!(checksums(&cd), vec![vec![0xed, 0x82, 0xcd, 0x11]]);
    }

    #[test]
    fn digests_match_known_vectors() {
        let sha = compute(ChecksumType::Sha256, 1024, b"abc").unwrap();
        assert_eq!(
            checksums(&sha),
            vec![unhex(
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
            )]
        );
        let md5 = compute(ChecksumType::Md5, 1024, b"abc").unwrap();
        assert_eq!(
            checksums(&md5),
            vec![unhex("900150983cd24fb0d6963f7d28e17f72")]
        );
    }

    #[test]
    fn one_checksum_per_window_and_a_short_last_window() {
        let bpc = 4;
        for kind in ALL_TYPES {
            let c = Checksum::new(kind, bpc).unwrap();
            for (len, windows) in [(0, 0), (1, 1), (3, 1), (4, 1), (5, 2), (8, 2), (9, 3)] {
                let d = data(len);
                let cd = c.compute(&d);
                let expect = if kind == ChecksumType::None {
                    0
                } else {
                    windows
                };
                assert_eq!(cd.checksums.len(), expect, "{kind:?} len {len}");
                assert_eq!(c.windows(len as u64), windows as u64);
                assert_eq!(c.checksum_count(len as u64), expect as u64);
                // Each entry is the checksum of its window alone.
                for (i, window) in d.chunks(bpc as usize).enumerate() {
                    let alone = c.compute(window);
                    if kind != ChecksumType::None {
                        assert_eq!(cd.checksums[i], alone.checksums[0]);
                        assert_eq!(cd.checksums[i].len(), digest_len(kind));
                    }
                }
            }
        }
        // The CRC32 check value as the short last window of a longer chunk.
        let mut chunk = vec![0u8; 16];
        chunk.extend_from_slice(CHECK);
        let cd = compute(ChecksumType::Crc32, 16, &chunk).unwrap();
        assert_eq!(cd.checksums.len(), 2);
        assert_eq!(&cd.checksums[1][..], &[0xcb, 0xf4, 0x39, 0x26]);
    }

    #[test]
    fn none_sets_type_and_bytes_per_checksum_without_checksums() {
        let cd = compute(ChecksumType::None, 16 * 1024, &data(100_000)).unwrap();
        assert_eq!(cd.r#type, ChecksumType::None as i32);
        assert_eq!(cd.bytes_per_checksum, 16 * 1024);
        assert!(cd.checksums.is_empty());
        // Java's verifyChecksum returns true for NONE whatever the ChecksumData holds.
        let odd = ChecksumData {
            checksums: vec![Bytes::from_static(b"x")],
            bytes_per_checksum: 0,
            ..cd.clone()
        };
        assert_eq!(verify(b"anything", &odd), Ok(()));
        assert_eq!(verify_at(b"anything", 3, &cd), Ok(()));
    }

    #[test]
    fn bad_configurations_are_errors() {
        assert_eq!(
            compute(ChecksumType::Crc32, 0, b"x"),
            Err(ChecksumError::ZeroBytesPerChecksum)
        );
        assert_eq!(
            Checksum::new(ChecksumType::None, 0),
            Err(ChecksumError::ZeroBytesPerChecksum)
        );
        for bad in [0, 6, -1, i32::MAX, i32::MIN] {
            assert_eq!(type_from_proto(bad), Err(ChecksumError::UnknownType(bad)));
            assert_eq!(
                Checksum::from_proto(bad, 16),
                Err(ChecksumError::UnknownType(bad))
            );
        }
        for (value, kind) in (1..=5).zip(ALL_TYPES) {
            assert_eq!(type_from_proto(value), Ok(kind));
        }
        let cd = compute(ChecksumType::Sha256, 7, b"abc").unwrap();
        assert_eq!(
            Checksum::of(&cd),
            Ok(Checksum::new(ChecksumType::Sha256, 7).unwrap())
        );
        assert!(
            ChecksumError::UnknownType(9)
                .to_string()
                .contains("9 is not a ChecksumType")
        );
    }

    #[test]
    fn verify_names_the_first_bad_window() {
        let d = data(10 * 1000 + 7);
        for kind in ALL_TYPES.into_iter().skip(1) {
            let cd = compute(kind, 1000, &d).unwrap();
            assert_eq!(verify(&d, &cd), Ok(()));
            let mut bad = d.clone();
            bad[7 * 1000 + 5] ^= 1;
            bad[9 * 1000] ^= 0x80;
            match verify(&bad, &cd) {
                Err(Mismatch::Window {
                    index: 7,
                    offset: 7000,
                    stored,
                    computed,
                }) => {
                    assert_eq!(stored, cd.checksums[7]);
                    assert_ne!(stored, computed);
                    assert_eq!(computed.len(), digest_len(kind));
                }
                other => panic!("{kind:?}: {other:?}"),
            }
            // The short last window.
            let mut bad = d.clone();
            *bad.last_mut().unwrap() ^= 1;
            assert!(matches!(
                verify(&bad, &cd),
                Err(Mismatch::Window {
                    index: 10,
                    offset: 10_000,
                    ..
                })
            ));
        }
        let cd = compute(ChecksumType::Crc32, 4, b"abcdefgh").unwrap();
        let err = verify(b"abcdXfgh", &cd).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("checksum mismatch in window 1 at chunk offset 4: stored "),
            "{err}"
        );
    }

    #[test]
    fn verify_reports_malformed_checksum_data() {
        let d = data(100);
        let cd = compute(ChecksumType::Crc32c, 10, &d).unwrap();

        let mut short = cd.clone();
        short.checksums.pop();
        assert_eq!(
            verify(&d, &short),
            Err(Mismatch::Count {
                expected: 10,
                found: 9
            })
        );
        let mut long = cd.clone();
        long.checksums.push(cd.checksums[0].clone());
        assert_eq!(
            verify(&d, &long),
            Err(Mismatch::Count {
                expected: 10,
                found: 11
            })
        );
        // Truncated data: right count, but the last window's checksum covers 10 bytes, not 5.
        assert!(matches!(
            verify(&d[..95], &cd),
            Err(Mismatch::Window {
                index: 9,
                offset: 90,
                ..
            })
        ));

        let mut wrong_len = cd.clone();
        wrong_len.checksums[3] = Bytes::from_static(&[1, 2, 3, 4, 5, 6, 7, 8]);
        wrong_len.checksums[5] = Bytes::new();
        assert_eq!(
            verify(&d, &wrong_len),
            Err(Mismatch::EntryLength {
                index: 3,
                expected: 4,
                found: 8
            })
        );

        let zero = ChecksumData {
            bytes_per_checksum: 0,
            ..cd.clone()
        };
        assert_eq!(verify(&d, &zero), Err(Mismatch::ZeroBytesPerChecksum));
        assert_eq!(verify_at(&d, 0, &zero), Err(Mismatch::ZeroBytesPerChecksum));
        let unknown = ChecksumData {
            r#type: 42,
            ..cd.clone()
        };
        assert_eq!(verify(&d, &unknown), Err(Mismatch::UnknownType(42)));

        // A CRC32 list checked as SHA256: every entry has the wrong length.
        let as_sha = ChecksumData {
            r#type: ChecksumType::Sha256 as i32,
            ..cd.clone()
        };
        assert_eq!(
            verify(&d, &as_sha),
            Err(Mismatch::EntryLength {
                index: 0,
                expected: 32,
                found: 4
            })
        );
    }

    #[test]
    fn verify_at_checks_only_the_covered_windows() {
        let bpc = 16;
        let chunk = data(10 * bpc + 5);
        let mut cd = compute(ChecksumType::Crc32, bpc as u32, &chunk).unwrap();
        // Corrupt stored checksums outside the range read below; they must not matter.
        cd.checksums[0] = Bytes::from_static(&[0, 0, 0, 0]);
        cd.checksums[9] = Bytes::from_static(b"bad length");

        let range = &chunk[3 * bpc..7 * bpc];
        assert_eq!(verify_at(range, 3 * bpc as u64, &cd), Ok(()));
        // A range ending in the middle of a window: compared with that whole window's checksum.
        assert!(matches!(
            verify_at(&chunk[3 * bpc..7 * bpc + 1], 3 * bpc as u64, &cd),
            Err(Mismatch::Window {
                index: 7,
                offset: 112,
                ..
            })
        ));
        // The chunk's short last window.
        assert_eq!(verify_at(&chunk[10 * bpc..], 10 * bpc as u64, &cd), Ok(()));
        // Empty reads verify trivially (within the chunk).
        assert_eq!(verify_at(&[], 5 * bpc as u64, &cd), Ok(()));

        let mut bad = range.to_vec();
        bad[2 * bpc + 1] ^= 4;
        assert!(matches!(
            verify_at(&bad, 3 * bpc as u64, &cd),
            Err(Mismatch::Window {
                index: 5,
                offset: 80,
                ..
            })
        ));
        assert_eq!(
            verify_at(range, 17, &cd),
            Err(Mismatch::Misaligned {
                offset: 17,
                bytes_per_checksum: 16
            })
        );
        assert_eq!(
            verify_at(&chunk[9 * bpc..], 9 * bpc as u64, &cd),
            Err(Mismatch::EntryLength {
                index: 9,
                expected: 4,
                found: 10
            })
        );
        assert_eq!(
            verify_at(&chunk[bpc..3 * bpc], 10 * bpc as u64, &cd),
            Err(Mismatch::Count {
                expected: 12,
                found: 11
            })
        );
        // Offsets near the end of u64 do not overflow.
        let far = u64::MAX - u64::MAX % bpc as u64;
        assert_eq!(
            verify_at(&chunk[..bpc], far, &cd),
            Err(Mismatch::Count {
                expected: far / bpc as u64 + 1,
                found: 11
            })
        );
        let one = compute(ChecksumType::Crc32, 1, b"ab").unwrap();
        assert_eq!(
            verify_at(b"ab", u64::MAX, &one),
            Err(Mismatch::Count {
                expected: u64::MAX,
                found: 2
            })
        );
        // The whole chunk: malformed entries are reported before any data is hashed.
        assert!(matches!(
            verify(&chunk, &cd),
            Err(Mismatch::EntryLength { index: 9, .. })
        ));
        cd.checksums[9] = Bytes::from_static(&[0, 0, 0, 0]);
        assert!(matches!(
            verify(&chunk, &cd),
            Err(Mismatch::Window { index: 0, .. })
        ));
    }

    #[test]
    fn verify_buffers_accepts_any_split() {
        let bpc = 1000;
        let chunk = data(8 * bpc + 100);
        let cd = compute(ChecksumType::Md5, bpc as u32, &chunk).unwrap();
        // V1 style: one buffer per window, starting at window 2.
        let v1: Vec<Bytes> = chunk[2 * bpc..]
            .chunks(bpc)
            .map(Bytes::copy_from_slice)
            .collect();
        assert_eq!(verify_buffers(&v1, 2 * bpc as u64, &cd), Ok(()));
        // Arbitrary split points.
        let parts: Vec<&[u8]> = vec![
            &chunk[..1],
            &chunk[1..999],
            &[],
            &chunk[999..2500],
            &chunk[2500..],
        ];
        assert_eq!(verify_buffers(&parts, 0, &cd), Ok(()));
        let mut bad = v1.clone();
        let mut third = bad[3].to_vec();
        third[0] ^= 1;
        bad[3] = Bytes::from(third);
        assert!(matches!(
            verify_buffers(&bad, 2 * bpc as u64, &cd),
            Err(Mismatch::Window {
                index: 5,
                offset: 5000,
                ..
            })
        ));
    }

    #[test]
    fn running_checksum_reuses_itself_across_chunks() {
        let c = Checksum::new(ChecksumType::Crc32c, 512).unwrap();
        let mut running = c.running();
        let d = data(5000);
        for piece in d.chunks(700) {
            running.update(piece);
        }
        assert_eq!(running.len(), 5000);
        assert_eq!(running.finished_windows(), 9);
        assert_eq!(running.finish_reset(), c.compute(&d));
        assert!(running.is_empty());
        running.update(&d[..100]);
        assert_eq!(running.finish_reset(), c.compute(&d[..100]));
        assert_eq!(running.finish(), c.compute(&[]));
    }

    #[test]
    fn running_checksum_does_not_reallocate_with_an_exact_reservation() {
        let c = Checksum::new(ChecksumType::Sha256, 16 * 1024).unwrap();
        let mut running = RunningChecksum::with_capacity(c, 4 << 20);
        let capacity = running.digests.capacity();
        assert_eq!(capacity, 256 * 32);
        let d = data(4 << 20);
        for piece in d.chunks(3001) {
            running.update(piece);
        }
        assert_eq!(running.digests.capacity(), capacity);
        assert_eq!(running.finish(), c.compute(&d));
        // The unknown-length default reserves one 4 MiB chunk, capped.
        let tiny = Checksum::new(ChecksumType::Crc32, 1).unwrap();
        assert_eq!(tiny.running().digests.capacity(), 1024 * 4);
        let none = Checksum::new(ChecksumType::None, 1).unwrap();
        assert_eq!(none.running().digests.capacity(), 0);
        // Absurd expected lengths reserve a bounded amount instead of failing.
        let huge = RunningChecksum::with_capacity(tiny, u64::MAX);
        assert_eq!(huge.digests.capacity(), MAX_RESERVE_BYTES);
    }

    fn kinds() -> impl Strategy<Value = ChecksumType> {
        proptest::sample::select(ALL_TYPES.to_vec())
    }

    /// Splits `data` at the given points (taken modulo its length and sorted).
    fn split<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        points.push(0);
        points.push(data.len());
        points.sort_unstable();
        points.windows(2).map(|w| &data[w[0]..w[1]]).collect()
    }

    proptest! {
        #[test]
        fn incremental_equals_one_shot(
            kind in kinds(),
            bpc in 1u32..300,
            d in proptest::collection::vec(any::<u8>(), 0..3000),
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
        ) {
            let c = Checksum::new(kind, bpc).unwrap();
            let one_shot = c.compute(&d);
            prop_assert_eq!(one_shot.checksums.len() as u64, c.checksum_count(d.len() as u64));
            let parts = split(&d, &cuts);
            let mut running = c.running();
            for part in &parts {
                running.update(part);
            }
            prop_assert_eq!(running.len(), d.len() as u64);
            prop_assert_eq!(running.finish(), one_shot.clone());
            prop_assert_eq!(verify(&d, &one_shot), Ok(()));
            prop_assert_eq!(verify_buffers(&parts, 0, &one_shot), Ok(()));
        }

        #[test]
        fn verify_at_accepts_every_aligned_range(
            kind in kinds(),
            bpc in 1u32..64,
            d in proptest::collection::vec(any::<u8>(), 0..1000),
            a in any::<usize>(),
            b in any::<usize>(),
        ) {
            let cd = compute(kind, bpc, &d).unwrap();
            let windows = d.len().div_ceil(bpc as usize);
            let first = if windows == 0 { 0 } else { a % windows };
            let start = first * bpc as usize;
            let end = start + b % (d.len() - start + 1);
            // Ranges that end inside a window other than the last one fail; all others pass.
            let ok = end == d.len() || end.is_multiple_of(bpc as usize);
            let result = verify_at(&d[start..end], start as u64, &cd);
            if ok || kind == ChecksumType::None {
                prop_assert_eq!(result, Ok(()));
            } else {
                let is_window_mismatch = matches!(result, Err(Mismatch::Window { .. }));
                prop_assert!(is_window_mismatch, "{:?}", result);
            }
        }

        #[test]
        fn verify_never_panics_on_arbitrary_checksum_data(
            r#type in -2i32..8,
            bytes_per_checksum in 0u32..40,
            checksums in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from), 0..12),
            d in proptest::collection::vec(any::<u8>(), 0..300),
            offset in 0u64..400,
        ) {
            let cd = ChecksumData { r#type, bytes_per_checksum, checksums };
            let _ = verify(&d, &cd);
            let _ = verify_at(&d, offset, &cd);
            let _ = verify_buffers(&split(&d, &[offset as usize]), offset, &cd);
        }
    }
}

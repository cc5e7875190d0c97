//! Every CRC crate that `common::checksum` could use (the candidates of
//! `examples/checksum_bench.rs` and scripts/bench-checksum.sh) computes the same CRC32 (ISO-HDLC,
//! zlib's and `java.util.zip.CRC32`'s) and CRC32C (iSCSI, `java.util.zip.CRC32C`'s) as
//! `common::checksum`: known check values, then every length and alignment the SIMD paths split
//! on, whole and fed in pieces.

use common::checksum::{self, Checksum};
use common::proto::ChecksumType;
use proptest::prelude::*;

type Crc = fn(&[u8]) -> u32;

fn crc32_fast_digest(data: &[u8]) -> u32 {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32IsoHdlc);
    d.update(data);
    d.finalize() as u32
}

fn crc32c_fast_digest(data: &[u8]) -> u32 {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    d.update(data);
    d.finalize() as u32
}

/// `common::checksum` over `data` as one window (window size = length, at least 1).
fn common_one_window(kind: ChecksumType, data: &[u8]) -> u32 {
    let cd = Checksum::new(kind, data.len().max(1) as u32)
        .unwrap()
        .compute(data);
    match cd.checksums.as_slice() {
        [] => {
            // No window for empty data; a running CRC of nothing is the check value of "".
            assert!(data.is_empty());
            0
        }
        [one] => u32::from_be_bytes(one[..].try_into().unwrap()),
        more => panic!("{} checksums for one window", more.len()),
    }
}

fn common_crc32(data: &[u8]) -> u32 {
    common_one_window(ChecksumType::Crc32, data)
}

fn common_crc32c(data: &[u8]) -> u32 {
    common_one_window(ChecksumType::Crc32c, data)
}

const CRC32: [(&str, Crc); 4] = [
    ("crc32fast", crc32fast::hash),
    ("crc-fast", crc_fast::crc32_iso_hdlc),
    ("crc-fast Digest", crc32_fast_digest),
    ("common::checksum", common_crc32),
];

const CRC32C: [(&str, Crc); 4] = [
    ("crc32c", crc32c::crc32c),
    ("crc-fast", crc_fast::crc32_iscsi),
    ("crc-fast Digest", crc32c_fast_digest),
    ("common::checksum", common_crc32c),
];

/// (input, CRC32, CRC32C); checked against zlib.crc32 and java.util.zip.CRC32C. The 32-byte
/// inputs are RFC 3720's (iSCSI) CRC32C examples.
fn vectors() -> Vec<(Vec<u8>, u32, u32)> {
    vec![
        (b"".to_vec(), 0x0000_0000, 0x0000_0000),
        (b"a".to_vec(), 0xE8B7_BE43, 0xC1D0_4330),
        (b"123456789".to_vec(), 0xCBF4_3926, 0xE306_9283),
        (
            b"The quick brown fox jumps over the lazy dog".to_vec(),
            0x414F_A339,
            0x2262_0404,
        ),
        (vec![0u8; 32], 0x190A_55AD, 0x8A91_36AA),
        (vec![0xFFu8; 32], 0xFF6C_AB0B, 0x62A8_AB43),
        ((0u8..32).collect(), 0x9126_7E8A, 0x46DD_794E),
        ((0u8..32).rev().collect(), 0x9AB0_EF72, 0x113F_DB5C),
    ]
}

/// The pseudo-random bytes of checksum_bench.rs and ChecksumBench.java.
fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x0123_4567_89ab_cdef;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

fn assert_all_agree(algo: &str, impls: &[(&str, Crc)], data: &[u8], what: &str) -> u32 {
    let (first, f) = impls[0];
    let expected = f(data);
    for &(name, crc) in &impls[1..] {
        assert_eq!(
            crc(data),
            expected,
            "{algo} of {what}: {name} disagrees with {first}"
        );
    }
    expected
}

#[test]
fn every_implementation_gives_the_check_values() {
    for (input, crc32, crc32c) in vectors() {
        for (name, crc) in CRC32 {
            assert_eq!(crc(&input), crc32, "CRC32 {name} of {input:02x?}");
        }
        for (name, crc) in CRC32C {
            assert_eq!(crc(&input), crc32c, "CRC32C {name} of {input:02x?}");
        }
    }
}

#[test]
fn the_crates_common_uses_are_candidates() {
    assert!(CRC32.iter().any(|(n, _)| *n == checksum::CRC32_CRATE));
    assert!(CRC32C.iter().any(|(n, _)| *n == checksum::CRC32C_CRATE));
}

#[test]
fn every_implementation_agrees_at_every_length_and_alignment() {
    let data = pseudo_random(300 << 10);
    // Short inputs, the 16/64/256-byte SIMD block edges, and large ones.
    let mut lengths: Vec<usize> = (0..=1100).collect();
    for edge in [2048, 4096, 16 << 10, 64 << 10, 256 << 10] {
        lengths.extend([edge - 1, edge, edge + 1, edge + 63]);
    }
    for offset in [0, 1, 3, 8, 15, 31, 63] {
        for &len in &lengths {
            let slice = &data[offset..offset + len];
            let what = format!("{len} bytes at offset {offset}");
            assert_all_agree("CRC32", &CRC32, slice, &what);
            assert_all_agree("CRC32C", &CRC32C, slice, &what);
        }
    }
}

#[test]
fn windows_of_common_checksum_are_the_crates_per_window_crcs() {
    // The benchmark's buffers: 16 KiB windows over 256 KiB and 4 MiB, plus a short last window.
    for len in [256 << 10, (4 << 20) + 1000] {
        let data = pseudo_random(len);
        for (kind, impls) in [
            (ChecksumType::Crc32, &CRC32),
            (ChecksumType::Crc32c, &CRC32C),
        ] {
            let cd = checksum::compute(kind, 16 << 10, &data).unwrap();
            assert_eq!(cd.checksums.len(), len.div_ceil(16 << 10));
            for (w, (stored, window)) in cd.checksums.iter().zip(data.chunks(16 << 10)).enumerate()
            {
                let expected = assert_all_agree(
                    kind.as_str_name(),
                    &impls[..3],
                    window,
                    &format!("window {w}"),
                );
                assert_eq!(&stored[..], &expected.to_be_bytes(), "{kind:?} window {w}");
            }
        }
    }
}

proptest! {
    #[test]
    fn crc_fast_digest_fed_in_pieces_equals_one_shot(
        data in proptest::collection::vec(any::<u8>(), 0..5000),
        cuts in proptest::collection::vec(0usize..5000, 0..6),
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort_unstable();
        for (algo, one_shot) in [
            (crc_fast::CrcAlgorithm::Crc32IsoHdlc, crc32fast::hash(&data)),
            (crc_fast::CrcAlgorithm::Crc32Iscsi, crc32c::crc32c(&data)),
        ] {
            let mut d = crc_fast::Digest::new(algo);
            let mut start = 0;
            for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
                d.update(&data[start..cut]);
                start = cut;
            }
            prop_assert_eq!(d.finalize() as u32, one_shot, "{:?}", algo);
        }
    }
}

//! Checksum verification on write: the DataNode's `hdds.datanode.chunk.data.validation.check`
//! (`--verify-checksums`, default off). The store calls a [`ChecksumVerifier`] with the received
//! data and the `ChecksumData` the client sent; an `Err` makes the write fail with `IO_EXCEPTION`
//! and nothing is stored (shared/ozone/protocol.md §6).
//!
//! [`CrcVerifier`] is a minimal built-in verifier (NONE, CRC32, CRC32C). It is meant to be swapped
//! for `common::checksum` once that lands: any `Fn(&[u8], &ChecksumData) -> Result<(), String>`
//! is a verifier, so the swap is one line in [`default_verifier`].

use common::proto::{ChecksumData, ChecksumType};
use std::sync::Arc;

/// Checks `data` against the checksums a client computed for it. `Err` carries the reason,
/// which becomes the response's `message`.
pub trait ChecksumVerifier: Send + Sync {
    fn verify(&self, data: &[u8], expected: &ChecksumData) -> Result<(), String>;
}

impl<F> ChecksumVerifier for F
where
    F: Fn(&[u8], &ChecksumData) -> Result<(), String> + Send + Sync,
{
    fn verify(&self, data: &[u8], expected: &ChecksumData) -> Result<(), String> {
        self(data, expected)
    }
}

/// The verifier `--verify-checksums` installs.
pub fn default_verifier() -> Arc<dyn ChecksumVerifier> {
    Arc::new(CrcVerifier)
}

/// Ozone's checksum rules (protocol.md §7) for the CRC types: one checksum per
/// `bytesPerChecksum` window, the last window possibly shorter, each CRC 4 bytes big-endian.
/// NONE passes; SHA256 and MD5 are refused (not implemented here, see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct CrcVerifier;

impl ChecksumVerifier for CrcVerifier {
    fn verify(&self, data: &[u8], expected: &ChecksumData) -> Result<(), String> {
        let kind = ChecksumType::try_from(expected.r#type)
            .map_err(|_| format!("Unknown checksum type {}", expected.r#type))?;
        let crc: fn(&[u8]) -> u32 = match kind {
            ChecksumType::None => return Ok(()),
            ChecksumType::Crc32 => crc32fast::hash,
            ChecksumType::Crc32c => crc32c::crc32c,
            ChecksumType::Sha256 | ChecksumType::Md5 => {
                return Err(format!(
                    "{} checksums are not verified by dn-sim's built-in CRC verifier",
                    kind.as_str_name()
                ));
            }
        };
        let bpc = expected.bytes_per_checksum as usize;
        if bpc == 0 {
            return Err(format!(
                "Invalid bytesPerChecksum 0 for checksum type {}",
                kind.as_str_name()
            ));
        }
        let count = data.len().div_ceil(bpc);
        if expected.checksums.len() != count {
            return Err(format!(
                "Checksum count mismatch: {} bytes at bytesPerChecksum {bpc} need {count} \
                 checksums, got {}",
                data.len(),
                expected.checksums.len()
            ));
        }
        for (i, (window, want)) in data.chunks(bpc).zip(&expected.checksums).enumerate() {
            let got = crc(window).to_be_bytes();
            if want.as_ref() != got {
                return Err(format!(
                    "Checksum mismatch at index {i}: expected {}, computed {}",
                    hex(want),
                    hex(&got)
                ));
            }
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checksums of `data` as a client would send them: `bytes_per_checksum` windows, 4-byte
/// big-endian CRCs (CRC32 or CRC32C), nothing for NONE. For tests and examples.
pub fn crc_checksums(kind: ChecksumType, bytes_per_checksum: u32, data: &[u8]) -> ChecksumData {
    let crc: Option<fn(&[u8]) -> u32> = match kind {
        ChecksumType::Crc32 => Some(crc32fast::hash),
        ChecksumType::Crc32c => Some(crc32c::crc32c),
        _ => None,
    };
    let checksums = match crc {
        Some(crc) if bytes_per_checksum > 0 => data
            .chunks(bytes_per_checksum as usize)
            .map(|w| bytes::Bytes::copy_from_slice(&crc(w).to_be_bytes()))
            .collect(),
        _ => Vec::new(),
    };
    ChecksumData {
        r#type: kind as i32,
        bytes_per_checksum,
        checksums,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn check_values_match_protocol_md() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn accepts_what_a_client_computes_and_refuses_the_rest() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for kind in [ChecksumType::Crc32, ChecksumType::Crc32c] {
            let sums = crc_checksums(kind, 256, &data);
            assert_eq!(sums.checksums.len(), 4);
            assert_eq!(CrcVerifier.verify(&data, &sums), Ok(()));

            let mut flipped = data.clone();
            flipped[700] ^= 1;
            let err = CrcVerifier.verify(&flipped, &sums).unwrap_err();
            assert!(err.contains("index 2"), "{err}");

            let mut short = sums.clone();
            short.checksums.pop();
            assert!(
                CrcVerifier
                    .verify(&data, &short)
                    .unwrap_err()
                    .contains("count")
            );

            let mut zero = sums.clone();
            zero.bytes_per_checksum = 0;
            assert!(
                CrcVerifier
                    .verify(&data, &zero)
                    .unwrap_err()
                    .contains("bytesPerChecksum")
            );
        }
        let none = crc_checksums(ChecksumType::None, 256, &data);
        assert_eq!(CrcVerifier.verify(&data, &none), Ok(()));
        let unknown = ChecksumData {
            r#type: 42,
            bytes_per_checksum: 256,
            checksums: vec![Bytes::from_static(&[0; 4])],
        };
        assert!(
            CrcVerifier
                .verify(&data, &unknown)
                .unwrap_err()
                .contains("42")
        );
        let sha = ChecksumData {
            r#type: ChecksumType::Sha256 as i32,
            ..unknown
        };
        assert!(
            CrcVerifier
                .verify(&data, &sha)
                .unwrap_err()
                .contains("SHA256")
        );
    }

    #[test]
    fn closures_are_verifiers() {
        let always_bad = |_: &[u8], _: &ChecksumData| Err("no".to_string());
        let v: Arc<dyn ChecksumVerifier> = Arc::new(always_bad);
        assert_eq!(
            v.verify(b"x", &crc_checksums(ChecksumType::None, 1, b"x")),
            Err("no".into())
        );
    }
}

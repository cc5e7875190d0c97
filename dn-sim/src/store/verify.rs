//! Checksum verification on write: the DataNode's `hdds.datanode.chunk.data.validation.check`
//! (`--verify-checksums`, default off). The store calls a [`ChecksumVerifier`] with the received
//! data and the `ChecksumData` the client sent; an `Err` makes the write fail with `IO_EXCEPTION`
//! and nothing is stored (shared/ozone/protocol.md §6).
//!
//! The default verifier is Ozone's rules as implemented in `common::checksum` (all five types;
//! the message names the first bad window); any `Fn(&[u8], &ChecksumData) -> Result<(), String>`
//! is a verifier too, for tests.

use common::proto::ChecksumData;
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

/// The verifier `--verify-checksums` installs: `common::checksum::verify`.
pub fn default_verifier() -> Arc<dyn ChecksumVerifier> {
    Arc::new(|data: &[u8], expected: &ChecksumData| {
        common::checksum::verify(data, expected).map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use common::proto::ChecksumType;

    #[test]
    fn accepts_what_a_client_computes_and_refuses_the_rest() {
        let verifier = default_verifier();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for kind in common::checksum::ALL_TYPES
            .into_iter()
            .filter(|k| *k != ChecksumType::None)
        {
            let sums = common::checksum::compute(kind, 256, &data).unwrap();
            assert_eq!(sums.checksums.len(), 4);
            assert_eq!(verifier.verify(&data, &sums), Ok(()));

            let mut flipped = data.clone();
            flipped[700] ^= 1;
            let err = verifier.verify(&flipped, &sums).unwrap_err();
            assert!(err.contains('2'), "names window 2: {err}");

            let mut short = sums.clone();
            short.checksums.pop();
            assert!(verifier.verify(&data, &short).is_err());

            let mut zero = sums.clone();
            zero.bytes_per_checksum = 0;
            assert!(verifier.verify(&data, &zero).is_err());
        }
        let none = common::checksum::compute(ChecksumType::None, 256, &data).unwrap();
        assert_eq!(verifier.verify(&data, &none), Ok(()));
        let unknown = ChecksumData {
            r#type: 42,
            bytes_per_checksum: 256,
            checksums: vec![Bytes::from_static(&[0; 4])],
        };
        assert!(verifier.verify(&data, &unknown).unwrap_err().contains("42"));
    }
}

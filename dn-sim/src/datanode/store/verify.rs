//! Checksum verification on write: the DataNode's `hdds.datanode.chunk.data.validation.check`
//! (`--verify-checksums`, default off). The store calls a [`ChecksumVerifier`] with the received
//! data and the `ChecksumData` the client sent; an `Err` makes the write fail (IO_EXCEPTION with
//! the DataNode's `OzoneChecksumException` text) and nothing is stored.
//!
//! The default verifier is Ozone's own rule, `Checksum.verifyChecksum` →
//! `ChecksumData.verifyChecksumDataMatches` (`this` = the request's ChecksumData, `that` = the one
//! computed from the data), with each release's messages:
//! - 2.1/2.2: "Checksum count mismatched: thatChecksumsCount=N > thisChecksumsCount (=M ) -
//!   thisStartIndex (=0)" when the request lists fewer checksums than the data needs (extras are
//!   ignored), "Checksum mismatched: this.checksums(j) != that.checksums(i), thisStartIndex=0,
//!   this=ChecksumData{…}, that=ChecksumData{…}" for the first differing window;
//! - 2.0: "Original checksumData has no checksums", "Computed checksumData has no checksums"
//!   (empty data), "Checksum mismatch at index i"; too few (but some) checksums make the list's
//!   `get` throw, which the handler answers CONTAINER_INTERNAL_ERROR.
//!
//! Any `Fn(&[u8], &ChecksumData) -> Result<(), String>` is a verifier too, for tests; its `Err`
//! becomes an IO_EXCEPTION with that message.

use crate::datanode::version::OzoneVersion;
use common::proto::{ChecksumData, ChecksumType, Result as OzoneResult};
use std::fmt::Write as _;
use std::sync::Arc;

/// Checks `data` against the checksums a client computed for it. `Err` carries the reason,
/// which becomes the response's `message`.
pub trait ChecksumVerifier: Send + Sync {
    fn verify(&self, data: &[u8], expected: &ChecksumData) -> Result<(), String>;

    /// The DataNode's answer for a failed verification as release `version` gives it: a result
    /// code and the message. By default IO_EXCEPTION with [`ChecksumVerifier::verify`]'s reason.
    fn verify_as(
        &self,
        _version: OzoneVersion,
        data: &[u8],
        expected: &ChecksumData,
    ) -> Result<(), (OzoneResult, String)> {
        self.verify(data, expected)
            .map_err(|reason| (OzoneResult::IoException, reason))
    }
}

impl<F> ChecksumVerifier for F
where
    F: Fn(&[u8], &ChecksumData) -> Result<(), String> + Send + Sync,
{
    fn verify(&self, data: &[u8], expected: &ChecksumData) -> Result<(), String> {
        self(data, expected)
    }
}

/// The verifier `--verify-checksums` installs: Ozone's rules and messages.
pub fn default_verifier() -> Arc<dyn ChecksumVerifier> {
    Arc::new(OzoneVerifier)
}

/// Ozone's `Checksum.verifyChecksum(data, checksumData, 0)`.
struct OzoneVerifier;

const EXCEPTION: &str = "org.apache.hadoop.ozone.common.OzoneChecksumException: ";

impl ChecksumVerifier for OzoneVerifier {
    fn verify(&self, data: &[u8], expected: &ChecksumData) -> Result<(), String> {
        self.verify_as(OzoneVersion::default(), data, expected)
            .map_err(|(_, message)| message)
    }

    fn verify_as(
        &self,
        version: OzoneVersion,
        data: &[u8],
        expected: &ChecksumData,
    ) -> Result<(), (OzoneResult, String)> {
        let io = |m: String| (OzoneResult::IoException, format!("{EXCEPTION}{m}"));
        let kind = match common::checksum::type_from_proto(expected.r#type) {
            Ok(ChecksumType::None) => return Ok(()),
            Ok(kind) => kind,
            // Not reachable from the wire: an unknown required enum value fails to parse.
            Err(e) => return Err(io(e.to_string())),
        };
        // Java's Checksum with bytesPerChecksum 0 never finishes; dn-sim refuses instead.
        let computed = common::checksum::compute(kind, expected.bytes_per_checksum, data)
            .map_err(|e| io(e.to_string()))?;
        let given = &expected.checksums;
        let that = &computed.checksums;
        if version.at_least(OzoneVersion::V2_1) {
            if that.len() > given.len() {
                return Err(io(format!(
                    "Checksum count mismatched: thatChecksumsCount={} > thisChecksumsCount (={} \
                     ) - thisStartIndex (=0)",
                    that.len(),
                    given.len()
                )));
            }
            if let Some(i) = (0..that.len()).find(|&i| given[i] != that[i]) {
                return Err(io(format!(
                    "Checksum mismatched: this.checksums({i}) != that.checksums({i}), \
                     thisStartIndex=0, this={}, that={}",
                    checksum_data_string(expected),
                    checksum_data_string(&computed)
                )));
            }
            return Ok(());
        }
        if given.is_empty() {
            return Err(io("Original checksumData has no checksums".into()));
        }
        if that.is_empty() {
            return Err(io("Computed checksumData has no checksums".into()));
        }
        for (i, sum) in that.iter().enumerate() {
            let Some(stored) = given.get(i) else {
                // protobuf's list `get` throws IndexOutOfBoundsException, which is not the
                // ArrayIndexOutOfBoundsException the DataNode catches: the handler's RuntimeException
                // catch answers it.
                return Err((
                    OzoneResult::ContainerInternalError,
                    format!(
                        "java.lang.IndexOutOfBoundsException: Index: {i}, Size: {}",
                        given.len()
                    ),
                ));
            };
            if stored != sum {
                return Err(io(format!("Checksum mismatch at index {i}")));
            }
        }
        Ok(())
    }
}

/// `ChecksumData.toString()` (2.1+): `ChecksumData{CRC32, bytesPerChecksum=16384,
/// checksums=[3E 4F 11 A0, …]}`, each checksum as `StringUtils.bytes2Hex` (upper-case, spaced).
pub fn checksum_data_string(data: &ChecksumData) -> String {
    let kind = ChecksumType::try_from(data.r#type)
        .map(|t| t.as_str_name().to_string())
        .unwrap_or_else(|_| data.r#type.to_string());
    let mut s = format!(
        "ChecksumData{{{kind}, bytesPerChecksum={}, checksums=[",
        data.bytes_per_checksum
    );
    for (n, sum) in data.checksums.iter().enumerate() {
        if n > 0 {
            s.push_str(", ");
        }
        for (k, b) in sum.iter().enumerate() {
            if k > 0 {
                s.push(' ');
            }
            let _ = write!(s, "{b:02X}");
        }
    }
    s.push_str("]}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn as_(v: OzoneVersion, data: &[u8], sums: &ChecksumData) -> Result<(), (OzoneResult, String)> {
        default_verifier().verify_as(v, data, sums)
    }

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
            for v in OzoneVersion::ALL {
                assert_eq!(as_(v, &data, &sums), Ok(()));
            }

            let mut flipped = data.clone();
            flipped[700] ^= 1;
            let err = verifier.verify(&flipped, &sums).unwrap_err();
            assert!(
                err.starts_with(
                    "org.apache.hadoop.ozone.common.OzoneChecksumException: Checksum mismatched: \
                     this.checksums(2) != that.checksums(2), thisStartIndex=0, this=ChecksumData{"
                ),
                "{err}"
            );
            let (code, msg) = as_(OzoneVersion::V2_0, &flipped, &sums).unwrap_err();
            assert_eq!(code, OzoneResult::IoException);
            assert_eq!(
                msg,
                "org.apache.hadoop.ozone.common.OzoneChecksumException: Checksum mismatch at index 2"
            );

            let mut short = sums.clone();
            short.checksums.pop();
            assert_eq!(
                verifier.verify(&data, &short).unwrap_err(),
                "org.apache.hadoop.ozone.common.OzoneChecksumException: Checksum count mismatched: \
                 thatChecksumsCount=4 > thisChecksumsCount (=3 ) - thisStartIndex (=0)"
            );
            assert_eq!(
                as_(OzoneVersion::V2_0, &data, &short).unwrap_err(),
                (
                    OzoneResult::ContainerInternalError,
                    "java.lang.IndexOutOfBoundsException: Index: 3, Size: 3".to_string()
                )
            );
            let mut longer = sums.clone();
            longer.checksums.push(Bytes::from_static(b"xx"));
            for v in OzoneVersion::ALL {
                assert_eq!(as_(v, &data, &longer), Ok(()), "extras are ignored");
            }

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

    #[test]
    fn empty_lists_and_empty_data_per_release() {
        let data = vec![5u8; 100];
        let mut empty = common::checksum::compute(ChecksumType::Crc32, 64, &data).unwrap();
        empty.checksums.clear();
        assert_eq!(
            as_(OzoneVersion::V2_0, &data, &empty).unwrap_err().1,
            "org.apache.hadoop.ozone.common.OzoneChecksumException: Original checksumData has no \
             checksums"
        );
        assert!(
            as_(OzoneVersion::V2_2, &data, &empty)
                .unwrap_err()
                .1
                .contains("thatChecksumsCount=2 > thisChecksumsCount (=0 )")
        );
        let sums = common::checksum::compute(ChecksumType::Crc32, 64, &data).unwrap();
        assert_eq!(as_(OzoneVersion::V2_2, &[], &sums), Ok(()));
        assert_eq!(
            as_(OzoneVersion::V2_0, &[], &sums).unwrap_err().1,
            "org.apache.hadoop.ozone.common.OzoneChecksumException: Computed checksumData has no \
             checksums"
        );
    }

    #[test]
    fn checksum_data_prints_as_java_does() {
        let cd = ChecksumData {
            r#type: ChecksumType::Crc32 as i32,
            bytes_per_checksum: 16384,
            checksums: vec![
                Bytes::from_static(&[0x3e, 0x4f, 0x11, 0xa0]),
                Bytes::from_static(&[0, 1, 2, 0xff]),
            ],
        };
        assert_eq!(
            checksum_data_string(&cd),
            "ChecksumData{CRC32, bytesPerChecksum=16384, checksums=[3E 4F 11 A0, 00 01 02 FF]}"
        );
        let none = ChecksumData {
            r#type: ChecksumType::None as i32,
            bytes_per_checksum: 0,
            checksums: vec![],
        };
        assert_eq!(
            checksum_data_string(&none),
            "ChecksumData{NONE, bytesPerChecksum=0, checksums=[]}"
        );
    }
}

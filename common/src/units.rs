//! Sizes, durations and rates as Ozone users write them.
//!
//! Ozone's "KB", "MB" and "GB" are powers of 1024 (`ozone.scm.chunk.size = 4MB` is 4 MiB), so
//! `4MB` parses as 4 × 2^20 here, unlike crates such as bytesize. The binary spellings (`KiB`,
//! `MiB`, …) mean the same; a bare number is bytes. Durations take freon's forms (`30s`, `5m`,
//! `1h`, `7d`) plus `ms`, `us` and `ns`; a bare number is seconds, as in freon.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("'{0}' is not a size (examples: 4096, 64KB, 4MB, 1GiB)")]
    Size(String),
    #[error("'{0}' is not a duration (examples: 30s, 500ms, 5m, 1h, 7d)")]
    Duration(String),
    #[error("'{0}' is not a rate (examples: 1000, 500MB/s, 2.5k)")]
    Rate(String),
}

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (s[..end].trim(), s[end..].trim())
}

/// Parses a byte size with Ozone's units (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, ParseError> {
    let err = || ParseError::Size(text.to_string());
    let (num, unit) = split_number(text.trim());
    if num.is_empty() {
        return Err(err());
    }
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(err()),
    };
    let value: f64 = num.parse().map_err(|_| err())?;
    let bytes = value * factor as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// Parses a duration: `250ms`, `30s`, `5m`, `1h`, `7d`, `100us`, `1.5s`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, ParseError> {
    let err = || ParseError::Duration(text.to_string());
    let (num, unit) = split_number(text.trim());
    if num.is_empty() {
        return Err(err());
    }
    let value: f64 = num.parse().map_err(|_| err())?;
    let secs_per_unit = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(value * secs_per_unit).map_err(|_| err())
}

/// Parses a per-second rate: `1000`, `2.5k`, `1M` (counts, powers of 1000), or with a byte unit
/// and `/s` (`500MB/s`, `1GiB/s`, powers of 1024 as in [`parse_size`]). Returns units per second.
pub fn parse_rate(text: &str) -> Result<f64, ParseError> {
    let err = || ParseError::Rate(text.to_string());
    let t = text.trim();
    let body = t.strip_suffix("/s").unwrap_or(t);
    let (num, unit) = split_number(body);
    let value: f64 = num.parse().map_err(|_| err())?;
    let factor = match unit {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        _ => parse_size(&format!("1{unit}")).map_err(|_| err())? as f64,
    };
    let rate = value * factor;
    if rate.is_finite() && rate >= 0.0 {
        Ok(rate)
    } else {
        Err(err())
    }
}

/// Formats a byte count with Ozone's units, e.g. `4MB`, `64KB`, `1536B`.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in [
        ("TB", 1u64 << 40),
        ("GB", 1 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
    ] {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_powers_of_1024() {
        assert_eq!(parse_size("4MB"), Ok(4 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("64KB"), Ok(64 << 10));
        assert_eq!(parse_size("16kb"), Ok(16 << 10));
        assert_eq!(parse_size("1536"), Ok(1536));
        assert_eq!(parse_size("0.5KB"), Ok(512));
        assert_eq!(parse_size("256MB"), Ok(256 << 20));
        for bad in ["", "MB", "-1", "1XB", "1.3B", "abc"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        for bad in ["", "s", "-1s", "10x", "1e400s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1000"), Ok(1000.0));
        assert_eq!(parse_rate("2.5k"), Ok(2500.0));
        assert_eq!(parse_rate("500MB/s"), Ok(500.0 * 1048576.0));
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn format_round_trips() {
        for s in ["4MB", "64KB", "1536B", "1GB"] {
            assert_eq!(format_size(parse_size(s).unwrap()), s);
        }
    }
}

//! The banner time of Dropwizard's ConsoleReporter: Java's
//! `DateFormat.getDateTimeInstance(SHORT, MEDIUM)` in the US locale, e.g. `11/30/26, 10:45:25 AM`.
//! Printed in UTC: loadgen carries no time-zone database.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn format_dropwizard_datetime(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (h12, ampm) = match hh {
        0 => (12, "AM"),
        1..=11 => (hh, "AM"),
        12 => (12, "PM"),
        _ => (hh - 12, "PM"),
    };
    format!(
        "{m}/{d}/{:02}, {h12}:{mm:02}:{ss:02} {ampm}",
        y.rem_euclid(100)
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_like_java_short_medium() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_035_525); // 2026-11-30 10:45:25 UTC
        assert_eq!(format_dropwizard_datetime(t), "11/30/26, 10:45:25 AM");
        assert_eq!(
            format_dropwizard_datetime(UNIX_EPOCH),
            "1/1/70, 12:00:00 AM"
        );
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 13 * 3600); // 2000-02-29 13:00 UTC
        assert_eq!(format_dropwizard_datetime(t), "2/29/00, 1:00:00 PM");
    }
}

//! How a real DataNode's `/prom` prints things (Hadoop's `PrometheusMetricsSink`), shared by the
//! DataNode's metrics families (`metrics.rs`, `csm_metrics.rs`).

/// Highest `Type` number in the protocol (StreamInitWithPutBlock = 25).
pub const MAX_TYPE: usize = 25;

/// A double as Java's `Double.toString` prints it (Hadoop's sink writes gauges so): `0.0`,
/// `1500000.0`, `1.25E7`.
pub fn java_double(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{v:e}");
        let (mantissa, exp) = s.split_once('e').expect("{:e} has an exponent");
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exp}")
    }
}

/// A `MutableRate`'s `_avg_time` as Hadoop reports it: the mean of the samples since the
/// previous scrape (0.0 for an interval without samples). `previous` holds that scrape's
/// (count, total) and becomes `now`.
pub fn interval_average(previous: &mut (u64, u64), now: (u64, u64)) -> f64 {
    let (pc, pt) = std::mem::replace(previous, now);
    let (count, total) = now;
    if count > pc {
        total.wrapping_sub(pt) as f64 / (count - pc) as f64
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_print_as_java_doubles() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1500000.0), "1500000.0");
        assert_eq!(java_double(1234.5), "1234.5");
        assert_eq!(java_double(12500000.0), "1.25E7");
        assert_eq!(java_double(10000000.0), "1.0E7");
    }

    #[test]
    fn the_average_is_over_the_interval_since_the_last_scrape() {
        let mut previous = (0, 0);
        assert_eq!(interval_average(&mut previous, (2, 30)), 15.0);
        assert_eq!(
            interval_average(&mut previous, (2, 30)),
            0.0,
            "no new samples"
        );
        assert_eq!(interval_average(&mut previous, (3, 130)), 100.0);
    }
}

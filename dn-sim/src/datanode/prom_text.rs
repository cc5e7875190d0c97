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
}

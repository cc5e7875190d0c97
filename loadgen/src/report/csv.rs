//! `--format csv`: one header line and one row per run, for sweeps. With `--output FILE` an
//! existing file gets only the row appended, so a loop of runs builds one table.

use crate::results::Results;

/// Fields of one row; `percentiles` decide the latency columns.
fn columns(r: &Results, percentiles: &[f64]) -> Vec<(String, String)> {
    let d = &r.description;
    let mut cols: Vec<(String, String)> = vec![
        ("started_at_unix_ms".into(), r.started_at_ms.to_string()),
        ("workload".into(), d.workload.clone()),
        ("target".into(), d.target.clone()),
        ("load".into(), d.load.clone()),
        ("rate_plan".into(), d.rate_plan.clone().unwrap_or_default()),
        ("stream_mode".into(), d.stream_mode.clone()),
        ("clients".into(), d.clients.to_string()),
        ("threads".into(), d.threads.to_string()),
        ("pipeline".into(), d.pipeline.to_string()),
        ("payload_req_bytes".into(), d.payload_req_bytes.to_string()),
        (
            "payload_resp_bytes".into(),
            d.payload_resp_bytes.to_string(),
        ),
        (
            "elapsed_s".into(),
            format!("{:.3}", r.elapsed.as_secs_f64()),
        ),
        ("requests".into(), r.requests().to_string()),
        ("successes".into(), r.successes().to_string()),
        ("failures".into(), r.failures().to_string()),
        ("late_sends".into(), r.late_sends().to_string()),
        ("requests_per_s".into(), format!("{:.2}", r.throughput())),
        (
            "bytes_received_per_s".into(),
            format!("{:.0}", r.bytes_received_per_s()),
        ),
    ];
    for (name, h) in [("", &r.corrected), ("uncorrected_", &r.uncorrected)] {
        for &p in percentiles {
            cols.push((
                format!("{name}p{p}_ms"),
                format!("{:.3}", h.percentile_ms(p)),
            ));
        }
        cols.push((format!("{name}max_ms"), format!("{:.3}", h.max_ms())));
    }
    cols.push((
        "cpu_share".into(),
        r.generator
            .cpu_share()
            .map_or(String::new(), |s| format!("{s:.3}")),
    ));
    cols.push((
        "generator_limited".into(),
        (!r.generator_limits().is_empty()).to_string(),
    ));
    cols.push(("processes".into(), r.processes.to_string()));
    let res = &r.resilience;
    cols.extend([
        ("retry_policy".into(), d.retry_policy.clone()),
        ("client_throttle".into(), d.client_throttle.clone()),
        ("throttle_scope".into(), d.throttle_scope.clone()),
        (
            "goodput_bytes_per_s".into(),
            format!("{:.0}", r.goodput_bytes_per_s()),
        ),
        (
            "goodput_ops_per_s".into(),
            format!("{:.2}", r.success_rate()),
        ),
        ("attempts".into(), res.attempts.to_string()),
        ("retries".into(), res.retries.to_string()),
        ("rejections".into(), res.rejections.to_string()),
        (
            "locally_throttled".into(),
            res.locally_throttled().to_string(),
        ),
        ("locally_rejected".into(), res.locally_rejected.to_string()),
    ]);
    if !r.ops.is_empty() {
        cols.extend(block_columns(r));
    }
    let errors: Vec<String> = r
        .errors
        .iter()
        .map(|(k, e)| format!("{k}={}", e.count))
        .collect();
    cols.push(("errors".into(), errors.join(" ")));
    cols
}

/// write and read: the shape, MB/s and writes/s, WriteChunk and PutBlock latency, bytes read
/// and verified (empty where a phase did not run).
fn block_columns(r: &Results) -> Vec<(String, String)> {
    let shape = r.description.shape.as_ref();
    let sh = |f: fn(&crate::results::Shape) -> String| shape.map_or(String::new(), f);
    let lat = |op: &str, p: Option<f64>| {
        r.ops.get(op).map_or(String::new(), |o| match p {
            Some(p) => format!("{:.3}", o.latency.percentile_ms(p)),
            None => format!("{:.3}", o.latency.mean_ms()),
        })
    };
    let w = r.write.as_ref();
    let rd = r.read.as_ref();
    vec![
        ("write_size_bytes".into(), sh(|s| s.write_size.to_string())),
        ("chunk_size_bytes".into(), sh(|s| s.chunk_size.to_string())),
        (
            "bytes_per_checksum".into(),
            sh(|s| s.bytes_per_checksum.to_string()),
        ),
        ("checksum".into(), sh(|s| s.checksum.clone())),
        ("checksum_mode".into(), sh(|s| s.checksum_mode.clone())),
        (
            "writes".into(),
            w.map_or(String::new(), |w| w.writes.to_string()),
        ),
        (
            "write_bytes".into(),
            w.map_or(String::new(), |w| w.bytes.to_string()),
        ),
        (
            "write_mb_per_s".into(),
            w.map_or(String::new(), |w| format!("{:.2}", w.mb_per_s)),
        ),
        (
            "writes_per_s".into(),
            w.map_or(String::new(), |w| format!("{:.2}", w.writes_per_s)),
        ),
        ("write_chunk_mean_ms".into(), lat("WriteChunk", None)),
        ("write_chunk_p99_ms".into(), lat("WriteChunk", Some(99.0))),
        ("put_block_mean_ms".into(), lat("PutBlock", None)),
        ("put_block_p99_ms".into(), lat("PutBlock", Some(99.0))),
        (
            "read_bytes".into(),
            rd.map_or(String::new(), |r| r.bytes_read.to_string()),
        ),
        (
            "bytes_verified".into(),
            rd.map_or(String::new(), |r| r.bytes_verified.to_string()),
        ),
        (
            "read_mb_per_s".into(),
            rd.map_or(String::new(), |r| format!("{:.2}", r.mb_per_s)),
        ),
        ("integrity_errors".into(), r.integrity_errors().to_string()),
    ]
}

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The header (if asked for) and the row, each ending in a newline.
pub fn render_with(r: &Results, header: bool, percentiles: &[f64]) -> String {
    let cols = columns(r, percentiles);
    let mut out = String::new();
    if header {
        let names: Vec<String> = cols.iter().map(|(n, _)| field(n)).collect();
        out.push_str(&names.join(","));
        out.push('\n');
    }
    let values: Vec<String> = cols.iter().map(|(_, v)| field(v)).collect();
    out.push_str(&values.join(","));
    out.push('\n');
    out
}

/// With the default percentiles.
pub fn render(r: &Results, header: bool) -> String {
    render_with(r, header, &[50.0, 90.0, 99.0, 99.9, 99.99])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_results;
    use crate::results::ErrorCount;

    #[test]
    fn one_header_and_one_row_with_matching_columns() {
        let mut r = test_results(&[100, 200, 300]);
        r.errors.insert(
            "result:CONTAINER_NOT_FOUND".into(),
            ErrorCount {
                count: 2,
                first_message: "x".into(),
            },
        );
        let text = render_with(&r, true, &[50.0, 99.0]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let names: Vec<&str> = lines[0].split(',').collect();
        let values: Vec<&str> = lines[1].split(',').collect();
        assert_eq!(names.len(), values.len());
        let get = |n: &str| values[names.iter().position(|x| *x == n).unwrap()];
        assert_eq!(get("successes"), "3");
        assert_eq!(get("failures"), "2");
        assert_eq!(get("p50_ms"), "0.200");
        assert_eq!(get("uncorrected_max_ms"), "0.300");
        assert_eq!(get("errors"), "result:CONTAINER_NOT_FOUND=2");
        assert_eq!(render_with(&r, false, &[50.0]).lines().count(), 1);
    }
}

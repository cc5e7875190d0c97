//! `loadgen merge FILE...`: one report from the JSON results of several loadgen processes (a test
//! split across processes or machines, `--shard`). Exact: latency histograms are added bucket by
//! bucket, so the merged percentiles are those of all requests together. Counts, bytes and rates
//! add (a split test's shards each carry the whole test's rate plan, which is not added); elapsed
//! time is the longest run's. A file is a JSON result, or a log holding results between
//! `--result-markers` lines (`kubectl logs` of the shards' pods). The report says how many runs
//! were merged, whether they make up a whole split, whether their measured phases overlapped
//! and each run's start (and its offset from `--start-at`).

use crate::cli::MergeArgs;
use crate::config::ReportConfig;
use crate::error::Error;
use crate::report::markers;
use crate::results::Results;
use crate::run::Summary;
use std::fmt::Write as _;
use std::io::Read as _;

pub fn run(args: &MergeArgs) -> Result<Summary, Error> {
    let report = ReportConfig::from_args(&args.report);
    let output = crate::run::open_output(&report)?;
    let merged = match args.wait {
        Some(limit) => wait_for_split(&args.files, limit)?,
        None => merge_files(&args.files)?,
    };
    let header = format!(
        "loadgen merge: {} result file(s), {} run(s)\ntarget: {}\n{}",
        args.files.len(),
        merged.processes,
        merged.description.target,
        describe_runs(&merged)
    );
    crate::run::finish(header, merged, &report, output, Vec::new())
}

/// The results in one input: a JSON result, or every result between markers in a log.
pub fn results_in(text: &str) -> Result<Vec<Results>, String> {
    match markers::extract(text)? {
        Some(blocks) if blocks.is_empty() => Err("its markers enclose no result".into()),
        Some(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(i, b)| {
                crate::report::json::parse(b)
                    .map_err(|e| format!("result {} of the log: {e}", i + 1))
            })
            .collect(),
        None => crate::report::json::parse(text).map(|r| vec![r]),
    }
}

/// `--wait`: merges `files` every second until their results make up a whole split, or `limit`
/// has passed (then an error that says what is missing). Inputs that cannot be read or parsed
/// yet (a shard still writing its file) are tried again.
fn wait_for_split(
    files: &[std::path::PathBuf],
    limit: std::time::Duration,
) -> Result<Results, Error> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let attempt = merge_files(files);
        let why = match &attempt {
            Ok(r) if r.overlap().complete_split => return attempt,
            Ok(r) => {
                let o = r.overlap();
                format!(
                    "{} result(s), missing shards {:?}, repeated {:?}",
                    o.runs, o.missing_shards, o.repeated_shards
                )
            }
            Err(e) => e.to_string(),
        };
        if std::time::Instant::now() >= deadline {
            return Err(Error::Run(format!(
                "merge --wait {}: no whole split yet: {why}",
                humantime::format_duration(limit)
            )));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The inputs: `-`, files, and the `*.json` files of directories (sorted by name).
fn expand(files: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>, Error> {
    let mut all = Vec::new();
    for path in files {
        if path.is_dir() {
            let mut inside: Vec<std::path::PathBuf> = std::fs::read_dir(path)
                .map_err(|e| Error::Usage(format!("merge: {}: {e}", path.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
                .collect();
            inside.sort();
            all.extend(inside);
        } else {
            all.push(path.clone());
        }
    }
    Ok(all)
}

pub fn merge_files(files: &[std::path::PathBuf]) -> Result<Results, Error> {
    let mut merged: Option<Results> = None;
    for path in &expand(files)? {
        let text = if path.as_os_str() == "-" {
            let mut t = String::new();
            std::io::stdin()
                .read_to_string(&mut t)
                .map_err(|e| Error::Usage(format!("merge: stdin: {e}")))?;
            t
        } else {
            std::fs::read_to_string(path)
                .map_err(|e| Error::Usage(format!("merge: {}: {e}", path.display())))?
        };
        let all = results_in(&text).map_err(|e| {
            Error::Usage(format!(
                "merge: {} is not a loadgen JSON result or a log with results between markers: {e}",
                path.display()
            ))
        })?;
        for results in all {
            match &mut merged {
                None => merged = Some(results),
                Some(m) => {
                    if m.description.workload != results.description.workload {
                        return Err(Error::Usage(format!(
                            "merge: {} measured {}, the others {}",
                            path.display(),
                            results.description.workload,
                            m.description.workload
                        )));
                    }
                    m.merge(&results);
                }
            }
        }
    }
    merged.ok_or_else(|| Error::Usage("merge: no result in the FILEs and DIRs given".into()))
}

/// Lines about the merged runs: the split they make up, their overlap in time and each one's start.
pub fn describe_runs(r: &Results) -> String {
    let o = r.overlap();
    let mut s = String::new();
    if let Some(n) = r.runs.first().and_then(|x| x.shard).map(|s| s.count) {
        if o.complete_split {
            let _ = writeln!(s, "shards: all {n} of the split, each once");
        } else {
            let _ = writeln!(
                s,
                "shards: NOT a whole split of {n}: missing {:?}, more than once {:?}",
                o.missing_shards, o.repeated_shards
            );
        }
    }
    if o.runs > 1 {
        if o.all_overlap {
            let _ = writeln!(
                s,
                "measured phases: all {} overlap, for {:.3} s (the longest lasted {:.3} s); starts spread over {:.1} ms",
                o.runs, o.overlap_s, o.longest_s, o.start_spread_ms
            );
        } else {
            let _ = writeln!(
                s,
                "measured phases: they do NOT all overlap (starts spread over {:.1} ms, the longest lasted {:.3} s): the merged rate is not one instant's",
                o.start_spread_ms, o.longest_s
            );
        }
    }
    for run in &r.runs {
        let who = match run.shard {
            Some(sh) => format!("shard {sh}"),
            None => "run".to_string(),
        };
        let start = humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH
                + std::time::Duration::from_secs_f64(run.started_at_unix_ms.max(0.0) / 1000.0),
        );
        let offset = match run.start_offset_ms {
            Some(ms) => format!(", {ms:+.3} ms from --start-at"),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "  {who}: started {start}{offset}, {:.3} s, {} requests, {} failed",
            run.elapsed_s, run.requests, run.failures
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{RunRecord, phase_overlap};
    use crate::shard::Shard;

    fn run(index: u32, count: u32, start_ms: f64, secs: f64) -> RunRecord {
        RunRecord {
            shard: Some(Shard { index, count }),
            started_at_unix_ms: start_ms,
            elapsed_s: secs,
            requested_start_unix_ms: Some(1000.0),
            start_offset_ms: Some(start_ms - 1000.0),
            requests: 10,
            failures: 0,
        }
    }

    #[test]
    fn overlapping_and_disjoint_phases_are_told_apart() {
        let o = phase_overlap(&[
            run(0, 3, 1000.0, 2.0),
            run(1, 3, 1500.0, 2.0),
            run(2, 3, 1001.0, 1.0),
        ]);
        assert!(o.all_overlap && o.complete_split);
        // [1500, 2001) is in all three.
        assert!((o.overlap_s - 0.501).abs() < 1e-9, "{}", o.overlap_s);
        assert_eq!(o.start_spread_ms, 500.0);
        assert_eq!(o.longest_s, 2.0);
        // The third ends before the second starts: no instant in all three.
        let o = phase_overlap(&[
            run(0, 3, 1000.0, 2.0),
            run(1, 3, 1500.0, 2.0),
            run(2, 3, 1000.0, 0.4),
        ]);
        assert!(!o.all_overlap);
        assert_eq!(o.overlap_s, 0.0);
        // Touching is not overlapping.
        let o = phase_overlap(&[run(0, 2, 1000.0, 1.0), run(1, 2, 2000.0, 1.0)]);
        assert!(!o.all_overlap);
    }

    #[test]
    fn an_incomplete_or_repeated_split_is_named() {
        let o = phase_overlap(&[
            run(0, 4, 1000.0, 1.0),
            run(2, 4, 1000.0, 1.0),
            run(2, 4, 1000.0, 1.0),
        ]);
        assert!(!o.complete_split);
        assert_eq!(o.missing_shards, [1, 3]);
        assert_eq!(o.repeated_shards, [2]);
        // Runs that are not shards are no split at all.
        let mut plain = run(0, 1, 1000.0, 1.0);
        plain.shard = None;
        assert!(!phase_overlap(&[plain]).complete_split);
    }

    #[test]
    fn shard_results_in_a_log_merge_to_their_sums_with_the_whole_rate() {
        let mut logs = String::new();
        let mut expected_requests = 0;
        for i in 0..3u32 {
            let micros: Vec<u64> = (0..(10 + i as u64))
                .map(|k| 100 + 37 * k + u64::from(i))
                .collect();
            expected_requests += micros.len() as u64;
            let mut r = crate::report::test_results(&micros);
            r.description.shard = Some(Shard { index: i, count: 3 });
            r.description.load = "open".into();
            r.description.rate_plan = Some("1000/s".into());
            r.description.peak_rate = Some(1000.0);
            r.runs[0].shard = r.description.shard;
            r.runs[0].started_at_unix_ms += f64::from(i);
            let json = crate::report::json::render(&r, &[50.0]);
            for line in markers::wrap(&json).lines() {
                logs.push_str(&format!("[pod/shard-{i}] {line}\n"));
            }
        }
        let all = results_in(&logs).unwrap();
        assert_eq!(all.len(), 3);
        let mut merged = all[0].clone();
        for r in &all[1..] {
            merged.merge(r);
        }
        assert_eq!(merged.requests(), expected_requests);
        assert_eq!(merged.corrected.count(), expected_requests);
        assert_eq!(
            merged.description.peak_rate,
            Some(1000.0),
            "the whole's rate, not 3000"
        );
        assert_eq!(merged.runs.len(), 3);
        let o = merged.overlap();
        assert!(o.complete_split && o.all_overlap);
        assert_eq!(o.start_spread_ms, 2.0);
        let text = describe_runs(&merged);
        assert!(text.contains("all 3 of the split"), "{text}");
        assert!(text.contains("shard 2/3"), "{text}");
        // A log whose markers hold something else is refused, not merged as nothing.
        assert!(results_in(&markers::wrap("{\"not\": \"a result\"}")).is_err());
    }
}

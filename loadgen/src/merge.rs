//! `loadgen merge FILE...`: one report from the JSON results of several loadgen processes (a test
//! split across processes or machines). Exact: latency histograms are added bucket by bucket, so
//! the merged percentiles are those of all requests together. Counts, bytes and rates add;
//! elapsed time is the longest run's.

use crate::cli::MergeArgs;
use crate::config::ReportConfig;
use crate::error::Error;
use crate::results::Results;
use crate::run::Summary;

pub fn run(args: &MergeArgs) -> Result<Summary, Error> {
    let report = ReportConfig::from_args(&args.report);
    let output = crate::run::open_output(&report)?;
    let merged = merge_files(&args.files)?;
    let header = format!(
        "loadgen merge: {} result file(s), {} run(s)\ntarget: {}\n",
        args.files.len(),
        merged.processes,
        merged.description.target
    );
    crate::run::finish(header, merged, &report, output, Vec::new())
}

pub fn merge_files(files: &[std::path::PathBuf]) -> Result<Results, Error> {
    let mut merged: Option<Results> = None;
    for path in files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Usage(format!("merge: {}: {e}", path.display())))?;
        let results = crate::report::json::parse(&text).map_err(|e| {
            Error::Usage(format!(
                "merge: {} is not a loadgen JSON result: {e}",
                path.display()
            ))
        })?;
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
    merged.ok_or_else(|| Error::Usage("merge: give at least one FILE".into()))
}

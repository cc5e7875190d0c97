//! `--histogram-log FILE`: an HdrHistogram interval log (V2 compressed histograms, values in µs),
//! one entry per report interval, readable by HdrHistogram's `HistogramLogProcessor` and
//! HistogramLogAnalyzer. Untagged entries are successful requests from their intended send time;
//! tag `uncorrected` is their service time, tag `failed` the failed requests.

use crate::engine::live::IntervalSink;
use crate::outcome::WorkerStats;
use common::stats::LatencyHistogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

pub struct HistogramLog {
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
    /// Measurement start; entries' timestamps are relative to it.
    failed: bool,
}

impl HistogramLog {
    /// Creates FILE and writes the log's header (`StartTime` = `start`, the end of the warm-up).
    pub fn create(path: &Path, start: SystemTime) -> std::io::Result<Self> {
        let mut out = BufWriter::new(File::create(path)?);
        let mut serializer = V2DeflateSerializer::new();
        IntervalLogWriterBuilder::new()
            .add_comment("loadgen latency histograms, values in microseconds")
            .with_start_time(start)
            .with_base_time(start)
            .begin_log_with(&mut out, &mut serializer)?;
        writeln!(
            out,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )?;
        out.flush()?;
        Ok(HistogramLog {
            out,
            serializer,
            failed: false,
        })
    }

    fn write(
        &mut self,
        h: &LatencyHistogram,
        start: Duration,
        length: Duration,
        tag: Option<&str>,
    ) -> Result<(), String> {
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|e| e.to_string())?;
        writer
            .write_histogram(h.as_hdr(), start, length, tag.and_then(Tag::new))
            .map_err(|e| format!("{e:?}"))
    }
}

impl IntervalSink for HistogramLog {
    fn interval(&mut self, start: Duration, length: Duration, stats: &WorkerStats) {
        if self.failed {
            return;
        }
        let result = self
            .write(&stats.success, start, length, None)
            .and_then(|_| self.write(stats.service_time(), start, length, Some("uncorrected")))
            .and_then(|_| {
                if stats.failure.is_empty() {
                    Ok(())
                } else {
                    self.write(&stats.failure, start, length, Some("failed"))
                }
            })
            .and_then(|_| self.out.flush().map_err(|e| e.to_string()));
        if let Err(e) = result {
            eprintln!("loadgen: warning: --histogram-log: cannot write: {e}; no more entries");
            self.failed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn intervals_are_written_as_a_readable_log() {
        let dir = std::env::temp_dir().join(format!("loadgen-hlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latency.hlog");
        let mut log = HistogramLog::create(&path, SystemTime::now()).unwrap();
        let mut stats = WorkerStats::default();
        for us in [100u64, 200, 300, 40_000] {
            stats.record_success(Duration::from_micros(us));
        }
        log.interval(Duration::ZERO, Duration::from_secs(1), &stats);
        log.interval(Duration::from_secs(1), Duration::from_secs(1), &stats);
        drop(log);
        let text = std::fs::read(&path).unwrap();
        let mut histograms = Vec::new();
        for entry in IntervalLogIterator::new(&text) {
            if let LogEntry::Interval(h) = entry.unwrap() {
                histograms.push((
                    h.tag().map(|t| t.as_str().to_string()),
                    h.encoded_histogram().to_string(),
                    h.start_timestamp(),
                ));
            }
        }
        assert_eq!(histograms.len(), 4);
        assert_eq!(histograms[0].0, None);
        assert_eq!(histograms[1].0.as_deref(), Some("uncorrected"));
        assert_eq!(histograms[2].2, Duration::from_secs(1));
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&histograms[0].1)
            .unwrap();
        let h: hdrhistogram::Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        assert_eq!(h.len(), 4);
        assert!(h.max() >= 40_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Live progress on stderr: on a terminal an indicatif bar (requests done, the last interval's
//! rate and latency p99, errors so far); otherwise freon's plain `Progress:` line with the same
//! figures, once per `--report-interval`. The p99 is that of the requests that succeeded in the
//! last interval, not of the run so far (`n/a` when none did; see [`Progress::p99_ms`]).

use crate::config::StopAfter;
use crate::engine::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct ProgressDisplay {
    bar: Option<ProgressBar>,
}

impl ProgressDisplay {
    pub fn new(interactive: bool, stop: StopAfter) -> Self {
        if !interactive {
            return ProgressDisplay { bar: None };
        }
        let (len, template) = match stop {
            StopAfter::Requests(n) => (n, "{bar:30} {pos}/{len} requests  {msg}"),
            StopAfter::Elapsed(d) => (d.as_secs().max(1), "{bar:30} {pos}/{len} s  {msg}"),
        };
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        ProgressDisplay { bar: Some(bar) }
    }

    pub fn update(&mut self, p: &Progress) {
        let figures = figures(p);
        match &self.bar {
            Some(bar) => {
                bar.set_position(match p.stop {
                    StopAfter::Requests(_) => p.completed,
                    StopAfter::Elapsed(_) => p.elapsed.as_secs(),
                });
                bar.set_message(figures);
            }
            None => eprintln!("{}, {figures}", line(p)),
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn figures(p: &Progress) -> String {
    if p.warming_up {
        return "warming up (not measured)".into();
    }
    let p99 = match p.p99_ms {
        Some(ms) => format!("{ms:.2} ms"),
        None => "n/a".into(),
    };
    format!("{:.0} requests/s, p99 {p99}, {} errors", p.rate, p.failures)
}

/// freon's progress line.
pub fn line(p: &Progress) -> String {
    match p.stop {
        StopAfter::Requests(n) => format!(
            "Progress: {:.2} % ({} out of {})",
            p.completed as f64 * 100.0 / n as f64,
            p.completed,
            n
        ),
        StopAfter::Elapsed(d) => format!(
            "Progress: {:.2} % ({} s of {} s, {} calls)",
            p.elapsed.as_secs_f64() * 100.0 / d.as_secs_f64(),
            p.elapsed.as_secs(),
            d.as_secs(),
            p.completed
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn plain_lines_keep_freons_prefix_and_add_figures() {
        let p = Progress {
            completed: 37_500,
            elapsed: Duration::from_secs(2),
            warming_up: false,
            stop: StopAfter::Requests(100_000),
            rate: 18_012.4,
            p99_ms: Some(6.824),
            failures: 3,
        };
        assert_eq!(line(&p), "Progress: 37.50 % (37500 out of 100000)");
        assert_eq!(figures(&p), "18012 requests/s, p99 6.82 ms, 3 errors");
        let idle = Progress { p99_ms: None, ..p };
        assert_eq!(figures(&idle), "18012 requests/s, p99 n/a, 3 errors");
    }
}

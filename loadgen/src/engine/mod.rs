//! The engine: workers, connections, scheduling, stop conditions. `threads` workers are spread
//! over the connections (worker i uses connection i mod clients). In `per-request` stream mode
//! each keeps one request outstanding on a new stream per request (freon's model, Ozone's Java
//! client); in `persistent` mode each keeps `--pipeline` requests in flight on one long stream.
//!
//! Closed loop (default): a worker sends its next request when the previous one is answered.
//! Open loop (`--rate`, `--rate-schedule`): [`slots`] hands out requests at their intended times;
//! latency is measured from the intended time, so stalls are not hidden (coordinated omission).
//!
//! Connections and their workers run on I/O threads, one single-threaded runtime each
//! (`io_threads`). The workers of a thread record into that thread's statistics ([`recorder`]),
//! which are handed to the coordinator once per report interval; the coordinator ([`live`])
//! merges them. The hot path shares one atomic request counter and one completion counter across
//! threads, and takes no lock.

mod io_threads;
pub mod live;
mod per_request;
mod persistent;
mod ratis_units;
pub mod recorder;
pub mod request;
pub mod resilience;
pub mod slots;

use crate::config::{RunConfig, StopAfter};
use crate::outcome::WorkerStats;
use crate::workload::Workload;
use common::rates::Meter;
use live::{IntervalPoint, IntervalSink, Live};
use recorder::Recorder;
use slots::Slots;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, watch};

/// State all workers share.
pub struct Shared {
    pub slots: Slots,
    /// Index of the current report interval since the start.
    pub epoch: AtomicU64,
    /// Measured requests finished.
    pub completed: AtomicU64,
    stop_tx: watch::Sender<bool>,
}

impl Shared {
    /// Stops handing out requests and wakes workers waiting for an intended time.
    pub fn stop(&self) {
        self.slots.stop();
        self.stop_tx.send_replace(true);
    }

    fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop_tx.subscribe()
    }
}

pub struct WorkerContext {
    pub idx: usize,
    pub shared: Arc<Shared>,
    pub workload: Arc<dyn Workload>,
    /// The statistics of the worker's I/O thread.
    pub recorder: Rc<RefCell<Recorder>>,
    pub timeout: Duration,
    pub fail_at_end: bool,
    /// Retry policy and client throttle (per-request streams); `None`: one attempt per request.
    pub resilience: Option<resilience::Resilience>,
}

/// What a finished run measured (the warm-up excluded).
pub struct RunOutput {
    pub stats: WorkerStats,
    /// When measurement started (the end of the warm-up).
    pub started_at: SystemTime,
    /// How long measurement lasted.
    pub elapsed: Duration,
    pub meter: Meter,
    /// Measured requests finished (including failed ones).
    pub completed: u64,
    /// The run was stopped early by a signal.
    pub interrupted: bool,
    pub series: Vec<IntervalPoint>,
    /// CPU time loadgen's process used over the whole run (warm-up included), and that run's
    /// wall-clock length.
    pub cpu: Option<Duration>,
    pub wall: Duration,
}

/// Progress as of a tick, for the progress display. It is shown shortly after the tick (at most
/// [`PROGRESS_WAIT_MAX`]), once the I/O threads have handed over the interval that just ended.
pub struct Progress {
    pub completed: u64,
    /// Since measurement started (zero during the warm-up).
    pub elapsed: Duration,
    pub warming_up: bool,
    pub stop: StopAfter,
    /// Measured requests per second over the last interval.
    pub rate: f64,
    /// Latency p99 (from the intended send time), in ms, of the requests that succeeded in the
    /// last interval (the one that ended at the tick): not of the run so far. `None` when none
    /// did, or none was handed over in time (an I/O thread hands its statistics over at its first
    /// answer after the tick; later ones still count in the reports, not in this figure).
    pub p99_ms: Option<f64>,
    /// Failures so far.
    pub failures: u64,
}

/// How long after a tick the progress waits for the interval that ended at the tick to be handed
/// over: a quarter of the report interval, at most this.
pub const PROGRESS_WAIT_MAX: Duration = Duration::from_millis(250);

/// A tick's progress, waiting for its interval's statistics.
struct PendingProgress {
    progress: Progress,
    /// The interval that ended at the tick.
    interval: Option<u64>,
    at: tokio::time::Instant,
}

impl PendingProgress {
    fn show(mut self, live: &Live, display: &mut dyn FnMut(&Progress)) {
        self.progress.p99_ms = self.interval.and_then(|i| live.p99_ms_of(i));
        self.progress.failures = live.failures();
        display(&self.progress);
    }
}

/// Called at every report interval with the run's totals so far (e.g. Prometheus metrics).
pub trait TotalsSink {
    fn update(&mut self, totals: &WorkerStats, late: bool);
}

/// How long in-flight requests may take to finish after Ctrl-C before the report is printed.
pub const DRAIN_GRACE: Duration = Duration::from_secs(5);

pub struct Observers<'a> {
    pub progress: &'a mut dyn FnMut(&Progress),
    pub intervals: Vec<Box<dyn IntervalSink + Send>>,
    pub totals: Option<&'a mut dyn TotalsSink>,
}

/// Connects to `target` (`http://HOST:PORT`, or the in-process null DataNode) and runs the
/// test. `Err` when a connection cannot be opened ([`crate::error::Error::Unreachable`]) or the I/O
/// threads cannot start.
pub async fn run(
    config: &RunConfig,
    target: &crate::connection::Endpoint,
    workload: Arc<dyn Workload>,
    observers: Observers<'_>,
) -> Result<RunOutput, crate::error::Error> {
    let (flush_tx, mut flushes) = mpsc::unbounded_channel();
    let mut io = io_threads::IoThreads::start(config, target, workload, flush_tx)?;
    let warmup = wait_for_start_at(config).await;
    let cpu_at_start = crate::cpu::process_cpu_time();
    let start = Instant::now();
    let start_wall = SystemTime::now();
    let (stop_tx, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        slots: Slots::new(&config.load, config.stop, warmup, start),
        epoch: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        stop_tx,
    });
    io.go(&shared);
    let pacer = shared.slots.is_open_loop().then(|| {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("loadgen-pacer".into())
            .spawn(move || shared.slots.pace())
            .expect("starting the pacer thread")
    });

    let Observers {
        progress,
        intervals,
        mut totals,
    } = observers;
    let interval = config.live.interval;
    let mut live = Live::new(interval, warmup, intervals);
    let mut meter = Meter::new();
    let mut marked = 0;
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::from_std(start) + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let progress_wait = (interval / 4).min(PROGRESS_WAIT_MAX);
    let mut pending: Option<PendingProgress> = None;
    let mut interrupted = false;
    let mut drain_deadline: Option<tokio::time::Instant> = None;
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let measure_start = shared.slots.measure_start();
    loop {
        tokio::select! {
            flush = flushes.recv() => match flush {
                Some(flush) => live.add(flush),
                None => break, // every worker has ended
            },
            _ = ticker.tick() => {
                if let Some(p) = pending.take() {
                    p.show(&live, progress); // the coordinator fell behind
                }
                let now = Instant::now();
                let epoch = (now.duration_since(start).as_secs_f64() / interval.as_secs_f64()) as u64;
                shared.epoch.store(epoch, Relaxed);
                live.tick(epoch);
                let completed = shared.completed.load(Relaxed);
                let measured = now.saturating_duration_since(measure_start);
                meter.mark(completed - marked, measured);
                let rate = (completed - marked) as f64 / interval.as_secs_f64();
                marked = completed;
                if let Some(t) = totals.as_deref_mut() {
                    t.update(&live.total, false);
                }
                pending = Some(PendingProgress {
                    progress: Progress {
                        completed,
                        elapsed: measured,
                        warming_up: now < measure_start,
                        stop: config.stop,
                        rate,
                        p99_ms: None,
                        failures: 0,
                    },
                    interval: epoch.checked_sub(1),
                    at: tokio::time::Instant::now() + progress_wait,
                });
            }
            _ = sleep_until_opt(pending.as_ref().map(|p| p.at)) => {
                if let Some(p) = pending.take() {
                    p.show(&live, progress);
                }
            }
            _ = &mut signal, if !interrupted => {
                interrupted = true;
                shared.stop();
                drain_deadline = Some(tokio::time::Instant::now() + DRAIN_GRACE);
                eprintln!("\nloadgen: stopping: no new requests, waiting up to {DRAIN_GRACE:?} for in-flight ones");
            }
            _ = sleep_until_opt(drain_deadline) => {
                // Aborted workers hand over what they measured when their recorders drop.
                io.abort();
                drain_deadline = None;
            }
        }
    }
    if let Some(p) = pending.take() {
        p.show(&live, progress); // every worker has ended: all was handed over
    }
    io.join();
    shared.stop(); // ends the pacer if the run ended early
    if let Some(pacer) = pacer {
        let _ = pacer.join();
    }
    let end = Instant::now();
    let elapsed = end.saturating_duration_since(measure_start);
    live.finish(end.duration_since(start));
    let completed = shared.completed.load(Relaxed);
    meter.mark(completed - marked, elapsed);
    if let Some(t) = totals {
        t.update(&live.total, true);
    }
    let cpu = match (cpu_at_start, crate::cpu::process_cpu_time()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(RunOutput {
        stats: live.total,
        started_at: start_wall + warmup.min(end.duration_since(start)),
        elapsed,
        meter,
        completed,
        interrupted,
        series: live.series,
        cpu,
        wall: end.duration_since(start),
    })
}

/// `--start-at`: with every connection open, waits until the warm-up must begin for the measured
/// phase to start at the instant, and returns the warm-up to run: `--warmup`, less whatever of it
/// already passed (all of it when the instant itself has passed: the run starts at once and its
/// report shows how late). The wall clock is read once and the wait runs on the monotonic clock.
/// Without `--start-at`: `--warmup`.
async fn wait_for_start_at(config: &RunConfig) -> Duration {
    let Some(at) = config.start_at else {
        return config.warmup;
    };
    let now = Instant::now();
    let measure_at = now + at.duration_since(SystemTime::now()).unwrap_or_default();
    let warmup_at = measure_at
        .checked_sub(config.warmup)
        .unwrap_or(now)
        .max(now);
    if warmup_at > now {
        eprintln!(
            "loadgen: connected; waiting {:.3} s for --start-at",
            warmup_at.duration_since(now).as_secs_f64()
        );
        tokio::time::sleep_until(tokio::time::Instant::from_std(warmup_at)).await;
    }
    measure_at.saturating_duration_since(Instant::now())
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

//! The profile's CPU stage: processor time a real DataNode spends per request that dn-sim does
//! not, spent here for real so that it competes for the machine's cores with everything else
//! that runs there (dn-sim's own work, and a load generator on the same machine).
//!
//! Why real CPU and not a virtual queue like the event loops (`sim::stages`): at echo sleep 0 a
//! real DataNode's limit is the processors it shares with its client. A virtual queue of
//! `cores` servers would cap dn-sim at the DataNode's rate but leave the client the CPU that the
//! DataNode would have taken from it, and a wait costs a timer wake-up that the real path does not
//! have. Work burnt on a core is shared as the OS shares the real DataNode's threads.
//!
//! Two parts, each a cost per request, per request byte and per response byte:
//! - **handler** (`[cpu.handler]`): burnt on the handler before it answers, holding its place in
//!   the pool: on the request's path, so it adds to latency at one request in flight.
//! - **background** (`[cpu.background]`): burnt afterwards by `cores` background threads, off the
//!   request's path (a JVM's garbage collector, Netty's flushes on other threads): it costs
//!   throughput under load but no latency alone. The debt waiting to be burnt is bounded
//!   ([`MAX_DEBT`]); what would exceed it is counted as dropped, not burnt.
//!
//! **Capacity** (`[cpu.capacity] cores`): how many cores' worth of the machine the burns of both
//! parts may take together, as a lock-free single-server queue on a virtual timeline
//! ([`VirtualQueue`]) that charges each request its burn ÷ `cores`. A request whose turn on that
//! timeline begins more than [`CAPACITY_SLACK`] from now waits for it before its handler's
//! burn, holding its handler as a thread waiting for a core does; a request alone never waits.
//! Why: `loadgen calibrate` prices the CPU at the load the baseline kept the machine busy
//! (1.6–1.7 of 2 cores here), the load at which the real DataNode turned its CPU into
//! throughput; dn-sim's own burns would fill both cores and serve a 1 MiB echo 20 % faster than
//! the DataNode did. An echo's payload burnt under the stage's one lock (below) takes no turn:
//! the lock holds it to one core at a time already, and turns reserved for it spaced the echoes'
//! arrivals at the lock so that they never queued there, which erased the lock's tail (10 MiB
//! echoes at 8 × 8: dn-sim's p99 1.03 × its p50, a real Ozone 2.2.0 DataNode's 1.8 ×); as in the
//! DataNode, the echoes now meet at the lock and the OS shares the cores among its holder and
//! the others' burns.
//!
//! A handler's burn of at least [`BLOCKING_BURN`] (a large payload's) runs in one piece on its
//! runtime thread inside `tokio::task::block_in_place`, which hands that thread's other tasks
//! (the connections') to another thread first: the burn is then a thread spinning as a
//! DataNode's handler thread computes, time-sliced against everything else by the OS. Why not
//! slices with a yield between on the runtime thread, as before: a yield on an otherwise idle
//! runtime parks the worker and hands the task to its sibling, a wake-up of an idle core each
//! time, and at one request in flight those gaps made a 1 MiB echo's 11.4 ms burn take 12.5 ms
//! on the wall clock (10 % slower than the DataNode it was fitted to). Shorter burns (and every
//! burn on a current-thread runtime, where there is no other thread) run in slices of [`SLICE`]
//! with a yield between. Time is measured
//! with the thread's CPU clock, so a burn on a busy machine takes longer by the wall clock, as
//! the DataNode's work would; a burn of at most [`WALL_TIMED_BURN`] (a small message's) by the
//! monotonic clock, which costs a ninth as much to read.
//!
//! **An echo's payload** (`[cpu.echo_payload] per_byte_ns`): burnt on the handler before the
//! rest, holding one lock for the whole stage. Why: a real DataNode (Ozone 2.0.0 to 2.2.0) makes
//! an echo's random payload with commons-lang3's `RandomUtils` on a new `SecureRandom`, the
//! JDK's NativePRNG, whose every instance mixes its output through one SHA1PRNG whose
//! `engineNextBytes` is `synchronized`: one payload is made at a time, however many handlers
//! and cores. The lock ([`MonitorLock`]) is held by a thread spinning in `block_in_place` and
//! serves its waiters as a contended HotSpot monitor does, in batches each newest first, which
//! is what doubles the DataNode's tail under load at the same median; on a current-thread
//! runtime there is no one to contend with.

use crate::datanode::timer::sleep_until;
use crate::sim::monitor::MonitorLock;
use crate::sim::profile::CpuCost;
use crate::sim::virtual_time::VirtualQueue;
use metrics::{Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::PrometheusRecorder;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

const META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, None);

/// A handler's burn yields to other tasks after each slice of this much CPU.
pub const SLICE: Duration = Duration::from_micros(250);

/// A handler's burn this long or longer runs in one piece on a thread of its own
/// (`block_in_place`) on a multi-thread runtime.
pub const BLOCKING_BURN: Duration = Duration::from_millis(1);

/// How far ahead of now a request's turn on the capacity's timeline may be and still pass
/// without waiting (a wait is a timer wake-up; the capacity's rate is kept by the reservation).
pub const CAPACITY_SLACK: Duration = Duration::from_micros(200);

/// The background debt is bounded at this much CPU time a background thread.
pub const MAX_DEBT: Duration = Duration::from_secs(1);

/// How often a background thread with nothing owed looks again, while debt was owed recently.
const LOOK_EVERY: Duration = Duration::from_millis(1);

/// How long a background thread keeps looking every [`LOOK_EVERY`] with nothing owed before it
/// sleeps until woken.
const LOOK_FOR: Duration = Duration::from_millis(100);

/// How long a sleeping background thread sleeps unless woken (only bounds a lost wake-up).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; the clock id is a constant the
    // kernel supports for every thread (Linux ≥ 2.6.12).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A burn this short is timed by the monotonic clock rather than the thread's CPU clock.
///
/// Why: reading the thread's CPU clock is a system call (234 ns a read on the 2-core machine,
/// against 26 ns for the monotonic clock through the vDSO), so timing a burn of a 0 B echo
/// (about 0.6 µs) by it cost several times the burn, and the handler held it all: 5–15 % of
/// dn-sim's calls/s at one handler. A burn this much shorter than a scheduler tick is seldom
/// preempted, so its wall time is its CPU time; longer burns keep the CPU clock, which a busy
/// machine's preemption does not fool.
pub const WALL_TIMED_BURN: Duration = Duration::from_micros(20);

/// Whether this task runs on a multi-thread runtime (where `block_in_place` may be called).
fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Spins until this thread has used `ns` more CPU time; returns the CPU time used (for a burn
/// up to [`WALL_TIMED_BURN`], the wall time spun).
pub(crate) fn spin(ns: u64) -> u64 {
    if ns <= WALL_TIMED_BURN.as_nanos() as u64 {
        return spin_wall(ns);
    }
    let start = thread_cpu_ns();
    loop {
        let used = thread_cpu_ns().saturating_sub(start);
        if used >= ns || start == 0 {
            return used;
        }
        std::hint::spin_loop();
    }
}

/// Spins for `ns` of wall time; returns the nanoseconds spun.
fn spin_wall(ns: u64) -> u64 {
    let start = Instant::now();
    let until = Duration::from_nanos(ns);
    loop {
        let spun = start.elapsed();
        if spun >= until {
            return u64::try_from(spun.as_nanos()).unwrap_or(u64::MAX);
        }
        std::hint::spin_loop();
    }
}

struct Shared {
    /// Background CPU owed, in ns.
    debt: AtomicU64,
    max_debt: u64,
    burnt_background: Histogram,
    dropped: Gauge,
    debt_gauge: Gauge,
    /// Background threads asleep or about to sleep: owing wakes them when there are any.
    sleepers: AtomicUsize,
    /// The background threads, to wake.
    threads: OnceLock<Vec<Thread>>,
    /// Times a background thread woke from its sleep (tests: an idle stage does not poll).
    wakeups: AtomicU64,
    /// The stage is gone: its background threads end.
    closed: AtomicBool,
}

impl Shared {
    fn wake_background(&self) {
        for thread in self.threads.get().into_iter().flatten() {
            thread.unpark();
        }
    }
}

/// The CPU stage of a profile.
pub struct CpuStage {
    handler: CpuCost,
    background: CpuCost,
    shared: Arc<Shared>,
    burnt_handler: Histogram,
    capacity: Option<Capacity>,
    echo_payload: Option<EchoPayload>,
}

/// `[cpu.echo_payload]`: an echo's payload, made under one lock for the whole stage.
struct EchoPayload {
    ns_per_byte: f64,
    lock: MonitorLock,
    /// How long a payload waited for the lock.
    wait: Histogram,
}

impl EchoPayload {
    /// Burns `ns` holding the lock (after waiting for it); returns the CPU time used.
    fn burn(&self, ns: u64) -> u64 {
        let asked = Instant::now();
        let _held = self.lock.lock();
        self.wait.record(asked.elapsed().as_secs_f64());
        spin(ns)
    }
}

/// The cores' worth of the machine the burns may take together (`[cpu.capacity]`).
struct Capacity {
    epoch: Instant,
    queue: VirtualQueue,
    /// 1 / cores: the timeline's ns per ns of CPU burnt.
    per_cpu_ns: f64,
    wait: Histogram,
}

impl Capacity {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Reserves the timeline for `cpu_ns` of burn arriving now; returns when its turn begins
    /// (ns since the epoch).
    fn reserve(&self, cpu_ns: u64) -> u64 {
        let cost = (cpu_ns as f64 * self.per_cpu_ns) as u64;
        self.queue.reserve(self.now(), cost)
    }

    /// Waits until the turn that begins at `start`, less the slack, when that is still ahead.
    async fn wait(&self, start: u64) {
        let now = self.now();
        let slack = CAPACITY_SLACK.as_nanos() as u64;
        if start > now.saturating_add(slack) {
            self.wait
                .record(Duration::from_nanos(start - now).as_secs_f64());
            sleep_until(self.epoch + Duration::from_nanos(start - slack)).await;
        } else {
            self.wait.record(0.0);
        }
    }
}

impl CpuStage {
    /// A stage with `handler` and `background` costs and `threads` background threads (started
    /// at once when the background costs anything; they end when the stage is dropped), its
    /// series on `recorder`.
    pub fn new(
        handler: CpuCost,
        background: CpuCost,
        threads: usize,
        capacity_cores: Option<f64>,
        echo_payload_ns_per_byte: f64,
        recorder: &PrometheusRecorder,
    ) -> Self {
        recorder.describe_histogram(
            KeyName::from_const_str("dn_sim_cpu_burn_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "CPU the profile's CPU stage spent per burn, on a handler (one a request) or in the background (one a slice); sum: CPU time",
            ),
        );
        recorder.describe_gauge(
            KeyName::from_const_str("dn_sim_cpu_background_dropped_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "Background CPU owed beyond the bounded debt, not spent (the machine fell behind)",
            ),
        );
        recorder.describe_gauge(
            KeyName::from_const_str("dn_sim_cpu_background_debt_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str("Background CPU owed and not yet spent"),
        );
        let burnt = |place: &'static str| {
            recorder.register_histogram(
                &Key::from_parts(
                    "dn_sim_cpu_burn_seconds",
                    vec![metrics::Label::new("where", place)],
                ),
                &META,
            )
        };
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            debt: AtomicU64::new(0),
            max_debt: MAX_DEBT.as_nanos() as u64 * threads as u64,
            burnt_background: burnt("background"),
            dropped: recorder.register_gauge(
                &Key::from_name("dn_sim_cpu_background_dropped_seconds"),
                &META,
            ),
            debt_gauge: recorder
                .register_gauge(&Key::from_name("dn_sim_cpu_background_debt_seconds"), &META),
            sleepers: AtomicUsize::new(0),
            threads: OnceLock::new(),
            wakeups: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        let capacity = capacity_cores.filter(|c| c.is_finite() && *c > 0.0).map(|cores| {
            recorder.describe_histogram(
                KeyName::from_const_str("dn_sim_cpu_capacity_wait_seconds"),
                Some(Unit::Seconds),
                SharedString::const_str(
                    "How long a request waited for its turn of the CPU stage's capacity ([cpu.capacity] cores) before its burn",
                ),
            );
            Capacity {
                epoch: Instant::now(),
                queue: VirtualQueue::default(),
                per_cpu_ns: 1.0 / cores,
                wait: recorder.register_histogram(
                    &Key::from_name("dn_sim_cpu_capacity_wait_seconds"),
                    &META,
                ),
            }
        });
        let echo_payload = (echo_payload_ns_per_byte.is_finite() && echo_payload_ns_per_byte > 0.0)
            .then(|| {
                recorder.describe_histogram(
                    KeyName::from_const_str("dn_sim_cpu_echo_payload_wait_seconds"),
                    Some(Unit::Seconds),
                    SharedString::const_str(
                        "How long an echo's payload waited for the one lock under which payloads are made ([cpu.echo_payload]; a real DataNode's SecureRandom)",
                    ),
                );
                EchoPayload {
                    ns_per_byte: echo_payload_ns_per_byte,
                    lock: MonitorLock::new(),
                    wait: recorder.register_histogram(
                        &Key::from_name("dn_sim_cpu_echo_payload_wait_seconds"),
                        &META,
                    ),
                }
            });
        let stage = Self {
            handler,
            background,
            burnt_handler: burnt("handler"),
            shared,
            capacity,
            echo_payload,
        };
        if !background.is_zero() {
            let mut started = Vec::with_capacity(threads);
            for i in 0..threads {
                let weak = Arc::downgrade(&stage.shared);
                let spawned = std::thread::Builder::new()
                    .name(format!("dn-sim-cpu-bg-{i}"))
                    .spawn(move || background_loop(weak));
                match spawned {
                    Ok(handle) => started.push(handle.thread().clone()),
                    Err(e) => tracing::warn!("cannot start a background CPU thread: {e}"),
                }
            }
            let _ = stage.shared.threads.set(started);
        }
        stage
    }

    /// Burns the handler's CPU for a request of `request_bytes` (a WriteChunk when
    /// `write_chunk`) answered with `response_bytes` (of them `echo_payload_bytes` an echo's
    /// payload), after its turn of the capacity (when there is one): the echo's payload under
    /// the stage's one lock, the rest in slices with a yield between; then owes the background
    /// its part.
    pub async fn serve(
        &self,
        request_bytes: usize,
        response_bytes: usize,
        echo_payload_bytes: usize,
        write_chunk: bool,
    ) {
        let owed = self
            .background
            .nanos(request_bytes, response_bytes, write_chunk);
        let mut left = self
            .handler
            .nanos(request_bytes, response_bytes, write_chunk);
        let payload = self
            .echo_payload
            .as_ref()
            .map_or(0, |p| (p.ns_per_byte * echo_payload_bytes as f64) as u64);
        // The payload's burn takes no turn of the capacity: its lock already holds it to one
        // core at a time (see the module's doc, Capacity).
        if let Some(c) = &self.capacity {
            c.wait(c.reserve(left.saturating_add(owed))).await;
        }
        let slice = SLICE.as_nanos() as u64;
        let mut burnt = 0;
        if let Some(p) = self.echo_payload.as_ref().filter(|_| payload > 0) {
            burnt += if on_multi_thread_runtime() {
                tokio::task::block_in_place(|| p.burn(payload))
            } else {
                // One thread: no other handler to hold the lock meanwhile.
                spin(payload)
            };
        }
        if left >= BLOCKING_BURN.as_nanos() as u64 && on_multi_thread_runtime() {
            burnt += tokio::task::block_in_place(|| spin(left));
            left = 0;
        }
        while left > 0 {
            let used = spin(left.min(slice)).max(1);
            burnt += used;
            left = left.saturating_sub(used);
            if left > 0 {
                tokio::task::yield_now().await;
            }
        }
        if burnt > 0 {
            self.burnt_handler.record(burnt as f64 / 1e9);
        }
        self.owe(owed);
    }

    /// Adds `ns` to the background debt, up to its bound.
    fn owe(&self, ns: u64) {
        if ns == 0 {
            return;
        }
        let s = &self.shared;
        let before = s
            .debt
            .fetch_update(SeqCst, SeqCst, |d| Some((d + ns).min(s.max_debt)))
            .unwrap_or(0);
        let dropped = (before + ns).saturating_sub(s.max_debt);
        if dropped > 0 {
            s.dropped.increment(dropped as f64 / 1e9);
        }
        // After the debt (both SeqCst): a thread that said it sleeps before this sees the debt
        // on its last look or is counted here. Only after an idle spell: under load the
        // threads look every millisecond and nobody sleeps.
        if s.sleepers.load(SeqCst) > 0 {
            s.wake_background();
        }
    }

    /// Background CPU owed now, in ns.
    pub fn debt_ns(&self) -> u64 {
        self.shared.debt.load(Relaxed)
    }
}

impl Drop for CpuStage {
    /// Its background threads end now rather than at their next look.
    fn drop(&mut self) {
        self.shared.closed.store(true, SeqCst);
        self.shared.wake_background();
    }
}

/// A background thread: takes a slice of the debt at a time and burns it; with nothing owed,
/// looks again every [`LOOK_EVERY`] for [`LOOK_FOR`], then sleeps until debt is owed; ends when
/// the stage is gone.
///
/// Why the looks: woken at once by every request's debt instead, the burns ran beside the
/// response they followed and cost dn-sim 4-5 % of its loaded 1 MiB echoes (and a 0 B echo's
/// tens of ns of debt a wake-up each). Why the sleep: looking forever, two threads took 3 % of
/// a core from an idle dn-sim, and from a real DataNode measured beside it.
fn background_loop(shared: Weak<Shared>) {
    let slice = SLICE.as_nanos() as u64 * 4;
    let mut idle_since: Option<Instant> = None;
    loop {
        let Some(s) = shared.upgrade() else { return };
        if s.closed.load(SeqCst) {
            return;
        }
        let taken = s
            .debt
            .fetch_update(Relaxed, Relaxed, |d| (d > 0).then(|| d - d.min(slice)))
            .map_or(0, |d| d.min(slice));
        if taken == 0 {
            s.debt_gauge.set(0.0);
            if idle_since.get_or_insert_with(Instant::now).elapsed() < LOOK_FOR {
                drop(s);
                std::thread::sleep(LOOK_EVERY);
                continue;
            }
            // Counted first, then one more look: debt owed after the count wakes this thread
            // (`owe` reads the count after adding), debt owed before it is seen here.
            s.sleepers.fetch_add(1, SeqCst);
            let owed = s.debt.load(SeqCst) > 0;
            drop(s);
            if !owed {
                std::thread::park_timeout(IDLE_WAIT);
            }
            let Some(s) = shared.upgrade() else { return };
            s.sleepers.fetch_sub(1, SeqCst);
            if !owed {
                s.wakeups.fetch_add(1, Relaxed);
            }
            continue;
        }
        idle_since = None;
        let used = spin(taken);
        s.burnt_background.record(used as f64 / 1e9);
        s.debt_gauge.set(s.debt.load(Relaxed) as f64 / 1e9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;
    use std::time::Instant;

    fn cost(us: f64, resp_ns: f64) -> CpuCost {
        CpuCost {
            per_message_us: us,
            per_request_byte_ns: 0.0,
            per_response_byte_ns: resp_ns,
            per_write_chunk_us: 0.0,
        }
    }

    /// The value of series `name` in the exposition `text`.
    fn value(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    #[test]
    fn a_write_chunk_burns_its_own_cost_and_other_commands_do_not() {
        let r = PrometheusBuilder::new().build_recorder();
        let handler = CpuCost {
            per_write_chunk_us: 2000.0,
            ..CpuCost::default()
        };
        let stage = CpuStage::new(handler, CpuCost::default(), 2, None, 0.0, &r);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let before = thread_cpu_ns();
        rt.block_on(stage.serve(1 << 20, 100, 0, false));
        let other = thread_cpu_ns() - before;
        let before = thread_cpu_ns();
        rt.block_on(stage.serve(1 << 20, 100, 0, true));
        let chunk = thread_cpu_ns() - before;
        assert!(chunk >= 2_000_000, "a WriteChunk: {chunk} ns of CPU");
        assert!(
            other < chunk / 2,
            "another command: {other} ns, a WriteChunk {chunk}"
        );
    }

    #[test]
    fn the_handler_spends_its_cpu_before_it_answers() {
        let r = PrometheusBuilder::new().build_recorder();
        // 1 ms a message and 1 ns a response byte: 3 ms for a 2,000,000-byte answer.
        let stage = CpuStage::new(cost(1000.0, 1.0), CpuCost::default(), 2, None, 0.0, &r);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let before = thread_cpu_ns();
        rt.block_on(stage.serve(100, 2_000_000, 0, false));
        let used = thread_cpu_ns() - before;
        assert!(used >= 3_000_000, "{used} ns of CPU");
        let text = r.handle().render();
        let sum = value(&text, "dn_sim_cpu_burn_seconds_sum{where=\"handler\"}");
        assert!((0.003..0.1).contains(&sum), "{text}");
        assert_eq!(
            value(&text, "dn_sim_cpu_burn_seconds_count{where=\"handler\"}"),
            1.0
        );
        // No background cost: nothing owed, nothing spent there.
        assert_eq!(stage.debt_ns(), 0);
        let background = text
            .lines()
            .find_map(|l| l.strip_prefix("dn_sim_cpu_burn_seconds_count{where=\"background\"} "));
        assert!(matches!(background, None | Some("0")), "{text}");
    }

    #[test]
    fn a_long_burn_runs_in_one_piece_on_a_multi_thread_runtime_and_in_slices_on_one_thread() {
        let r = PrometheusBuilder::new().build_recorder();
        // 5 ms: twenty slices, and at least BLOCKING_BURN.
        let stage = CpuStage::new(cost(5000.0, 0.0), CpuCost::default(), 1, None, 0.0, &r);
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        // Spawned, so that it runs on a worker, where block_in_place hands the worker's other
        // tasks to another thread: one poll, no yield between slices.
        let burn = multi.spawn(async move {
            let n = polls_here(stage.serve(0, 0, 0, false)).await;
            (n, stage)
        });
        let (n, _stage) = multi.block_on(burn).unwrap();
        assert_eq!(n, 1, "polls of a 5 ms burn on a multi-thread runtime");
        // On a current-thread runtime there is no other thread: slices with a yield between.
        let one = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let r = PrometheusBuilder::new().build_recorder();
        let stage = CpuStage::new(cost(5000.0, 0.0), CpuCost::default(), 1, None, 0.0, &r);
        let n = one.block_on(polls_here(stage.serve(0, 0, 0, false)));
        assert!(
            n >= 10,
            "{n} polls of a 5 ms burn on a current-thread runtime"
        );
        assert_eq!(
            value(
                &r.handle().render(),
                "dn_sim_cpu_burn_seconds_count{where=\"handler\"}"
            ),
            1.0
        );
    }

    /// `fut`, counting its polls, as a future.
    async fn polls_here<F: std::future::Future>(fut: F) -> u32 {
        let mut fut = std::pin::pin!(fut);
        let mut n = 0;
        std::future::poll_fn(|cx| {
            n += 1;
            fut.as_mut().poll(cx).map(|_| n)
        })
        .await
    }

    #[test]
    fn a_short_burn_is_timed_by_the_wall_clock_and_spends_at_least_its_time() {
        let r = PrometheusBuilder::new().build_recorder();
        // 5 µs a message: under WALL_TIMED_BURN, so spun by the monotonic clock.
        let stage = CpuStage::new(cost(5.0, 0.0), CpuCost::default(), 1, None, 0.0, &r);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let start = Instant::now();
        for _ in 0..400 {
            rt.block_on(stage.serve(0, 0, 0, false));
        }
        // 400 burns of 5 µs: at least 2 ms spun, each burn counted.
        assert!(start.elapsed() >= Duration::from_millis(2));
        let text = r.handle().render();
        assert!(
            value(&text, "dn_sim_cpu_burn_seconds_sum{where=\"handler\"}") >= 0.002,
            "{text}"
        );
        assert_eq!(
            value(&text, "dn_sim_cpu_burn_seconds_count{where=\"handler\"}"),
            400.0
        );
        assert!(spin_wall(5_000) >= 5_000);
    }

    #[test]
    fn the_capacity_spaces_burns_by_their_share_of_its_cores_and_one_alone_never_waits() {
        let r = PrometheusBuilder::new().build_recorder();
        // 1 ms on the handler and 1 ms owed to the background, at most half a core together:
        // each request takes 4 ms of the capacity's timeline.
        let stage = CpuStage::new(cost(1000.0, 0.0), cost(1000.0, 0.0), 1, Some(0.5), 0.0, &r);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let start = Instant::now();
        rt.block_on(stage.serve(0, 0, 0, false));
        let text = r.handle().render();
        // Alone: its turn begins at once.
        assert_eq!(
            value(&text, "dn_sim_cpu_capacity_wait_seconds_sum"),
            0.0,
            "{text}"
        );
        for _ in 0..4 {
            rt.block_on(stage.serve(0, 0, 0, false));
        }
        // Turns of 4 ms back to back: the fifth begins 16 ms after the first, and burns 1 ms.
        let least = Duration::from_millis(17) - CAPACITY_SLACK;
        assert!(start.elapsed() >= least, "{:?}", start.elapsed());
        let text = r.handle().render();
        assert_eq!(value(&text, "dn_sim_cpu_capacity_wait_seconds_count"), 5.0);
        assert!(
            value(&text, "dn_sim_cpu_capacity_wait_seconds_sum") > 0.0,
            "{text}"
        );
        // With the machine's cores (none given), no wait is recorded at all.
        let r = PrometheusBuilder::new().build_recorder();
        let free = CpuStage::new(cost(1000.0, 0.0), cost(1000.0, 0.0), 1, None, 0.0, &r);
        rt.block_on(free.serve(0, 0, 0, false));
        assert!(!r.handle().render().contains("capacity_wait"));
    }

    #[test]
    fn an_echo_payloads_burn_takes_no_turn_of_the_capacity() {
        let r = PrometheusBuilder::new().build_recorder();
        // Nothing on the handler or the background outside the payload, at most half a core:
        // a 2 ms payload (10 ns a byte) would take 4 ms of the capacity's timeline.
        let stage = CpuStage::new(
            CpuCost::default(),
            CpuCost::default(),
            1,
            Some(0.5),
            10.0,
            &r,
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..5 {
            rt.block_on(stage.serve(0, 200_000, 200_000, false));
        }
        let text = r.handle().render();
        // Five turns back to back, none waited: the payloads' 10 ms were not reserved.
        assert_eq!(value(&text, "dn_sim_cpu_capacity_wait_seconds_count"), 5.0);
        assert_eq!(
            value(&text, "dn_sim_cpu_capacity_wait_seconds_sum"),
            0.0,
            "{text}"
        );
        assert!(
            value(&text, "dn_sim_cpu_burn_seconds_sum{where=\"handler\"}") >= 0.010,
            "{text}"
        );
    }

    #[test]
    fn echo_payloads_are_made_one_at_a_time_under_the_stages_lock() {
        let r = PrometheusBuilder::new().build_recorder();
        // 10 ns a payload byte: 50 ms for a 5,000,000-byte echo, and 2 ms a message outside
        // the lock.
        let stage = Arc::new(CpuStage::new(
            cost(2000.0, 0.0),
            CpuCost::default(),
            1,
            None,
            10.0,
            &r,
        ));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        // Two echoes at once, each on a worker of its own: whichever comes second waits for
        // the first's whole payload, though a core is free for it.
        let serves: Vec<_> = (0..2)
            .map(|_| {
                let s = Arc::clone(&stage);
                rt.spawn(async move { s.serve(100, 5_000_100, 5_000_000, false).await })
            })
            .collect();
        for s in serves {
            rt.block_on(s).unwrap();
        }
        let text = r.handle().render();
        assert_eq!(
            value(&text, "dn_sim_cpu_echo_payload_wait_seconds_count"),
            2.0,
            "{text}"
        );
        let waited = value(&text, "dn_sim_cpu_echo_payload_wait_seconds_sum");
        // The second waited for much of the first's 50 ms (on a busy machine the two may not
        // start together; tens of ms apart is rare).
        assert!(waited >= 0.010, "waited {waited} s in all\n{text}");
        // Both burnt their payload and the rest on the handler, each counted once.
        assert!(
            value(&text, "dn_sim_cpu_burn_seconds_sum{where=\"handler\"}") >= 0.104,
            "{text}"
        );
        // A request that is not an echo's payload takes no lock.
        rt.block_on(stage.serve(100, 5_000_100, 0, false));
        assert_eq!(
            value(
                &r.handle().render(),
                "dn_sim_cpu_echo_payload_wait_seconds_count"
            ),
            2.0
        );
    }

    #[test]
    fn the_background_spends_what_is_owed_and_drops_beyond_its_bound() {
        let r = PrometheusBuilder::new().build_recorder();
        let stage = CpuStage::new(CpuCost::default(), cost(2000.0, 0.0), 1, None, 0.0, &r);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let before = thread_cpu_ns();
        for _ in 0..5 {
            rt.block_on(stage.serve(0, 0, 0, false)); // 10 ms owed in all, none spent here
        }
        assert!(thread_cpu_ns() - before < 5_000_000);
        let deadline = Instant::now() + Duration::from_secs(30);
        let spent = |r: &PrometheusRecorder| {
            let text = r.handle().render();
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("dn_sim_cpu_burn_seconds_sum{where=\"background\"} ")?
                        .parse::<f64>()
                        .ok()
                })
                .unwrap_or(0.0)
        };
        while spent(&r) < 0.01 {
            assert!(Instant::now() < deadline, "{}", r.handle().render());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(spent(&r) < 0.05);
        // Owing more than the bound (1 s a thread) drops the excess.
        let big = CpuStage::new(CpuCost::default(), cost(600_000.0, 0.0), 1, None, 0.0, &r);
        big.owe(600_000_000);
        big.owe(600_000_000);
        big.owe(600_000_000);
        let text = r.handle().render();
        let dropped = value(&text, "dn_sim_cpu_background_dropped_seconds");
        assert!((0.8 - 1e-9..=1.8 + 1e-9).contains(&dropped), "{text}");
        assert!(big.debt_ns() <= MAX_DEBT.as_nanos() as u64);
    }

    #[test]
    fn an_idle_background_sleeps_until_debt_is_owed() {
        let r = PrometheusBuilder::new().build_recorder();
        let stage = CpuStage::new(CpuCost::default(), cost(1000.0, 0.0), 2, None, 0.0, &r);
        let s = &stage.shared;
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.sleepers.load(SeqCst) < 2 {
            assert!(
                Instant::now() < deadline,
                "the background threads never slept"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Asleep: no looks (looking every millisecond made 2 threads × 50 of them here).
        let woken = s.wakeups.load(SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        assert!(s.wakeups.load(SeqCst) - woken <= 2, "an idle stage polls");
        // Owed while asleep: spent at once, long before a sleep's end (1 s).
        stage.owe(2_000_000);
        let deadline = Instant::now() + IDLE_WAIT / 2;
        while stage.debt_ns() > 0 {
            assert!(
                Instant::now() < deadline,
                "the debt waited for a sleep's end"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

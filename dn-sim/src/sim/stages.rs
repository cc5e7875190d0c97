//! The DataNode's stages a request passes on the gRPC path (port 9859), each a queue with its
//! own metrics, with the costs of a `--profile` ([`crate::sim::profile`]):
//!
//! 1. its connection's **event loop** on the way in (a request: `event_loops.request`),
//! 2. the **handler pool** ([`crate::sim::pool`]): waiting for a handler, then the handler's own
//!    time for the request and its response (`handler.*`), besides injected delays and echo
//!    sleeps,
//! 3. the same event loop on the way out (a response: `event_loops.response`),
//! 4. the **CPU** ([`crate::sim::cpu`]): processor time the real DataNode spends beyond dn-sim's
//!    own, spent for real on the handler (before it answers) and in the background. The loops and
//!    the handler's own time are waits on the simulation's clock; the CPU is not, because at
//!    echo sleep 0 the real DataNode's limit is the cores it shares with its client, and a wait
//!    would leave the client the CPU that the DataNode takes from it,
//! 5. the **latency floor** (`[latency] floor_us`): a request answered sooner than this after it
//!    arrived waits for the rest, holding nothing (the real DataNode's thread hand-offs, which
//!    cost latency but no CPU). A request that queued or worked longer does not wait, so under
//!    load, where requests queue anyway, the floor costs no timer wake-up. Each request's floor
//!    is longer by an exponential time of mean `[latency] jitter_mean_us`, drawn on arrival.
//!
//! What a real DataNode does (Ozone 2.0.0, 2.1.0 and 2.2.0 alike, `XceiverServerGrpc`'s
//! constructor): `poolSize` = `hdds.datanode.read.chunk.threads.per.volume` × volumes; the
//! handler pool is `.executor(readExecutors)`, a fixed pool of `poolSize` threads; and
//! `new EpollEventLoopGroup(poolSize / 10, …)` (Nio without epoll) is both the boss and the worker
//! event loop group of the `NettyServerBuilder`. A group of 0 threads is Netty's default, 2 ×
//! available processors (`io.netty.eventLoopThreads` unset). So a pool of 10–19 has one event loop
//! for all connections, 20–29 two, and a pool of 1–9 has 2 × cores ([`event_loop_count`]). Netty
//! binds each accepted connection to one loop for its life, round robin
//! (`EventExecutorChooser`), after the listening socket took the first pick; a loop serves its
//! connections' reads, HTTP/2 framing and writes one at a time, whatever the handler pool could do
//! in parallel. grpc-java parses a request and serializes its response on the handler's thread
//! (the application executor), which is why those costs belong to the handler stage.
//!
//! An event loop is a single-server FIFO queue on a virtual timeline, as `sim::disk`'s device: a
//! message of cost `c` arriving at `t` is served from `start = max(t, free_at)` to `start + c`,
//! `free_at` moves to the end with one `compare_exchange`, and the caller sleeps (the precise
//! timer, `datanode::timer`) until the end. No lock, no task and no allocation per message; a
//! late wake-up delays that answer but not the loop's next message, so a loop of cost `c` serves
//! at most 1/`c` messages a second and scheduling noise does not lower that.
//!
//! Left out: the Ratis port's stages (its log and apply).
//!
//! Without a profile, or with a profile whose costs are all zero, no stage exists
//! ([`Stages::none`]): a request takes exactly the path it took before stages were modelled.

use crate::datanode::timer::sleep_until;
use crate::datanode::version::OzoneVersion;
use crate::sim::cpu::CpuStage;
use crate::sim::profile::{MessageCost, Profile, SleepTail};
use crate::sim::virtual_time::VirtualQueue;
use arc_swap::ArcSwap;
use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::PrometheusRecorder;
use rand::Rng;
use rand::rngs::SmallRng;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

const META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, None);

/// The gRPC server's Netty event loops of a DataNode of `release` whose handler pool has
/// `pool_size` threads, on a machine of `cores` processors: `XceiverServerGrpc` (Ozone 2.0.0,
/// 2.1.0, 2.2.0) asks for `poolSize / 10` threads, and Netty's `MultithreadEventLoopGroup` makes 0
/// its default, `max(1, 2 × availableProcessors)`.
pub fn event_loop_count(release: OzoneVersion, pool_size: usize, cores: usize) -> usize {
    match release {
        OzoneVersion::V2_0 | OzoneVersion::V2_1 | OzoneVersion::V2_2 => match pool_size / 10 {
            0 => cores.saturating_mul(2).max(1),
            n => n,
        },
    }
}

/// Which way a message passes its connection's event loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A request, read and de-framed.
    Request = 0,
    /// A response, framed and written.
    Response = 1,
}

impl Direction {
    fn label(self) -> &'static str {
        match self {
            Direction::Request => "request",
            Direction::Response => "response",
        }
    }
}

/// The gRPC port's event loop group: `count` loops, connections bound round robin.
///
/// The group follows the handler pool: [`EventLoops::resize_for_pool`] re-derives the count as a
/// DataNode restarted with the new pool would ([`event_loop_count`]), so that `PUT /config` of
/// `handler_count` (what `loadgen sweep --param handler_count` does) behaves as that restart. A
/// connection holds its *ticket* (its pick from the round-robin chooser) rather than a loop: it
/// is served by loop `ticket mod count` of the group of the moment. New connections continue the
/// round robin; connections open across a resize are dealt over the new loops in the order they
/// were accepted, as they would be after reconnecting to the restarted DataNode in that order
/// (a real restart closes them; dn-sim keeps them open). Messages already reserved on the old
/// group finish there; the new loops start idle.
pub struct EventLoops {
    epoch: Instant,
    /// The loops of the moment; replaced whole by a resize (one atomic load per message).
    loops: ArcSwap<Box<[VirtualQueue]>>,
    /// Picks so far from the group's chooser (the listener's included).
    picks: AtomicUsize,
    /// What sizes the group: the release's rule and the machine's cores.
    release: OzoneVersion,
    cores: usize,
    costs: [MessageCost; 2],
    /// Open connections' tickets and the per-loop gauges; taken when a connection opens or
    /// closes and on a resize, never per message.
    bound: Mutex<Bound>,
    recorder_loops: Gauge,
    service: [Histogram; 2],
    wait: [Histogram; 2],
}

struct Bound {
    open: BTreeSet<usize>,
    /// `dn_sim_event_loop_connections{loop}`, one per loop index ever used (loops beyond the
    /// current count read 0).
    gauges: Vec<Gauge>,
}

impl Bound {
    /// Registers the gauges of loops `0..count` not registered yet.
    fn register(&mut self, count: usize, recorder: &PrometheusRecorder) {
        while self.gauges.len() < count {
            let n = self.gauges.len();
            let g = recorder.register_gauge(
                &key(
                    "dn_sim_event_loop_connections",
                    vec![Label::new("loop", n.to_string())],
                ),
                &META,
            );
            g.set(0.0);
            self.gauges.push(g);
        }
    }

    /// Sets every loop's gauge from the open tickets for a group of `count` loops (registered).
    fn recount(&mut self, count: usize) {
        let mut per_loop = vec![0usize; self.gauges.len()];
        for t in &self.open {
            per_loop[t % count] += 1;
        }
        for (g, n) in self.gauges.iter().zip(per_loop) {
            g.set(n as f64);
        }
    }
}

fn key(name: &'static str, labels: Vec<Label>) -> Key {
    Key::from_parts(name, labels)
}

impl EventLoops {
    /// `count` loops (at least one) costing `request` and `response` per message, with their
    /// series on `recorder`; a resize re-derives the count for Ozone 2.2.0 on `count / 2` cores
    /// (use [`EventLoops::for_pool`] to name the release and cores).
    pub fn new(
        count: usize,
        request: MessageCost,
        response: MessageCost,
        recorder: &PrometheusRecorder,
    ) -> Self {
        Self::build(
            count,
            OzoneVersion::V2_2,
            (count / 2).max(1),
            request,
            response,
            recorder,
        )
    }

    /// The group of a DataNode of `release` with a pool of `pool_size` on `cores` processors.
    pub fn for_pool(
        release: OzoneVersion,
        cores: usize,
        pool_size: usize,
        request: MessageCost,
        response: MessageCost,
        recorder: &PrometheusRecorder,
    ) -> Self {
        let count = event_loop_count(release, pool_size, cores);
        Self::build(count, release, cores, request, response, recorder)
    }

    fn build(
        count: usize,
        release: OzoneVersion,
        cores: usize,
        request: MessageCost,
        response: MessageCost,
        recorder: &PrometheusRecorder,
    ) -> Self {
        let count = count.max(1);
        recorder.describe_gauge(
            KeyName::from_const_str("dn_sim_event_loops"),
            None,
            SharedString::const_str(
                "Event loops of the gRPC port (XceiverServerGrpc: pool / 10, or 2 x cores below 10)",
            ),
        );
        recorder.describe_gauge(
            KeyName::from_const_str("dn_sim_event_loop_connections"),
            None,
            SharedString::const_str("Client connections bound to each event loop"),
        );
        recorder.describe_histogram(
            KeyName::from_const_str("dn_sim_event_loop_service_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "Event loop time per message by direction (sum: busy time; count: messages)",
            ),
        );
        recorder.describe_histogram(
            KeyName::from_const_str("dn_sim_event_loop_queue_wait_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str("Time messages waited for their connection's event loop"),
        );
        let loops_gauge = recorder.register_gauge(&key("dn_sim_event_loops", vec![]), &META);
        loops_gauge.set(count as f64);
        let by_direction = |name: &'static str| {
            [Direction::Request, Direction::Response].map(|d| {
                recorder
                    .register_histogram(&key(name, vec![Label::new("direction", d.label())]), &META)
            })
        };
        let mut bound = Bound {
            open: BTreeSet::new(),
            gauges: Vec::new(),
        };
        bound.register(count, recorder);
        Self {
            epoch: Instant::now(),
            loops: ArcSwap::from_pointee(Self::queues(count)),
            picks: AtomicUsize::new(1), // the listening socket was registered on loop 0
            release,
            cores,
            costs: [request, response],
            bound: Mutex::new(bound),
            recorder_loops: loops_gauge,
            service: by_direction("dn_sim_event_loop_service_seconds"),
            wait: by_direction("dn_sim_event_loop_queue_wait_seconds"),
        }
    }

    fn queues(count: usize) -> Box<[VirtualQueue]> {
        (0..count).map(|_| VirtualQueue::default()).collect()
    }

    pub fn count(&self) -> usize {
        self.loops.load().len()
    }

    /// Re-derives the group for a handler pool of `pool_size` (`PUT /config`'s
    /// `handler_count`), as a DataNode restarted with that pool: a new group of
    /// [`event_loop_count`] idle loops, open connections dealt over it by their tickets.
    /// Returns the new count. `recorder`: where the group's series are (new loops' gauges).
    pub fn resize_for_pool(&self, pool_size: usize, recorder: &PrometheusRecorder) -> usize {
        let count = event_loop_count(self.release, pool_size, self.cores).max(1);
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        bound.register(count, recorder);
        if count != self.count() {
            self.loops.store(std::sync::Arc::new(Self::queues(count)));
        }
        self.recorder_loops.set(count as f64);
        bound.recount(count);
        count
    }

    /// Binds an accepted connection round robin as Netty's chooser; returns its ticket (its
    /// loop is the ticket modulo the group's count). Pair with [`EventLoops::unbind`] when the
    /// connection closes.
    pub fn bind(&self) -> usize {
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = self.picks.fetch_add(1, Relaxed);
        bound.open.insert(ticket);
        let i = ticket % self.count();
        bound.gauges[i].increment(1.0);
        ticket
    }

    pub fn unbind(&self, ticket: usize) {
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if bound.open.remove(&ticket) {
            let i = ticket % self.count();
            bound.gauges[i].decrement(1.0);
        }
    }

    /// The loop a connection's `ticket` is served by now.
    pub fn loop_of(&self, ticket: usize) -> usize {
        ticket % self.count()
    }

    /// A message of `bytes` bytes passes the loop of connection `ticket` (`bind`'s answer) now:
    /// returns when the loop has served it. A zero cost returns at once and touches nothing.
    pub async fn pass(&self, ticket: usize, direction: Direction, bytes: usize) {
        let cost = self.costs[direction as usize].nanos(bytes);
        if cost == 0 {
            return;
        }
        let arrived = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let start = {
            let loops = self.loops.load();
            loops[ticket % loops.len()].reserve(arrived, cost)
        };
        self.wait[direction as usize].record(Duration::from_nanos(start - arrived).as_secs_f64());
        self.service[direction as usize].record(Duration::from_nanos(cost).as_secs_f64());
        // Served within the slack: no wait. The loop's time is reserved all the same, so a
        // backlog builds and the loop's rate stays 1 / cost; a message waits only once it is more
        // than the slack behind.
        let due = start.saturating_add(cost);
        let slack = LOOP_SLACK.as_nanos() as u64;
        if due > arrived.saturating_add(slack) {
            sleep_until(self.epoch + Duration::from_nanos(due - slack)).await;
        }
    }
}

/// How far behind its loop a message may be and still pass without waiting. Each wait is a
/// wake-up by the precise timer, which costs dn-sim more CPU than a loop's tens of microseconds
/// price (a profile with a 30 µs loop halved dn-sim's sleep-0 echoes, and its one-in-flight
/// latency doubled). Within the slack the loop's time is still reserved, so under load the
/// backlog reaches it and the loop's rate is kept; a message is early by at most the slack.
pub const LOOP_SLACK: Duration = Duration::from_micros(200);

/// The handler's own time per request and per response, held on the handler's clock like an
/// injected delay.
pub struct HandlerStage {
    request: MessageCost,
    response: MessageCost,
    sleep_late: Duration,
    sleep_late_per_ms: Duration,
    sleep_tail: Option<SleepTail>,
    service: Histogram,
    tail_wakes: Counter,
}

impl HandlerStage {
    pub fn new(
        request: MessageCost,
        response: MessageCost,
        sleep_late: Duration,
        sleep_late_per_ms: Duration,
        sleep_tail: Option<SleepTail>,
        recorder: &PrometheusRecorder,
    ) -> Self {
        recorder.describe_histogram(
            KeyName::from_const_str("dn_sim_handler_service_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "The profile's handler time per request, besides injected delays (sum: busy time; count: requests)",
            ),
        );
        recorder.describe_counter(
            KeyName::from_const_str("dn_sim_handler_sleep_tail_wakes_total"),
            None,
            SharedString::const_str(
                "Echo sleeps that woke in the profile's tail ([handler.sleep] tail_share), later by tail_mean_per_ms_us a ms slept on average",
            ),
        );
        Self {
            request,
            response,
            sleep_late,
            sleep_late_per_ms,
            sleep_tail,
            service: recorder
                .register_histogram(&key("dn_sim_handler_service_seconds", vec![]), &META),
            tail_wakes: recorder
                .register_counter(&key("dn_sim_handler_sleep_tail_wakes_total", vec![]), &META),
        }
    }

    /// The extra time a sleep of `slept_ms` wakes late in the profile's tail: zero unless the
    /// echo slept and this sleep falls in the tail's share, then an exponential time of the
    /// tail's mean for that sleep. Drawn when the request arrives (the stream's draws in its
    /// request order).
    pub fn draw_sleep_tail(&self, slept_ms: u32, rng: &mut SmallRng) -> Duration {
        let Some(tail) = self.sleep_tail.filter(|_| slept_ms > 0) else {
            return Duration::ZERO;
        };
        if rng.random::<f64>() >= tail.share {
            return Duration::ZERO;
        }
        self.tail_wakes.increment(1);
        // Inverse transform; 1 − u lies in (0, 1], so the logarithm is finite.
        let u = 1.0 - rng.random::<f64>();
        tail.mean_per_ms.saturating_mul(slept_ms).mul_f64(-u.ln())
    }

    /// The handler's time for a request of `request_bytes` answered with `response_bytes`,
    /// recorded as served; `slept_ms`: the milliseconds an echo slept on the handler (0: none),
    /// from which it woke late, `tail` later still ([`HandlerStage::draw_sleep_tail`]).
    pub fn service_time(
        &self,
        request_bytes: usize,
        response_bytes: usize,
        slept_ms: u32,
        tail: Duration,
    ) -> Duration {
        let mut d = Duration::from_nanos(
            self.request
                .nanos(request_bytes)
                .saturating_add(self.response.nanos(response_bytes)),
        );
        if slept_ms > 0 {
            let per_ms = self
                .sleep_late_per_ms
                .checked_mul(slept_ms)
                .unwrap_or(Duration::MAX);
            d = d
                .saturating_add(self.sleep_late)
                .saturating_add(per_ms)
                .saturating_add(tail);
        }
        self.service.record(d.as_secs_f64());
        d
    }
}

/// The stages a profile enables; each is `None` when it would cost nothing.
#[derive(Default)]
pub struct Stages {
    pub event_loops: Option<EventLoops>,
    pub handler: Option<HandlerStage>,
    /// CPU really spent ([`crate::sim::cpu`]).
    pub cpu: Option<CpuStage>,
    /// The least time from a request's arrival to its answer (`[latency] floor_us`).
    pub latency_floor: Option<LatencyFloor>,
}

/// The end of a floor's wait that is spent yielding instead of on the timer.
pub const FLOOR_SPIN: Duration = Duration::from_micros(200);

/// `[latency] floor_us`: no answer sooner than `floor` (and an exponential time of mean
/// `jitter_mean_us`) after its request arrived.
pub struct LatencyFloor {
    floor: Duration,
    jitter_mean: Duration,
    wait: Histogram,
    /// Requests between arrival and answer on the gRPC path.
    in_service: AtomicUsize,
}

/// A request's passage through the floor's stage: counted in service until dropped.
pub struct FloorTicket<'a> {
    stage: &'a LatencyFloor,
    /// The request's arrival + its floor.
    due: Instant,
    /// No other request was in service when this one arrived.
    found_idle: bool,
}

impl Drop for FloorTicket<'_> {
    fn drop(&mut self) {
        self.stage.in_service.fetch_sub(1, Relaxed);
    }
}

impl LatencyFloor {
    pub fn new(floor: Duration, jitter_mean: Duration, recorder: &PrometheusRecorder) -> Self {
        recorder.describe_histogram(
            KeyName::from_const_str("dn_sim_latency_floor_wait_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "Time answers waited for the profile's latency floor (only those that came early)",
            ),
        );
        Self {
            floor,
            jitter_mean,
            wait: recorder
                .register_histogram(&key("dn_sim_latency_floor_wait_seconds", vec![]), &META),
            in_service: AtomicUsize::new(0),
        }
    }

    /// A request arrived now; keep the ticket until its answer goes. Its floor's jitter is
    /// drawn from `rng` whether or not it will wait, so a stream's draws follow its request
    /// order whatever the load (none without a jitter).
    pub fn arrive(&self, rng: &mut SmallRng) -> FloorTicket<'_> {
        let arrived = Instant::now();
        FloorTicket {
            stage: self,
            due: arrived + self.floor + self.draw_jitter(rng),
            found_idle: self.in_service.fetch_add(1, Relaxed) == 0,
        }
    }

    /// An exponential time of the jitter's mean (zero without one).
    pub fn draw_jitter(&self, rng: &mut SmallRng) -> Duration {
        if self.jitter_mean.is_zero() {
            return Duration::ZERO;
        }
        // Inverse transform; 1 − u lies in (0, 1], so the logarithm is finite.
        let u = 1.0 - rng.random::<f64>();
        self.jitter_mean.mul_f64(-u.ln())
    }

    /// Returns when the answer of `ticket`'s request may go: at once when it found other
    /// requests in service or is not early (no timer), else at its arrival + the floor.
    ///
    /// Only a request that found the DataNode idle waits: the floor stands for the hand-offs
    /// between threads (event loop, handler, back), which cost a wake-up of a parked thread when
    /// the DataNode is idle and little when its threads are busy anyway. The last
    /// [`FLOOR_SPIN`] of the wait is spent yielding to other tasks rather than on the timer: the
    /// floor is tens of microseconds, less than the timer's own lateness (a wake-up through the
    /// timer thread overshot an 89 µs floor by about 80 µs on the 2-core machine).
    pub async fn wait(&self, ticket: &FloorTicket<'_>) {
        if !ticket.found_idle {
            return;
        }
        let due = ticket.due;
        let now = Instant::now();
        if now >= due {
            return;
        }
        self.wait.record((due - now).as_secs_f64());
        if due - now > FLOOR_SPIN {
            sleep_until(due - FLOOR_SPIN).await;
        }
        while Instant::now() < due {
            tokio::task::yield_now().await;
        }
    }
}

impl Stages {
    /// No stage: dn-sim without a profile.
    pub fn none() -> Self {
        Self::default()
    }

    /// The stages of `profile` for a handler pool of `pool_size`, their series on `recorder`.
    pub fn from_profile(
        profile: Option<&Profile>,
        pool_size: usize,
        recorder: &PrometheusRecorder,
    ) -> Self {
        let Some(p) = profile else {
            return Self::none();
        };
        let loops_cost = !(p.event_loop_request.is_zero() && p.event_loop_response.is_zero());
        let handler_cost = !(p.handler_request.is_zero()
            && p.handler_response.is_zero()
            && p.handler_sleep_late.is_zero()
            && p.handler_sleep_late_per_ms.is_zero()
            && p.handler_sleep_tail.is_none());
        let cpu_cost = !(p.cpu_handler.is_zero()
            && p.cpu_background.is_zero()
            && p.cpu_echo_payload_ns_per_byte == 0.0);
        Self {
            event_loops: loops_cost.then(|| {
                EventLoops::for_pool(
                    p.release,
                    p.cores,
                    pool_size,
                    p.event_loop_request,
                    p.event_loop_response,
                    recorder,
                )
            }),
            handler: handler_cost.then(|| {
                HandlerStage::new(
                    p.handler_request,
                    p.handler_response,
                    p.handler_sleep_late,
                    p.handler_sleep_late_per_ms,
                    p.handler_sleep_tail,
                    recorder,
                )
            }),
            // One background thread a modelled core, as many as the JVM's parallel collector.
            cpu: cpu_cost.then(|| {
                CpuStage::new(
                    p.cpu_handler,
                    p.cpu_background,
                    p.cores,
                    p.cpu_capacity_cores,
                    p.cpu_echo_payload_ns_per_byte,
                    recorder,
                )
            }),
            latency_floor: (!(p.latency_floor.is_zero() && p.latency_jitter.is_zero()))
                .then(|| LatencyFloor::new(p.latency_floor, p.latency_jitter, recorder)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;

    fn recorder() -> PrometheusRecorder {
        PrometheusBuilder::new().build_recorder()
    }

    /// An example profile of a machine of `cores` with the stage `tables` (TOML) after its header.
    fn example(cores: u32, tables: &str) -> Profile {
        Profile::parse(&format!(
            "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
             [machine]\ncores = {cores}\nozone_release = \"2.2.0\"\n{tables}"
        ))
        .unwrap()
    }

    fn cost(us: f64) -> MessageCost {
        MessageCost {
            per_message_us: us,
            per_byte_ns: 0.0,
        }
    }

    #[test]
    fn loops_follow_xceiver_server_grpc_for_pools_1_to_32_and_cores_1_to_8() {
        for release in OzoneVersion::ALL {
            for cores in 1..=8 {
                for pool in 1..=32 {
                    let expected = match pool {
                        1..=9 => 2 * cores,
                        10..=19 => 1,
                        20..=29 => 2,
                        _ => 3,
                    };
                    assert_eq!(
                        event_loop_count(release, pool, cores),
                        expected,
                        "{release} pool {pool} cores {cores}"
                    );
                }
            }
        }
        assert_eq!(event_loop_count(OzoneVersion::V2_2, 100_000, 2), 10_000);
    }

    #[test]
    fn connections_bind_round_robin_after_the_listener() {
        let loops = EventLoops::new(4, cost(1.0), cost(0.0), &recorder());
        let picks: Vec<usize> = (0..9).map(|_| loops.loop_of(loops.bind())).collect();
        assert_eq!(picks, [1, 2, 3, 0, 1, 2, 3, 0, 1]);
        let one = EventLoops::new(1, cost(1.0), cost(0.0), &recorder());
        assert!((0..5).all(|_| one.loop_of(one.bind()) == 0));
    }

    #[test]
    fn a_resize_re_derives_the_loops_and_deals_open_connections_over_them() {
        let r = recorder();
        // Pool 10 on 2 cores: one loop; pool 4: 2 x 2 = 4; pool 25: 2.
        let loops = EventLoops::for_pool(OzoneVersion::V2_2, 2, 10, cost(1.0), cost(0.0), &r);
        assert_eq!(loops.count(), 1);
        let tickets: Vec<usize> = (0..6).map(|_| loops.bind()).collect();
        assert!(tickets.iter().all(|&t| loops.loop_of(t) == 0));
        assert_eq!(loops.resize_for_pool(4, &r), 4);
        let now: Vec<usize> = tickets.iter().map(|&t| loops.loop_of(t)).collect();
        assert_eq!(now, [1, 2, 3, 0, 1, 2]);
        let text = r.handle().render();
        assert!(text.contains("dn_sim_event_loops 4"), "{text}");
        for (i, n) in [(0, 1), (1, 2), (2, 2), (3, 1)] {
            let line = format!("dn_sim_event_loop_connections{{loop=\"{i}\"}} {n}");
            assert!(text.contains(&line), "no {line} in {text}");
        }
        // A new connection continues the round robin; a closed one leaves its loop.
        assert_eq!(loops.loop_of(loops.bind()), 3);
        loops.unbind(tickets[0]);
        assert_eq!(loops.resize_for_pool(25, &r), 2);
        let text = r.handle().render();
        assert!(text.contains("dn_sim_event_loops 2"), "{text}");
        // Tickets 2..=7 open: 2, 4, 6 on loop 0; 3, 5, 7 on loop 1; loops 2 and 3 are gone.
        for (i, n) in [(0, 3), (1, 3), (2, 0), (3, 0)] {
            let line = format!("dn_sim_event_loop_connections{{loop=\"{i}\"}} {n}");
            assert!(text.contains(&line), "no {line} in {text}");
        }
    }

    #[test]
    fn a_loop_serves_in_arrival_order_and_never_overlaps() {
        let q = VirtualQueue::default();
        assert_eq!(q.reserve(100, 10), 100); // idle: starts on arrival
        assert_eq!(q.reserve(105, 10), 110); // waits for the first
        assert_eq!(q.reserve(500, 10), 500); // idle again: no credit for idle time
        assert_eq!(q.free_at(), 510);
        // Concurrent reservations never share the server: total busy time adds up exactly.
        let q = std::sync::Arc::new(VirtualQueue::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || (0..1000).map(|_| q.reserve(0, 7)).collect::<Vec<_>>())
            })
            .collect();
        let mut starts: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        starts.sort_unstable();
        assert!(starts.iter().enumerate().all(|(i, &s)| s == 7 * i as u64));
    }

    #[tokio::test]
    async fn one_loop_paces_messages_by_its_cost() {
        let loops = EventLoops::new(1, cost(2000.0), cost(0.0), &recorder());
        let l = loops.bind();
        let start = Instant::now();
        // Four requests at once on one loop: the last is served 8 ms after the first arrived
        // (returning up to the slack early), however the tasks were scheduled; responses
        // (cost 0) pass at once.
        let passes: Vec<_> = (0..4)
            .map(|_| loops.pass(l, Direction::Request, 0))
            .collect();
        futures_util::future::join_all(passes).await;
        assert!(start.elapsed() >= Duration::from_millis(8) - LOOP_SLACK);
        let before = Instant::now();
        loops.pass(l, Direction::Response, 1 << 20).await;
        assert!(before.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn a_message_within_the_slack_passes_at_once_but_reserves_its_time() {
        // 50 µs a message: the first three are at most 150 µs behind, within the slack, and are
        // ready at their first poll; the loop's time is reserved all the same, so the fifth,
        // 250 µs behind, waits.
        let loops = EventLoops::new(1, cost(50.0), cost(0.0), &recorder());
        let l = loops.bind();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let started = Instant::now();
        let mut passes: Vec<_> = (0..5)
            .map(|_| Box::pin(loops.pass(l, Direction::Request, 0)))
            .collect();
        let ready: Vec<bool> = passes
            .iter_mut()
            .map(|p| p.as_mut().poll(&mut cx).is_ready())
            .collect();
        let took = started.elapsed();
        assert_eq!(ready[..3], [true; 3]);
        let reserved = loops.loops.load()[0].free_at();
        let first = u64::try_from((started - loops.epoch).as_nanos()).unwrap();
        assert!(reserved >= first + 250_000, "reserved up to {reserved} ns");
        // Unless this machine stalled the test for longer than a message's cost.
        assert!(!ready[4] || took > Duration::from_micros(50), "{ready:?}");
    }

    #[test]
    fn a_free_stage_does_not_wait_or_register() {
        // A zero cost: the pass is ready at its first poll and reserves nothing.
        let loops = EventLoops::new(2, cost(0.0), cost(0.0), &recorder());
        let mut pass = std::pin::pin!(loops.pass(0, Direction::Request, 4 << 20));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(pass.as_mut().poll(&mut cx).is_ready());
        assert_eq!(loops.loops.load()[0].free_at(), 0);
        // No profile, or a profile of zero costs: no stage at all, and no series.
        let r = recorder();
        let free = Profile::parse(
            "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
             [machine]\ncores = 2\nozone_release = \"2.2\"\n",
        )
        .unwrap();
        for profile in [None, Some(&free)] {
            let s = Stages::from_profile(profile, 10, &r);
            assert!(s.event_loops.is_none() && s.handler.is_none() && s.cpu.is_none());
            assert!(s.latency_floor.is_none());
        }
        assert_eq!(r.handle().render(), "");
    }

    #[test]
    fn a_profile_enables_only_the_stages_that_cost() {
        let r = recorder();
        let mut p = example(3, "[handler.response]\nper_byte_ns = 1.0\n");
        let s = Stages::from_profile(Some(&p), 4, &r);
        assert!(s.event_loops.is_none());
        let handler = s.handler.expect("a handler stage");
        assert_eq!(
            handler.service_time(100, 1000, 0, Duration::ZERO),
            Duration::from_nanos(1000)
        );
        // A sleep's lateness alone makes a handler stage, paid only by echoes that slept.
        p.handler_response = MessageCost::default();
        p.handler_sleep_late = Duration::from_micros(120);
        let handler = Stages::from_profile(Some(&p), 4, &r)
            .handler
            .expect("a handler stage");
        assert_eq!(
            handler.service_time(100, 1000, 0, Duration::ZERO),
            Duration::ZERO
        );
        assert_eq!(
            handler.service_time(100, 1000, 1, Duration::ZERO),
            Duration::from_micros(120)
        );
        // ... and the longer it slept, the later it wakes.
        p.handler_sleep_late_per_ms = Duration::from_micros(30);
        let handler = Stages::from_profile(Some(&p), 4, &r)
            .handler
            .expect("a handler stage");
        assert_eq!(
            handler.service_time(100, 1000, 5, Duration::ZERO),
            Duration::from_micros(120 + 5 * 30)
        );
        p.handler_sleep_late = Duration::ZERO;
        assert!(
            Stages::from_profile(Some(&p), 4, &r).handler.is_some(),
            "the lateness per ms alone makes a handler stage"
        );
        p.handler_sleep_late = Duration::from_micros(120);
        p.handler_sleep_late_per_ms = Duration::ZERO;
        p.event_loop_response = cost(1.0);
        let s = Stages::from_profile(Some(&p), 4, &r);
        assert_eq!(s.event_loops.expect("loops").count(), 6); // pool 4 < 10: 2 x 3 cores
        let text = r.handle().render();
        assert!(text.contains("dn_sim_event_loops 6"), "{text}");
        assert!(
            text.contains("dn_sim_event_loop_connections{loop=\"5\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn the_sleep_tail_holds_its_share_of_sleeps_for_its_mean_and_none_other() {
        use rand::SeedableRng;
        let r = recorder();
        let mut p = example(
            2,
            "[handler.sleep]\ntail_share = 0.05\ntail_mean_per_ms_us = 2000.0\n",
        );
        let handler = Stages::from_profile(Some(&p), 4, &r)
            .handler
            .expect("a tail alone makes a handler stage");
        let mut rng = SmallRng::seed_from_u64(7);
        // An echo that did not sleep never wakes late.
        assert!((0..1000).all(|_| handler.draw_sleep_tail(0, &mut rng).is_zero()));
        let draws: Vec<Duration> = (0..100_000)
            .map(|_| handler.draw_sleep_tail(2, &mut rng))
            .collect();
        let late: Vec<f64> = draws
            .iter()
            .filter(|d| !d.is_zero())
            .map(|d| d.as_secs_f64() * 1e6)
            .collect();
        let share = late.len() as f64 / draws.len() as f64;
        assert!((share - 0.05).abs() < 0.005, "share {share}");
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        assert!((mean - 4000.0).abs() < 4000.0 * 0.06, "mean {mean} µs");
        // Exponential: about e^-2 of the tail beyond twice its mean.
        let beyond = late.iter().filter(|&&us| us > 8000.0).count() as f64 / late.len() as f64;
        assert!(
            (beyond - (-2f64).exp()).abs() < 0.03,
            "beyond 2 means: {beyond}"
        );
        // The draw is held on the handler with the sleep's lateness.
        assert_eq!(
            handler.service_time(0, 0, 2, Duration::from_millis(3)),
            Duration::from_millis(3)
        );
        let text = r.handle().render();
        assert!(
            text.contains(&format!(
                "dn_sim_handler_sleep_tail_wakes_total {}",
                late.len()
            )),
            "{text}"
        );
        p.handler_sleep_tail = None;
        assert!(Stages::from_profile(Some(&p), 4, &r).handler.is_none());
    }

    #[test]
    fn the_floors_jitter_is_exponential_of_its_mean_and_drawn_only_when_set() {
        use rand::SeedableRng;
        let r = recorder();
        let mut p = example(2, "[latency]\njitter_mean_us = 30.0\n");
        let floor = Stages::from_profile(Some(&p), 4, &r)
            .latency_floor
            .expect("a jitter alone makes a floor stage");
        let mut rng = SmallRng::seed_from_u64(11);
        let us: Vec<f64> = (0..100_000)
            .map(|_| floor.draw_jitter(&mut rng).as_secs_f64() * 1e6)
            .collect();
        let mean = us.iter().sum::<f64>() / us.len() as f64;
        assert!((mean - 30.0).abs() < 30.0 * 0.03, "mean {mean} µs");
        let beyond = us.iter().filter(|&&x| x > 60.0).count() as f64 / us.len() as f64;
        assert!(
            (beyond - (-2f64).exp()).abs() < 0.01,
            "beyond 2 means: {beyond}"
        );
        // Without a jitter the floor draws nothing: the stream's next draw is unchanged.
        p.latency_jitter = Duration::ZERO;
        p.latency_floor = Duration::from_micros(40);
        let plain = Stages::from_profile(Some(&p), 4, &r)
            .latency_floor
            .expect("a floor");
        let (mut a, mut b) = (SmallRng::seed_from_u64(3), SmallRng::seed_from_u64(3));
        assert!(plain.draw_jitter(&mut a).is_zero());
        assert_eq!(a.random::<u64>(), b.random::<u64>());
        p.latency_floor = Duration::ZERO;
        assert!(
            Stages::from_profile(Some(&p), 4, &r)
                .latency_floor
                .is_none()
        );
    }
}

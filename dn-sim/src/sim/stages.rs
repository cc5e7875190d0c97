//! The DataNode's stages a request passes on the gRPC path (port 9859), each a queue on the
//! simulation's clock, with the costs of a `--profile` ([`crate::sim::profile`]):
//!
//! 1. its connection's **event loop** on the way in (a request: `event_loops.request`),
//! 2. the **handler pool** ([`crate::sim::pool`]): waiting for a handler, then the handler's own
//!    time for the request and its response (`handler.*`), besides injected delays and echo
//!    sleeps,
//! 3. the same event loop on the way out (a response: `event_loops.response`).
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
//! Left out: the machine's CPU as a stage of its own (its cores shared by the loops' and the
//! handlers' work). dn-sim's costs are waits, not CPU burnt, so a CPU stage would be one more
//! shared virtual queue every other stage reserves in turn (`cores` servers), and its effect is
//! entangled with the per-message costs a calibration fits at each concurrency; until a
//! calibration shows that the loops and the handler pool alone cannot fit a real DataNode, the
//! profile's `cores` only sizes the event loop group.
//!
//! Without a profile, or with a profile whose costs are all zero, no stage exists
//! ([`Stages::none`]): a request takes exactly the path it took before stages were modelled.

use crate::datanode::timer::sleep_until;
use crate::datanode::version::OzoneVersion;
use crate::sim::profile::{MessageCost, Profile};
use metrics::{Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::PrometheusRecorder;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
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

/// A single-server FIFO queue on a virtual timeline (ns since the stages' epoch).
#[derive(Default)]
struct VirtualQueue {
    free_at: AtomicU64,
}

impl VirtualQueue {
    /// Takes `cost` ns of the server for work arriving at `arrived`; returns when it starts.
    fn reserve(&self, arrived: u64, cost: u64) -> u64 {
        let mut free_at = self.free_at.load(Relaxed);
        loop {
            let start = free_at.max(arrived);
            match self.free_at.compare_exchange_weak(
                free_at,
                start.saturating_add(cost),
                Relaxed,
                Relaxed,
            ) {
                Ok(_) => return start,
                Err(now) => free_at = now,
            }
        }
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
pub struct EventLoops {
    epoch: Instant,
    loops: Box<[VirtualQueue]>,
    /// Picks so far from the group's chooser (the listener's included).
    picks: AtomicUsize,
    costs: [MessageCost; 2],
    connections: Box<[Gauge]>,
    service: [Histogram; 2],
    wait: [Histogram; 2],
}

fn key(name: &'static str, labels: Vec<Label>) -> Key {
    Key::from_parts(name, labels)
}

impl EventLoops {
    /// `count` loops (at least one) costing `request` and `response` per message, with their
    /// series on `recorder`.
    pub fn new(
        count: usize,
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
        recorder
            .register_gauge(&key("dn_sim_event_loops", vec![]), &META)
            .set(count as f64);
        let by_direction = |name: &'static str| {
            [Direction::Request, Direction::Response].map(|d| {
                recorder
                    .register_histogram(&key(name, vec![Label::new("direction", d.label())]), &META)
            })
        };
        Self {
            epoch: Instant::now(),
            loops: (0..count).map(|_| VirtualQueue::default()).collect(),
            picks: AtomicUsize::new(1), // the listening socket was registered on loop 0
            costs: [request, response],
            connections: (0..count)
                .map(|i| {
                    recorder.register_gauge(
                        &key(
                            "dn_sim_event_loop_connections",
                            vec![Label::new("loop", i.to_string())],
                        ),
                        &META,
                    )
                })
                .collect(),
            service: by_direction("dn_sim_event_loop_service_seconds"),
            wait: by_direction("dn_sim_event_loop_queue_wait_seconds"),
        }
    }

    pub fn count(&self) -> usize {
        self.loops.len()
    }

    /// Binds an accepted connection to its loop, round robin as Netty's chooser; pair with
    /// [`EventLoops::unbind`] when the connection closes.
    pub fn bind(&self) -> usize {
        let i = self.picks.fetch_add(1, Relaxed) % self.loops.len();
        self.connections[i].increment(1.0);
        i
    }

    pub fn unbind(&self, event_loop: usize) {
        self.connections[event_loop].decrement(1.0);
    }

    /// A message of `bytes` bytes passes loop `event_loop` (`bind`'s answer) now: returns when
    /// the loop has served it. A zero cost returns at once and touches nothing.
    pub async fn pass(&self, event_loop: usize, direction: Direction, bytes: usize) {
        let cost = self.costs[direction as usize].nanos(bytes);
        if cost == 0 {
            return;
        }
        let arrived = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let start = self.loops[event_loop % self.loops.len()].reserve(arrived, cost);
        self.wait[direction as usize].record(Duration::from_nanos(start - arrived).as_secs_f64());
        self.service[direction as usize].record(Duration::from_nanos(cost).as_secs_f64());
        sleep_until(self.epoch + Duration::from_nanos(start.saturating_add(cost))).await;
    }
}

/// The handler's own time per request and per response, held on the handler's clock like an
/// injected delay.
pub struct HandlerStage {
    request: MessageCost,
    response: MessageCost,
    service: Histogram,
}

impl HandlerStage {
    pub fn new(request: MessageCost, response: MessageCost, recorder: &PrometheusRecorder) -> Self {
        recorder.describe_histogram(
            KeyName::from_const_str("dn_sim_handler_service_seconds"),
            Some(Unit::Seconds),
            SharedString::const_str(
                "The profile's handler time per request, besides injected delays (sum: busy time; count: requests)",
            ),
        );
        Self {
            request,
            response,
            service: recorder
                .register_histogram(&key("dn_sim_handler_service_seconds", vec![]), &META),
        }
    }

    /// The handler's time for a request of `request_bytes` answered with `response_bytes`,
    /// recorded as served.
    pub fn service_time(&self, request_bytes: usize, response_bytes: usize) -> Duration {
        let d = Duration::from_nanos(
            self.request
                .nanos(request_bytes)
                .saturating_add(self.response.nanos(response_bytes)),
        );
        self.service.record(d.as_secs_f64());
        d
    }
}

/// The stages a profile enables; each is `None` when it would cost nothing.
#[derive(Default)]
pub struct Stages {
    pub event_loops: Option<EventLoops>,
    pub handler: Option<HandlerStage>,
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
        let handler_cost = !(p.handler_request.is_zero() && p.handler_response.is_zero());
        Self {
            event_loops: loops_cost.then(|| {
                EventLoops::new(
                    event_loop_count(p.release, pool_size, p.cores),
                    p.event_loop_request,
                    p.event_loop_response,
                    recorder,
                )
            }),
            handler: handler_cost
                .then(|| HandlerStage::new(p.handler_request, p.handler_response, recorder)),
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
        let picks: Vec<usize> = (0..9).map(|_| loops.bind()).collect();
        assert_eq!(picks, [1, 2, 3, 0, 1, 2, 3, 0, 1]);
        let one = EventLoops::new(1, cost(1.0), cost(0.0), &recorder());
        assert!((0..5).all(|_| one.bind() == 0));
    }

    #[test]
    fn a_loop_serves_in_arrival_order_and_never_overlaps() {
        let q = VirtualQueue::default();
        assert_eq!(q.reserve(100, 10), 100); // idle: starts on arrival
        assert_eq!(q.reserve(105, 10), 110); // waits for the first
        assert_eq!(q.reserve(500, 10), 500); // idle again: no credit for idle time
        assert_eq!(q.free_at.load(Relaxed), 510);
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
        // Four requests at once on one loop: the last is served 8 ms after the first arrived,
        // however the tasks were scheduled; responses (cost 0) pass at once.
        let passes: Vec<_> = (0..4)
            .map(|_| loops.pass(l, Direction::Request, 0))
            .collect();
        futures_util::future::join_all(passes).await;
        assert!(start.elapsed() >= Duration::from_millis(8));
        let before = Instant::now();
        loops.pass(l, Direction::Response, 1 << 20).await;
        assert!(before.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn a_free_stage_does_not_wait_or_register() {
        // A zero cost: the pass is ready at its first poll and reserves nothing.
        let loops = EventLoops::new(2, cost(0.0), cost(0.0), &recorder());
        let mut pass = std::pin::pin!(loops.pass(0, Direction::Request, 4 << 20));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(pass.as_mut().poll(&mut cx).is_ready());
        assert_eq!(loops.loops[0].free_at.load(Relaxed), 0);
        // No profile, or a profile of zero costs: no stage at all, and no series.
        let r = recorder();
        let free = Profile::parse(
            "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
             [machine]\ncores = 2\nozone_release = \"2.2\"\n",
        )
        .unwrap();
        for profile in [None, Some(&free)] {
            let s = Stages::from_profile(profile, 10, &r);
            assert!(s.event_loops.is_none() && s.handler.is_none());
        }
        assert_eq!(r.handle().render(), "");
    }

    #[test]
    fn a_profile_enables_only_the_stages_that_cost() {
        let r = recorder();
        let mut p = Profile::parse(
            "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
             [machine]\ncores = 3\nozone_release = \"2.2.0\"\n\
             [handler.response]\nper_byte_ns = 1.0\n",
        )
        .unwrap();
        let s = Stages::from_profile(Some(&p), 4, &r);
        assert!(s.event_loops.is_none());
        let handler = s.handler.expect("a handler stage");
        assert_eq!(handler.service_time(100, 1000), Duration::from_nanos(1000));
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
}

//! The simulation around the DataNode. [`Admission::dispatch`] counts the request, applies the
//! service limits, draws the injected delay and fault, takes a handler from the pool (waiting in
//! FIFO order), holds it through the delay, hands the request to the DataNode
//! ([`HddsDispatcher`]), charges the shared disk for the chunk data it moved, on the gRPC path
//! holds the handler for its own time when a `--profile` prices it ([`Stages`]), and records
//! metrics. Nothing here is a DataNode rule; the DataNode's own parts (dispatcher → keyvalue →
//! store) know nothing of it.

use crate::datanode::dispatcher::{DispatcherContext, HddsDispatcher, chunk_bytes};
use crate::datanode::envelope::error;
pub use crate::datanode::keyvalue::NodeIdentity;
use crate::datanode::store::ContainerStore;
use crate::datanode::timer::ServiceClock;
use crate::sim::delay::DelaySpec;
use crate::sim::disk::{DiskModel, DiskModelError};
use crate::sim::fault::FaultKind;
pub use crate::sim::live_settings::LiveSettings;
use crate::sim::metrics::{Answered, Metrics};
use crate::sim::pool::HandlerPool;
use crate::sim::profile::Profile;
use crate::sim::service_limits::{LimitPolicy, LimitRates, ServiceLimits};
use crate::sim::stages::Stages;
use arc_swap::ArcSwap;
use common::proto::{
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response, Type,
};
use prost::Message;
use rand::rngs::SmallRng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// How a request ends.
// `Answer` is the common case; boxing it would add an allocation to every request.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    /// A normal answer (any `result`).
    Answer(Response),
    /// The call fails with this status (and the stream ends).
    Fail(Status),
    /// No answer, ever: the client's deadline fires.
    Drop,
    /// The stream is reset (RST_STREAM).
    Reset,
}

/// Where a request is served: which threads of the DataNode it waits for and holds.
#[derive(Clone, Copy)]
pub enum Executor<'a> {
    /// The gRPC path's handler pool ([`Admission::pool`]).
    Handlers,
    /// One pool of the Ratis path (a chunk writer).
    Pool(&'a HandlerPool),
    /// A container's task queue, then a thread of its group's op executors: the request waits
    /// for both and holds both (`ContainerStateMachine.applyTransaction`).
    Queued {
        queue: &'a HandlerPool,
        pool: &'a HandlerPool,
    },
    /// The caller's own thread (a Raft read runs on the Ratis server's): no waiting.
    Inline,
}

/// The simulated DataNode as a client meets it: the DataNode itself and the simulation around
/// it (handler pool, live delays and faults, shared disk, service limits, metrics).
pub struct Admission {
    hdds: HddsDispatcher,
    pub pool: HandlerPool,
    pub live: ArcSwap<LiveSettings>,
    disk: DiskModel,
    pub limits: ServiceLimits,
    pub metrics: Metrics,
    /// The Ozone release answered as (also in the handler's `NodeIdentity`).
    pub version: crate::datanode::version::OzoneVersion,
    /// The stages a `--profile` models (none without one).
    pub stages: Stages,
}

/// What an [`Admission`] is made of, as the flags set it (`dn_sim::Config::admission`); the
/// default is dn-sim's without flags.
#[derive(Clone, Debug)]
pub struct AdmissionConfig {
    pub node: NodeIdentity,
    pub handler_count: usize,
    pub max_queue: Option<usize>,
    pub live: LiveSettings,
    pub disk_bandwidth: Option<f64>,
    pub disk_latency: Option<DelaySpec>,
    pub limit_rates: LimitRates,
    pub limit_policy: LimitPolicy,
    /// `--profile`: the costs of the DataNode's stages; `None` = none (dn-sim as without stages).
    pub profile: Option<Profile>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            node: NodeIdentity::default(),
            handler_count: DEFAULT_HANDLER_COUNT,
            max_queue: None,
            live: LiveSettings::default(),
            disk_bandwidth: None,
            disk_latency: None,
            limit_rates: LimitRates::default(),
            limit_policy: LimitPolicy::default(),
            profile: None,
        }
    }
}

/// dn-sim's `--handler-count` when none is given.
pub const DEFAULT_HANDLER_COUNT: usize = 10;

impl Admission {
    /// The simulation around a DataNode serving `store`, built from `config`; fails only for a
    /// disk bandwidth that is not a positive number.
    pub fn from_config(
        store: Arc<ContainerStore>,
        config: AdmissionConfig,
    ) -> Result<Self, DiskModelError> {
        let mut admission = Self::new(
            store,
            config.node,
            HandlerPool::new(config.handler_count, config.max_queue),
            config.live,
            DiskModel::new(config.disk_bandwidth, config.disk_latency)?,
            ServiceLimits::new(config.limit_rates, config.limit_policy),
        );
        admission.stages = Stages::from_profile(
            config.profile.as_ref(),
            config.handler_count,
            admission.metrics.recorder(),
        );
        Ok(admission)
    }

    pub fn new(
        store: Arc<ContainerStore>,
        node: NodeIdentity,
        pool: HandlerPool,
        live: LiveSettings,
        disk: DiskModel,
        limits: ServiceLimits,
    ) -> Self {
        let version = node.version;
        Self {
            hdds: HddsDispatcher::new(store, node),
            pool,
            live: ArcSwap::from_pointee(live),
            disk,
            limits,
            metrics: Metrics::new(version),
            version,
            stages: Stages::none(),
        }
    }

    /// The container store the handlers serve from.
    pub fn store(&self) -> &Arc<ContainerStore> {
        self.hdds.store()
    }

    /// Handles one request the way the simulated DataNode does, with its service limits, pool,
    /// delays and faults. `ops_taken`: the stream's early limit check already charged this request.
    pub async fn dispatch(&self, req: Request, rng: &mut SmallRng, ops_taken: bool) -> Outcome {
        self.dispatch_in(
            req,
            rng,
            ops_taken,
            DispatcherContext::default(),
            Executor::Handlers,
        )
        .await
    }

    /// [`Admission::dispatch`] with what the front end knows of the request (the Ratis port:
    /// its transaction's log index) and the threads that serve it.
    pub async fn dispatch_in(
        &self,
        req: Request,
        rng: &mut SmallRng,
        ops_taken: bool,
        context: DispatcherContext,
        on: Executor<'_>,
    ) -> Outcome {
        let arrived = Instant::now();
        // The profile's latency floor counts the requests in service on the gRPC path.
        let floor_ticket = match (&self.stages.latency_floor, &on) {
            (Some(floor), Executor::Handlers) => Some(floor.arrive(rng)),
            _ => None,
        };
        let cmd = Type::try_from(req.cmd_type).unwrap_or(Type::ListContainer);
        let size = req.encoded_len();
        // The milliseconds an echo sleeps on the handler (the profile's handler wakes from it
        // late, the later the longer).
        let slept_ms = req
            .echo
            .as_ref()
            .and_then(|e| e.sleep_time_ms)
            .map_or(0, |ms| u32::try_from(ms).unwrap_or(0));
        self.metrics.request_received(cmd, size);
        if self.limits.is_limited() {
            let egress = crate::datanode::dispatcher::expected_response_bytes(&req);
            if let Err(rejection) = self.limits.check(size as u64, egress, ops_taken, arrived) {
                self.metrics.rejected(rejection.reason.label());
                if let crate::sim::service_limits::RejectTiming::After(d) =
                    self.limits.policy().timing
                {
                    crate::datanode::timer::sleep(d).await;
                }
                let status = self.limits.status(rejection);
                self.done(cmd, Answered::Grpc(status.code()), arrived, 0);
                return Outcome::Fail(status);
            }
        }
        // Draw before waiting, so a stream's draws follow its request order whatever the load.
        let live = self.live.load();
        let delay = live.delays.sample(cmd, rng);
        let fault = live.faults.draw(cmd, rng).cloned();
        drop(live);
        let sleep_tail = self
            .stages
            .handler
            .as_ref()
            .filter(|_| matches!(on, Executor::Handlers))
            .map_or(Duration::ZERO, |h| h.draw_sleep_tail(slept_ms, rng));

        let mut held = match self.hold(on).await {
            Ok(held) => held,
            Err(full) => {
                self.metrics.rejected("queue_full");
                self.done(
                    cmd,
                    Answered::Grpc(tonic::Code::ResourceExhausted),
                    arrived,
                    0,
                );
                return Outcome::Fail(Status::resource_exhausted(format!(
                    "dn-sim handler queue is full ({} requests waiting, --max-queue)",
                    full.bound
                )));
            }
        };
        let start = held.service_start(arrived);
        if matches!(on, Executor::Handlers) {
            self.metrics.queue_wait(start - arrived);
        }
        let mut clock = ServiceClock::starting_at(start);
        clock.hold(delay).await;
        if let Some(kind) = &fault {
            self.metrics.fault_injected(kind);
        }
        let container_id = req.container_id;
        let before = self.hdds.before(cmd, &req);
        let outcome = match fault {
            Some(FaultKind::Result(result)) => {
                let mut req = req;
                let message = crate::sim::fault::result_message(result, container_id);
                Outcome::Answer(error(&mut req, result, message))
            }
            Some(FaultKind::Grpc(code)) => {
                Outcome::Fail(Status::new(code, crate::sim::fault::grpc_message(code)))
            }
            Some(FaultKind::Drop) => Outcome::Drop,
            Some(FaultKind::Reset) => Outcome::Reset,
            Some(FaultKind::Stall(stall)) => {
                clock.hold(stall).await;
                self.serve_timed(req, rng, &mut clock, context).await
            }
            None => self.serve_timed(req, rng, &mut clock, context).await,
        };
        // The profile's stages, on the gRPC path's handlers only: the Ratis path's threads are
        // not the profile's stages.
        let staged = matches!(on, Executor::Handlers)
            && (self.stages.handler.is_some() || self.stages.cpu.is_some());
        if staged {
            let (answer, echo_payload) = match &outcome {
                Outcome::Answer(resp) => (
                    resp.encoded_len(),
                    resp.echo
                        .as_ref()
                        .and_then(|e| e.payload.as_ref())
                        .map_or(0, |p| p.len()),
                ),
                _ => (0, 0),
            };
            // The handler's own time, held on its clock like an injected delay but sleeping
            // only beyond the pool's slack (a sleep per request of tens of microseconds cost
            // dn-sim a third of its 0 B echoes at pool 16, 32 x 32, on 2 cores).
            if let Some(stage) = &self.stages.handler {
                let d = stage.service_time(size, answer, slept_ms, sleep_tail);
                clock.hold_within(d, crate::sim::pool::HOLD_SLACK).await;
            }
            // The CPU the real DataNode spends beyond dn-sim's own, spent for real
            // (`sim::cpu`): the handler's part before it is free, the background's owed.
            if let Some(cpu) = &self.stages.cpu {
                cpu.serve(size, answer, echo_payload, cmd == Type::WriteChunk)
                    .await;
            }
        }
        held.busy_until(clock.end());
        // The handler is free once the answer exists; a dropped request does not hold it.
        drop(held);
        // The profile's latency floor, holding nothing: only a request early for it waits.
        if let (Some(floor), Some(ticket)) = (&self.stages.latency_floor, &floor_ticket) {
            floor.wait(ticket).await;
        }
        let (answered, size) = match &outcome {
            Outcome::Answer(resp) => {
                self.hdds
                    .account(&self.metrics.datanode, cmd, &before, resp, arrived);
                (Answered::Result(resp.result), resp.encoded_len())
            }
            Outcome::Fail(status) => (Answered::Grpc(status.code()), 0),
            Outcome::Drop => (Answered::Dropped, 0),
            Outcome::Reset => (Answered::Reset, 0),
        };
        self.done(cmd, answered, arrived, size);
        outcome
    }

    /// Waits for the threads `on` names, in arrival order.
    async fn hold(&self, on: Executor<'_>) -> Result<Held, crate::sim::pool::QueueFull> {
        Ok(match on {
            Executor::Handlers => Held([Some(self.pool.acquire().await?), None]),
            Executor::Pool(pool) => Held([Some(pool.acquire().await?), None]),
            Executor::Queued { queue, pool } => {
                let first = queue.acquire().await?;
                Held([Some(first), Some(pool.acquire().await?)])
            }
            Executor::Inline => Held([None, None]),
        })
    }

    fn done(&self, cmd: Type, answered: Answered, arrived: Instant, size: usize) {
        self.metrics
            .request_done(cmd, answered, arrived.elapsed(), size);
    }

    /// The DataNode's own work plus the shared disk's time for the chunk data it moved.
    async fn serve_timed(
        &self,
        req: Request,
        rng: &mut SmallRng,
        clock: &mut ServiceClock,
        context: DispatcherContext,
    ) -> Outcome {
        let written = request_chunk_bytes(&req);
        match self.hdds.serve(req, clock, context).await {
            Ok(resp) => {
                let moved = written + chunk_bytes(&resp);
                if moved > 0 && self.disk.is_enabled() {
                    let wait = self.disk.reserve(moved, Instant::now(), rng);
                    clock.hold(wait).await;
                }
                Outcome::Answer(resp)
            }
            Err(status) => Outcome::Fail(status),
        }
    }
}

/// The threads one request holds (none, one, or a queue and a thread); dropping it frees them.
struct Held([Option<crate::sim::pool::Handler>; 2]);

impl Held {
    /// Service starts when the request has arrived and every thread it holds is free.
    fn service_start(&self, arrived: Instant) -> Instant {
        self.0
            .iter()
            .flatten()
            .fold(arrived, |t, h| h.service_start(t))
    }

    fn busy_until(&mut self, end: Instant) {
        for h in self.0.iter_mut().flatten() {
            h.busy_until(end);
        }
    }
}

/// Chunk data bytes a request carries (WriteChunk, PutSmallFile).
fn request_chunk_bytes(req: &Request) -> u64 {
    let write = req
        .write_chunk
        .as_ref()
        .and_then(|w| w.data.as_ref())
        .map_or(0, |d| d.len() as u64);
    write
        + req
            .put_small_file
            .as_ref()
            .map_or(0, |p| p.data.len() as u64)
}

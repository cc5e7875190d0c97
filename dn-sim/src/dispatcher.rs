//! Per-request logic. [`Dispatcher::dispatch`] is the simulator around the DataNode: it counts the
//! request, takes a handler from the pool (waiting in FIFO order), draws the injected delay and
//! fault, holds the handler through the delay, and records metrics. [`Dispatcher::serve`] is the
//! DataNode itself, in the order of Ozone's `HddsDispatcher.dispatchRequest`
//! (the conformance suite checks it against a real one): route by `cmdType` (Echo here, everything else to
//! [`KeyValueHandler`], which also runs the container checks), build the response envelope. Application errors are normal responses with `result != SUCCESS`; only failures the
//! real DataNode reports through `onError` become a gRPC status.

use crate::disk::DiskModel;
use crate::fault::FaultKind;
use crate::keyvalue::KeyValueHandler;
use crate::metrics::{Answered, Metrics};
use crate::payload::PayloadSource;
use crate::pool::HandlerPool;
use crate::service_limits::ServiceLimits;
pub use crate::settings::LiveSettings;
use crate::store::ContainerStore;
use crate::timer::ServiceClock;
use arc_swap::ArcSwap;
use common::proto::{
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    EchoResponseProto, Result as OzoneResult, Type,
};
use prost::Message;
use rand::rngs::SmallRng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// Who the simulated DataNode is: its UUID and the Ozone release it answers as.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    pub datanode_uuid: String,
    pub version: crate::version::OzoneVersion,
}

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

pub struct Dispatcher {
    keyvalue: KeyValueHandler,
    payloads: PayloadSource,
    pub pool: HandlerPool,
    pub live: ArcSwap<LiveSettings>,
    disk: DiskModel,
    pub limits: ServiceLimits,
    pub metrics: Metrics,
    /// The Ozone release answered as (also in the handler's `NodeIdentity`).
    pub version: crate::version::OzoneVersion,
}

impl Dispatcher {
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
            keyvalue: KeyValueHandler::new(store, node),
            payloads: PayloadSource::new(),
            pool,
            live: ArcSwap::from_pointee(live),
            disk,
            limits,
            metrics: Metrics::new(version),
            version,
        }
    }

    /// The container store the handlers serve from.
    pub fn store(&self) -> &Arc<ContainerStore> {
        self.keyvalue.store()
    }

    /// Handles one request the way the simulated DataNode does, with its service limits, pool,
    /// delays and faults. `ops_taken`: the stream's early limit check already charged this request.
    pub async fn dispatch(&self, req: Request, rng: &mut SmallRng, ops_taken: bool) -> Outcome {
        let arrived = Instant::now();
        let cmd = Type::try_from(req.cmd_type).unwrap_or(Type::ListContainer);
        let size = req.encoded_len();
        self.metrics.request_received(cmd, size);
        if self.limits.is_limited() {
            let egress = expected_response_bytes(&req);
            if let Err(rejection) = self.limits.check(size as u64, egress, ops_taken, arrived) {
                self.metrics.rejected(rejection.reason.label());
                if let crate::service_limits::RejectTiming::After(d) = self.limits.policy().timing {
                    crate::timer::sleep(d).await;
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

        let mut handler = match self.pool.acquire().await {
            Ok(handler) => handler,
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
        let start = handler.service_start(arrived);
        self.metrics.queue_wait(start - arrived);
        let mut clock = ServiceClock::starting_at(start);
        clock.hold(delay).await;
        if let Some(kind) = &fault {
            self.metrics.fault_injected(kind);
        }
        let container_id = req.container_id;
        let before = Accounting::before(cmd, &req, self.keyvalue.store());
        let outcome = match fault {
            Some(FaultKind::Result(result)) => {
                let mut req = req;
                let message = crate::fault::result_message(result, container_id);
                Outcome::Answer(error(&mut req, result, message))
            }
            Some(FaultKind::Grpc(code)) => {
                Outcome::Fail(Status::new(code, crate::fault::grpc_message(code)))
            }
            Some(FaultKind::Drop) => Outcome::Drop,
            Some(FaultKind::Reset) => Outcome::Reset,
            Some(FaultKind::Stall(stall)) => {
                clock.hold(stall).await;
                self.serve_timed(req, rng, &mut clock).await
            }
            None => self.serve_timed(req, rng, &mut clock).await,
        };
        handler.busy_until(clock.end());
        // The handler is free once the answer exists; a dropped request does not hold it.
        drop(handler);
        let (answered, size) = match &outcome {
            Outcome::Answer(resp) => {
                self.account(cmd, &before, resp, arrived);
                (Answered::Result(resp.result), resp.encoded_len())
            }
            Outcome::Fail(status) => (Answered::Grpc(status.code()), 0),
            Outcome::Drop => (Answered::Dropped, 0),
            Outcome::Reset => (Answered::Reset, 0),
        };
        self.done(cmd, answered, arrived, size);
        outcome
    }

    fn done(&self, cmd: Type, answered: Answered, arrived: Instant, size: usize) {
        self.metrics
            .request_done(cmd, answered, arrived.elapsed(), size);
    }

    /// The DataNode's `ContainerMetrics` for an answered request (`HddsDispatcher.dispatchRequest`
    /// and the handlers): the latency sample only when the handler ran — not after the
    /// dispatcher's pre-handler failures (container not found, CreateContainer without payload,
    /// a full volume refusing a write) —, `bytes<T>` on success only, and the ops counted inside
    /// a request (an auto-created container's CreateContainer, a piggybacked PutBlock).
    fn account(&self, cmd: Type, before: &Accounting, resp: &Response, arrived: Instant) {
        let result = resp.result;
        let pre_handler = (result == OzoneResult::ContainerNotFound as i32 && !before.existed)
            || (result == OzoneResult::MalformedRequest as i32
                && cmd == Type::CreateContainer
                && before.no_create_payload)
            || (result == OzoneResult::DiskOutOfSpace as i32 && before.refused_if_full);
        if !before.existed
            && matches!(
                cmd,
                Type::WriteChunk | Type::PutBlock | Type::PutSmallFile | Type::StreamInit
            )
            && self.keyvalue.store().get(before.container_id).is_some()
        {
            // Auto-create: one more CreateContainer op and its latency.
            self.metrics.inner_op(Type::CreateContainer);
            self.metrics
                .handler_latency(Type::CreateContainer, Duration::ZERO);
        }
        if !pre_handler {
            self.metrics.handler_latency(cmd, arrived.elapsed());
        }
        if result != OzoneResult::Success as i32 {
            return;
        }
        if let Some(block) = before.piggybacked_block {
            self.metrics.inner_op(Type::PutBlock);
            self.metrics.datanode_bytes(Type::PutBlock, block);
            self.metrics.handler_latency(Type::PutBlock, Duration::ZERO);
        }
        let bytes = match cmd {
            Type::GetBlock => resp
                .get_block
                .as_ref()
                .map_or(0, |g| g.block_data.encoded_len() as u64),
            Type::GetSmallFile => chunk_bytes(resp),
            _ => before.request_bytes,
        };
        self.metrics.datanode_bytes(cmd, bytes);
    }

    /// The DataNode's own work plus the shared disk's time for the chunk data it moved.
    async fn serve_timed(
        &self,
        req: Request,
        rng: &mut SmallRng,
        clock: &mut ServiceClock,
    ) -> Outcome {
        let written = request_chunk_bytes(&req);
        match self.serve(req, clock).await {
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

    /// Serves one request as the DataNode does. `Err` is a gRPC status that fails the stream.
    /// Holds (echo sleeps) run on the handler's `clock`.
    pub async fn serve(
        &self,
        mut req: Request,
        clock: &mut ServiceClock,
    ) -> Result<Response, Status> {
        let Ok(cmd) = Type::try_from(req.cmd_type) else {
            // The codec rejects unknown required enum values before this point; kept for safety.
            return Ok(error(
                &mut req,
                OzoneResult::UnsupportedRequest,
                "Unsupported request type".into(),
            ));
        };
        match cmd {
            Type::Echo => self.echo(req, clock).await,
            other => self.keyvalue.handle(other, req).await,
        }
    }

    /// `KeyValueHandler.handleEcho`: sleep `sleepTimeMs` on the handler, answer `payloadSizeResp`
    /// bytes of random data; the request payload is ignored. An absent `echo` is the default
    /// request (an empty payload). Echo is a write unless `readOnly` is true, so a failure
    /// (a negative size) marks the container UNHEALTHY, or fails the call (gRPC UNKNOWN) when the
    /// container is not OPEN, CLOSING or RECOVERING.
    async fn echo(&self, mut req: Request, clock: &mut ServiceClock) -> Result<Response, Status> {
        let container = match self.keyvalue.store().lookup(req.container_id) {
            Ok(c) => c,
            Err(e) => return Ok(error(&mut req, e.result, e.message)),
        };
        let echo = req.echo.take().unwrap_or_default();
        let write = echo.read_only != Some(true);
        if let Some(resp) = self.keyvalue.check_node(&container, &mut req) {
            return self.keyvalue.after_handler(write, &container, resp);
        }
        if let Some(ms) = echo.sleep_time_ms.filter(|&ms| ms > 0) {
            // The DataNode sleeps on its worker thread: the handler stays busy.
            clock.hold(Duration::from_millis(ms as u64)).await;
        }
        let size = echo.payload_size_resp.unwrap_or(0);
        if size < 0 {
            // commons-lang's `RandomUtils.nextBytes` / `randomBytes` refuses a negative count
            // (after the sleep); the handler answers the RuntimeException.
            let msg = "java.lang.IllegalArgumentException: Count cannot be negative.".to_string();
            let resp = error(&mut req, OzoneResult::ContainerInternalError, msg);
            return self.keyvalue.after_handler(write, &container, resp);
        }
        let size = size as usize;
        if size > common::MAX_MESSAGE_SIZE {
            // A real DN would build the response and the client would refuse it as too large.
            return Err(Status::resource_exhausted(format!(
                "gRPC message exceeds maximum size {}: {size}",
                common::MAX_MESSAGE_SIZE
            )));
        }
        let mut resp = envelope(&mut req, OzoneResult::Success);
        resp.echo = Some(EchoResponseProto {
            payload: Some(self.payloads.slice(size)),
        });
        Ok(resp)
    }
}

/// What [`Dispatcher::account`] needs to know of a request and the store before the request is
/// served.
struct Accounting {
    container_id: i64,
    /// The container existed when the request arrived.
    existed: bool,
    /// A CreateContainer without its `createContainer` payload.
    no_create_payload: bool,
    /// A data write the dispatcher refuses while the volume is full (WriteChunk, PutBlock,
    /// PutSmallFile to an OPEN container of a full store).
    refused_if_full: bool,
    /// `bytes<T>` a successful request counts from the request itself: WriteChunk and ReadChunk
    /// the declared `chunkData.len`, PutBlock the serialized BlockData, PutSmallFile the chunk
    /// `len`; 0 for types that count nothing (Echo, ListBlock, …).
    request_bytes: u64,
    /// A WriteChunk's piggybacked PutBlock: its serialized BlockData size.
    piggybacked_block: Option<u64>,
}

impl Accounting {
    fn before(cmd: Type, req: &Request, store: &ContainerStore) -> Self {
        let container = store.get(req.container_id);
        let request_bytes = match cmd {
            Type::WriteChunk => req
                .write_chunk
                .as_ref()
                .and_then(|w| w.chunk_data.as_ref())
                .map_or(0, |c| c.len),
            Type::ReadChunk => req.read_chunk.as_ref().map_or(0, |r| r.chunk_data.len),
            Type::PutBlock => req
                .put_block
                .as_ref()
                .map_or(0, |p| stored_block_len(&p.block_data)),
            Type::PutSmallFile => req.put_small_file.as_ref().map_or(0, |p| p.chunk_info.len),
            _ => 0,
        };
        let piggybacked_block = match cmd {
            Type::WriteChunk => req
                .write_chunk
                .as_ref()
                .and_then(|w| w.block.as_ref())
                .map(|b| stored_block_len(&b.block_data)),
            _ => None,
        };
        Self {
            container_id: req.container_id,
            refused_if_full: matches!(cmd, Type::WriteChunk | Type::PutBlock | Type::PutSmallFile)
                && container
                    .as_ref()
                    .is_some_and(|c| c.state() == common::proto::container_data_proto::State::Open)
                && store.is_full(),
            existed: container.is_some(),
            no_create_payload: req.create_container.is_none(),
            request_bytes,
            piggybacked_block,
        }
    }
}

/// The size the DataNode counts for a PutBlock: its BlockData as stored and serialized again
/// (`BlockData.getProtoBufMessage`): bcsId 0 on the gRPC path and always written, no `flags`,
/// `size` the sum of the chunks' lengths; metadata and chunks as given.
fn stored_block_len(block: &common::proto::BlockData) -> u64 {
    use prost::encoding::message::encoded_len;
    let head = common::proto::BlockData {
        block_id: common::proto::DatanodeBlockId {
            block_commit_sequence_id: Some(0),
            ..block.block_id
        },
        size: Some(block.chunks.iter().map(|c| c.len as i64).sum()),
        ..Default::default()
    }
    .encoded_len();
    let metadata: usize = block.metadata.iter().map(|kv| encoded_len(3, kv)).sum();
    let chunks: usize = block.chunks.iter().map(|c| encoded_len(4, c)).sum();
    (head + metadata + chunks) as u64
}

/// Chunk data bytes an answer carries (ReadChunk, GetSmallFile), for metrics and the disk model.
fn chunk_bytes(resp: &Response) -> u64 {
    use common::proto::read_chunk_response_proto::ResponseData;
    let read = |r: &common::proto::ReadChunkResponseProto| match &r.response_data {
        Some(ResponseData::Data(d)) => d.len() as u64,
        Some(ResponseData::DataBuffers(b)) => b.buffers.iter().map(|x| x.len() as u64).sum(),
        None => 0,
    };
    resp.read_chunk.as_ref().map_or(0, read)
        + resp.get_small_file.as_ref().map_or(0, |g| read(&g.data))
}

/// Response data a request asks for, charged to the egress limit (and, up to the message limit,
/// reserved in the in-flight budget) before it is served.
pub(crate) fn expected_response_bytes(req: &Request) -> u64 {
    let echo = req
        .echo
        .as_ref()
        .and_then(|e| e.payload_size_resp)
        .unwrap_or(0)
        .max(0) as u64;
    echo.saturating_add(req.read_chunk.as_ref().map_or(0, |r| r.chunk_data.len))
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

/// The response envelope every answer shares: `cmdType` and `traceID` ("" when absent) copied.
/// `clientId`/`callId` (fields 100/101) exist in no release 2.0–2.2: a real DataNode parses them
/// as unknown fields and never answers them, whatever the request carries.
pub fn envelope(req: &mut Request, result: OzoneResult) -> Response {
    Response {
        cmd_type: req.cmd_type,
        trace_id: Some(req.trace_id.take().unwrap_or_default()),
        result: result as i32,
        ..Default::default()
    }
}

/// An error answer: the envelope plus the exception text in `message`.
pub fn error(req: &mut Request, result: OzoneResult, message: String) -> Response {
    let mut resp = envelope(req, result);
    resp.message = Some(message);
    resp
}

//! The in-flight memory budget (`--max-inflight-bytes`): bytes of requests received and not yet
//! answered, plus bytes of answers built and not yet sent, for all clients together. Beyond it, a
//! new request is refused with RESOURCE_EXHAUSTED before its body is read, and an answer waits
//! (at most [`ANSWER_WAIT`], then RESOURCE_EXHAUSTED) for room.
//!
//! ## Why requests are refused rather than kept waiting
//! A request kept waiting unread still holds the bytes HTTP/2 has buffered for it (up to its
//! stream window, 8 MiB), and with them part of its connection's shared window (32 MiB). A few
//! waiting streams fill that window, and then an admitted message on the same connection can no
//! longer arrive: its reservation is never released and the waiters wait for ever (measured: 16
//! streams of 24 MiB on two connections under a 32 MiB budget hung). A refused stream is reset,
//! its buffered bytes are freed and its window returns to the connection. An answer's wait holds
//! no receive window (its request was read in full), so answers may wait.
//!
//! ## How bytes are counted
//! - [`InflightLayer`] wraps the request body of every `send` stream in a [`BudgetBody`], which
//!   reads the gRPC framing (a 5-byte prefix with the message's length) as the bytes pass. Before
//!   it hands tonic the first byte of a message's body it reserves the whole message (prefix
//!   included), or fails the body with RESOURCE_EXHAUSTED when there is no room. It hands tonic no
//!   byte past the end of the current message, so tonic, which asks for more only when it lacks a
//!   complete message, never holds bytes of a message that was not reserved.
//! - The service ([`crate::net::grpc_service`]) reserves the answer a request asks for (Echo's
//!   `payloadSizeResp`, ReadChunk's `len`, …: [`expected_answer`]) before it is served, then
//!   swaps everything for the built answer's encoded size. The response body ([`ChargedBody`])
//!   moves that charge onto the encoded bytes themselves (`Bytes::from_owner`), so it is released
//!   when h2 drops them, i.e. once they are written to the socket: an answer a client does not
//!   read stays charged until the client reads it or the stream ends. (hyper polls a response
//!   body for its next frame as soon as h2 has buffered the previous one, so the next poll would
//!   be too early.)
//! - A stream's charges are one counter ([`StreamCharge`]); whatever it still holds is released
//!   when the stream ends (answered, reset, or its connection closed).
//!
//! ## Admission
//! A reservation is granted when it fits under the limit, or when everything in flight is the
//! asking stream's own (so a single request larger than the limit is served alone rather than
//! never). Small costs (at most [`SMALL_COST`]) may also use [`SMALL_ALLOWANCE`] above the limit,
//! so that large answers held by clients that do not read them cannot starve small requests.
//! Waiting answers are not served in FIFO order: a release wakes every waiter and the first to
//! fit wins.
//!
//! Once a request is decoded, the service also charges what its BlockData takes in memory beyond
//! its wire bytes ([`decoded_extra`]), and re-encodes a request made mostly of unknown fields
//! ([`compact`]) so that what the store keeps of it pins no larger buffer.
//!
//! The hot path is atomics only: a reservation is one compare-and-swap loop on the shared counter,
//! a release one subtraction; the waiters' `Notify` (which has a lock) is touched only when an
//! answer had to wait. Allocations: a [`StreamCharge`] and a boxed response future per stream
//! (tonic and hyper allocate several per stream already), and one small owner per answer frame
//! over [`SMALL_COST`].

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use metrics::{Counter, Gauge, KeyName, SharedString, Unit};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

use common::proto::ContainerCommandRequestProto as Request;

/// `--max-inflight-bytes` default: 1 GiB, the default of Ozone's pending-bytes limit of its write
/// path (`hdds.container.ratis.leader.pending.bytes.limit` = 1GB, 2.0.0–2.2.0); the gRPC path of
/// a real DataNode has no byte budget of its own.
pub const DEFAULT_MAX_INFLIGHT_BYTES: u64 = 1 << 30;

/// Costs up to this size (a request or answer of 64 KiB or less) may use [`SMALL_ALLOWANCE`].
pub const SMALL_COST: u64 = 64 << 10;

/// Room above the limit that only small costs may use.
pub const SMALL_ALLOWANCE: u64 = 16 << 20;

/// How long an answer waits for room before its request is refused (RESOURCE_EXHAUSTED): long
/// enough for other answers to be read, short enough that a stream whose pipelined requests hold
/// its connection's receive window cannot keep an admitted request on that connection stuck.
pub const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The gRPC length-prefixed message header: a compression flag and a big-endian u32 length.
const GRPC_HEADER: usize = 5;

/// The budget all streams share.
pub struct InflightBudget {
    limit: AtomicU64,
    in_flight: AtomicU64,
    /// Reservations waiting for room; `notify` is woken only when there are some.
    waiters: AtomicUsize,
    notify: Arc<Notify>,
    gauge: Gauge,
    waited: Counter,
    refused: Counter,
}

impl InflightBudget {
    /// A budget of `limit` bytes whose metrics go to `metrics`' `/metrics` exposition:
    /// `dn_sim_inflight_bytes` (a gauge, refreshed on scrape), `dn_sim_inflight_limit_bytes` and
    /// `dn_sim_inflight_waits_total` (reservations that had to wait for room).
    pub fn new(limit: u64, metrics: &crate::sim::metrics::Metrics) -> Arc<Self> {
        let recorder = metrics.recorder();
        use metrics::Recorder;
        let meta = &metrics::Metadata::new(module_path!(), metrics::Level::INFO, None);
        recorder.describe_gauge(
            KeyName::from_const_str("dn_sim_inflight_bytes"),
            Some(Unit::Bytes),
            SharedString::const_str(
                "Bytes of requests received and not yet answered plus answers not yet sent",
            ),
        );
        recorder.describe_gauge(
            KeyName::from_const_str("dn_sim_inflight_limit_bytes"),
            Some(Unit::Bytes),
            SharedString::const_str("The in-flight budget (--max-inflight-bytes)"),
        );
        recorder.describe_counter(
            KeyName::from_const_str("dn_sim_inflight_waits_total"),
            None,
            SharedString::const_str(
                "Requests and answers that waited for room in the in-flight budget",
            ),
        );
        recorder.describe_counter(
            KeyName::from_const_str("dn_sim_inflight_refusals_total"),
            None,
            SharedString::const_str(
                "Requests refused (RESOURCE_EXHAUSTED) because the in-flight budget had no room",
            ),
        );
        recorder
            .register_gauge(
                &metrics::Key::from_name("dn_sim_inflight_limit_bytes"),
                meta,
            )
            .set(limit as f64);
        let budget = Arc::new(Self {
            limit: AtomicU64::new(limit),
            in_flight: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            notify: Arc::new(Notify::new()),
            gauge: recorder.register_gauge(&metrics::Key::from_name("dn_sim_inflight_bytes"), meta),
            waited: recorder.register_counter(
                &metrics::Key::from_name("dn_sim_inflight_waits_total"),
                meta,
            ),
            refused: recorder.register_counter(
                &metrics::Key::from_name("dn_sim_inflight_refusals_total"),
                meta,
            ),
        });
        budget.waited.increment(0);
        budget.refused.increment(0);
        budget
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes in flight now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Sets the gauge from the counter (called when metrics are rendered).
    pub fn refresh(&self) {
        self.gauge.set(self.in_flight() as f64);
    }

    /// Takes `n` bytes if they fit (see the module notes); `own`: what the asking stream holds;
    /// `extra`: room above the limit this reservation may use.
    fn try_take(&self, n: u64, own: u64, extra: u64) -> bool {
        let limit = self.limit().saturating_add(extra);
        let room = if n <= SMALL_COST {
            limit.saturating_add(SMALL_ALLOWANCE)
        } else {
            limit
        };
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                (current.saturating_add(n) <= room || current <= own).then_some(current + n)
            })
            .is_ok()
    }

    /// The status of a request refused for want of room.
    fn full(&self, n: u64) -> tonic::Status {
        tonic::Status::resource_exhausted(format!(
            "dn-sim's in-flight budget has no room for {n} more bytes ({} of {} bytes in flight, \
             --max-inflight-bytes)",
            self.in_flight(),
            self.limit()
        ))
    }

    fn take(&self, n: u64) {
        self.in_flight.fetch_add(n, Ordering::AcqRel);
    }

    fn give_back(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.in_flight.fetch_sub(n, Ordering::AcqRel);
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.notify.notify_waiters();
        }
    }
}

/// What one stream holds in the budget.
pub struct StreamCharge {
    budget: Arc<InflightBudget>,
    held: AtomicU64,
    /// The wire length of the last message whose prefix was read.
    last_message: AtomicU64,
}

/// A reservation waiting for room: the registered wake-up, counted in `waiters` while it lives.
struct Waiting {
    notified: Pin<Box<OwnedNotified>>,
    budget: Arc<InflightBudget>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.budget.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

impl StreamCharge {
    pub fn new(budget: Arc<InflightBudget>) -> Arc<Self> {
        Arc::new(Self {
            budget,
            held: AtomicU64::new(0),
            last_message: AtomicU64::new(0),
        })
    }

    /// The wire length (without the prefix) of the last message read on this stream.
    pub fn last_message_len(&self) -> u64 {
        self.last_message.load(Ordering::Acquire)
    }

    /// Bytes this stream holds.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// Reserves `n` bytes, waiting for room (`waiting` keeps the wake-up between polls); what
    /// the stream holds counts as room (see [`StreamCharge::reserve`]).
    fn poll_reserve(
        &self,
        n: u64,
        waiting: &mut Option<Waiting>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        loop {
            if let Some(w) = waiting.as_mut() {
                // Registered before the retry below, so a release in between is not missed.
                w.notified.as_mut().enable();
            }
            let own = self.held();
            if n == 0 || self.budget.try_take(n, own, own) {
                self.held.fetch_add(n, Ordering::AcqRel);
                *waiting = None;
                return Poll::Ready(());
            }
            match waiting {
                None => {
                    self.budget.waited.increment(1);
                    self.budget.waiters.fetch_add(1, Ordering::AcqRel);
                    *waiting = Some(Waiting {
                        notified: Box::pin(Arc::clone(&self.budget.notify).notified_owned()),
                        budget: Arc::clone(&self.budget),
                    });
                }
                Some(w) => {
                    ready!(w.notified.as_mut().poll(cx));
                    w.notified
                        .set(Arc::clone(&self.budget.notify).notified_owned());
                }
            }
        }
    }

    /// Reserves `n` bytes of a request's answer, waiting for room up to [`ANSWER_WAIT`]; then
    /// the RESOURCE_EXHAUSTED status that refuses the request. The request's own bytes, already
    /// held, count as room: the budget may then be passed by at most one request's size, but
    /// requests that hold their bytes while waiting for answer room cannot all wait for each
    /// other.
    pub async fn reserve(&self, n: u64) -> Result<(), tonic::Status> {
        let mut waiting = None;
        let wait = std::future::poll_fn(|cx| self.poll_reserve(n, &mut waiting, cx));
        match tokio::time::timeout(ANSWER_WAIT, wait).await {
            Ok(()) => Ok(()),
            Err(_) => {
                self.budget.refused.increment(1);
                Err(self.budget.full(n))
            }
        }
    }

    /// Takes `n` bytes if there is room now, without waiting.
    fn try_reserve(&self, n: u64) -> bool {
        if n == 0 || self.budget.try_take(n, self.held(), 0) {
            self.held.fetch_add(n, Ordering::AcqRel);
            return true;
        }
        false
    }

    /// Charges `n` bytes that already exist (a built answer), without waiting.
    pub fn charge(&self, n: u64) {
        self.budget.take(n);
        self.held.fetch_add(n, Ordering::AcqRel);
    }

    /// Moves up to `n` of what this stream holds onto a frame of its answer; returns how much.
    fn transfer(&self, n: u64) -> u64 {
        let before = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                Some(h.saturating_sub(n))
            })
            .expect("the closure always returns Some");
        before.min(n)
    }

    /// Releases everything this stream holds.
    pub fn release_all(&self) {
        let n = self.held.swap(0, Ordering::AcqRel);
        self.budget.give_back(n);
    }
}

impl Drop for StreamCharge {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// The answer bytes a request will make dn-sim build, reserved before it is served (at most the
/// message limit: larger answers are refused unbuilt): Echo's `payloadSizeResp`, ReadChunk's
/// `len`, ReadBlock's `length`; GetSmallFile's committed block size and, with GetBlock and
/// FinalizeBlock, the memory of the committed `BlockData` it copies; ReadContainer's metadata
/// entries (at most `store::bounds::MAX_CONTAINER_METADATA`); the whole message limit for
/// ListBlock and GetContainerChecksumInfo, whose size is known only once built. 0 for the rest,
/// whose answers are small and charged once built.
pub async fn expected_answer(store: &crate::datanode::store::ContainerStore, req: &Request) -> u64 {
    let max = common::MAX_MESSAGE_SIZE as u64;
    let mut bytes = crate::datanode::dispatcher::expected_response_bytes(req);
    if let Some(read) = &req.read_block {
        bytes = bytes.saturating_add(read.length.unwrap_or(0));
    }
    if req.list_block.is_some() || req.get_container_checksum_info.is_some() {
        bytes = max;
    }
    if req.read_container.is_some()
        && let Some(container) = store.get(req.container_id)
    {
        bytes = bytes.saturating_add(container.metadata_cost());
    }
    let block = req
        .get_block
        .as_ref()
        .map(|g| g.block_id)
        .or(req.finalize_block.as_ref().map(|f| f.block_id))
        .or(req.get_small_file.as_ref().map(|s| s.block.block_id));
    if let Some(id) = block
        && let Some(container) = store.get(req.container_id)
    {
        bytes = bytes.saturating_add(container.committed_cost(id.local_id).await);
        if req.get_small_file.is_some()
            && let Ok(size) = container.committed_length(&id).await
        {
            bytes = bytes.saturating_add(size.max(0) as u64);
        }
    }
    bytes.min(max)
}

/// What a decoded request takes in memory beyond its wire bytes, roughly: a message of many tiny
/// sub-messages (a BlockData of 100,000 empty chunks: 14 bytes each on the wire, over 100 in
/// memory) decodes to several times its wire size. Charged once decoded, so that later requests
/// wait for it.
pub fn decoded_extra(req: &Request) -> u64 {
    use crate::datanode::store::bounds::block_data_cost;
    let block = req
        .put_block
        .as_ref()
        .map(|p| &p.block_data)
        .or(req.put_small_file.as_ref().map(|p| &p.block.block_data))
        .or(req
            .write_chunk
            .as_ref()
            .and_then(|w| w.block.as_ref())
            .map(|b| &b.block_data));
    block.map_or(0, block_data_cost)
}

/// A request whose wire form is mostly fields dn-sim does not keep (unknown fields, which prost
/// skips) is re-encoded into a buffer of its own size: its `bytes` fields would otherwise be
/// slices of the whole receive buffer, and a stored chunk would pin it all. Returns the request
/// and, when it was re-encoded, the bytes it now holds.
pub fn compact(req: Request, wire_len: u64) -> (Request, Option<u64>) {
    use prost::Message;
    let kept = req.encoded_len() as u64;
    if wire_len <= kept.saturating_mul(2).saturating_add(SMALL_COST) {
        return (req, None);
    }
    let owned = Bytes::from(req.encode_to_vec());
    match Request::decode(owned) {
        Ok(compacted) => (compacted, Some(kept)),
        // Unreachable (prost decodes what it encoded); keep the original.
        Err(_) => (req, None),
    }
}

/// A `send` stream's request body, reserving each message before tonic reads it.
pub struct BudgetBody<B> {
    inner: B,
    charge: Arc<StreamCharge>,
    /// The current message's prefix bytes seen so far (while `prefix_len` < 5).
    prefix: [u8; GRPC_HEADER],
    prefix_len: usize,
    /// Bytes of the current message's body still to hand out.
    remaining: u64,
    /// Bytes received from `inner` and not yet handed out.
    pending: Bytes,
    /// A message was refused: the body has ended with an error.
    refused: bool,
}

impl<B> BudgetBody<B> {
    pub fn new(inner: B, charge: Arc<StreamCharge>) -> Self {
        Self {
            inner,
            charge,
            prefix: [0; GRPC_HEADER],
            prefix_len: 0,
            remaining: 0,
            pending: Bytes::new(),
            refused: false,
        }
    }

    /// The next piece of `pending` to hand out, or the status refusing its message.
    fn next_piece(&mut self) -> Result<Bytes, tonic::Status> {
        if self.remaining > 0 {
            let n = self.remaining.min(self.pending.len() as u64) as usize;
            self.remaining -= n as u64;
            return Ok(self.pending.split_to(n));
        }
        // At a message boundary: collect the prefix.
        let take = (GRPC_HEADER - self.prefix_len).min(self.pending.len());
        let start = self.prefix_len;
        self.prefix[start..start + take].copy_from_slice(&self.pending[..take]);
        if start + take < GRPC_HEADER {
            // A prefix split across frames: its first bytes cost nothing to hand out.
            self.prefix_len += take;
            return Ok(self.pending.split_to(take));
        }
        let len = u64::from(u32::from_be_bytes(
            self.prefix[1..].try_into().expect("4 length bytes"),
        ));
        // tonic refuses a message over the limit from its prefix alone, reading no more of it;
        // otherwise it reserves the message's length in its buffer once it has read the prefix.
        let cost = if len <= common::MAX_MESSAGE_SIZE as u64 {
            GRPC_HEADER as u64 + len
        } else {
            0
        };
        if !self.charge.try_reserve(cost) {
            self.charge.budget.refused.increment(1);
            return Err(self.charge.budget.full(cost));
        }
        self.prefix_len = 0;
        self.remaining = len;
        self.charge.last_message.store(len, Ordering::Release);
        let n = (take as u64 + len).min(self.pending.len() as u64) as usize;
        self.remaining -= (n - take) as u64;
        Ok(self.pending.split_to(n))
    }
}

impl<B> Body for BudgetBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Data = Bytes;
    /// A boxed `tonic::Status` for a refusal, which tonic's decoder recovers as it is.
    type Error = tonic::codegen::StdError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.refused {
            return Poll::Ready(None);
        }
        if this.pending.is_empty() {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.has_remaining() => this.pending = data,
                    Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                None => return Poll::Ready(None),
            }
        }
        match this.next_piece() {
            Ok(piece) => Poll::Ready(Some(Ok(Frame::data(piece)))),
            Err(status) => {
                this.refused = true;
                this.pending = Bytes::new();
                Poll::Ready(Some(Err(Box::new(status))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let extra = self.pending.len() as u64;
        hint.set_lower(hint.lower().saturating_add(extra));
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(extra));
        }
        hint
    }
}

/// An answer's encoded bytes carrying their share of the budget until h2 drops them.
struct ChargedFrame {
    data: Bytes,
    budget: Arc<InflightBudget>,
    charged: u64,
}

impl AsRef<[u8]> for ChargedFrame {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for ChargedFrame {
    fn drop(&mut self) {
        self.budget.give_back(self.charged);
    }
}

/// A `send` stream's response body: each large frame takes the stream's answer charge with it.
pub struct ChargedBody {
    inner: tonic::body::Body,
    charge: Arc<StreamCharge>,
}

impl Body for ChargedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = &mut *self;
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        let Some(Ok(frame)) = frame else {
            return Poll::Ready(frame);
        };
        let frame = match frame.into_data() {
            // Small frames are released with the stream's next answer: wrapping them would cost
            // an allocation each for little.
            Ok(data) if data.len() as u64 > SMALL_COST => {
                let charged = this.charge.transfer(data.len() as u64);
                if charged == 0 {
                    Frame::data(data)
                } else {
                    Frame::data(Bytes::from_owner(ChargedFrame {
                        data,
                        budget: Arc::clone(&this.charge.budget),
                        charged,
                    }))
                }
            }
            Ok(data) => Frame::data(data),
            Err(other) => other,
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Wraps the request body of every `send` call in a [`BudgetBody`] and hands the stream's
/// [`StreamCharge`] to the service in the request's extensions.
#[derive(Clone)]
pub struct InflightLayer(pub Arc<InflightBudget>);

impl<S> tower::Layer<S> for InflightLayer {
    type Service = InflightService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InflightService {
            inner,
            budget: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct InflightService<S> {
    inner: S,
    budget: Arc<InflightBudget>,
}

impl<S, B> tower::Service<http::Request<B>> for InflightService<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        >,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != common::proto::SEND_PATH {
            return Box::pin(self.inner.call(req.map(tonic::body::Body::new)));
        }
        let charge = StreamCharge::new(Arc::clone(&self.budget));
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(Arc::clone(&charge));
        let body = tonic::body::Body::new(BudgetBody::new(body, Arc::clone(&charge)));
        let answer = self.inner.call(http::Request::from_parts(parts, body));
        Box::pin(async move {
            let resp = answer.await?;
            Ok(resp.map(|inner| tonic::body::Body::new(ChargedBody { inner, charge })))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: u64) -> Arc<InflightBudget> {
        InflightBudget::new(limit, &crate::sim::metrics::Metrics::default())
    }

    #[test]
    fn reservations_fit_under_the_limit_or_alone() {
        let b = budget(100 << 20);
        let (s1, s2) = (StreamCharge::new(b.clone()), StreamCharge::new(b.clone()));
        assert!(b.try_take(80 << 20, 0, 0));
        s1.held.store(80 << 20, Ordering::Release);
        // Another large reservation does not fit; a small one uses the allowance.
        assert!(!b.try_take(30 << 20, s2.held(), 0));
        assert!(b.try_take(1000, s2.held(), 0));
        b.give_back(1000);
        // Room the stream's own request counts as.
        assert!(b.try_take(30 << 20, 0, 10 << 20));
        b.give_back(30 << 20);
        // A stream holding everything in flight may go over the limit (alone).
        assert!(b.try_take(200 << 20, s1.held(), 0));
        b.give_back(200 << 20);
        s1.release_all();
        assert_eq!(b.in_flight(), 0);
        drop(s2);
        assert_eq!(b.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_waiting_reservation_is_granted_on_release() {
        let b = budget(10 << 20);
        let holder = StreamCharge::new(b.clone());
        holder.reserve(8 << 20).await.unwrap();
        let waiter = StreamCharge::new(b.clone());
        let w = Arc::clone(&waiter);
        let task = tokio::spawn(async move { w.reserve(4 << 20).await.unwrap() });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!task.is_finished());
        assert_eq!(b.waiters.load(Ordering::Acquire), 1);
        drop(holder);
        task.await.unwrap();
        assert_eq!(b.in_flight(), 4 << 20);
        assert_eq!(b.waiters.load(Ordering::Acquire), 0);
        drop(waiter);
        assert_eq!(b.in_flight(), 0);
    }

    /// A body of fixed frames.
    struct Frames(std::collections::VecDeque<Bytes>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    #[tokio::test]
    async fn a_message_without_room_is_refused_before_it_is_read() {
        let b = budget(1 << 20);
        let holder = StreamCharge::new(b.clone());
        holder.reserve(1 << 20).await.unwrap();
        let charge = StreamCharge::new(b.clone());
        let frames = [Bytes::from(message(100 << 10))].into_iter().collect();
        let mut body = BudgetBody::new(Frames(frames), Arc::clone(&charge));
        let err = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
            .await
            .unwrap()
            .unwrap_err();
        let status = err.downcast::<tonic::Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status.message().contains("--max-inflight-bytes"),
            "{status:?}"
        );
        assert_eq!(charge.held(), 0);
        assert!(
            std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
                .await
                .is_none()
        );
        drop(holder);
        assert_eq!(b.in_flight(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_at_most_answer_wait() {
        let b = budget(1 << 20);
        let holder = StreamCharge::new(b.clone());
        holder.reserve(1 << 20).await.unwrap();
        let waiter = StreamCharge::new(b.clone());
        let status = waiter.reserve(1 << 20).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(waiter.held(), 0);
        assert_eq!(b.waiters.load(Ordering::Acquire), 0);
    }

    fn message(len: usize) -> Vec<u8> {
        let mut m = vec![0u8];
        m.extend_from_slice(&(len as u32).to_be_bytes());
        m.extend(std::iter::repeat_n(7u8, len));
        m
    }

    #[tokio::test]
    async fn the_body_reserves_each_message_and_never_hands_out_the_next() {
        let b = budget(1 << 30);
        let charge = StreamCharge::new(b.clone());
        // Two messages (10 and 3 bytes) cut into frames at odd places, the second's prefix split.
        let all = [message(10), message(3)].concat();
        let frames = [&all[..2], &all[2..17], &all[17..]]
            .iter()
            .map(|s| Bytes::copy_from_slice(s))
            .collect();
        let mut body = BudgetBody::new(Frames(frames), Arc::clone(&charge));
        let mut out = Vec::new();
        let mut seen = 0;
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let data = frame.unwrap().into_data().unwrap();
            seen += data.len();
            out.extend_from_slice(&data);
            // Once the first prefix is complete, its message is reserved, and nothing of the
            // second is reserved before its own prefix is.
            if (5..=17).contains(&seen) {
                assert_eq!(charge.held(), 15);
            }
        }
        assert_eq!(out, all);
        assert_eq!(charge.held(), 15 + 8);
        drop(body);
        drop(charge);
        assert_eq!(b.in_flight(), 0);
    }
}

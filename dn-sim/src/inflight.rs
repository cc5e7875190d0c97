//! The in-flight memory budget (`--max-inflight-bytes`): bytes of requests received and not yet
//! answered, plus bytes of answers built and not yet sent, for all clients together. Beyond it,
//! new requests wait: their bytes are not read, so HTTP/2 flow control stops their senders.
//!
//! ## How bytes are counted
//! - [`InflightLayer`] wraps the request body of every `send` stream in a [`BudgetBody`], which
//!   reads the gRPC framing (a 5-byte prefix with the message's length) as the bytes pass. Before
//!   it hands tonic the first byte of a message's body it reserves the whole message (prefix
//!   included), waiting while the budget has no room. It hands tonic no byte past the end of the
//!   current message, so tonic, which asks for more only when it lacks a complete message, never
//!   holds bytes of a message that was not reserved.
//! - The service ([`crate::service`]) reserves the answer a request asks for (Echo's
//!   `payloadSizeResp`, ReadChunk's `len`) before it is served, then swaps everything for the
//!   built answer's encoded size, and releases that when its stream is polled for the next answer:
//!   hyper polls a response body again only once all but h2's send buffer (400 KiB) of the
//!   previous message went out, so an answer a client does not read stays charged until the client
//!   reads it or the stream ends.
//! - A stream's charges are one counter ([`StreamCharge`]); whatever it still holds is released
//!   when the stream ends (answered, reset, or its connection closed).
//!
//! ## Admission
//! A reservation is granted when it fits under the limit, or when everything in flight is the
//! asking stream's own (so a single request larger than the limit is served alone rather than
//! never). Small costs (at most [`SMALL_COST`]) may also use [`SMALL_ALLOWANCE`] above the limit,
//! so that large answers held by clients that do not read them cannot starve small requests.
//! Waiting is not FIFO: a released byte wakes every waiter and the first to fit wins.
//!
//! The hot path is atomics only: a reservation is one compare-and-swap loop on the shared counter,
//! a release one subtraction; the waiters' `Notify` (which has a lock) is touched only when a
//! request had to wait.

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

/// `--max-inflight-bytes` default: 1 GiB, the default of Ozone's pending-bytes limit of its write
/// path (`hdds.container.ratis.leader.pending.bytes.limit` = 1GB, 2.0.0–2.2.0); the gRPC path of
/// a real DataNode has no byte budget of its own.
pub const DEFAULT_MAX_INFLIGHT_BYTES: u64 = 1 << 30;

/// Costs up to this size (a request or answer of 64 KiB or less) may use [`SMALL_ALLOWANCE`].
pub const SMALL_COST: u64 = 64 << 10;

/// Room above the limit that only small costs may use.
pub const SMALL_ALLOWANCE: u64 = 16 << 20;

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
}

impl InflightBudget {
    /// A budget of `limit` bytes whose metrics go to `metrics`' `/metrics` exposition:
    /// `dn_sim_inflight_bytes` (a gauge, refreshed on scrape), `dn_sim_inflight_limit_bytes` and
    /// `dn_sim_inflight_waits_total` (reservations that had to wait for room).
    pub fn new(limit: u64, metrics: &crate::metrics::Metrics) -> Arc<Self> {
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
        });
        budget.waited.increment(0);
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

    /// Takes `n` bytes if they fit (see the module notes); `own`: what the asking stream holds.
    fn try_take(&self, n: u64, own: u64) -> bool {
        let limit = self.limit();
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
        })
    }

    /// Bytes this stream holds.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// Reserves `n` bytes, waiting for room (`waiting` keeps the wake-up between polls).
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
            if n == 0 || self.budget.try_take(n, self.held()) {
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

    /// Reserves `n` bytes, waiting for room.
    pub async fn reserve(&self, n: u64) {
        let mut waiting = None;
        std::future::poll_fn(|cx| self.poll_reserve(n, &mut waiting, cx)).await
    }

    /// Charges `n` bytes that already exist (a built answer), without waiting.
    pub fn charge(&self, n: u64) {
        self.budget.take(n);
        self.held.fetch_add(n, Ordering::AcqRel);
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
    waiting: Option<Waiting>,
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
            waiting: None,
        }
    }

    /// The next piece of `pending` to hand out, or `Pending` while its message waits for room.
    fn next_piece(&mut self, cx: &mut Context<'_>) -> Poll<Bytes> {
        if self.remaining > 0 {
            let n = self.remaining.min(self.pending.len() as u64) as usize;
            self.remaining -= n as u64;
            return Poll::Ready(self.pending.split_to(n));
        }
        // At a message boundary: collect the prefix.
        let take = (GRPC_HEADER - self.prefix_len).min(self.pending.len());
        let start = self.prefix_len;
        self.prefix[start..start + take].copy_from_slice(&self.pending[..take]);
        if start + take < GRPC_HEADER {
            // A prefix split across frames: its first bytes cost nothing to hand out.
            self.prefix_len += take;
            return Poll::Ready(self.pending.split_to(take));
        }
        let len = u64::from(u32::from_be_bytes(
            self.prefix[1..].try_into().expect("4 length bytes"),
        ));
        // tonic refuses a message over the limit from its prefix alone, reading no more of it.
        let cost = if len <= common::MAX_MESSAGE_SIZE as u64 {
            GRPC_HEADER as u64 + len
        } else {
            0
        };
        let mut waiting = self.waiting.take();
        let granted = self.charge.poll_reserve(cost, &mut waiting, cx);
        self.waiting = waiting;
        ready!(granted);
        self.prefix_len = 0;
        self.remaining = len;
        let n = (take as u64 + len).min(self.pending.len() as u64) as usize;
        self.remaining -= (n - take) as u64;
        Poll::Ready(self.pending.split_to(n))
    }
}

impl<B> Body for BudgetBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if this.pending.is_empty() {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.has_remaining() => this.pending = data,
                    Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                other => return Poll::Ready(other),
            }
        }
        let piece = ready!(this.next_piece(cx));
        Poll::Ready(Some(Ok(Frame::data(piece))))
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
    S: tower::Service<http::Request<tonic::body::Body>>,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        if req.uri().path() != common::proto::SEND_PATH {
            return self.inner.call(req.map(tonic::body::Body::new));
        }
        let charge = StreamCharge::new(Arc::clone(&self.budget));
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(Arc::clone(&charge));
        let body = tonic::body::Body::new(BudgetBody::new(body, charge));
        self.inner.call(http::Request::from_parts(parts, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: u64) -> Arc<InflightBudget> {
        InflightBudget::new(limit, &crate::metrics::Metrics::default())
    }

    #[test]
    fn reservations_fit_under_the_limit_or_alone() {
        let b = budget(100 << 20);
        let (s1, s2) = (StreamCharge::new(b.clone()), StreamCharge::new(b.clone()));
        assert!(b.try_take(80 << 20, 0));
        s1.held.store(80 << 20, Ordering::Release);
        // Another large reservation does not fit; a small one uses the allowance.
        assert!(!b.try_take(30 << 20, s2.held()));
        assert!(b.try_take(1000, s2.held()));
        b.give_back(1000);
        // A stream holding everything in flight may go over the limit (alone).
        assert!(b.try_take(200 << 20, s1.held()));
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
        holder.reserve(8 << 20).await;
        let waiter = StreamCharge::new(b.clone());
        let w = Arc::clone(&waiter);
        let task = tokio::spawn(async move { w.reserve(4 << 20).await });
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

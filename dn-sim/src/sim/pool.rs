//! The handler pool: the DataNode's fixed `ThreadPoolExecutor(poolSize, poolSize, unbounded
//! queue)` on the gRPC path (`XceiverServerGrpc`). A request holds one handler from
//! dispatch until its response is produced, injected delays and echo sleeps included; the rest
//! wait in FIFO order (tokio's semaphore is fair), after a few retries between other tasks when
//! nobody is queued yet (a handler held for microseconds is free again by then, and queueing
//! costs a wake-up the DataNode's executor does not pay). The queue is unbounded as in the
//! DataNode unless `--max-queue` bounds it; then a request that finds it full is rejected.
//!
//! Service time runs on a virtual timeline per handler. A real DataNode thread that finishes a
//! request picks up the next queued one at once; here the hand-over is a task wake-up, which on
//! a busy machine can take milliseconds. So each handler remembers when its previous request
//! ended by the simulation's clock (`free_at`), and the next request's service starts at
//! `max(its arrival, free_at)` rather than at the moment its task happened to run. Scheduling
//! noise then delays answers a little but does not lower throughput, and H handlers with service
//! time D serve H/D requests per second as Little's law says. The virtual clock runs ahead of the
//! real one by at most [`HOLD_SLACK`] (`free_at` is at most that much after the real release
//! time): the profile's handler time is held that loosely (`ServiceClock::hold_within`).
//!
//! The pool can be resized while serving: growing adds handlers at once; shrinking retires idle
//! handlers at once and busy ones as they finish, so running requests complete undisturbed.

use crossbeam_queue::SegQueue;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

/// How far a handler's clock may run ahead of the real one: the profile's handler time is held
/// by sleeps only beyond this lead (`ServiceClock::hold_within`), as `sim::stages`'s event
/// loops pass messages within their `LOOP_SLACK`.
pub const HOLD_SLACK: Duration = Duration::from_micros(200);

/// How many times a request that finds every handler busy and nobody queued yields to other
/// tasks and tries again before it queues (see [`HandlerPool::acquire`]).
pub const BUSY_RETRIES: usize = 4;

/// The queue was full (`--max-queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull {
    pub bound: usize,
}

pub struct HandlerPool {
    permits: Arc<Semaphore>,
    /// Idle handlers' clocks; never fewer than the available permits.
    idle: Arc<SegQueue<Instant>>,
    size: AtomicUsize,
    waiting: AtomicUsize,
    /// `usize::MAX` = unbounded.
    max_queue: AtomicUsize,
    /// Serializes resizes; never taken by requests.
    resize: Mutex<()>,
}

/// A busy handler; dropping it frees the handler.
pub struct Handler {
    idle: Arc<SegQueue<Instant>>,
    /// When this handler finished its previous request, by the simulation's clock.
    free_at: Instant,
    /// When it will be free again; set by [`Handler::busy_until`].
    next_free_at: Option<Instant>,
    _permit: OwnedSemaphorePermit,
}

impl Handler {
    /// When the service of a request that arrived at `arrived` starts on this handler.
    pub fn service_start(&self, arrived: Instant) -> Instant {
        arrived.max(self.free_at)
    }

    /// Records when this request's service ends by the simulation's clock: up to
    /// [`HOLD_SLACK`] after now, the lead of a hold that did not sleep, which the next request
    /// on this handler starts from.
    pub fn busy_until(&mut self, end: Instant) {
        self.next_free_at = Some(end.min(Instant::now() + HOLD_SLACK));
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        // The clock goes back before the permit, so the next holder always finds one.
        self.idle
            .push(self.next_free_at.unwrap_or_else(Instant::now));
    }
}

impl HandlerPool {
    pub fn new(size: usize, max_queue: Option<usize>) -> Self {
        let idle = Arc::new(SegQueue::new());
        let now = Instant::now();
        for _ in 0..size {
            idle.push(now);
        }
        Self {
            permits: Arc::new(Semaphore::new(size)),
            idle,
            size: AtomicUsize::new(size),
            waiting: AtomicUsize::new(0),
            max_queue: AtomicUsize::new(max_queue.unwrap_or(usize::MAX)),
            resize: Mutex::new(()),
        }
    }

    fn handler(&self, permit: OwnedSemaphorePermit) -> Handler {
        let free_at = self.idle.pop().unwrap_or_else(Instant::now);
        Handler {
            idle: Arc::clone(&self.idle),
            free_at,
            next_free_at: None,
            _permit: permit,
        }
    }

    /// Waits for a free handler, in arrival order among the requests queued (one that finds
    /// every handler busy and none queued retries [`BUSY_RETRIES`] times first).
    pub async fn acquire(&self) -> Result<Handler, QueueFull> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Ok(self.handler(permit));
        }
        // A handler busy for a moment (at echo sleep 0 a request holds it for microseconds) is
        // retried a few times, between other tasks, before the request queues: a DataNode's
        // handler takes its next task from the executor's queue without a hand-off, where a
        // queued task here costs a waker and a wake-up. Same run, pool 1, 32 x 32 echo sleep 0
        // with the measured profile: 24.9-32.0 k calls/s queueing at once, 28.8-34.9 k with the
        // retries (7 of 8 rounds higher). Only while nobody is queued, so the queue stays FIFO.
        for _ in 0..BUSY_RETRIES {
            if self.waiting.load(Relaxed) > 0 {
                break;
            }
            tokio::task::yield_now().await;
            if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
                return Ok(self.handler(permit));
            }
        }
        let bound = self.max_queue.load(Relaxed);
        // Reserve a queue slot; give it back if the queue is full.
        let queued = self.waiting.fetch_add(1, Relaxed);
        if queued >= bound {
            self.waiting.fetch_sub(1, Relaxed);
            return Err(QueueFull { bound });
        }
        let _slot = QueueSlot(&self.waiting);
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the pool's semaphore is never closed");
        Ok(self.handler(permit))
    }

    /// Configured number of handlers.
    pub fn size(&self) -> usize {
        self.size.load(Relaxed)
    }

    /// Handlers serving a request now.
    pub fn busy(&self) -> usize {
        self.size().saturating_sub(self.permits.available_permits())
    }

    /// Requests waiting for a handler.
    pub fn queued(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    pub fn max_queue(&self) -> Option<usize> {
        match self.max_queue.load(Relaxed) {
            usize::MAX => None,
            n => Some(n),
        }
    }

    pub fn set_max_queue(&self, bound: Option<usize>) {
        self.max_queue.store(bound.unwrap_or(usize::MAX), Relaxed);
    }

    /// Changes the number of handlers. Shrinking takes idle handlers away at once and busy ones
    /// when their requests finish (after requests queued before the resize).
    pub async fn resize(&self, new_size: usize) {
        let _guard = self.resize.lock().await;
        let old = self.size.swap(new_size, Relaxed);
        if new_size > old {
            let now = Instant::now();
            for _ in old..new_size {
                self.idle.push(now);
            }
            self.permits.add_permits(new_size - old);
        } else if new_size < old {
            let excess = old - new_size;
            let retired = self.permits.forget_permits(excess);
            for _ in 0..retired {
                self.idle.pop();
            }
            let remaining = excess - retired;
            if remaining > 0 {
                let (permits, idle) = (Arc::clone(&self.permits), Arc::clone(&self.idle));
                tokio::spawn(async move {
                    if let Ok(p) = permits.acquire_many_owned(remaining as u32).await {
                        p.forget();
                        for _ in 0..remaining {
                            idle.pop();
                        }
                    }
                });
            }
        }
    }
}

/// Gives a queue slot back when the waiting request gets a handler or is cancelled.
struct QueueSlot<'a>(&'a AtomicUsize);

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn loose_holds_keep_a_handlers_rate_and_answer_ahead_of_its_clock_only_within_the_slack()
    {
        use crate::datanode::timer::ServiceClock;
        let pool = HandlerPool::new(1, None);
        let hold = Duration::from_micros(100);
        let start = Instant::now();
        let mut ahead = 0;
        for _ in 0..100 {
            let mut h = pool.acquire().await.unwrap();
            let mut clock = ServiceClock::starting_at(h.service_start(Instant::now()));
            clock.hold_within(hold, HOLD_SLACK).await;
            let (end, now) = (clock.end(), Instant::now());
            // Never further ahead of the real clock than the slack (and the hold just taken).
            assert!(end <= now + HOLD_SLACK + hold, "{:?} ahead", end - now);
            ahead += usize::from(end > now);
            h.busy_until(end);
        }
        // One handler of 100 µs a request: 100 requests take 10 ms, less at most the slack.
        assert!(
            start.elapsed() >= hold * 100 - HOLD_SLACK,
            "{:?}",
            start.elapsed()
        );
        // Most holds returned without sleeping, their lead carried to the next request.
        assert!(ahead > 50, "{ahead} of 100 returned ahead of the clock");
    }

    #[tokio::test]
    async fn bounded_queue_rejects_when_full() {
        let pool = Arc::new(HandlerPool::new(1, Some(1)));
        let busy = pool.acquire().await.unwrap();
        let p = Arc::clone(&pool);
        let waiter = tokio::spawn(async move { p.acquire().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(pool.queued(), 1);
        assert_eq!(pool.acquire().await.err(), Some(QueueFull { bound: 1 }));
        drop(busy);
        assert!(waiter.await.unwrap().is_ok());
        assert_eq!(pool.queued(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_handler_freed_within_the_retries_is_taken_without_queueing() {
        let pool = Arc::new(HandlerPool::new(1, None));
        let busy = pool.acquire().await.unwrap();
        let p = Arc::clone(&pool);
        let brief = tokio::spawn(async move { p.acquire().await.map(|_| ()) });
        // One turn for the spawned request: it finds the handler busy and retries, not queued.
        tokio::task::yield_now().await;
        assert_eq!(pool.queued(), 0);
        drop(busy);
        assert!(brief.await.unwrap().is_ok());
        assert_eq!(pool.queued(), 0);
        // A handler held past the retries: the request queues.
        let busy = pool.acquire().await.unwrap();
        let p = Arc::clone(&pool);
        let long = tokio::spawn(async move { p.acquire().await.map(|_| ()) });
        for _ in 0..=BUSY_RETRIES + 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(pool.queued(), 1);
        drop(busy);
        assert!(long.await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn resize_grows_at_once_and_shrinks_as_handlers_free() {
        let pool = HandlerPool::new(2, None);
        let a = pool.acquire().await.unwrap();
        let b = pool.acquire().await.unwrap();
        assert_eq!(pool.busy(), 2);
        pool.resize(4).await;
        let c = pool.acquire().await.unwrap();
        assert_eq!((pool.size(), pool.busy()), (4, 3));
        pool.resize(1).await; // one idle handler retires now, two more as they free up
        drop((a, b, c));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _d = pool.acquire().await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), pool.acquire())
                .await
                .is_err()
        );
        assert_eq!(pool.size(), 1);
    }

    #[tokio::test]
    async fn service_continues_from_the_previous_requests_end() {
        let pool = HandlerPool::new(1, None);
        let t0 = Instant::now();
        let mut h = pool.acquire().await.unwrap();
        let start = h.service_start(t0);
        assert!(start >= t0);
        let planned_end = start + Duration::from_millis(5);
        tokio::time::sleep(Duration::from_millis(8)).await; // woke up late
        h.busy_until(planned_end);
        drop(h);
        // A request that was queued since t0 starts where the previous one ended, not now.
        let h = pool.acquire().await.unwrap();
        assert_eq!(h.service_start(t0), planned_end);
        // One that arrives later starts at its arrival.
        let later = Instant::now();
        assert_eq!(h.service_start(later), later);
    }
}

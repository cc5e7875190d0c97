//! Precise sleeps for injected delays. tokio's timer works at millisecond granularity and rounds
//! up, so a 1 ms delay would last 1–2 ms (1.5 ms on average) and a handler-count experiment at
//! 1 ms service time would be off by a third. Java's `Thread.sleep`, which the DataNode uses for
//! echo sleeps, is accurate to well under a millisecond. This timer keeps deadlines in a heap and
//! a dedicated thread waits on a condition variable until the earliest one (futex-based, tens of
//! microseconds of slack), then wakes the sleeping tasks.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

struct Entry {
    deadline: Instant,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.deadline.cmp(&other.deadline)
    }
}

struct Timer {
    heap: Mutex<BinaryHeap<Reverse<Entry>>>,
    changed: Condvar,
}

fn timer() -> &'static Arc<Timer> {
    static TIMER: OnceLock<Arc<Timer>> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer = Arc::new(Timer {
            heap: Mutex::new(BinaryHeap::new()),
            changed: Condvar::new(),
        });
        let t = Arc::clone(&timer);
        std::thread::Builder::new()
            .name("dn-sim-timer".into())
            .spawn(move || t.run())
            .expect("spawning the timer thread");
        timer
    })
}

impl Timer {
    fn run(&self) {
        let mut heap = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            while heap.peek().is_some_and(|Reverse(e)| e.deadline <= now) {
                let Reverse(entry) = heap.pop().expect("peeked");
                entry.waker.wake();
            }
            heap = match heap.peek() {
                Some(Reverse(e)) => {
                    let wait = e.deadline.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(heap, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.changed.wait(heap).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }

    fn register(&self, deadline: Instant, waker: Waker) {
        let mut heap = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = heap.peek().is_none_or(|Reverse(e)| deadline < e.deadline);
        heap.push(Reverse(Entry { deadline, waker }));
        drop(heap);
        if earliest {
            self.changed.notify_one();
        }
    }
}

/// Sleeps for `duration` with sub-millisecond accuracy. Zero returns at once.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep {
        deadline: Instant::now() + duration,
        registered: false,
    }
}

pub struct Sleep {
    deadline: Instant,
    registered: bool,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        // Registered once: the timer wakes the task at the deadline. A spurious poll before then
        // finds the deadline not reached and waits for that wake-up.
        if !self.registered {
            self.registered = true;
            timer().register(self.deadline, cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Sleeps until `deadline` with sub-millisecond accuracy.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        registered: false,
    }
}

/// The time a handler spends on one request, on the simulation's clock (see `sim::pool`): service
/// starts at a virtual instant, each hold (injected delay, echo sleep, disk wait, stall) advances
/// it, and real work between holds counts as it happens. Sleeping until the virtual instant,
/// rather than for a duration from whenever the task runs, keeps wake-up latency out of the
/// service time.
pub struct ServiceClock {
    virtual_now: Instant,
    real_mark: Instant,
}

impl ServiceClock {
    pub fn starting_at(start: Instant) -> Self {
        Self {
            virtual_now: start,
            real_mark: Instant::now(),
        }
    }

    /// Holds the handler for `d` more.
    pub async fn hold(&mut self, d: Duration) {
        let now = Instant::now();
        self.virtual_now += now - self.real_mark + d;
        sleep_until(self.virtual_now).await;
        self.real_mark = Instant::now();
    }

    /// Holds the handler for `d` more, but sleeps only once the simulation's clock is more than
    /// `slack` ahead of the real one, and then until the real one has caught up: a handler that
    /// holds tens of microseconds a request sleeps once every few requests instead of each
    /// time (each sleep is a wake-up by the timer thread, which costs dn-sim more CPU than such
    /// a hold). The handler's rate is kept as long as its clock's lead is carried to its next
    /// request (`sim::pool`'s `busy_until`); an answer is early by at most `slack`.
    pub async fn hold_within(&mut self, d: Duration, slack: Duration) {
        let now = Instant::now();
        self.virtual_now += now - self.real_mark + d;
        self.real_mark = now;
        if self.virtual_now > now + slack {
            sleep_until(self.virtual_now).await;
            self.real_mark = Instant::now();
        }
    }

    /// When the service ends, by the simulation's clock, if it ends now.
    pub fn end(&self) -> Instant {
        self.virtual_now + (Instant::now() - self.real_mark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_at_least_the_duration_and_zero_is_instant() {
        let start = Instant::now();
        sleep(Duration::from_millis(3)).await;
        assert!(start.elapsed() >= Duration::from_millis(3));
        let start = Instant::now();
        sleep(Duration::ZERO).await;
        assert!(start.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test]
    async fn many_concurrent_sleeps_all_finish() {
        let tasks: Vec<_> = (0..200u64)
            .map(|i| tokio::spawn(sleep(Duration::from_micros(100 * (i % 20)))))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    }
}

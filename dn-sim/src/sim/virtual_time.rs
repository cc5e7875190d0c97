//! A single-server FIFO queue on a virtual timeline: the event loops' (`sim::stages`) and the
//! CPU stage's capacity (`sim::cpu`). A request reserves the server's time with one atomic
//! compare-and-swap; nothing waits here (the caller decides whether and how long to sleep).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A server's next free instant, in ns since the caller's epoch.
#[derive(Default)]
pub struct VirtualQueue {
    free_at: AtomicU64,
}

impl VirtualQueue {
    /// Takes `cost` ns of the server for work arriving at `arrived`; returns when it starts.
    pub fn reserve(&self, arrived: u64, cost: u64) -> u64 {
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

    /// When the server is next free (ns since the caller's epoch).
    pub fn free_at(&self) -> u64 {
        self.free_at.load(Relaxed)
    }
}

//! The accept-side limit: beyond `--max-connections` open connections, a new socket is closed at
//! once (counted as refused); the others become [`TappedConnection`]s.

use super::metrics::ConnectionMetrics;
use super::{ConnectionLimits, TappedConnection};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll, ready};

/// What every connection of one server shares: the limits, the metrics, the open count.
pub(super) struct Shared {
    pub(super) limits: ConnectionLimits,
    pub(super) metrics: ConnectionMetrics,
    pub(super) open: AtomicUsize,
}

/// Wraps a stream of accepted sockets: each becomes a [`TappedConnection`], or is closed at once
/// when `limits.max_connections` are open.
pub fn guard<S>(incoming: S, limits: ConnectionLimits, metrics: ConnectionMetrics) -> Guarded<S> {
    Guarded {
        incoming,
        shared: Arc::new(Shared {
            limits,
            metrics,
            open: AtomicUsize::new(0),
        }),
    }
}

/// See [`guard`].
pub struct Guarded<S> {
    incoming: S,
    shared: Arc<Shared>,
}

impl<S, IO, E> futures_util::Stream for Guarded<S>
where
    S: futures_util::Stream<Item = Result<IO, E>> + Unpin,
{
    type Item = Result<TappedConnection<IO>, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let io = match ready!(Pin::new(&mut self.incoming).poll_next(cx)) {
                Some(Ok(io)) => io,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            };
            let shared = &self.shared;
            if shared.open.fetch_add(1, Relaxed) >= shared.limits.max_connections {
                // Dropping the socket closes it; the accept loop goes straight on to the next.
                shared.open.fetch_sub(1, Relaxed);
                shared.metrics.refused.increment(1);
                drop(io);
                continue;
            }
            shared.metrics.accepted.increment(1);
            return Poll::Ready(Some(Ok(TappedConnection::new(io, Arc::clone(shared)))));
        }
    }
}

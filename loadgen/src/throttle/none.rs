//! The `none` throttle: always proceeds, ignores results.

use std::time::Instant;

use super::{ClientThrottle, Decision, OpKind, Outcome};

#[derive(Debug, Clone, Copy, Default)]
pub struct NoThrottle;

impl ClientThrottle for NoThrottle {
    fn before_send(&self, _op: OpKind, _bytes: u64, _now: Instant) -> Decision {
        Decision::Proceed
    }

    fn on_result(&self, _op: OpKind, _bytes: u64, _outcome: Outcome, _now: Instant) {}
}

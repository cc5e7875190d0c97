//! The error of a run that could not start.

/// Why loadgen could not run: bad input or an unreachable target (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

//! loadgen's errors and the exit code of each (docs/loadgen.md, "Exit codes").

use std::path::PathBuf;

/// Why loadgen did not finish as asked. `main` prints it as one line and exits with
/// [`Error::exit_code`]. A run that finished is not an `Error`, even with failed requests or an
/// output it could not write: its `run::Summary` counts them (`Summary::exit_code`, 0 or 1) and
/// keeps the report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags, or a file given by a flag that cannot be read, parsed or created (the message
    /// names the flag): exit code 2, nothing was run.
    #[error("{0}")]
    Usage(String),
    /// The target cannot be connected to when the run starts (refused, no answer, a failed TLS
    /// handshake): exit code 2, nothing was measured.
    #[error("{0}")]
    Unreachable(String),
    /// A run that could not start or complete for another reason than the user's input (the
    /// embedded dn-sim or a runtime cannot start, the target went away between phases, dn-sim's
    /// admin port refused a sweep's change): exit code 1.
    #[error("{0}")]
    Run(String),
    /// A file loadgen writes at the end (a chart, a sweep's tables) could not be written and
    /// there is no report to keep: exit code 1.
    #[error("{0}")]
    Io(String),
}

impl Error {
    /// The process's exit code: 2 for bad input and an unreachable target, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Unreachable(_) => 2,
            Error::Run(_) | Error::Io(_) => 1,
        }
    }

    /// The same error from a later phase of a run: the target was reachable when the run
    /// started, so not reaching it now is a run that could not complete.
    pub fn mid_run(self) -> Self {
        match self {
            Error::Unreachable(m) => Error::Run(m),
            e => e,
        }
    }

    /// The same class of error with its message rewritten (e.g. prefixed by a sweep's cell).
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Error::Usage(m) => Error::Usage(f(m)),
            Error::Unreachable(m) => Error::Unreachable(f(m)),
            Error::Run(m) => Error::Run(f(m)),
            Error::Io(m) => Error::Io(f(m)),
        }
    }
}

/// An output of a finished run that could not be written (exit code 1; the report is kept).
#[derive(Debug)]
pub struct OutputFailure {
    /// "report", "manifest", "histogram log".
    pub what: &'static str,
    pub path: PathBuf,
    pub error: std::io::Error,
}

impl std::fmt::Display for OutputFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "could not write the {} to {}: {}",
            self.what,
            self.path.display(),
            self.error
        )
    }
}

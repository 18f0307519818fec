//! Errors of the sandbox: what could not be set up, and what the sandboxed process did.

use toolgate_core::{ErrorKind, ToolError};

/// Why a sandboxed run could not produce an output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The host cannot enforce the requested isolation level (never run weaker than asked).
    #[error("{0}")]
    Unavailable(String),
    /// The process could not be started or watched.
    #[error("{0}")]
    Spawn(String),
    /// The run exceeded its deadline and was killed with everything it started.
    #[error("{0}")]
    Timeout(String),
    /// The call was cancelled; the process was killed with everything it started.
    #[error("Request was cancelled")]
    Cancelled,
    /// The program failed (non-zero exit, killed by a limit, unreadable output).
    #[error("{0}")]
    Failed(String),
}

/// The kind of a [`SandboxError`], for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxErrorKind {
    Unavailable,
    Spawn,
    Timeout,
    Cancelled,
    Failed,
}

impl SandboxError {
    /// The kind of this error.
    pub fn kind(&self) -> SandboxErrorKind {
        match self {
            Self::Unavailable(_) => SandboxErrorKind::Unavailable,
            Self::Spawn(_) => SandboxErrorKind::Spawn,
            Self::Timeout(_) => SandboxErrorKind::Timeout,
            Self::Cancelled => SandboxErrorKind::Cancelled,
            Self::Failed(_) => SandboxErrorKind::Failed,
        }
    }
}

impl From<SandboxError> for ToolError {
    fn from(e: SandboxError) -> Self {
        match e {
            // Missing kernel features do not come back on a retry.
            SandboxError::Unavailable(m) => ToolError::unavailable(m).permanent(),
            SandboxError::Spawn(m) => ToolError::execution(m),
            SandboxError::Timeout(m) => ToolError::new(ErrorKind::Timeout, m),
            SandboxError::Cancelled => ToolError::cancelled(),
            SandboxError::Failed(m) => ToolError::execution(m),
        }
    }
}

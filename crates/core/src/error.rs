//! Errors of the core library ([`CoreError`]) and of tool handlers ([`ToolError`]).

use std::path::Path;

use crate::envelope::ErrorKind;
use crate::validate::ValidationReport;

/// What went wrong in a core library operation (not a tool call: calls never fail, they return
/// a [`crate::ToolResult`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    #[error("Could not parse {format} definition: {message}")]
    Parse {
        format: &'static str,
        message: String,
    },
    #[error("Could not write definition as {format}: {message}")]
    Render {
        format: &'static str,
        message: String,
    },
    /// An error reading the definition at `path`; the error is the source (not repeated in
    /// this message: render the whole chain with [`ErrorChain`]).
    #[error("{path}")]
    InFile {
        path: String,
        #[source]
        source: Box<CoreError>,
    },
    #[error("Unknown definition format: {path} (use a .toml, .json, .yaml or .yml file)")]
    UnknownFormat { path: String },
    #[error("Cannot read {path}: {message}")]
    Io { path: String, message: String },
    #[error("Invalid tool definition{}: {report}", name_suffix(.name))]
    Invalid {
        name: String,
        report: Box<ValidationReport>,
    },
    #[error("Tool already registered: {0} (remove it first, or register under another name)")]
    Duplicate(String),
    #[error("Tool not found: {0}")]
    NotFound(String),
    #[error("Built-in tool {0} cannot be replaced or removed; define a tool with another name")]
    BuiltinProtected(String),
    #[error("Tool {name} is required by {dependents} (remove those first)")]
    InUse { name: String, dependents: String },
    #[error("Invalid cursor {0:?}: pass the nextCursor value of the previous page unchanged")]
    BadCursor(String),
}

fn name_suffix(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!(" {name}")
    }
}

/// Stable, machine-readable class of a [`CoreError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoreErrorKind {
    Parse,
    Io,
    Invalid,
    Conflict,
    NotFound,
    Forbidden,
    BadRequest,
}

impl CoreError {
    /// The class of this error.
    pub fn kind(&self) -> CoreErrorKind {
        match self {
            Self::Parse { .. } | Self::Render { .. } | Self::UnknownFormat { .. } => {
                CoreErrorKind::Parse
            }
            Self::InFile { source, .. } => source.kind(),
            Self::Io { .. } => CoreErrorKind::Io,
            Self::Invalid { .. } => CoreErrorKind::Invalid,
            Self::Duplicate(_) | Self::InUse { .. } => CoreErrorKind::Conflict,
            Self::NotFound(_) => CoreErrorKind::NotFound,
            Self::BuiltinProtected(_) => CoreErrorKind::Forbidden,
            Self::BadCursor(_) => CoreErrorKind::BadRequest,
        }
    }

    /// Wraps the error with the file it came from.
    pub fn at_path(self, path: &Path) -> Self {
        Self::InFile {
            path: path.display().to_string(),
            source: Box::new(self),
        }
    }

    /// The validation report, when this is an invalid definition.
    pub fn report(&self) -> Option<&ValidationReport> {
        match self {
            Self::Invalid { report, .. } => Some(report),
            Self::InFile { source, .. } => source.report(),
            _ => None,
        }
    }
}

/// A failure a tool handler reports. The pipeline turns it into an error result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    kind: ErrorKind,
    message: String,
    retryable: bool,
    /// The durable approval this call now waits for (`confirmation_required`).
    approval_id: Option<String>,
}

impl ToolError {
    /// A failure of the given kind. `unavailable` and `rate_limited` failures are retryable.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retryable: matches!(kind, ErrorKind::Unavailable | ErrorKind::RateLimited),
            approval_id: None,
        }
    }

    /// Names the durable approval the call waits for (carried to the envelope's `approvalId`).
    #[must_use]
    pub fn with_approval(mut self, id: impl Into<String>) -> Self {
        self.approval_id = Some(id.into());
        self
    }

    /// The durable approval the call waits for, if any.
    pub fn approval_id(&self) -> Option<&str> {
        self.approval_id.as_deref()
    }

    /// The tool could not do its job (`execution`); not retried unless marked [`Self::retryable`].
    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Execution, message)
    }

    /// The arguments make no sense to the tool (`validation`).
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Validation, message)
    }

    /// The caller may not do this (`authorization`).
    pub fn authorization(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Authorization, message)
    }

    /// Something the tool needs is down or not configured (`unavailable`, retryable).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The cancellation error of seed 000: `Request was cancelled`.
    pub fn cancelled() -> Self {
        Self::new(ErrorKind::Cancelled, CANCELLED_MESSAGE)
    }

    /// Marks the failure transient: the pipeline may retry it for idempotent, retryable tools.
    #[must_use]
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }

    /// Marks the failure permanent.
    #[must_use]
    pub fn permanent(mut self) -> Self {
        self.retryable = false;
        self
    }

    /// The error kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

/// The exact message of a cancelled call (seed 000's AbortSignal contract).
pub const CANCELLED_MESSAGE: &str = "Request was cancelled";

/// Displays an error followed by each of its sources, joined with `": "` — the whole message
/// for places where an error becomes text (a JSON error message, an error result, a warning),
/// since an error's own `Display` does not repeat its source.
///
/// A source whose text the message already ends with is left out (some libraries, `sqlx` among
/// them, both repeat and return their source).
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut message = self.0.to_string();
        let mut next = self.0.source();
        while let Some(source) = next {
            let text = source.to_string();
            if !text.is_empty() && !message.ends_with(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            next = source.source();
        }
        f.write_str(&message)
    }
}

impl std::fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// The error and its sources as one message (see [`ErrorChain`]).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    ErrorChain(error).to_string()
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("inner failed")]
    struct Inner;

    #[derive(Debug, thiserror::Error)]
    #[error("while {0}")]
    struct Repeats(String, #[source] Inner);

    #[test]
    fn the_chain_joins_sources_once() {
        let e = CoreError::Parse {
            format: "JSON",
            message: "bad".into(),
        }
        .at_path(Path::new("a.json"));
        assert_eq!(e.to_string(), "a.json");
        assert_eq!(
            error_chain(&e),
            "a.json: Could not parse JSON definition: bad"
        );
        // A source the message already ends with is not repeated.
        let e = Repeats("inner failed".into(), Inner);
        assert_eq!(error_chain(&e), "while inner failed");
    }
}

//! The result envelope (`docs/envelope.md`): exactly one per call, `data` xor `error`, never
//! thrown.

use crate::content::Content;
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

/// Why a call failed. Serialized snake_case as `errorKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The tool does not exist for the caller, or something the tool looks up is missing.
    NotFound,
    /// The arguments do not match the input schema, or the tool finds them unusable.
    Validation,
    /// The caller may not do this: a missing permission, a path outside the root, a refused host.
    Authorization,
    /// The tool needs an approval that was not given (or is pending: see `approval_id`).
    ConfirmationRequired,
    /// An approver said no.
    Rejected,
    /// An attempt ran past the tool's timeout.
    Timeout,
    /// The caller cancelled the call (`Request was cancelled`).
    Cancelled,
    /// The tool failed doing its job, or its handler panicked.
    Execution,
    /// The output does not match the tool's output schema.
    OutputInvalid,
    /// A rate limit or quota refused the call (retryable).
    RateLimited,
    /// Something the call needs is missing or down (retryable).
    Unavailable,
    /// The call's run has spent a budget (tool calls, wall time, output bytes, turns) or this
    /// tool has failed `max_attempts_per_tool` times in it; never retried.
    BudgetExhausted,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 12] = [
        Self::NotFound,
        Self::Validation,
        Self::Authorization,
        Self::ConfirmationRequired,
        Self::Rejected,
        Self::Timeout,
        Self::Cancelled,
        Self::Execution,
        Self::OutputInvalid,
        Self::RateLimited,
        Self::Unavailable,
        Self::BudgetExhausted,
    ];

    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Validation => "validation",
            Self::Authorization => "authorization",
            Self::ConfirmationRequired => "confirmation_required",
            Self::Rejected => "rejected",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::Execution => "execution",
            Self::OutputInvalid => "output_invalid",
            Self::RateLimited => "rate_limited",
            Self::Unavailable => "unavailable",
            Self::BudgetExhausted => "budget_exhausted",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call's identifier: a UUIDv7, so ids sort by creation time.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(Uuid);

impl CallId {
    /// A fresh id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// Parses the hyphenated form.
    pub fn parse(raw: &str) -> Result<Self, String> {
        Uuid::parse_str(raw)
            .map(Self)
            .map_err(|_| format!("invalid call id {raw:?}: expected a UUID"))
    }
}

impl Default for CallId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Success or failure of a call: the two cannot both be present, and one always is.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The tool's output.
    Data(Value),
    /// Why the call failed.
    Error {
        /// The class of failure (`errorKind`).
        kind: ErrorKind,
        /// What went wrong and what to do (`error`).
        message: String,
    },
}

/// The envelope every call yields.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// The tool name as the caller asked for it.
    pub tool: String,
    /// The call's id (`callId`), shared with its audit entry and any approval.
    pub call_id: CallId,
    /// When the attempt was made (UTC; serialized with milliseconds).
    pub fetched_at: DateTime<Utc>,
    /// The arguments after defaults were applied, with sensitive values redacted by the pipeline.
    pub input: Value,
    /// Data or error, never both.
    pub outcome: Outcome,
    /// How many times the handler was started (0 when the call was refused before it ran).
    pub attempts: u32,
    /// Wall time of the whole call in milliseconds, retries included.
    pub duration_ms: f64,
    /// Output was cut to the tool's `max_output_bytes`.
    pub truncated: bool,
    /// Where the full output is kept, when it is kept elsewhere.
    pub output_ref: Option<String>,
    /// Rich content blocks the tool attached (images, audio, resources); successes only.
    pub content: Vec<Content>,
    /// The durable approval the call waits for (`confirmation_required` results only).
    pub approval_id: Option<String>,
}

/// In the message of an `execution` error whose handler panicked (the executor writes it).
pub(crate) const HANDLER_PANICKED: &str = "(the handler panicked: ";

/// In the message of an `execution` error whose pipeline stage panicked (the pipeline writes it).
pub(crate) const STAGE_PANICKED: &str = "(a pipeline stage panicked: ";

impl ToolResult {
    /// Whether the call failed because its handler or a pipeline stage panicked: a defect, not
    /// the tool's verdict on its job (the envelope is still an `execution` error; an MCP task
    /// reads `failed`, as the tasks extension has it for a request that produced no result).
    pub fn panicked(&self) -> bool {
        match &self.outcome {
            Outcome::Error {
                kind: ErrorKind::Execution,
                message,
            } => message.contains(HANDLER_PANICKED) || message.contains(STAGE_PANICKED),
            _ => false,
        }
    }

    /// The data, if the call succeeded.
    pub fn data(&self) -> Option<&Value> {
        match &self.outcome {
            Outcome::Data(v) => Some(v),
            Outcome::Error { .. } => None,
        }
    }

    /// The error message, if the call failed.
    pub fn error(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Data(_) => None,
            Outcome::Error { message, .. } => Some(message),
        }
    }

    /// The error kind, if the call failed.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        match &self.outcome {
            Outcome::Data(_) => None,
            Outcome::Error { kind, .. } => Some(*kind),
        }
    }

    /// The error envelope of a call that never ran (nothing attempted, nothing cut, no
    /// content): for results made outside the pipeline, such as an approved call whose principal
    /// is gone or a call whose task failed.
    pub fn refused(
        tool: String,
        call_id: CallId,
        input: Value,
        kind: ErrorKind,
        message: String,
    ) -> Self {
        Self {
            tool,
            call_id,
            fetched_at: Utc::now(),
            input,
            outcome: Outcome::Error { kind, message },
            attempts: 0,
            duration_ms: 0.0,
            truncated: false,
            output_ref: None,
            content: Vec::new(),
            approval_id: None,
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Data(_))
    }

    /// `fetchedAt` as written on the wire: ISO 8601, UTC, milliseconds.
    pub fn fetched_at_string(&self) -> String {
        self.fetched_at.to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("tool", &self.tool)?;
        map.serialize_entry("callId", &self.call_id)?;
        map.serialize_entry("fetchedAt", &self.fetched_at_string())?;
        map.serialize_entry("input", &self.input)?;
        match &self.outcome {
            Outcome::Data(data) => map.serialize_entry("data", data)?,
            Outcome::Error { kind, message } => {
                map.serialize_entry("error", message)?;
                map.serialize_entry("errorKind", kind)?;
            }
        }
        map.serialize_entry("attempts", &self.attempts)?;
        map.serialize_entry("durationMs", &self.duration_ms)?;
        if self.truncated {
            map.serialize_entry("truncated", &true)?;
        }
        if let Some(r) = &self.output_ref {
            map.serialize_entry("outputRef", r)?;
        }
        if !self.content.is_empty() {
            map.serialize_entry("content", &self.content)?;
        }
        if let Some(id) = &self.approval_id {
            map.serialize_entry("approvalId", id)?;
        }
        map.end()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireResult {
    tool: String,
    call_id: CallId,
    fetched_at: DateTime<Utc>,
    #[serde(default)]
    input: Value,
    #[serde(default, deserialize_with = "present")]
    data: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_kind: Option<ErrorKind>,
    #[serde(default)]
    attempts: u32,
    #[serde(default)]
    duration_ms: f64,
    #[serde(default)]
    truncated: bool,
    #[serde(default)]
    output_ref: Option<String>,
    #[serde(default)]
    content: Vec<Content>,
    #[serde(default)]
    approval_id: Option<String>,
}

/// Distinguishes `"data": null` (present) from an absent `data` key.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireResult::deserialize(d)?;
        let outcome = match (w.data, w.error, w.error_kind) {
            (Some(data), None, None) => Outcome::Data(data),
            (None, Some(message), Some(kind)) => Outcome::Error { kind, message },
            (None, Some(message), None) => Outcome::Error {
                kind: ErrorKind::Execution,
                message,
            },
            (Some(_), Some(_), _) => {
                return Err(D::Error::custom("a result has data or error, never both"));
            }
            (Some(_), None, Some(_)) => {
                return Err(D::Error::custom("a result with data has no errorKind"));
            }
            _ => return Err(D::Error::custom("a result has either data or error")),
        };
        Ok(Self {
            tool: w.tool,
            call_id: w.call_id,
            fetched_at: w.fetched_at,
            input: w.input,
            outcome,
            attempts: w.attempts,
            duration_ms: w.duration_ms,
            truncated: w.truncated,
            output_ref: w.output_ref,
            content: w.content,
            approval_id: w.approval_id,
        })
    }
}

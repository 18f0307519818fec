//! Why the agent loop could not start or could not go on. A budget spent or an approval waiting
//! is not an error: those are [`crate::End`] states of a run that went as it should.

use thiserror::Error;
use toolgate_export::CallsError;
use toolgate_runtime::RuntimeError;

/// An agent loop that could not start or was cut short by its model's API.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AgentError {
    /// `--model` is not `openai:NAME` or `anthropic:NAME`.
    #[error("invalid model {value:?}: {reason}; write it as openai:NAME or anthropic:NAME")]
    Model {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--base-url` is not a usable base URL.
    #[error("invalid base URL {value}: {reason}")]
    BaseUrl {
        /// The value given (without any credentials it held).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key's environment variable is not set.
    #[error(
        "{variable} is not set: export the API key in it (a local server that needs no key, \
         like Ollama, takes any value, e.g. {variable}=none)"
    )]
    MissingKey {
        /// The variable.
        variable: &'static str,
    },
    /// A tool named with `tools` is not one the principal can see.
    #[error("tool not found: {0}; `toolgate tools list` shows the tools you can give the model")]
    UnknownTool(String),
    /// The run could not be started (a budget looser than the principal's ceiling, a zero) or
    /// its state read.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The model's API could not be reached, or did not answer in time.
    #[error(
        "cannot reach the model at {url}: {reason} (check --base-url and that the server runs)"
    )]
    Unreachable {
        /// The endpoint.
        url: String,
        /// What the HTTP client said.
        reason: String,
    },
    /// The model's API answered with an error status.
    #[error("the model's API at {url} answered {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the response body (the API's error message).
        body: String,
    },
    /// The response is not the API's JSON shape.
    #[error("the model's API at {url} sent a response toolgate cannot read: {reason}")]
    Response {
        /// The endpoint.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The tool calls or results could not be read or written in the provider's shape.
    #[error(transparent)]
    Calls(#[from] CallsError),
}

/// What kind of [`AgentError`] happened: the CLI maps the first five to its usage exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AgentErrorKind {
    /// [`AgentError::Model`].
    Model,
    /// [`AgentError::BaseUrl`].
    BaseUrl,
    /// [`AgentError::MissingKey`].
    MissingKey,
    /// [`AgentError::UnknownTool`].
    UnknownTool,
    /// [`AgentError::Runtime`].
    Runtime,
    /// [`AgentError::Unreachable`].
    Unreachable,
    /// [`AgentError::Status`].
    Status,
    /// [`AgentError::Response`].
    Response,
    /// [`AgentError::Calls`].
    Calls,
}

impl AgentError {
    /// The kind of error.
    pub fn kind(&self) -> AgentErrorKind {
        match self {
            Self::Model { .. } => AgentErrorKind::Model,
            Self::BaseUrl { .. } => AgentErrorKind::BaseUrl,
            Self::MissingKey { .. } => AgentErrorKind::MissingKey,
            Self::UnknownTool(_) => AgentErrorKind::UnknownTool,
            Self::Runtime(_) => AgentErrorKind::Runtime,
            Self::Unreachable { .. } => AgentErrorKind::Unreachable,
            Self::Status { .. } => AgentErrorKind::Status,
            Self::Response { .. } => AgentErrorKind::Response,
            Self::Calls(_) => AgentErrorKind::Calls,
        }
    }

    /// Whether the fault is in what the caller asked for (flags, environment, budget), not in
    /// the model's API.
    pub fn is_usage(&self) -> bool {
        matches!(
            self.kind(),
            AgentErrorKind::Model
                | AgentErrorKind::BaseUrl
                | AgentErrorKind::MissingKey
                | AgentErrorKind::UnknownTool
                | AgentErrorKind::Runtime
        )
    }
}

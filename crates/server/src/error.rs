//! The server's errors: one enum with a `kind()`, each kind mapped to an HTTP status and a JSON
//! body `{"error": {"kind", "message"}}` (plus the validation problems, when there are any).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use toolgate_core::ErrorChain;
use toolgate_core::ValidationReport;

/// What went wrong, broadly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerErrorKind {
    /// A malformed or unacceptable request (400 `bad_request`).
    BadRequest,
    /// No bearer token, or one that matches no principal (401 `unauthenticated`).
    Unauthenticated,
    /// The principal lacks the permission, or a plan limit refuses it (403 `forbidden`).
    Forbidden,
    /// What the request names (a tool, call, approval, route) does not exist (404 `not_found`).
    NotFound,
    /// The request clashes with the current state, such as an existing name (409 `conflict`).
    Conflict,
    /// A definition, or a tool for an export, is not valid; the body lists the problems (422
    /// `validation`).
    Invalid,
    /// The request body is over the size limit (413 `payload_too_large`).
    PayloadTooLarge,
    /// The request body is not JSON (415 `unsupported_media_type`).
    UnsupportedMediaType,
    /// The store could not complete the request (503 `unavailable`).
    Unavailable,
    /// A fault in the server itself (500 `internal`).
    Internal,
}

impl ServerErrorKind {
    /// The name in a JSON error's `kind` field, such as `not_found`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Invalid => "validation",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The kind an answer with this status has when no handler made it (axum's own rejections,
    /// see `envelope.rs`): the kind with that status, else `internal` for a server error and
    /// `bad_request` for any other.
    pub(crate) fn for_status(status: StatusCode) -> Self {
        [
            Self::BadRequest,
            Self::Unauthenticated,
            Self::Forbidden,
            Self::NotFound,
            Self::Conflict,
            Self::Invalid,
            Self::PayloadTooLarge,
            Self::UnsupportedMediaType,
            Self::Unavailable,
            Self::Internal,
        ]
        .into_iter()
        .find(|kind| kind.status() == status)
        .unwrap_or(if status.is_server_error() {
            Self::Internal
        } else {
            Self::BadRequest
        })
    }

    fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Conflict => StatusCode::CONFLICT,
            Self::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error the server reports to a client, or one that stops it from starting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A malformed or unacceptable request; the message says what to change.
    #[error("{0}")]
    BadRequest(String),
    /// No valid bearer token came with the request.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller may not do this (a missing permission or a plan limit).
    #[error("{0}")]
    Forbidden(String),
    /// What the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request clashes with what is stored.
    #[error("{0}")]
    Conflict(String),
    /// A definition failed validation; every problem with its path.
    #[error("{message}")]
    Invalid {
        /// The summary shown to the client.
        message: String,
        /// Every error and warning found, each with its path.
        report: Box<ValidationReport>,
    },
    /// The request body is over the configured size limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A request body that is not JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The store could not complete the request.
    #[error("{0}")]
    Unavailable(String),
    /// A fault in the server, or one that stops it from starting or serving.
    #[error("{0}")]
    Internal(String),
}

impl ServerError {
    /// The class of this error, which decides its HTTP status.
    pub fn kind(&self) -> ServerErrorKind {
        match self {
            Self::BadRequest(_) => ServerErrorKind::BadRequest,
            Self::Unauthenticated(_) => ServerErrorKind::Unauthenticated,
            Self::Forbidden(_) => ServerErrorKind::Forbidden,
            Self::NotFound(_) => ServerErrorKind::NotFound,
            Self::Conflict(_) => ServerErrorKind::Conflict,
            Self::Invalid { .. } => ServerErrorKind::Invalid,
            Self::PayloadTooLarge(_) => ServerErrorKind::PayloadTooLarge,
            Self::UnsupportedMediaType(_) => ServerErrorKind::UnsupportedMediaType,
            Self::Unavailable(_) => ServerErrorKind::Unavailable,
            Self::Internal(_) => ServerErrorKind::Internal,
        }
    }
}

impl From<toolgate_store::StoreError> for ServerError {
    fn from(e: toolgate_store::StoreError) -> Self {
        use toolgate_store::StoreErrorKind as K;
        let message = ErrorChain(&e).to_string();
        match e.kind() {
            K::NotFound => Self::NotFound(message),
            K::Conflict => Self::Conflict(message),
            K::PlanLimit => Self::Forbidden(message),
            K::Invalid => Self::BadRequest(message),
            _ => {
                tracing::error!(error = %message, "store error");
                Self::Unavailable(format!(
                    "The store could not complete the request: {message}"
                ))
            }
        }
    }
}

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        let kind = self.kind();
        let mut body = json!({
            "error": { "kind": kind.as_str(), "message": self.to_string() }
        });
        if let Self::Invalid { report, .. } = &self {
            body["error"]["errors"] = json!(report.errors);
            body["error"]["warnings"] = json!(report.warnings);
        }
        let mut response = (kind.status(), Json(body)).into_response();
        if kind == ServerErrorKind::Unauthenticated {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"toolgate\""),
            );
        }
        response
    }
}

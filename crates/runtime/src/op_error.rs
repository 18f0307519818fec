//! Why a use case (a definition change, a decision on an approval) was refused: one error type
//! the front-ends map to their own answers (an HTTP status, an exit code and a message).

use toolgate_core::{CoreError, CoreErrorKind};
use toolgate_store::{StoreError, StoreErrorKind};

/// A refused or failed use case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The registry refused the definition: every validation problem (`error.report()`), a
    /// built-in name, a duplicate, an unresolved dependency, a tool others depend on.
    #[error("{error}")]
    Refused {
        /// The tool the definition names.
        name: String,
        /// What the registry said (its message is this error's: not repeated as a source).
        error: CoreError,
    },
    /// No such tool, approval or stored definition (for this caller).
    #[error("{0}")]
    NotFound(String),
    /// The caller may not do this (a built-in is immutable, a permission is missing).
    #[error("{0}")]
    Forbidden(String),
    /// The request contradicts the current state (a tool that is not stored cannot be removed
    /// from the store).
    #[error("{0}")]
    Conflict(String),
    /// The request itself is malformed (an invalid server entry: every problem in the message).
    #[error("{0}")]
    BadRequest(String),
    /// The store refused or failed (its own kinds: not found, conflict, plan limit, …).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The class of an [`OpError`], for front-ends choosing a status or an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpErrorKind {
    /// The definition is invalid (a validation report lists every problem).
    Invalid,
    /// Unknown to this caller.
    NotFound,
    /// Not allowed (built-ins, permissions).
    Forbidden,
    /// Clashes with the current state (a duplicate name, a tool still depended on).
    Conflict,
    /// The caller's plan does not allow it (its definition count).
    PlanLimit,
    /// The request itself is malformed.
    BadRequest,
    /// The store could not do its part; trying again later may work.
    Unavailable,
}

impl OpError {
    /// The class of this error.
    pub fn kind(&self) -> OpErrorKind {
        match self {
            Self::Refused { error, .. } => match error.kind() {
                _ if error.report().is_some() => OpErrorKind::Invalid,
                CoreErrorKind::Forbidden => OpErrorKind::Forbidden,
                CoreErrorKind::Conflict => OpErrorKind::Conflict,
                CoreErrorKind::NotFound => OpErrorKind::NotFound,
                CoreErrorKind::Parse | CoreErrorKind::Invalid => OpErrorKind::Invalid,
                _ => OpErrorKind::BadRequest,
            },
            Self::NotFound(_) => OpErrorKind::NotFound,
            Self::Forbidden(_) => OpErrorKind::Forbidden,
            Self::Conflict(_) => OpErrorKind::Conflict,
            Self::BadRequest(_) => OpErrorKind::BadRequest,
            Self::Store(e) => match e.kind() {
                StoreErrorKind::NotFound => OpErrorKind::NotFound,
                StoreErrorKind::Conflict => OpErrorKind::Conflict,
                StoreErrorKind::PlanLimit => OpErrorKind::PlanLimit,
                StoreErrorKind::Invalid => OpErrorKind::BadRequest,
                _ => OpErrorKind::Unavailable,
            },
        }
    }
}

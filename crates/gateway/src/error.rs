//! `GatewayError`: what the gateway's operations report, with a `kind()`.

/// The class of a [`GatewayError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayErrorKind {
    /// A server entry or an imported file is invalid.
    Invalid,
    /// The upstream cannot be reached or started, or it died.
    Unavailable,
    /// The upstream broke the protocol.
    Protocol,
}

/// A gateway failure. Messages name the server and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A server entry or an imported file is invalid.
    #[error("{0}")]
    Invalid(String),
    /// The upstream cannot be reached or started, or it died.
    #[error("{0}")]
    Unavailable(String),
    /// The upstream broke the protocol.
    #[error("{0}")]
    Protocol(String),
}

impl GatewayError {
    /// The class of this error.
    pub fn kind(&self) -> GatewayErrorKind {
        match self {
            Self::Invalid(_) => GatewayErrorKind::Invalid,
            Self::Unavailable(_) => GatewayErrorKind::Unavailable,
            Self::Protocol(_) => GatewayErrorKind::Protocol,
        }
    }
}

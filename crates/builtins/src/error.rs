//! The crate's error type: what can go wrong while *setting up* the built-in tools. Failures of
//! a tool call are [`toolgate_core::ToolError`]s instead, and become error results.

use std::path::Path;

/// Why the built-in tools could not be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuiltinError {
    /// The file tools' root does not exist.
    #[error("Root directory not found: {path}")]
    RootNotFound { path: String },
    /// The file tools' root exists but is not a directory.
    #[error("Root is not a directory: {path}")]
    RootNotDirectory { path: String },
    /// The root could not be resolved (permissions, I/O).
    #[error("Cannot open root directory {path}: {message}")]
    RootIo { path: String, message: String },
}

/// Stable, machine-readable class of a [`BuiltinError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuiltinErrorKind {
    /// Something named does not exist.
    NotFound,
    /// Something exists but is the wrong kind of thing.
    Invalid,
    /// The operating system refused or failed.
    Io,
}

impl BuiltinError {
    /// The class of this error.
    pub fn kind(&self) -> BuiltinErrorKind {
        match self {
            Self::RootNotFound { .. } => BuiltinErrorKind::NotFound,
            Self::RootNotDirectory { .. } => BuiltinErrorKind::Invalid,
            Self::RootIo { .. } => BuiltinErrorKind::Io,
        }
    }

    pub(crate) fn root_io(root: &Path, err: &std::io::Error) -> Self {
        let path = root.display().to_string();
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::RootNotFound { path },
            std::io::ErrorKind::NotADirectory => Self::RootNotDirectory { path },
            _ => Self::RootIo {
                path,
                message: err.to_string(),
            },
        }
    }
}

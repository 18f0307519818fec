//! [`RuntimeError`]: why the runtime could not open or do what a front-end asked, each naming
//! the thing and the fix; [`RuntimeError::kind`] lets front-ends pick an exit code or a status.

use std::path::PathBuf;

use toolgate_core::{CoreError, CoreErrorKind};
use toolgate_store::{StoreError, StoreErrorKind};

/// The class of a [`RuntimeError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuntimeErrorKind {
    /// The config file, an option or the environment is wrong (the user fixes a setting).
    Config,
    /// The thing named does not exist.
    NotFound,
    /// The caller may not do this.
    Forbidden,
    /// It clashes with something that exists.
    Conflict,
    /// The request or definition is invalid.
    Invalid,
    /// The database or another dependency cannot be reached.
    Unavailable,
    /// A bug or a broken invariant inside toolgate.
    Internal,
}

impl RuntimeErrorKind {
    /// The kind's stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::Conflict => "conflict",
            Self::Invalid => "invalid",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }
}

impl std::fmt::Display for RuntimeErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of the runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The config file could not be read.
    #[error("Cannot read config file {}", path.display())]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid TOML for toolgate.
    #[error("Invalid config file {}", path.display())]
    ConfigSyntax {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A setting in the config file is wrong.
    #[error("Invalid config file {}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// The wrong setting.
        #[source]
        source: Box<RuntimeError>,
    },
    /// A setting (from the config, the options or the environment) is wrong; the message
    /// names it and the fix.
    #[error("{0}")]
    Config(String),
    /// A file or directory toolgate needs cannot be used.
    #[error("{what}")]
    Io {
        /// What could not be done, naming the path.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The thing named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// A failure of the store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A failure of the registry or a definition.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A built-in tool could not be set up.
    #[error("{what}")]
    Builtins {
        /// What could not be set up.
        what: String,
        /// Why.
        #[source]
        source: toolgate_builtins::BuiltinError,
    },
    /// The HTTP client of the network policy could not be set up.
    #[error("{what}")]
    Network {
        /// What needed it.
        what: String,
        /// Why.
        #[source]
        source: toolgate_net::NetError,
    },
    /// An output type for `validate_output` does not load.
    #[error("{what}")]
    OutputType {
        /// Which output type.
        what: String,
        /// Why.
        #[source]
        source: toolgate_builtins::OutputTypeError,
    },
    /// A run's budget that is not a budget (a zero, a value the store cannot hold).
    #[error("{0}")]
    Budget(String),
    /// A run's budget looser than its principal's ceiling: valid, but not the caller's to have.
    #[error("{0}")]
    BudgetCeiling(String),
    /// A bug or broken invariant inside toolgate.
    #[error("{0}")]
    Internal(String),
}

impl RuntimeError {
    /// The error's class.
    pub fn kind(&self) -> RuntimeErrorKind {
        match self {
            Self::ConfigRead { .. }
            | Self::ConfigSyntax { .. }
            | Self::ConfigFile { .. }
            | Self::Config(_)
            | Self::Io { .. }
            | Self::Builtins { .. }
            | Self::Network { .. }
            | Self::OutputType { .. } => RuntimeErrorKind::Config,
            Self::NotFound(_) => RuntimeErrorKind::NotFound,
            Self::Forbidden(_) => RuntimeErrorKind::Forbidden,
            Self::Store(e) => match e.kind() {
                StoreErrorKind::NotFound => RuntimeErrorKind::NotFound,
                StoreErrorKind::Conflict => RuntimeErrorKind::Conflict,
                StoreErrorKind::PlanLimit => RuntimeErrorKind::Forbidden,
                StoreErrorKind::Invalid => RuntimeErrorKind::Invalid,
                StoreErrorKind::Unavailable => RuntimeErrorKind::Unavailable,
                // Corrupt data, and any kind the store adds later.
                _ => RuntimeErrorKind::Internal,
            },
            Self::Core(e) => match e.kind() {
                CoreErrorKind::NotFound => RuntimeErrorKind::NotFound,
                CoreErrorKind::Conflict => RuntimeErrorKind::Conflict,
                CoreErrorKind::Forbidden => RuntimeErrorKind::Forbidden,
                _ => RuntimeErrorKind::Invalid,
            },
            Self::Budget(_) => RuntimeErrorKind::Invalid,
            Self::BudgetCeiling(_) => RuntimeErrorKind::Forbidden,
            Self::Internal(_) => RuntimeErrorKind::Internal,
        }
    }

    /// `self` as the reason the config file at `path` is invalid.
    pub(crate) fn in_file(self, path: &std::path::Path) -> Self {
        Self::ConfigFile {
            path: path.to_path_buf(),
            source: Box::new(self),
        }
    }
}

//! [`StoreError`]: every failure of the store, each naming the thing and the fix.

use std::fmt;

/// The class of a [`StoreError`], for callers that map errors to exit codes or HTTP statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The tool (or call) does not exist.
    NotFound,
    /// A live definition already has that name.
    Conflict,
    /// The plan in force does not allow this.
    PlanLimit,
    /// The database cannot be reached, opened, migrated or written.
    Unavailable,
    /// Stored data does not read back as what was written.
    Corrupt,
    /// The request itself is malformed (bad URL, bad schema name).
    Invalid,
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::PlanLimit => "plan_limit",
            Self::Unavailable => "unavailable",
            Self::Corrupt => "corrupt",
            Self::Invalid => "invalid",
        })
    }
}

/// A store failure. Messages never contain a database password. A variant with a `source`
/// does not repeat it in its message: render the chain with [`toolgate_core::ErrorChain`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// `DbUrl::parse` refused the text.
    #[error(
        "Invalid database URL {url}: {reason} (use sqlite:PATH, sqlite://PATH or postgres://USER@HOST/DB)"
    )]
    InvalidUrl {
        /// The URL as given (its password masked).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A request the store cannot act on (for example a bad Postgres schema name).
    #[error("{0}")]
    Invalid(String),
    /// The database could not be opened or connected to.
    #[error("Cannot open database {url} ({hint})")]
    Open {
        /// The database URL (its password masked).
        url: String,
        /// What to check, for the message.
        hint: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// Migrations could not be applied.
    #[error(
        "Cannot prepare database {url}: applying migrations failed (was it created by a newer toolgate, or edited by hand?)"
    )]
    Migrate {
        /// The database URL (its password masked).
        url: String,
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// No such custom tool (or call).
    #[error("{0}")]
    NotFound(String),
    /// A live custom tool already has the name.
    #[error(
        "A custom tool named `{0}` already exists (use `toolgate tools update` to change it, or `toolgate tools rm {0}` first)"
    )]
    Conflict(String),
    /// The plan's custom-definition limit would be exceeded.
    #[error("{message}")]
    PlanLimit {
        /// The plan in force.
        plan: String,
        /// Its most live custom definitions.
        limit: u64,
        /// The whole message, naming the plan and what to do.
        message: String,
    },
    /// A query failed.
    #[error("Database error while {action} (is the database reachable and writable?)")]
    Database {
        /// What the store was doing, like `reading an approval`.
        action: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// Stored data is not what was written.
    #[error("The store holds unreadable data: {0} (the database may have been edited by hand)")]
    Corrupt(String),
    /// A batched audit write failed (the message of the underlying error), or the audit
    /// writer has stopped.
    #[error("{0}")]
    AuditWrite(String),
    /// The audit checkpoint key is missing, unreadable or too short.
    #[error("{0}")]
    AuditKey(String),
    /// An approval is not in the state the operation needs (or an idempotency key was reused).
    #[error("{0}")]
    ApprovalState(String),
    /// An upstream server entry or tool pin is not in the state the operation needs (a server
    /// added twice; a definition to approve that is not the one awaiting review).
    #[error("{0}")]
    GatewayState(String),
}

impl StoreError {
    /// The error's class.
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            Self::InvalidUrl { .. } | Self::Invalid(_) | Self::AuditKey(_) => {
                StoreErrorKind::Invalid
            }
            Self::Open { .. }
            | Self::Migrate { .. }
            | Self::Database { .. }
            | Self::AuditWrite(_) => StoreErrorKind::Unavailable,
            Self::NotFound(_) => StoreErrorKind::NotFound,
            Self::Conflict(_) | Self::ApprovalState(_) | Self::GatewayState(_) => {
                StoreErrorKind::Conflict
            }
            Self::PlanLimit { .. } => StoreErrorKind::PlanLimit,
            Self::Corrupt(_) => StoreErrorKind::Corrupt,
        }
    }

    pub(crate) fn db(action: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Database { action, source }
    }

    pub(crate) fn not_found(name: &str) -> Self {
        Self::NotFound(format!(
            "No custom tool named `{name}` in the store (list them with `toolgate tools list`)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_does_not_repeat_its_source_and_the_chain_has_it_once() {
        let e = StoreError::Database {
            action: "reading the audit log",
            source: sqlx::Error::PoolTimedOut,
        };
        let cause = sqlx::Error::PoolTimedOut.to_string();
        assert!(!e.to_string().contains(&cause), "{e}");
        assert_eq!(
            toolgate_core::error_chain(&e),
            format!("{e}: {cause}"),
            "the chain adds the cause once"
        );
    }
}

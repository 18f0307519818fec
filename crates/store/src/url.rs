//! [`DbUrl`]: where the store lives, parsed from `--db`.

use std::fmt;
use std::path::PathBuf;

use crate::error::StoreError;

/// A database location: a SQLite file or a PostgreSQL connection URL.
///
/// `Display` shows the URL with any password replaced by `***`, so it is safe in messages and logs.
#[derive(Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// A SQLite database file (created on first use, with its parent directories).
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL, as given.
    Postgres(String),
}

impl DbUrl {
    /// Parses `sqlite:PATH`, `sqlite://PATH` (so `sqlite:///abs/path` is absolute),
    /// `postgres://…` or `postgresql://…`.
    pub fn parse(raw: &str) -> Result<Self, StoreError> {
        let raw = raw.trim();
        let invalid = |reason: &str| StoreError::InvalidUrl {
            url: redact(raw),
            reason: reason.to_owned(),
        };
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            let rest = raw.split_once("://").map(|(_, r)| r).unwrap_or_default();
            if rest.is_empty() || rest.starts_with('/') && rest.len() == 1 {
                return Err(invalid("no host or database given"));
            }
            return Ok(Self::Postgres(raw.to_owned()));
        }
        if let Some(rest) = raw.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid("no file path given"));
            }
            if path == ":memory:" || path.contains('?') {
                return Err(invalid(
                    "in-memory databases and URL options are not supported; give a file path",
                ));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        Err(invalid("unknown scheme"))
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Self::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({self})")
    }
}

/// Replaces the password in `scheme://user:password@host…` and any `password=` query parameter.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_hides_passwords() {
        assert_eq!(
            DbUrl::parse("sqlite:/tmp/x.db").unwrap(),
            DbUrl::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            DbUrl::parse("sqlite:///tmp/x.db").unwrap(),
            DbUrl::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            DbUrl::parse("sqlite://rel/x.db").unwrap(),
            DbUrl::Sqlite("rel/x.db".into())
        );
        let pg = DbUrl::parse("postgres://bob:s3cret@db:5432/tg?sslmode=require&password=s3cret")
            .unwrap();
        let shown = pg.to_string();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            shown,
            "postgres://bob:***@db:5432/tg?sslmode=require&password=***"
        );
        assert_eq!(
            DbUrl::parse("postgresql://u@h/d").unwrap().to_string(),
            "postgresql://u@h/d"
        );
        let err = DbUrl::parse("mysql://u:pw@h/d").unwrap_err().to_string();
        assert!(
            err.contains("unknown scheme") && !err.contains("pw@"),
            "{err}"
        );
        assert!(DbUrl::parse("sqlite:").is_err());
    }
}

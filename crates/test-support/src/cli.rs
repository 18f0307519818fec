//! One way to run the `toolgate` binary in tests, isolated from the environment of whoever runs
//! them.
//!
//! The binary reads its settings from `TOOLGATE_*` variables (database, config file, root
//! folder, tools folder, log filter, audit key, search engine, network policy, and whatever is
//! added later) and its log filter also from `RUST_LOG`. A developer's shell may set any of
//! them; a test that inherited one would test a different configuration than it says. So every
//! command built here starts with all of them removed ([`isolated`]), and a test sets exactly
//! the ones it is about.
//!
//! The path of the binary comes from the caller: `env!("CARGO_BIN_EXE_toolgate")` is known only
//! inside the tests of the crate that builds it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The prefix of the environment variables the `toolgate` binary reads.
pub const ENV_PREFIX: &str = "TOOLGATE_";

/// A command for `program` whose environment is this process's minus every variable that
/// starts with [`ENV_PREFIX`] and minus `RUST_LOG`. `program` is usually the `toolgate` binary;
/// it may be a wrapper that starts it (util-linux `script`, for a terminal), which hands the
/// cleaned environment on.
pub fn isolated(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|name| name.starts_with(ENV_PREFIX))
        {
            command.env_remove(&name);
        }
    }
    command.env_remove("RUST_LOG");
    command
}

/// The `toolgate` binary as a test runs it: in a folder of the test's own, with a database of
/// its own (`TOOLGATE_DB`), and no other setting from the caller's environment ([`isolated`]).
#[derive(Debug, Clone)]
pub struct Toolgate {
    bin: PathBuf,
    dir: PathBuf,
    db: String,
}

impl Toolgate {
    /// The binary at `bin` (`env!("CARGO_BIN_EXE_toolgate")`), run in `dir` with the SQLite
    /// database `dir/toolgate.db`.
    pub fn new(bin: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let db = sqlite_url(&dir.join("toolgate.db"));
        Self {
            bin: bin.into(),
            dir,
            db,
        }
    }

    /// The same, with the SQLite database at `relative` inside the folder instead.
    #[must_use]
    pub fn with_sqlite(self, relative: impl AsRef<Path>) -> Self {
        let db = sqlite_url(&self.dir.join(relative));
        Self { db, ..self }
    }

    /// The same, with the database URL `url` (`sqlite:…` or `postgres://…`) instead.
    #[must_use]
    pub fn with_db(self, url: impl Into<String>) -> Self {
        Self {
            db: url.into(),
            ..self
        }
    }

    /// The path of the binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The folder the binary runs in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The database URL the binary is given (`TOOLGATE_DB`).
    pub fn db(&self) -> &str {
        &self.db
    }

    /// A command for the binary, without arguments: [`isolated`], in [`Self::dir`], with
    /// `TOOLGATE_DB` set to [`Self::db`]. Add arguments, more variables and pipes, then run it.
    pub fn command(&self) -> Command {
        self.wrapped(&self.bin)
    }

    /// A command for `wrapper` (for example util-linux `script`, which gives the binary a
    /// terminal) with the environment and folder [`Self::command`] gives the binary, which
    /// `wrapper` hands on to the binary it starts.
    pub fn wrapped(&self, wrapper: impl AsRef<OsStr>) -> Command {
        let mut command = isolated(wrapper);
        command.current_dir(&self.dir).env("TOOLGATE_DB", &self.db);
        command
    }

    /// Runs the binary with `args` to completion (no standard input) and returns what it did.
    ///
    /// # Panics
    ///
    /// When the binary cannot be started (a missing or unbuilt binary, a missing folder).
    pub fn output<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{}", self.not_started(&e)))
    }

    /// The message for a binary that could not be started.
    pub fn not_started(&self, error: &std::io::Error) -> String {
        format!(
            "could not start {} in {}: {error} (is the binary built and the folder there?)",
            self.bin.display(),
            self.dir.display()
        )
    }
}

/// The `sqlite:` database URL of `path`.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

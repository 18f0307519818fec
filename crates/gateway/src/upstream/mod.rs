//! The client side of upstream servers: connecting (stdio through a [`StdioSpawner`], Streamable
//! HTTP), the lifecycle (start on first use, restart with backoff, idle stop) and forwarding calls.
//!
//! [`Upstream`] is the handle the runtime holds per server: `tools()` lists, `call()` forwards
//! one call (progress, logs, cancellation, content blocks, elicitation and sampling relayed),
//! `subscribe()` reports state and tool-list changes.

mod client;
mod forward;
mod http_lane;
mod lane;
mod lifecycle;
mod stdio_lane;

pub use lifecycle::{Connector, HttpConnector, HttpTarget, Upstream, UpstreamEvent};

pub mod http;

use std::path::PathBuf;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::GatewayError;
use crate::config::SandboxAccess;
use toolgate_core::Isolation;

/// What to start for a stdio upstream, with `${env:…}` already expanded.
#[derive(Clone, Debug)]
pub struct StdioLaunch {
    /// The server's name, for messages ("Server files").
    pub label: String,
    /// The absolute path of the program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its whole environment besides the sandbox's own (HOME, TMPDIR, PATH, LANG).
    pub env: Vec<(String, String)>,
    /// Its working directory, if set.
    pub cwd: Option<PathBuf>,
    /// The isolation level.
    pub level: Isolation,
    /// What it may reach from `strict` up.
    pub access: SandboxAccess,
}

/// A running stdio upstream: its pipes and a handle that stops it.
pub struct StdioProcess {
    /// The server's stdout (MCP messages in).
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// The server's stdin (MCP messages out).
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    /// Stops the process and everything it started, and reports how it ended.
    pub handle: Box<dyn StdioHandle>,
}

impl std::fmt::Debug for StdioProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioProcess").finish_non_exhaustive()
    }
}

/// Control of a running stdio upstream. Dropping it kills the process and everything it started.
pub trait StdioHandle: Send + Sync {
    /// The last lines the process wrote to stderr (for `servers list` and errors).
    fn stderr_tail(&self) -> String;
    /// Kills the process and everything it started.
    fn kill(&self);
    /// Resolves when the process has exited, with a description such as "exit status 1".
    fn exited(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>>;
}

/// Starts stdio upstreams: the sandbox's runner in production, a plain child process in tests.
pub trait StdioSpawner: Send + Sync + 'static {
    /// Starts `launch` with piped stdin/stdout and a captured stderr tail.
    fn spawn(&self, launch: &StdioLaunch) -> Result<StdioProcess, GatewayError>;
}

/// Where a server is in its lifecycle, as `servers list`, `GET /v1/servers` and `/healthz` show it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ServerState {
    /// Not started yet (started on first use) or stopped after its idle timeout.
    Stopped,
    /// Starting or re-initialising.
    Starting,
    /// Connected; tools listed.
    Ready,
    /// The last start failed or the process died; restarted with backoff on the next use.
    Failed {
        /// The last error.
        error: String,
        /// The last lines of the server's stderr, if a process.
        stderr_tail: String,
    },
}

/// A server name for tests, checked only for being non-empty ASCII letters, digits, `-` and
/// `_`. Stands in until the config parser's `ServerName::parse` is on main; do not use it
/// elsewhere.
#[doc(hidden)]
pub fn test_server_name(name: &str) -> Option<crate::ServerName> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| crate::ServerName::new_unchecked(name.to_owned()))
}

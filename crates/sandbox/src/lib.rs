//! toolgate-sandbox: the isolation levels (`docs/tool-model.md#isolation`), enforced on Linux.
//!
//! | level        | what the program gets |
//! |--------------|------------------------|
//! | `none`       | a child process in its own session, resource limits, killed with its group |
//! | `standard`   | plus user and PID namespaces (nothing it starts outlives the call), cgroup memory and pids limits where the host allows, `no_new_privs` |
//! | `strict`     | plus Landlock (system paths read-only, declared paths, a private temporary directory), seccomp (no ptrace, mount, bpf, keyring, userfaultfd, perf events, io_uring, new namespaces, raw sockets), and a network namespace with only the declared `host:port`s bridged |
//! | `restricted` | no filesystem beyond the program and its libraries, no network, 64 MiB of memory, no new processes |
//!
//! The `toolgate` binary is its own launcher: [`SandboxExecutor`] starts it again with a hidden
//! argument, and [`hidden_main`] (the first thing `main` calls) turns it into the launcher, the
//! namespace's first process, the network bridge, or a worker running one in-process tool.
//! A level the host cannot enforce fails the call with `unavailable`; it is never weakened.
//!
//! Besides one-shot jobs ([`Runner::run`]), the runner starts long-lived sessions with piped
//! stdin and stdout ([`Runner::spawn_session`]; MCP stdio servers) at the same levels.

#![warn(missing_docs, unreachable_pub)]

mod access;
mod bridge;
mod cgroup;
mod command;
mod error;
mod executor;
mod fds;
mod fsrules;
pub mod launch_spec;
mod launcher;
mod resident;
mod runner;
mod seccomp;
mod session;
mod worker;

use std::sync::Arc;

use toolgate_core::Tool;

pub use access::{ProgramUser, access_warnings};
pub use command::{Arg, COMMAND_KIND, CommandKind, CommandPlan, OutputMode};
pub use error::{SandboxError, SandboxErrorKind};
pub use executor::SandboxExecutor;
pub use resident::{Released, release_startup_code};
pub use runner::{Finished, Job, Runner, SandboxConfig};
pub use session::{Session, SessionExit, SessionHandle, SessionJob};

/// Runs the hidden mode named by `argv[1]`, if any, and returns its exit status; `None` for a
/// normal start. Call it first in `main`, before starting threads or a runtime; `tools` are
/// the in-process tools the worker mode may run.
pub fn hidden_main<F>(tools: F) -> Option<i32>
where
    F: FnOnce() -> Vec<Arc<dyn Tool>>,
{
    let arg = std::env::args_os().nth(1)?;
    match arg.to_str()? {
        launch_spec::LAUNCH_ARG => Some(launcher::launch_main()),
        launch_spec::INIT_ARG => Some(launcher::init_main()),
        launch_spec::MAP_ARG => Some(launcher::map_main()),
        bridge::BRIDGE_ARG => Some(bridge::bridge_main()),
        launch_spec::WORKER_ARG => Some(worker::worker_main(&tools())),
        _ => None,
    }
}

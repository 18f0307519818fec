//! What the executor hands to the launcher: one JSON document in an environment variable of the
//! launcher process (never on its command line, which other users can read), dropped before the
//! program starts.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use toolgate_core::Isolation;

/// `argv[1]` of the `toolgate` binary re-executed as the sandbox launcher (stage 1).
pub const LAUNCH_ARG: &str = "__toolgate-sandbox";
/// `argv[1]` of stage 2: the first process of the new PID namespace, which locks itself down and
/// becomes the program.
pub const INIT_ARG: &str = "__toolgate-sandbox-init";
/// `argv[1]` of the helper that writes the user-id maps of stage 1's new user namespace.
pub const MAP_ARG: &str = "__toolgate-sandbox-map";
/// `argv[1]` of the worker mode: runs one in-process tool's handler (inside the sandbox).
pub const WORKER_ARG: &str = "__toolgate-worker";
/// The environment variable carrying the [`LaunchSpec`].
pub const SPEC_ENV: &str = "TOOLGATE_SANDBOX_SPEC";
/// Exit status of the launcher when it could not set the sandbox up; its stderr then starts
/// with [`SETUP_FAILED`].
pub const SETUP_EXIT: i32 = 126;
/// First bytes of the launcher's stderr when the sandbox could not be set up.
pub const SETUP_FAILED: &str = "toolgate-sandbox: ";
/// The line the launcher writes to stderr right before executing the program when
/// [`LaunchSpec::session`] is set: everything before it is the launcher's, everything
/// after it the program's.
pub const STARTED: &str = "toolgate-sandbox-started\n";

/// Everything the launcher needs, decided by the executor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The isolation level to set up.
    pub level: Isolation,
    /// Absolute path of the program to execute.
    pub program: PathBuf,
    /// `argv[1..]` of the program.
    pub args: Vec<String>,
    /// The program's whole environment.
    pub env: Vec<(String, String)>,
    /// Working directory (the call's private temporary directory).
    pub cwd: PathBuf,
    /// Read-only (and executable) paths; only enforced from `strict` up.
    pub read_paths: Vec<PathBuf>,
    /// Paths with full access; only enforced from `strict` up.
    pub write_paths: Vec<PathBuf>,
    /// The network the program sees.
    pub net: NetMode,
    /// Resource limits set before `execve`.
    pub limits: ResourceLimits,
    /// `cgroup.procs` files the launcher joins before anything else (memory and pids limits).
    pub cgroup_procs: Vec<PathBuf>,
    /// The host user and group the program runs as from `standard` up (root inside its user
    /// namespace, this uid/gid outside): an unprivileged one when toolgate runs as root.
    pub outside_uid: u32,
    /// See `outside_uid`.
    pub outside_gid: u32,
    /// A long-lived session: the launcher writes [`STARTED`] to stderr once the sandbox is set
    /// up, right before executing the program (the executor learns that setup succeeded without
    /// waiting for an exit), and from `standard` up stage 1 kills the namespace when the
    /// executor dies (a session has no deadline that would end it otherwise).
    #[serde(default)]
    pub session: bool,
}

/// The network the program sees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetMode {
    /// The host's network (`none` and `standard`).
    Host,
    /// A new, empty network namespace: no interface is up, not even loopback.
    Nothing,
    /// A new network namespace where each allowed `host:port` has a loopback stand-in
    /// (127.0.0.2, 127.0.0.3, … in a private `/etc/hosts`), bridged over a Unix socket to the
    /// executor, which connects to the real, policy-checked address.
    Bridged {
        /// The Unix socket of the executor's connector.
        socket: PathBuf,
        /// `(host, port)` in the order of the stand-in addresses.
        hosts: Vec<(String, u16)>,
        /// The private hosts file to mount over `/etc/hosts`.
        hosts_file: PathBuf,
    },
}

/// `setrlimit` values (0 = leave the inherited limit).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// CPU time (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Address space (`RLIMIT_AS`).
    pub address_space_bytes: u64,
    /// Data segment (`RLIMIT_DATA`).
    pub data_bytes: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Largest file written (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// Processes and threads of the user (`RLIMIT_NPROC`).
    pub processes: u64,
}

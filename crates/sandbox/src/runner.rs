//! The executor side of a sandboxed run: the call's private directory, cgroups, the launcher
//! process, stdin/stdout/stderr, the deadline and cancellation, the network connector, and the
//! cleanup that leaves no process, zombie or descriptor behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use toolgate_core::Isolation;
use toolgate_net::NetPolicy;

use crate::bridge;
use crate::cgroup::Cgroups;
use crate::error::SandboxError;
use crate::launch_spec::{
    LAUNCH_ARG, LaunchSpec, NetMode, ResourceLimits, SETUP_EXIT, SETUP_FAILED, SPEC_ENV,
};

/// How much of stderr is kept for error messages.
pub(crate) const STDERR_TAIL: usize = 4096;

/// Settings of the sandbox, shared by every call.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// The binary that runs the launcher when started with its hidden argument (the `toolgate`
    /// binary, or any binary whose `main` calls [`crate::hidden_main`]).
    pub launcher: PathBuf,
    /// Read-only paths every `strict` program gets (system libraries, certificates, …).
    pub system_read_paths: Vec<PathBuf>,
    /// Read-only paths a `restricted` program gets besides itself: the dynamic loader and
    /// shared libraries.
    pub library_paths: Vec<PathBuf>,
    /// Memory of `standard` and `strict` programs (data segment and cgroup memory).
    pub memory_bytes: u64,
    /// Memory of `restricted` programs.
    pub restricted_memory_bytes: u64,
    /// Address space of `standard` and `strict` programs.
    pub address_space_bytes: u64,
    /// Processes and threads of `standard` and `strict` programs.
    pub processes: u64,
    /// Open file descriptors of a program (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Largest file a program may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// Where calls get their private temporary directories.
    pub temp_root: PathBuf,
    /// Checks every address a bridged connection goes to.
    pub policy: NetPolicy,
    /// Whether to put calls in cgroups (memory, pids) when the host allows it.
    pub use_cgroups: bool,
    /// The host uid and gid sandboxed programs (`standard` and up) run as when toolgate runs as
    /// root (default 65534, `nobody`); otherwise they run as toolgate's own user. Read paths
    /// must be readable and write paths writable by this user.
    pub sandbox_user: (u32, u32),
}

impl SandboxConfig {
    /// Defaults for a launcher binary.
    pub fn new(launcher: impl Into<PathBuf>) -> Self {
        let existing = |list: &[&str]| -> Vec<PathBuf> {
            list.iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect()
        };
        Self {
            launcher: launcher.into(),
            system_read_paths: existing(&[
                "/usr",
                "/lib",
                "/lib64",
                "/lib32",
                "/bin",
                "/sbin",
                "/etc/ld.so.cache",
                "/etc/ld.so.conf",
                "/etc/ld.so.conf.d",
                "/etc/localtime",
                "/etc/nsswitch.conf",
                "/etc/hosts",
                "/etc/resolv.conf",
                "/etc/ssl",
                "/etc/ca-certificates",
                "/etc/alternatives",
                "/etc/passwd",
                "/etc/group",
                "/etc/mime.types",
                "/usr/share/zoneinfo",
                "/dev/urandom",
                "/dev/random",
                "/dev/zero",
            ]),
            library_paths: existing(&["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib32"]),
            memory_bytes: 1 << 30,
            restricted_memory_bytes: 64 << 20,
            address_space_bytes: 4 << 30,
            processes: 64,
            open_files: 256,
            file_size_bytes: 64 << 20,
            temp_root: std::env::temp_dir(),
            policy: NetPolicy::default().with_env(),
            use_cgroups: true,
            sandbox_user: (65534, 65534),
        }
    }
}

/// One program to run.
#[derive(Clone, Debug)]
pub struct Job {
    /// The isolation level to run at.
    pub level: Isolation,
    /// The absolute path of the program.
    pub program: PathBuf,
    /// Its arguments, each passed as is.
    pub args: Vec<String>,
    /// Variables for the program besides HOME, TMPDIR, PATH and LANG.
    pub env: Vec<(String, String)>,
    /// Paths the program may read (from `strict` up).
    pub read_paths: Vec<PathBuf>,
    /// Paths the program may write (from `strict` up).
    pub write_paths: Vec<PathBuf>,
    /// `(host, port)` pairs the program may connect to (bridged, from `strict` up).
    pub allowed_hosts: Vec<(String, u16)>,
    /// Bytes written to the program's stdin.
    pub stdin: Vec<u8>,
    /// Wall time after which the program and everything it started are killed.
    pub timeout: Duration,
    /// Bytes of stdout kept; more ends the run (the output is marked cut).
    pub max_stdout: u64,
    /// For messages: "Tool NAME".
    pub label: String,
}

/// How a run ended.
#[derive(Debug)]
pub struct Finished {
    /// What the program wrote to stdout (at most [`Job::max_stdout`] bytes).
    pub stdout: Vec<u8>,
    /// stdout went past [`Job::max_stdout`] and the run was stopped.
    pub stdout_cut: bool,
    /// The end of what it wrote to stderr, for messages.
    pub stderr_tail: String,
    /// The exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// The memory limit was hit.
    pub out_of_memory: bool,
    /// How long the run took.
    pub elapsed: Duration,
}

impl Finished {
    /// Whether the program exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs jobs in the sandbox.
#[derive(Debug)]
pub struct Runner {
    config: SandboxConfig,
}

async fn read_capped(mut r: impl AsyncRead + Unpin, cap: u64) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return (out, false),
            Ok(n) => {
                let room = usize::try_from(cap)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(out.len());
                if n > room {
                    out.extend_from_slice(&buf[..room]);
                    return (out, true);
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}

async fn read_tail(mut r: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buf = [0u8; 8 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return tail,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
        }
    }
}

pub(crate) fn tail_text(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}

/// What a call leaves to clean up, cleaned up however the call ends — including when the
/// pipeline drops the call's future (a cancellation that wins its race): the process tree is
/// killed, the cgroups are emptied and removed, the network connector stops.
pub(crate) struct CallGuard {
    pub(crate) pid: AtomicU32,
    pub(crate) cgroups: Cgroups,
    pub(crate) connector: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let pid = self.pid.load(Ordering::SeqCst);
        if pid != 0 {
            kill_tree(Some(pid));
        }
        if let Some(c) = self.connector.take() {
            c.abort();
        }
        self.cgroups.destroy();
    }
}

/// What [`Runner::prepare`] set up; dropping it kills what is left of the process tree,
/// removes the cgroups, stops the connector, then removes the private directory.
pub(crate) struct Prepared {
    /// Declared before `dir`, so dropped first: processes die before their files go.
    pub(crate) guard: CallGuard,
    /// The call's private directory.
    pub(crate) dir: tempfile::TempDir,
    /// The network the program sees.
    pub(crate) net: NetMode,
}

/// Kills the launcher's process group and the launcher; the PID namespace goes with it.
pub(crate) fn kill_tree(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    let pid = Pid::from_raw(pid);
    let _ = killpg(pid, Signal::SIGKILL);
    let _ = kill(pid, Signal::SIGKILL);
}

impl Runner {
    /// A runner with the given configuration.
    pub fn new(config: SandboxConfig) -> Self {
        Self { config }
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The host user `standard` and `strict` programs run as: the configured sandbox user
    /// (supplementary groups dropped) when toolgate runs as root, toolgate's own user otherwise.
    pub fn program_user(&self) -> crate::ProgramUser {
        let (uid, gid) = self.outside();
        let groups = if nix::unistd::geteuid().is_root() {
            Vec::new()
        } else {
            nix::unistd::getgroups()
                .map(|g| g.into_iter().map(nix::unistd::Gid::as_raw).collect())
                .unwrap_or_default()
        };
        crate::ProgramUser { uid, gid, groups }
    }

    /// The host uid and gid of sandboxed programs.
    pub(crate) fn outside(&self) -> (u32, u32) {
        if nix::unistd::geteuid().is_root() {
            self.config.sandbox_user
        } else {
            (
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw(),
            )
        }
    }

    /// The resource limits of `level` (`cpu_seconds` 0: no CPU time limit).
    pub(crate) fn limits(&self, level: Isolation, cpu_seconds: u64) -> ResourceLimits {
        let c = &self.config;
        let restricted = level == Isolation::Restricted;
        ResourceLimits {
            cpu_seconds,
            address_space_bytes: if restricted {
                1 << 30
            } else {
                c.address_space_bytes
            },
            data_bytes: if restricted {
                c.restricted_memory_bytes
            } else {
                c.memory_bytes
            },
            open_files: c.open_files,
            file_size_bytes: if restricted {
                1 << 20
            } else {
                c.file_size_bytes
            },
            processes: if restricted { 0 } else { c.processes },
        }
    }

    fn launch_spec(&self, job: &Job, dir: &Path, cgroups: &Cgroups, net: NetMode) -> LaunchSpec {
        let c = &self.config;
        let tmp = dir.join("tmp");
        let mut env = vec![
            ("HOME".to_owned(), tmp.display().to_string()),
            ("TMPDIR".to_owned(), tmp.display().to_string()),
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ];
        env.extend(job.env.iter().cloned());
        let (read_paths, write_paths) = match job.level {
            Isolation::Restricted => {
                let mut read = c.library_paths.clone();
                read.push(job.program.clone());
                (read, Vec::new())
            }
            _ => {
                let mut read = c.system_read_paths.clone();
                read.extend(job.read_paths.iter().cloned());
                read.push(job.program.clone());
                let mut write = job.write_paths.clone();
                write.push(tmp.clone());
                write.push(PathBuf::from("/dev/null"));
                (read, write)
            }
        };
        let secs = job.timeout.as_secs() + 2;
        LaunchSpec {
            level: job.level,
            program: job.program.clone(),
            args: job.args.clone(),
            env,
            cwd: tmp,
            read_paths,
            write_paths,
            net,
            limits: self.limits(job.level, secs),
            cgroup_procs: cgroups.procs_files(),
            outside_uid: self.outside().0,
            outside_gid: self.outside().1,
            session: false,
        }
    }

    /// Runs `job` to completion, deadline or cancellation.
    pub async fn run(
        &self,
        job: Job,
        cancel: &CancellationToken,
    ) -> Result<Finished, SandboxError> {
        let started = Instant::now();
        let prepared = self.prepare(
            job.level,
            &job.program,
            &job.label,
            &job.allowed_hosts,
            &["tmp"],
        )?;
        let spec = self.launch_spec(
            &job,
            prepared.dir.path(),
            &prepared.guard.cgroups,
            prepared.net.clone(),
        );
        let spec_json = serde_json::to_string(&spec)
            .map_err(|e| SandboxError::Spawn(format!("launch spec: {e}")))?;
        let result = self
            .supervise(&job, spec_json, cancel, &prepared.guard)
            .await;
        // The guard goes first (processes die), then the directory.
        drop(prepared);
        result.map(|mut f| {
            f.elapsed = started.elapsed();
            f
        })
    }

    /// What every sandboxed process needs on the host before it starts: the program checked,
    /// the call's private directory with the sandbox user's own subdirectories `owned`, the
    /// cgroups, and for `strict` with `allowed_hosts` the network bridge's connector.
    pub(crate) fn prepare(
        &self,
        level: Isolation,
        program: &Path,
        label: &str,
        allowed_hosts: &[(String, u16)],
        owned: &[&str],
    ) -> Result<Prepared, SandboxError> {
        if !program.is_file() {
            return Err(SandboxError::Unavailable(format!(
                "{label}: program not found: {}; install it or fix run.program",
                program.display()
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("toolgate-call-")
            .tempdir_in(&self.config.temp_root)
            .map_err(|e| {
                SandboxError::Spawn(format!(
                    "could not create the call's private directory in {}: {e}",
                    self.config.temp_root.display()
                ))
            })?;
        let private = dir.path().join("private");
        let owned: Vec<PathBuf> = owned.iter().map(|d| dir.path().join(d)).collect();
        for d in owned.iter().chain([&private]) {
            std::fs::create_dir(d).map_err(|e| {
                SandboxError::Spawn(format!("could not create {}: {e}", d.display()))
            })?;
        }
        // The sandbox's user may pass through the call's directory (not list it), owns its
        // temporary directory, and may reach the bridge's socket and hosts file.
        let (uid, gid) = self.outside();
        let setup = || -> std::io::Result<()> {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711))?;
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o711))?;
            for d in &owned {
                // Private to the program's user: a session's home may hold its caches' secrets.
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
            }
            if level > Isolation::None {
                for d in &owned {
                    nix::unistd::chown(
                        d,
                        Some(nix::unistd::Uid::from_raw(uid)),
                        Some(nix::unistd::Gid::from_raw(gid)),
                    )?;
                }
            }
            Ok(())
        };
        setup().map_err(|e| {
            SandboxError::Spawn(format!("could not prepare the call's directory: {e}"))
        })?;
        let memory = if level == Isolation::Restricted {
            self.config.restricted_memory_bytes
        } else {
            self.config.memory_bytes
        };
        let pids = if level == Isolation::Restricted {
            16
        } else {
            self.config.processes
        };
        let cgroups = if self.config.use_cgroups && level > Isolation::None {
            Cgroups::create(memory, pids)
        } else {
            Cgroups::none()
        };
        let mut guard = CallGuard {
            pid: AtomicU32::new(0),
            cgroups,
            connector: None,
        };
        let net = match level {
            Isolation::None | Isolation::Standard => NetMode::Host,
            Isolation::Restricted => NetMode::Nothing,
            Isolation::Strict if allowed_hosts.is_empty() => NetMode::Nothing,
            Isolation::Strict => {
                let socket = private.join("net.sock");
                let listener = UnixListener::bind(&socket).map_err(|e| {
                    SandboxError::Spawn(format!("could not open the network bridge socket: {e}"))
                })?;
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
                        .map_err(|e| {
                            SandboxError::Spawn(format!(
                                "could not open the network bridge socket: {e}"
                            ))
                        })?;
                }
                let hosts_file = private.join("hosts");
                std::fs::write(&hosts_file, bridge::hosts_file(allowed_hosts)).map_err(|e| {
                    SandboxError::Spawn(format!("could not write the sandbox hosts file: {e}"))
                })?;
                guard.connector = Some(tokio::spawn(connect_loop(
                    listener,
                    allowed_hosts.to_vec(),
                    self.config.policy.clone(),
                )));
                NetMode::Bridged {
                    socket,
                    hosts: allowed_hosts.to_vec(),
                    hosts_file,
                }
            }
        };
        Ok(Prepared { guard, dir, net })
    }

    async fn supervise(
        &self,
        job: &Job,
        spec_json: String,
        cancel: &CancellationToken,
        guard: &CallGuard,
    ) -> Result<Finished, SandboxError> {
        let cgroups = &guard.cgroups;
        let mut child = tokio::process::Command::new(&self.config.launcher)
            .arg(LAUNCH_ARG)
            .env_clear()
            .env(SPEC_ENV, spec_json)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                SandboxError::Spawn(format!(
                    "could not start the sandbox launcher {}: {e}",
                    self.config.launcher.display()
                ))
            })?;
        let pid = child.id();
        guard.pid.store(pid.unwrap_or(0), Ordering::SeqCst);
        let stdin = child.stdin.take();
        let input = job.stdin.clone();
        let writer = tokio::spawn(async move {
            if let Some(mut s) = stdin {
                let _ = s.write_all(&input).await;
                let _ = s.shutdown().await;
            }
        });
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let cap = job.max_stdout;
        let out_task = tokio::spawn(async move {
            match stdout {
                Some(s) => read_capped(s, cap).await,
                None => (Vec::new(), false),
            }
        });
        let err_task = tokio::spawn(async move {
            match stderr {
                Some(s) => read_tail(s).await,
                None => Vec::new(),
            }
        });
        enum End {
            Exited(std::io::Result<std::process::ExitStatus>),
            Timeout,
            Cancelled,
        }
        let end = tokio::select! {
            biased;
            () = cancel.cancelled() => End::Cancelled,
            status = child.wait() => End::Exited(status),
            () = tokio::time::sleep(job.timeout) => End::Timeout,
        };
        // Whatever happened, nothing of this run survives it.
        kill_tree(pid);
        cgroups.kill_all();
        let status = match &end {
            End::Exited(s) => s.as_ref().ok().copied(),
            _ => child.wait().await.ok(),
        };
        // Every task holding one of the child's pipes is finished before returning, so no
        // descriptor outlives the call.
        writer.abort();
        let _ = writer.await;
        let (stdout, stdout_cut) = finish(out_task).await;
        let stderr = finish(err_task).await;
        let stderr_tail = tail_text(&stderr);
        let out_of_memory = cgroups.out_of_memory();
        match end {
            End::Cancelled => return Err(SandboxError::Cancelled),
            End::Timeout => {
                return Err(SandboxError::Timeout(format!(
                    "{} timed out after {} ms; the process and everything it started were killed",
                    job.label,
                    job.timeout.as_millis()
                )));
            }
            End::Exited(_) => {}
        }
        use std::os::unix::process::ExitStatusExt;
        let code = status.and_then(|s| s.code());
        let signal = status.and_then(|s| s.signal());
        if code == Some(SETUP_EXIT)
            && let Some(msg) = stderr_tail
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix(SETUP_FAILED))
        {
            return Err(SandboxError::Unavailable(format!(
                "{}: cannot run at {} isolation on this host: {msg}",
                job.label, job.level
            )));
        }
        Ok(Finished {
            stdout,
            stdout_cut,
            stderr_tail,
            code,
            signal,
            out_of_memory,
            elapsed: Duration::ZERO,
        })
    }
}

/// The task's result, or its default when it does not end within 2 s (a pipe some stray process
/// still holds open); the task is aborted and awaited then.
async fn finish<T: Default>(mut task: tokio::task::JoinHandle<T>) -> T {
    match tokio::time::timeout(Duration::from_secs(2), &mut task).await {
        Ok(r) => r.unwrap_or_default(),
        Err(_) => {
            task.abort();
            let _ = task.await;
            T::default()
        }
    }
}

/// The executor's half of the bridged network: one line naming the host index, then bytes both
/// ways with the real host, whose every address passes the network policy first.
async fn connect_loop(listener: UnixListener, hosts: Vec<(String, u16)>, policy: NetPolicy) {
    let hosts = Arc::new(hosts);
    let policy = Arc::new(policy);
    while let Ok((stream, _)) = listener.accept().await {
        let hosts = Arc::clone(&hosts);
        let policy = Arc::clone(&policy);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            let read =
                tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line)).await;
            if !matches!(read, Ok(Ok(n)) if n > 0 && n < 16) {
                return;
            }
            let Some((host, port)) = line
                .trim()
                .parse::<usize>()
                .ok()
                .and_then(|i| hosts.get(i))
                .cloned()
            else {
                return;
            };
            let Ok(addrs) = tokio::net::lookup_host((host.as_str(), port)).await else {
                tracing::warn!(%host, "sandbox bridge: the allowed host does not resolve");
                return;
            };
            // Every address passes the policy; the first that answers is used.
            let mut upstream = None;
            for a in addrs {
                if let Some(class) = policy.refuses(&host, a.ip()) {
                    tracing::warn!(%host, ip = %a.ip(), class = class.describe(), "sandbox bridge: address refused by the network policy");
                    continue;
                }
                let attempt = tokio::time::timeout(
                    Duration::from_secs(10),
                    tokio::net::TcpStream::connect(a),
                )
                .await;
                if let Ok(Ok(s)) = attempt {
                    upstream = Some(s);
                    break;
                }
            }
            let Some(mut upstream) = upstream else { return };
            // Bytes the program sent right after the bridge's header line may already sit in
            // the reader's buffer: they go first.
            let early = reader.buffer().to_vec();
            if !early.is_empty() && upstream.write_all(&early).await.is_err() {
                return;
            }
            let mut stream = reader.into_inner();
            let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
        });
    }
}

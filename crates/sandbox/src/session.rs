//! Sessions: long-lived sandboxed processes with piped stdin and stdout (MCP stdio servers), at
//! the same isolation levels as command tools. A session has no deadline; it lives until it is
//! killed, exits, or its [`SessionHandle`] is dropped. The memory, pids, file and descriptor
//! limits still apply (no CPU-time limit). The call's private directory holds the session's
//! private, writable `HOME` (with `XDG_CACHE_HOME` and `npm_config_cache` inside) and `TMPDIR`,
//! and is removed when the session ends.
//!
//! At `strict` the program's runtime is made readable without being named: the program as given
//! and as resolved, the interpreter of a `#!` script (through `/usr/bin/env` too), a script given
//! as the first argument, and for each of these the `bin`, `lib`, `lib64` and `pyvenv.cfg` of
//! the installation prefix it sits in (`PREFIX/bin/…`), the outermost `node_modules` folder it
//! sits in, and a script's package (the nearest folder with a `package.json`).
//!
//! Killing a session kills the first process of its PID namespace (from `standard` up), which
//! takes every process of the namespace with it; the launcher reaps it and exits, and is reaped
//! here: no process and no zombie is left.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Notify, watch};
use toolgate_core::Isolation;

use crate::access::{Need, blocked};
use crate::error::SandboxError;
use crate::launch_spec::{LAUNCH_ARG, LaunchSpec, SETUP_EXIT, SETUP_FAILED, SPEC_ENV, STARTED};
use crate::runner::{Prepared, Runner, STDERR_TAIL, kill_tree, tail_text};

/// One long-lived program to start.
#[derive(Clone, Debug)]
pub struct SessionJob {
    /// The isolation level to run at.
    pub level: Isolation,
    /// The absolute path of the program.
    pub program: PathBuf,
    /// Its arguments, each passed as is.
    pub args: Vec<String>,
    /// Variables for the program besides the sandbox's own (HOME, TMPDIR, PATH, LANG,
    /// XDG_CACHE_HOME, npm_config_cache); a name given here replaces the sandbox's value.
    pub env: Vec<(String, String)>,
    /// The working directory; `None`: the session's private home. From `strict` up it is not
    /// readable unless it is in `read_paths`.
    pub cwd: Option<PathBuf>,
    /// Paths the program may read besides the system's and its runtime's (from `strict` up).
    pub read_paths: Vec<PathBuf>,
    /// Paths the program may write besides its private home (from `strict` up).
    pub write_paths: Vec<PathBuf>,
    /// `(host, port)` pairs the program may connect to (bridged, from `strict` up).
    pub allowed_hosts: Vec<(String, u16)>,
    /// For messages: "Server files".
    pub label: String,
}

impl SessionJob {
    /// Parses one `allowed_hosts` entry, `host:port` (a DNS name, lower-cased, and a port
    /// 1–65535), as command tools' `run.sandbox.allowed_hosts` are.
    pub fn allowed_host(entry: &str) -> Result<(String, u16), SandboxError> {
        toolgate_core::parse_host_port(entry).ok_or_else(|| {
            SandboxError::Unavailable(format!(
                "allowed_hosts entry {entry:?} is not \"host:port\" (a DNS name and a port from 1 to 65535, e.g. \"api.example.com:443\"); fix the entry"
            ))
        })
    }
}

/// How a session's process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionExit {
    /// The exit code, if it exited (from `standard` up, a program killed by signal N shows as
    /// `128 + N`, the launcher's code).
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// [`SessionHandle::kill`] was called (or the handle dropped).
    pub killed: bool,
    /// The memory limit was hit.
    pub out_of_memory: bool,
    /// The sandbox could not be set up; the program never ran.
    pub setup_error: Option<String>,
}

impl std::fmt::Display for SessionExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(e) = &self.setup_error {
            return write!(f, "the sandbox could not be set up: {e}");
        }
        let signal_name = |sig: i32| {
            Signal::try_from(sig)
                .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned())
        };
        match (self.code, self.signal) {
            (Some(code), _) if code > 128 && code < 128 + 65 => {
                write!(f, "killed by {}", signal_name(code - 128))?;
            }
            (Some(code), _) => write!(f, "exit status {code}")?,
            (None, Some(sig)) => write!(f, "killed by {}", signal_name(sig))?,
            (None, None) => write!(f, "ended without a status")?,
        }
        if self.killed {
            write!(f, " (stopped by toolgate)")?;
        }
        if self.out_of_memory {
            write!(f, " (out of memory)")?;
        }
        Ok(())
    }
}

/// Where the launcher is: setting the sandbox up, running the program, or failed.
#[derive(Clone, Debug)]
enum Start {
    Pending,
    Running,
    Failed(String),
}

/// State shared by the handle, the stderr reader and the reaper.
struct Shared {
    label: String,
    level: Isolation,
    /// The launcher's pid; 0 once it has been reaped.
    pid: AtomicU32,
    killed: AtomicBool,
    kill: Notify,
    tail: Mutex<Vec<u8>>,
}

impl Shared {
    fn tail(&self) -> String {
        self.tail.lock().map(|t| tail_text(&t)).unwrap_or_default()
    }
}

/// Control of a running session: its stderr tail, kill, wait. Dropping it kills the process
/// and everything it started; the private directory and cgroups go once it is reaped.
pub struct SessionHandle {
    shared: Arc<Shared>,
    start: watch::Receiver<Start>,
    exit: watch::Receiver<Option<SessionExit>>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("label", &self.shared.label)
            .field("pid", &self.pid())
            .finish_non_exhaustive()
    }
}

/// A running sandboxed program: write to `stdin`, read from `stdout`; `handle` controls it.
/// Take the parts apart (the fields are public, or [`Session::into_parts`]) to hand the pipes
/// to a protocol client and keep the handle.
#[derive(Debug)]
pub struct Session {
    /// The program's stdin.
    pub stdin: ChildStdin,
    /// The program's stdout.
    pub stdout: ChildStdout,
    /// Control of the process; dropping it kills the process tree.
    pub handle: SessionHandle,
}

impl Session {
    /// The pipes and the handle, apart.
    pub fn into_parts(self) -> (ChildStdin, ChildStdout, SessionHandle) {
        (self.stdin, self.stdout, self.handle)
    }

    /// See [`SessionHandle::started`].
    pub async fn started(&self) -> Result<(), SandboxError> {
        self.handle.started().await
    }

    /// See [`SessionHandle::stderr_tail`].
    pub fn stderr_tail(&self) -> String {
        self.handle.stderr_tail()
    }

    /// See [`SessionHandle::kill`].
    pub fn kill(&self) {
        self.handle.kill();
    }

    /// See [`SessionHandle::wait`].
    pub async fn wait(&self) -> SessionExit {
        self.handle.wait().await
    }
}

impl SessionHandle {
    /// The launcher's host pid while it runs (the process tree's root; from `standard` up its
    /// child is the first process of the session's PID namespace).
    pub fn pid(&self) -> Option<u32> {
        Some(self.shared.pid.load(Ordering::SeqCst)).filter(|p| *p != 0)
    }

    /// The last ~4 KiB the program wrote to stderr (captured continuously).
    pub fn stderr_tail(&self) -> String {
        self.shared.tail()
    }

    /// Resolves once the sandbox is set up and the program executed; `unavailable` when the
    /// host cannot enforce the level (the program never ran).
    pub async fn started(&self) -> Result<(), SandboxError> {
        let mut rx = self.start.clone();
        let state = rx
            .wait_for(|s| !matches!(s, Start::Pending))
            .await
            .map(|s| s.clone())
            .unwrap_or_else(|_| Start::Failed(String::new()));
        match state {
            Start::Running | Start::Pending => Ok(()),
            Start::Failed(text) => Err(setup_error(&self.shared, &text)),
        }
    }

    /// Kills the process and everything it started (returns at once; [`Self::wait`] resolves
    /// once the tree is gone and reaped).
    pub fn kill(&self) {
        self.shared.killed.store(true, Ordering::SeqCst);
        let pid = self.shared.pid.load(Ordering::SeqCst);
        if pid != 0 {
            signal_tree(self.shared.level, pid);
        }
        self.shared.kill.notify_one();
    }

    /// How the process ended, once it has, its tree is gone and its private directory removed.
    pub async fn wait(&self) -> SessionExit {
        let mut rx = self.exit.clone();
        let got = rx.wait_for(Option::is_some).await.map(|e| e.clone());
        match got {
            Ok(Some(exit)) => exit,
            // The reaper is gone (its runtime shut down): the guard killed the tree.
            _ => SessionExit {
                code: None,
                signal: None,
                killed: true,
                out_of_memory: false,
                setup_error: None,
            },
        }
    }

    /// How the process ended, if it has.
    pub fn try_exit(&self) -> Option<SessionExit> {
        self.exit.borrow().clone()
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        if self.exit.borrow().is_none() {
            self.kill();
        }
    }
}

/// SIGKILL to the namespace's first process (the launcher's children), whose death takes the
/// namespace along and lets the launcher reap it and exit; to the launcher's process group at
/// `none`, or when the launcher has no child yet.
fn signal_tree(level: Isolation, pid: u32) {
    let children = if level > Isolation::None {
        children_of(pid)
    } else {
        Vec::new()
    };
    if children.is_empty() {
        kill_tree(Some(pid));
        return;
    }
    for c in children {
        if let Ok(c) = i32::try_from(c) {
            let _ = kill(Pid::from_raw(c), Signal::SIGKILL);
        }
    }
}

/// The children of `pid` (every thread's), from `/proc`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

fn setup_error(shared: &Shared, text: &str) -> SandboxError {
    let text = String::from_utf8_lossy(text.as_bytes());
    match text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(SETUP_FAILED))
    {
        Some(msg) => SandboxError::Unavailable(format!(
            "{}: cannot run at {} isolation on this host: {msg}",
            shared.label, shared.level
        )),
        None => SandboxError::Spawn(format!(
            "{}: the sandbox launcher ended before the program started{}",
            shared.label,
            if text.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", text.trim())
            }
        )),
    }
}

/// Reads stderr: up to [`STARTED`] it is the launcher's (the start is reported), then the
/// program's (kept as a tail).
async fn read_stderr(
    mut stderr: tokio::process::ChildStderr,
    shared: Arc<Shared>,
    start: watch::Sender<Start>,
) {
    let mut before = Vec::new();
    let mut running = false;
    let mut buf = [0u8; 8 * 1024];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        let mut spill = Vec::new();
        if !running {
            before.extend_from_slice(chunk);
            let marker = STARTED.as_bytes();
            let Some(at) = before.windows(marker.len()).position(|w| w == marker) else {
                continue;
            };
            spill = before.split_off(at + marker.len());
            before.clear();
            running = true;
            let _ = start.send(Start::Running);
            chunk = &spill;
        }
        if let Ok(mut tail) = shared.tail.lock() {
            tail.extend_from_slice(chunk);
            if tail.len() > 2 * STDERR_TAIL {
                let cut = tail.len() - STDERR_TAIL;
                tail.drain(..cut);
            }
        }
        drop(spill);
    }
    if !running {
        let text = String::from_utf8_lossy(&before).into_owned();
        if let Ok(mut tail) = shared.tail.lock() {
            tail.extend_from_slice(&before);
        }
        let _ = start.send(Start::Failed(text));
    }
}

/// Waits for the launcher (killing the group if it does not end within a second of a kill),
/// sweeps the cgroups, removes the private directory, then publishes the exit.
async fn reap(
    mut child: Child,
    shared: Arc<Shared>,
    prepared: Prepared,
    mut stderr_task: tokio::task::JoinHandle<()>,
    start: watch::Receiver<Start>,
    exit: watch::Sender<Option<SessionExit>>,
) {
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        () = shared.kill.notified() => {
            match tokio::time::timeout(Duration::from_secs(1), child.wait()).await {
                Ok(status) => status.ok(),
                Err(_) => {
                    kill_tree(child.id());
                    child.wait().await.ok()
                }
            }
        }
    };
    let pid = shared.pid.swap(0, Ordering::SeqCst);
    prepared.guard.pid.store(0, Ordering::SeqCst);
    // Leftovers of the process group (`none`: what the program started), then every cgroup
    // member; the stderr pipe closes once all are gone.
    if shared.level == Isolation::None
        && let Ok(pid) = i32::try_from(pid)
    {
        let _ = nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let prepared = tokio::task::spawn_blocking(move || {
        prepared.guard.cgroups.kill_all();
        prepared
    })
    .await
    .ok();
    if tokio::time::timeout(Duration::from_secs(2), &mut stderr_task)
        .await
        .is_err()
    {
        stderr_task.abort();
        let _ = stderr_task.await;
    }
    let out_of_memory = prepared
        .as_ref()
        .is_some_and(|p| p.guard.cgroups.out_of_memory());
    // Cgroup removal and the directory's removal block briefly.
    let _ = tokio::task::spawn_blocking(move || drop(prepared)).await;
    use std::os::unix::process::ExitStatusExt;
    let code = status.and_then(|s| s.code());
    let signal = status.and_then(|s| s.signal());
    let setup = match &*start.borrow() {
        Start::Failed(text) if code == Some(SETUP_EXIT) => Some(text.clone()),
        _ => None,
    };
    let setup_error = setup.map(|text| setup_error(&shared, &text).to_string());
    let _ = exit.send(Some(SessionExit {
        code,
        signal,
        killed: shared.killed.load(Ordering::SeqCst),
        out_of_memory,
        setup_error,
    }));
}

impl Runner {
    /// Starts `job` in the sandbox with piped stdin and stdout and returns at once (call it
    /// within a Tokio runtime). A host that cannot enforce the level shows in
    /// [`Session::started`] (`unavailable`), in the exit, and in the stderr tail; use
    /// [`Runner::start_session`] to wait for the start.
    pub fn spawn_session(&self, job: SessionJob) -> Result<Session, SandboxError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(SandboxError::Spawn(format!(
                "{}: sessions are started within a Tokio runtime (their pipes and reaper run on it)",
                job.label
            )));
        }
        self.check_session(&job)?;
        let prepared = self.prepare(
            job.level,
            &job.program,
            &job.label,
            &job.allowed_hosts,
            &["tmp", "home"],
        )?;
        let spec = self.session_spec(&job, &prepared);
        let spec_json = serde_json::to_string(&spec)
            .map_err(|e| SandboxError::Spawn(format!("launch spec: {e}")))?;
        let mut child = tokio::process::Command::new(&self.config().launcher)
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
                    "{}: could not start the sandbox launcher {}: {e}",
                    job.label,
                    self.config().launcher.display()
                ))
            })?;
        let pid = child.id().unwrap_or(0);
        prepared.guard.pid.store(pid, Ordering::SeqCst);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SandboxError::Spawn(format!(
                "{}: the launcher's pipes are missing",
                job.label
            )));
        };
        let shared = Arc::new(Shared {
            label: job.label.clone(),
            level: job.level,
            pid: AtomicU32::new(pid),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            tail: Mutex::new(Vec::new()),
        });
        let (start_tx, start_rx) = watch::channel(Start::Pending);
        let (exit_tx, exit_rx) = watch::channel(None);
        let stderr_task = tokio::spawn(read_stderr(stderr, Arc::clone(&shared), start_tx));
        tokio::spawn(reap(
            child,
            Arc::clone(&shared),
            prepared,
            stderr_task,
            start_rx.clone(),
            exit_tx,
        ));
        Ok(Session {
            stdin,
            stdout,
            handle: SessionHandle {
                shared,
                start: start_rx,
                exit: exit_rx,
            },
        })
    }

    /// [`Runner::spawn_session`], then waits until the program runs: a level the host cannot
    /// enforce fails here with `unavailable`.
    pub async fn start_session(&self, job: SessionJob) -> Result<Session, SandboxError> {
        let session = self.spawn_session(job)?;
        session.started().await?;
        Ok(session)
    }

    /// What can be checked before starting: an absolute program the sandbox's user can reach,
    /// declared paths that exist.
    fn check_session(&self, job: &SessionJob) -> Result<(), SandboxError> {
        let label = &job.label;
        if !job.program.is_absolute() {
            return Err(SandboxError::Unavailable(format!(
                "{label}: the program {} is not an absolute path; give its full path (no shell, no PATH lookup)",
                job.program.display()
            )));
        }
        if job.level > Isolation::None {
            let user = self.program_user();
            let mut needed = vec![job.program.clone()];
            if let Some(interp) = interpreter(&job.program) {
                needed.push(interp);
            }
            for p in needed {
                if let Some(why) = blocked(&p, Need::Read, &user) {
                    return Err(SandboxError::Unavailable(format!(
                        "{label}: {why}; install the runtime where that user can read it (under /usr or /opt, say) or point the entry at such a copy"
                    )));
                }
            }
        }
        if job.level >= Isolation::Strict {
            for (key, paths) in [
                ("read_paths", &job.read_paths),
                ("write_paths", &job.write_paths),
            ] {
                for p in paths {
                    if !p.is_absolute() || !p.exists() {
                        return Err(SandboxError::Unavailable(format!(
                            "{label}: sandbox {key} entry {} does not exist (or is not absolute); create it or remove it from the entry",
                            p.display()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn session_spec(&self, job: &SessionJob, prepared: &Prepared) -> LaunchSpec {
        let c = self.config();
        let dir = prepared.dir.path();
        let tmp = dir.join("tmp");
        let home = dir.join("home");
        let mut path_dirs: Vec<String> = Vec::new();
        for p in program_dirs(&job.program) {
            let p = p.display().to_string();
            if !path_dirs.contains(&p) {
                path_dirs.push(p);
            }
        }
        for d in ["/usr/local/bin", "/usr/bin", "/bin"] {
            if !path_dirs.iter().any(|p| p == d) {
                path_dirs.push(d.to_owned());
            }
        }
        let mut env = vec![
            ("HOME".to_owned(), home.display().to_string()),
            ("TMPDIR".to_owned(), tmp.display().to_string()),
            ("PATH".to_owned(), path_dirs.join(":")),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            (
                "XDG_CACHE_HOME".to_owned(),
                home.join(".cache").display().to_string(),
            ),
            (
                "npm_config_cache".to_owned(),
                home.join(".npm").display().to_string(),
            ),
        ];
        for (k, v) in &job.env {
            env.retain(|(name, _)| name != k);
            env.push((k.clone(), v.clone()));
        }
        let (read_paths, write_paths) = match job.level {
            Isolation::Restricted => {
                let mut read = c.library_paths.clone();
                read.push(job.program.clone());
                (read, Vec::new())
            }
            _ => {
                let mut read = c.system_read_paths.clone();
                for p in runtime_paths(&job.program, &job.args) {
                    if !read.contains(&p) {
                        read.push(p);
                    }
                }
                read.extend(job.read_paths.iter().cloned());
                let mut write = job.write_paths.clone();
                write.push(tmp.clone());
                write.push(home.clone());
                write.push(PathBuf::from("/dev/null"));
                (read, write)
            }
        };
        LaunchSpec {
            level: job.level,
            program: job.program.clone(),
            args: job.args.clone(),
            env,
            cwd: job.cwd.clone().unwrap_or(home),
            read_paths,
            write_paths,
            net: prepared.net.clone(),
            limits: self.limits(job.level, 0),
            cgroup_procs: prepared.guard.cgroups.procs_files(),
            outside_uid: self.outside().0,
            outside_gid: self.outside().1,
            session: true,
        }
    }
}

/// The directories of the program as given and as resolved (first on the session's `PATH`, so
/// that `#!/usr/bin/env node` finds the `node` installed beside it).
fn program_dirs(program: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in [
        Some(program.to_path_buf()),
        std::fs::canonicalize(program).ok(),
    ]
    .into_iter()
    .flatten()
    {
        if let Some(d) = p.parent()
            && !out.iter().any(|o: &PathBuf| o == d)
        {
            out.push(d.to_path_buf());
        }
    }
    out
}

/// The interpreter of a `#!` script, resolved through `env` on the session's `PATH`.
fn interpreter(program: &Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let head = head.get(..n)?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        let dirs = program_dirs(program)
            .into_iter()
            .chain(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
        return dirs.map(|d| d.join(name)).find(|p| p.is_file());
    }
    first.is_absolute().then_some(first)
}

/// What a program at `strict` must read to run (see the module documentation); only paths
/// that exist.
fn runtime_paths(program: &Path, args: &[String]) -> Vec<PathBuf> {
    let mut files = vec![program.to_path_buf()];
    if let Some(i) = interpreter(program) {
        files.push(i);
    }
    let script = args
        .first()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_file());
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| {
        if p.exists() && p != Path::new("/") && !out.contains(&p) {
            out.push(p);
        }
    };
    let mut all = Vec::new();
    for f in files.iter().chain(script.iter()) {
        all.push(f.clone());
        if let Ok(real) = std::fs::canonicalize(f)
            && &real != f
        {
            all.push(real);
        }
    }
    for f in &all {
        add(f.clone());
        if let Some(prefix) = f
            .parent()
            .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
            .and_then(Path::parent)
        {
            for sub in ["bin", "lib", "lib64", "pyvenv.cfg"] {
                add(prefix.join(sub));
            }
        }
        if let Some(modules) = f
            .ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .last()
        {
            add(modules.to_path_buf());
        }
    }
    if let Some(script) = script.and_then(|s| std::fs::canonicalize(s).ok())
        && let Some(package) = script
            .ancestors()
            .skip(1)
            .take_while(|a| a.parent().is_some())
            .find(|a| a.join("package.json").is_file())
    {
        add(package.to_path_buf());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn the_interpreter_of_a_script_is_found_directly_or_through_env() {
        let d = tempfile::tempdir().unwrap();
        let sh = script(d.path(), "a", "#!/bin/sh -e\necho\n");
        assert_eq!(interpreter(&sh), Some(PathBuf::from("/bin/sh")));
        // env with flags and assignments: the first plain word is the program, looked up
        // beside the script first, then on the standard PATH.
        std::fs::write(d.path().join("mynode"), "").unwrap();
        let beside = script(d.path(), "b", "#!/usr/bin/env -S A=1 mynode --flag\n");
        assert_eq!(interpreter(&beside), Some(d.path().join("mynode")));
        let on_path = script(d.path(), "c", "#!/usr/bin/env sh\n");
        assert!(interpreter(&on_path).is_some_and(|p| p.ends_with("sh")));
        let missing = script(d.path(), "e", "#!/usr/bin/env no-such-interpreter-here\n");
        assert_eq!(interpreter(&missing), None);
        let relative = script(d.path(), "f", "#!bin/sh\n");
        assert_eq!(interpreter(&relative), None);
        let binary = script(d.path(), "g", "\x7fELF\x02\x01\x01");
        assert_eq!(interpreter(&binary), None);
    }

    #[test]
    fn runtime_paths_cover_the_prefix_and_node_modules_and_never_the_root() {
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path().join("opt/rt");
        for sub in ["bin", "lib", "share"] {
            std::fs::create_dir_all(prefix.join(sub)).unwrap();
        }
        let program = script(&prefix.join("bin"), "rt", "");
        let got = runtime_paths(&program, &[]);
        assert!(got.contains(&prefix.join("bin")), "{got:?}");
        assert!(got.contains(&prefix.join("lib")), "{got:?}");
        // Only what a runtime needs: not its whole prefix, not its other folders.
        assert!(!got.contains(&prefix), "{got:?}");
        assert!(!got.contains(&prefix.join("share")), "{got:?}");
        // A program in /bin: its prefix is / — never readable as a whole.
        let got = runtime_paths(Path::new("/bin/sh"), &[]);
        assert!(!got.iter().any(|p| p == Path::new("/")), "{got:?}");
        // A script argument inside nested node_modules: the outermost folder and its package.
        let app = d.path().join("app");
        let inner = app.join("node_modules/a/node_modules/b/dist");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(app.join("node_modules/a/node_modules/b/package.json"), "{}").unwrap();
        let main = script(&inner, "index.js", "");
        let got = runtime_paths(Path::new("/bin/sh"), &[main.display().to_string()]);
        let real = |p: PathBuf| std::fs::canonicalize(p).unwrap();
        assert!(got.contains(&real(app.join("node_modules"))), "{got:?}");
        assert!(
            got.contains(&real(app.join("node_modules/a/node_modules/b"))),
            "{got:?}"
        );
        assert!(!got.contains(&real(app.clone())), "{got:?}");
    }
}

//! The launcher: the `toolgate` binary re-executed in a hidden mode, single-threaded, locking
//! itself down step by step and finally becoming the program (`execve`).
//!
//! Stage 1 (`__toolgate-sandbox`): new session, joins the call's cgroups, and — from `standard`
//! up — new user and PID namespaces (plus a network namespace, and a mount namespace when hosts
//! are bridged); it then spawns stage 2 and waits for it (a session's stage 1 also kills stage 2
//! once the executor, its parent, is gone). Stage 2 (`__toolgate-sandbox-init`) is
//! the first process of the PID namespace: when it exits, or is killed, the kernel kills every
//! process left in the namespace, so nothing a tool starts can outlive its call. Stage 2 sets up
//! the bridged network, resource limits, `no_new_privs`, Landlock (`strict`, `restricted`),
//! seccomp (`strict`, `restricted`), marks every inherited descriptor close-on-exec and executes
//! the program. Any step that fails ends the launch with [`SETUP_EXIT`] and a message: a level is
//! never silently weakened.

use std::convert::Infallible;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid, getuid, setgroups, setresgid, setresuid, setsid};
use toolgate_core::Isolation;

use crate::launch_spec::{
    INIT_ARG, LaunchSpec, MAP_ARG, NetMode, ResourceLimits, SETUP_EXIT, SETUP_FAILED, SPEC_ENV,
    STARTED,
};
use crate::{bridge, fsrules, seccomp};

fn read_spec() -> Result<LaunchSpec, String> {
    let raw = std::env::var(SPEC_ENV)
        .map_err(|_| format!("the launcher was started without {SPEC_ENV}; it is started by toolgate's sandbox executor, not by hand"))?;
    serde_json::from_str(&raw).map_err(|e| format!("unreadable launch spec: {e}"))
}

fn setup_failed(message: &str) -> i32 {
    eprintln!("{SETUP_FAILED}{message}");
    SETUP_EXIT
}

/// Stage 1. Returns the exit status for `main` (the program's, or 128 + its signal).
pub(crate) fn launch_main() -> i32 {
    match stage1() {
        Ok(code) => code,
        Err(message) => setup_failed(&message),
    }
}

/// Stage 2. Only returns when the sandbox could not be set up.
pub(crate) fn init_main() -> i32 {
    match stage2() {
        Ok(never) => match never {},
        Err(message) => setup_failed(&message),
    }
}

fn stage1() -> Result<i32, String> {
    let spec = read_spec()?;
    let executor = nix::unistd::getppid();
    setsid().map_err(|e| format!("could not start a new session: {e}"))?;
    for procs in &spec.cgroup_procs {
        std::fs::write(procs, std::process::id().to_string())
            .map_err(|e| format!("could not join the cgroup {}: {e}", procs.display()))?;
    }
    if spec.level == Isolation::None {
        return exec_program(&spec).map(|never| match never {});
    }
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID;
    if spec.net != NetMode::Host {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if matches!(spec.net, NetMode::Bridged { .. }) {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    // Mapping user ids of a new user namespace takes privileges in the parent namespace that a
    // process loses by entering the new one (mapping uid 0 needs CAP_SETFCAP there), so a helper
    // started before the unshare writes the maps.
    let exe =
        std::env::current_exe().map_err(|e| format!("could not find the launcher binary: {e}"))?;
    if getuid().is_root() {
        // Host root's supplementary groups (gid 0 among them) must not follow the program.
        setgroups(&[]).map_err(|e| format!("could not drop supplementary groups: {e}"))?;
    }
    let mapper = std::process::Command::new(&exe)
        .arg(MAP_ARG)
        .arg(std::process::id().to_string())
        .arg(spec.outside_uid.to_string())
        .arg(spec.outside_gid.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start the user-id mapper: {e}"))?;
    unshare(flags).map_err(|e| {
        format!(
            "{} isolation needs user, PID and network namespaces, which this host refuses (unshare: {e}); enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces > 0)",
            spec.level
        )
    })?;
    let mapped = mapper
        .wait_with_output()
        .map_err(|e| format!("could not wait for the user-id mapper: {e}"))?;
    if !mapped.status.success() {
        return Err(format!(
            "could not map user ids into the sandbox's user namespace: {}",
            String::from_utf8_lossy(&mapped.stderr).trim()
        ));
    }
    // Become root of the new namespace, which is `outside_uid`/`outside_gid` on the host: from
    // here on the host sees an unprivileged user (when toolgate runs as root), so files outside
    // the allow-lists keep their owner's protection and host cgroups stay out of reach.
    let root_gid = Gid::from_raw(0);
    let root_uid = Uid::from_raw(0);
    setresgid(root_gid, root_gid, root_gid)
        .map_err(|e| format!("could not switch to the sandbox's group: {e}"))?;
    setresuid(root_uid, root_uid, root_uid)
        .map_err(|e| format!("could not switch to the sandbox's user: {e}"))?;
    // Through /proc/self/exe: the sandbox's user may not be able to walk to the binary's path.
    let mut child = std::process::Command::new(SELF_EXE)
        .arg(INIT_ARG)
        .spawn()
        .map_err(|e| format!("could not start the sandbox's first process: {e}"))?;
    let status = if spec.session {
        wait_or_follow_executor(&mut child, executor)?
    } else {
        child
            .wait()
            .map_err(|e| format!("could not wait for the sandbox's first process: {e}"))?
    };
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

/// Waits for stage 2 like `child.wait()`, and kills it once the executor is gone (this process
/// re-parented): a session outlives no executor, having no deadline that would end it otherwise.
/// No thread can watch (a process that unshared its PID namespace cannot start threads), so
/// SIGCHLD arrives through a signalfd, polled with a timeout to look at the parent. SIGCHLD is
/// blocked only now, after stage 2 started with the ordinary mask.
fn wait_or_follow_executor(
    child: &mut std::process::Child,
    executor: nix::unistd::Pid,
) -> Result<std::process::ExitStatus, String> {
    use nix::poll::{PollFd, PollFlags, poll};
    use nix::sys::signal::SigSet;
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use std::os::fd::AsFd;
    let fail =
        |e: &dyn std::fmt::Display| format!("could not wait for the sandbox's first process: {e}");
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block().map_err(|e| fail(&e))?;
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| fail(&e))?;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| fail(&e))? {
            return Ok(status);
        }
        if nix::unistd::getppid() != executor {
            let _ = child.kill();
        }
        let mut fds = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, 200u16);
        while let Ok(Some(_)) = sfd.read_signal() {}
    }
}

fn stage2() -> Result<Infallible, String> {
    let spec = read_spec()?;
    // When stage 1 dies (killed with its process group on timeout), this process, and with it the
    // whole PID namespace, dies too.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| format!("could not set the parent-death signal: {e}"))?;
    if let NetMode::Bridged { hosts_file, .. } = &spec.net {
        bridge::setup(hosts_file)?;
    }
    exec_program(&spec)
}

/// The running binary, reachable whatever the directories above it allow.
pub(crate) const SELF_EXE: &str = "/proc/self/exe";

fn cstring(bytes: &[u8], what: &str) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| format!("{what} contains a NUL byte"))
}

fn exec_program(spec: &LaunchSpec) -> Result<Infallible, String> {
    // Everything that allocates happens before the limits apply.
    let program = cstring(spec.program.as_os_str().as_bytes(), "the program path")?;
    let mut argv = vec![program.clone()];
    // A worker is this very binary: executed through /proc/self/exe (see SELF_EXE).
    let is_self = std::env::current_exe().is_ok_and(|exe| exe == spec.program);
    let program = if is_self {
        cstring(SELF_EXE.as_bytes(), "the program path")?
    } else {
        program
    };
    for a in &spec.args {
        argv.push(cstring(a.as_bytes(), "an argument")?);
    }
    let env = spec
        .env
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}").as_bytes(), "an environment variable"))
        .collect::<Result<Vec<_>, _>>()?;
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| format!("could not enter {}: {e}", spec.cwd.display()))?;
    set_limits(&spec.limits)?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("could not set no_new_privs: {e}"))?;
    if spec.level >= Isolation::Strict {
        fsrules::restrict(spec)?;
        seccomp::apply(spec.level)?;
    }
    crate::fds::close_inherited_on_exec()?;
    if spec.session {
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(STARTED.as_bytes());
    }
    let err = nix::unistd::execve(&program, &argv, &env).err();
    Err(format!(
        "could not execute {}: {}",
        display(&spec.program),
        err.map_or_else(|| "unknown error".to_owned(), |e| e.desc().to_owned())
    ))
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

fn set_limits(l: &ResourceLimits) -> Result<(), String> {
    let set = |r: Resource, v: u64, name: &str| -> Result<(), String> {
        if v == 0 {
            return Ok(());
        }
        setrlimit(r, v, v).map_err(|e| format!("could not limit {name} to {v}: {e}"))
    };
    setrlimit(Resource::RLIMIT_CORE, 0, 0)
        .map_err(|e| format!("could not disable core dumps: {e}"))?;
    set(Resource::RLIMIT_CPU, l.cpu_seconds, "CPU time")?;
    set(
        Resource::RLIMIT_AS,
        l.address_space_bytes,
        "the address space",
    )?;
    set(Resource::RLIMIT_DATA, l.data_bytes, "the data segment")?;
    set(Resource::RLIMIT_NOFILE, l.open_files, "open files")?;
    set(Resource::RLIMIT_FSIZE, l.file_size_bytes, "the file size")?;
    set(Resource::RLIMIT_NPROC, l.processes, "processes")?;
    Ok(())
}

/// The user-id mapper: waits until process `argv[2]` has entered a new user namespace, then maps
/// uid and gid 0 inside it to `argv[3]` and `argv[4]` outside.
pub(crate) fn map_main() -> i32 {
    match map_ids() {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("{message}");
            1
        }
    }
}

fn map_ids() -> Result<(), String> {
    let pid: u32 = std::env::args()
        .nth(2)
        .and_then(|p| p.parse().ok())
        .ok_or("the mapper needs a process id")?;
    let own =
        std::fs::read_link("/proc/self/ns/user").map_err(|e| format!("/proc/self/ns/user: {e}"))?;
    let theirs = format!("/proc/{pid}/ns/user");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let now = std::fs::read_link(&theirs).map_err(|e| format!("{theirs}: {e}"))?;
        if now != own {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err("the launcher did not enter its user namespace within 5 s".to_owned());
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let id = |n: usize| -> Result<u32, String> {
        std::env::args()
            .nth(n)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "the mapper needs the outside uid and gid".to_owned())
    };
    let (uid, gid) = (id(3)?, id(4)?);
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|e| format!("/proc/{pid}/{file}: {e}"))
    };
    write("setgroups", "deny".to_owned())?;
    write("uid_map", format!("0 {uid} 1"))?;
    write("gid_map", format!("0 {gid} 1"))
}

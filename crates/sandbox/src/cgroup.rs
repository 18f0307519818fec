//! Per-call cgroups (memory and pids limits, and a sweep that kills every member), on cgroup v1
//! (`/sys/fs/cgroup/{memory,pids}`) or v2 (`/sys/fs/cgroup`), when the host lets this process
//! create them. Without them the resource limits and the PID namespace still apply.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const ROOT: &str = "/sys/fs/cgroup";

/// The cgroups of one call (possibly none).
#[derive(Debug, Default)]
pub(crate) struct Cgroups {
    dirs: Vec<PathBuf>,
    memory_events: Option<PathBuf>,
}

fn write(p: &Path, v: &str) -> bool {
    std::fs::write(p, v).is_ok()
}

impl Cgroups {
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// Creates the call's cgroups; any that cannot be created are left out.
    pub(crate) fn create(memory: u64, pids: u64) -> Self {
        let id = format!("call-{}", uuid_like());
        let mut me = Self::default();
        let root = Path::new(ROOT);
        if root.join("cgroup.controllers").exists() {
            let dir = root.join("toolgate").join(&id);
            if std::fs::create_dir_all(&dir).is_ok() {
                let _ = write(&root.join("cgroup.subtree_control"), "+memory +pids");
                let _ = write(
                    &root.join("toolgate/cgroup.subtree_control"),
                    "+memory +pids",
                );
                let ok = write(&dir.join("memory.max"), &memory.to_string())
                    && write(&dir.join("pids.max"), &pids.to_string());
                let _ = write(&dir.join("memory.swap.max"), "0");
                if ok {
                    me.memory_events = Some(dir.join("memory.events"));
                    me.dirs.push(dir);
                } else {
                    let _ = std::fs::remove_dir(&dir);
                }
            }
            return me;
        }
        let mem = root.join("memory/toolgate").join(&id);
        if std::fs::create_dir_all(&mem).is_ok() {
            let ok = write(&mem.join("memory.limit_in_bytes"), &memory.to_string());
            let _ = write(
                &mem.join("memory.memsw.limit_in_bytes"),
                &memory.to_string(),
            );
            if ok {
                me.memory_events = Some(mem.join("memory.failcnt"));
                me.dirs.push(mem);
            } else {
                let _ = std::fs::remove_dir(&mem);
            }
        }
        let pid_dir = root.join("pids/toolgate").join(&id);
        if std::fs::create_dir_all(&pid_dir).is_ok() {
            if write(&pid_dir.join("pids.max"), &pids.to_string()) {
                me.dirs.push(pid_dir);
            } else {
                let _ = std::fs::remove_dir(&pid_dir);
            }
        }
        me
    }

    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// SIGKILLs every member until none is left (bounded).
    pub(crate) fn kill_all(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        for procs in self.procs_files() {
            loop {
                let pids: Vec<i32> = std::fs::read_to_string(&procs)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                if pids.is_empty() || Instant::now() > deadline {
                    break;
                }
                for p in pids {
                    let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Whether the memory limit was hit.
    pub(crate) fn out_of_memory(&self) -> bool {
        let Some(p) = &self.memory_events else {
            return false;
        };
        let text = std::fs::read_to_string(p).unwrap_or_default();
        if p.ends_with("memory.failcnt") {
            return text.trim().parse::<u64>().unwrap_or(0) > 0;
        }
        text.lines().any(|l| {
            l.strip_prefix("oom_kill ")
                .or_else(|| l.strip_prefix("max "))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap_or(0)
                > 0
        })
    }

    /// Removes the cgroups (after [`Self::kill_all`]).
    pub(crate) fn destroy(&self) {
        self.kill_all();
        for d in &self.dirs {
            let deadline = Instant::now() + Duration::from_secs(1);
            while std::fs::remove_dir(d).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

//! Sessions: long-lived sandboxed programs with piped stdin and stdout (MCP stdio servers) at
//! every level — echo round trips, real Node and Python programs at `strict` with their runtime
//! readable and nothing else, a private home, the stderr tail, and no process left behind after
//! a kill or a drop.
#![cfg(test)]

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};
use toolgate_core::Isolation;
use toolgate_sandbox::{Runner, SandboxError, Session, SessionHandle, SessionJob};

fn runner() -> Runner {
    Runner::new(common::config())
}

fn job(level: Isolation, program: &str, args: &[&str]) -> SessionJob {
    SessionJob {
        level,
        program: program.into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: Vec::new(),
        cwd: None,
        read_paths: Vec::new(),
        write_paths: Vec::new(),
        allowed_hosts: Vec::new(),
        label: "Server test".into(),
    }
}

/// The first `name` on this process's PATH, resolved.
fn on_path(name: &str) -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(p).unwrap())
        .unwrap_or_else(|| panic!("{name} is not installed (on PATH)"))
}

/// A scratch directory every user may enter and read (the sandbox's user is `nobody` when the
/// tests run as root).
fn open_scratch() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

struct Io {
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    handle: SessionHandle,
}

impl Io {
    fn new(session: Session) -> Self {
        let (stdin, stdout, handle) = session.into_parts();
        Self {
            stdin,
            lines: BufReader::new(stdout).lines(),
            handle,
        }
    }

    async fn ask(&mut self, line: &str) -> String {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line()).await;
        match got {
            Ok(Ok(Some(l))) => l,
            other => panic!(
                "no answer to {line:?}: {other:?}; stderr: {}",
                self.handle.stderr_tail()
            ),
        }
    }

    async fn ask_json(&mut self, value: Value) -> Value {
        let answer = self.ask(&value.to_string()).await;
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{answer:?}: {e}"))
    }
}

/// Every descendant of `pid`, from /proc.
fn descendants(pid: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let text = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in text.split_whitespace().filter_map(|c| c.parse().ok()) {
                if out.insert(c) {
                    todo.push(c);
                }
            }
        }
    }
    out
}

fn alive(pids: &BTreeSet<u32>) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|p| Path::new(&format!("/proc/{p}")).exists())
        .collect()
}

#[tokio::test]
async fn echo_round_trips_at_every_level() {
    let r = runner();
    for level in [
        Isolation::None,
        Isolation::Standard,
        Isolation::Strict,
        Isolation::Restricted,
    ] {
        let session = r
            .start_session(job(level, "/bin/cat", &[]))
            .await
            .unwrap_or_else(|e| panic!("{level}: {e}"));
        let mut io = Io::new(session);
        for i in 0..3 {
            let line = format!("line {i} at {level}");
            assert_eq!(io.ask(&line).await, line, "{level}");
        }
        assert!(io.handle.try_exit().is_none(), "{level}");
        // Closing stdin ends cat; the session ends with it.
        let Io { stdin, handle, .. } = io;
        drop(stdin);
        let exit = tokio::time::timeout(Duration::from_secs(10), handle.wait())
            .await
            .unwrap();
        assert_eq!(exit.code, Some(0), "{level}: {exit:?}");
        assert!(!exit.killed);
        assert_eq!(exit.to_string(), "exit status 0");
    }
}

const NODE_SERVER: &str = r#"
const fs = require('fs');
const path = require('path');
const rl = require('readline').createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const msg = JSON.parse(line);
  const out = { id: msg.id, echo: msg.text, home: process.env.HOME };
  const cache = path.join(process.env.XDG_CACHE_HOME, 'probe');
  fs.mkdirSync(path.dirname(cache), { recursive: true });
  fs.writeFileSync(cache, 'cached');
  out.cached = fs.readFileSync(cache, 'utf8');
  if (msg.read) {
    try { out.text = fs.readFileSync(msg.read, 'utf8'); } catch (e) { out.error = e.code; }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
});
"#;

#[tokio::test]
async fn a_real_node_program_answers_json_at_strict_with_a_private_home() {
    let node = on_path("node");
    let scratch = open_scratch();
    let inside = scratch.path().join("inside");
    std::fs::create_dir(&inside).unwrap();
    std::fs::write(inside.join("data.txt"), "inside").unwrap();
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        inside.join("data.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let outside = scratch.path().join("outside.txt");
    std::fs::write(&outside, "outside").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut j = job(
        Isolation::Strict,
        node.to_str().unwrap(),
        &["-e", NODE_SERVER],
    );
    j.read_paths = vec![inside.clone()];
    let session = runner().start_session(j).await.unwrap();
    let mut io = Io::new(session);
    let a = io.ask_json(json!({"id": 1, "text": "hello"})).await;
    assert_eq!(a["id"], 1, "{a}");
    assert_eq!(a["echo"], "hello");
    assert_eq!(a["cached"], "cached", "the private cache is writable: {a}");
    let home = a["home"].as_str().unwrap().to_owned();
    assert!(home.contains("toolgate-call-"), "{home}");
    let a = io
        .ask_json(json!({"id": 2, "text": "in", "read": inside.join("data.txt")}))
        .await;
    assert_eq!(a["text"], "inside", "{a}");
    // The host can read it, the sandbox cannot: Landlock refuses.
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside");
    let a = io
        .ask_json(json!({"id": 3, "text": "out", "read": outside}))
        .await;
    assert_eq!(a["error"], "EACCES", "{a}");
    assert!(a.get("text").is_none(), "{a}");
    let a = io
        .ask_json(json!({"id": 4, "text": "etc", "read": "/root/.bashrc"}))
        .await;
    assert!(a.get("text").is_none(), "{a}");
    // The private home goes with the session.
    io.handle.kill();
    let exit = io.handle.wait().await;
    assert!(exit.killed, "{exit:?}");
    assert!(!Path::new(&home).exists(), "{home} left behind");
}

/// An npm-style install outside /usr: `node_modules/.bin/server` links to a package whose
/// script starts `#!/usr/bin/env node` and requires a dependency. None of it is declared: the
/// runtime paths are derived from the program.
#[tokio::test]
async fn a_node_package_runs_at_strict_from_its_node_modules_without_declaring_it() {
    let scratch = open_scratch();
    let app = scratch.path().join("app");
    let modules = app.join("node_modules");
    let server = modules.join("server");
    let dep = modules.join("dep");
    let bin = modules.join(".bin");
    for d in [&app, &modules, &server, &dep, &bin] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(dep.join("index.js"), "exports.greet = (n) => 'hi ' + n;").unwrap();
    std::fs::write(
        server.join("index.js"),
        "#!/usr/bin/env node\nconst { greet } = require('dep');\nrequire('readline').createInterface({ input: process.stdin }).on('line', (l) => console.log(JSON.stringify({ answer: greet(l) })));\n",
    )
    .unwrap();
    for f in [dep.join("index.js"), server.join("index.js")] {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::symlink("../server/index.js", bin.join("server")).unwrap();
    let program = bin.join("server");
    let session = runner()
        .start_session(job(Isolation::Strict, program.to_str().unwrap(), &[]))
        .await
        .unwrap();
    let mut io = Io::new(session);
    let a: Value = serde_json::from_str(&io.ask("there").await).unwrap();
    assert_eq!(a, json!({"answer": "hi there"}));
}

const PY_SERVER: &str = r#"
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    out = {"id": msg["id"], "prefix": sys.prefix, "home": os.environ["HOME"]}
    if "read" in msg:
        try:
            with open(msg["read"]) as f:
                out["text"] = f.read()
        except OSError as e:
            out["error"] = type(e).__name__
    if "import" in msg:
        out["imported"] = __import__(msg["import"]).VALUE
    print(json.dumps(out), flush=True)
"#;

/// A virtual environment outside /usr (its `pyvenv.cfg`, its site-packages with a module)
/// whose `python` links to the system interpreter: the prefix is derived, not declared.
#[tokio::test]
async fn a_real_python_program_runs_at_strict_in_a_virtual_environment() {
    let system = PathBuf::from("/usr/bin/python3");
    let python = if system.is_file() {
        system
    } else {
        on_path("python3")
    };
    let version = std::process::Command::new(&python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    let version = String::from_utf8(version.stdout).unwrap().trim().to_owned();
    let scratch = open_scratch();
    let venv = scratch.path().join("venv");
    let site = venv.join(format!("lib/python{version}/site-packages"));
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::create_dir_all(&site).unwrap();
    std::os::unix::fs::symlink(&python, venv.join("bin/python")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!(
            "home = {}\ninclude-system-site-packages = false\nversion = {version}\n",
            python.parent().unwrap().display()
        ),
    )
    .unwrap();
    std::fs::write(site.join("venvmod.py"), "VALUE = 'from the venv'\n").unwrap();
    for entry in walk(scratch.path()) {
        let mode = if entry.is_dir() { 0o755 } else { 0o644 };
        if !entry.is_symlink() {
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    let outside = scratch.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();

    let program = venv.join("bin/python");
    let session = runner()
        .start_session(job(
            Isolation::Strict,
            program.to_str().unwrap(),
            &["-c", PY_SERVER],
        ))
        .await
        .unwrap();
    let mut io = Io::new(session);
    let a = io
        .ask_json(json!({"id": 1, "import": "venvmod", "read": outside}))
        .await;
    assert_eq!(a["prefix"], venv.to_str().unwrap(), "{a}");
    assert_eq!(a["imported"], "from the venv", "{a}");
    assert_eq!(a["error"], "PermissionError", "{a}");
    assert!(a.get("text").is_none(), "{a}");
    // The same program at standard reads it: the probe is real.
    let session = runner()
        .start_session(job(
            Isolation::Standard,
            program.to_str().unwrap(),
            &["-c", PY_SERVER],
        ))
        .await
        .unwrap();
    let mut io = Io::new(session);
    let a = io.ask_json(json!({"id": 2, "read": outside})).await;
    assert_eq!(a["text"], "secret", "{a}");
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        if p.is_dir() && !p.is_symlink() {
            for e in std::fs::read_dir(&p).unwrap().flatten() {
                out.push(e.path());
            }
        }
        i += 1;
    }
    out
}

/// `sh` starting two background sleepers, then echoing stdin: a tree of four processes.
fn tree_job(level: Isolation) -> SessionJob {
    job(
        level,
        "/bin/sh",
        &[
            "-c",
            "/bin/sleep 300 & /bin/sleep 301 & echo started >&2; exec /bin/cat",
        ],
    )
}

async fn settle(pids: &BTreeSet<u32>) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !alive(pids).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    alive(pids)
}

fn open_fds() -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            format!(
                "{} -> {}",
                e.file_name().to_string_lossy(),
                target.display()
            )
        })
        .collect();
    fds.sort();
    fds
}

#[tokio::test]
async fn killing_a_session_leaves_no_process_no_cgroup_and_no_descriptor() {
    let r = runner();
    // Warm up the runtime's own descriptors (signal pipe, blocking pool).
    let warm = r
        .start_session(tree_job(Isolation::Standard))
        .await
        .unwrap();
    warm.kill();
    warm.wait().await;
    drop(warm);
    let fds_before = open_fds();
    for level in [Isolation::Standard, Isolation::Strict] {
        let session = r.start_session(tree_job(level)).await.unwrap();
        let mut io = Io::new(session);
        assert_eq!(io.ask("ping").await, "ping");
        let pid = io.handle.pid().unwrap();
        let mut tree = descendants(pid);
        tree.insert(pid);
        // launcher, namespace init (cat), two sleepers at least.
        assert!(tree.len() >= 4, "{level}: {tree:?}");
        io.handle.kill();
        let exit = tokio::time::timeout(Duration::from_secs(10), io.handle.wait())
            .await
            .unwrap();
        assert!(exit.killed, "{exit:?}");
        assert_eq!(exit.to_string(), "killed by SIGKILL (stopped by toolgate)");
        // Gone when wait() returns: no process, no zombie.
        assert_eq!(alive(&tree), Vec::<u32>::new(), "{level}: left behind");
        drop(io);
    }
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
    let mine = format!("call-{}-", std::process::id());
    for root in [
        "/sys/fs/cgroup/pids/toolgate",
        "/sys/fs/cgroup/memory/toolgate",
        "/sys/fs/cgroup/toolgate",
    ] {
        let left: Vec<_> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
            .collect();
        assert!(left.is_empty(), "cgroups left in {root}: {left:?}");
    }
}

#[tokio::test]
async fn dropping_a_session_kills_it() {
    let r = runner();
    for level in [Isolation::None, Isolation::Standard, Isolation::Strict] {
        let session = r.start_session(tree_job(level)).await.unwrap();
        let pid = session.handle.pid().unwrap();
        // The sleepers are started by the time sh wrote to stderr.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !session.stderr_tail().contains("started") && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut tree = descendants(pid);
        tree.insert(pid);
        assert!(tree.len() >= 3, "{level}: {tree:?}");
        let t = Instant::now();
        drop(session);
        assert_eq!(
            settle(&tree).await,
            Vec::<u32>::new(),
            "{level}: left behind"
        );
        if level > Isolation::None {
            // Killing the namespace's first process lets the launcher reap the tree: prompt.
            assert!(
                t.elapsed() < Duration::from_millis(900),
                "{level}: {:?}",
                t.elapsed()
            );
        }
    }
}

async fn tail_ending(handle: &SessionHandle, end: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tail = handle.stderr_tail();
        if tail.ends_with(end) || Instant::now() > deadline {
            return tail;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn the_stderr_tail_is_captured_continuously_and_holds_only_the_program_s_output() {
    let script = "import sys\nfor line in sys.stdin:\n    sys.stderr.write('x' * 1000 + '\\n' if line.startswith('bulk') else 'said ' + line)\n    sys.stderr.flush()\n    print('ok', flush=True)\n";
    let session = runner()
        .start_session(job(Isolation::Strict, "/usr/bin/python3", &["-c", script]))
        .await
        .unwrap();
    let mut io = Io::new(session);
    assert_eq!(io.ask("hello").await, "ok");
    // stdout and stderr are separate pipes: the tail catches up within moments.
    assert_eq!(tail_ending(&io.handle, "said hello").await, "said hello");
    for _ in 0..10 {
        assert_eq!(io.ask("bulk").await, "ok");
    }
    assert_eq!(io.ask("last words").await, "ok");
    let tail = tail_ending(&io.handle, "said last words").await;
    assert!(tail.ends_with("said last words"), "{tail}");
    assert!(tail.len() <= 4096 && tail.len() > 3000, "{}", tail.len());
    assert!(!tail.contains("toolgate-sandbox"), "{tail}");
}

#[tokio::test]
async fn a_program_that_dies_reports_its_exit_and_stderr() {
    let session = runner()
        .start_session(job(
            Isolation::Strict,
            "/bin/sh",
            &["-c", "echo 'bad config' >&2; exit 3"],
        ))
        .await
        .unwrap();
    let exit = session.wait().await;
    assert_eq!(exit.code, Some(3), "{exit:?}");
    assert_eq!(exit.to_string(), "exit status 3");
    assert!(!exit.killed);
    assert_eq!(session.stderr_tail(), "bad config");
}

/// The launcher inherits a seccomp filter that refuses `unshare` (as inside another sandbox):
/// the session fails with `unavailable` naming what is missing, and the program never runs.
#[tokio::test]
async fn a_level_the_host_cannot_enforce_is_unavailable() {
    use std::collections::BTreeMap;

    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let filter = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_unshare, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::try_from(std::env::consts::ARCH).unwrap(),
    )
    .unwrap();
    let program: BpfProgram = filter.try_into().unwrap();
    // This thread only (the runtime is current-thread): the launcher started from it inherits.
    seccompiler::apply_filter(&program).unwrap();
    let scratch = open_scratch();
    let canary = scratch.path().join("ran");
    let err = runner()
        .start_session(job(
            Isolation::Standard,
            "/usr/bin/touch",
            &[canary.to_str().unwrap()],
        ))
        .await
        .unwrap_err();
    let SandboxError::Unavailable(message) = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.starts_with("Server test: cannot run at standard isolation on this host")
            && message.contains("needs user, PID and network namespaces"),
        "{message}"
    );
    assert!(!canary.exists());
    // `none` needs no namespace: it still runs.
    let s = runner()
        .start_session(job(
            Isolation::None,
            "/usr/bin/touch",
            &[canary.to_str().unwrap()],
        ))
        .await
        .unwrap();
    assert_eq!(s.wait().await.code, Some(0));
    assert!(canary.exists());
}

#[tokio::test]
async fn a_program_the_sandbox_user_cannot_reach_is_refused_before_starting() {
    let r = runner();
    let err = r
        .spawn_session(job(Isolation::Strict, "cat", &[]))
        .unwrap_err();
    assert!(err.to_string().contains("not an absolute path"), "{err}");
    let err = r
        .spawn_session(job(Isolation::Strict, "/no/such/program", &[]))
        .unwrap_err();
    assert!(err.to_string().contains("program not found"), "{err}");
    assert_eq!(
        SessionJob::allowed_host("API.example.com:443").unwrap(),
        ("api.example.com".to_owned(), 443)
    );
    for bad in ["example.com", "example.com:0", "http://x:1", "1.2.3.4:x"] {
        let err = SessionJob::allowed_host(bad).unwrap_err();
        assert!(
            err.to_string().contains("is not \"host:port\""),
            "{bad}: {err}"
        );
    }
    let mut j = job(Isolation::Strict, "/bin/cat", &[]);
    j.read_paths = vec!["/no/such/dir".into()];
    let err = r.spawn_session(j).unwrap_err();
    assert!(
        err.to_string()
            .contains("read_paths entry /no/such/dir does not exist"),
        "{err}"
    );
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    // A runtime under a private (0700) directory, like pyenv's under /root.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let copy = private.path().join("cat");
    std::fs::copy("/bin/cat", &copy).unwrap();
    let err = r
        .spawn_session(job(Isolation::Strict, copy.to_str().unwrap(), &[]))
        .unwrap_err();
    let SandboxError::Unavailable(message) = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains(&format!(
            "the directory {} has mode 0700",
            private.path().display()
        )),
        "{message}"
    );
    // At `none` it runs as toolgate's user, which may.
    let s = r
        .start_session(job(Isolation::None, copy.to_str().unwrap(), &[]))
        .await
        .unwrap();
    s.kill();
    assert!(s.wait().await.killed);
}

/// A TCP server on 127.0.0.1 that answers `pong` to every connection.
fn pong_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"pong");
        }
    });
    port
}

const PY_CLIENT: &str = "import socket, sys\nfor line in sys.stdin:\n    host, port = line.split()\n    try:\n        s = socket.create_connection((host, int(port)), timeout=2)\n        s.sendall(b'ping')\n        print(s.recv(16).decode() or 'closed', flush=True)\n    except Exception as e:\n        print('refused', type(e).__name__, flush=True)\n";

#[tokio::test]
async fn a_strict_session_reaches_its_allowed_hosts_through_the_bridge_and_nothing_else() {
    let allowed = pong_server();
    let other = pong_server();
    let mut j = job(Isolation::Strict, "/usr/bin/python3", &["-c", PY_CLIENT]);
    j.allowed_hosts = vec![SessionJob::allowed_host(&format!("localhost:{allowed}")).unwrap()];
    let mut io = Io::new(runner().start_session(j).await.unwrap());
    assert_eq!(io.ask(&format!("localhost {allowed}")).await, "pong");
    assert!(
        io.ask(&format!("localhost {other}"))
            .await
            .starts_with("refused")
    );
    assert!(
        io.ask(&format!("127.0.0.1 {allowed}"))
            .await
            .starts_with("refused")
    );
    // A second connection over the same session's bridge works too.
    assert_eq!(io.ask(&format!("localhost {allowed}")).await, "pong");
    // At standard the host's network is there: the probe is real.
    let j = job(Isolation::Standard, "/usr/bin/python3", &["-c", PY_CLIENT]);
    let mut io = Io::new(runner().start_session(j).await.unwrap());
    assert_eq!(io.ask(&format!("127.0.0.1 {other}")).await, "pong");
}

#[tokio::test]
async fn the_memory_and_process_limits_apply_to_a_session() {
    let mut config = common::config();
    config.memory_bytes = 128 << 20;
    config.processes = 16;
    let r = Runner::new(config);
    let script = "import os, sys, time\nfor line in sys.stdin:\n    if line.startswith('mem'):\n        try:\n            b = bytearray(512 << 20)\n            print('allocated', len(b), flush=True)\n        except MemoryError:\n            print('MemoryError', flush=True)\n    else:\n        n = 0\n        for i in range(40):\n            try:\n                if os.fork() == 0:\n                    time.sleep(5)\n                    os._exit(0)\n                n += 1\n            except OSError:\n                break\n        print('forked', n, flush=True)\n";
    for level in [Isolation::Standard, Isolation::Strict] {
        let session = r
            .start_session(job(level, "/usr/bin/python3", &["-c", script]))
            .await
            .unwrap();
        let mut io = Io::new(session);
        assert_eq!(io.ask("mem").await, "MemoryError", "{level}");
        let forked = io.ask("fork").await;
        let n: u32 = forked.strip_prefix("forked ").unwrap().parse().unwrap();
        assert!(n < 16, "{level}: {forked}");
    }
    // Started directly, the same probe succeeds: the limits are what stopped it.
    use std::io::Write;
    let mut direct = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    direct.stdin.take().unwrap().write_all(b"mem\n").unwrap();
    let out = direct.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "allocated 536870912\n"
    );
}

#[test]
fn the_parts_can_move_to_other_tasks() {
    fn send_sync<T: Send + Sync + 'static>() {}
    fn reader<T: tokio::io::AsyncRead + Send + Unpin + 'static>() {}
    fn writer<T: tokio::io::AsyncWrite + Send + Unpin + 'static>() {}
    send_sync::<Session>();
    send_sync::<SessionHandle>();
    reader::<ChildStdout>();
    writer::<ChildStdin>();
    // Outside a runtime a session cannot start (its reaper runs on one): an error, no panic.
    let err = runner()
        .spawn_session(job(Isolation::None, "/bin/cat", &[]))
        .unwrap_err();
    assert!(err.to_string().contains("within a Tokio runtime"), "{err}");
}

/// An executor killed outright (no drop, no cleanup) takes its sessions along: stage 1 of each
/// notices that its parent is gone and kills the namespace.
#[tokio::test]
async fn a_session_does_not_outlive_its_executor() {
    use std::io::BufRead;
    for level in ["standard", "strict"] {
        let mut holder = std::process::Command::new(common::FIXTURE)
            .args(["hold-session", level])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid: u32 = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        let mut tree = descendants(pid);
        tree.insert(pid);
        assert!(tree.len() >= 2, "{level}: {tree:?}");
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert_eq!(
            settle(&tree).await,
            Vec::<u32>::new(),
            "{level}: outlived its executor"
        );
    }
}

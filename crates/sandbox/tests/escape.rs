//! The escape battery (issue 7): escape attempts run as command tools through the real pipeline
//! and sandbox executor, in four classes — filesystem, network, privilege, resources.
//!
//! Every attempt first runs without the sandbox and must show its side effect there (the probe is
//! real): at level `none` (toolgate's own user, the host's filesystem and network), or started
//! directly by the test when even `none` would stop it (its resource limits, `no_new_privs`, the
//! closing of inherited descriptors). Then it runs at the levels it targets,
//! where the side effect must not happen. Side effects are judged from outside — a canary file, a
//! secret showing up in the result, a hit on a listener the test runs, a process that is still
//! alive, the host's hostname — never by an exit code. Besides its own side effect, no target run
//! may leave a process of the probe behind or return well after its deadline.
//!
//! Each class prints `N attempts, 0 succeeded`; an attempt that succeeds under the sandbox fails
//! the test, naming the attempt (see the output with `cargo nextest run --no-capture`).
#![cfg(test)]

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, sleep};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Harness, command_tool};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

const PY: &str = "/usr/bin/python3";

/// The start of every Python probe: `MARK` (argv[1]) is the attempt's marker, which every
/// process of the probe carries in its command line; `A` (argv[2]) the attempt's parameters.
/// Command arguments cannot contain braces (they would read as a parameter), hence no dict
/// literals or f-strings in the probes.
const PRELUDE: &str = r"import os, sys, json, ctypes, socket, struct, time, stat
MARK = sys.argv[1]
A = json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def touch(p, text='x'):
    with open(p, 'w') as f:
        f.write(text)
def put(p, text):
    fd = os.open(p, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
def won(what):
    msg = ('TG' + 'WON ' + what + '\n').encode()
    os.write(1, msg)
    os.write(2, msg)
    try:
        touch(os.path.join(A['rw'], 'canary'), 'won')
    except OSError:
        pass
def tcp(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect((host, port))
    s.sendall(b'ping')
    print('answer', s.recv(16))
def fork_bomb(count):
    d = os.path.join(A['rw'], 'forks')
    os.makedirs(d, exist_ok=True)
    n = 0
    for i in range(count):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                touch(os.path.join(d, str(os.getpid())))
                time.sleep(3)
            finally:
                os._exit(0)
        n += 1
    print('forked', n)
    sys.stdout.flush()
    time.sleep(0.5)
";

/// The token `won()` prints when the forbidden operation worked.
const WON: &str = "TGWON";

/// Read by the privilege class from the test process's own memory.
static MEMORY_SECRET: &str = "TGX-MEMORY-SECRET-4f1c9a7e0d";

/// i386 `unshare(CLONE_NEWUSER)` through the 32-bit system-call gate (`int $0x80`), which a
/// seccomp filter written for x86-64 numbers must not let through.
const INT80_SOURCE: &str = r#"#include <stdio.h>
int main(void) {
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(310L), "b"(0x10000000L) : "memory");
    if (r == 0) {
        printf("TGWON int80 unshare\n");
        fprintf(stderr, "TGWON int80 unshare\n");
    } else {
        printf("refused: %ld\n", r);
    }
    return 0;
}
"#;

/// Where an attempt first shows that it works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Control {
    /// A tool call at this level.
    Level(&'static str),
    /// The program started directly by the test: no executor, no sandbox, no limits.
    Direct,
}

const NONE: Control = Control::Level("none");
const STRICT: Control = Control::Level("strict");

/// Removes the common indentation of a snippet written indented in this file.
fn dedent(code: &str) -> String {
    let indent = code
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    for line in code.lines() {
        out.push_str(line.get(indent..).unwrap_or_else(|| line.trim_start()));
        out.push('\n');
    }
    out
}

/// One escape attempt.
struct Probe {
    name: &'static str,
    program: String,
    args: Vec<String>,
    /// The `[run.sandbox]` section; `None`: the battery's (read path `ro`, write path `rw`).
    sandbox: Option<String>,
    timeout_ms: u64,
    max_output: Option<u64>,
    control: Control,
    targets: Vec<&'static str>,
}

impl Probe {
    fn py(name: &'static str, code: &str) -> Self {
        let source = format!("{PRELUDE}{}", dedent(code));
        assert!(
            !source.contains(['{', '}']),
            "probe {name}: command arguments cannot contain braces"
        );
        Self::program(name, PY, vec!["-c".to_owned(), source])
    }

    fn program(name: &'static str, program: &str, args: Vec<String>) -> Self {
        Self {
            name,
            program: program.to_owned(),
            args,
            sandbox: None,
            timeout_ms: 3000,
            max_output: None,
            control: NONE,
            targets: vec!["strict"],
        }
    }

    fn control(mut self, control: Control) -> Self {
        self.control = control;
        self
    }

    fn targets(mut self, targets: &[&'static str]) -> Self {
        self.targets = targets.to_vec();
        self
    }

    fn sandbox(mut self, sandbox: &str) -> Self {
        self.sandbox = Some(sandbox.to_owned());
        self
    }

    fn timeout(mut self, ms: u64) -> Self {
        self.timeout_ms = ms;
        self
    }

    fn max_output(mut self, bytes: u64) -> Self {
        self.max_output = Some(bytes);
        self
    }
}

/// What one run of a probe returned.
struct Run {
    level: String,
    /// The result's data (or error message); for a direct run stdout and stderr.
    text: String,
    /// Bytes of output (the data), and of the error message (for a direct run: stderr).
    out_len: usize,
    err_len: usize,
    elapsed: Duration,
}

/// The directories and files of one class.
struct Fixture {
    _dir: tempfile::TempDir,
    /// Declared write path.
    rw: PathBuf,
    /// Declared read path.
    ro: PathBuf,
    /// Outside every allowed path.
    out: PathBuf,
    /// Working directory of direct runs.
    cwd: PathBuf,
    /// `out/secret.txt`, root's, mode 0600.
    secret: PathBuf,
    secret_text: String,
}

fn token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{nanos:x}", std::process::id())
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("tgx-").tempdir().unwrap();
        let base = dir.path().to_path_buf();
        // Traversable by other users (the setuid probe drops to nobody).
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
        let [rw, ro, out, cwd] = ["rw", "ro", "out", "cwd"].map(|d| {
            let p = base.join(d);
            fs::create_dir(&p).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
            p
        });
        let secret_text = format!("TGSECRET-{}", token());
        let secret = out.join("secret.txt");
        fs::write(&secret, &secret_text).unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        Self {
            _dir: dir,
            rw,
            ro,
            out,
            cwd,
            secret,
            secret_text,
        }
    }

    fn sandbox(&self) -> String {
        format!(
            "[run.sandbox]\nread_paths = [{:?}]\nwrite_paths = [{:?}]",
            self.ro, self.rw
        )
    }

    fn arg(&self) -> Value {
        json!({
            "rw": self.rw, "ro": self.ro, "out": self.out, "secret": self.secret,
            "pid": std::process::id(),
        })
    }
}

/// Pids of processes (other than this one) with a command-line argument `matches` accepts.
fn marked(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(&matches) {
            pids.push(i32::try_from(pid).unwrap());
        }
    }
    pids
}

/// Processes carrying `marker` that are still alive after `grace`; they are killed then.
fn survivors(marker: &str, grace: Duration) -> Vec<i32> {
    let is = |a: &[u8]| a == marker.as_bytes();
    let deadline = Instant::now() + grace;
    loop {
        let left = marked(is);
        if left.is_empty() {
            return left;
        }
        if Instant::now() >= deadline {
            for &p in &left {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            let until = Instant::now() + Duration::from_secs(3);
            while !marked(is).is_empty() && Instant::now() < until {
                sleep(Duration::from_millis(10));
            }
            return left;
        }
        sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is alive and one of this battery's.
fn alive_with_prefix(pid: i32, prefix: &str) -> bool {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            c.split(|b| *b == 0)
                .any(|a| a.starts_with(prefix.as_bytes()))
        })
        .unwrap_or(false)
}

/// Reads a pipe to its end or to 32 MiB, keeping the first MiB.
fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<(Vec<u8>, usize)> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut total = 0;
        let mut buf = vec![0u8; 64 << 10];
        while total < 32 << 20 {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if kept.len() < 1 << 20 {
                        kept.extend_from_slice(&buf[..n]);
                    }
                    total += n;
                }
            }
        }
        (kept, total)
    })
}

/// Runs the probe's program directly, without toolgate.
fn run_direct(p: &Probe, marker: &str, arg: &str, cwd: &Path) -> Run {
    let started = Instant::now();
    let mut child = Command::new(&p.program)
        .args(&p.args)
        .arg(marker)
        .arg(arg)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let deadline = started + Duration::from_millis(p.timeout_ms);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = killpg(
                Pid::from_raw(i32::try_from(child.id()).unwrap()),
                Signal::SIGKILL,
            );
            let _ = child.wait();
            break;
        }
        sleep(Duration::from_millis(5));
    }
    let (out, out_len) = out.join().unwrap();
    let (err, err_len) = err.join().unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    );
    Run {
        level: "direct".to_owned(),
        text,
        out_len,
        err_len,
        elapsed: started.elapsed(),
    }
}

/// The output on one line, shortened.
fn summary(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = joined.chars().take(300).collect();
    if short.len() < joined.len() {
        format!("{short}…")
    } else {
        short
    }
}

fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let short: String = line.chars().take(110).collect();
    if short.len() < line.len() {
        format!("{short}…")
    } else {
        short
    }
}

/// The attempts of one class, their outcomes, and the tool calls that ran them.
struct Battery {
    h: Harness,
    class: &'static str,
    short: &'static str,
    prefix: String,
    sandbox: String,
    base: Value,
    cwd: PathBuf,
    n: usize,
    attempts: Vec<&'static str>,
    /// Every target run that escaped, described.
    escaped: Vec<String>,
    /// The attempts that escaped at one of their levels at least.
    succeeded: Vec<&'static str>,
    unreal: Vec<String>,
    started: Instant,
}

impl Battery {
    fn new(class: &'static str, short: &'static str, fx: &Fixture) -> Self {
        Self {
            h: Harness::new(),
            class,
            short,
            prefix: format!("tgx-{short}-{}-", std::process::id()),
            sandbox: fx.sandbox(),
            base: fx.arg(),
            cwd: fx.cwd.clone(),
            n: 0,
            attempts: Vec::new(),
            escaped: Vec::new(),
            succeeded: Vec::new(),
            unreal: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Adds parameters every probe of the class gets.
    fn with(mut self, more: Value) -> Self {
        if let (Some(base), Value::Object(more)) = (self.base.as_object_mut(), more) {
            base.extend(more);
        }
        self
    }

    fn marker(&self, idx: usize) -> String {
        format!("{}{idx}", self.prefix)
    }

    async fn run(&self, p: &Probe, how: Control, idx: usize, setup: &impl Fn() -> Value) -> Run {
        let marker = self.marker(idx);
        let mut arg = self.base.clone();
        if let (Some(obj), Value::Object(extra)) = (arg.as_object_mut(), setup()) {
            obj.extend(extra);
        }
        let arg = arg.to_string();
        let Control::Level(level) = how else {
            return run_direct(p, &marker, &arg, &self.cwd);
        };
        let tool = format!("{}_{idx}_{level}", self.short);
        let mut args: Vec<&str> = p.args.iter().map(String::as_str).collect();
        args.push(&marker);
        args.push("{arg}");
        let sandbox = p.sandbox.as_deref().unwrap_or(&self.sandbox);
        let mut def = command_tool(&tool, level, &p.program, &args, sandbox).replace(
            "timeout_ms = 3000",
            &format!("timeout_ms = {}", p.timeout_ms),
        );
        if let Some(m) = p.max_output {
            def = def.replace(
                "retryable = false",
                &format!("retryable = false\nmax_output_bytes = {m}"),
            );
        }
        self.h.add_toml(&def);
        let t = Instant::now();
        let r = self.h.call(&tool, json!({ "arg": arg })).await;
        let elapsed = t.elapsed();
        let (text, out_len, err_len) = match (r.data(), r.error()) {
            (Some(Value::String(s)), _) => (s.clone(), s.len(), 0),
            (Some(v), _) => (v.to_string(), v.to_string().len(), 0),
            (None, e) => {
                let e = e.unwrap_or_default().to_owned();
                let n = e.len();
                (e, 0, n)
            }
        };
        Run {
            level: level.to_owned(),
            text,
            out_len,
            err_len,
            elapsed,
        }
    }

    /// Runs one attempt: `setup` resets its side effect (and returns extra parameters) before
    /// every run, `happened` judges whether the side effect happened.
    async fn attempt(
        &mut self,
        p: Probe,
        setup: impl Fn() -> Value,
        happened: impl Fn(&Run) -> bool,
    ) {
        let idx = self.n;
        self.n += 1;
        let marker = self.marker(idx);
        let control = self.run(&p, p.control, idx, &setup).await;
        let real = happened(&control);
        survivors(&marker, Duration::ZERO);
        let mut line = format!(
            "[{}] {}: without the sandbox ({}) ",
            self.class, p.name, control.level
        );
        if !real {
            line.push_str(&format!("DID NOT WORK: {}", last_line(&control.text)));
            self.unreal.push(line.clone());
            println!("{line}");
            return;
        }
        line.push_str("worked");
        for &level in &p.targets {
            let run = self.run(&p, Control::Level(level), idx, &setup).await;
            let mut why = Vec::new();
            if happened(&run) {
                why.push("its side effect happened".to_owned());
            }
            let left = survivors(&marker, Duration::from_secs(1));
            if !left.is_empty() {
                why.push(format!("processes survived the call: {left:?}"));
            }
            let deadline = Duration::from_millis(p.timeout_ms);
            if run.elapsed > deadline + Duration::from_millis(1500) {
                why.push(format!(
                    "the call returned {:?} after its deadline",
                    run.elapsed - deadline
                ));
            }
            let took = format!("{:.2}s", run.elapsed.as_secs_f64());
            if run.text.contains("timed out after") {
                let margin = run.elapsed.saturating_sub(deadline);
                line.push_str(&format!(
                    "; {} hit its deadline, returned {:.0} ms after it",
                    run.level,
                    margin.as_secs_f64() * 1000.0
                ));
            }
            if why.is_empty() {
                line.push_str(&format!(
                    "; {} blocked in {took} ({})",
                    run.level,
                    last_line(&run.text)
                ));
            } else {
                let what = format!(
                    "{} at {}: {}; it printed: {}",
                    p.name,
                    run.level,
                    why.join(", "),
                    summary(&run.text)
                );
                line.push_str(&format!(
                    "; {} ESCAPED in {took}: {}",
                    run.level,
                    why.join(", ")
                ));
                self.escaped.push(what);
                if self.succeeded.last() != Some(&p.name) {
                    self.succeeded.push(p.name);
                }
            }
        }
        self.attempts.push(p.name);
        println!("{line}");
    }

    /// Checks that `p` works at `level` (a positive control inside the sandbox); not an attempt.
    async fn expect_works(
        &mut self,
        p: Probe,
        level: &'static str,
        setup: impl Fn() -> Value,
        works: impl Fn(&Run) -> bool,
    ) {
        let idx = self.n;
        self.n += 1;
        let run = self.run(&p, Control::Level(level), idx, &setup).await;
        survivors(&self.marker(idx), Duration::ZERO);
        println!(
            "[{}] positive control {} at {level}: {}",
            self.class,
            p.name,
            if works(&run) { "works" } else { "FAILED" }
        );
        assert!(
            works(&run),
            "{} at {level} should work inside the sandbox: {}",
            p.name,
            run.text
        );
    }

    fn finish(self) {
        let prefix = self.prefix.clone();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut left = marked(|a| a.starts_with(prefix.as_bytes()));
        while !left.is_empty() && Instant::now() < deadline {
            sleep(Duration::from_millis(50));
            left = marked(|a| a.starts_with(prefix.as_bytes()));
        }
        for &p in &left {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        let summary = format!(
            "{}: {} attempts, {} succeeded",
            self.class,
            self.attempts.len(),
            self.succeeded.len()
        );
        println!("{summary} ({:.1}s)", self.started.elapsed().as_secs_f64());
        eprintln!("{summary}");
        for e in &self.escaped {
            println!("  ESCAPE {e}");
        }
        assert!(
            self.unreal.is_empty(),
            "probes that did not work without the sandbox:\n{}",
            self.unreal.join("\n")
        );
        assert!(
            left.is_empty(),
            "{}: processes of the battery still alive at its end: {left:?}",
            self.class
        );
        assert!(
            self.escaped.is_empty(),
            "{}: {} attempts succeeded under the sandbox:\n{}",
            self.class,
            self.succeeded.len(),
            self.escaped.join("\n")
        );
    }
}

// ----- judges and setups -----

fn nothing() -> Value {
    json!({})
}

fn removing(paths: Vec<PathBuf>) -> impl Fn() -> Value {
    move || {
        for p in &paths {
            let _ = fs::remove_file(p);
            let _ = fs::remove_dir_all(p);
        }
        json!({})
    }
}

fn leaked(secret: String) -> impl Fn(&Run) -> bool {
    move |r| r.text.contains(&secret)
}

fn appears(path: PathBuf) -> impl Fn(&Run) -> bool {
    move |_| path.symlink_metadata().is_ok()
}

/// The probe reported the forbidden operation worked (stdout or the canary in `rw`).
fn won(rw: PathBuf) -> impl Fn(&Run) -> bool {
    let canary = rw.join("canary");
    move |r| r.text.contains(WON) || canary.exists()
}

fn count_entries(dir: &Path) -> usize {
    fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// The number after `label ` in the output.
fn reported(text: &str, label: &str) -> usize {
    text.split(label)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn can_spawn() -> bool {
    Command::new("/bin/true")
        .status()
        .is_ok_and(|s| s.success())
}

// ----- listeners -----

fn counter() -> Arc<AtomicU32> {
    Arc::new(AtomicU32::new(0))
}

/// Waits briefly for a hit (listeners count on their own threads).
fn hit(c: &Arc<AtomicU32>) -> impl Fn(&Run) -> bool + use<> {
    let c = Arc::clone(c);
    move |_| {
        let until = Instant::now() + Duration::from_millis(300);
        loop {
            if c.load(Ordering::SeqCst) > 0 {
                return true;
            }
            if Instant::now() > until {
                return false;
            }
            sleep(Duration::from_millis(10));
        }
    }
}

fn zero(c: &Arc<AtomicU32>) -> impl Fn() -> Value + use<> {
    let c = Arc::clone(c);
    move || {
        c.store(0, Ordering::SeqCst);
        json!({})
    }
}

/// A TCP server that counts connections and answers `pong`.
fn tcp_server(addr: &str) -> (u16, Arc<AtomicU32>) {
    let listener = TcpListener::bind(addr).unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = counter();
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut buf = [0u8; 4];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"pong");
            });
        }
    });
    (port, hits)
}

/// A UDP socket that counts datagrams.
fn udp_server(addr: &str) -> (u16, Arc<AtomicU32>) {
    let socket = UdpSocket::bind(addr).unwrap();
    let port = socket.local_addr().unwrap().port();
    let hits = counter();
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while socket.recv_from(&mut buf).is_ok() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, hits)
}

fn unix_server(listener: UnixListener) -> Arc<AtomicU32> {
    let hits = counter();
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        for _conn in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    hits
}

fn unix_dgram_server(socket: UnixDatagram) -> Arc<AtomicU32> {
    let hits = counter();
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while socket.recv(&mut buf).is_ok() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    hits
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Dials 127.0.0.1:`port` from the host for a while; true when the probe's listener answered.
fn dial(port: u16) -> JoinHandle<bool> {
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_millis(2500);
        while Instant::now() < until {
            let addr = ([127, 0, 0, 1], port).into();
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got);
                if got.starts_with(b"INBOUND") {
                    return true;
                }
            }
            sleep(Duration::from_millis(50));
        }
        false
    })
}

// ----- processes the test starts -----

/// A `sleep` the probes try to reach; a fresh one for every run.
#[derive(Clone, Default)]
struct Victim(Arc<Mutex<Option<Child>>>);

impl Victim {
    fn respawn(&self) -> u32 {
        let mut slot = self.0.lock().unwrap();
        if let Some(mut old) = slot.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        let child = Command::new("/bin/sleep")
            .arg("600")
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        *slot = Some(child);
        pid
    }

    fn setup(&self) -> impl Fn() -> Value + use<> {
        let v = self.clone();
        move || json!({ "victim": v.respawn() })
    }

    fn dead(&self) -> bool {
        let until = Instant::now() + Duration::from_millis(300);
        loop {
            let gone = match self.0.lock().unwrap().as_mut() {
                Some(c) => c.try_wait().unwrap().is_some(),
                None => true,
            };
            if gone || Instant::now() > until {
                return gone;
            }
            sleep(Duration::from_millis(10));
        }
    }

    fn nice(&self) -> Option<i64> {
        let pid = self.0.lock().unwrap().as_ref()?.id();
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        after.split_whitespace().nth(16)?.parse().ok()
    }

    fn stop(&self) {
        if let Some(mut c) = self.0.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A hostname change is undone however the test ends.
struct HostnameGuard(std::ffi::OsString);

impl HostnameGuard {
    fn restore(&self) {
        if nix::unistd::gethostname().ok().as_ref() != Some(&self.0) {
            nix::unistd::sethostname(&self.0).unwrap();
        }
    }
}

impl Drop for HostnameGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Files the battery may have created outside its directory are removed however it ends.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

fn python_helper(code: &str, args: &[&str]) -> String {
    let out = Command::new(PY)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

// ===== filesystem =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_escapes_fail() {
    let fx = Fixture::new();
    let pid = std::process::id();
    let etc_canary = PathBuf::from(format!("/etc/tgx-canary-{pid}"));
    let usr_canary = PathBuf::from(format!("/usr/local/tgx-canary-{pid}"));
    let shm_canary = PathBuf::from(format!("/dev/shm/tgx-canary-{pid}"));
    let _cleanup = RemoveOnDrop(vec![
        etc_canary.clone(),
        usr_canary.clone(),
        shm_canary.clone(),
    ]);
    let listed = format!("listme-{}", token());
    fs::write(fx.out.join(&listed), "x").unwrap();
    let exec_token = format!("TGEXEC-{}", token());
    let prog = fx.out.join("prog.sh");
    fs::write(&prog, format!("#!/bin/sh\necho {exec_token}\n")).unwrap();
    fs::set_permissions(&prog, fs::Permissions::from_mode(0o755)).unwrap();
    let data = fx.ro.join("data.txt");
    const DATA: &str = "read-only data";
    fs::write(&data, DATA).unwrap();
    let modes = fx.out.join("modes.txt");
    fs::write(&modes, "x").unwrap();
    let target = fx.out.join("target.txt");
    std::os::unix::fs::symlink(&fx.secret, fx.rw.join("planted-link")).unwrap();
    std::os::unix::fs::symlink(&fx.secret, fx.ro.join("planted-link")).unwrap();
    std::os::unix::fs::symlink(&target, fx.rw.join("planted-out-link")).unwrap();
    let shadow = fs::read_to_string("/etc/shadow")
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let environ: String = fs::read("/proc/self/environ")
        .unwrap()
        .iter()
        .take(64)
        .map(|b| format!("{b:02x}"))
        .collect();

    let mut b = Battery::new("filesystem", "fs", &fx).with(json!({
        "etc_canary": etc_canary, "usr_canary": usr_canary, "shm": shm_canary,
    }));
    let secret = fx.secret_text.clone();
    let (rw, ro, out) = (fx.rw.clone(), fx.ro.clone(), fx.out.clone());

    // Reading a secret outside every allowed path.
    b.attempt(
        Probe::py(
            "read_secret_by_absolute_path",
            "print(open(A['secret']).read())",
        )
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py("read_etc_shadow", "print(open('/etc/shadow').read())")
            .targets(&["strict", "restricted"]),
        nothing,
        leaked(shadow),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_through_dotdot_from_a_read_path",
            "print(open(A['ro'] + '/../out/secret.txt').read())",
        ),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_through_dotdot_from_the_working_directory",
            "print(open(os.path.relpath(A['secret'])).read())",
        )
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_through_a_symlink_made_in_the_write_path",
            "
            p = os.path.join(A['rw'], 'made-link')
            os.symlink(A['secret'], p)
            print(open(p).read())
            ",
        ),
        removing(vec![rw.join("made-link")]),
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_through_a_symlink_planted_in_the_write_path",
            "print(open(os.path.join(A['rw'], 'planted-link')).read())",
        ),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_through_a_symlink_planted_in_a_read_path",
            "print(open(os.path.join(A['ro'], 'planted-link')).read())",
        ),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    {
        let link = rw.join("hard-link");
        let (leak, made) = (leaked(secret.clone()), appears(link.clone()));
        b.attempt(
            Probe::py(
                "hard_link_from_the_write_path_to_a_file_outside",
                "
                p = os.path.join(A['rw'], 'hard-link')
                os.link(A['secret'], p)
                print(open(p).read())
                ",
            ),
            removing(vec![link]),
            move |r| leak(r) || made(r),
        )
        .await;
    }
    b.attempt(
        Probe::py(
            "read_via_proc_self_root",
            "print(open('/proc/self/root' + A['secret']).read())",
        )
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_via_the_executors_proc_pid_root",
            "print(open('/proc/%d/root' % A['pid'] + A['secret']).read())",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_via_proc_self_cwd_and_dotdot",
            "print(open('/proc/self/cwd/' + os.path.relpath(A['secret'])).read())",
        ),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_via_an_o_path_handle_reopened_through_proc",
            "
            fd = os.open(A['secret'], os.O_PATH)
            print(open('/proc/self/fd/%d' % fd).read())
            ",
        )
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_via_openat_on_a_directory_handle",
            "
            d = os.open(A['out'], os.O_PATH | os.O_DIRECTORY)
            print(os.read(os.open('secret.txt', os.O_RDONLY, dir_fd=d), 4096).decode())
            ",
        )
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_after_chdir_outside",
            "
            os.chdir(A['out'])
            print(open('secret.txt').read())
            ",
        )
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    {
        // A descriptor the process that starts toolgate left open (no close-on-exec).
        let inherited = fs::File::open(&fx.secret).unwrap();
        nix::fcntl::fcntl(
            &inherited,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .unwrap();
        b.attempt(
            Probe::py(
                "read_an_inherited_descriptor",
                "
                for fd in range(3, 256):
                    try:
                        os.lseek(fd, 0, 0)
                        print(fd, os.read(fd, 4096).decode(errors='replace'))
                    except OSError:
                        pass
                ",
            )
            .control(Control::Direct)
            .targets(&["none", "standard", "strict", "restricted"]),
            nothing,
            leaked(secret.clone()),
        )
        .await;
        drop(inherited);
    }
    {
        // The executor's own open files, through /proc/<executor>/fd.
        let held = fs::File::open(&fx.secret).unwrap();
        b.attempt(
            Probe::py(
                "read_the_executors_open_files_via_proc_pid_fd",
                "
                base = '/proc/%d/fd' % A['pid']
                for n in os.listdir(base):
                    p = os.path.join(base, n)
                    try:
                        if os.readlink(p).startswith(A['out']):
                            print(open(p).read())
                    except OSError:
                        pass
                ",
            )
            .control(NONE)
            .targets(&["strict", "restricted"]),
            nothing,
            leaked(secret.clone()),
        )
        .await;
        drop(held);
    }
    b.attempt(
        Probe::py(
            "read_the_executors_environment",
            "print(open('/proc/%d/environ' % A['pid'], 'rb').read().hex())",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(environ),
    )
    .await;
    b.attempt(
        Probe::py("list_a_directory_outside", "print(os.listdir(A['out']))")
            .targets(&["strict", "restricted"]),
        nothing,
        leaked(listed),
    )
    .await;
    b.attempt(
        Probe::py(
            "execute_a_program_outside",
            "
            import subprocess
            print(subprocess.run([os.path.join(A['out'], 'prog.sh')], capture_output=True, text=True).stdout)
            ",
        ),
        nothing,
        leaked(exec_token),
    )
    .await;

    // Writing outside the write paths.
    b.attempt(
        Probe::py(
            "create_a_file_outside",
            "touch(os.path.join(A['out'], 'written'))",
        )
        .targets(&["strict", "restricted"]),
        removing(vec![out.join("written")]),
        appears(out.join("written")),
    )
    .await;
    b.attempt(
        Probe::py(
            "create_a_file_in_a_read_path",
            "touch(os.path.join(A['ro'], 'written'))",
        ),
        removing(vec![ro.join("written")]),
        appears(ro.join("written")),
    )
    .await;
    {
        let (d1, d2) = (data.clone(), data.clone());
        let reset = move || {
            fs::write(&d1, DATA).unwrap();
            json!({})
        };
        b.attempt(
            Probe::py(
                "truncate_a_read_only_file",
                "os.truncate(os.path.join(A['ro'], 'data.txt'), 0)",
            ),
            reset.clone(),
            move |_| fs::read_to_string(&d2).unwrap_or_default() != DATA,
        )
        .await;
        let d3 = data.clone();
        b.attempt(
            Probe::py(
                "append_to_a_read_only_file",
                "
                with open(os.path.join(A['ro'], 'data.txt'), 'a') as f:
                    f.write('appended')
                ",
            ),
            reset,
            move |_| fs::read_to_string(&d3).unwrap_or_default() != DATA,
        )
        .await;
    }
    b.attempt(
        Probe::py("create_a_file_in_etc", "touch(A['etc_canary'])")
            .targets(&["strict", "restricted"]),
        removing(vec![etc_canary.clone()]),
        appears(etc_canary.clone()),
    )
    .await;
    b.attempt(
        Probe::py("create_a_file_in_usr", "touch(A['usr_canary'])"),
        removing(vec![usr_canary.clone()]),
        appears(usr_canary.clone()),
    )
    .await;
    {
        let (t1, t2) = (target.clone(), target.clone());
        b.attempt(
            Probe::py(
                "write_through_a_symlink_planted_in_the_write_path",
                "
                with open(os.path.join(A['rw'], 'planted-out-link'), 'w') as f:
                    f.write('overwritten')
                ",
            ),
            move || {
                fs::write(&t1, "original").unwrap();
                json!({})
            },
            move |_| fs::read_to_string(&t2).unwrap_or_default() != "original",
        )
        .await;
    }
    b.attempt(
        Probe::py("create_a_file_in_dev_shm", "touch(A['shm'])").targets(&["strict", "restricted"]),
        removing(vec![shm_canary.clone()]),
        appears(shm_canary.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "move_a_file_out_of_the_write_path",
            "
            p = os.path.join(A['rw'], 'to-move')
            touch(p)
            os.rename(p, os.path.join(A['out'], 'moved'))
            ",
        ),
        removing(vec![out.join("moved"), rw.join("to-move")]),
        appears(out.join("moved")),
    )
    .await;
    {
        let (movable, stolen) = (out.join("movable"), rw.join("stolen"));
        let (m1, s1, m2, s2) = (movable.clone(), stolen.clone(), movable, stolen);
        b.attempt(
            Probe::py(
                "move_a_file_from_outside_into_the_write_path",
                "os.rename(os.path.join(A['out'], 'movable'), os.path.join(A['rw'], 'stolen'))",
            ),
            move || {
                let _ = fs::remove_file(&s1);
                fs::write(&m1, "movable").unwrap();
                json!({})
            },
            move |_| s2.exists() || !m2.exists(),
        )
        .await;
    }
    {
        let (v1, v2) = (out.join("victim"), out.join("victim"));
        b.attempt(
            Probe::py(
                "delete_a_file_outside",
                "os.unlink(os.path.join(A['out'], 'victim'))",
            )
            .targets(&["strict", "restricted"]),
            move || {
                fs::write(&v1, "victim").unwrap();
                json!({})
            },
            move |_| !v2.exists(),
        )
        .await;
    }
    b.attempt(
        Probe::py(
            "make_a_directory_outside",
            "os.mkdir(os.path.join(A['out'], 'new-dir'))",
        )
        .targets(&["strict", "restricted"]),
        removing(vec![out.join("new-dir")]),
        appears(out.join("new-dir")),
    )
    .await;
    {
        let node = rw.join("device-node");
        let n2 = node.clone();
        b.attempt(
            Probe::py("make_a_device_node", "os.mknod(os.path.join(A['rw'], 'device-node'), 0o600 | stat.S_IFCHR, os.makedev(1, 3))")
                .control(NONE),
            removing(vec![node]),
            move |_| fs::symlink_metadata(&n2).is_ok_and(|m| m.file_type().is_char_device()),
        )
        .await;
    }
    {
        let (m1, m2) = (modes.clone(), modes.clone());
        b.attempt(
            Probe::py(
                "chmod_a_file_outside",
                "os.chmod(os.path.join(A['out'], 'modes.txt'), 0o644)",
            )
            .targets(&["strict", "restricted"]),
            move || {
                fs::set_permissions(&m1, fs::Permissions::from_mode(0o600)).unwrap();
                json!({})
            },
            move |_| fs::metadata(&m2).unwrap().permissions().mode() & 0o7777 != 0o600,
        )
        .await;
    }
    {
        let (m1, m2) = (modes.clone(), modes.clone());
        b.attempt(
            Probe::py(
                "set_the_times_of_a_file_outside",
                "os.utime(os.path.join(A['out'], 'modes.txt'), (0, 0))",
            )
            .targets(&["strict", "restricted"]),
            move || {
                fs::File::options()
                    .write(true)
                    .open(&m1)
                    .unwrap()
                    .set_modified(SystemTime::now())
                    .unwrap();
                json!({})
            },
            move |_| fs::metadata(&m2).unwrap().mtime() == 0,
        )
        .await;
    }
    {
        let (m1, m2) = (modes.display().to_string(), modes.display().to_string());
        b.attempt(
            Probe::py("set_an_extended_attribute_on_a_file_outside", "os.setxattr(os.path.join(A['out'], 'modes.txt'), 'user.tgx', b'1')")
                .targets(&["strict", "restricted"]),
            move || {
                python_helper("import os, sys\ntry:\n    os.removexattr(sys.argv[1], 'user.tgx')\nexcept OSError:\n    pass", &[&m1]);
                json!({})
            },
            move |_| python_helper("import os, sys\nprint('user.tgx' in os.listxattr(sys.argv[1]))", &[&m2]) == "True",
        )
        .await;
    }
    b.attempt(
        Probe::py(
            "restricted_reads_a_system_file",
            "print(open('/etc/passwd').read())",
        )
        .control(STRICT)
        .targets(&["restricted"]),
        nothing,
        leaked("root:x:0:0".to_owned()),
    )
    .await;
    {
        // Last: moving the write path itself away (put back before every run).
        let moved = PathBuf::from(format!("{}-moved", rw.display()));
        let (r1, m1, m2) = (rw.clone(), moved.clone(), moved.clone());
        b.attempt(
            Probe::py(
                "rename_the_write_path_itself",
                "os.rename(A['rw'], A['rw'] + '-moved')",
            ),
            move || {
                if m1.exists() {
                    fs::rename(&m1, &r1).unwrap();
                }
                json!({})
            },
            move |_| m2.exists(),
        )
        .await;
        if moved.exists() {
            fs::rename(&moved, &rw).unwrap();
        }
    }
    b.finish();
}

// ===== network =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_escapes_fail() {
    let fx = Fixture::new();
    let (pa, a_hits) = tcp_server("127.0.0.1:0");
    let (pb, b_hits) = tcp_server("127.0.0.1:0");
    let (p6, v6_hits) = tcp_server("[::1]:0");
    let (pu, udp_hits) = udp_server("127.0.0.1:0");
    let (pd, dns_hits) = udp_server("127.0.0.1:0");
    let abstract_name = format!("tgx-abstract-{}", token());
    let abstract_hits = unix_server(
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap()).unwrap(),
    );
    let sock = fx.out.join("sock");
    let sock_hits = unix_server(UnixListener::bind(&sock).unwrap());
    let dsock = fx.out.join("dsock");
    let dsock_hits = unix_dgram_server(UnixDatagram::bind(&dsock).unwrap());
    // Another name of this host that the host's resolver knows (from /etc/hosts).
    let alias = fs::read_to_string("/etc/hosts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split_whitespace().next() == Some("127.0.0.1"))
        .flat_map(|l| {
            l.split_whitespace()
                .skip(1)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .find(|n| n != "localhost" && !n.starts_with('#'));

    let mut b = Battery::new("network", "net", &fx).with(json!({
        "pa": pa, "pb": pb, "p6": p6, "pu": pu, "pd": pd, "abstract": abstract_name,
        "sock": sock, "dsock": dsock, "alias": alias,
    }));
    let hosts = format!("{}\nallowed_hosts = [\"localhost:{pa}\"]", fx.sandbox());

    // The allowed host is reached from strict (so the blocked attempts below are not blocked
    // merely because nothing works).
    b.expect_works(
        Probe::py("tcp_to_the_allowed_host", "tcp('localhost', A['pa'])").sandbox(&hosts),
        "strict",
        zero(&a_hits),
        hit(&a_hits),
    )
    .await;

    const UDP: &str = "
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for host in ('127.0.0.1', 'localhost'):
            try:
                s.sendto(b'udp', (host, A['pu']))
            except OSError as e:
                print(host, e)
        ";
    const DNS: &str = r"
        q = struct.pack('!6H', 0x7467, 0x0100, 1, 0, 0, 0) + b'\x07example\x03com\x00' + struct.pack('!2H', 1, 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(q, ('127.0.0.1', A['pd']))
        print('query sent')
        ";

    // Without allowed hosts: no network at all.
    b.attempt(
        Probe::py("tcp_to_a_loopback_listener", "tcp('127.0.0.1', A['pa'])")
            .targets(&["strict", "restricted"]),
        zero(&a_hits),
        hit(&a_hits),
    )
    .await;
    b.attempt(
        Probe::py("udp_to_a_loopback_listener", UDP).targets(&["strict", "restricted"]),
        zero(&udp_hits),
        hit(&udp_hits),
    )
    .await;
    b.attempt(
        Probe::py("dns_query_to_a_resolver_on_loopback", DNS).targets(&["strict", "restricted"]),
        zero(&dns_hits),
        hit(&dns_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "abstract_unix_socket_of_the_host",
            r"
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect('\x00' + A['abstract'])
            s.sendall(b'hi')
            ",
        )
        .targets(&["strict", "restricted"]),
        zero(&abstract_hits),
        hit(&abstract_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "unix_socket_file_outside_the_allowed_paths",
            "
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(A['sock'])
            s.sendall(b'hi')
            ",
        )
        .targets(&["strict", "restricted"]),
        zero(&sock_hits),
        hit(&sock_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "unix_datagram_socket_file_outside_the_allowed_paths",
            "socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'hi', A['dsock'])",
        )
        .targets(&["strict", "restricted"]),
        zero(&dsock_hits),
        hit(&dsock_hits),
    )
    .await;

    // With an allowed host bridged: nothing but that host and port.
    b.attempt(
        Probe::py(
            "tcp_by_address_instead_of_the_allowed_name",
            "tcp('127.0.0.1', A['pa'])",
        )
        .sandbox(&hosts),
        zero(&a_hits),
        hit(&a_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "tcp_to_another_port_by_the_allowed_name",
            "tcp('localhost', A['pb'])",
        )
        .sandbox(&hosts),
        zero(&b_hits),
        hit(&b_hits),
    )
    .await;
    b.attempt(
        Probe::py("udp_beside_the_bridged_host", UDP).sandbox(&hosts),
        zero(&udp_hits),
        hit(&udp_hits),
    )
    .await;
    b.attempt(
        Probe::py("dns_query_beside_the_bridged_host", DNS).sandbox(&hosts),
        zero(&dns_hits),
        hit(&dns_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "tcp_to_ipv6_loopback",
            "tcp('::1', A['p6'], socket.AF_INET6)",
        )
        .sandbox(&hosts),
        zero(&v6_hits),
        hit(&v6_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "tcp_to_an_ipv4_mapped_ipv6_address",
            "tcp('::ffff:127.0.0.1', A['pa'], socket.AF_INET6)",
        )
        .sandbox(&hosts),
        zero(&a_hits),
        hit(&a_hits),
    )
    .await;
    b.attempt(
        Probe::py("tcp_to_the_unspecified_address", "tcp('0.0.0.0', A['pa'])").sandbox(&hosts),
        zero(&a_hits),
        hit(&a_hits),
    )
    .await;
    if alias.is_some() {
        b.attempt(
            Probe::py(
                "tcp_to_another_name_of_the_host",
                "tcp(A['alias'], A['pa'])",
            )
            .sandbox(&hosts),
            zero(&a_hits),
            hit(&a_hits),
        )
        .await;
    } else {
        println!(
            "[network] tcp_to_another_name_of_the_host: skipped, /etc/hosts has no other name for 127.0.0.1"
        );
    }
    b.attempt(
        Probe::py(
            "tcp_fast_open_sendto_without_connect",
            "
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            s.sendto(b'ping', socket.MSG_FASTOPEN, ('127.0.0.1', A['pa']))
            print('answer', s.recv(16))
            ",
        )
        .sandbox(&hosts),
        zero(&a_hits),
        hit(&a_hits),
    )
    .await;
    b.attempt(
        Probe::py(
            "raw_socket_forging_udp",
            "
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
            data = b'raw'
            s.sendto(struct.pack('!4H', 40000, A['pu'], 8 + len(data), 0) + data, ('127.0.0.1', 0))
            print('sent')
            ",
        )
        .sandbox(&hosts)
        .control(NONE)
        .targets(&["strict", "restricted"]),
        zero(&udp_hits),
        hit(&udp_hits),
    )
    .await;
    {
        // Traffic on the host's loopback carrying a secret, for the sniffing probe.
        let sniffed = format!("TGSNIFF-{}", token());
        let (sink, _) = udp_server("127.0.0.1:0");
        let payload = sniffed.clone();
        let setup = move || {
            let payload = payload.clone();
            std::thread::spawn(move || {
                let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                for _ in 0..100 {
                    let _ = s.send_to(payload.as_bytes(), ("127.0.0.1", sink));
                    sleep(Duration::from_millis(20));
                }
            });
            json!({})
        };
        b.attempt(
            Probe::py(
                "packet_socket_sniffing_the_hosts_loopback",
                "
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
                s.settimeout(0.2)
                end = time.time() + 1.5
                while time.time() < end:
                    try:
                        pkt = s.recv(65535)
                    except socket.timeout:
                        continue
                    i = pkt.find(b'TGSNIFF')
                    if i >= 0:
                        print(pkt[i:i + 60])
                        break
                ",
            )
            .sandbox(&hosts)
            .control(NONE)
            .targets(&["strict", "restricted"]),
            setup,
            leaked(sniffed),
        )
        .await;
    }
    {
        let dialer: Arc<Mutex<Option<JoinHandle<bool>>>> = Arc::default();
        let d1 = Arc::clone(&dialer);
        b.attempt(
            Probe::py(
                "listener_reachable_from_the_host",
                "
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(('0.0.0.0', A['px']))
                s.listen(4)
                s.settimeout(2)
                c, peer = s.accept()
                c.sendall(b'INBOUND')
                c.close()
                print('accepted', peer)
                ",
            )
            .sandbox(&hosts),
            move || {
                let port = free_port();
                *d1.lock().unwrap() = Some(dial(port));
                json!({ "px": port })
            },
            move |_| {
                dialer
                    .lock()
                    .unwrap()
                    .take()
                    .is_some_and(|h| h.join().unwrap_or(false))
            },
        )
        .await;
    }
    b.finish();
}

// ===== privilege =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privilege_escapes_fail() {
    let fx = Fixture::new();
    let rw = fx.rw.clone();
    let secret = fx.secret_text.clone();
    // A line in the kernel log to look for.
    let kmsg = format!("tgx-kmsg-{}", token());
    fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .unwrap()
        .write_all(format!("{kmsg}\n").as_bytes())
        .unwrap();
    // A setuid-root copy of Python in the read path.
    let suid = fx.ro.join("python-suid");
    fs::copy(fs::canonicalize(PY).unwrap(), &suid).unwrap();
    fs::set_permissions(&suid, fs::Permissions::from_mode(0o4755)).unwrap();
    // The i386 system-call probe.
    let int80 = fx.ro.join("int80");
    let src = fx.cwd.join("int80.c");
    fs::write(&src, INT80_SOURCE).unwrap();
    let gcc = Command::new("/usr/bin/gcc")
        .arg("-O0")
        .arg("-o")
        .arg(&int80)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        gcc.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&gcc.stderr)
    );
    // A process holding the secret open.
    let mut holder = Command::new(PY)
        .args([
            "-c",
            "import sys, time\nf = open(sys.argv[1])\ntime.sleep(600)",
        ])
        .arg(&fx.secret)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let holder_fd = PathBuf::from(format!("/proc/{}/fd/3", holder.id()));
    let until = Instant::now() + Duration::from_secs(5);
    while !holder_fd.exists() && Instant::now() < until {
        sleep(Duration::from_millis(20));
    }
    // The file handle of the secret (for open_by_handle_at).
    let handle = python_helper(
        "import ctypes, struct, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(8 + 128)\nstruct.pack_into('I', buf, 0, 128)\nmount_id = ctypes.c_int()\nassert libc.name_to_handle_at(-100, sys.argv[1].encode(), buf, ctypes.byref(mount_id), 0) == 0\nn = struct.unpack_from('I', buf, 0)[0]\nprint(buf.raw[:8 + n].hex())",
        &[&fx.secret.display().to_string()],
    );
    assert!(!handle.is_empty(), "name_to_handle_at failed");
    let agent_file = PathBuf::from("/sys/fs/cgroup/pids/release_agent");
    let agent_before = fs::read_to_string(&agent_file).ok();
    let agent = fx.out.join("release-agent.sh");
    let hostname = HostnameGuard(nix::unistd::gethostname().unwrap());

    let mut b = Battery::new("privilege", "priv", &fx).with(json!({
        "addr": MEMORY_SECRET.as_ptr().addr(), "holder": holder.id(), "suid": suid,
        "handle": handle, "agent": agent,
    }));
    let victim = Victim::default();
    let won = || won(rw.clone());
    let canary = || removing(vec![rw.join("canary")]);

    // Debugging and reading other processes.
    {
        let v = victim.clone();
        b.attempt(
            Probe::py(
                "ptrace_attach_and_kill_a_process_outside",
                "
                pid = A['victim']
                if libc.ptrace(16, pid, None, None) == 0:
                    os.waitpid(pid, 0x40000000)
                    libc.ptrace(8, pid, None, None)
                    print('attached')
                ",
            )
            .control(NONE)
            .targets(&["strict", "restricted"]),
            victim.setup(),
            move |_| v.dead(),
        )
        .await;
    }
    b.attempt(
        Probe::py(
            "ptrace_traceme",
            "if libc.ptrace(0, 0, None, None) == 0: won('traceme')",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "process_vm_readv_of_the_executors_memory",
            "
            class IoVec(ctypes.Structure):
                _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
            buf = ctypes.create_string_buffer(64)
            local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 64)
            remote = IoVec(A['addr'], 64)
            n = libc.syscall(310, L(A['pid']), ctypes.byref(local), L(1), ctypes.byref(remote), L(1), L(0))
            print(n, buf.raw)
            ",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(MEMORY_SECRET.to_owned()),
    )
    .await;
    b.attempt(
        Probe::py(
            "proc_pid_mem_of_the_executor",
            "
            with open('/proc/%d/mem' % A['pid'], 'rb') as f:
                f.seek(A['addr'])
                print(f.read(64))
            ",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(MEMORY_SECRET.to_owned()),
    )
    .await;
    b.attempt(
        Probe::py(
            "pidfd_getfd_steals_a_descriptor",
            "
            pfd = libc.syscall(434, L(A['holder']), L(0))
            for fd in range(3, 8):
                nfd = libc.syscall(438, L(pfd), L(fd), L(0))
                if nfd >= 0:
                    os.lseek(nfd, 0, 0)
                    print(os.read(nfd, 4096))
            ",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;

    // Mounts and namespaces.
    b.attempt(
        Probe::py(
            "mount_a_tmpfs",
            "
            d = os.path.join(A['rw'], 'mnt')
            os.makedirs(d, exist_ok=True)
            if libc.mount(b'tgx', d.encode(), b'tmpfs', 0, None) == 0:
                won('mount')
                libc.umount2(d.encode(), 2)
            ",
        )
        .control(NONE),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "unshare_a_user_namespace",
            "if libc.unshare(0x10000000) == 0: won('unshare')",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "unshare_user_and_mount_namespaces_then_mount",
            "
            d = os.path.join(A['rw'], 'mnt2')
            os.makedirs(d, exist_ok=True)
            if libc.unshare(0x10000000 | 0x20000) == 0 and libc.mount(b'tgx', d.encode(), b'tmpfs', 0, None) == 0:
                won('mount in new namespaces')
            ",
        )
        .control(NONE),
        canary(),
        won(),
    )
    .await;
    const CHILD_42: &str = "
        if pid == 0:
            os._exit(42)
        if pid > 0 and os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 42:
            won('child in a new user namespace')
        ";
    b.attempt(
        Probe::py(
            "clone_into_a_new_user_namespace",
            &format!(
                "pid = libc.syscall(56, L(0x10000000 | 17), L(0), L(0), L(0), L(0))\n{}",
                dedent(CHILD_42)
            ),
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "clone3_into_a_new_user_namespace",
            &format!(
                "args = ctypes.create_string_buffer(struct.pack('8Q', 0x10000000, 0, 0, 0, 17, 0, 0, 0), 64)\npid = libc.syscall(435, args, L(64))\n{}",
                dedent(CHILD_42)
            ),
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "setns_into_the_executors_network_namespace",
            "
            try:
                fd = os.open('/proc/%d/ns/net' % A['pid'], os.O_RDONLY)
            except OSError as e:
                print('no /proc:', e)
                fd = libc.syscall(434, L(A['pid']), L(0))
            if fd >= 0 and libc.setns(fd, 0x40000000) == 0:
                won('setns')
            ",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "chroot",
            "if libc.chroot(A['rw'].encode()) == 0: won('chroot')",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::program(
            "i386_int80_unshare",
            &int80.display().to_string(),
            Vec::new(),
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        canary(),
        won(),
    )
    .await;

    // Setuid binaries.
    b.attempt(
        Probe::py(
            "setuid_binary_regains_root",
            "
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            except OSError as e:
                print('cannot drop to nobody:', e)
            code = 'import os' + chr(10) + 'if os.geteuid() == 0 and os.getuid() != 0: print(chr(84) + chr(71) + chr(87) + chr(79) + chr(78), os.getuid())'
            os.execv(A['suid'], [A['suid'], '-c', code])
            ",
        )
        .control(Control::Direct),
        canary(),
        won(),
    )
    .await;
    {
        let planted = rw.join("planted-suid");
        let p2 = planted.clone();
        b.attempt(
            Probe::py(
                "plant_a_setuid_root_binary",
                "
                import shutil
                p = os.path.join(A['rw'], 'planted-suid')
                shutil.copy('/bin/true', p)
                os.chmod(p, 0o4755)
                ",
            )
            .control(NONE),
            removing(vec![planted]),
            move |_| fs::metadata(&p2).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o4000 != 0),
        )
        .await;
    }

    // Signals and scheduling of processes outside.
    for (name, code) in [
        ("kill_a_process_outside", "os.kill(A['victim'], 9)"),
        ("kill_a_process_group_outside", "os.killpg(A['victim'], 9)"),
        (
            "pidfd_send_signal_to_a_process_outside",
            "libc.syscall(424, L(libc.syscall(434, L(A['victim']), L(0))), L(9), None, L(0))",
        ),
    ] {
        let v = victim.clone();
        b.attempt(
            Probe::py(name, code)
                .control(NONE)
                .targets(&["strict", "restricted"]),
            victim.setup(),
            move |_| v.dead(),
        )
        .await;
    }
    {
        let v = victim.clone();
        b.attempt(
            Probe::py(
                "renice_a_process_outside",
                "print(libc.setpriority(0, A['victim'], 19))",
            )
            .control(NONE)
            .targets(&["strict", "restricted"]),
            victim.setup(),
            move |_| v.nice() == Some(19),
        )
        .await;
    }

    // The host's identity and kernel.
    for (name, code) in [
        ("sethostname", "print(libc.sethostname(b'tgx-host', 8))"),
        (
            "set_the_hostname_via_procfs",
            "put('/proc/sys/kernel/hostname', 'tgx-host')",
        ),
    ] {
        let original = hostname.0.clone();
        b.attempt(
            Probe::py(name, code)
                .control(NONE)
                .targets(&["strict", "restricted"]),
            || {
                hostname.restore();
                json!({})
            },
            move |_| {
                let now = nix::unistd::gethostname().unwrap();
                if now != original {
                    nix::unistd::sethostname(&original).unwrap();
                }
                now != original
            },
        )
        .await;
    }
    b.attempt(
        Probe::py(
            "read_the_kernel_log_with_syslog",
            "
            buf = ctypes.create_string_buffer(1 << 21)
            n = libc.klogctl(3, buf, 1 << 21)
            print([l for l in buf.raw[:max(n, 0)].decode(errors='replace').splitlines() if 'tgx-kmsg' in l])
            ",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(kmsg.clone()),
    )
    .await;
    b.attempt(
        Probe::py(
            "read_the_kernel_log_from_dev_kmsg",
            "
            fd = os.open('/dev/kmsg', os.O_RDONLY | os.O_NONBLOCK)
            found = []
            while True:
                try:
                    rec = os.read(fd, 8192)
                except BlockingIOError:
                    break
                except OSError:
                    continue
                if b'tgx-kmsg' in rec:
                    found.append(rec)
            print(found)
            ",
        )
        .control(NONE)
        .targets(&["strict", "restricted"]),
        nothing,
        leaked(kmsg.clone()),
    )
    .await;
    for (name, code) in [
        (
            "bpf_map_create",
            "attr = ctypes.create_string_buffer(128)\nstruct.pack_into('IIII', attr, 0, 2, 4, 4, 1)\nif libc.syscall(321, L(0), attr, L(128)) >= 0: won('bpf')",
        ),
        (
            "add_key",
            "if libc.syscall(248, b'user', b'tgx', b'payload', L(7), L(-2)) > 0: won('add_key')",
        ),
        (
            "userfaultfd",
            "if libc.syscall(323, L(0)) >= 0: won('userfaultfd')",
        ),
        (
            "perf_event_open",
            "attr = ctypes.create_string_buffer(128)\nstruct.pack_into('IIQ', attr, 0, 1, 128, 0)\nif libc.syscall(298, attr, L(0), L(-1), L(-1), L(0)) >= 0: won('perf_event_open')",
        ),
        (
            "io_uring_setup",
            "params = ctypes.create_string_buffer(120)\nif libc.syscall(425, L(4), params) >= 0: won('io_uring')",
        ),
    ] {
        b.attempt(
            Probe::py(name, code)
                .control(NONE)
                .targets(&["strict", "restricted"]),
            canary(),
            won(),
        )
        .await;
    }
    b.attempt(
        Probe::py(
            "open_by_handle_at_reads_a_file_by_its_handle",
            "
            h = bytes.fromhex(A['handle'])
            buf = ctypes.create_string_buffer(h, len(h))
            mfd = os.open('.', os.O_RDONLY)
            fd = libc.syscall(304, L(mfd), buf, L(0))
            if fd >= 0:
                print(os.read(fd, 4096))
            ",
        )
        .control(NONE)
        .targets(&["strict"]),
        nothing,
        leaked(secret.clone()),
    )
    .await;
    if let Some(before) = agent_before.clone() {
        let (a1, a2) = (agent_file.clone(), agent_file.clone());
        let (b1, b2) = (before.clone(), before);
        let want = agent.display().to_string();
        b.attempt(
            Probe::py(
                "set_the_cgroup_release_agent",
                "put('/sys/fs/cgroup/pids/release_agent', A['agent'])",
            )
            .control(NONE)
            .targets(&["strict", "restricted"]),
            move || {
                // (An empty write does not reach the kernel; a newline clears the agent.)
                fs::write(&a1, format!("{}\n", b1.trim())).unwrap();
                json!({})
            },
            move |_| {
                let now = fs::read_to_string(&a2).unwrap_or_default();
                fs::write(&a2, format!("{}\n", b2.trim())).unwrap();
                assert_eq!(
                    fs::read_to_string(&a2).unwrap().trim(),
                    b2.trim(),
                    "the release agent was not restored"
                );
                now.trim() == want
            },
        )
        .await;
    } else {
        println!("[privilege] set_the_cgroup_release_agent: skipped, no cgroup v1 pids hierarchy");
    }
    victim.stop();
    let _ = holder.kill();
    let _ = holder.wait();
    b.finish();
}

// ===== resources =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_escapes_fail() {
    let fx = Fixture::new();
    let rw = fx.rw.clone();
    let mut b = Battery::new("resources", "res", &fx);
    let won = || won(rw.clone());
    let canary = || removing(vec![rw.join("canary")]);
    let forks = rw.join("forks");
    let fork_judge = || {
        let forks = forks.clone();
        move |_: &Run| count_entries(&forks) > 64 || !can_spawn()
    };
    let fork_setup = || removing(vec![forks.clone()]);

    // Processes.
    b.attempt(
        Probe::py("fork_bomb", "fork_bomb(150)")
            .control(NONE)
            .targets(&["standard"]),
        fork_setup(),
        fork_judge(),
    )
    .await;
    {
        let threads = rw.join("threads");
        let t2 = threads.clone();
        b.attempt(
            Probe::py(
                "thread_bomb",
                "
                import threading
                threading.stack_size(256 << 10)
                d = os.path.join(A['rw'], 'threads')
                try:
                    os.makedirs(d, exist_ok=True)
                except OSError:
                    d = None
                stop = threading.Event()
                def body(i):
                    if d:
                        try:
                            touch(os.path.join(d, str(i)))
                        except OSError:
                            pass
                    stop.wait(5)
                n = 0
                for i in range(150):
                    try:
                        threading.Thread(target=body, args=(i,), daemon=True).start()
                    except RuntimeError:
                        break
                    n += 1
                print('THREADS', n)
                sys.stdout.flush()
                stop.set()
                ",
            )
            .control(NONE)
            .targets(&["standard", "restricted"]),
            removing(vec![threads]),
            move |r| {
                let limit = if r.level == "restricted" { 16 } else { 64 };
                reported(&r.text, "THREADS").max(count_entries(&t2)) > limit
            },
        )
        .await;
    }
    b.attempt(
        Probe::py("cgroup_escape_then_fork_bomb", "
            for p in ('/sys/fs/cgroup/pids/cgroup.procs', '/sys/fs/cgroup/memory/cgroup.procs', '/sys/fs/cgroup/cgroup.procs'):
                try:
                    put(p, '0')
                    print('moved into', p)
                except OSError as e:
                    print('stayed out of', p, e)
            fork_bomb(150)
            ")
        .control(NONE)
        .targets(&["standard", "strict"]),
        fork_setup(),
        fork_judge(),
    )
    .await;
    b.attempt(
        Probe::py(
            "raise_the_own_pids_limit_then_fork_bomb",
            "
            try:
                for line in open('/proc/self/cgroup'):
                    parts = line.strip().split(':', 2)
                    if parts[1] == 'pids' and parts[2] != '/':
                        put('/sys/fs/cgroup/pids' + parts[2] + '/pids.max', 'max')
                        print('raised', parts[2])
            except OSError as e:
                print('kept the limit:', e)
            fork_bomb(150)
            ",
        )
        .control(NONE)
        .targets(&["standard", "strict"]),
        fork_setup(),
        fork_judge(),
    )
    .await;
    b.attempt(
        Probe::py(
            "restricted_forks",
            "
            pid = os.fork()
            if pid == 0:
                os.write(1, b'TG' + b'WON child' + bytes([10]))
                os._exit(0)
            os.waitpid(pid, 0)
            ",
        )
        .targets(&["restricted"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "restricted_spawns_a_subprocess",
            "
            import subprocess
            r = subprocess.run([sys.executable, '-c', 'print(chr(84) + chr(71) + chr(87) + chr(79) + chr(78), 1)'], capture_output=True, text=True)
            print(r.stdout)
            ",
        )
        .targets(&["restricted"]),
        canary(),
        won(),
    )
    .await;

    // Memory.
    b.attempt(
        Probe::py(
            "heap_balloon_of_1_5_gib",
            "blob = b'x' * (1536 << 20)\nwon('heap balloon')",
        )
        // Filling 1.5 GiB takes about a second; on a busy machine the 3 s default was too short
        // for the positive control.
        .timeout(10_000)
        .control(Control::Direct)
        .targets(&["standard", "strict"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "shared_memory_balloon_of_1_5_gib",
            "
            import mmap
            n = 1536 << 20
            m = mmap.mmap(-1, n)
            chunk = b'x' * (64 << 20)
            for i in range(0, n, len(chunk)):
                m[i:i + len(chunk)] = chunk
            won('shared memory balloon')
            ",
        )
        .timeout(10_000)
        .control(NONE)
        .targets(&["standard"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "memfd_balloon_of_1_5_gib_in_files_under_the_size_limit",
            "
            fds = []
            chunk = b'x' * (32 << 20)
            for i in range(48):
                fd = os.memfd_create('tgx')
                os.write(fd, chunk)
                fds.append(fd)
            won('memfd balloon')
            ",
        )
        .timeout(10_000)
        .control(NONE)
        .targets(&["standard"]),
        canary(),
        won(),
    )
    .await;
    b.attempt(
        Probe::py(
            "restricted_balloon_of_200_mib",
            "blob = b'x' * (200 << 20)\nwon('200 MiB')",
        )
        .targets(&["restricted"]),
        canary(),
        won(),
    )
    .await;

    // Processes that outlive the call.
    let spin_log = rw.join("spin.log");
    let spin_pid = rw.join("grandchild.pid");
    let grandchild = |parent_code: &str| {
        format!(
            "{}{}",
            dedent(
                "
                log = os.path.join(A['rw'], 'spin.log')
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        fd = os.open('/dev/null', os.O_RDWR)
                        for i in (0, 1, 2):
                            os.dup2(fd, i)
                        try:
                            me = os.readlink('/proc/self')
                        except OSError:
                            me = str(os.getpid())
                        touch(os.path.join(A['rw'], 'grandchild.pid'), me)
                        end = time.time() + 10
                        while time.time() < end:
                            with open(log, 'a') as f:
                                f.write('.')
                            t = time.time()
                            while time.time() - t < 0.05:
                                pass
                    os._exit(0)
                "
            ),
            dedent(parent_code)
        )
    };
    let prefix = b.prefix.clone();
    let survivor_judge = || {
        let (log, pidf, prefix) = (spin_log.clone(), spin_pid.clone(), prefix.clone());
        move |_: &Run| {
            let size = || fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            let before = size();
            sleep(Duration::from_millis(300));
            let grew = size() > before;
            let alive = fs::read_to_string(&pidf)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                .is_some_and(|p| alive_with_prefix(p, &prefix));
            grew || alive
        }
    };
    let survivor_setup = || removing(vec![spin_log.clone(), spin_pid.clone()]);
    b.attempt(
        Probe::py(
            "cpu_spin_past_the_deadline_with_a_double_forked_grandchild",
            &grandchild("while True:\n    pass\n"),
        )
        .timeout(1000)
        .control(NONE)
        .targets(&["standard", "strict"]),
        survivor_setup(),
        survivor_judge(),
    )
    .await;
    b.attempt(
        Probe::py(
            "double_forked_grandchild_outlives_a_normal_exit",
            &grandchild("time.sleep(0.3)\nprint('parent done')\n"),
        )
        .control(NONE)
        .targets(&["standard", "strict"]),
        survivor_setup(),
        survivor_judge(),
    )
    .await;

    // Output.
    b.attempt(
        Probe::py(
            "stdout_flood_of_1_gib",
            "
            chunk = b'x' * (1 << 20)
            for i in range(1024):
                sys.stdout.buffer.write(chunk)
            ",
        )
        .control(Control::Direct)
        .max_output(64 << 10)
        .timeout(5000)
        .targets(&["standard"]),
        nothing,
        |r| r.out_len > (64 << 10) + 1024,
    )
    .await;
    b.attempt(
        Probe::py(
            "stderr_flood_of_1_gib",
            "
            chunk = b'e' * (1 << 20)
            for i in range(1024):
                sys.stderr.buffer.write(chunk)
            sys.exit(3)
            ",
        )
        .control(Control::Direct)
        .timeout(5000)
        .targets(&["standard"]),
        nothing,
        |r| r.err_len > 64 << 10,
    )
    .await;

    // Descriptors and files.
    b.attempt(
        Probe::py(
            "descriptor_exhaustion",
            "
            n = 0
            try:
                while n < 5000:
                    os.dup(2)
                    n += 1
            except OSError:
                pass
            print('FDS', n)
            ",
        )
        .control(Control::Direct)
        .targets(&["standard", "strict", "restricted"]),
        nothing,
        |r| reported(&r.text, "FDS") > 256,
    )
    .await;
    {
        let big = rw.join("big");
        let b2 = big.clone();
        let w = won();
        b.attempt(
            Probe::py(
                "file_of_100_mib",
                "
                chunk = bytes(1 << 20)
                with open(os.path.join(A['rw'], 'big'), 'wb') as f:
                    for i in range(100):
                        f.write(chunk)
                won('100 MiB file')
                ",
            )
            .control(Control::Direct)
            .targets(&["standard", "strict"]),
            removing(vec![big, rw.join("canary")]),
            move |r| w(r) || fs::metadata(&b2).is_ok_and(|m| m.len() >= 100 << 20),
        )
        .await;
    }
    b.finish();
}

//! Helpers of the gateway's tests: a [`StdioSpawner`] that starts a plain child process
//! (killed on drop, stderr tail kept), a pipeline that forwards calls to an [`Upstream`], and a
//! client bridge and progress sink that record what reaches the caller.
#![cfg(test)]
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_core::{
    BoxFuture, CallRequest, ClientBridge, ElicitAnswer, LogLevel, Pipeline, Principal, PrincipalId,
    ProgressSink, Registry, SamplingReply, SamplingRequest, ToolBuilder, ToolError, ToolResult,
};
use toolgate_gateway::upstream::{
    Connector, StdioHandle, StdioLaunch, StdioProcess, StdioSpawner, Upstream,
};
use toolgate_gateway::{GatewayError, ServerEntry, ServerName};

/// Lines of stderr kept.
const TAIL_LINES: usize = 20;

/// Starts the launch as a plain child process: the program, its arguments, only the launch's
/// environment (plus PATH), piped stdio. Records each launch.
#[derive(Default)]
pub struct TestSpawner {
    pub launches: Mutex<Vec<StdioLaunch>>,
}

struct ChildHandle {
    kill: CancellationToken,
    status: watch::Receiver<Option<String>>,
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl StdioHandle for ChildHandle {
    fn stderr_tail(&self) -> String {
        let tail = self.tail.lock().unwrap();
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    fn kill(&self) {
        self.kill.cancel();
    }

    fn exited(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        let mut status = self.status.clone();
        Box::pin(async move {
            match status.wait_for(Option::is_some).await {
                Ok(s) => s.clone().unwrap_or_default(),
                Err(_) => "gone".to_owned(),
            }
        })
    }
}

impl Drop for ChildHandle {
    fn drop(&mut self) {
        self.kill.cancel();
    }
}

impl StdioSpawner for TestSpawner {
    fn spawn(&self, launch: &StdioLaunch) -> Result<StdioProcess, GatewayError> {
        self.launches.lock().unwrap().push(launch.clone());
        let mut command = tokio::process::Command::new(&launch.program);
        command
            .args(&launch.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(launch.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &launch.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|e| {
            GatewayError::Unavailable(format!("cannot start {}: {e}", launch.program.display()))
        })?;
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let lines = Arc::clone(&tail);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let mut tail = lines.lock().unwrap();
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        let kill = CancellationToken::new();
        let (tx, status) = watch::channel(None);
        let killed = kill.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status,
                () = killed.cancelled() => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            let text = match status {
                Ok(s) => s.to_string(),
                Err(e) => format!("unknown status: {e}"),
            };
            let _ = tx.send(Some(text));
        });
        Ok(StdioProcess {
            stdout: Box::pin(stdout),
            stdin: Box::pin(stdin),
            handle: Box::new(ChildHandle { kill, status, tail }),
        })
    }
}

/// The test upstream binary.
pub fn test_upstream() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate-test-upstream"))
}

/// An entry starting `program` with `args`.
pub fn entry(program: &Path, args: &[&str]) -> ServerEntry {
    ServerEntry {
        command: Some(program.to_path_buf()),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        ..ServerEntry::default()
    }
}

pub fn server_name(name: &str) -> ServerName {
    toolgate_gateway::upstream::test_server_name(name).unwrap()
}

/// An upstream over the test spawner.
pub fn upstream(name: &str, entry: ServerEntry) -> (Upstream, Arc<TestSpawner>) {
    let spawner = Arc::new(TestSpawner::default());
    let connector = Connector {
        stdio: spawner.clone(),
        http: None,
    };
    (Upstream::new(server_name(name), entry, connector), spawner)
}

/// A pipeline with one tool, `proxy`, that forwards `{"tool": NAME, "args": {...}}` to the
/// upstream.
pub fn pipeline(upstream: &Upstream) -> Pipeline {
    let upstream = upstream.clone();
    let proxy = ToolBuilder::new(
        "proxy",
        "Forwards a call to the test upstream. Use it in tests only.",
    )
    .input_schema(json!({"type": "object"}))
    // Not retried by the pipeline: each test sees the upstream's first answer.
    .idempotent(false)
    .handler(move |args: Value, ctx| {
        let upstream = upstream.clone();
        async move {
            let tool = args["tool"].as_str().unwrap_or_default().to_owned();
            let inner = args.get("args").cloned().unwrap_or(json!({}));
            upstream.call(&tool, inner, &ctx).await
        }
    });
    let registry = Arc::new(Registry::new());
    registry.register_all(vec![Arc::new(proxy)], false).unwrap();
    Pipeline::new(registry)
}

/// A call of the upstream's `tool` through the pipeline.
pub fn request(tool: &str, args: Value) -> CallRequest {
    CallRequest::new("proxy", json!({"tool": tool, "args": args}))
        .principal(Principal::new(PrincipalId::parse("tester").unwrap()))
}

/// Calls `tool` through the pipeline.
pub async fn call(pipeline: &Pipeline, tool: &str, args: Value) -> ToolResult {
    pipeline.call(request(tool, args)).await
}

/// One progress report: progress, total, message.
pub type Report = (f64, Option<f64>, Option<String>);

/// Progress reports received.
#[derive(Default)]
pub struct Progress(pub Mutex<Vec<Report>>);

impl ProgressSink for Progress {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        self.0
            .lock()
            .unwrap()
            .push((progress, total, message.map(str::to_owned)));
    }
}

/// A client that records log messages and answers elicitation and sampling when it can.
#[derive(Default)]
pub struct Client {
    pub can: bool,
    pub logs: Mutex<Vec<(LogLevel, Option<String>, Value)>>,
    pub asked: Mutex<Vec<String>>,
}

impl ClientBridge for Client {
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        self.logs
            .lock()
            .unwrap()
            .push((level, logger.map(str::to_owned), data));
    }

    fn can_elicit(&self) -> bool {
        self.can
    }

    fn can_sample(&self) -> bool {
        self.can
    }

    fn sample(&self, request: SamplingRequest) -> BoxFuture<'_, Result<SamplingReply, ToolError>> {
        self.asked.lock().unwrap().push(request.prompt.clone());
        Box::pin(async move {
            Ok(SamplingReply {
                text: "Hi!".into(),
                model: "test-model".into(),
                stop_reason: Some("endTurn".into()),
            })
        })
    }

    fn elicit(
        &self,
        message: String,
        _schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>> {
        self.asked.lock().unwrap().push(message);
        Box::pin(async move {
            let mut values = Map::new();
            values.insert("name".into(), json!("Ada"));
            Ok(ElicitAnswer::Accept(values))
        })
    }
}

/// Waits (up to 10 s) until `check` holds.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Whether a process with this id exists (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The lines the test upstream recorded.
pub fn recorded(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

//! [`SandboxExecutor`]: core's executor for every isolation level. Command tools run their
//! program in the sandbox their definition asks for; in-process tools that ask for `standard` or
//! stronger run in a sandboxed worker; the rest run in process.

use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{
    BoxFuture, Call, Executor, InProcessExecutor, Isolation, ToolError, ToolOutput, ToolSpec,
};

use crate::command::{COMMAND_KIND, OutputMode, PlanCache};
use crate::launch_spec::WORKER_ARG;
use crate::runner::{Finished, Job, Runner};
use crate::worker::{WorkerReply, WorkerRequest};

/// The executor that enforces isolation levels (Linux).
pub struct SandboxExecutor {
    runner: Arc<Runner>,
    plans: PlanCache,
    in_process: InProcessExecutor,
}

impl std::fmt::Debug for SandboxExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxExecutor")
            .field("runner", &self.runner)
            .finish_non_exhaustive()
    }
}

impl SandboxExecutor {
    pub fn new(runner: Arc<Runner>) -> Self {
        Self {
            runner,
            plans: PlanCache::default(),
            in_process: InProcessExecutor,
        }
    }

    /// The runner calls go through (its configuration, the user programs run as).
    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    async fn run_command(&self, call: &Call, spec: &ToolSpec) -> ToolOutput {
        let plan = self.plans.get(spec.definition_hash(), spec.definition())?;
        let limits = spec.limits();
        let env = plan
            .env
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
            .collect();
        let stdin = serde_json::to_vec(&call.input)
            .map_err(|e| ToolError::execution(format!("arguments: {e}")))?;
        let job = Job {
            level: limits.isolation,
            program: plan.program.clone(),
            args: plan.argv(&call.input),
            env,
            read_paths: plan.read_paths.clone(),
            write_paths: plan.write_paths.clone(),
            allowed_hosts: plan.allowed_hosts.clone(),
            stdin,
            timeout: limits.timeout,
            max_stdout: limits.max_output_bytes.saturating_add(1),
            label: format!("Tool {}", spec.name()),
        };
        let done = self.runner.run(job, &call.request.cancel).await?;
        let what = format!("Command {}", plan.program.display());
        if done.stdout_cut {
            return match plan.output {
                OutputMode::Text => Ok(Value::String(text(&done.stdout))),
                OutputMode::Json => Err(ToolError::execution(format!(
                    "{what} wrote more than {} bytes to stdout (constraints.max_output_bytes); it was stopped",
                    limits.max_output_bytes
                ))
                .permanent()),
            };
        }
        if !done.success() {
            return Err(failure(&what, &done, self.runner.config().memory_bytes));
        }
        match plan.output {
            OutputMode::Text => Ok(Value::String(text(&done.stdout))),
            OutputMode::Json => serde_json::from_slice(&done.stdout).map_err(|e| {
                ToolError::execution(format!(
                    "{what} did not print valid JSON (run.output = \"json\"): {e}; it printed: {}",
                    preview(&done.stdout)
                ))
                .permanent()
            }),
        }
    }

    async fn run_worker(&self, call: &Call, spec: &ToolSpec) -> ToolOutput {
        let limits = spec.limits();
        let request = WorkerRequest {
            tool: spec.name().to_string(),
            hash: spec.definition_hash().to_owned(),
            principal: call.request.principal.id.to_string(),
            args: call.input.clone(),
        };
        let stdin = serde_json::to_vec(&request)
            .map_err(|e| ToolError::execution(format!("worker request: {e}")))?;
        let launcher = self.runner.config().launcher.clone();
        let job = Job {
            level: limits.isolation,
            program: launcher,
            args: vec![WORKER_ARG.to_owned()],
            env: Vec::new(),
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            allowed_hosts: Vec::new(),
            stdin,
            timeout: limits.timeout,
            max_stdout: limits.max_output_bytes.saturating_add(64 * 1024),
            label: format!("Tool {}", spec.name()),
        };
        let done = self.runner.run(job, &call.request.cancel).await?;
        let what = format!("Tool {} (isolated worker)", spec.name());
        match serde_json::from_slice::<WorkerReply>(&done.stdout) {
            Ok(reply) => reply.into_output(),
            Err(_) if !done.success() => {
                Err(failure(&what, &done, self.runner.config().memory_bytes))
            }
            Err(e) => Err(ToolError::execution(format!(
                "{what} answered something unreadable: {e}"
            ))
            .permanent()),
        }
    }
}

fn text(bytes: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(bytes).into_owned();
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    s
}

fn preview(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    if s.is_empty() {
        "nothing".to_owned()
    } else {
        format!("{s:?}")
    }
}

fn failure(what: &str, done: &Finished, memory: u64) -> ToolError {
    let how = match (done.code, done.signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned());
            format!("was killed by {name}")
        }
        _ => "ended without a status".to_owned(),
    };
    let mut message = format!("{what} {how}");
    if done.out_of_memory {
        message.push_str(&format!(
            "; it ran out of memory (limit {} MiB)",
            memory >> 20
        ));
    } else if done.signal == Some(libc::SIGXCPU) {
        message.push_str("; it used up its CPU time limit");
    }
    if !done.stderr_tail.is_empty() {
        let tail: String = done
            .stderr_tail
            .chars()
            .rev()
            .take(1000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        message.push_str(&format!(": {tail}"));
    }
    ToolError::execution(message).permanent()
}

impl Executor for SandboxExecutor {
    fn execute<'a>(&'a self, call: &'a mut Call) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(registered) = call.tool.clone() else {
                return self.in_process.execute(call).await;
            };
            let spec = registered.spec();
            let is_command = spec
                .definition()
                .run
                .as_ref()
                .is_some_and(|r| r.kind == COMMAND_KIND);
            if is_command {
                return self.run_command(call, spec).await;
            }
            if spec.limits().isolation == Isolation::None || registered.handler().is_none() {
                return self.in_process.execute(call).await;
            }
            self.run_worker(call, spec).await
        })
    }
}

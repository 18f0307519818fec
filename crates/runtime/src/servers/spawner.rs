//! Stdio upstreams run inside toolgate's sandbox: the gateway's [`StdioSpawner`] over the
//! sandbox runner's long-lived sessions, at the entry's isolation level.

use std::pin::Pin;
use std::sync::Arc;

use toolgate_gateway::GatewayError;
use toolgate_gateway::upstream::{StdioHandle, StdioLaunch, StdioProcess, StdioSpawner};
use toolgate_sandbox::{Runner, SessionHandle, SessionJob};

/// Starts each stdio upstream as a sandboxed session of `runner`.
pub struct SandboxSpawner {
    runner: Arc<Runner>,
}

impl SandboxSpawner {
    /// A spawner over `runner` (its launcher, program user and network policy).
    pub fn new(runner: Arc<Runner>) -> Self {
        Self { runner }
    }
}

impl std::fmt::Debug for SandboxSpawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxSpawner").finish_non_exhaustive()
    }
}

impl StdioSpawner for SandboxSpawner {
    fn spawn(&self, launch: &StdioLaunch) -> Result<StdioProcess, GatewayError> {
        let job = SessionJob {
            level: launch.level,
            program: launch.program.clone(),
            args: launch.args.clone(),
            env: launch.env.clone(),
            cwd: launch.cwd.clone(),
            read_paths: launch.access.read_paths.clone(),
            write_paths: launch.access.write_paths.clone(),
            // Validated with the entry: every one is `host:port`.
            allowed_hosts: launch.access.host_ports(),
            label: launch.label.clone(),
        };
        let session = self
            .runner
            .spawn_session(job)
            .map_err(|e| GatewayError::Unavailable(toolgate_core::ErrorChain(&e).to_string()))?;
        let (stdin, stdout, handle) = session.into_parts();
        Ok(StdioProcess {
            stdout: Box::pin(stdout),
            stdin: Box::pin(stdin),
            handle: Box::new(Handle(handle)),
        })
    }
}

/// The spawner of a runtime without a sandbox runner: every stdio server is unavailable.
pub(crate) struct NoStdio;

impl StdioSpawner for NoStdio {
    fn spawn(&self, launch: &StdioLaunch) -> Result<StdioProcess, GatewayError> {
        Err(GatewayError::Unavailable(format!(
            "{}: this runtime has no sandbox runner to start stdio servers in",
            launch.label
        )))
    }
}

/// A running session as the gateway controls it.
struct Handle(SessionHandle);

impl StdioHandle for Handle {
    fn stderr_tail(&self) -> String {
        self.0.stderr_tail()
    }

    fn kill(&self) {
        self.0.kill();
    }

    fn exited(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        Box::pin(async move { self.0.wait().await.to_string() })
    }
}

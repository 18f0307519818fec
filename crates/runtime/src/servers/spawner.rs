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
        let allowed_hosts = launch
            .access
            .allowed_hosts
            .iter()
            .map(|h| host_port(&launch.label, h))
            .collect::<Result<Vec<_>, _>>()?;
        let job = SessionJob {
            level: launch.level,
            program: launch.program.clone(),
            args: launch.args.clone(),
            env: launch.env.clone(),
            cwd: launch.cwd.clone(),
            read_paths: launch.access.read_paths.clone(),
            write_paths: launch.access.write_paths.clone(),
            allowed_hosts,
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

/// `host:port` as the sandbox's allow-list takes it.
fn host_port(label: &str, entry: &str) -> Result<(String, u16), GatewayError> {
    entry
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?)))
        .filter(|(host, _)| !host.is_empty())
        .ok_or_else(|| {
            GatewayError::Invalid(format!(
                "{label}: allowed_hosts entry {entry:?} is not host:port; write it as \"api.example.com:443\""
            ))
        })
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

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn allowed_hosts_are_host_and_port() {
        assert_eq!(
            host_port("Server x", "api.example.com:443").unwrap(),
            ("api.example.com".to_owned(), 443)
        );
        assert_eq!(
            host_port("Server x", "[::1]:8080").unwrap(),
            ("::1".to_owned(), 8080)
        );
        for bad in ["api.example.com", ":443", "host:http"] {
            let err = host_port("Server x", bad).unwrap_err().to_string();
            assert!(
                err.contains("host:port") && err.contains("Server x"),
                "{err}"
            );
        }
    }
}

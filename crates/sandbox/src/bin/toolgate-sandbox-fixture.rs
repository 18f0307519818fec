//! A launcher binary for toolgate-sandbox's own tests: the hidden modes, plus in-process test
//! tools for the worker mode. Not installed with toolgate.

use std::sync::Arc;

use serde_json::json;
use toolgate_core::{Constraints, Isolation, ParamType, Parameter, Tool, ToolBuilder};

fn isolated(name: &str, description: &str, isolation: Isolation) -> ToolBuilder {
    ToolBuilder::new(name, description).constraints(Constraints {
        isolation: Some(isolation),
        timeout_ms: Some(1500),
        ..Constraints::default()
    })
}

fn tools() -> Vec<Arc<dyn Tool>> {
    let spin = isolated(
        "spin_forever",
        "Spins the CPU without ever yielding. Use in tests only.",
        Isolation::Standard,
    )
    .handler(|_args, _ctx| async move {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    });
    let read = isolated(
        "read_path",
        "Reads a file and returns its text. Use in tests only.",
        Isolation::Strict,
    )
    .param(
        Parameter::new("path", ParamType::String)
            .description("File")
            .required(),
    )
    .handler(|args, _ctx| async move {
        let path = args["path"].as_str().unwrap_or_default().to_owned();
        std::fs::read_to_string(&path)
            .map(|t| json!({ "text": t }))
            .map_err(|e| toolgate_core::ToolError::execution(format!("Could not read {path}: {e}")))
    });
    let whoami = isolated(
        "pid_in_sandbox",
        "Returns the worker's process id. Use in tests only.",
        Isolation::Restricted,
    )
    .handler(|_args, _ctx| async move { Ok(json!({ "pid": std::process::id() })) });
    vec![Arc::new(spin), Arc::new(read), Arc::new(whoami)]
}

/// `hold-session LEVEL`: starts a session of `/bin/sleep 300` at LEVEL with this binary as the
/// launcher, prints the launcher's pid, and waits to be killed (the test of sessions that do
/// not outlive their executor).
fn hold_session(level: &str) -> i32 {
    let Ok(level) = serde_json::from_value::<Isolation>(json!(level)) else {
        eprintln!("hold-session: unknown level {level}");
        return 2;
    };
    let Ok(exe) = std::env::current_exe() else {
        return 2;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 2;
    };
    rt.block_on(async move {
        let runner = toolgate_sandbox::Runner::new(toolgate_sandbox::SandboxConfig::new(exe));
        let job = toolgate_sandbox::SessionJob {
            level,
            program: "/bin/sleep".into(),
            args: vec!["300".into()],
            env: Vec::new(),
            cwd: None,
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            allowed_hosts: Vec::new(),
            label: "Server held".into(),
        };
        match runner.start_session(job).await {
            Ok(session) => {
                println!("{}", session.handle.pid().unwrap_or(0));
                let _ = session.wait().await;
                0
            }
            Err(e) => {
                eprintln!("hold-session: {e}");
                1
            }
        }
    })
}

fn main() {
    if let Some(code) = toolgate_sandbox::hidden_main(tools) {
        std::process::exit(code);
    }
    let args: Vec<String> = std::env::args().collect();
    if let [_, mode, level] = args.as_slice()
        && mode == "hold-session"
    {
        std::process::exit(hold_session(level));
    }
    eprintln!("toolgate-sandbox-fixture: a launcher for tests; started by the sandbox executor");
    std::process::exit(2);
}

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

fn main() {
    if let Some(code) = toolgate_sandbox::hidden_main(tools) {
        std::process::exit(code);
    }
    eprintln!("toolgate-sandbox-fixture: a launcher for tests; started by the sandbox executor");
    std::process::exit(2);
}

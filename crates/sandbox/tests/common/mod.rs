//! Shared test harness: a registry with the command kind, a pipeline with the sandbox executor
//! whose launcher is this crate's fixture binary.
#![cfg(test)]
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{
    CallRequest, Format, Pipeline, PipelineBuilder, Registry, ToolDefinition, ToolResult,
};
use toolgate_net::NetPolicy;
use toolgate_sandbox::{CommandKind, Runner, SandboxConfig, SandboxExecutor};

pub const FIXTURE: &str = env!("CARGO_BIN_EXE_toolgate-sandbox-fixture");

pub fn config() -> SandboxConfig {
    let mut c = SandboxConfig::new(FIXTURE);
    c.policy = NetPolicy {
        allow_private_network: true,
        ..NetPolicy::default()
    };
    c
}

pub struct Harness {
    pub registry: Arc<Registry>,
    pub pipeline: Pipeline,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_config(config())
    }

    pub fn with_config(config: SandboxConfig) -> Self {
        let registry = Arc::new(Registry::new());
        registry.add_run_kind(Arc::new(CommandKind));
        let runner = Arc::new(Runner::new(config));
        let pipeline = PipelineBuilder::new(Arc::clone(&registry))
            .executor(Arc::new(SandboxExecutor::new(runner)))
            .build();
        Self { registry, pipeline }
    }

    pub fn add_toml(&self, toml: &str) {
        let def = ToolDefinition::parse(toml, Format::Toml).unwrap();
        self.registry.register_definition(def).unwrap();
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.pipeline.call(CallRequest::new(tool, args)).await
    }
}

/// A command tool definition running `program` with `args` at `level`.
pub fn command_tool(name: &str, level: &str, program: &str, args: &[&str], extra: &str) -> String {
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
name = "{name}"
description = "A command tool for the sandbox tests. Use in tests only."
effect = "read"
[[parameters]]
name = "arg"
type = "string"
description = "An argument"
[constraints]
isolation = "{level}"
timeout_ms = 3000
retryable = false
[run]
kind = "command"
program = "{program}"
args = [{args}]
output = "text"
{extra}
"#
    )
}

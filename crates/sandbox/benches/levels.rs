//! Call latency of a trivial command tool (`/bin/true`) at each isolation level, through the
//! pipeline and the sandbox executor, against a plain spawn of the same program — one run, so
//! the ratios compare like with like. `scripts/bench-table.py` prints the table.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolgate_core::{CallRequest, Format, PipelineBuilder, Registry, ToolDefinition};
use toolgate_sandbox::{CommandKind, Runner, SandboxConfig, SandboxExecutor};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_toolgate-sandbox-fixture");

fn definition(level: &str) -> ToolDefinition {
    let text = format!(
        r#"
name = "true_{level}"
description = "Runs /bin/true. Use in benchmarks only."
effect = "read"
[constraints]
isolation = "{level}"
[run]
kind = "command"
program = "/bin/true"
"#
    );
    ToolDefinition::parse(&text, Format::Toml).unwrap_or_else(|e| panic!("{e}"))
}

fn levels(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let registry = Arc::new(Registry::new());
    registry.add_run_kind(Arc::new(CommandKind));
    for level in ["none", "standard", "strict", "restricted"] {
        registry
            .register_definition(definition(level))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let runner = Arc::new(Runner::new(SandboxConfig::new(LAUNCHER)));
    let pipeline = PipelineBuilder::new(registry)
        .executor(Arc::new(SandboxExecutor::new(runner)))
        .build();
    let mut g = c.benchmark_group("sandbox");
    g.sample_size(30);
    g.bench_function("baseline_plain_spawn_true", |b| {
        b.iter(|| {
            let status = std::process::Command::new("/bin/true").status();
            assert!(status.is_ok_and(|s| s.success()));
        });
    });
    for level in ["none", "standard", "strict", "restricted"] {
        g.bench_function(format!("command_true_{level}"), |b| {
            b.iter(|| {
                let r = rt
                    .block_on(pipeline.call(CallRequest::new(format!("true_{level}"), json!({}))));
                assert!(r.data().is_some(), "{r:?}");
            });
        });
    }
    g.finish();
}

criterion_group!(benches, levels);
criterion_main!(benches);

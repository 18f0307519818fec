//! Criterion benchmarks: one call through the production runtime (`Runtime::open`, the pipeline
//! `toolgate serve` and `toolgate call` run: quotas, the durable approval gate, the audit stage and
//! observer, the event hub, the policy client and the sandbox executor) on a temporary SQLite
//! database, beside the same built-in called through a bare pipeline in the same run.
//!
//! - `baseline_bare_pipeline_calculator`: `calculator` through `PipelineBuilder::new(..).build()`
//!   (no store, no audit, no executor): the floor.
//! - `calculator_read`: `calculator` through the runtime; a read call gets one audit entry
//!   (`finished`, one durable commit).
//! - `todo_manager_write_audited`: `todo_manager` (`list`) through the runtime; a write tool gets
//!   two audit entries (`started`, committed before the handler runs, and `finished`).
//!
//! The calls run in process (the sandbox executor sends only command tools and isolated tools to
//! the launcher), so the launcher is never started and the bench binary can stand as one.
//! A benchmark is not a test: a setup step that fails ends the run with its error (`main`
//! returns it) instead of unwrapping. `cargo bench -p toolgate-runtime -- --test` runs each once.

use std::error::Error;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use serde_json::{Value, json};
use toolgate_core::{CallRequest, Pipeline, PipelineBuilder, Registry, ToolResult};
use toolgate_runtime::{Runtime, RuntimeOptions};
use toolgate_store::DbUrl;

type BoxError = Box<dyn Error>;

/// A call's result, checked once before the call is timed: a failing call would measure an
/// error path.
fn checked(result: ToolResult, what: &str) -> Result<(), BoxError> {
    if result.is_ok() {
        Ok(())
    } else {
        Err(format!("{what} failed before the benchmark: {}", json!(result)).into())
    }
}

fn bench_runtime(c: &mut Criterion) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let runtime = rt.block_on(Runtime::open(RuntimeOptions {
        db: Some(DbUrl::Sqlite(dir.path().join("bench.db"))),
        root: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    }))?;
    let registry = Arc::new(Registry::new());
    registry.register_all(toolgate_builtins::builtin_tools(dir.path())?, true)?;
    let bare: Pipeline = PipelineBuilder::new(registry).build();

    let calculator = json!({ "expression": "6*7" });
    let todo = json!({ "action": "list" });
    let call = |tool: &str, args: &Value| CallRequest::new(tool, args.clone());
    checked(
        rt.block_on(bare.call(call("calculator", &calculator))),
        "calculator (bare pipeline)",
    )?;
    checked(
        rt.block_on(runtime.call(call("calculator", &calculator), None)),
        "calculator (runtime)",
    )?;
    checked(
        rt.block_on(runtime.call(call("todo_manager", &todo), None)),
        "todo_manager (runtime)",
    )?;

    let mut g = c.benchmark_group("runtime_call");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("baseline_bare_pipeline_calculator", |b| {
        b.iter(|| rt.block_on(bare.call(black_box(call("calculator", &calculator)))))
    });
    g.bench_function("calculator_read", |b| {
        b.iter(|| rt.block_on(runtime.call(black_box(call("calculator", &calculator)), None)))
    });
    g.bench_function("todo_manager_write_audited", |b| {
        b.iter(|| rt.block_on(runtime.call(black_box(call("todo_manager", &todo)), None)))
    });
    g.finish();
    rt.block_on(runtime.drain(Duration::from_secs(5)));
    rt.block_on(runtime.store().close());
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let mut criterion = Criterion::default().configure_from_args();
    bench_runtime(&mut criterion)?;
    criterion.final_summary();
    Ok(())
}

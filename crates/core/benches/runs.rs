//! Criterion benchmark of what a run budget adds to a call (issue 22): one no-op call through
//! the pipeline with the run budget stage, without a run (`baseline_no_run`: the stage only
//! looks at the request) and with one (`with_run_memory_ledger`: checked and counted in
//! [`MemoryRuns`], the run's counters held in process), in the same run, so the ratio is the
//! cost of the check (`scripts/bench-table.py` prints medians and ratios). The store's ledger
//! adds a database round trip per call on top; `crates/store/tests/runs.rs` covers it.
//!
//! A benchmark is not a test: a setup step that fails ends the run with its error (`main`
//! returns it). `cargo bench -p toolgate-core --bench runs -- --test` runs each once.

use std::error::Error;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use serde_json::json;
use toolgate_core::{
    Budget, CallRequest, MemoryRuns, PipelineBuilder, Registry, RunBudgetStage, RunLedger,
    ToolBuilder,
};

type BoxError = Box<dyn Error>;

fn bench_runs(c: &mut Criterion) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(
        ToolBuilder::new("noop", "Returns an empty object; for benchmarks.")
            .handler(|_, _| async { Ok(json!({})) }),
    ))?;
    let runs = Arc::new(MemoryRuns::new());
    let pipeline = PipelineBuilder::new(registry)
        .stage(Arc::new(RunBudgetStage::new(
            Arc::clone(&runs) as Arc<dyn RunLedger>
        )))
        .build();
    // No limit is ever reached: every timed call does the whole check and count.
    let run = runs.create("local", Budget::default());
    let first = rt.block_on(pipeline.call(CallRequest::new("noop", json!({})).run(run)));
    if !first.is_ok() {
        return Err(format!(
            "the call under a run failed before the benchmark: {}",
            json!(first)
        )
        .into());
    }
    let mut group = c.benchmark_group("runs");
    group.bench_function("baseline_no_run", |b| {
        b.iter(|| rt.block_on(pipeline.call(black_box(CallRequest::new("noop", json!({}))))));
    });
    group.bench_function("with_run_memory_ledger", |b| {
        b.iter(|| {
            rt.block_on(pipeline.call(black_box(CallRequest::new("noop", json!({})).run(run))))
        });
    });
    group.finish();
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let mut criterion = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_runs(&mut criterion)?;
    criterion.final_summary();
    Ok(())
}

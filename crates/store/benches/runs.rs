//! Criterion benchmark of what a run budget costs per call on SQLite (issue 22): a no-op tool
//! called through the pipeline with the run budget stage over the store, without a run
//! (`baseline_no_run`: the stage only looks at the request), with a run counted in the store
//! (`with_run_sqlite`: one transaction admitting the call and taking an attempt of the tool, one
//! settling it, each a durable commit), and with a run counted in process (`with_run_memory`,
//! core's `MemoryRuns`), in the same run. After criterion's report it times each again and
//! prints the medians in µs and the ratios to the baseline.
//!
//! A benchmark is not a test: a setup step that fails ends the run with its error (`main`
//! returns it). `cargo bench -p toolgate-store --bench runs -- --test` runs each once.

use std::error::Error;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::json;
use toolgate_core::{
    Budget, CallRequest, MemoryRuns, Pipeline, PipelineBuilder, Registry, RunBudgetStage, RunId,
    RunLedger, ToolBuilder,
};
use toolgate_store::{DbUrl, Store, StoreOptions};

type BoxError = Box<dyn Error>;

fn pipeline(ledger: Arc<dyn RunLedger>) -> Result<Pipeline, BoxError> {
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(
        ToolBuilder::new("noop", "Returns an empty object; for benchmarks.")
            .handler(|_, _| async { Ok(json!({})) }),
    ))?;
    Ok(PipelineBuilder::new(registry)
        .stage(Arc::new(RunBudgetStage::new(ledger)))
        .build())
}

fn call(run: Option<RunId>) -> CallRequest {
    let request = CallRequest::new("noop", json!({}));
    match run {
        Some(run) => request.run(run),
        None => request,
    }
}

/// The median of `n` timed calls, in µs.
fn median_us(
    rt: &tokio::runtime::Runtime,
    pipeline: &Pipeline,
    run: Option<RunId>,
    n: usize,
) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let started = Instant::now();
            black_box(rt.block_on(pipeline.call(call(run))));
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times.get(n / 2).copied().unwrap_or(0.0)
}

fn bench_runs(c: &mut Criterion, quick: bool) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let store = rt.block_on(Store::open(
        &DbUrl::Sqlite(dir.path().join("bench.db")),
        &StoreOptions::default(),
    ))?;
    let on_store = pipeline(Arc::new(store.clone()))?;
    let memory = Arc::new(MemoryRuns::new());
    let in_memory = pipeline(Arc::clone(&memory) as Arc<dyn RunLedger>)?;
    // No limit is ever reached: every timed call does the whole check and count.
    let stored = rt
        .block_on(store.create_run("local", &Budget::default()))?
        .id;
    let held = memory.create("local", Budget::default());
    for (pipeline, run, what) in [
        (&on_store, stored, "the call under a stored run"),
        (&in_memory, held, "the call under a run in memory"),
    ] {
        let first = rt.block_on(pipeline.call(call(Some(run))));
        if !first.is_ok() {
            return Err(format!("{what} failed before the benchmark: {}", json!(first)).into());
        }
    }
    let mut group = c.benchmark_group("runs");
    group.bench_function("baseline_no_run", |b| {
        b.iter(|| rt.block_on(on_store.call(black_box(call(None)))));
    });
    group.bench_function("with_run_sqlite", |b| {
        b.iter(|| rt.block_on(on_store.call(black_box(call(Some(stored))))));
    });
    group.bench_function("with_run_memory", |b| {
        b.iter(|| rt.block_on(in_memory.call(black_box(call(Some(held))))));
    });
    group.finish();
    let n = if quick { 3 } else { 2000 };
    let base = median_us(&rt, &on_store, None, n);
    let sqlite = median_us(&rt, &on_store, Some(stored), n);
    let mem = median_us(&rt, &in_memory, Some(held), n);
    println!(
        "runs: median per call over {n} calls: no run {base:.2} µs; run on SQLite {sqlite:.2} µs ({:.2}x, +{:.2} µs); run in memory {mem:.2} µs ({:.2}x, +{:.2} µs)",
        sqlite / base,
        sqlite - base,
        mem / base,
        mem - base
    );
    rt.block_on(store.close());
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let quick = std::env::args().any(|a| a == "--test");
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench_runs(&mut criterion, quick)?;
    criterion.final_summary();
    Ok(())
}

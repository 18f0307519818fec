//! `toolgate runs` (list, show): runs with their budget and consumption, read from the store as
//! the operator (every principal's).

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::json;
use toolgate_core::RunId;
use toolgate_store::StoredRun;

use crate::app::App;
use crate::cli::{RunIdArgs, RunsCommand, RunsListArgs};
use crate::exit;

pub async fn run(app: &App, cmd: &RunsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        RunsCommand::List(args) => list(app, args).await,
        RunsCommand::Show(args) => show(app, args).await,
    }
}

/// `used/max` of one budget (`used` alone without a limit).
fn of(used: u64, max: Option<u64>) -> String {
    match max {
        Some(max) => format!("{used}/{max}"),
        None => used.to_string(),
    }
}

fn elapsed(run: &StoredRun) -> String {
    let ms = run.elapsed_ms();
    of(ms, run.budget.timeout_ms)
}

async fn list(app: &App, args: &RunsListArgs) -> anyhow::Result<ExitCode> {
    let runs = app
        .store
        .runs(args.principal.as_deref(), args.limit)
        .await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({ "runs": runs }))?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        writeln!(
            out,
            "No runs. Start one with POST /v1/runs; an MCP session of a principal with a [budget] is one too."
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = String::from(
        "ID                                    PRINCIPAL  STATUS     CALLS    TURNS    MS\n",
    );
    for run in &runs {
        let _ = writeln!(
            table,
            "{:<37} {:<10} {:<10} {:<8} {:<8} {}",
            run.id,
            run.principal,
            run.status,
            of(run.tool_calls, run.budget.max_tool_calls.map(u64::from)),
            of(run.turns, run.budget.max_turns.map(u64::from)),
            elapsed(run),
        );
    }
    write!(out, "{table}")?;
    Ok(ExitCode::SUCCESS)
}

async fn show(app: &App, args: &RunIdArgs) -> anyhow::Result<ExitCode> {
    let id = RunId::parse(&args.id).map_err(anyhow::Error::msg)?;
    let Some(run) = app.store.run(id).await? else {
        eprintln!(
            "Run not found: {}. `toolgate runs list` lists the runs.",
            args.id
        );
        return Ok(exit::code(exit::FAILURE));
    };
    let calls = app
        .store
        .run_calls(id)
        .await
        .context("reading the run's calls")?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut value = serde_json::to_value(&run)?;
        value["calls"] = serde_json::to_value(&calls)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let b = &run.budget;
    let mut text = format!(
        "Run {}\n  principal   {}\n  status      {}\n  started     {}\n  tool calls  {}\n  turns       {}\n  elapsed ms  {}\n  output      {} bytes\n  attempts    at most {} failed per tool\n",
        run.id,
        run.principal,
        run.status,
        run.started_at.format("%Y-%m-%dT%H:%M:%SZ"),
        calls_shown(&run),
        of(run.turns, b.max_turns.map(u64::from)),
        elapsed(&run),
        of(run.output_bytes, b.max_output_bytes),
        b.attempts_per_tool(),
    );
    for (tool, failed) in &run.failures {
        let _ = writeln!(text, "  failed      {tool}: {failed}");
    }
    let _ = writeln!(text, "Calls ({}):", calls.len());
    for call in &calls {
        let _ = writeln!(
            text,
            "  {}  {}  {}  {} bytes  (toolgate audit show {})",
            call.at,
            call.tool,
            if call.failed { "failed" } else { "ok" },
            call.output_bytes,
            call.call_id
        );
    }
    write!(out, "{text}")?;
    Ok(ExitCode::SUCCESS)
}

/// Used calls of the budget, and the calls instances hold in reserve when there are any (see
/// ARCHITECTURE.md, "Run budgets": their use is reported at the end of a block).
fn calls_shown(run: &StoredRun) -> String {
    let used = of(run.tool_calls, run.budget.max_tool_calls.map(u64::from));
    if run.reserved_calls == 0 {
        used
    } else {
        format!(
            "{used} ({} more reserved by running instances)",
            run.reserved_calls
        )
    }
}

//! `toolgate audit`: the hash-chained record of every call — list, show, stored outputs, verify.

use std::io::Write;
use std::process::ExitCode;

use toolgate_core::{CallId, Outcome};
use toolgate_runtime::views::CallFilter;
use toolgate_store::{AuditRecord, VerifyReport};

use crate::app::App;
use crate::cli::{AuditArgs, AuditCommand, CallIdArgs};
use crate::exit;

/// `audit`, `audit show`, `audit output`, `audit verify`.
pub async fn run(app: &App, args: &AuditArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        None => list(app, args).await,
        Some(AuditCommand::Show(a)) => show(app, a).await,
        Some(AuditCommand::Output(a)) => output(app, a).await,
        Some(AuditCommand::Verify) => verify(app).await,
    }
}

fn parse_id(raw: &str) -> anyhow::Result<CallId> {
    CallId::parse(raw)
        .map_err(|e| anyhow::anyhow!("{e} (call ids look like 019a…-…; see `toolgate audit`)"))
}

async fn list(app: &App, args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let filter = CallFilter {
        tool: args.tool.clone(),
        ..CallFilter::default()
    };
    // The local operator reads every principal's calls.
    let page = app
        .runtime
        .calls_page(&filter, args.limit, None, |_, _| true)
        .await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&page)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let records = page.calls;
    if records.is_empty() {
        writeln!(out, "No calls recorded yet.")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<24}  {:<36}  {:<16}  {:<10}  {:<22}  ATTEMPTS  MS",
        "TIME", "CALL ID", "TOOL", "PRINCIPAL", "OUTCOME"
    )?;
    for r in &records {
        writeln!(
            out,
            "{:<24}  {:<36}  {:<16}  {:<10}  {:<22}  {:<8}  {:.1}",
            r.fetched_at.format("%Y-%m-%dT%H:%M:%S%.3fZ"),
            r.call_id,
            r.tool,
            r.principal,
            outcome_word(r),
            r.attempts,
            r.duration_ms
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn outcome_word(r: &AuditRecord) -> String {
    match &r.outcome {
        Outcome::Data(_) => "ok".to_owned(),
        Outcome::Error { kind, .. } => format!("error: {kind}"),
    }
}

async fn show(app: &App, args: &CallIdArgs) -> anyhow::Result<ExitCode> {
    let id = parse_id(&args.call_id)?;
    let Some(call) = app.runtime.call_detail(id, |_, _| true).await? else {
        eprintln!("error: No call {id} in the audit log");
        return Ok(exit::code(exit::FAILURE));
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string_pretty(&call)?)?;
    Ok(ExitCode::SUCCESS)
}

async fn output(app: &App, args: &CallIdArgs) -> anyhow::Result<ExitCode> {
    let id = parse_id(&args.call_id)?;
    match app.store.output(id).await? {
        Some(bytes) => {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!(
                "error: No stored output for call {id} (only outputs over 10 KB are kept apart; `toolgate audit show {id}` has the others)"
            );
            Ok(exit::code(exit::FAILURE))
        }
    }
}

async fn verify(app: &App) -> anyhow::Result<ExitCode> {
    let report = app.store.verify().await?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", verify_text(&report))?;
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        exit::code(exit::FAILURE)
    })
}

/// What `audit verify` prints: one line when all is well, else one `BROKEN:` line per finding.
pub fn verify_text(report: &VerifyReport) -> String {
    let mut text = String::new();
    if let Some(broken) = &report.first_broken {
        text.push_str(&format!(
            "BROKEN: the audit log was altered at entry {}: {}\n",
            broken.seq, broken.reason
        ));
    }
    if let Some(cut) = &report.cut {
        text.push_str(&format!("BROKEN: {cut}\n"));
    }
    for problem in &report.checkpoint_problems {
        text.push_str(&format!("BROKEN: {problem}\n"));
    }
    if !text.is_empty() {
        return text;
    }
    let anchor = match (report.anchored, report.checkpointed) {
        (false, _) => "; no checkpoint key, so removing the newest entries would go unnoticed (set [audit] key_file or TOOLGATE_AUDIT_KEY)".to_owned(),
        (true, None) if report.entries > 0 => {
            "; not checkpointed yet (a checkpoint is signed after the next call)".to_owned()
        }
        (true, None) => String::new(),
        (true, Some(seq)) => format!("; checkpoint at entry {seq} matches"),
    };
    format!(
        "ok: {} audit entries, hash chain intact{anchor}\n",
        report.entries
    )
}

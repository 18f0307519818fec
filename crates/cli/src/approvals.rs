//! `toolgate approvals` (list, show, approve, deny) and the durable approval flow `toolgate call`
//! uses when nobody can answer on the spot.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolgate_core::ToolResult;
use toolgate_runtime::decide::{Decider, Run};
use toolgate_runtime::views::ApprovalList;
use toolgate_store::{Approval, ApprovalStatus, DurableApproval};

use crate::app::App;
use crate::call::readable;
use crate::cli::{ApprovalIdArgs, ApprovalsCommand, ApprovalsListArgs, DecideArgs};
use crate::exit;

/// The approval handler of a `toolgate call` nobody can answer: a durable approval.
pub fn durable(app: &App) -> Arc<DurableApproval> {
    app.runtime.durable_approval(Arc::new(|a: &Approval| {
        format!(
            "approve it with `toolgate approvals approve {}` (or deny it with `toolgate approvals deny {}`); `toolgate call --wait` waits for the decision",
            a.id, a.id
        )
    }))
}

pub async fn run(app: &App, cmd: &ApprovalsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ApprovalsCommand::List(args) => list(app, args).await,
        ApprovalsCommand::Show(args) => show(app, args).await,
        ApprovalsCommand::Approve(args) => decide(app, args, true).await,
        ApprovalsCommand::Deny(args) => decide(app, args, false).await,
    }
}

async fn list(app: &App, args: &ApprovalsListArgs) -> anyhow::Result<ExitCode> {
    let status = args
        .status
        .as_deref()
        .map(str::parse::<ApprovalStatus>)
        .transpose()?;
    let approvals = app.store.approvals(status, None, args.limit).await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let list = ApprovalList { approvals };
        writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if approvals.is_empty() {
        writeln!(out, "No approvals.")?;
        return Ok(ExitCode::SUCCESS);
    }
    write!(out, "{}", table(&approvals))?;
    Ok(ExitCode::SUCCESS)
}

/// The table `approvals list` prints: every column as wide as its widest cell (like `tools
/// list`), the last one unpadded.
pub fn table(approvals: &[Approval]) -> String {
    let header = ["ID", "STATUS", "TOOL", "PRINCIPAL", "CREATED"].map(str::to_owned);
    let rows = approvals.iter().map(|a| {
        [
            a.id.clone(),
            a.status.to_string(),
            a.tool.clone(),
            a.principal.clone(),
            a.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
        ]
    });
    let rows: Vec<[String; 5]> = std::iter::once(header).chain(rows).collect();
    let mut widths = [0usize; 5];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

async fn show(app: &App, args: &ApprovalIdArgs) -> anyhow::Result<ExitCode> {
    let approval = find(app, &args.id).await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&approval)?)?;
    } else {
        write!(out, "{}", describe(&approval))?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn find(app: &App, id: &str) -> anyhow::Result<Approval> {
    app.store.approval(id).await?.ok_or_else(|| {
        anyhow::anyhow!("No approval {id} (list them with `toolgate approvals list`)")
    })
}

/// Who decides from this command line.
fn decider() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "operator".to_owned());
    format!("cli:{user}")
}

async fn decide(app: &App, args: &DecideArgs, approve: bool) -> anyhow::Result<ExitCode> {
    let me = crate::definitions::local_principal(app);
    let actor = decider();
    let decider = Decider {
        principal: &me,
        actor: &actor,
    };
    let reason = args.reason.as_deref();
    let decided = if approve {
        app.runtime.approve(decider, &args.id, reason).await
    } else {
        app.runtime.deny(decider, &args.id, reason).await
    };
    let decided = match decided {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", toolgate_core::ErrorChain(&e));
            return Ok(exit::code(exit::FAILURE));
        }
    };
    if !approve {
        writeln!(
            std::io::stdout().lock(),
            "Denied {} ({} will not run).",
            decided.id,
            decided.tool
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("Approved {}; running {} now.", decided.id, decided.tool);
    finish(app, &decided, args.json).await
}

/// Runs an approved approval here (once: a runner elsewhere may have claimed it) and prints its
/// result; or prints the stored result when it already ran. An approval whose principal the
/// config no longer defines ends with an `authorization` result (see `Runtime::run_approved`).
async fn finish(app: &App, approval: &Approval, json: bool) -> anyhow::Result<ExitCode> {
    let ran = app.runtime.run_approved(&approval.id).await?;
    if let Err(e) = app.store.flush_audit().await {
        eprintln!(
            "warning: the call's audit entry could not be written: {}",
            toolgate_core::ErrorChain(&e)
        );
    } else if let Err(e) = app.store.checkpoint_audit().await {
        // The signed checkpoint of the log's head (what shows a later cut of this entry).
        eprintln!("warning: {}", toolgate_core::ErrorChain(&e));
    }
    match ran {
        Run::Ran { result, .. } => print_result(&result, json),
        Run::NotClaimed => {
            // Someone else runs it: wait for its result.
            let done = wait_until(app, &approval.id, |s| {
                s != ApprovalStatus::Approved && s != ApprovalStatus::Running
            })
            .await?;
            stored_result(&done, json)
        }
    }
}

/// Prints an approval's stored result (or why there is none) and picks the exit code.
pub fn stored_result(approval: &Approval, json: bool) -> anyhow::Result<ExitCode> {
    match (&approval.status, &approval.result) {
        (ApprovalStatus::Executed, Some(result)) => {
            match serde_json::from_value::<ToolResult>(result.clone()) {
                Ok(r) => print_result(&r, json),
                Err(_) => {
                    writeln!(
                        std::io::stdout().lock(),
                        "{}",
                        serde_json::to_string_pretty(result)?
                    )?;
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        (status, _) => {
            eprintln!(
                "Approval {} is {status}: the call {}",
                approval.id,
                match status {
                    ApprovalStatus::Denied => "was denied and did not run".to_owned(),
                    ApprovalStatus::Expired => "expired before anyone decided; call the tool again to ask anew".to_owned(),
                    ApprovalStatus::Indeterminate => "started but toolgate stopped before its result was recorded; check whether it had its effect before calling again".to_owned(),
                    ApprovalStatus::Pending => format!("still waits for a decision (`toolgate approvals approve {}`)", approval.id),
                    _ => "is not finished".to_owned(),
                }
            );
            Ok(exit::code(match status {
                ApprovalStatus::Pending => exit::PENDING,
                _ => 1,
            }))
        }
    }
}

fn print_result(result: &ToolResult, json: bool) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(result)?)?;
    } else {
        write!(out, "{}", readable(result))?;
    }
    Ok(if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        exit::code(exit::FAILURE)
    })
}

/// Polls the store until the approval's status satisfies `done`.
pub async fn wait_until(
    app: &App,
    id: &str,
    done: impl Fn(ApprovalStatus) -> bool,
) -> anyhow::Result<Approval> {
    loop {
        let a = find(app, id).await?;
        if done(a.status) {
            return Ok(a);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `toolgate call --wait` after the call became approval `id`: waits for the decision, runs an
/// approved call here unless a runner elsewhere has it, and prints the final result.
pub async fn wait_and_finish(app: &App, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    eprintln!("Waiting for a decision on {id} (Ctrl-C stops waiting; the approval stays)…");
    let decided = wait_until(app, id, |s| s != ApprovalStatus::Pending).await?;
    match decided.status {
        ApprovalStatus::Approved => finish(app, &decided, json).await,
        ApprovalStatus::Running => {
            let done = wait_until(app, id, |s| s != ApprovalStatus::Running).await?;
            stored_result(&done, json)
        }
        _ => stored_result(&decided, json),
    }
}

/// An approval for people to read.
pub fn describe(a: &Approval) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "{}  {}", a.id, a.status);
    let _ = writeln!(
        t,
        "tool:        {} (definition {})",
        a.tool,
        short(&a.definition_hash)
    );
    let _ = writeln!(t, "principal:   {}", a.principal);
    if let Some(origin) = &a.origin {
        let _ = writeln!(t, "from:        {origin}");
    }
    let _ = writeln!(t, "call:        {}", a.call_id);
    if let Some(r) = &a.reason {
        let _ = writeln!(t, "reason:      {r}");
    }
    let _ = writeln!(
        t,
        "arguments:   {}",
        serde_json::to_string(&a.display).unwrap_or_default()
    );
    let _ = writeln!(t, "created:     {}", a.created_at.to_rfc3339());
    let _ = writeln!(t, "expires:     {}", a.expires_at.to_rfc3339());
    if let (Some(by), Some(at)) = (&a.decided_by, &a.decided_at) {
        let why = a
            .decision_reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        let _ = writeln!(t, "decided:     by {by} at {}{why}", at.to_rfc3339());
    }
    if let Some(result) = &a.result {
        let shown = match result.get("data") {
            Some(data) => format!("data {}", compact(data)),
            None => format!(
                "{}: {}",
                result["errorKind"].as_str().unwrap_or("error"),
                result["error"].as_str().unwrap_or("")
            ),
        };
        let _ = writeln!(t, "result:      {shown}");
    }
    t
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

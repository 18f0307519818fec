//! `toolgate call`: one call through the pipeline, printed as the envelope or a readable form.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::Value;
use toolgate_core::{
    ApprovalHandler, CallRequest, CancellationToken, ErrorChain, PreApproved, PromptApproval,
    ToolResult,
};
use toolgate_store::ApprovalStatus;

use crate::app::App;
use crate::cli::CallArgs;
use crate::prompt::TerminalPrompt as _;

/// Runs the call; exit 0 for data, 1 for an error result.
pub async fn run(app: &App, args: &CallArgs) -> anyhow::Result<ExitCode> {
    let reads_stdin = args.args.trim() == "-";
    let arguments = parse_arguments(&args.args)?;
    let principal = app.runtime.principal(args.principal.as_deref())?;
    let approval: Arc<dyn ApprovalHandler> = if args.yes {
        Arc::new(PreApproved)
    } else if !reads_stdin && std::io::stdin().is_terminal() {
        Arc::new(PromptApproval::terminal())
    } else {
        // Nobody can answer here (no terminal, or standard input carried the arguments): the
        // call waits as a durable approval.
        crate::approvals::durable(app)
    };
    let cancel = CancellationToken::new();
    let cancelled_by = toolgate_core::CancelNote::default();
    crate::exit::cancel_on_ctrl_c(cancel.clone(), cancelled_by.clone());
    let mut request = CallRequest::new(args.name.clone(), arguments)
        .principal(principal)
        .cancel_token(cancel)
        .approval(approval)
        .origin(toolgate_core::CallOrigin::cli());
    request.cancelled_by = cancelled_by;
    if let Some(key) = &args.idempotency_key {
        request = request.idempotency_key(key.clone());
    }
    if let Some(reason) = &args.reason {
        request = request.reason(reason.clone());
    }
    let result = app.pipeline().call(request).await;
    // Read-only calls' audit entries are queued for a group commit; write them before exiting.
    if let Err(e) = app.store.flush_audit().await {
        eprintln!(
            "warning: the call's audit entry could not be written: {}",
            ErrorChain(&e)
        );
    } else if let Err(e) = app.store.checkpoint_audit().await {
        // The signed checkpoint of the log's head (what shows a later cut of this entry).
        eprintln!("warning: {}", ErrorChain(&e));
    }
    if let Some(id) = &result.approval_id {
        return pending(app, args, &result, id).await;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&result)?)?;
    } else {
        write!(out, "{}", readable(&result))?;
    }
    Ok(if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        crate::exit::code(crate::exit::FAILURE)
    })
}

/// The call became (or, with a repeated idempotency key, already is) approval `id`: say so and
/// exit 3, or with --wait see it through; a repeated key whose call already ran prints that
/// result.
async fn pending(
    app: &App,
    args: &CallArgs,
    result: &ToolResult,
    id: &str,
) -> anyhow::Result<ExitCode> {
    let approval = app
        .store
        .approval(id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("Approval {id} vanished from the store"))?;
    if approval.status != ApprovalStatus::Pending || args.wait {
        if args.wait && !approval.status.is_final() {
            return crate::approvals::wait_and_finish(app, id, args.json).await;
        }
        return crate::approvals::stored_result(&approval, args.json);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(result)?)?;
    } else {
        writeln!(
            out,
            "{} needs approval: {id} is pending (expires {}).",
            result.tool,
            approval.expires_at.format("%Y-%m-%d %H:%M:%S UTC")
        )?;
        writeln!(
            out,
            "Approve it with `toolgate approvals approve {id}`, deny it with `toolgate approvals deny {id}`, or re-run with --wait."
        )?;
    }
    Ok(crate::exit::code(crate::exit::PENDING))
}

/// `--args`: inline JSON, `@FILE`, or `-` for standard input. Must be a JSON object.
pub fn parse_arguments(raw: &str) -> anyhow::Result<Value> {
    let trimmed = raw.trim();
    let (text, source) = if trimmed == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("Cannot read arguments from standard input")?;
        (s, "standard input".to_owned())
    } else if let Some(path) = trimmed.strip_prefix('@') {
        let s = std::fs::read_to_string(path)
            .with_context(|| format!("Cannot read arguments file {path}"))?;
        (s, path.to_owned())
    } else {
        (raw.to_owned(), "--args".to_owned())
    };
    let value: Value = serde_json::from_str(&text).with_context(|| {
        format!("Arguments from {source} are not valid JSON; pass an object like '{{\"path\": \"notes.txt\"}}'")
    })?;
    if !value.is_object() {
        bail!("Arguments from {source} must be a JSON object, like '{{\"path\": \"notes.txt\"}}'");
    }
    Ok(value)
}

/// The readable form of a result.
pub fn readable(result: &ToolResult) -> String {
    let attempts = match result.attempts {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    };
    let mut t = String::new();
    match (result.data(), result.error()) {
        (Some(data), _) => {
            let cut = if result.truncated {
                ", output truncated"
            } else {
                ""
            };
            t.push_str(&format!(
                "{} ok ({attempts}, {:.1} ms{cut})\n",
                result.tool, result.duration_ms
            ));
            let body = match data {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            t.push_str(&body);
            t.push('\n');
        }
        (None, Some(error)) => {
            let kind = result.error_kind().map(|k| k.as_str()).unwrap_or("error");
            t.push_str(&format!(
                "{} failed: {kind} ({attempts}, {:.1} ms)\n{error}\n",
                result.tool, result.duration_ms
            ));
        }
        (None, None) => {}
    }
    t
}

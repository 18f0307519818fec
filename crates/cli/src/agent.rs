//! `toolgate agent run`: the agent loop (`toolgate_agent`) with the CLI's principal, approval
//! handling (the terminal's y/N prompt, or a durable approval without a terminal) and output —
//! the transcript as it happens, or the whole exchange as JSON with --json.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use toolgate_agent::{AgentRequest, ApiKey, BaseUrl, End, ModelSpec};
use toolgate_core::{
    ApprovalHandler, Budget, CancelNote, CancellationToken, ErrorChain, PromptApproval,
};
use toolgate_store::Approval;

use crate::app::App;
use crate::cli::AgentRunArgs;
use crate::exit;
use crate::prompt::TerminalPrompt as _;

pub async fn run(app: &App, args: &AgentRunArgs) -> anyhow::Result<ExitCode> {
    let model: ModelSpec = args.model.parse()?;
    let base_url = args
        .base_url
        .as_deref()
        .map(str::parse::<BaseUrl>)
        .transpose()?;
    if let Some(url) = base_url.as_ref().filter(|u| u.is_plain_http_remote()) {
        eprintln!(
            "warning: {url} is plain http to another machine: the API key and the conversation \
             travel unencrypted (use https, or a loopback address)"
        );
    }
    let key = ApiKey::from_env(model.provider(), |name| std::env::var(name).ok())?;
    let principal = app.runtime.principal(args.principal.as_deref())?;
    // A terminal answers y/N; without one the call waits as a durable approval and the loop
    // stops (exit 3).
    let approval: Arc<dyn ApprovalHandler> = if std::io::stdin().is_terminal() {
        Arc::new(PromptApproval::terminal())
    } else {
        app.runtime.durable_approval(Arc::new(|a: &Approval| {
            format!(
                "approve it with `toolgate approvals approve {id}` (or deny it with `toolgate approvals deny {id}`)",
                id = a.id
            )
        }))
    };
    let request = AgentRequest {
        model,
        base_url,
        key,
        prompt: args.prompt.clone(),
        system: args.system.clone(),
        principal,
        budget: Budget {
            max_turns: args.max_turns,
            max_tool_calls: args.max_tool_calls,
            timeout_ms: args.timeout_ms,
            ..Budget::default()
        },
        approval: Some(approval),
        origin: Some(toolgate_core::CallOrigin::cli()),
        tools: (!args.tools.is_empty()).then(|| args.tools.clone()),
        max_tokens: args.max_tokens,
        cancel: CancellationToken::new(),
        cancelled_by: CancelNote::default(),
    };
    // Ctrl-C cancels: the loop ends with the run finished; a second Ctrl-C quits at once.
    exit::cancel_on_ctrl_c(request.cancel.clone(), request.cancelled_by.clone());
    let json = args.json;
    let outcome = toolgate_agent::run(&app.runtime, request, |entry| {
        if !json {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(entry.human().as_bytes());
            let _ = out.flush();
        }
    })
    .await;
    // The calls' audit entries are queued for a group commit; write them before exiting.
    if let Err(e) = app.store.flush_audit().await {
        eprintln!(
            "warning: the calls' audit entries could not be written: {}",
            ErrorChain(&e)
        );
    }
    let transcript = match outcome {
        Ok(t) => t,
        Err(e) if e.is_usage() => return Err(e.into()),
        Err(e) => {
            eprintln!("error: {}", ErrorChain(&e));
            return Ok(exit::code(exit::FAILURE));
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&transcript)?)?;
    } else {
        for skipped in &transcript.skipped_tools {
            eprintln!("note: not offered to the model: {skipped}");
        }
        write!(out, "{}", transcript.human_end())?;
    }
    Ok(exit::code(match transcript.end {
        End::Answer { .. } => exit::SUCCESS,
        End::BudgetExhausted { .. } => exit::EXHAUSTED,
        End::ApprovalPending { .. } => exit::PENDING,
        End::Cancelled { .. } => exit::FAILURE,
    }))
}

//! The loop: start a run of the principal, offer the model the tools it may call, and go round —
//! count the turn, ask the model, run the tool calls it asked for through the pipeline (inside
//! the run), send the results back — until the model answers, a budget is spent, or a call waits
//! for an approval.
//!
//! Budgets: the pipeline refuses calls over `max_tool_calls`, `timeout_ms` and
//! `max_attempts_per_tool` (`toolgate_core::RunBudgetStage`); the store refuses a turn over
//! `max_turns` (`Runtime::run_turn`). The loop adds the wall clock around the model's own time
//! (a request still running at `timeout_ms` is dropped) and stops once a tool has failed
//! `max_attempts_per_tool` times, rather than let the model try it again. Tool errors below that
//! go back to the model as error results, so it can correct its arguments.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use toolgate_core::{
    ApprovalHandler, Budget, CallOrigin, CancelNote, CancellationToken, ErrorKind, Exhausted,
    Principal, RunId, RunStatus,
};
use toolgate_export::{ExportFormat, ExportOptions, ToolOutcome};
use toolgate_runtime::Runtime;
use toolgate_store::{Admission, StoredRun};

use crate::error::AgentError;
use crate::model::{ApiKey, BaseUrl, ModelSpec, Provider};
use crate::provider::Client;
use crate::transcript::{CallView, Consumption, End, Entry, ResultView, Transcript};

/// The output tokens an Anthropic turn may use when the request says nothing (the API requires
/// `max_tokens`).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The model turns a run allows when neither the principal's budget nor the request sets
/// `max_turns` (OpenAI's Agents SDK defaults to 10 as well): a loop never runs unbounded.
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// One agent task.
pub struct AgentRequest {
    /// The model.
    pub model: ModelSpec,
    /// Its API; `None` means the provider's own.
    pub base_url: Option<BaseUrl>,
    /// The key ([`ApiKey::from_env`]).
    pub key: ApiKey,
    /// The task.
    pub prompt: String,
    /// A system prompt, if any.
    pub system: Option<String>,
    /// Whose run it is: its tools, grants and budget.
    pub principal: Principal,
    /// Tightens the principal's budget (a looser key is refused: [`Runtime::start_run`]). When
    /// neither sets `max_turns`, the run gets [`DEFAULT_MAX_TURNS`].
    pub budget: Budget,
    /// Who decides calls that need confirmation; `None` keeps the pipeline's (a durable
    /// approval: the loop stops with [`End::ApprovalPending`]).
    pub approval: Option<Arc<dyn ApprovalHandler>>,
    /// Where the calls come from, for the audit log.
    pub origin: Option<CallOrigin>,
    /// Only these tools (each must be one the principal sees); `None` offers every tool it sees.
    pub tools: Option<Vec<String>>,
    /// Anthropic's `max_tokens` per turn.
    pub max_tokens: u32,
    /// Fires to stop the loop: the model request in flight is dropped, running tool calls are
    /// cancelled (each call's token is a child of it), and the run ends [`End::Cancelled`].
    pub cancel: CancellationToken,
    /// Who cancelled, noted on each call (the audit log keeps it); set before firing `cancel`.
    pub cancelled_by: CancelNote,
}

impl std::fmt::Debug for AgentRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRequest")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("principal", &self.principal.id)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Runs the task to its end, calling `observe` with each entry as it happens (a front-end prints
/// them); the run is finished when the loop ends, except when a call waits for an approval.
///
/// # Errors
///
/// [`AgentError`] when the run cannot start (budget, unknown tool) or the model's API fails
/// (unreachable, an error status, a response that is not its shape). The run is finished first.
pub async fn run(
    runtime: &Runtime,
    request: AgentRequest,
    mut observe: impl FnMut(&Entry),
) -> Result<Transcript, AgentError> {
    let AgentRequest {
        model,
        base_url,
        key,
        prompt,
        system,
        principal,
        budget,
        approval,
        origin,
        tools,
        max_tokens,
        cancel,
        cancelled_by,
    } = request;
    let base = base_url.unwrap_or_else(|| BaseUrl::default_for(model.provider()));
    let client = Client::new(model.clone(), &base, key, max_tokens, system)?;
    let Offered {
        tools: specs,
        names,
        skipped,
    } = offered_tools(runtime, &principal, tools.as_deref(), model.provider())?;
    let mut budget = budget;
    if budget.max_turns.is_none() && runtime.budget_of(&principal).max_turns.is_none() {
        budget.max_turns = Some(DEFAULT_MAX_TURNS);
    }
    let stored = runtime.start_run(&principal, &budget).await?;
    let run_id = stored.id;
    let deadline = stored
        .budget
        .timeout_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut state = Loop {
        runtime,
        principal,
        run_id,
        entries: Vec::new(),
        messages: Vec::new(),
    };
    let calls = CallSettings {
        approval,
        origin,
        cancel,
        cancelled_by,
    };
    let outcome = state
        .go(&client, &specs, &prompt, deadline, &calls, &mut observe)
        .await;
    let end = match outcome {
        Ok(end) => end,
        Err(e) => {
            let _ = runtime.finish_run(&state.principal, run_id).await;
            return Err(e);
        }
    };
    if !matches!(end, End::ApprovalPending { .. }) {
        runtime.finish_run(&state.principal, run_id).await?;
    }
    let consumption = Consumption::of(&state.stored().await?);
    Ok(Transcript {
        run_id,
        model,
        endpoint: client.url().to_owned(),
        tools: names,
        skipped_tools: skipped,
        entries: state.entries,
        end,
        consumption,
        messages: state.messages,
    })
}

/// The tools exported for the provider: every tool `principal` may call (or those named), in
/// the registry's order; a tool the format cannot express is left out with why.
fn offered_tools(
    runtime: &Runtime,
    principal: &Principal,
    only: Option<&[String]>,
    provider: Provider,
) -> Result<Offered, AgentError> {
    let visible: Vec<_> = runtime
        .registry()
        .snapshot()
        .iter()
        .filter(|t| principal.may_call(t.spec().name().as_str()))
        .map(|t| t.spec().clone())
        .collect();
    if let Some(only) = only
        && let Some(unknown) = only
            .iter()
            .find(|n| !visible.iter().any(|s| s.name().as_str() == n.as_str()))
    {
        return Err(AgentError::UnknownTool(unknown.clone()));
    }
    let format = match provider {
        Provider::OpenAi => ExportFormat::OpenAi,
        Provider::Anthropic => ExportFormat::Anthropic,
    };
    let mut tools = Vec::new();
    let mut names = Vec::new();
    let mut skipped = Vec::new();
    for spec in visible
        .iter()
        .filter(|s| only.is_none_or(|only| only.iter().any(|n| n == s.name().as_str())))
    {
        match toolgate_export::export_one(spec, format, &ExportOptions::default()) {
            Ok((tool, _notes)) => {
                tools.push(tool);
                names.push(spec.name().as_str().to_owned());
            }
            Err(e) => skipped.push(format!("{}: {e}", spec.name().as_str())),
        }
    }
    Ok(Offered {
        tools,
        names,
        skipped,
    })
}

/// The tools as exported for the provider, their names, and those left out with why.
struct Offered {
    tools: Vec<Value>,
    names: Vec<String>,
    skipped: Vec<String>,
}

/// What every tool call of the run shares.
struct CallSettings {
    approval: Option<Arc<dyn ApprovalHandler>>,
    origin: Option<CallOrigin>,
    cancel: CancellationToken,
    cancelled_by: CancelNote,
}

struct Loop<'a> {
    runtime: &'a Runtime,
    principal: Principal,
    run_id: RunId,
    entries: Vec<Entry>,
    messages: Vec<Value>,
}

impl Loop<'_> {
    fn push(&mut self, entry: Entry, observe: &mut impl FnMut(&Entry)) {
        observe(&entry);
        self.entries.push(entry);
    }

    async fn stored(&self) -> Result<StoredRun, AgentError> {
        self.runtime
            .store()
            .run(self.run_id)
            .await
            .map_err(toolgate_runtime::RuntimeError::from)?
            .ok_or_else(|| {
                AgentError::Runtime(toolgate_runtime::RuntimeError::Internal(format!(
                    "run {} vanished from the store",
                    self.run_id
                )))
            })
    }

    /// The timeout stop, measured now.
    async fn timed_out(&self) -> Result<End, AgentError> {
        let run = self.stored().await?;
        Ok(End::exhausted(&Exhausted::Timeout {
            elapsed_ms: run.elapsed_ms(),
            max: run.budget.timeout_ms.unwrap_or_default(),
        }))
    }

    async fn go(
        &mut self,
        client: &Client,
        tools: &[Value],
        prompt: &str,
        deadline: Option<Instant>,
        settings: &CallSettings,
        observe: &mut impl FnMut(&Entry),
    ) -> Result<End, AgentError> {
        self.messages.push(Client::user_message(prompt));
        self.push(
            Entry::User {
                text: prompt.to_owned(),
            },
            observe,
        );
        let cancel = &settings.cancel;
        loop {
            if cancel.is_cancelled() {
                return Ok(End::cancelled());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return self.timed_out().await;
            }
            let turn = match self.runtime.run_turn(&self.principal, self.run_id).await? {
                Admission::Counted(n) => n,
                Admission::Refused(e) => return Ok(End::exhausted(&e)),
                Admission::NotFound => {
                    return Err(AgentError::Runtime(
                        toolgate_runtime::RuntimeError::Internal(format!(
                            "run {} vanished from the store",
                            self.run_id
                        )),
                    ));
                }
            };
            let sent = client.send(&self.messages, tools);
            let reply = tokio::select! {
                () = cancel.cancelled() => return Ok(End::cancelled()),
                reply = until(deadline, sent) => match reply {
                    Some(reply) => reply?,
                    None => return self.timed_out().await,
                },
            };
            self.messages.push(reply.message);
            self.push(
                Entry::Assistant {
                    turn,
                    text: reply.text.clone(),
                    tool_calls: reply.calls.iter().map(CallView::of).collect(),
                },
                observe,
            );
            if reply.calls.is_empty() {
                return Ok(End::Answer {
                    text: reply.text.unwrap_or_default(),
                });
            }
            let principal = self.principal.clone();
            let run_id = self.run_id;
            let prepare = |mut r: toolgate_core::CallRequest| {
                r = r
                    .principal(principal.clone())
                    .run(run_id)
                    .cancel_token(cancel.child_token());
                r.cancelled_by = settings.cancelled_by.clone();
                if let Some(origin) = &settings.origin {
                    r = r.origin(origin.clone());
                }
                if let Some(approval) = &settings.approval {
                    r = r.approval(Arc::clone(approval));
                }
                r
            };
            let calls = self.runtime.run_tool_calls(reply.calls, prepare);
            let Some(outcomes) = until(deadline, calls).await else {
                return self.timed_out().await;
            };
            self.push(
                Entry::ToolResults {
                    turn,
                    results: outcomes.iter().map(ResultView::of).collect(),
                },
                observe,
            );
            if cancel.is_cancelled() {
                return Ok(End::cancelled());
            }
            if let Some(end) = self.stop_after(&outcomes).await? {
                return Ok(end);
            }
            self.messages.extend(client.results(&outcomes)?);
        }
    }

    /// Whether the loop ends after this batch: a call waits for an approval, a run-wide budget
    /// refused a call, or a tool has failed as often as the run allows.
    async fn stop_after(&self, outcomes: &[ToolOutcome]) -> Result<Option<End>, AgentError> {
        if let Some(o) = outcomes.iter().find(|o| o.result.approval_id.is_some()) {
            let id = o.result.approval_id.clone().unwrap_or_default();
            return Ok(Some(End::ApprovalPending {
                message: format!(
                    "Approve it with `toolgate approvals approve {id}` (which runs the call) or \
                     deny it with `toolgate approvals deny {id}`, then start the agent again."
                ),
                approval_id: id,
                tool: o.call.name.clone(),
            }));
        }
        let run = self.stored().await?;
        let max = run.budget.attempts_per_tool();
        if let Some((tool, failed)) = run.failures.iter().find(|(_, failed)| **failed >= max) {
            return Ok(Some(End::exhausted(&Exhausted::Attempts {
                tool: tool.clone(),
                failed: *failed,
                max,
            })));
        }
        let refused = outcomes
            .iter()
            .any(|o| o.result.error_kind() == Some(ErrorKind::BudgetExhausted));
        if !refused && run.status == RunStatus::Open {
            return Ok(None);
        }
        let usage = toolgate_core::Usage {
            elapsed_ms: run.elapsed_ms(),
            turns: run.turns,
            tool_calls: run.tool_calls,
            output_bytes: run.output_bytes,
        };
        let b = &run.budget;
        let exhausted = if b.timeout_ms.is_some_and(|max| usage.elapsed_ms >= max) {
            Exhausted::Timeout {
                elapsed_ms: usage.elapsed_ms,
                max: b.timeout_ms.unwrap_or_default(),
            }
        } else if let Some(max) = b
            .max_tool_calls
            .filter(|m| usage.tool_calls >= u64::from(*m))
        {
            Exhausted::ToolCalls {
                used: usage.tool_calls,
                max,
            }
        } else if let Some(max) = b.max_output_bytes.filter(|m| usage.output_bytes >= *m) {
            Exhausted::OutputBytes {
                used: usage.output_bytes,
                max,
            }
        } else if run.status != RunStatus::Open {
            Exhausted::Closed { status: run.status }
        } else {
            // Refused for one tool whose failures another process counted: the model is told
            // to change course and goes on.
            return Ok(None);
        };
        Ok(Some(End::exhausted(&exhausted)))
    }
}

/// `work`'s output, or `None` once `deadline` passes first.
async fn until<T>(deadline: Option<Instant>, work: impl Future<Output = T>) -> Option<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, work).await.ok(),
        None => Some(work.await),
    }
}

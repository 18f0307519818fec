//! MCP Tasks for calls that need no approval (a tool declaring `tasks = "optional"` or
//! `"required"`, see `docs/tool-model.md#tasks`): a `tools/call` from a client that declared
//! the tasks extension is answered at once with a `working` task whose id is the call's id; the
//! call runs in the background through the same pipeline (audited as any call, under the
//! caller's principal) and the task turns `completed` with the result a direct call would have
//! given, or `cancelled` when `tasks/cancel` stopped it (its cancellation reaches the tool).
//!
//! The runs of this process are kept in memory for [`KEEP`] after they finish; past that, after
//! a restart, or on another instance, `tasks/get` rebuilds the task from the call's audit
//! record (the finished entry's outcome; content blocks other than the data are kept there only
//! as digests). A task is its principal's only: another principal's id reads "not found".
//! `tasks/cancel` sent to another instance reaches this one through the store's cancel requests
//! (`mcp_tasks::follow_cancels`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskPayload, TaskStatus};
use toolgate_core::{CallId, CallRequest, CancellationToken, ErrorKind, Outcome, ToolResult};

use crate::Gateway;
use crate::auth::Caller;
use crate::mcp_tasks::{POLL_INTERVAL_MS, call_result_object, not_found};

/// How long a finished run's result stays in memory (then it is read from the audit log).
const KEEP: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// At most this many runs are kept in memory; when full, finished ones are forgotten (read from
/// the audit log after), and a new task is refused only while this many calls run.
const MAX_RUNS: usize = 10_000;

/// The background runs of this process, by call id.
#[derive(Default)]
pub(crate) struct TaskRuns {
    runs: Mutex<HashMap<CallId, Arc<Run>>>,
}

struct Run {
    principal: String,
    tool: String,
    created: DateTime<Utc>,
    /// Fires to cancel the call (the runtime notes `client` as who cancelled).
    cancel: CancellationToken,
    /// `None` while the call runs.
    done: Mutex<Option<(ToolResult, DateTime<Utc>)>>,
}

impl Run {
    fn finished(&self) -> Option<(ToolResult, DateTime<Utc>)> {
        self.done.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl TaskRuns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CallId, Arc<Run>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self, id: CallId) -> Option<Arc<Run>> {
        self.lock().get(&id).cloned()
    }

    /// Cancels call `id` if it runs here for `principal`; whether it did.
    pub(crate) fn cancel_here(&self, id: CallId, principal: &str) -> bool {
        match self.run(id) {
            Some(run) if run.principal == principal && run.finished().is_none() => {
                run.cancel.cancel();
                true
            }
            _ => false,
        }
    }
}

/// Starts `call` in the background as `caller` and answers with its task (`working`).
pub(crate) fn start(
    gw: &Arc<Gateway>,
    caller: &Arc<Caller>,
    mut call: CallRequest,
) -> Result<CreateTaskResult, McpError> {
    let now = Utc::now();
    let id = CallId::new();
    // Its start is committed before it runs, whatever the tool's effect: another instance
    // answers tasks/get and tasks/cancel for it from that entry.
    call = call.call_id(id).record_start();
    let run = Arc::new(Run {
        principal: caller.principal.id.as_str().to_owned(),
        tool: call.tool.clone(),
        created: now,
        cancel: CancellationToken::new(),
        done: Mutex::new(None),
    });
    {
        let mut runs = gw.task_runs.lock();
        runs.retain(|_, r| r.finished().is_none_or(|(_, at)| now - at < KEEP));
        if runs.len() >= MAX_RUNS {
            // Full: finished runs go first (their tasks are still read from the audit log), so
            // only calls running right now can hold the limit.
            runs.retain(|_, r| r.finished().is_none());
        }
        if runs.len() >= MAX_RUNS {
            return Err(McpError::new(
                rmcp::model::ErrorCode(-32000),
                format!(
                    "This toolgate instance already runs {MAX_RUNS} calls as tasks; wait for some to finish or call without the tasks extension"
                ),
                None,
            ));
        }
        runs.insert(id, Arc::clone(&run));
    }
    let task = task_of(&run, id, None)?;
    let (gw, caller) = (Arc::clone(gw), Arc::clone(caller));
    tokio::spawn(async move {
        let result = gw.call(&caller, call, Some(run.cancel.clone())).await;
        *run.done.lock().unwrap_or_else(|p| p.into_inner()) = Some((result, Utc::now()));
    });
    Ok(CreateTaskResult::new(task.task))
}

/// `tasks/get` of a background call: from memory, else from its audit record.
pub(crate) async fn get(
    gw: &Gateway,
    caller: &Caller,
    task_id: &str,
    id: CallId,
) -> Result<GetTaskResult, McpError> {
    if let Some(run) = gw.task_runs.run(id) {
        if run.principal != caller.principal.id.as_str() {
            return Err(not_found(task_id));
        }
        let finished = run.finished();
        return Ok(GetTaskResult::new(task_of(&run, id, finished)?));
    }
    let call = gw
        .store()
        .audit_call(id)
        .await
        .map_err(|e| {
            McpError::internal_error(format!("reading the task's audit record failed: {e}"), None)
        })?
        .ok_or_else(|| not_found(task_id))?;
    if let Some(record) = call.finished {
        if record.principal != caller.principal.id.as_str() {
            return Err(not_found(task_id));
        }
        let at = record.recorded_at.unwrap_or(record.fetched_at);
        let run = Run {
            principal: record.principal.clone(),
            tool: record.tool.clone(),
            created: record.fetched_at,
            cancel: CancellationToken::new(),
            done: Mutex::new(None),
        };
        let blocks = record.content.len();
        let result = ToolResult {
            tool: record.tool,
            call_id: record.call_id,
            fetched_at: record.fetched_at,
            input: record.input,
            outcome: record.outcome,
            attempts: record.attempts,
            duration_ms: record.duration_ms,
            truncated: record.truncated,
            output_ref: record.output_ref,
            content: Vec::new(),
            approval_id: None,
        };
        let mut detailed = task_of(&run, id, Some((result, at)))?;
        if blocks > 0 {
            detailed.task.status_message = Some(format!(
                "The call to {} ran; this result is rebuilt from the audit log, which keeps only digests of its {} content block(s)",
                run.tool, blocks
            ));
        }
        return Ok(GetTaskResult::new(detailed));
    }
    match call.started {
        Some(start) if start.principal == caller.principal.id.as_str() => {
            let run = Run {
                principal: start.principal.clone(),
                tool: start.tool.clone(),
                created: start.fetched_at,
                cancel: CancellationToken::new(),
                done: Mutex::new(None),
            };
            let mut detailed = task_of(&run, id, None)?;
            detailed.task.status_message = Some(format!(
                "The call to {} started (call {id}) and has no result yet: it runs on another toolgate instance, or was cut by a restart (then check its effect by hand)",
                start.tool
            ));
            Ok(GetTaskResult::new(detailed))
        }
        _ => Err(not_found(task_id)),
    }
}

/// `tasks/cancel` of a background call: cancels it if it runs here, else asks the instance that
/// runs it through the store (`mcp_tasks::follow_cancels`); a finished task's cancel is an
/// acknowledgement that changes nothing (SEP-2663: idempotent).
pub(crate) async fn cancel(
    gw: &Gateway,
    caller: &Caller,
    task_id: &str,
    id: CallId,
) -> Result<(), McpError> {
    // Reading it first also says "not found" for another principal's task.
    let read = get(gw, caller, task_id, id).await?;
    if let Some(run) = gw.task_runs.run(id)
        && run.finished().is_none()
    {
        run.cancel.cancel();
        return Ok(());
    }
    if read.task.status() == TaskStatus::Working {
        // It runs on another instance: ask it through the store.
        return crate::mcp_tasks::request_elsewhere(gw, caller, task_id).await;
    }
    Ok(())
}

/// The task of a run: `working` until it finished, then `completed` with the call's result as
/// a direct call gives it (tool errors included, as `isError`), or `cancelled`.
fn task_of(
    run: &Run,
    id: CallId,
    finished: Option<(ToolResult, DateTime<Utc>)>,
) -> Result<DetailedTask, McpError> {
    let updated = finished.as_ref().map_or(run.created, |(_, at)| *at);
    let mut task = Task::new(
        id.to_string(),
        TaskStatus::Working,
        run.created.to_rfc3339(),
        updated.to_rfc3339(),
    )
    .with_ttl_ms(u64::try_from(KEEP.num_milliseconds()).unwrap_or(0))
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let (payload, message) = match finished {
        None => (
            TaskPayload::Working,
            format!("The call to {} is running; tasks/cancel stops it", run.tool),
        ),
        Some((result, _)) if result.error_kind() == Some(ErrorKind::Cancelled) => {
            let why = match &result.outcome {
                Outcome::Error { message, .. } => message.clone(),
                Outcome::Data(_) => String::new(),
            };
            (
                TaskPayload::Cancelled,
                format!("Cancelled while running: {why}"),
            )
        }
        Some((result, _)) => (
            TaskPayload::Completed {
                result: call_result_object(result)?,
            },
            format!("The call to {} ran", run.tool),
        ),
    };
    task.status_message = Some(message);
    Ok(DetailedTask::new(task, payload))
}

#[cfg(test)]
mod tests {
    //! Two gateways on one database stand for two instances: a task run on one is cancelled by
    //! `tasks/cancel` sent to the other, through the store's cancel requests.

    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;
    use toolgate_core::{CallRequest, Principal, TaskSupport, ToolBuilder, ToolError};

    use crate::auth::Caller;
    use crate::{Gateway, GatewayOptions};

    /// An instance on the database at `path` whose tool `long` (of `effect`; run as a task, its
    /// start is in the audit log before it runs) notifies `started` and waits until cancelled.
    async fn instance(
        path: &std::path::Path,
        started: Arc<tokio::sync::Notify>,
        effect: toolgate_core::Effect,
    ) -> Arc<Gateway> {
        let store = toolgate_store::Store::open(
            &toolgate_store::DbUrl::Sqlite(path.to_owned()),
            &toolgate_store::StoreOptions::default(),
        )
        .await
        .unwrap();
        let tool = ToolBuilder::new("long", "Waits until cancelled; for tests.")
            .tasks(TaskSupport::Optional)
            .effect(effect)
            .handler(move |_, ctx| {
                started.notify_one();
                async move {
                    tokio::select! {
                        () = ctx.cancellation().cancelled() => Err(ToolError::cancelled()),
                        () = tokio::time::sleep(Duration::from_secs(60)) => Ok(json!({ "slept": true })),
                    }
                }
            });
        let registry = Arc::new(toolgate_core::Registry::new());
        registry.register_all(vec![Arc::new(tool)], false).unwrap();
        Gateway::from_parts(registry, store, GatewayOptions::default()).unwrap()
    }

    #[tokio::test]
    async fn a_cancel_sent_to_another_instance_reaches_the_run() {
        cancel_across_instances(toolgate_core::Effect::SideEffect).await;
    }

    /// A read-only tool writes no start entry for a direct call; run as a task it does, so the
    /// other instance finds it while it runs.
    #[tokio::test]
    async fn a_read_only_task_is_read_and_cancelled_on_another_instance() {
        cancel_across_instances(toolgate_core::Effect::Read).await;
    }

    async fn cancel_across_instances(effect: toolgate_core::Effect) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let started = Arc::new(tokio::sync::Notify::new());
        let one = instance(&path, Arc::clone(&started), effect).await;
        let two = instance(&path, Arc::new(tokio::sync::Notify::new()), effect).await;
        let shutdown = toolgate_core::CancellationToken::new();
        tokio::spawn(crate::mcp_tasks::follow_cancels(
            Arc::clone(&one),
            shutdown.clone(),
        ));
        let caller = Arc::new(Caller::new(Principal::local(), one.plan().clone()));
        let task = super::start(&one, &caller, CallRequest::new("long", json!({}))).unwrap();
        let id = task.task.task_id.clone();
        let call = toolgate_core::CallId::parse(&id).unwrap();
        tokio::time::timeout(Duration::from_secs(10), started.notified())
            .await
            .expect("the call starts");
        // A cancel names the task, not another principal's run: it is ignored while it runs.
        assert!(!one.task_runs.cancel_here(call, "someone-else"));
        let read = super::get(&one, &caller, &id, call).await.unwrap();
        assert_eq!(read.task.status(), rmcp::model::TaskStatus::Working);
        let elsewhere = super::get(&two, &caller, &id, call).await.unwrap();
        assert_eq!(
            elsewhere.task.status(),
            rmcp::model::TaskStatus::Working,
            "{elsewhere:?}"
        );
        // tasks/cancel sent to the other instance: it reads the task as working from the audit
        // log's start entry and asks through the store (the cluster test, scripts/cluster.py,
        // sends the real tasks/cancel over PostgreSQL).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        super::cancel(&two, &caller, &id, call).await.unwrap();
        loop {
            let read = super::get(&one, &caller, &id, call).await.unwrap();
            if read.task.status() == rmcp::model::TaskStatus::Cancelled {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{read:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // It ran on the first instance only, and was cancelled there as a client's cancel (its
        // audit record says so).
        assert!(two.task_runs.run(call).is_none());
        let audit = one.store().audit_call(call).await.unwrap().unwrap();
        let finished = audit.finished.unwrap();
        assert_eq!(
            finished.cancelled_by.as_deref(),
            Some("client"),
            "{finished:?}"
        );
        shutdown.cancel();
    }
}

//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) for calls that wait for
//! a person's yes. A `tools/call` to a tool that requires confirmation, from a client that
//! declared the extension, is answered with a task at once instead of a `confirmation_required`
//! error. The task *is* the durable approval underneath (its id is the approval's id), so it is
//! bound to the principal that asked, survives a restart, is seen by every instance on the same
//! database and expires with the approval; the approved call's result is the approval's stored
//! envelope, shown exactly as a direct call would have answered it.
//!
//! Approval status → task status: `pending` → `input_required` (the approval id in `_meta`, a
//! message saying who decides and how); `approved`, `running` → `working`; `executed` →
//! `completed` with the call's result (`cancelled` when the run was cancelled); `denied` → `completed` with the `rejected` result a
//! refused call gets, or `cancelled` when its own caller withdrew it through `tasks/cancel`;
//! `expired`, `indeterminate` → `failed` with an error naming what happened.

use rmcp::model::{
    ClientCapabilities, CreateTaskResult, DetailedTask, ErrorCode, GetTaskResult, InputRequests,
    InputResponses, JsonObject, MetaObject, ProtocolVersion, TASKS_EXTENSION_ID, Task, TaskPayload,
    TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Map, Value, json};
use toolgate_core::{CallId, ErrorKind, TaskSupport, ToolResult, ToolSpec};
use toolgate_store::{Approval, ApprovalStatus};

use crate::Gateway;
use crate::auth::Caller;

/// `_meta` key of a task carrying its approval (id, tool, status, expiry).
pub(crate) const TASK_META_KEY: &str = "dev.toolgate/approval";

/// How often a client should poll `tasks/get`, in milliseconds.
pub(crate) const POLL_INTERVAL_MS: u64 = 1000;

/// The decision reason that marks an approval its own caller withdrew with `tasks/cancel`.
const WITHDRAWN: &str = "withdrawn by its caller (MCP tasks/cancel)";

/// Whether a call to `spec` from this request becomes a task: the tool supports tasks (its
/// `tasks` field; a tool that requires confirmation does unless it says `forbidden`) and the
/// client declared the tasks extension (in the request's `_meta` under 2026-07-28, at
/// `initialize` from 2025-06-18 on). A tool that requires tasks, called by a client that did
/// not declare the extension, is refused with `-32021` (missing required client capability).
pub(crate) fn wanted(
    spec: &ToolSpec,
    context: &RequestContext<RoleServer>,
) -> Result<bool, McpError> {
    // 2025-03-26 has no `extensions` capability (and its results are cut to that revision).
    let revision_has_extensions = context
        .protocol_version()
        .is_none_or(|v| v.as_str() >= ProtocolVersion::V_2025_06_18.as_str());
    let client_tasks = revision_has_extensions
        && context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
    match spec.task_support() {
        TaskSupport::Forbidden => Ok(false),
        TaskSupport::Optional => Ok(client_tasks),
        TaskSupport::Required if client_tasks => Ok(true),
        TaskSupport::Required => Err(McpError::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "Tool {} runs only as a task: declare the {TASKS_EXTENSION_ID} extension in your client capabilities (MCP 2025-06-18 or later) and read the result with tasks/get",
                spec.name()
            ),
            Some(json!({
                "requiredCapabilities": ClientCapabilities::builder().enable_tasks().build(),
            })),
        )),
    }
}

/// The task for a call's result, when the call waits for an approval (a `confirmation_required`
/// result naming its approval); `None` for every other result, which is answered directly.
pub(crate) async fn created(
    gw: &Gateway,
    result: &ToolResult,
) -> Result<Option<CreateTaskResult>, McpError> {
    if result.error_kind() != Some(ErrorKind::ConfirmationRequired) {
        return Ok(None);
    }
    let Some(id) = result.approval_id.as_deref() else {
        return Ok(None);
    };
    let Some(approval) = gw.store().approval(id).await.map_err(store_error)? else {
        return Ok(None);
    };
    let detailed = detailed(&approval)?;
    let mut created = CreateTaskResult::new(detailed.task);
    created.meta = Some(approval_meta(&approval));
    Ok(Some(created))
}

/// `tasks/get`: the task as its approval stands now (or, for a call id, as its background
/// run stands: see `mcp_task_runs`). Another principal's task, and an id that names no task,
/// are both "not found".
pub(crate) async fn get(
    gw: &Gateway,
    caller: &Caller,
    task_id: &str,
) -> Result<GetTaskResult, McpError> {
    if let Ok(id) = CallId::parse(task_id) {
        return crate::mcp_task_runs::get(gw, caller, task_id, id).await;
    }
    // A pending approval whose time ran out reads as expired, not pending.
    gw.store().expire_approvals().await.map_err(store_error)?;
    let approval = owned(gw, caller, task_id).await?;
    let mut result = GetTaskResult::new(detailed(&approval)?);
    result.meta = Some(approval_meta(&approval));
    Ok(result)
}

/// `tasks/update`: answers to the questions a task's call waits on (a background call's, see
/// `mcp_task_runs::update`). An approval's task asks the client nothing (a person decides,
/// outside MCP: its `inputRequests` is empty), so its answers change nothing; it is still read
/// first, so another principal's task is "not found".
pub(crate) async fn update(
    gw: &Gateway,
    caller: &Caller,
    task_id: &str,
    responses: InputResponses,
) -> Result<(), McpError> {
    if let Ok(id) = CallId::parse(task_id) {
        return crate::mcp_task_runs::update(gw, caller, task_id, id, responses).await;
    }
    owned(gw, caller, task_id).await?;
    Ok(())
}

/// `tasks/cancel`: withdraws a pending approval (it is denied in the caller's name, never runs,
/// and the task reads `cancelled`), or cancels the approved call running (it ends `cancelled`,
/// recorded as the approval's result): at once in this process, through the store when another
/// instance runs it (`follow_requests`). A finished task's cancel is an acknowledgement that
/// changes nothing; one whose call was approved but has not started is refused saying so. A
/// background call's task (a call id) is cancelled as `mcp_task_runs` says.
pub(crate) async fn cancel(gw: &Gateway, caller: &Caller, task_id: &str) -> Result<(), McpError> {
    if let Ok(id) = CallId::parse(task_id) {
        return crate::mcp_task_runs::cancel(gw, caller, task_id, id).await;
    }
    gw.store().expire_approvals().await.map_err(store_error)?;
    let approval = owned(gw, caller, task_id).await?;
    if approval.status == ApprovalStatus::Running {
        if gw.runtime().cancel_running_approval(&approval.id, "client") {
            return Ok(());
        }
        // It runs on another instance: ask it through the store (see `follow_requests`).
        return request_elsewhere(gw, caller, task_id).await;
    }
    // A finished task: cancelling it is acknowledged and changes nothing (SEP-2663 makes
    // tasks/cancel idempotent; tasks/get still reads what happened).
    if approval.status.is_final() {
        return Ok(());
    }
    if approval.status != ApprovalStatus::Pending {
        return Err(McpError::invalid_params(
            format!(
                "Task {task_id} cannot be cancelled: its approval is {}: the approved call is about to start; cancel it once tasks/get reads working",
                approval.status,
            ),
            Some(json!({ "taskId": task_id, "approvalStatus": approval.status })),
        ));
    }
    let withdrawn = gw
        .store()
        .decide_approval(&approval.id, false, &approval.principal, Some(WITHDRAWN))
        .await
        .map_err(|e| {
            // Decided by someone else in the meantime: say where it stands.
            McpError::invalid_params(
                format!(
                    "Task {task_id} could not be cancelled: {e}; read its state with tasks/get"
                ),
                Some(json!({ "taskId": task_id })),
            )
        })?;
    gw.runtime().publish_approval(&withdrawn);
    Ok(())
}

/// Asks the instance running task `task_id`'s call to cancel it: a cancel request in the store,
/// which every instance reads (`follow_requests`). The answer comes before the cancellation
/// lands; `tasks/get` reads `cancelled` once it has.
pub(crate) async fn request_elsewhere(
    gw: &Gateway,
    caller: &Caller,
    task_id: &str,
) -> Result<(), McpError> {
    gw.store()
        .request_cancel(task_id, caller.principal.id.as_str())
        .await
        .map_err(|e| {
            McpError::internal_error(
                format!(
                    "Task {task_id} runs on another toolgate instance and the cancel request could not be stored: {e}"
                ),
                Some(json!({ "taskId": task_id })),
            )
        })
}

/// How often each instance reads the cancel requests of the calls it may run.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Cancel requests read again on each poll below the newest seen, so that a row committed after
/// a newer id (concurrent inserts on PostgreSQL) is not skipped.
const CANCEL_WINDOW: i64 = 256;

/// Follows what other instances ask of this one through the store, until `shutdown` fires:
/// each cancel request naming a call that runs in this process (an approved call, or a
/// background task run of the same principal) cancels it, noting `client` as who cancelled; the
/// answers that `tasks/update` stored for the questions of this process's task runs go to them
/// (`mcp_task_runs::deliver_answers`). This is how `tasks/cancel` and `tasks/update` sent to one
/// instance reach the instance running the call, with nothing but the shared database between
/// them.
pub(crate) async fn follow_requests(
    gw: std::sync::Arc<Gateway>,
    shutdown: toolgate_core::CancellationToken,
) {
    let mut last = loop {
        match gw.store().last_cancel_request().await {
            Ok(id) => break id,
            Err(e) => {
                tracing::warn!(error = %toolgate_core::ErrorChain(&e), "cannot read cancel requests; retrying in 1 s");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(CANCEL_POLL) => {}
        }
        crate::mcp_task_runs::deliver_answers(&gw).await;
        let requests = match gw.store().cancel_requests_after(last - CANCEL_WINDOW).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %toolgate_core::ErrorChain(&e), "cannot read cancel requests");
                continue;
            }
        };
        for r in requests {
            if !seen.insert(r.id) {
                continue;
            }
            last = last.max(r.id);
            let cancelled = match CallId::parse(&r.target) {
                Ok(id) => gw.task_runs.cancel_here(id, &r.principal),
                Err(_) => gw.runtime().cancel_running_approval(&r.target, "client"),
            };
            if cancelled {
                tracing::info!(task = %r.target, "cancelled at another instance's tasks/cancel");
            }
        }
        seen = seen.split_off(&(last - CANCEL_WINDOW));
    }
}

/// The approval behind `task_id`, if `caller` made it; "not found" otherwise.
async fn owned(gw: &Gateway, caller: &Caller, task_id: &str) -> Result<Approval, McpError> {
    let approval = gw.store().approval(task_id).await.map_err(store_error)?;
    match approval {
        Some(a) if a.principal == caller.principal.id.as_str() => Ok(a),
        _ => Err(not_found(task_id)),
    }
}

/// The error for an id that names no task of the caller's (another principal's included).
pub(crate) fn not_found(task_id: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "Task {task_id} not found: it names no task of yours (tasks are those your tools/call answered with a task)"
        ),
        Some(json!({ "taskId": task_id })),
    )
}

/// The task an approval stands for, with its status's payload.
fn detailed(a: &Approval) -> Result<DetailedTask, McpError> {
    let updated = [a.finished_at, a.started_at, a.decided_at]
        .into_iter()
        .flatten()
        .next()
        .unwrap_or(a.created_at);
    let ttl = (a.expires_at - a.created_at).num_milliseconds().max(0);
    let mut task = Task::new(
        a.id.clone(),
        TaskStatus::Working,
        a.created_at.to_rfc3339(),
        updated.to_rfc3339(),
    )
    .with_ttl_ms(u64::try_from(ttl).unwrap_or(0))
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let (payload, message) = match a.status {
        ApprovalStatus::Pending => (
            TaskPayload::InputRequired {
                // Nothing for the client to answer: a person decides, outside MCP.
                input_requests: InputRequests::new(),
            },
            format!(
                "Waiting for approval {id} of {tool}: a person holding toolgate.approvals.decide must approve it (POST /v1/approvals/{id}/approve, `toolgate approvals approve {id}` or the web UI) before {expires}; tasks/cancel withdraws it",
                id = a.id,
                tool = a.tool,
                expires = a.expires_at.to_rfc3339(),
            ),
        ),
        ApprovalStatus::Approved | ApprovalStatus::Running => (
            TaskPayload::Working,
            format!(
                "Approved by {}; the call to {} is running",
                a.decided_by.as_deref().unwrap_or("an approver"),
                a.tool
            ),
        ),
        ApprovalStatus::Executed => {
            let result = a.result.clone().ok_or_else(|| {
                McpError::internal_error(
                    format!("approval {} ran but has no stored result", a.id),
                    None,
                )
            })?;
            let envelope: ToolResult = serde_json::from_value(result).map_err(|e| {
                McpError::internal_error(
                    format!("approval {}'s stored result is not an envelope: {e}", a.id),
                    None,
                )
            })?;
            if envelope.panicked() {
                let message = envelope.error().unwrap_or_default().to_owned();
                (failed(&message), message)
            } else if envelope.error_kind() == Some(ErrorKind::Cancelled) {
                let who = match &envelope.outcome {
                    toolgate_core::Outcome::Error { message, .. } => message.clone(),
                    toolgate_core::Outcome::Data(_) => String::new(),
                };
                (
                    TaskPayload::Cancelled,
                    format!("Cancelled while running: {who}"),
                )
            } else {
                (
                    TaskPayload::Completed {
                        result: call_result_object(envelope)?,
                    },
                    format!("The call to {} ran", a.tool),
                )
            }
        }
        ApprovalStatus::Denied if withdrawn(a) => (
            TaskPayload::Cancelled,
            format!("Cancelled: approval {} was withdrawn by its caller", a.id),
        ),
        ApprovalStatus::Denied => {
            let by = a.decided_by.as_deref().unwrap_or("an approver");
            let message = match a.decision_reason.as_deref() {
                Some(reason) => format!(
                    "Not run: {by} denied approval {} of {} ({reason})",
                    a.id, a.tool
                ),
                None => format!("Not run: {by} denied approval {} of {}", a.id, a.tool),
            };
            let envelope = ToolResult::refused(
                a.tool.clone(),
                CallId::parse(&a.call_id).unwrap_or_default(),
                a.display.clone(),
                ErrorKind::Rejected,
                message.clone(),
            );
            (
                TaskPayload::Completed {
                    result: call_result_object(envelope)?,
                },
                message,
            )
        }
        ApprovalStatus::Expired => {
            let message = format!(
                "Approval {} of {} expired at {} without a decision, so the call never ran; call the tool again to ask anew",
                a.id,
                a.tool,
                a.expires_at.to_rfc3339()
            );
            (failed(&message), message)
        }
        ApprovalStatus::Indeterminate => {
            let message = format!(
                "The approved call to {} was interrupted before its result was recorded (approval {}); check its effect by hand before calling again",
                a.tool, a.id
            );
            (failed(&message), message)
        }
    };
    task.status_message = Some(message);
    Ok(DetailedTask::new(task, payload))
}

/// Whether a denied approval was withdrawn by its own caller with `tasks/cancel`.
fn withdrawn(a: &Approval) -> bool {
    a.decision_reason.as_deref() == Some(WITHDRAWN) && a.decided_by.as_deref() == Some(&a.principal)
}

/// A `failed` payload: the JSON-RPC error object of a call that could not run, or whose handler
/// panicked (−32603, internal error).
pub(crate) fn failed(message: &str) -> TaskPayload {
    let mut error = Map::new();
    error.insert("code".into(), json!(-32603));
    error.insert("message".into(), json!(message));
    TaskPayload::Failed { error }
}

/// The MCP call result of an envelope, as a JSON object (what a direct call answers).
pub(crate) fn call_result_object(envelope: ToolResult) -> Result<JsonObject, McpError> {
    match serde_json::to_value(crate::mcp::call_result(envelope)) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(McpError::internal_error(
            format!("a call result is not a JSON object: {other}"),
            None,
        )),
        Err(e) => Err(McpError::internal_error(
            format!("a call result could not be encoded: {e}"),
            None,
        )),
    }
}

/// The task's `_meta`: its approval, for clients that know toolgate.
fn approval_meta(a: &Approval) -> MetaObject {
    let mut meta = Map::with_capacity(1);
    meta.insert(
        TASK_META_KEY.into(),
        json!({
            "approvalId": a.id,
            "tool": a.tool,
            "status": a.status,
            "expiresAt": a.expires_at.to_rfc3339(),
        }),
    );
    MetaObject(meta)
}

fn store_error(e: toolgate_store::StoreError) -> McpError {
    McpError::internal_error(format!("reading the task's approval failed: {e}"), None)
}

#[cfg(test)]
mod tests {
    //! rmcp's own client, which speaks the tasks extension (`call_tool_once`, `get_task`,
    //! `cancel_task`), against toolgate's MCP server over an in-memory pipe.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use rmcp::ServiceExt;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
        ClientConfig, GetTaskParams, Implementation, TaskPayload, TaskStatus,
    };
    use serde_json::json;
    use toolgate_core::Principal;
    use toolgate_runtime::decide::Decider;

    use crate::Gateway;
    use crate::mcp::McpHandler;

    /// A gateway with one tool that requires confirmation and counts its runs, serving an rmcp
    /// client that declares the tasks extension as the local principal.
    async fn connect() -> (
        Arc<Gateway>,
        Arc<AtomicU64>,
        rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
        tempfile::TempDir,
    ) {
        let (gw, runs, caller, dir) = crate::confirmed_write_gateway().await;
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let handler = McpHandler::new(Arc::clone(&gw), Some(caller));
        tokio::spawn(async move {
            if let Ok(running) = handler.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let client = ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tasks-test", "1"),
        )
        .serve(client_io)
        .await
        .unwrap();
        (gw, runs, client, dir)
    }

    async fn task_of(
        client: &rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    ) -> String {
        match client
            .call_tool_once(CallToolRequestParams::new("confirmed_write"))
            .await
            .unwrap()
        {
            CallToolResponse::Task(created) => {
                assert_eq!(created.task.status, TaskStatus::InputRequired);
                created.task.task_id
            }
            other => panic!("expected a task, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn rmcp_s_client_reads_the_result_once_the_approval_ran() {
        let (gw, runs, client, _dir) = connect().await;
        let task = task_of(&client).await;
        let waiting = client.get_task(GetTaskParams::new(&task)).await.unwrap();
        assert_eq!(waiting.task.status(), TaskStatus::InputRequired);
        assert_eq!(
            runs.load(Ordering::SeqCst),
            0,
            "nothing runs before the yes"
        );

        let approver = Principal::local();
        let decider = Decider {
            principal: &approver,
            actor: "test:approver",
        };
        gw.runtime().approve(decider, &task, None).await.unwrap();
        gw.runtime().run_approved(&task).await.unwrap();
        let done = client.get_task(GetTaskParams::new(&task)).await.unwrap();
        let TaskPayload::Completed { result } = done.task.payload else {
            panic!("expected completed, got {:?}", done.task);
        };
        assert_eq!(result["isError"], false, "{result:?}");
        assert_eq!(result["structuredContent"], json!({ "written": true }));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        client.cancel().await.unwrap();
    }

    #[tokio::test]
    async fn rmcp_s_client_cancels_a_pending_task_and_it_never_runs() {
        let (gw, runs, client, _dir) = connect().await;
        let task = task_of(&client).await;
        client
            .cancel_task(CancelTaskParams::new(&task))
            .await
            .unwrap();
        let read = client.get_task(GetTaskParams::new(&task)).await.unwrap();
        assert_eq!(read.task.status(), TaskStatus::Cancelled);
        let approval = gw.store().approval(&task).await.unwrap().unwrap();
        assert_eq!(approval.status, toolgate_store::ApprovalStatus::Denied);
        assert!(gw.runtime().run_approved(&task).await.is_ok());
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        // Unknown ids are "not found" like another principal's.
        let unknown = client
            .get_task(GetTaskParams::new("apr_nope"))
            .await
            .unwrap_err();
        assert!(unknown.to_string().contains("not found"), "{unknown}");
        client.cancel().await.unwrap();
    }
}

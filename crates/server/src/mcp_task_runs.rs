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
//! (`mcp_tasks::follow_requests`).
//!
//! A run asks its client through the task (`TaskInput`, the call's client bridge): a question
//! (elicitation, sampling, roots — only the kinds the client declared) parks the tool and the
//! task reads `input_required` with the questions waiting, each under its key, in
//! `inputRequests`; `tasks/update` answers some or all of them (each answer wakes the tool
//! waiting on it; a key that names no waiting question is ignored) and the task reads
//! `working` again once none waits. An answer that is not the kind of result its question asks
//! for ends the task `failed` with −32602 (what a direct call answers such a request).
//!
//! Each question is also written to the store before it waits (`Store::ask_task_question`), so
//! that a load balancer may send a task's requests to any instance: `tasks/get` elsewhere reads
//! the unanswered questions from there, `tasks/update` elsewhere writes the answers there, and the
//! instance running the call takes them every 250 ms (`deliver_answers`, called by
//! `mcp_tasks::follow_requests`) and hands each to the tool waiting on it. Answered here, a
//! question's row is removed at once; the call's rows go when it finishes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateTaskResult, DetailedTask, GetTaskResult, InputRequest, InputRequests, InputResponses,
    Task, TaskPayload, TaskStatus,
};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use toolgate_core::{
    BoxFuture, CallId, CallRequest, CancellationToken, ClientBridge, ElicitAnswer, ErrorKind,
    LogLevel, Outcome, Root, SamplingReply, SamplingRequest, ToolError, ToolResult,
};

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
    /// The questions the call waits on.
    input: Mutex<Waiting>,
}

/// The questions a run waits on, and what went wrong with an answer.
#[derive(Default)]
struct Waiting {
    /// By key: the question, and where its answer goes.
    questions: BTreeMap<String, (InputRequest, oneshot::Sender<Value>)>,
    /// Why an answer was not the kind of result its question asks for (the first such).
    malformed: Option<String>,
    /// When a question was last asked or answered.
    changed: Option<DateTime<Utc>>,
    /// Whether a question was ever written to the store (its rows go when the call finishes).
    stored: bool,
}

impl Waiting {
    /// Hands `answer` to the question waiting under `key`; whether one waited.
    fn answer(&mut self, key: &str, answer: Value) -> bool {
        let Some((_, to)) = self.questions.remove(key) else {
            return false;
        };
        // The tool stopped waiting (cancelled) if this fails: nothing to answer.
        let _ = to.send(answer);
        self.changed = Some(Utc::now());
        true
    }
}

impl Run {
    fn new(principal: String, tool: String, created: DateTime<Utc>) -> Self {
        Self {
            principal,
            tool,
            created,
            cancel: CancellationToken::new(),
            done: Mutex::new(None),
            input: Mutex::default(),
        }
    }

    fn finished(&self) -> Option<(ToolResult, DateTime<Utc>)> {
        self.done.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.input.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TaskRuns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CallId, Arc<Run>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self, id: CallId) -> Option<Arc<Run>> {
        self.lock().get(&id).cloned()
    }

    /// The runs of this process that wait on questions to their client.
    fn waiting_for_answers(&self) -> Vec<(CallId, Arc<Run>)> {
        self.lock()
            .iter()
            .filter(|(_, run)| !run.waiting().questions.is_empty())
            .map(|(id, run)| (*id, Arc::clone(run)))
            .collect()
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

/// What a task's call may ask its client: the kinds of input the client declared, and the
/// answers it already gave (input-required rounds before the task, see
/// `Tool::asks_before_task`).
#[derive(Default)]
pub(crate) struct Asking {
    pub(crate) can: crate::mcp_input::Can,
    pub(crate) answers: Map<String, Value>,
}

/// How long the answer to a task-augmented call waits for the call's start entry (a store
/// commit, normally milliseconds) before it goes anyway.
const START_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts `call` in the background as `caller` and answers with its task (`working`) once the
/// call's start entry is committed (or the call ended before it, refused), so that `tasks/get`
/// sent right away to another instance finds it; its questions to the client go through the
/// task (see the module's docs).
pub(crate) async fn start(
    gw: &Arc<Gateway>,
    caller: &Arc<Caller>,
    mut call: CallRequest,
    asking: Asking,
) -> Result<CreateTaskResult, McpError> {
    let now = Utc::now();
    let id = CallId::new();
    // Its start is committed before it runs, whatever the tool's effect: another instance
    // answers tasks/get and tasks/cancel for it from that entry.
    let ready = Arc::new(tokio::sync::Notify::new());
    call = call.call_id(id).record_start(Arc::clone(&ready));
    let run = Arc::new(Run::new(
        caller.principal.id.as_str().to_owned(),
        call.tool.clone(),
        now,
    ));
    call = call.client(Arc::new(TaskInput {
        id,
        store: gw.store().clone(),
        run: Arc::downgrade(&run),
        cancel: run.cancel.clone(),
        can: asking.can,
        answers: asking.answers,
        next_key: AtomicUsize::new(0),
    }) as Arc<dyn ClientBridge>);
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
    let (gw, caller, ended) = (Arc::clone(gw), Arc::clone(caller), Arc::clone(&ready));
    tokio::spawn(async move {
        let result = gw.call(&caller, call, Some(run.cancel.clone())).await;
        *run.done.lock().unwrap_or_else(|p| p.into_inner()) = Some((result, Utc::now()));
        ended.notify_one();
        if run.waiting().stored
            && let Err(e) = gw
                .store()
                .forget_task_questions(&id.to_string(), None)
                .await
        {
            tracing::warn!(task = %id, error = %toolgate_core::ErrorChain(&e), "could not remove a finished task's questions from the store; they go within a day");
        }
    });
    if tokio::time::timeout(START_WAIT, ready.notified())
        .await
        .is_err()
    {
        tracing::warn!(task = %id, "a task's call has not reached its start entry after 5 s; answering with its task anyway (another instance may not find it until it does)");
    }
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
        let run = Run::new(
            record.principal.clone(),
            record.tool.clone(),
            record.fetched_at,
        );
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
            let run = Run::new(
                start.principal.clone(),
                start.tool.clone(),
                start.fetched_at,
            );
            // The questions it waits on, if it runs on another instance (see the module's docs).
            let asked = stored_questions(gw, id, &start.principal).await?;
            let mut detailed = task_of(&run, id, None)?;
            if !asked.is_empty() {
                let (payload, message) = waiting_on(&run.tool, asked);
                detailed.task.status_message = Some(message);
                return Ok(GetTaskResult::new(DetailedTask::new(
                    detailed.task,
                    payload,
                )));
            }
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
/// runs it through the store (`mcp_tasks::follow_requests`); a finished task's cancel is an
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

/// The unanswered questions of call `id` of `principal` in the store.
async fn stored_questions(
    gw: &Gateway,
    id: CallId,
    principal: &str,
) -> Result<InputRequests, McpError> {
    let rows = gw
        .store()
        .task_questions(&id.to_string(), principal)
        .await
        .map_err(|e| {
            McpError::internal_error(format!("reading the task's questions failed: {e}"), None)
        })?;
    let mut asked = InputRequests::new();
    for (key, request) in rows {
        let request: InputRequest = serde_json::from_str(&request).map_err(|e| {
            McpError::internal_error(
                format!("the stored question {key} of task {id} is not an MCP input request: {e}"),
                None,
            )
        })?;
        asked.insert(key, request);
    }
    Ok(asked)
}

/// Hands the answers that `tasks/update` on other instances stored to the calls of this process
/// waiting on them (a key no call waits on any more is dropped). Called every 250 ms by
/// `mcp_tasks::follow_requests`.
pub(crate) async fn deliver_answers(gw: &Gateway) {
    for (id, run) in gw.task_runs.waiting_for_answers() {
        let answers = match gw.store().take_task_answers(&id.to_string()).await {
            Ok(answers) => answers,
            Err(e) => {
                tracing::warn!(task = %id, error = %toolgate_core::ErrorChain(&e), "cannot read the answers to a task's questions");
                continue;
            }
        };
        if answers.is_empty() {
            continue;
        }
        let mut waiting = run.waiting();
        for (key, answer) in answers {
            let answer: Value = match serde_json::from_str(&answer) {
                Ok(answer) => answer,
                Err(e) => {
                    tracing::warn!(task = %id, key, error = %e, "a stored answer is not JSON; dropped");
                    continue;
                }
            };
            if waiting.answer(&key, answer) {
                tracing::info!(task = %id, key, "answered through another instance's tasks/update");
            }
        }
    }
}

/// `tasks/update` of a background call: each answer goes to the question waiting under its key
/// (the tool waiting on it goes on); a key that names no waiting question (never asked, already
/// answered, or of a finished task) is ignored. The task's state is read with `tasks/get`. On an
/// instance that does not run the call, the answers go through the store (see the module's
/// docs): the call has them within 250 ms.
pub(crate) async fn update(
    gw: &Gateway,
    caller: &Caller,
    task_id: &str,
    id: CallId,
    responses: InputResponses,
) -> Result<(), McpError> {
    if let Some(run) = gw.task_runs.run(id) {
        if run.principal != caller.principal.id.as_str() {
            return Err(not_found(task_id));
        }
        let mut answered = Vec::new();
        {
            let mut waiting = run.waiting();
            for (key, answer) in responses {
                if waiting.answer(&key, answer) {
                    answered.push(key);
                }
            }
        }
        for key in answered {
            if let Err(e) = gw
                .store()
                .forget_task_questions(&id.to_string(), Some(&key))
                .await
            {
                // Answered already; another instance may read it as waiting until the call ends.
                tracing::warn!(task = %id, key, error = %toolgate_core::ErrorChain(&e), "could not remove an answered task question from the store");
            }
        }
        return Ok(());
    }
    // Not run here: read it (not found for another principal's); while it runs, the answers go
    // to the instance running it through the store.
    let read = get(gw, caller, task_id, id).await?;
    if matches!(
        read.task.status(),
        TaskStatus::Working | TaskStatus::InputRequired
    ) {
        let answers: Vec<(String, String)> = responses
            .into_iter()
            .map(|(key, answer)| (key, answer.to_string()))
            .collect();
        gw.store()
            .answer_task_questions(&id.to_string(), caller.principal.id.as_str(), &answers)
            .await
            .map_err(|e| {
                McpError::internal_error(
                    format!(
                        "Task {task_id} runs on another toolgate instance and the answers could not be stored: {e}"
                    ),
                    Some(json!({ "taskId": task_id })),
                )
            })?;
    }
    // Finished: nothing waits for an answer any more.
    Ok(())
}

/// The `input_required` payload of a call waiting on `asked`, and its message.
fn waiting_on(tool: &str, asked: InputRequests) -> (TaskPayload, String) {
    let keys: Vec<&str> = asked.keys().map(String::as_str).collect();
    let message = format!(
        "The call to {tool} waits for your answers to {}: send them with tasks/update (inputResponses under the same keys)",
        keys.join(", ")
    );
    (
        TaskPayload::InputRequired {
            input_requests: asked,
        },
        message,
    )
}

/// The task of a run: `working` until it finished (`input_required` while the call waits on
/// questions to its client), then `completed` with the call's result as a direct call gives it
/// (tool errors included, as `isError`), `cancelled`, or `failed` when an answer the client sent
/// was not the kind of result its question asked for (−32602) or the tool's handler panicked
/// (−32603: the tasks extension's `failed` is for a request that produced no result; a direct
/// call answers the same envelope as an `isError` result).
fn task_of(
    run: &Run,
    id: CallId,
    finished: Option<(ToolResult, DateTime<Utc>)>,
) -> Result<DetailedTask, McpError> {
    let (asked, malformed, changed) = {
        let waiting = run.waiting();
        let asked: InputRequests = waiting
            .questions
            .iter()
            .map(|(key, (request, _))| (key.clone(), request.clone()))
            .collect();
        (asked, waiting.malformed.clone(), waiting.changed)
    };
    let updated = match &finished {
        Some((_, at)) => *at,
        None => changed.unwrap_or(run.created),
    };
    let mut task = Task::new(
        id.to_string(),
        TaskStatus::Working,
        run.created.to_rfc3339(),
        updated.to_rfc3339(),
    )
    .with_ttl_ms(u64::try_from(KEEP.num_milliseconds()).unwrap_or(0))
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    let (payload, message) = match finished {
        None if !asked.is_empty() => waiting_on(&run.tool, asked),
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
        Some((result, _)) if !result.is_ok() && malformed.is_some() => {
            let why = malformed.unwrap_or_default();
            let message = format!(
                "The call to {} stopped on an invalid answer: {why}; call the tool again",
                run.tool
            );
            let mut error = Map::new();
            error.insert("code".into(), json!(-32602));
            error.insert("message".into(), json!(message));
            (TaskPayload::Failed { error }, message)
        }
        Some((result, _)) if result.panicked() => {
            let message = result.error().unwrap_or_default().to_owned();
            (crate::mcp_tasks::failed(&message), message)
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

/// A task's call's connection to its client: questions wait in the task for `tasks/update`
/// (see the module's docs); log messages have no stream to ride and are dropped.
struct TaskInput {
    /// The task's id (its call's).
    id: CallId,
    /// Where its questions are written for other instances.
    store: toolgate_store::Store,
    /// Weak: the run owns the bridge's call, not the other way round.
    run: std::sync::Weak<Run>,
    cancel: CancellationToken,
    can: crate::mcp_input::Can,
    /// Answers given before the task (input-required rounds), by key.
    answers: Map<String, Value>,
    next_key: AtomicUsize,
}

/// Takes a waiting question out of its run when the tool stops waiting (answered, cancelled,
/// or its attempt timed out).
struct Asked<'a> {
    run: &'a Run,
    key: &'a str,
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        self.run.waiting().questions.remove(self.key);
    }
}

impl TaskInput {
    fn auto_key(&self, kind: &str) -> String {
        format!(
            "{kind}-{}",
            self.next_key.fetch_add(1, Ordering::SeqCst) + 1
        )
    }

    /// The answer to `key`: one given before the task, else `request` waits in the task until
    /// `tasks/update` answers it or the call is cancelled.
    async fn ask(&self, key: &str, request: Value) -> Result<Value, ToolError> {
        if let Some(answer) = self.answers.get(key) {
            return Ok(answer.clone());
        }
        if key == crate::mcp_input::CONFIRM_KEY {
            return Err(ToolError::execution(format!(
                "the question key {key} is toolgate's confirmation form; name the tool's question otherwise"
            )));
        }
        let request: InputRequest = serde_json::from_value(request).map_err(|e| {
            ToolError::execution(format!(
                "the question {key} is not an MCP input request: {e}"
            ))
        })?;
        let run = self.run.upgrade().ok_or_else(ToolError::cancelled)?;
        let twice = || {
            ToolError::execution(format!(
                "the question {key} is asked twice at once; give each question its own key"
            ))
        };
        if run.waiting().questions.contains_key(key) {
            return Err(twice());
        }
        // In the store before it waits here: tasks/get and tasks/update on any instance find it.
        let text = serde_json::to_string(&request).map_err(|e| {
            ToolError::execution(format!("the question {key} could not be encoded: {e}"))
        })?;
        self.store
            .ask_task_question(&self.id.to_string(), key, &run.principal, &text)
            .await
            .map_err(|e| {
                // Not retried: the attempt would run the tool again up to this question.
                ToolError::unavailable(format!(
                    "the question {key} could not be recorded in the store, where every instance reads it: {e}"
                ))
                .permanent()
            })?;
        let (to, answer) = oneshot::channel();
        {
            let mut waiting = run.waiting();
            waiting.stored = true;
            if waiting.questions.contains_key(key) {
                return Err(twice());
            }
            waiting.questions.insert(key.to_owned(), (request, to));
            waiting.changed = Some(Utc::now());
        }
        let _asked = Asked { run: &run, key };
        tokio::select! {
            answer = answer => answer.map_err(|_| ToolError::cancelled()),
            () = self.cancel.cancelled() => Err(ToolError::cancelled()),
        }
    }

    /// Notes an answer that does not parse: the task ends `failed` (an invalid request).
    fn check<T>(&self, parsed: Result<T, ToolError>) -> Result<T, ToolError> {
        if let (Err(e), Some(run)) = (&parsed, self.run.upgrade()) {
            run.waiting()
                .malformed
                .get_or_insert_with(|| e.message().to_owned());
        }
        parsed
    }

    fn cannot(what: &str) -> ToolError {
        ToolError::unavailable(format!(
            "The MCP client did not declare the {what} capability when it started this task, so the task cannot ask it"
        ))
        .permanent()
    }
}

impl ClientBridge for TaskInput {
    fn log(&self, _level: LogLevel, _logger: Option<&str>, _data: Value) {}

    fn can_elicit(&self) -> bool {
        self.can.elicit
    }

    fn can_sample(&self) -> bool {
        self.can.sample
    }

    fn can_list_roots(&self) -> bool {
        self.can.list_roots
    }

    fn sample(&self, request: SamplingRequest) -> BoxFuture<'_, Result<SamplingReply, ToolError>> {
        Box::pin(async move { self.sample_as(&self.auto_key("sampling"), request).await })
    }

    fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>> {
        Box::pin(async move {
            self.elicit_as(&self.auto_key("elicitation"), message, schema)
                .await
        })
    }

    fn list_roots(&self) -> BoxFuture<'_, Result<Vec<Root>, ToolError>> {
        Box::pin(async move { self.list_roots_as(&self.auto_key("roots")).await })
    }

    fn elicit_as(
        &self,
        key: &str,
        message: String,
        schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>> {
        let key = key.to_owned();
        Box::pin(async move {
            if !self.can.elicit {
                return Err(Self::cannot("elicitation"));
            }
            let request = crate::mcp_input::elicit_request(message, schema);
            let answer = self.ask(&key, request).await?;
            self.check(crate::mcp_input::elicit_answer(&key, &answer))
        })
    }

    fn sample_as(
        &self,
        key: &str,
        request: SamplingRequest,
    ) -> BoxFuture<'_, Result<SamplingReply, ToolError>> {
        let key = key.to_owned();
        Box::pin(async move {
            if !self.can.sample {
                return Err(Self::cannot("sampling"));
            }
            let request = crate::mcp_input::sample_request(request);
            let answer = self.ask(&key, request).await?;
            self.check(crate::mcp_input::sampling_reply(&key, &answer))
        })
    }

    fn list_roots_as(&self, key: &str) -> BoxFuture<'_, Result<Vec<Root>, ToolError>> {
        let key = key.to_owned();
        Box::pin(async move {
            if !self.can.list_roots {
                return Err(Self::cannot("roots"));
            }
            let answer = self.ask(&key, crate::mcp_input::roots_request()).await?;
            self.check(crate::mcp_input::roots(&key, &answer))
        })
    }
}

#[cfg(test)]
mod tests {
    //! Two gateways on one database stand for two instances: a task run on one is cancelled by
    //! `tasks/cancel` sent to the other, through the store's cancel requests, and its question
    //! to the client is read and answered through the other, through the store's task questions.

    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;
    use toolgate_core::{CallRequest, Principal, TaskSupport, ToolBuilder, ToolError};

    use crate::auth::Caller;
    use crate::{Gateway, GatewayOptions};

    /// An instance on the database at `path` whose tool `long` (of `effect`; run as a task, its
    /// start is in the audit log before it runs) notifies `started` and waits until cancelled,
    /// and whose tool `ask` asks its client's user a question (key `go`) and answers with the
    /// reply.
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
        let ask = ToolBuilder::new("ask", "Asks its client's user; for tests.")
            .tasks(TaskSupport::Optional)
            .handler(|_, ctx| async move {
                let form = json!({"type": "object", "properties": {"v": {"type": "string"}}});
                let answer = ctx
                    .client("elicitation")?
                    .elicit_as("go", "Go?".into(), form)
                    .await?;
                match answer {
                    toolgate_core::ElicitAnswer::Accept(v) => Ok(json!({ "go": v["v"] })),
                    _ => Ok(json!({ "go": null })),
                }
            });
        let registry = Arc::new(toolgate_core::Registry::new());
        registry
            .register_all(vec![Arc::new(tool), Arc::new(ask)], false)
            .unwrap();
        Gateway::from_parts(registry, store, GatewayOptions::default()).unwrap()
    }

    /// Two instances on one fresh database (the first notifies `started` when `long` starts, and
    /// follows the store's requests until the token is cancelled), and the local caller.
    async fn two_instances(
        effect: toolgate_core::Effect,
        started: Arc<tokio::sync::Notify>,
    ) -> (
        tempfile::TempDir,
        Arc<Gateway>,
        Arc<Gateway>,
        toolgate_core::CancellationToken,
        Arc<Caller>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let one = instance(&path, started, effect).await;
        let two = instance(&path, Arc::new(tokio::sync::Notify::new()), effect).await;
        let shutdown = toolgate_core::CancellationToken::new();
        tokio::spawn(crate::mcp_tasks::follow_requests(
            Arc::clone(&one),
            shutdown.clone(),
        ));
        let caller = Arc::new(Caller::new(Principal::local(), one.plan().clone()));
        (dir, one, two, shutdown, caller)
    }

    /// Reads task `id` on `gw` until its status is `want`.
    async fn until(
        gw: &Gateway,
        caller: &Caller,
        id: &str,
        want: rmcp::model::TaskStatus,
    ) -> rmcp::model::GetTaskResult {
        let call = toolgate_core::CallId::parse(id).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let read = super::get(gw, caller, id, call).await.unwrap();
            if read.task.status() == want {
                return read;
            }
            assert!(tokio::time::Instant::now() < deadline, "{read:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_question_is_read_and_answered_on_another_instance() {
        use rmcp::model::{TaskPayload, TaskStatus};
        let (_dir, one, two, shutdown, caller) = two_instances(
            toolgate_core::Effect::Read,
            Arc::new(tokio::sync::Notify::new()),
        )
        .await;
        let asking = super::Asking {
            can: crate::mcp_input::Can {
                elicit: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let task = super::start(&one, &caller, CallRequest::new("ask", json!({})), asking)
            .await
            .unwrap();
        let id = task.task.task_id.clone();
        let call = toolgate_core::CallId::parse(&id).unwrap();
        // The other instance reads the question it waits on, from the store.
        let read = until(&two, &caller, &id, TaskStatus::InputRequired).await;
        let TaskPayload::InputRequired { input_requests } = &read.task.payload else {
            panic!("{read:?}");
        };
        let asked = serde_json::to_value(input_requests).unwrap();
        assert_eq!(asked["go"]["method"], "elicitation/create", "{asked}");
        // Another principal finds no such task there, and its answer goes nowhere.
        let bob = Caller::new(
            Principal::new(toolgate_core::PrincipalId::parse("bob").unwrap()),
            two.plan().clone(),
        );
        let answer = json!({"action": "accept", "content": {"v": "yes"}});
        let answers = rmcp::model::InputResponses::from([("go".to_owned(), answer.clone())]);
        assert!(super::get(&two, &bob, &id, call).await.is_err());
        assert!(
            super::update(&two, &bob, &id, call, answers.clone())
                .await
                .is_err()
        );
        assert_eq!(
            super::get(&one, &caller, &id, call)
                .await
                .unwrap()
                .task
                .status(),
            TaskStatus::InputRequired
        );
        // Answered on the other instance: the call running on the first gets it and completes.
        super::update(&two, &caller, &id, call, answers)
            .await
            .unwrap();
        let read = until(&one, &caller, &id, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = &read.task.payload else {
            panic!("{read:?}");
        };
        assert_eq!(result["structuredContent"]["go"], "yes", "{result:?}");
        // Nothing of it stays in the store.
        let left = one
            .store()
            .task_questions(&id, caller.principal.id.as_str())
            .await
            .unwrap();
        assert!(left.is_empty(), "{left:?}");
        shutdown.cancel();
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
        let started = Arc::new(tokio::sync::Notify::new());
        let (_dir, one, two, shutdown, caller) = two_instances(effect, Arc::clone(&started)).await;
        let task = super::start(
            &one,
            &caller,
            CallRequest::new("long", json!({})),
            super::Asking::default(),
        )
        .await
        .unwrap();
        let id = task.task.task_id.clone();
        let call = toolgate_core::CallId::parse(&id).unwrap();
        // Answered once its start entry is committed: the other instance finds it at once.
        let elsewhere = super::get(&two, &caller, &id, call).await.unwrap();
        assert_eq!(elsewhere.task.status(), rmcp::model::TaskStatus::Working);
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

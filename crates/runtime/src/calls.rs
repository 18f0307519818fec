//! Tracked calls: each call runs in a task of its own so a caller that goes away (a dropped
//! HTTP request, an MCP cancellation) cannot cut its audit record; cancelling is noted (who
//! cancelled) before it fires; at shutdown calls get a grace period, then are cancelled, and
//! [`Runtime::drain`] waits until every call has recorded its outcome.

use std::time::Duration;

use toolgate_core::{CallRequest, CancelNote, CancellationToken, ErrorKind, ToolResult};

use crate::Runtime;

impl Runtime {
    /// Runs one call through the pipeline in its own task. `external` (an MCP cancellation, a
    /// dropped HTTP request) cancels it; so does the end of the shutdown grace period; so does
    /// dropping the returned future. The call's audit records are written whatever happens to
    /// the caller.
    pub async fn call(
        &self,
        mut request: CallRequest,
        external: Option<CancellationToken>,
    ) -> ToolResult {
        let token = self.cancel_calls.child_token();
        request.cancel = token.clone();
        let pipeline = self.pipeline.clone();
        // Kept for the result of a call task that fails: it names the call its audit record has.
        let tool = request.tool.clone();
        let call_id = request.call_id;
        // Whoever cancels notes who they are first (the audit log keeps it).
        let note = request.cancelled_by.clone();
        // Cancel the call if this future is dropped (the caller went away).
        let guard = CancelOnDrop {
            token: Some(token.clone()),
            note: note.clone(),
        };
        let shutdown = self.cancel_calls.clone();
        let task = self.calls.spawn(async move {
            let call = pipeline.call(request);
            tokio::pin!(call);
            let external = async {
                match &external {
                    Some(external) => external.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            // Biased: a cancellation is noted before the call (polled last) can see it.
            tokio::select! {
                biased;
                () = shutdown.cancelled() => note.set("shutdown"),
                () = external => {
                    note.set("client");
                    token.cancel();
                }
                result = &mut call => return result,
            }
            call.await
        });
        let result = task.await;
        guard.disarm();
        match result {
            Ok(result) => result,
            Err(e) => {
                tracing::error!(tool = %tool, call_id = %call_id, error = %e, "a call task failed");
                task_failed(tool, call_id, &e.to_string())
            }
        }
    }

    /// Calls in flight right now (approved calls being run included).
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Lets in-flight calls finish for `grace`, cancels the rest, waits until every call has
    /// recorded its outcome, then stops the runtime (see [`Runtime::stopped`]).
    pub async fn drain(&self, grace: Duration) {
        self.calls.close();
        if tokio::time::timeout(grace, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                grace_ms = grace.as_millis() as u64,
                "calls still running after the grace period; cancelling them"
            );
            self.cancel_calls.cancel();
            self.calls.wait().await;
        }
        self.stopped.cancel();
        self.servers().shutdown().await;
    }
}

/// The result of a call whose task failed (a panic inside toolgate): it names the call's tool
/// and id, as its audit record does.
fn task_failed(tool: String, call_id: toolgate_core::CallId, error: &str) -> ToolResult {
    ToolResult::refused(
        tool,
        call_id,
        serde_json::Value::Null,
        ErrorKind::Execution,
        format!("The call failed inside toolgate ({error}); please report this"),
    )
}

/// Cancels a call whose caller went away (its future dropped), noting
/// `client_disconnected` first; [`CancelOnDrop::disarm`] once the call is done.
struct CancelOnDrop {
    token: Option<CancellationToken>,
    note: CancelNote,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.token = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.note.set("client_disconnected");
            token.cancel();
        }
    }
}

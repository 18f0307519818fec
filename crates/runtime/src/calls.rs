//! Tracked calls: a caller that goes away (a dropped HTTP request, an MCP cancellation) cannot
//! cut a call's audit record (the rest of the call moves into a task of its own); cancelling is
//! noted (who cancelled) before it fires; at shutdown calls get a grace period, then are
//! cancelled, and [`Runtime::drain`] waits until every call has recorded its outcome.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use toolgate_core::{
    CallRequest, CancelNote, CancellationToken, ErrorKind, ToolResult, panic_message,
};

use crate::Runtime;

impl Runtime {
    /// Runs one call through the pipeline, counted among the calls in flight. `external` (an
    /// MCP cancellation, a dropped HTTP request) cancels it; so does the end of the shutdown
    /// grace period; so does dropping the returned future, after which the call finishes (as
    /// cancelled) in a task of its own. The call's audit records are written whatever happens
    /// to the caller. The call runs in the caller's task: it makes progress while the returned
    /// future is polled, so await it (or drop it), never keep it unpolled.
    pub async fn call(
        &self,
        mut request: CallRequest,
        external: Option<CancellationToken>,
    ) -> ToolResult {
        let token = self.cancel_calls.child_token();
        request.cancel = token.clone();
        let pipeline = self.pipeline.clone();
        // Kept for the result of a call that panics: it names the call its audit record has.
        let tool = request.tool.clone();
        let call_id = request.call_id;
        // Whoever cancels notes who they are first (the audit log keeps it).
        let note = request.cancelled_by.clone();
        // Cancels the call if this future is dropped (the caller went away).
        let on_drop = Some((token.clone(), note.clone()));
        let shutdown = self.cancel_calls.clone();
        let run = async move {
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
        };
        // The call runs in the caller's task while the caller waits for it: no task of its own
        // to spawn, schedule and wake for each call. It is boxed so that, should the caller go
        // away first, the rest of it can move into a task of its own (see `Detaching`).
        let call = toolgate_core::box_in_place(|| {
            self.calls
                .track_future(AssertUnwindSafe(run).catch_unwind())
        });
        let result = Detaching {
            call: Some(call as BoxedCall),
            on_drop,
        }
        .await;
        match result {
            Ok(result) => result,
            Err(panic) => {
                let error = format!("panicked: {}", panic_message(panic.as_ref()));
                tracing::error!(tool = %tool, call_id = %call_id, error = %error, "a call panicked");
                call_panicked(tool, call_id, &error)
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

/// The result of a call that panicked (a bug inside toolgate): it names the call's tool and id,
/// as its audit record does.
fn call_panicked(tool: String, call_id: toolgate_core::CallId, error: &str) -> ToolResult {
    ToolResult::refused(
        tool,
        call_id,
        serde_json::Value::Null,
        ErrorKind::Execution,
        format!("The call failed inside toolgate ({error}); please report this"),
    )
}

type BoxedCall = Pin<Box<dyn Future<Output = Result<ToolResult, Box<dyn Any + Send>>> + Send>>;

/// A call polled in its caller's task. Dropped before the call is done (the caller went
/// away), it cancels the call (noting `client_disconnected` first) and spawns the rest of it,
/// so the call still records its outcome; the call stays counted in flight until then.
struct Detaching {
    call: Option<BoxedCall>,
    /// The call's token and note, until the call is done.
    on_drop: Option<(CancellationToken, CancelNote)>,
}

impl Future for Detaching {
    type Output = Result<ToolResult, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Pending;
        };
        let result = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        self.on_drop = None;
        Poll::Ready(result)
    }
}

impl Drop for Detaching {
    fn drop(&mut self) {
        // Cancel first (noting why), then the rest of the call runs to its end.
        if let Some((token, note)) = self.on_drop.take() {
            note.set("client_disconnected");
            token.cancel();
        }
        if let Some(call) = self.call.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(call);
                }
                // No runtime left to run it (the process is ending): nothing can finish it.
                Err(_) => {
                    tracing::warn!("a call cut off with its runtime; its outcome is not recorded")
                }
            }
        }
    }
}

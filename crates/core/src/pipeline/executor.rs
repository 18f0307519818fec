//! Executors run one attempt of a call: the in-process one enforces the timeout, cancellation
//! and panic containment; sandboxing executors (isolation levels) implement the same trait.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use super::Call;
use crate::definition::Isolation;
use crate::envelope::ErrorKind;
use crate::error::ToolError;
use crate::tool::{BoxFuture, ToolOutput};

/// Runs one attempt of a resolved, authorized, validated and approved call.
pub trait Executor: Send + Sync + 'static {
    /// Runs one attempt of `call` and returns its output or failure.
    fn execute<'a>(&'a self, call: &'a mut Call) -> BoxFuture<'a, ToolOutput>;
}

/// Runs the handler in this process. Refuses tools that require isolation it cannot give.
#[derive(Clone, Copy, Debug, Default)]
pub struct InProcessExecutor;

impl Executor for InProcessExecutor {
    fn execute<'a>(&'a self, call: &'a mut Call) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(registered) = call.tool.clone() else {
                return Err(ToolError::execution(
                    "Call reached the executor without a resolved tool",
                ));
            };
            let spec = registered.spec();
            let Some(handler) = registered.handler() else {
                let how = match &spec.definition().run {
                    Some(run) => {
                        format!("its run kind {:?} is not available in this build", run.kind)
                    }
                    None => {
                        "its definition has no run section and no handler was registered".to_owned()
                    }
                };
                return Err(ToolError::unavailable(format!(
                    "Tool {} has no implementation: {how}",
                    spec.name()
                ))
                .permanent());
            };
            let isolation = spec.limits().isolation;
            if isolation > Isolation::None {
                return Err(ToolError::unavailable(format!(
                    "Tool {} requires {} isolation, which the in-process executor cannot enforce; run it with a sandboxing executor or set constraints.isolation = \"none\" for trusted code",
                    spec.name(),
                    isolation
                )).permanent());
            }
            // Content attached by an earlier, failed attempt does not belong to this one.
            call.attachments.take();
            let token = call.request.cancel.child_token();
            let Some(ctx) = call.context(token.clone()) else {
                return Err(ToolError::execution(
                    "Call reached the executor without a resolved tool",
                ));
            };
            let timeout = spec.limits().timeout;
            let name = spec.name().clone();
            let args = call.input.clone();
            let started = std::panic::catch_unwind(AssertUnwindSafe(|| handler.call(args, ctx)));
            let future = match started {
                Ok(f) => AssertUnwindSafe(f).catch_unwind(),
                Err(panic) => return Err(panicked(&name, panic.as_ref())),
            };
            tokio::select! {
                biased;
                () = call.request.cancel.cancelled() => Err(ToolError::cancelled()),
                out = tokio::time::timeout(timeout, future) => match out {
                    Err(_) => {
                        token.cancel();
                        Err(ToolError::new(ErrorKind::Timeout, format!("Tool {name} timed out after {} ms; the call was stopped", timeout.as_millis())))
                    }
                    Ok(Err(panic)) => Err(panicked(&name, panic.as_ref())),
                    Ok(Ok(out)) => out,
                },
            }
        })
    }
}

fn panicked(name: &crate::names::ToolName, panic: &(dyn std::any::Any + Send)) -> ToolError {
    let detail = super::panic_message(panic);
    tracing::error!(tool = %name, panic = %detail, "tool handler panicked");
    let marker = crate::envelope::HANDLER_PANICKED;
    ToolError::execution(format!("Tool {name} failed unexpectedly {marker}{detail})")).permanent()
}

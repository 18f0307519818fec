//! Worker mode: an in-process Rust tool that asks for `standard` isolation or stronger runs in a
//! re-executed `toolgate` (or any binary that calls [`crate::hidden_main`] with its tools),
//! inside the sandbox. The request comes on stdin, the outcome goes to stdout, one JSON document
//! each way.

use std::io::{Read, Write};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::{ErrorKind, Principal, PrincipalId, Tool, ToolContext, ToolError, ToolName};

/// What the executor asks the worker.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WorkerRequest {
    pub tool: String,
    /// The definition hash the executor resolved; the worker's tool must match it.
    pub hash: String,
    pub principal: String,
    pub args: Value,
}

/// What the worker answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WorkerReply {
    Ok(Value),
    Error {
        kind: ErrorKind,
        message: String,
        retryable: bool,
    },
}

impl WorkerReply {
    pub(crate) fn into_output(self) -> Result<Value, ToolError> {
        match self {
            Self::Ok(v) => Ok(v),
            Self::Error {
                kind,
                message,
                retryable,
            } => {
                let e = ToolError::new(kind, message);
                Err(if retryable {
                    e.retryable()
                } else {
                    e.permanent()
                })
            }
        }
    }
}

fn answer(reply: &WorkerReply) -> i32 {
    let mut out = std::io::stdout();
    match serde_json::to_writer(&mut out, reply) {
        Ok(()) => {
            let _ = out.flush();
            0
        }
        Err(_) => 1,
    }
}

fn fail(kind: ErrorKind, message: String) -> i32 {
    answer(&WorkerReply::Error {
        kind,
        message,
        retryable: false,
    })
}

/// Runs the one tool the request names, from `tools`.
pub(crate) fn worker_main(tools: &[Arc<dyn Tool>]) -> i32 {
    let mut raw = Vec::new();
    if std::io::stdin().read_to_end(&mut raw).is_err() {
        return fail(
            ErrorKind::Execution,
            "the worker could not read its request".to_owned(),
        );
    }
    let req: WorkerRequest = match serde_json::from_slice(&raw) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                ErrorKind::Execution,
                format!("unreadable worker request: {e}"),
            );
        }
    };
    let found = tools.iter().find(|t| t.definition().name == req.tool);
    let Some(tool) = found else {
        return fail(
            ErrorKind::Unavailable,
            format!(
                "Tool {} is not built into the worker binary; register it with the worker (toolgate_sandbox::hidden_main) to run it isolated",
                req.tool
            ),
        );
    };
    let hash = toolgate_core::validate(&tool.definition()).map(|s| s.definition_hash().to_owned());
    if hash.as_deref().ok() != Some(req.hash.as_str()) {
        return fail(
            ErrorKind::Unavailable,
            format!(
                "Tool {} in the worker binary differs from the registered definition; rebuild or restart so both run the same version",
                req.tool
            ),
        );
    }
    let (Ok(name), Ok(principal)) = (
        ToolName::parse(&req.tool),
        PrincipalId::parse(&req.principal),
    ) else {
        return fail(
            ErrorKind::Execution,
            "invalid tool or principal name in the worker request".to_owned(),
        );
    };
    let ctx = ToolContext::detached(name, Principal::new(principal));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return fail(
                ErrorKind::Execution,
                format!("the worker could not start its runtime: {e}"),
            );
        }
    };
    let outcome = runtime.block_on(tool.call(req.args, ctx));
    let reply = match outcome {
        Ok(v) => WorkerReply::Ok(v),
        Err(e) => WorkerReply::Error {
            kind: e.kind(),
            message: e.to_string(),
            retryable: e.is_retryable(),
        },
    };
    answer(&reply)
}

//! The approval gate's handlers: a y/n prompt over a reader/writer pair, auto-deny when nobody
//! can answer, and explicit pre-approval. Durable queues, webhooks and MCP elicitation implement
//! the same trait. Core does no terminal I/O: the CLI hands the prompt its terminal.

use std::fmt;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::context::Principal;
use crate::envelope::CallId;
use crate::spec::ToolSpec;
use crate::tool::BoxFuture;

/// What is to be approved: who calls which tool (and which version of it) with what arguments.
#[derive(Debug)]
pub struct ApprovalRequest<'a> {
    /// The tool, as the registry resolved it (its definition hash is what is approved).
    pub spec: &'a ToolSpec,
    /// Who calls.
    pub principal: &'a Principal,
    /// The call's id.
    pub call_id: CallId,
    /// Canonical arguments with sensitive values redacted (for display).
    pub arguments: Value,
    /// The arguments the call would run with (defaults applied, nothing redacted): what a
    /// durable approval must keep to run the call later. Never show these.
    pub input: &'a Value,
    /// Why the caller wants to run it, if it said.
    pub reason: Option<&'a str>,
    /// The caller's idempotency key, if any.
    pub idempotency_key: Option<&'a str>,
    /// Where the call came from, when the caller said.
    pub origin: Option<&'a crate::CallOrigin>,
    /// The run the call is counted in: a durable approval keeps it, so the approved call runs
    /// in the same run.
    pub run: Option<crate::RunId>,
}

/// An approver's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run the call.
    Approved,
    /// A person said no (`rejected`).
    Denied {
        /// The approver's reason, if given.
        reason: Option<String>,
    },
    /// Nobody could be asked (`confirmation_required`); `hint` says how to approve.
    Unanswered {
        /// How to approve the call another way.
        hint: String,
    },
    /// The request waits, durably, as approval `id` (`confirmation_required` naming it); `hint`
    /// says how to approve.
    Pending {
        /// The durable approval's id.
        id: String,
        /// How to approve it.
        hint: String,
    },
}

/// Decides whether a call that requires confirmation may run.
pub trait ApprovalHandler: Send + Sync + 'static {
    /// Answers `request`; may wait for a person.
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision>;
}

/// Says no on behalf of nobody: the default when no person can be asked (no terminal).
#[derive(Clone, Debug)]
pub struct AutoDeny {
    hint: String,
}

impl AutoDeny {
    /// Auto-deny with a hint saying how to approve (for example "re-run with --yes").
    pub fn new(hint: impl Into<String>) -> Self {
        Self { hint: hint.into() }
    }
}

impl Default for AutoDeny {
    fn default() -> Self {
        Self::new("approve it explicitly (pre-approval) or call it where a person can confirm")
    }
}

impl ApprovalHandler for AutoDeny {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        let hint = self.hint.clone();
        Box::pin(async move { Decision::Unanswered { hint } })
    }
}

/// Explicit pre-approval (the CLI's `--yes`): every call is approved.
#[derive(Clone, Copy, Debug, Default)]
pub struct PreApproved;

impl ApprovalHandler for PreApproved {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async { Decision::Approved })
    }
}

type SharedReader = Arc<Mutex<Box<dyn BufRead + Send>>>;
type SharedWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// Asks y/n: writes the question to a writer and reads the answer from a reader (the CLI gives
/// it the terminal). Only `y` or `yes` approves; anything else, end of input included, denies.
#[derive(Clone)]
pub struct PromptApproval {
    input: SharedReader,
    output: SharedWriter,
}

impl fmt::Debug for PromptApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PromptApproval")
    }
}

impl PromptApproval {
    /// Prompts on `output` and reads the answer from `input`.
    pub fn new(input: Box<dyn BufRead + Send>, output: Box<dyn Write + Send>) -> Self {
        Self {
            input: Arc::new(Mutex::new(input)),
            output: Arc::new(Mutex::new(output)),
        }
    }
}

/// The text shown to the person asked.
pub(super) fn prompt_text(request: &ApprovalRequest<'_>) -> String {
    let spec = request.spec;
    format!(
        "Tool {} requires confirmation (effect {}, consequence {}).\n  principal: {}\n  arguments: {}\nRun it? [y/N] ",
        spec.name(),
        spec.effect(),
        spec.consequence(),
        request.principal.id,
        request.arguments
    )
}

impl ApprovalHandler for PromptApproval {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        let text = prompt_text(request);
        let input = Arc::clone(&self.input);
        let output = Arc::clone(&self.output);
        Box::pin(async move {
            let asked = tokio::task::spawn_blocking(move || {
                {
                    let mut out = output.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                }
                let mut line = String::new();
                let mut inp = input.lock().unwrap_or_else(|p| p.into_inner());
                inp.read_line(&mut line).map(|_| line)
            })
            .await;
            match asked {
                Ok(Ok(line)) if matches!(line.trim().to_lowercase().as_str(), "y" | "yes") => {
                    Decision::Approved
                }
                Ok(Ok(line)) if line.is_empty() => Decision::Denied {
                    reason: Some("no answer at the confirmation prompt (end of input)".into()),
                },
                _ => Decision::Denied {
                    reason: Some("declined at the confirmation prompt".into()),
                },
            }
        })
    }
}

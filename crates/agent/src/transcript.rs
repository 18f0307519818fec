//! What an agent run did: its [`Entry`]s (the prompt, each assistant turn with its tool calls,
//! each batch of results), how it ended ([`End`]), what it consumed, and the provider messages
//! exchanged. The JSON form (`--json`) is the whole of it; [`Entry::human`] and
//! [`Transcript::human_end`] are the readable form the CLI prints as the run goes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::{Budget, Exhausted, RunId, ToolResult};
use toolgate_export::ToolOutcome;
use toolgate_store::StoredRun;

use crate::model::ModelSpec;

/// One step of the conversation.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    /// The prompt.
    User {
        /// Its text.
        text: String,
    },
    /// A model turn: its text and the tool calls it asked for.
    Assistant {
        /// The turn's number, from 1.
        turn: u64,
        /// What it wrote, if anything.
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The calls it asked for, in its order.
        #[serde(rename = "toolCalls")]
        tool_calls: Vec<CallView>,
    },
    /// The results of one turn's calls, in the same order.
    ToolResults {
        /// The turn that asked for them.
        turn: u64,
        /// One per call.
        results: Vec<ResultView>,
    },
}

/// A tool call as the model asked for it.
#[derive(Clone, Debug, Serialize)]
pub struct CallView {
    /// The provider's id for it.
    pub id: Option<String>,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments (as sent when they are not a JSON object).
    pub arguments: Value,
}

/// A call's result as the pipeline gave it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultView {
    /// The provider's id of the call it answers.
    pub id: Option<String>,
    /// The tool.
    pub tool: String,
    /// Whether it returned data.
    pub ok: bool,
    /// The data, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The error message, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error kind (`docs/envelope.md#error-kinds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// The approval the call waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

impl CallView {
    pub(crate) fn of(call: &toolgate_export::ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: match &call.arguments {
                Ok(map) => Value::Object(map.clone()),
                Err(e) => e.raw(),
            },
        }
    }
}

impl ResultView {
    pub(crate) fn of(outcome: &ToolOutcome) -> Self {
        let r: &ToolResult = &outcome.result;
        Self {
            id: outcome.call.id.clone(),
            tool: outcome.call.name.clone(),
            ok: r.is_ok(),
            data: r.data().cloned(),
            error: r.error().map(str::to_owned),
            error_kind: r.error_kind().map(|k| k.as_str().to_owned()),
            approval_id: r.approval_id.clone(),
        }
    }
}

/// How the run ended.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum End {
    /// The model answered without asking for a tool.
    Answer {
        /// The answer.
        text: String,
    },
    /// A budget is spent; the loop stopped.
    BudgetExhausted {
        /// Which: `max_turns`, `max_tool_calls`, `timeout_ms`, `max_attempts_per_tool`,
        /// `max_output_bytes` (or `status` for a run closed by someone else).
        budget: &'static str,
        /// Which budget, what was used, what to do.
        message: String,
    },
    /// The loop was cancelled (Ctrl-C in the CLI): the model request in flight was dropped and
    /// running tool calls were cancelled.
    Cancelled {
        /// What happened.
        message: String,
    },
    /// A tool call waits for a person's decision; the loop stopped.
    ApprovalPending {
        /// The durable approval.
        #[serde(rename = "approvalId")]
        approval_id: String,
        /// The tool that waits.
        tool: String,
        /// How to decide it.
        message: String,
    },
}

impl End {
    pub(crate) fn cancelled() -> Self {
        Self::Cancelled {
            message: "the run was cancelled; tool calls still running were cancelled too".into(),
        }
    }

    /// The stop for a spent budget, in words for the person who started the run.
    pub(crate) fn exhausted(e: &Exhausted) -> Self {
        let message = match e {
            Exhausted::Turns { used, max } => format!(
                "the run used {used} of its {max} model turns (max_turns) without a final answer; \
                 allow more with --max-turns (up to the principal's ceiling) or ask for less"
            ),
            Exhausted::ToolCalls { used, max } => format!(
                "the run made {used} of its {max} tool calls (max_tool_calls); allow more with \
                 --max-tool-calls (up to the principal's ceiling) or ask for less"
            ),
            Exhausted::Timeout { elapsed_ms, max } => format!(
                "the run ran for {elapsed_ms} ms of its {max} ms (timeout_ms); allow more with \
                 --timeout-ms (up to the principal's ceiling) or ask for less"
            ),
            Exhausted::Attempts { tool, failed, max } => format!(
                "tool {tool} failed {failed} times in this run (max_attempts_per_tool {max}); the \
                 model kept calling it: see the errors above, fix the tool or its input, or \
                 rephrase the prompt"
            ),
            Exhausted::AttemptsInFlight {
                tool,
                failed,
                in_flight,
                max,
            } => format!(
                "tool {tool} failed {failed} times in this run and {in_flight} more calls of it \
                 were still running (max_attempts_per_tool {max}); wait for them, fix the tool or \
                 its input, or rephrase the prompt"
            ),
            Exhausted::OutputBytes { used, max } => format!(
                "the tools returned {used} bytes of their {max} (max_output_bytes); ask for less"
            ),
            Exhausted::Closed { status } => {
                format!("the run is {status} (ended from elsewhere) and takes no more calls")
            }
        };
        Self::BudgetExhausted {
            budget: e.key(),
            message,
        }
    }
}

/// What the run consumed of its budget, read from the store at the end.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumption {
    /// The run's status (`open`, `exhausted`, `finished`).
    pub status: String,
    /// Its budget (every key resolved).
    pub budget: Budget,
    /// Model turns counted.
    pub turns: u64,
    /// Tool calls counted.
    pub tool_calls: u64,
    /// Bytes of tool output returned.
    pub output_bytes: u64,
    /// Wall time since it started.
    pub elapsed_ms: u64,
    /// Failed calls per tool.
    pub failures: BTreeMap<String, u32>,
}

impl Consumption {
    pub(crate) fn of(run: &StoredRun) -> Self {
        Self {
            status: run.status.as_str().to_owned(),
            budget: run.budget,
            turns: run.turns,
            tool_calls: run.tool_calls,
            output_bytes: run.output_bytes,
            elapsed_ms: run.elapsed_ms(),
            failures: run.failures.clone(),
        }
    }
}

/// The whole exchange.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transcript {
    /// The run it was counted against.
    pub run_id: RunId,
    /// The model.
    pub model: ModelSpec,
    /// The endpoint it was asked at.
    pub endpoint: String,
    /// The tools offered to it, by name.
    pub tools: Vec<String>,
    /// Tools left out because the provider's format cannot express them, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_tools: Vec<String>,
    /// The steps, in order.
    pub entries: Vec<Entry>,
    /// How it ended.
    pub end: End,
    /// What it consumed.
    pub consumption: Consumption,
    /// Every message sent to and received from the model, in the provider's shape (the tools
    /// array is left out: `tools` names them).
    pub messages: Vec<Value>,
}

impl Entry {
    /// The readable lines of this entry.
    pub fn human(&self) -> String {
        let mut t = String::new();
        match self {
            Self::User { text } => {
                let _ = writeln!(t, "user: {text}");
            }
            Self::Assistant {
                turn,
                text,
                tool_calls,
            } => {
                match text {
                    Some(text) => {
                        let _ = writeln!(t, "assistant (turn {turn}): {text}");
                    }
                    None => {
                        let _ = writeln!(t, "assistant (turn {turn}):");
                    }
                }
                for call in tool_calls {
                    let id = call.id.as_deref().unwrap_or("-");
                    let _ = writeln!(t, "  → {} {} [{id}]", call.name, call.arguments);
                }
            }
            Self::ToolResults { results, .. } => {
                for r in results {
                    let id = r.id.as_deref().unwrap_or("-");
                    if let Some(data) = &r.data {
                        let data = shortened(&match data {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        });
                        let _ = writeln!(t, "  ← {} [{id}] ok: {data}", r.tool);
                    } else {
                        let _ = writeln!(
                            t,
                            "  ← {} [{id}] {}: {}",
                            r.tool,
                            r.error_kind.as_deref().unwrap_or("error"),
                            r.error.as_deref().unwrap_or_default()
                        );
                    }
                }
            }
        }
        t
    }
}

impl Transcript {
    /// The readable end: the answer or why the loop stopped, and what the run consumed.
    pub fn human_end(&self) -> String {
        let c = &self.consumption;
        let mut t = String::new();
        match &self.end {
            End::Answer { text } => {
                let _ = writeln!(t, "\nAnswer:\n{text}");
            }
            End::BudgetExhausted { budget, message } => {
                let _ = writeln!(t, "\nStopped, budget exhausted ({budget}): {message}.");
            }
            End::Cancelled { message } => {
                let _ = writeln!(t, "\nStopped, cancelled: {message}.");
            }
            End::ApprovalPending {
                approval_id,
                tool,
                message,
            } => {
                let _ = writeln!(
                    t,
                    "\nStopped, approval pending: {tool} needs a person's yes; approval {approval_id} waits. {message}"
                );
            }
        }
        let _ = writeln!(
            t,
            "Run {} ({}): {}, {}, {} ms; `toolgate runs show {}` lists its calls.",
            self.run_id,
            c.status,
            plural(c.turns, "turn"),
            plural(c.tool_calls, "tool call"),
            c.elapsed_ms,
            self.run_id
        );
        t
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The characters of a result the readable transcript shows (`--json` has all of it).
const SHOWN: usize = 500;

/// `text` cut to [`SHOWN`] characters, saying how much was left out.
fn shortened(text: &str) -> String {
    let total = text.chars().count();
    if total <= SHOWN {
        return text.to_owned();
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!(
        "{head}… ({} more characters; --json shows all)",
        total - SHOWN
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_is_shortened_in_the_readable_form_only() {
        let long = "x".repeat(SHOWN + 20);
        let entry = Entry::ToolResults {
            turn: 1,
            results: vec![ResultView {
                id: Some("c1".into()),
                tool: "read_file".into(),
                ok: true,
                data: Some(Value::String(long.clone())),
                error: None,
                error_kind: None,
                approval_id: None,
            }],
        };
        let text = entry.human();
        assert!(
            text.contains("… (20 more characters; --json shows all)"),
            "{text}"
        );
        assert!(!text.contains(&long));
        let json = serde_json::to_string(&entry).unwrap();
        assert!(json.contains(&long));
    }
}

//! Runs and budgets: a [`RunId`] names one agent task, a [`Budget`] says what it may spend
//! (model turns, tool calls, wall time, failed attempts per tool, output bytes), and
//! [`Exhausted`] says which budget a refused call ran into, in words a model can act on.
//!
//! The pipeline enforces budgets ([`crate::pipeline::RunBudgetStage`]); the counts live in a
//! [`crate::pipeline::RunLedger`] (the store's, so they hold across restarts and instances).

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::envelope::ErrorKind;
use crate::error::ToolError;

/// How many failed calls of one tool a run allows when its budget does not say (seed 001:
/// "up to 3 times total").
pub const DEFAULT_ATTEMPTS_PER_TOOL: u32 = 3;

/// A run's identifier: a UUIDv7, so ids sort by creation time.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(Uuid);

impl RunId {
    /// A fresh id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// Parses the hyphenated form.
    pub fn parse(raw: &str) -> Result<Self, String> {
        Uuid::parse_str(raw.trim()).map(Self).map_err(|_| {
            format!("invalid run id {raw:?}: expected the id POST /v1/runs returned (a UUID)")
        })
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// What a run may spend. A key left out is not limited, except `max_attempts_per_tool`
/// ([`DEFAULT_ATTEMPTS_PER_TOOL`]). The keys are the same in the config file (`[budget]`,
/// `[principals.NAME.budget]`) and in JSON.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Model round trips, counted by the agent loop and by clients that report them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<u32>,
    /// Tool calls over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tool_calls: Option<u32>,
    /// Wall clock of the whole run, from its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 9_223_372_036_854_775_807u64))]
    pub timeout_ms: Option<u64>,
    /// Failed calls of one tool after which the run refuses that tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_attempts_per_tool: Option<u32>,
    /// Bytes of output (the data's JSON) returned over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 9_223_372_036_854_775_807u64))]
    pub max_output_bytes: Option<u64>,
}

impl Budget {
    /// The failed calls of one tool a run allows.
    pub fn attempts_per_tool(&self) -> u32 {
        self.max_attempts_per_tool
            .unwrap_or(DEFAULT_ATTEMPTS_PER_TOOL)
    }

    /// Refuses zeros (a budget of nothing is written by leaving the run out, not with `0`) and
    /// times or byte counts beyond what the store holds (`i64::MAX`).
    pub fn check(&self) -> Result<(), String> {
        let zero = [
            ("max_turns", self.max_turns.map(u64::from)),
            ("max_tool_calls", self.max_tool_calls.map(u64::from)),
            ("timeout_ms", self.timeout_ms),
            (
                "max_attempts_per_tool",
                self.max_attempts_per_tool.map(u64::from),
            ),
            ("max_output_bytes", self.max_output_bytes),
        ]
        .into_iter()
        .find(|(_, v)| *v == Some(0));
        if let Some((key, _)) = zero {
            return Err(format!(
                "budget {key} must be at least 1 (leave it out for no limit)"
            ));
        }
        // The store keeps them as 64-bit signed integers.
        for (key, value) in [
            ("timeout_ms", self.timeout_ms),
            ("max_output_bytes", self.max_output_bytes),
        ] {
            if value.is_some_and(|v| i64::try_from(v).is_err()) {
                return Err(format!(
                    "budget {key} must be at most {} (leave it out for no limit)",
                    i64::MAX
                ));
            }
        }
        Ok(())
    }

    /// This budget with every key `own` sets replaced (a principal's own budget over the
    /// defaults for every principal).
    #[must_use]
    pub fn overlaid(&self, own: &Budget) -> Budget {
        Budget {
            max_turns: own.max_turns.or(self.max_turns),
            max_tool_calls: own.max_tool_calls.or(self.max_tool_calls),
            timeout_ms: own.timeout_ms.or(self.timeout_ms),
            max_attempts_per_tool: own.max_attempts_per_tool.or(self.max_attempts_per_tool),
            max_output_bytes: own.max_output_bytes.or(self.max_output_bytes),
        }
    }

    /// This budget tightened by a run's `request`: each key the request sets must be at most
    /// this budget's (the ceiling). A looser key is refused with a message naming it and the
    /// ceiling; keys the request leaves out keep the ceiling.
    pub fn tightened(&self, request: &Budget) -> Result<Budget, String> {
        request.check()?;
        fn key<T: Copy + PartialOrd + fmt::Display>(
            name: &str,
            ceiling: Option<T>,
            asked: Option<T>,
        ) -> Result<Option<T>, String> {
            match (ceiling, asked) {
                (Some(max), Some(v)) if v > max => Err(format!(
                    "budget {name} {v} is looser than the principal's ceiling of {max}: a run may only tighten its budget (ask for at most {max}, or raise {name} in the config's [budget] or [principals.NAME.budget])"
                )),
                (_, Some(v)) => Ok(Some(v)),
                (max, None) => Ok(max),
            }
        }
        Ok(Budget {
            max_turns: key("max_turns", self.max_turns, request.max_turns)?,
            max_tool_calls: key(
                "max_tool_calls",
                self.max_tool_calls,
                request.max_tool_calls,
            )?,
            timeout_ms: key("timeout_ms", self.timeout_ms, request.timeout_ms)?,
            max_attempts_per_tool: key(
                "max_attempts_per_tool",
                Some(self.attempts_per_tool()),
                request.max_attempts_per_tool,
            )?,
            max_output_bytes: key(
                "max_output_bytes",
                self.max_output_bytes,
                request.max_output_bytes,
            )?,
        })
    }
}

/// Whether a run takes more calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Calls are counted against its budget.
    Open,
    /// A run-wide budget is spent: every further call is refused.
    Exhausted,
    /// Its owner ended it: every further call is refused.
    Finished,
}

impl RunStatus {
    /// The snake_case name (as stored and in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Exhausted => "exhausted",
            Self::Finished => "finished",
        }
    }

    /// Reads [`Self::as_str`] back.
    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Open, Self::Exhausted, Self::Finished]
            .into_iter()
            .find(|s| s.as_str() == raw)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The budget a refused call ran into, with what was used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exhausted {
    /// `max_tool_calls`: `used` calls made of `max`.
    ToolCalls {
        /// Calls made.
        used: u64,
        /// The budget.
        max: u32,
    },
    /// `timeout_ms`: the run started `elapsed_ms` ago.
    Timeout {
        /// Wall time since the run started.
        elapsed_ms: u64,
        /// The budget.
        max: u64,
    },
    /// `max_attempts_per_tool`, not spent yet: `tool` failed `failed` times and `in_flight`
    /// calls of it are still running; if they fail too, it reaches `max`, so this call waits for
    /// their outcome. Retryable (`rate_limited`): once they succeed, it may run.
    AttemptsInFlight {
        /// The tool.
        tool: String,
        /// Its failed calls.
        failed: u32,
        /// Its calls admitted and not yet settled.
        in_flight: u32,
        /// The budget.
        max: u32,
    },
    /// `max_attempts_per_tool`: `tool` failed `failed` times in this run.
    Attempts {
        /// The tool.
        tool: String,
        /// Its failed calls.
        failed: u32,
        /// The budget.
        max: u32,
    },
    /// `max_output_bytes`: `used` bytes returned so far.
    OutputBytes {
        /// Bytes returned.
        used: u64,
        /// The budget.
        max: u64,
    },
    /// `max_turns`: `used` model round trips reported.
    Turns {
        /// Turns reported.
        used: u64,
        /// The budget.
        max: u32,
    },
    /// The run was finished by its owner (or exhausted earlier).
    Closed {
        /// Its status.
        status: RunStatus,
    },
}

impl Exhausted {
    /// The budget key this is about (`max_tool_calls`, …; `status` for a closed run).
    pub fn key(&self) -> &'static str {
        match self {
            Self::ToolCalls { .. } => "max_tool_calls",
            Self::Timeout { .. } => "timeout_ms",
            Self::Attempts { .. } | Self::AttemptsInFlight { .. } => "max_attempts_per_tool",
            Self::OutputBytes { .. } => "max_output_bytes",
            Self::Turns { .. } => "max_turns",
            Self::Closed { .. } => "status",
        }
    }

    /// Whether the whole run is spent (as opposed to one tool in it).
    pub fn ends_run(&self) -> bool {
        !matches!(
            self,
            Self::Attempts { .. } | Self::AttemptsInFlight { .. } | Self::Closed { .. }
        )
    }

    /// The message: which budget, how much was used, and what the model should do.
    pub fn message(&self, run: &RunId) -> String {
        const STOP: &str = "Summarise what you have and stop.";
        match self {
            Self::ToolCalls { used, max } => format!(
                "Budget exhausted: run {run} has made {used} of its {max} tool calls (max_tool_calls). {STOP}"
            ),
            Self::Timeout { elapsed_ms, max } => format!(
                "Budget exhausted: run {run} has run for {elapsed_ms} ms of its {max} ms (timeout_ms). {STOP}"
            ),
            Self::Attempts { tool, failed, max } => format!(
                "Budget exhausted for tool {tool}: it failed {failed} times in run {run} (max_attempts_per_tool {max}). Change course: this tool failed {failed} times; do not call it again in this run, use another tool or answer with what you have."
            ),
            Self::AttemptsInFlight {
                tool,
                failed,
                in_flight,
                max,
            } => format!(
                "Tool {tool} has {in_flight} calls still running in run {run} and has failed {failed} times; if they fail too it reaches max_attempts_per_tool {max}. Wait for their results before calling {tool} again."
            ),
            Self::OutputBytes { used, max } => format!(
                "Budget exhausted: run {run} has received {used} bytes of tool output of its {max} (max_output_bytes). {STOP}"
            ),
            Self::Turns { used, max } => format!(
                "Budget exhausted: run {run} has used {used} of its {max} model turns (max_turns). {STOP}"
            ),
            Self::Closed { status } => format!(
                "Run {run} is {status} and takes no more calls. {STOP} (Start a new run for new work.)"
            ),
        }
    }

    /// The call's result: a `budget_exhausted` error, never retried (`rate_limited` and
    /// retryable for [`Self::AttemptsInFlight`]).
    pub fn error(&self, run: &RunId) -> ToolError {
        if matches!(self, Self::AttemptsInFlight { .. }) {
            return ToolError::new(ErrorKind::RateLimited, self.message(run));
        }
        ToolError::new(ErrorKind::BudgetExhausted, self.message(run)).permanent()
    }
}

/// What a run has used, as a ledger reads it before a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Wall time since the run started.
    pub elapsed_ms: u64,
    /// Model turns reported.
    pub turns: u64,
    /// Tool calls counted.
    pub tool_calls: u64,
    /// Output bytes returned.
    pub output_bytes: u64,
}

impl Budget {
    /// Why a run with `status` and `usage`, whose `tool` has failed `failed` times, must refuse
    /// one more call of it, or `None`. The tool-call count is checked here too; a ledger that
    /// counts concurrently also checks it in its atomic increment.
    pub fn refusal(
        &self,
        status: RunStatus,
        usage: &Usage,
        tool: &str,
        failed: u32,
    ) -> Option<Exhausted> {
        if status != RunStatus::Open {
            return Some(Exhausted::Closed { status });
        }
        if let Some(max) = self.timeout_ms
            && usage.elapsed_ms >= max
        {
            return Some(Exhausted::Timeout {
                elapsed_ms: usage.elapsed_ms,
                max,
            });
        }
        if let Some(max) = self.max_output_bytes
            && usage.output_bytes >= max
        {
            return Some(Exhausted::OutputBytes {
                used: usage.output_bytes,
                max,
            });
        }
        let max = self.attempts_per_tool();
        if failed >= max {
            return Some(Exhausted::Attempts {
                tool: tool.to_owned(),
                failed,
                max,
            });
        }
        match self.max_tool_calls {
            Some(max) if usage.tool_calls >= u64::from(max) => Some(Exhausted::ToolCalls {
                used: usage.tool_calls,
                max,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_may_only_tighten_and_the_refusal_names_the_key_and_the_ceiling() {
        let ceiling = Budget {
            max_tool_calls: Some(20),
            timeout_ms: Some(60_000),
            ..Budget::default()
        };
        let tighter = ceiling
            .tightened(&Budget {
                max_tool_calls: Some(5),
                max_turns: Some(4),
                max_attempts_per_tool: Some(2),
                ..Budget::default()
            })
            .unwrap();
        assert_eq!(tighter.max_tool_calls, Some(5));
        assert_eq!(tighter.max_turns, Some(4), "no ceiling: any value tightens");
        assert_eq!(tighter.timeout_ms, Some(60_000), "left out: the ceiling");
        assert_eq!(tighter.attempts_per_tool(), 2);
        let looser = ceiling.tightened(&Budget {
            max_tool_calls: Some(21),
            ..Budget::default()
        });
        let e = looser.unwrap_err();
        assert!(e.contains("max_tool_calls 21"), "{e}");
        assert!(e.contains("ceiling of 20"), "{e}");
        let e = ceiling
            .tightened(&Budget {
                max_attempts_per_tool: Some(4),
                ..Budget::default()
            })
            .unwrap_err();
        assert!(e.contains("max_attempts_per_tool 4"), "{e}");
        assert!(
            e.contains("ceiling of 3"),
            "the default is a ceiling too: {e}"
        );
        let e = ceiling
            .tightened(&Budget {
                timeout_ms: Some(0),
                ..Budget::default()
            })
            .unwrap_err();
        assert!(e.contains("timeout_ms must be at least 1"), "{e}");
    }

    #[test]
    fn a_principal_budget_overlays_the_defaults_key_by_key() {
        let defaults = Budget {
            max_tool_calls: Some(10),
            timeout_ms: Some(1000),
            ..Budget::default()
        };
        let own = Budget {
            max_tool_calls: Some(50),
            ..Budget::default()
        };
        let b = defaults.overlaid(&own);
        assert_eq!(b.max_tool_calls, Some(50));
        assert_eq!(b.timeout_ms, Some(1000));
    }

    #[test]
    fn messages_name_the_budget_the_use_and_what_to_do() {
        let run = RunId::new();
        let m = Exhausted::ToolCalls { used: 5, max: 5 }.message(&run);
        assert!(m.contains("5 of its 5 tool calls (max_tool_calls)"), "{m}");
        assert!(m.contains("Summarise what you have and stop"), "{m}");
        let m = Exhausted::Attempts {
            tool: "t".into(),
            failed: 3,
            max: 3,
        }
        .message(&run);
        assert!(m.contains("Change course: this tool failed 3 times"), "{m}");
        assert_eq!(
            Exhausted::Timeout {
                elapsed_ms: 1,
                max: 1
            }
            .error(&run)
            .kind(),
            ErrorKind::BudgetExhausted
        );
    }
}

//! Metric names and recording helpers (the `metrics` facade; a recorder is the embedder's choice).

use std::time::Duration;

use crate::definition::ToolDefinition;

/// Seconds spent validating one definition (`docs/tool-model.md#metrics`).
pub const VALIDATION_DURATION: &str = "tools.definitions.validation.duration";
/// Definitions that failed validation.
pub const VALIDATION_FAILURES: &str = "tools.definitions.validation.failures";
/// Custom definitions created (registered).
pub const DEFINITIONS_CREATED: &str = "tools.definitions.created";
/// Registered definitions per category (gauge, label `category`).
pub const DEFINITIONS_BY_CATEGORY: &str = "tools.definitions.by_category";
/// Calls per tool (label `tool`).
pub const CALLS: &str = "tools.calls";
/// Failed calls per tool (labels `tool`, `error_kind`).
pub const CALL_ERRORS: &str = "tools.calls.errors";
/// Call latency in seconds per tool (label `tool`).
pub const CALL_DURATION: &str = "tools.calls.duration";

pub(crate) fn record_validation(def: &ToolDefinition, took: Duration, ok: bool) {
    metrics::histogram!(VALIDATION_DURATION).record(took.as_secs_f64());
    if ok {
        tracing::debug!(target: "toolgate::definitions", tool = %def.name, parameters = def.parameters.len(), "tool definition validated");
    } else {
        metrics::counter!(VALIDATION_FAILURES).increment(1);
        tracing::debug!(target: "toolgate::definitions", tool = %def.name, "tool definition validation failed");
    }
}

/// Every metric name with its help text, for recorders that publish descriptions.
pub const DESCRIPTIONS: [(&str, &str); 7] = [
    (
        VALIDATION_DURATION,
        "Seconds spent validating one tool definition",
    ),
    (
        VALIDATION_FAILURES,
        "Tool definitions that failed validation",
    ),
    (DEFINITIONS_CREATED, "Custom tool definitions created"),
    (
        DEFINITIONS_BY_CATEGORY,
        "Registered tool definitions per category",
    ),
    (CALLS, "Tool calls per tool"),
    (CALL_ERRORS, "Failed tool calls per tool and error kind"),
    (CALL_DURATION, "Tool call latency in seconds per tool"),
];

/// Describes every metric to the installed recorder (help text, units).
pub fn describe() {
    for (name, help) in DESCRIPTIONS {
        match name {
            VALIDATION_DURATION | CALL_DURATION => {
                metrics::describe_histogram!(name, metrics::Unit::Seconds, help);
            }
            DEFINITIONS_BY_CATEGORY => metrics::describe_gauge!(name, help),
            _ => metrics::describe_counter!(name, help),
        }
    }
}

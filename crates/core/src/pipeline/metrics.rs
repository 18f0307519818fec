//! Per-tool call metrics: the call counter, the latency histogram and the failure counter of
//! every call, with the recorder's handles looked up once per tool.

use std::collections::HashMap;

use crate::envelope::ToolResult;
use crate::telemetry;

/// Each tool's call counter and latency histogram, looked up in the `metrics` recorder once per
/// pipeline: the recorder's lookup (building a labelled key, hashing it) costs more than the
/// call of a trivial tool.
#[derive(Default)]
pub(super) struct CallMetrics {
    by_tool: std::sync::RwLock<HashMap<String, ToolMetrics>>,
}

/// One tool's handles in the recorder.
#[derive(Clone)]
struct ToolMetrics {
    calls: metrics::Counter,
    duration: metrics::Histogram,
}

/// Tools whose handles are kept; past it (a registry churning through names) the recorder is
/// asked each time, as before.
const MAX_CACHED_TOOLS: usize = 4096;

impl CallMetrics {
    fn for_tool(&self, tool: &str) -> ToolMetrics {
        if let Some(found) = self
            .by_tool
            .read()
            .ok()
            .and_then(|map| map.get(tool).cloned())
        {
            return found;
        }
        let handles = ToolMetrics {
            calls: metrics::counter!(telemetry::CALLS, "tool" => tool.to_owned()),
            duration: metrics::histogram!(telemetry::CALL_DURATION, "tool" => tool.to_owned()),
        };
        if let Ok(mut map) = self.by_tool.write()
            && map.len() < MAX_CACHED_TOOLS
        {
            map.insert(tool.to_owned(), handles.clone());
        }
        handles
    }

    /// Counts the call and its latency per tool, and a failure per tool and error kind.
    pub(super) fn record(&self, result: &ToolResult, resolved: bool) {
        // Label by the tool only when it exists: callers' made-up names must not mint label values.
        let tool = if resolved {
            result.tool.as_str()
        } else {
            "(unknown)"
        };
        let handles = self.for_tool(tool);
        handles.calls.increment(1);
        handles.duration.record(result.duration_ms / 1000.0);
        if let Some(kind) = result.error_kind() {
            metrics::counter!(telemetry::CALL_ERRORS, "tool" => tool.to_owned(), "error_kind" => kind.as_str())
                .increment(1);
            tracing::info!(target: "toolgate::calls", tool = %result.tool, call_id = %result.call_id, error_kind = %kind, error = result.error().unwrap_or_default(), "tool call failed");
        } else {
            tracing::debug!(target: "toolgate::calls", tool = %result.tool, call_id = %result.call_id, attempts = result.attempts, "tool call succeeded");
        }
    }
}

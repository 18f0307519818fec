//! Pinning: the definition hash of an upstream tool and the diff between two versions, against tool poisoning and rug pulls.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool as an upstream's `tools/list` gives it: the fields that are pinned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamTool {
    /// The upstream's own name for the tool.
    pub name: String,
    /// Display title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The input JSON Schema.
    pub input_schema: Value,
    /// The output JSON Schema, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// MCP annotations (`readOnlyHint`, `destructiveHint`, …), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

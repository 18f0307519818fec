//! MCP `tools/list` entries (`docs/tool-model.md#effect` for the hints): name, title, description,
//! schemas, behaviour annotations derived from the governance fields, and those fields themselves
//! under a namespaced `_meta` key.
//!
//! Source: the MCP specification's `Tool` and `ToolAnnotations` (revisions 2025-06-18 and
//! 2025-11-25): `outputSchema` must be an object schema, and `_meta` keys take a reverse-DNS
//! prefix that does not use `mcp`/`modelcontextprotocol` as its second label.

use serde_json::{Map, Value, json};
use toolgate_core::{Category, Consequence, Effect, ToolSpec};

use crate::ExportNote;

/// The `_meta` key carrying toolgate's governance fields (a reverse-DNS prefix, as MCP asks).
pub const GOVERNANCE_META_KEY: &str = "dev.toolgate/governance";

/// One tool. MCP takes any object input schema, so only the output schema can need a note.
pub(crate) fn export_tool(spec: &ToolSpec) -> (Value, Vec<ExportNote>) {
    let name = spec.name().as_str();
    let title = spec.definition().title.clone();
    let mut notes = Vec::new();
    let mut tool = Map::with_capacity(7);
    tool.insert("name".into(), json!(name));
    if let Some(title) = &title {
        tool.insert("title".into(), json!(title));
    }
    tool.insert("description".into(), json!(spec.description()));
    tool.insert("inputSchema".into(), spec.input_schema().clone());
    if let Some(output) = spec.output_schema() {
        let is_object = output.get("type") == Some(&Value::String("object".into()));
        if is_object {
            tool.insert("outputSchema".into(), output.clone());
        } else {
            notes.push(ExportNote {
                tool: name.to_owned(),
                path: "outputSchema".into(),
                message: "Left out the output schema: MCP requires `type: object` there (structured content is an object); toolgate still validates the output when the tool is called".into(),
            });
        }
    }
    tool.insert("annotations".into(), annotations(spec, title.as_deref()));
    tool.insert(
        "_meta".into(),
        json!({
            GOVERNANCE_META_KEY: {
                "category": spec.category(),
                "effect": spec.effect(),
                "consequence": spec.consequence(),
                "requiresConfirmation": spec.requires_confirmation(),
                "taskSupport": spec.task_support(),
                "definitionHash": spec.definition_hash(),
            }
        }),
    );
    (Value::Object(tool), notes)
}

/// The MCP behaviour hints, every one stated explicitly (MCP's defaults assume the worst).
fn annotations(spec: &ToolSpec, title: Option<&str>) -> Value {
    let effect = spec.effect();
    let read_only = effect == Effect::Read;
    let destructive = effect == Effect::Delete
        || (effect == Effect::Write && spec.consequence() == Consequence::High);
    let open_world = matches!(
        spec.category(),
        Category::Network | Category::ExternalApi | Category::Communication
    ) || effect == Effect::SideEffect;
    let mut hints = Map::with_capacity(5);
    if let Some(title) = title {
        hints.insert("title".into(), json!(title));
    }
    hints.insert("readOnlyHint".into(), json!(read_only));
    hints.insert("destructiveHint".into(), json!(destructive));
    hints.insert("idempotentHint".into(), json!(spec.idempotent()));
    hints.insert("openWorldHint".into(), json!(open_world));
    Value::Object(hints)
}

//! Governance of upstream tools: the entry's defaults, per-tool overrides and how far upstream annotations are trusted.
//!
//! [`definition`] turns one upstream tool into a toolgate [`ToolDefinition`] (no handler: the
//! runtime attaches the one that forwards calls). What a model reads is kept as the upstream
//! wrote it: title, description, input and output schema. Where toolgate's rules refuse it (a
//! description over 1024 characters, a schema keyword beyond the plan's JSON Schema level), the
//! tool is refused with the [`Issue`]s, never edited. Only a missing description is supplied
//! (toolgate needs one; MCP does not), and it says that the server gave none.
//!
//! How a call is governed comes, weakest first, from:
//!
//! 1. the annotations. They come from an untrusted party, so by default only `readOnlyHint:
//!    true` counts (effect `read`, no confirmation); anything else is `side_effect` with
//!    confirmation required. With `trust_annotations` (on the server or the tool),
//!    `destructiveHint: false` gives `side_effect` without confirmation, a destructive tool
//!    (MCP's default) `side_effect` with consequence `high` and confirmation, and
//!    `idempotentHint` sets `idempotent`. A tool is taken to reach the world outside (category
//!    `external_api`, exported with `openWorldHint: true`, MCP's own default) unless its
//!    annotations are trusted and say `openWorldHint: false` (category `system`);
//! 2. the server's `[servers.NAME.defaults]`;
//! 3. the tool's `[servers.NAME.tools.TOOL]`.
//!
//! Every tool is tagged `mcp:SERVER` and carries `metadata.upstream = {server, tool, hash}`.

use serde_json::{Map, Value, json};
use toolgate_core::{
    Category, Consequence, Constraints, Effect, Issue, TierCaps, ToolDefinition, ToolName,
    ValidationEnv, validate_in,
};

use crate::config::{ServerEntry, ServerName};
use crate::naming::toml_key;
use crate::pin::{self, UpstreamTool};

/// The key of [`ToolDefinition::metadata`] that says where an upstream tool comes from.
pub const METADATA_KEY: &str = "upstream";

/// The tag every tool of server `server` carries: `mcp:SERVER`.
pub fn tag(server: &ServerName) -> String {
    format!("mcp:{server}")
}

/// Where a definition made by [`definition`] comes from, read back from its metadata.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Upstream {
    /// The server's name.
    pub server: String,
    /// The upstream's own name for the tool.
    pub tool: String,
    /// The definition hash ([`pin::hash`]) of the version the definition was made from.
    pub hash: String,
}

impl Upstream {
    /// The upstream of `def`, if [`definition`] made it.
    pub fn of(def: &ToolDefinition) -> Option<Self> {
        serde_json::from_value(def.metadata.get(METADATA_KEY)?.clone()).ok()
    }
}

/// The toolgate definition of the upstream tool `tool` of server `server`, named `name`,
/// validated with no plan limits (see [`definition_in`]).
pub fn definition(
    server: &ServerName,
    entry: &ServerEntry,
    tool: &UpstreamTool,
    name: &ToolName,
) -> Result<ToolDefinition, Vec<Issue>> {
    definition_in(server, entry, tool, name, TierCaps::UNLIMITED)
}

/// Like [`definition`], validated against the plan's `caps` (the JSON Schema level of its
/// schemas): the errors toolgate's validation finds are returned as they are.
pub fn definition_in(
    server: &ServerName,
    entry: &ServerEntry,
    tool: &UpstreamTool,
    name: &ToolName,
    caps: TierCaps,
) -> Result<ToolDefinition, Vec<Issue>> {
    let upstream = tool.name.as_str();
    let description = match tool.description.as_deref() {
        Some(d) if !d.trim().is_empty() => d.to_owned(),
        _ => format!(
            "Tool {upstream:?} of the MCP server {server} (the server gives no description)."
        ),
    };
    let hints = Hints::of(tool.annotations.as_ref());
    let mut def = ToolDefinition::new(name.as_str(), description);
    def.title = tool.title.clone().or(hints.title);
    def.input_schema = Some(tool.input_schema.clone());
    def.output_schema = tool.output_schema.clone();

    // 1. The annotations, as far as they are trusted.
    let trusted = entry.trusts_annotations(upstream);
    def.category = Some(if trusted && hints.open_world == Some(false) {
        Category::System
    } else {
        Category::ExternalApi
    });
    if hints.read_only == Some(true) {
        def.effect = Some(Effect::Read);
        def.requires_confirmation = Some(false);
    } else if trusted {
        def.effect = Some(Effect::SideEffect);
        if hints.destructive == Some(false) {
            def.requires_confirmation = Some(false);
        } else {
            def.consequence = Some(Consequence::High);
            def.requires_confirmation = Some(true);
        }
        def.idempotent = hints.idempotent;
    } else {
        def.effect = Some(Effect::SideEffect);
        def.requires_confirmation = Some(true);
    }

    // 2 and 3. The server's defaults, then the tool's own settings.
    let g = entry.governance_for(upstream);
    let mut issues = Vec::new();
    let at = |field: &str| {
        let table = match entry.tool_settings(upstream) {
            Some((key, t)) if field_set(t, field) => format!("tools.{}", toml_key(key)),
            _ => "defaults".to_owned(),
        };
        format!("servers.{server}.{table}.{field}")
    };
    if let Some(e) = &g.effect {
        match e.parse::<Effect>() {
            Ok(e) => def.effect = Some(e),
            Err(msg) => issues.push(issue(at("effect"), "server.effect", msg)),
        }
    }
    if let Some(c) = &g.consequence {
        match c.parse::<Consequence>() {
            Ok(c) => def.consequence = Some(c),
            Err(msg) => issues.push(issue(at("consequence"), "server.consequence", msg)),
        }
    }
    if let Some(rc) = g.requires_confirmation {
        def.requires_confirmation = Some(rc);
    }
    if let Some(p) = &g.required_permissions {
        def.required_permissions = p.clone();
    }
    def.tags.push(tag(server));
    for t in g.tags.iter().flatten() {
        if !def.tags.contains(t) {
            def.tags.push(t.clone());
        }
    }
    if g.timeout_ms.is_some() || g.max_output_bytes.is_some() || g.retryable.is_some() {
        def.constraints = Some(Constraints {
            timeout_ms: g.timeout_ms,
            max_output_bytes: g.max_output_bytes,
            retryable: g.retryable,
            ..Constraints::default()
        });
    }
    let mut upstream_meta = Map::new();
    upstream_meta.insert("server".into(), json!(server.as_str()));
    upstream_meta.insert("tool".into(), json!(upstream));
    upstream_meta.insert("hash".into(), json!(pin::hash(tool)));
    def.metadata
        .insert(METADATA_KEY.into(), Value::Object(upstream_meta));

    let env = ValidationEnv {
        max_isolation: caps.max_isolation,
        schema_level: caps.schema_level,
        ..ValidationEnv::default()
    };
    if let Err(report) = validate_in(&def, &env) {
        issues.extend(report.errors);
    }
    if issues.is_empty() {
        Ok(def)
    } else {
        Err(issues)
    }
}

fn issue(path: String, code: &str, message: String) -> Issue {
    Issue {
        path,
        code: code.to_owned(),
        message,
    }
}

/// Whether the governance table `g` sets `field` (to name the table a bad value came from).
fn field_set(g: &crate::config::Governance, field: &str) -> bool {
    match field {
        "effect" => g.effect.is_some(),
        "consequence" => g.consequence.is_some(),
        _ => false,
    }
}

/// MCP tool annotations, each only when it has the right JSON type.
#[derive(Default)]
struct Hints {
    title: Option<String>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
}

impl Hints {
    fn of(annotations: Option<&Value>) -> Self {
        let Some(a) = annotations.and_then(Value::as_object) else {
            return Self::default();
        };
        let flag = |k: &str| a.get(k).and_then(Value::as_bool);
        Self {
            title: a
                .get("title")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
                .map(str::to_owned),
            read_only: flag("readOnlyHint"),
            destructive: flag("destructiveHint"),
            idempotent: flag("idempotentHint"),
            open_world: flag("openWorldHint"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use toolgate_core::{Registry, Resolved, SchemaLevel, ToolBuilder, validate};

    use super::*;
    use crate::naming::assign;

    fn server(n: &str) -> ServerName {
        ServerName::parse(n).unwrap()
    }

    fn tool(v: Value) -> UpstreamTool {
        UpstreamTool::from_json(&v).unwrap()
    }

    fn entry(text: &str) -> ServerEntry {
        toml::from_str(text).unwrap()
    }

    fn name(n: &str) -> ToolName {
        ToolName::parse(n).unwrap()
    }

    const DRAFT7: &str = "http://json-schema.org/draft-07/schema#";

    /// Tools as `@modelcontextprotocol/server-everything` lists them.
    fn everything() -> Vec<UpstreamTool> {
        vec![
            tool(json!({
                "name": "echo",
                "description": "Echoes back the input",
                "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "Message to echo"}}, "required": ["message"], "additionalProperties": false, "$schema": DRAFT7}
            })),
            tool(json!({
                "name": "add",
                "description": "Adds two numbers",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "number", "description": "First number"}, "b": {"type": "number", "description": "Second number"}}, "required": ["a", "b"], "additionalProperties": false, "$schema": DRAFT7}
            })),
            tool(json!({
                "name": "longRunningOperation",
                "description": "Demonstrates a long running operation with progress updates",
                "inputSchema": {"type": "object", "properties": {"duration": {"type": "number", "default": 10, "description": "Duration of the operation in seconds"}, "steps": {"type": "number", "default": 5, "description": "Number of steps in the operation"}}, "additionalProperties": false, "$schema": DRAFT7}
            })),
            tool(json!({
                "name": "annotatedMessage",
                "description": "Demonstrates how annotations can be used to provide metadata about content",
                "inputSchema": {"type": "object", "properties": {"messageType": {"type": "string", "enum": ["error", "success", "debug"], "description": "Type of message to demonstrate different annotation patterns"}, "includeImage": {"type": "boolean", "default": false, "description": "Whether to include an example image"}}, "required": ["messageType"], "additionalProperties": false, "$schema": DRAFT7}
            })),
            tool(json!({
                "name": "get-structured-content",
                "title": "Get Structured Content",
                "description": "Returns structured content along with an output schema for client data validation",
                "inputSchema": {"type": "object", "properties": {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"], "description": "Choose city"}}, "required": ["location"]},
                "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number", "description": "Temperature in celsius"}, "conditions": {"type": "string", "description": "Weather conditions description"}, "humidity": {"type": "number", "description": "Humidity percentage"}}, "required": ["temperature", "conditions", "humidity"], "additionalProperties": false, "$schema": DRAFT7}
            })),
        ]
    }

    /// Tools as `@modelcontextprotocol/server-filesystem` lists them.
    fn filesystem() -> Vec<UpstreamTool> {
        vec![
            tool(json!({
                "name": "read_text_file",
                "title": "Read Text File",
                "description": "Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. Use the 'head' parameter to read only the first N lines of a file, or the 'tail' parameter to read only the last N lines of a file. Only works within allowed directories.",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"}, "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"}}, "required": ["path"], "additionalProperties": false, "$schema": DRAFT7},
                "annotations": {"readOnlyHint": true}
            })),
            tool(json!({
                "name": "edit_file",
                "title": "Edit File",
                "description": "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.",
                "inputSchema": {"type": "object", "properties": {
                    "path": {"type": "string"},
                    "edits": {"type": "array", "items": {"type": "object", "properties": {"oldText": {"type": "string", "description": "Text to search for - must match exactly"}, "newText": {"type": "string", "description": "Text to replace with"}}, "required": ["oldText", "newText"], "additionalProperties": false}},
                    "dryRun": {"type": "boolean", "default": false, "description": "Preview changes using git-style diff format"}
                }, "required": ["path", "edits"], "additionalProperties": false, "$schema": DRAFT7},
                "annotations": {"readOnlyHint": false, "idempotentHint": false, "destructiveHint": true}
            })),
            tool(json!({
                "name": "create_directory",
                "description": "Create a new directory or ensure a directory exists.",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false, "$schema": DRAFT7},
                "annotations": {"readOnlyHint": false, "idempotentHint": true, "destructiveHint": false}
            })),
            tool(json!({
                "name": "list_allowed_directories",
                "description": "Returns the list of directories that this server is allowed to access.",
                "inputSchema": {"type": "object", "properties": {}, "required": []},
                "annotations": {"readOnlyHint": true}
            })),
        ]
    }

    /// Registers every tool of `tools` under its assigned name, as the runtime would.
    fn register_all(
        registry: &Registry,
        s: &ServerName,
        entry: &ServerEntry,
        tools: &[UpstreamTool],
    ) -> Vec<ToolDefinition> {
        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let taken = |n: &str| registry.get(n).map(|_| format!("the tool {n}"));
        let assigned = assign(s, entry.prefix, &names, &taken).unwrap();
        let mut defs = Vec::new();
        for (t, (_, n)) in tools.iter().zip(&assigned) {
            let def = definition(s, entry, t, n).unwrap();
            let echo = ToolBuilder::from_definition(def.clone())
                .handler(|args, _ctx| async move { Ok(args) });
            registry.register(Arc::new(echo)).unwrap();
            defs.push(def);
        }
        defs
    }

    #[test]
    fn real_upstream_tools_register_in_a_registry() {
        let registry = Registry::new();
        let e = entry("command = \"/usr/bin/npx\"\n");
        let defs = register_all(&registry, &server("everything"), &e, &everything());
        let fs = register_all(&registry, &server("files"), &e, &filesystem());
        let mut names: Vec<String> = registry
            .snapshot()
            .iter()
            .map(|t| t.spec().name().to_string())
            .collect();
        names.sort();
        insta::assert_snapshot!("registered_names", names.join("\n"));
        // Kept as the upstream wrote them.
        let everything = everything();
        for (def, t) in defs.iter().zip(&everything) {
            assert_eq!(Some(&def.description), t.description.as_ref());
            assert_eq!(def.input_schema.as_ref(), Some(&t.input_schema));
            assert_eq!(def.output_schema, t.output_schema);
            let up = Upstream::of(def).unwrap();
            assert_eq!(
                (up.server.as_str(), up.tool.as_str()),
                ("everything", t.name.as_str())
            );
            assert_eq!(up.hash, pin::hash(t));
            assert!(def.tags.contains(&"mcp:everything".to_owned()));
        }
        assert_eq!(defs[4].title.as_deref(), Some("Get Structured Content"));
        assert_eq!(fs[1].title.as_deref(), Some("Edit File"));
        insta::assert_json_snapshot!("read_text_file_definition", fs[0]);
        // These shapes stay within the lowest plan's JSON Schema (draft-07 `$schema` included).
        let basic = TierCaps {
            schema_level: SchemaLevel::Basic,
            ..TierCaps::UNLIMITED
        };
        for t in everything.iter().chain(&filesystem()) {
            let n = name(&crate::naming::prefixed(&server("s"), &t.name));
            definition_in(&server("s"), &e, t, &n, basic).unwrap();
        }
    }

    fn resolved(e: &ServerEntry, t: &UpstreamTool) -> Resolved {
        let def = definition(&server("s"), e, t, &name("s__t")).unwrap();
        *validate(&def).unwrap().resolved()
    }

    #[test]
    fn untrusted_annotations_only_relax_read_only_tools() {
        let e = entry("command = \"/usr/bin/npx\"\n");
        let fs = filesystem();
        let r = resolved(&e, &fs[0]); // readOnlyHint: true
        assert_eq!((r.effect, r.requires_confirmation), (Effect::Read, false));
        let r = resolved(&e, &fs[2]); // destructiveHint: false, not trusted
        assert_eq!(
            (r.effect, r.requires_confirmation),
            (Effect::SideEffect, true)
        );
        assert!(!r.idempotent, "idempotentHint is not trusted");
        let r = resolved(&e, &everything()[0]); // no annotations
        assert_eq!(
            (r.effect, r.requires_confirmation),
            (Effect::SideEffect, true)
        );
        // A non-boolean hint is no hint.
        let odd = tool(
            json!({"name": "x", "description": "Does something to the world.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}),
        );
        assert!(resolved(&e, &odd).requires_confirmation);
    }

    #[test]
    fn trusted_annotations_decide() {
        let fs = filesystem();
        for e in [
            entry("command = \"/usr/bin/npx\"\ntrust_annotations = true\n"),
            entry("command = \"/usr/bin/npx\"\n[defaults]\ntrust_annotations = true\n"),
        ] {
            let r = resolved(&e, &fs[0]);
            assert_eq!(
                (r.effect, r.requires_confirmation, r.idempotent),
                (Effect::Read, false, true)
            );
            let r = resolved(&e, &fs[1]); // destructive
            assert_eq!(
                (
                    r.effect,
                    r.consequence,
                    r.requires_confirmation,
                    r.idempotent
                ),
                (Effect::SideEffect, Consequence::High, true, false)
            );
            let r = resolved(&e, &fs[2]); // additive, idempotent
            assert_eq!(
                (r.effect, r.requires_confirmation, r.idempotent),
                (Effect::SideEffect, false, true)
            );
            // MCP's default for a tool that says nothing is destructive.
            let r = resolved(&e, &everything()[0]);
            assert_eq!(
                (r.consequence, r.requires_confirmation),
                (Consequence::High, true)
            );
        }
        // Per tool.
        let e = entry(
            "command = \"/usr/bin/npx\"\n[tools.create_directory]\ntrust_annotations = true\n",
        );
        assert!(!resolved(&e, &fs[2]).requires_confirmation);
        assert!(resolved(&e, &fs[1]).requires_confirmation);
    }

    #[test]
    fn a_tool_reaches_the_open_world_unless_trusted_annotations_say_it_does_not() {
        let closed = tool(
            json!({"name": "lookup", "description": "Looks a word up in a local list.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        );
        let silent = &everything()[0];
        let untrusted = entry("command = \"/usr/bin/npx\"\n");
        let trusted = entry("command = \"/usr/bin/npx\"\ntrust_annotations = true\n");
        // An untrusted server's word that a tool stays closed is not taken.
        assert_eq!(
            resolved(&untrusted, &closed).category,
            Category::ExternalApi
        );
        assert_eq!(resolved(&untrusted, silent).category, Category::ExternalApi);
        assert_eq!(resolved(&trusted, &closed).category, Category::System);
        // MCP's default for a tool that says nothing is the open world.
        assert_eq!(resolved(&trusted, silent).category, Category::ExternalApi);
    }

    #[test]
    fn defaults_then_tool_overrides_win() {
        let e = entry(
            r#"
command = "/usr/bin/npx"
[defaults]
effect = "write"
consequence = "medium"
required_permissions = ["tool.files.use"]
tags = ["files"]
timeout_ms = 30000
[tools.edit_file]
effect = "delete"
consequence = "high"
requires_confirmation = true
required_permissions = ["tool.files.write"]
tags = ["edit"]
timeout_ms = 60000
max_output_bytes = 65536
retryable = false
[tools.create_directory]
requires_confirmation = false
"#,
        );
        let fs = filesystem();
        let s = server("files");
        let edit = definition(&s, &e, &fs[1], &name("files__edit_file")).unwrap();
        assert_eq!(edit.effect, Some(Effect::Delete));
        assert_eq!(edit.consequence, Some(Consequence::High));
        assert_eq!(edit.required_permissions, ["tool.files.write"]);
        assert_eq!(edit.tags, ["mcp:files", "edit"]);
        let c = edit.constraints.clone().unwrap();
        assert_eq!(
            (c.timeout_ms, c.max_output_bytes, c.retryable),
            (Some(60000), Some(65536), Some(false))
        );
        let mkdir = definition(&s, &e, &fs[2], &name("files__create_directory")).unwrap();
        assert_eq!(mkdir.effect, Some(Effect::Write));
        assert_eq!(mkdir.consequence, Some(Consequence::Medium));
        assert_eq!(mkdir.requires_confirmation, Some(false));
        assert_eq!(mkdir.required_permissions, ["tool.files.use"]);
        assert_eq!(mkdir.tags, ["mcp:files", "files"]);
        // A read-only tool under a `write` default becomes write, and keeps no confirmation.
        let read = definition(&s, &e, &fs[0], &name("files__read_text_file")).unwrap();
        assert_eq!(
            (read.effect, read.requires_confirmation),
            (Some(Effect::Write), Some(false))
        );
    }

    #[test]
    fn what_toolgate_refuses_is_reported_not_edited() {
        let e = entry("command = \"/usr/bin/npx\"\n");
        let s = server("s");
        let long = tool(
            json!({"name": "poison", "description": "x ".repeat(700), "inputSchema": {"type": "object"}}),
        );
        let not_object = tool(
            json!({"name": "bad", "description": "Has a schema that is not an object.", "inputSchema": {"type": "string"}}),
        );
        let long_title = tool(
            json!({"name": "t", "title": "T".repeat(200), "description": "A tool with a very long title.", "inputSchema": {"type": "object"}}),
        );
        let mut lines = Vec::new();
        for t in [&long, &not_object, &long_title] {
            for i in definition(&s, &e, t, &name("s__x")).unwrap_err() {
                lines.push(format!("{}: {i}", t.name));
            }
        }
        // The plan's JSON Schema level.
        let pattern = tool(
            json!({"name": "p", "description": "Looks a ticket up by its key.", "inputSchema": {"type": "object", "properties": {"key": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"}}}}),
        );
        let basic = TierCaps {
            schema_level: SchemaLevel::Basic,
            ..TierCaps::UNLIMITED
        };
        for i in definition_in(&s, &e, &pattern, &name("s__p"), basic).unwrap_err() {
            lines.push(format!("p: {i}"));
        }
        assert!(definition(&s, &e, &pattern, &name("s__p")).is_ok());
        insta::assert_snapshot!("refused_upstream_tools", lines.join("\n"));
        // A bad override names its table.
        let bad = ServerEntry {
            defaults: crate::config::Governance {
                effect: Some("destroy".into()),
                ..Default::default()
            },
            ..e.clone()
        };
        let issues = definition(&s, &bad, &everything()[0], &name("s__echo")).unwrap_err();
        assert_eq!(issues[0].path, "servers.s.defaults.effect");
    }

    #[test]
    fn a_missing_description_is_supplied_and_says_so() {
        let e = entry("command = \"/usr/bin/npx\"\n");
        let bare = tool(json!({"name": "ping", "inputSchema": {"type": "object"}}));
        let def = definition(&server("s"), &e, &bare, &name("s__ping")).unwrap();
        assert_eq!(
            def.description,
            "Tool \"ping\" of the MCP server s (the server gives no description)."
        );
    }
}

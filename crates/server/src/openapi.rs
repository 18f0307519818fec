//! `/openapi.json`: the OpenAPI 3.1 description of every REST route the server answers (the web
//! UI's static files, [`crate::UI_ROUTES`], are not API routes and are left out; neither is
//! `/mcp`, whose contract is the MCP specification). Its schemas are JSON Schema 2020-12 and say
//! what the server enforces (formats, patterns, bounds, enums, unknown fields refused); the
//! server's tests validate real responses against them and schemathesis
//! (`scripts/schemathesis.sh`) checks the server against it in both modes, so the document
//! cannot drift from what the server does. Each mode gets its own document: with principals
//! every API route asks for a bearer token, without them none does.

use serde_json::{Value, json};
use toolgate_core::{Category, Consequence, Effect, SafetyLevel, TaskSupport};

/// The wire names of an enum's values.
fn wire_names<T: Copy>(all: &[T], f: impl Fn(T) -> &'static str) -> Value {
    json!(all.iter().map(|x| f(*x)).collect::<Vec<_>>())
}

/// Every (method, path) in the document, in the router's spelling.
pub const ROUTES: [(&str, &str); 32] = [
    ("get", "/healthz"),
    ("get", "/openapi.json"),
    ("get", "/metrics"),
    ("get", "/v1/tools"),
    ("post", "/v1/tools"),
    ("post", "/v1/tools/validate"),
    ("get", "/v1/tools/{name}"),
    ("put", "/v1/tools/{name}"),
    ("delete", "/v1/tools/{name}"),
    ("get", "/v1/tools/{name}/history"),
    ("post", "/v1/tools/{name}/call"),
    ("get", "/v1/approvals"),
    ("get", "/v1/approvals/{id}"),
    ("post", "/v1/approvals/{id}/approve"),
    ("post", "/v1/approvals/{id}/deny"),
    ("get", "/v1/calls"),
    ("get", "/v1/calls/{callId}"),
    ("get", "/v1/calls/{callId}/output"),
    ("get", "/v1/export/{format}"),
    ("get", "/v1/events"),
    ("get", "/v1/servers"),
    ("post", "/v1/servers"),
    ("get", "/v1/servers/{name}"),
    ("delete", "/v1/servers/{name}"),
    ("get", "/v1/servers/{name}/tools"),
    ("post", "/v1/servers/{name}/restart"),
    ("post", "/v1/servers/{name}/approve"),
    ("get", "/v1/runs"),
    ("post", "/v1/runs"),
    ("get", "/v1/runs/{id}"),
    ("post", "/v1/runs/{id}/turns"),
    ("post", "/v1/runs/{id}/finish"),
];

/// Tool names as core's rule has them (`^[a-z][a-z0-9_]*$`, 1 to 64 characters).
fn tool_name_schema() -> Value {
    json!({
        "type": "string", "pattern": "^[a-z][a-z0-9_]*$",
        "minLength": 1, "maxLength": toolgate_core::MAX_NAME_LEN
    })
}

/// The `outcome` filter of `GET /v1/calls`: ok, error, or one error kind.
fn outcome_values() -> Vec<&'static str> {
    let mut values = vec!["ok", "error"];
    values.extend(toolgate_core::ErrorKind::ALL.iter().map(|k| k.as_str()));
    values
}

/// What a definition key holds, as core reads it; it decides whether the key takes `null`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    /// `name` and `description`: always there; `null` is refused.
    Required,
    /// An optional single value (core's `Option`): `null` is read as absent.
    Single,
    /// A list or a map: `null` is refused (leave the key out or send it empty).
    Many,
}

/// Every key a definition may have (snake_case, and the camelCase aliases core accepts) and
/// what it holds; any other key is refused. One list, so a key's nullability cannot drift
/// from its presence.
const DEFINITION_KEYS: [(&str, KeyKind); 29] = [
    ("name", KeyKind::Required),
    ("title", KeyKind::Single),
    ("description", KeyKind::Required),
    ("category", KeyKind::Single),
    ("effect", KeyKind::Single),
    ("consequence", KeyKind::Single),
    ("consequenceLevel", KeyKind::Single),
    ("requires_confirmation", KeyKind::Single),
    ("requiresConfirmation", KeyKind::Single),
    ("safety_level", KeyKind::Single),
    ("safetyLevel", KeyKind::Single),
    ("tasks", KeyKind::Single),
    ("taskSupport", KeyKind::Single),
    ("parameters", KeyKind::Many),
    ("required", KeyKind::Many),
    ("input_schema", KeyKind::Single),
    ("inputSchema", KeyKind::Single),
    ("output_schema", KeyKind::Single),
    ("outputSchema", KeyKind::Single),
    ("constraints", KeyKind::Single),
    ("required_permissions", KeyKind::Many),
    ("requiredPermissions", KeyKind::Many),
    ("tags", KeyKind::Many),
    ("version", KeyKind::Single),
    ("depends_on", KeyKind::Many),
    ("dependsOn", KeyKind::Many),
    ("idempotent", KeyKind::Single),
    ("metadata", KeyKind::Many),
    ("run", KeyKind::Single),
];

/// `schema`, or `null`: an enum gains `null` among its values, a typed schema `"null"` among
/// its types.
fn or_null(mut schema: Value) -> Value {
    if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut) {
        values.push(Value::Null);
    } else if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        schema["type"] = json!([ty, "null"]);
    }
    schema
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn json_body(name: &str, description: &str) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": schema_ref(name) } } })
}

fn errors(codes: &[&str]) -> Vec<(String, Value)> {
    codes
        .iter()
        .map(|code| {
            let description = match *code {
                "400" => "Malformed request (bad JSON, a query parameter that is unknown or out of range, bad cursor, bad id)",
                "401" => "Missing or invalid bearer token",
                "403" => "Not allowed: missing permission, built-in tool, plan limit, or a Host/Origin that is not allowed",
                "404" => "Not found (tools the caller may not see are reported exactly like missing ones)",
                "409" => "Conflict: a tool with that name exists, the tool is not stored, or an approval is no longer pending",
                "413" => "Request body too large",
                "415" => "The request body is not JSON (send Content-Type: application/json)",
                "422" => "The definition is invalid: every problem with its path",
                _ => "Error",
            };
            let schema = if *code == "422" { "ValidationError" } else { "Error" };
            ((*code).to_owned(), json_body(schema, description))
        })
        .collect()
}

fn op(
    summary: &str,
    params: Value,
    body: Option<Value>,
    ok: (&str, Value),
    errs: &[&str],
) -> Value {
    let mut responses = serde_json::Map::new();
    responses.insert(ok.0.to_owned(), ok.1);
    for (code, v) in errors(errs) {
        responses.insert(code, v);
    }
    let mut o = json!({ "summary": summary, "parameters": params, "responses": responses });
    if let Some(body) = body {
        o["requestBody"] = body;
    }
    o
}

fn with_response(mut operation: Value, code: &str, response: Value) -> Value {
    operation["responses"][code] = response;
    operation
}

fn path_param(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "path", "required": true, "description": description, "schema": schema })
}

fn query_param(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

/// The document for a server with principals (every API route asks for a bearer token).
pub fn openapi_document() -> Value {
    openapi_document_for(true)
}

/// The document for a server that requires tokens (`tokens`: principals are configured) or
/// not (local mode: no security scheme, no 401 answers).
pub fn openapi_document_for(tokens: bool) -> Value {
    let mut doc = document();
    add_servers(&mut doc);
    add_runs(&mut doc);
    add_links(&mut doc);
    if !tokens {
        local_mode(&mut doc);
    }
    doc
}

/// How one operation's answer leads to the next: a created tool to its reads, update, history
/// and removal; a call to its audit entry; a call that waits to its approval.
fn add_links(doc: &mut Value) {
    fn link(path: &str, method: &str, parameter: &str, value: &str) -> Value {
        let pointer = path.replace('~', "~0").replace('/', "~1");
        json!({
            "operationRef": format!("#/paths/{pointer}/{method}"),
            "parameters": { parameter: value }
        })
    }
    let tool = "$response.body#/name";
    doc["paths"]["/v1/tools"]["post"]["responses"]["201"]["links"] = json!({
        "GetTool": link("/v1/tools/{name}", "get", "name", tool),
        "UpdateTool": link("/v1/tools/{name}", "put", "name", tool),
        "ToolHistory": link("/v1/tools/{name}/history", "get", "name", tool),
        "DeleteTool": link("/v1/tools/{name}", "delete", "name", tool),
    });
    let call = "/v1/tools/{name}/call";
    doc["paths"][call]["post"]["responses"]["200"]["links"] = json!({
        "GetCall": link("/v1/calls/{callId}", "get", "callId", "$response.body#/callId"),
        "CallOutput": link("/v1/calls/{callId}/output", "get", "callId", "$response.body#/callId"),
    });
    let approval = "$response.body#/approval/id";
    doc["paths"][call]["post"]["responses"]["202"]["links"] = json!({
        "GetApproval": link("/v1/approvals/{id}", "get", "id", approval),
        "Approve": link("/v1/approvals/{id}/approve", "post", "id", approval),
        "Deny": link("/v1/approvals/{id}/deny", "post", "id", approval),
    });
}

/// Local mode: every request is the local principal, so no route asks for a token.
fn local_mode(doc: &mut Value) {
    if let Some(map) = doc.as_object_mut() {
        map.remove("security");
    }
    if let Some(components) = doc["components"].as_object_mut() {
        components.remove("securitySchemes");
    }
    doc["info"]["description"] = json!(
        "The governed tool layer for LLM agents: tool definitions, governed calls, audit and exports. This server has no principals: every request is the local principal and needs no token. Every error is the JSON error envelope."
    );
    if let Some(paths) = doc["paths"].as_object_mut() {
        for operation in paths.values_mut().filter_map(Value::as_object_mut) {
            for op in operation.values_mut().filter_map(Value::as_object_mut) {
                op.remove("security");
                if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
                    responses.remove("401");
                }
            }
        }
    }
}

fn document() -> Value {
    let name = path_param("name", "Tool name (snake_case)", tool_name_schema());
    let call_id = path_param(
        "callId",
        "Call id (a UUID)",
        json!({ "type": "string", "format": "uuid" }),
    );
    let approval_id = path_param(
        "id",
        "Approval id (apr_…)",
        json!({ "type": "string", "pattern": "^apr_[0-9a-f]{32}$" }),
    );
    let limit = query_param(
        "limit",
        "Page size (1–500, default 50)",
        json!({ "type": "integer", "minimum": 1, "maximum": 500 }),
    );
    let tools_cursor = query_param(
        "cursor",
        "nextCursor of the previous page (empty: the first page)",
        json!({ "type": "string", "pattern": "^(after:[a-z][a-z0-9_]{0,63})?$" }),
    );
    let calls_cursor = query_param(
        "cursor",
        "nextCursor of the previous page (empty: the first page)",
        json!({ "type": "string", "pattern": "^[0-9]{0,18}$" }),
    );
    let definition_body = json!({
        "required": true,
        "description": "A tool definition in the definition file format (JSON)",
        "content": { "application/json": { "schema": schema_ref("Definition") } }
    });
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "toolgate",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The governed tool layer for LLM agents: tool definitions, governed calls, audit and exports. Every route but /healthz and /openapi.json needs `Authorization: Bearer TOKEN` (this server has principals). Every error is the JSON error envelope."
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas(),
        },
        "security": [{ "bearer": [] }],
        "paths": {
            "/healthz": { "get": { "summary": "Liveness and basic facts", "security": [], "responses": { "200": json_body("Health", "Up") } } },
            "/openapi.json": { "get": { "summary": "This document", "security": [], "responses": { "200": { "description": "The OpenAPI document", "content": { "application/json": { "schema": { "type": "object" } } } } } } },
            "/metrics": { "get": op("Metrics in Prometheus text format", json!([]), None,
                ("200", json!({ "description": "Prometheus text exposition format", "content": { "text/plain": { "schema": { "type": "string" } } } })), &["401"]) },
            "/v1/tools": {
                "get": op("List the tools the caller may see", json!([
                    query_param("category", "Only this category", json!({ "type": "string", "enum": wire_names(Category::ALL, Category::as_str) })),
                    query_param("effect", "Only this effect", json!({ "type": "string", "enum": wire_names(Effect::ALL, Effect::as_str) })),
                    query_param("consequence", "Only this consequence level", json!({ "type": "string", "enum": wire_names(Consequence::ALL, Consequence::as_str) })),
                    query_param("tag", "Only tools with this tag", json!({ "type": "string" })),
                    query_param("q", "Case-insensitive text in the name or description", json!({ "type": "string" })),
                    query_param("builtin", "true: only built-in tools; false: only custom (stored or file) definitions", json!({ "type": "boolean" })),
                    limit.clone(), tools_cursor
                ]), None, ("200", json_body("ToolsPage", "A page of tools")), &["400", "401"]),
                "post": op("Create a custom tool definition (validated first; stored with version 1)", json!([]), Some(definition_body.clone()),
                    ("201", json_body("ToolDetail", "Created")), &["400", "401", "403", "409", "413", "415", "422"]),
            },
            "/v1/tools/validate": { "post": op("Validate a definition without storing it: any JSON object is read as a definition and the verdict lists every problem; an object with exactly `format` (toml, json or yaml) and `text` is definition text in that format, and each problem then carries its line and column", json!([]),
                Some(json!({ "required": true, "description": "A JSON object to check as a tool definition, or {\"format\": \"toml\", \"text\": \"…\"}", "content": { "application/json": { "schema": { "type": "object" } } } })),
                ("200", json_body("ValidationResult", "The verdict, with every problem")), &["400", "401", "413", "415"]) },
            "/v1/tools/{name}": {
                "get": op("One tool: definition, schemas, limits", json!([name.clone()]), None, ("200", json_body("ToolDetail", "The tool")), &["401", "404"]),
                "put": op("Replace a stored definition (a new version)", json!([name.clone()]), Some(definition_body),
                    ("200", json_body("ToolDetail", "Updated")), &["400", "401", "403", "404", "413", "415", "422"]),
                "delete": op("Remove a stored definition (its history is kept)", json!([name.clone()]), None,
                    ("204", json!({ "description": "Removed" })), &["401", "403", "404", "409"]),
            },
            "/v1/tools/{name}/history": { "get": op("Every stored version of a tool", json!([name.clone()]), None,
                ("200", json_body("History", "Versions, oldest first")), &["401", "404"]) },
            "/v1/tools/{name}/call": { "post": with_response(with_response(op("Call a tool through the pipeline; every outcome is an envelope", json!([name,
                { "name": "X-Toolgate-Client", "in": "header", "required": false, "schema": { "type": "string" },
                  "description": "The calling client's name, kept as the call's origin (audit log, approvals; at most 100 characters kept)" }]),
                Some(json!({ "required": false, "content": { "application/json": { "schema": schema_ref("CallBody") } } })),
                ("200", json_body("Envelope", "The result envelope (data or error, never both); for a repeated idempotency key whose call already ran, that call's envelope")), &["400", "401", "409", "413", "415"]),
                "202", json_body("PendingCall", "The tool requires confirmation: the call waits as a durable approval (a repeated idempotency key gives the same one)")),
                "404", json_body("Envelope", "No such tool (or one the caller may not see): the result envelope, errorKind not_found")) },
            "/v1/approvals": { "get": op("Durable approvals, newest first (the caller's own unless it holds toolgate.approvals.decide or toolgate.audit.read)", json!([
                    query_param("status", "Only this status", json!({ "type": "string", "enum": ["pending", "approved", "denied", "expired", "running", "executed", "indeterminate"] })),
                    query_param("limit", "At most this many (1–500, default 50)", json!({ "type": "integer", "minimum": 1, "maximum": 500 }))
                ]), None, ("200", json_body("ApprovalsList", "The approvals")), &["400", "401"]) },
            "/v1/approvals/{id}": { "get": op("One approval: the call, its redacted arguments, its status and, once run, its result", json!([approval_id.clone()]), None,
                ("200", json_body("Approval", "The approval")), &["401", "404"]) },
            "/v1/approvals/{id}/approve": { "post": op("Approve a pending call (needs toolgate.approvals.decide); it then runs once, with the caller's permissions checked again, and an `approval` event reports the result", json!([approval_id.clone()]),
                Some(json!({ "required": false, "content": { "application/json": { "schema": schema_ref("DecisionBody") } } })),
                ("200", json_body("Approval", "The approval, now approved")), &["400", "401", "403", "404", "409", "413", "415"]) },
            "/v1/approvals/{id}/deny": { "post": op("Deny a pending call (needs toolgate.approvals.decide); it will never run", json!([approval_id]),
                Some(json!({ "required": false, "content": { "application/json": { "schema": schema_ref("DecisionBody") } } })),
                ("200", json_body("Approval", "The approval, now denied")), &["400", "401", "403", "404", "409", "413", "415"]) },
            "/v1/calls": { "get": op("Audited calls, newest first (the caller's own unless it holds toolgate.audit.read)", json!([
                    query_param("tool", "Only calls of this tool", json!({ "type": "string" })),
                    query_param("principal", "Only calls made by this principal", json!({ "type": "string" })),
                    query_param("outcome", "ok (data), error (any error), or one error kind", json!({ "type": "string", "enum": outcome_values() })),
                    limit, calls_cursor
                ]), None, ("200", json_body("CallsPage", "A page of calls (with filters it may hold fewer than limit and still have a nextCursor)")), &["400", "401"]) },
            "/v1/calls/{callId}": { "get": op("One call's audit entries", json!([call_id.clone()]), None,
                ("200", json_body("CallDetail", "The call")), &["400", "401", "404"]) },
            "/v1/calls/{callId}/output": { "get": op("A large output kept apart from the audit log, byte for byte", json!([call_id]), None,
                ("200", json!({ "description": "The output as the tool returned it", "content": { "application/json": { "schema": {} } } })), &["400", "401", "404"]) },
            "/v1/export/{format}": { "get": op("Export the caller's tools for a provider", json!([
                    path_param("format", "openai, openai-responses, anthropic, gemini (OpenAPI-subset `parameters`), gemini-json-schema (`parametersJsonSchema`/`responseJsonSchema`) or mcp", json!({ "type": "string", "enum": ["openai", "openai-responses", "anthropic", "gemini", "gemini-json-schema", "mcp"] })),
                    query_param("strict", "openai, openai-responses and anthropic only: strict schemas (OpenAI Structured Outputs, Anthropic strict tool use); a tool that cannot be strict is exported without it, with a note; true with another format is a 400", json!({ "type": "boolean" })),
                    query_param("requireStrict", "Like strict, but a tool that cannot be strict fails the export: 422 listing every such tool and why", json!({ "type": "boolean" })),
                    query_param("tool", "Only this tool", json!({ "type": "string" }))
                ]), None, ("200", json_body("Export", "The provider document and what had to change")), &["400", "401", "404", "422"]) },
            "/v1/events": { "get": op("Server-sent events: `definition` (created, updated, deleted, validated), `call` (a finished call) and `approval` (an approval's new status: created, decided, expired, running, executed, indeterminate — whether it changed through this server, the CLI or another instance)", json!([]), None,
                ("200", json!({ "description": "An SSE stream; each event's data is JSON", "content": { "text/event-stream": { "schema": { "type": "string" } } } })), &["401"]) }
        }
    })
}

/// A definition: the keys core reads, no others. Values are checked by validation (422 with
/// every problem), which goes further than a schema can.
fn definition_schema() -> Value {
    let strings = json!({ "type": "array", "items": { "type": "string" } });
    let consequence = json!({ "enum": wire_names(Consequence::ALL, Consequence::as_str) });
    let safety = json!({ "enum": wire_names(SafetyLevel::ALL, SafetyLevel::as_str) });
    let mut properties = serde_json::Map::new();
    for (key, kind) in DEFINITION_KEYS {
        let schema = match key {
            "name" => tool_name_schema(),
            "title" | "description" | "version" => json!({ "type": "string" }),
            "category" => json!({ "enum": wire_names(Category::ALL, Category::as_str) }),
            "effect" => json!({ "enum": wire_names(Effect::ALL, Effect::as_str) }),
            "consequence" | "consequenceLevel" => consequence.clone(),
            "safety_level" | "safetyLevel" => safety.clone(),
            "tasks" | "taskSupport" => {
                json!({ "enum": wire_names(TaskSupport::ALL, TaskSupport::as_str) })
            }
            "requires_confirmation" | "requiresConfirmation" | "idempotent" => {
                json!({ "type": "boolean" })
            }
            "parameters" => json!({ "type": "array", "items": { "type": "object" } }),
            "required"
            | "required_permissions"
            | "requiredPermissions"
            | "tags"
            | "depends_on"
            | "dependsOn" => strings.clone(),
            _ => json!({ "type": "object" }),
        };
        let schema = if kind == KeyKind::Single {
            or_null(schema)
        } else {
            schema
        };
        properties.insert(key.to_owned(), schema);
    }
    let required: Vec<&str> = DEFINITION_KEYS
        .iter()
        .filter(|(_, kind)| *kind == KeyKind::Required)
        .map(|(key, _)| *key)
        .collect();
    json!({
        "type": "object", "required": required, "additionalProperties": false,
        "description": "A tool definition as in definition files (docs/tool-model.md#definition-fields); snake_case keys, camelCase aliases accepted; an optional single value (category, effect, tasks, constraints, run, ...) may be null, which is the same as leaving it out",
        "properties": properties
    })
}

fn schemas() -> Value {
    let issue = json!({
        "type": "object", "required": ["path", "code", "message"],
        "properties": { "path": { "type": "string" }, "code": { "type": "string" }, "message": { "type": "string" },
            "line": { "type": "integer", "minimum": 1, "description": "Where the problem is in definition text sent as {format, text} (1-based)" },
            "column": { "type": "integer", "minimum": 1 } }
    });
    let summary_props = json!({
        "name": { "type": "string" }, "title": { "type": "string" }, "description": { "type": "string" },
        "category": { "type": "string" }, "effect": { "enum": ["read", "write", "delete", "side_effect"] },
        "consequence": { "enum": ["low", "medium", "high"] }, "requiresConfirmation": { "type": "boolean" },
        "tags": { "type": "array", "items": { "type": "string" } }, "builtin": { "type": "boolean" },
        "implemented": { "type": "boolean", "description": "Whether calls run something (a built-in, a run kind, a handler); a definition without one answers every call unavailable" },
        "definitionHash": { "type": "string", "pattern": "^[0-9a-f]{64}$" }, "version": { "type": "string" }
    });
    let summary_required = json!([
        "name",
        "description",
        "category",
        "effect",
        "consequence",
        "requiresConfirmation",
        "tags",
        "builtin",
        "implemented",
        "definitionHash"
    ]);
    let mut detail_props = summary_props.clone();
    if let Some(map) = detail_props.as_object_mut() {
        map.insert("definition".into(), schema_ref("Definition"));
        map.insert("inputSchema".into(), json!({ "type": "object" }));
        map.insert("outputSchema".into(), json!({ "type": "object" }));
        map.insert("limits".into(), json!({
            "type": "object", "required": ["timeoutMs", "maxOutputBytes", "isolation", "maxAttempts"],
            "properties": { "timeoutMs": { "type": "integer" }, "maxOutputBytes": { "type": "integer" },
                "isolation": { "enum": ["none", "standard", "strict", "restricted"] }, "maxAttempts": { "type": "integer" } }
        }));
        map.insert(
            "requiredPermissions".into(),
            json!({ "type": "array", "items": { "type": "string" } }),
        );
        map.insert(
            "storedVersion".into(),
            json!({ "type": ["integer", "null"] }),
        );
        map.insert(
            "warnings".into(),
            json!({ "type": "array", "items": issue.clone() }),
        );
        map.insert(
            "changedFields".into(),
            json!({ "type": "array", "items": { "type": "string" } }),
        );
    }
    let mut detail_required = summary_required.clone();
    if let Some(list) = detail_required.as_array_mut() {
        for key in [
            "definition",
            "inputSchema",
            "limits",
            "requiredPermissions",
            "storedVersion",
        ] {
            list.push(json!(key));
        }
    }
    let error_kinds: Vec<&str> = toolgate_core::ErrorKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    let mut schemas = json!({
        "Error": {
            "type": "object", "required": ["error"],
            "properties": { "error": { "type": "object", "required": ["kind", "message"],
                "properties": { "kind": { "type": "string" }, "message": { "type": "string" } } } }
        },
        "ValidationError": {
            "type": "object", "required": ["error"],
            "properties": { "error": { "type": "object", "required": ["kind", "message", "errors", "warnings"],
                "properties": { "kind": { "const": "validation" }, "message": { "type": "string" },
                    "errors": { "type": "array", "minItems": 1, "items": issue.clone() },
                    "warnings": { "type": "array", "items": issue.clone() } } } }
        },
        "Issue": issue.clone(),
        "Definition": definition_schema(),
        "ToolSummary": { "type": "object", "required": summary_required, "properties": summary_props },
        "ToolDetail": { "type": "object", "required": detail_required, "properties": detail_props },
        "ToolsPage": {
            "type": "object", "required": ["tools", "nextCursor"],
            "properties": { "tools": { "type": "array", "items": schema_ref("ToolSummary") }, "nextCursor": { "type": ["string", "null"] } }
        },
        "ValidationResult": {
            "type": "object", "required": ["valid", "errors", "warnings"],
            "properties": { "valid": { "type": "boolean" }, "errors": { "type": "array", "items": issue.clone() },
                "warnings": { "type": "array", "items": issue }, "definitionHash": { "type": "string" },
                "definition": { "type": "object", "description": "For definition text that parsed: the definition as JSON, ready for POST /v1/tools" } }
        },
        "History": {
            "type": "object", "required": ["name", "versions"],
            "properties": { "name": { "type": "string" }, "versions": { "type": "array", "items": {
                "type": "object", "required": ["version", "definitionHash", "createdAt", "updatedAt", "createdBy", "definition"],
                "properties": { "version": { "type": "integer" }, "definitionHash": { "type": "string" },
                    "createdAt": { "type": "string" }, "updatedAt": { "type": "string" }, "createdBy": { "type": "string" },
                    "deletedAt": { "type": ["string", "null"] }, "definition": schema_ref("Definition") } } } }
        },
        "CallBody": {
            "type": "object", "additionalProperties": false,
            "properties": { "arguments": { "type": ["object", "null"], "description": "The tool's arguments (checked against its input schema; a mismatch is an envelope with errorKind validation); null or absent: none" }, "idempotencyKey": { "type": ["string", "null"] }, "reason": { "type": ["string", "null"] }, "run": { "type": ["string", "null"], "format": "uuid", "description": "The run to count the call against (or the Toolgate-Run header); a spent budget is an envelope with errorKind budget_exhausted" } }
        },
        "DecisionBody": {
            "type": "object", "additionalProperties": false,
            "properties": { "reason": { "type": ["string", "null"] } }
        },
        "Approval": {
            "type": "object",
            "required": ["id", "callId", "tool", "definitionHash", "argumentsSha256", "arguments", "principal", "status", "createdAt", "expiresAt"],
            "properties": {
                "id": { "type": "string", "pattern": "^apr_[0-9a-f]{32}$" }, "callId": { "type": "string" }, "tool": { "type": "string" },
                "definitionHash": { "type": "string" }, "argumentsSha256": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
                "arguments": { "description": "The call's arguments, sensitive values redacted" },
                "principal": { "type": "string" }, "reason": { "type": ["string", "null"] }, "idempotencyKey": { "type": ["string", "null"] },
                "status": { "enum": ["pending", "approved", "denied", "expired", "running", "executed", "indeterminate"] },
                "createdAt": { "type": "string" }, "expiresAt": { "type": "string" },
                "decidedAt": { "type": ["string", "null"] }, "decidedBy": { "type": ["string", "null"] }, "decisionReason": { "type": ["string", "null"] },
                "startedAt": { "type": ["string", "null"] }, "finishedAt": { "type": ["string", "null"] },
                "result": { "description": "The call's result envelope once it ran" }
            }
        },

        "ApprovalsList": {
            "type": "object", "required": ["approvals"],
            "properties": { "approvals": { "type": "array", "items": schema_ref("Approval") } }
        },
        "PendingCall": {
            "type": "object", "required": ["approval", "result", "watch"],
            "description": "202 of a call that waits for a person's yes",
            "properties": { "approval": schema_ref("Approval"), "result": schema_ref("Envelope"),
                "watch": { "type": "object", "required": ["approval", "events"], "properties": { "approval": { "type": "string" }, "events": { "type": "string" } } } }
        },
        "Envelope": {
            "description": "The result of one call, whatever happened: data or error, never both (docs/envelope.md)",
            "type": "object", "required": ["tool", "callId", "fetchedAt", "input", "attempts", "durationMs"],
            "properties": {
                "tool": { "type": "string" }, "callId": { "type": "string" },
                "fetchedAt": { "type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$" },
                "input": {}, "data": {}, "error": { "type": "string" }, "errorKind": { "enum": error_kinds },
                "attempts": { "type": "integer", "minimum": 0 }, "durationMs": { "type": "number", "minimum": 0 },
                "truncated": { "const": true }, "outputRef": { "type": "string" },
                "approvalId": { "type": "string", "description": "The durable approval a confirmation_required call waits for" },
                "content": { "type": "array", "items": { "type": "object", "required": ["type"] } }
            },
            "oneOf": [
                { "required": ["data"], "not": { "anyOf": [{ "required": ["error"] }, { "required": ["errorKind"] }] } },
                { "required": ["error", "errorKind"], "not": { "required": ["data"] } }
            ]
        },
        "AuditRecord": {
            "type": "object", "required": ["callId", "tool", "principal", "fetchedAt"],
            "properties": { "seq": { "type": "integer" }, "callId": { "type": "string" }, "tool": { "type": "string" },
                "principal": { "type": "string" }, "fetchedAt": { "type": "string" },
                "content": { "type": "array", "description": "Digests of the content blocks returned beside the data (not their bytes)",
                    "items": { "type": "object", "required": ["type", "bytes", "sha256"], "additionalProperties": false,
                        "properties": { "type": { "enum": ["text", "image", "audio", "resource", "resource_link"] }, "mimeType": { "type": "string" },
                            "uri": { "type": "string" }, "bytes": { "type": "integer", "minimum": 0 },
                            "sha256": { "type": "string", "pattern": "^[0-9a-f]{64}$" } } } } }
        },
        "CallsPage": {
            "type": "object", "required": ["calls", "nextCursor"],
            "properties": { "calls": { "type": "array", "items": schema_ref("AuditRecord") }, "nextCursor": { "type": ["string", "null"] } }
        },
        "CallDetail": {
            "type": "object", "required": ["started", "finished", "interrupted"],
            "properties": { "started": { "type": ["object", "null"] },
                "finished": { "anyOf": [schema_ref("AuditRecord"), { "type": "null" }] },
                "interrupted": { "type": "boolean" } }
        },
        "Export": {
            "type": "object", "required": ["format", "document", "notes"],
            "properties": { "format": { "enum": ["openai", "openai-responses", "anthropic", "gemini", "gemini-json-schema", "mcp"] },
                "document": {}, "notes": { "type": "array", "items": { "type": "object", "required": ["tool", "path", "message"] } } }
        },
        "Health": {
            "type": "object", "required": ["status", "version", "tools", "store", "callsInFlight"],
            "properties": { "status": { "const": "ok" }, "version": { "type": "string" }, "tools": { "type": "integer" },
                "store": { "enum": ["sqlite", "postgres"] }, "callsInFlight": { "type": "integer" } }
        }
    });
    schemas["CallOrigin"] = json!({
        "type": "object", "required": ["via"], "additionalProperties": false,
        "description": "Where a call came from: an MCP client (its initialize clientInfo), REST (the optional X-Toolgate-Client header) or the command line",
        "properties": { "via": { "enum": ["mcp", "rest", "cli"] }, "client": { "type": "string", "maxLength": 100 },
            "version": { "type": "string", "maxLength": 100 } }
    });
    // Where a call came from and who cancelled it (added beside the macro above, which is at
    // serde_json's recursion limit).
    schemas["Approval"]["properties"]["origin"] = schema_ref("CallOrigin");
    schemas["AuditRecord"]["properties"]["origin"] = schema_ref("CallOrigin");
    schemas["AuditRecord"]["properties"]["cancelledBy"] = json!({ "type": "string",
        "description": "Who cancelled the call: client, client_disconnected, user:cli, shutdown, or timeout" });
    schemas
}

/// Server names as the gateway's rule has them: 1 to 32 lowercase letters, digits and single
/// underscores, starting with a letter and not ending with an underscore.
fn server_name_schema() -> Value {
    json!({
        "type": "string", "pattern": "^[a-z](_?[a-z0-9])*$", "minLength": 1, "maxLength": 32,
        "description": "The server's name (the SERVER of SERVER__TOOL)"
    })
}

/// A server's lifecycle states, as the views spell them.
const SERVER_STATES: [&str; 4] = ["stopped", "starting", "ready", "failed"];

/// The `/v1/servers` routes and their schemas (the upstream MCP servers; added beside the main
/// document, whose macro is at serde_json's recursion limit).
/// `/v1/runs` (see `rest/runs.rs`).
fn add_runs(doc: &mut Value) {
    // null or absent: no limit. Counts are 32-bit; times and bytes fit the store's 64-bit
    // signed integers.
    let count = json!({ "type": ["integer", "null"], "minimum": 1, "maximum": u32::MAX });
    let large = json!({ "type": ["integer", "null"], "minimum": 1, "maximum": i64::MAX });
    let budget = json!({ "type": "object", "additionalProperties": false, "properties": {
        "max_turns": count.clone(),
        "max_tool_calls": count.clone(),
        "timeout_ms": large.clone(),
        "max_attempts_per_tool": count,
        "max_output_bytes": large } });
    let run = json!({ "type": "object", "required": ["id", "principal", "budget", "startedAt", "status", "turns", "toolCalls", "reservedCalls", "outputBytes", "failures", "elapsedMs"],
        "properties": {
            "id": { "type": "string" }, "principal": { "type": "string" }, "budget": budget.clone(),
            "startedAt": { "type": "string" }, "status": { "type": "string", "enum": ["open", "exhausted", "finished"] },
            "turns": { "type": "integer" }, "toolCalls": { "type": "integer" }, "reservedCalls": { "type": "integer" }, "outputBytes": { "type": "integer" },
            "failures": { "type": "object", "additionalProperties": { "type": "integer" } },
            "elapsedMs": { "type": "integer" },
            "calls": { "type": "array", "items": { "type": "object", "required": ["callId", "tool", "failed", "outputBytes", "at"], "properties": {
                "callId": { "type": "string", "format": "uuid" }, "tool": { "type": "string" }, "failed": { "type": "boolean" },
                "outputBytes": { "type": "integer", "minimum": 0 }, "at": { "type": "string" } } } } } });
    let body = |description: &str, schema: Value| json!({ "description": description, "content": { "application/json": { "schema": schema } } });
    let id = path_param(
        "id",
        "Run id (as POST /v1/runs returned it)",
        json!({ "type": "string", "format": "uuid" }),
    );
    let paths = json!({
        "/v1/runs": {
            "get": op("The caller's runs, newest first, with their budget and consumption", json!([query_param("limit", "Page size, 1 to 500 (default 50)", json!({ "type": "integer", "minimum": 1, "maximum": 500 }))]), None,
                ("200", body("The runs", json!({ "type": "object", "properties": { "runs": { "type": "array", "items": run.clone() } } }))), &["400", "401"]),
            "post": op("Start a run of the caller: its configured budget, tightened by the body's budget (a looser key is a 403 naming the key and the ceiling)", json!([]),
                Some(json!({ "required": false, "content": { "application/json": { "schema": { "type": "object", "additionalProperties": false, "properties": { "budget": { "anyOf": [budget, { "type": "null" }] } } } } } })),
                ("201", body("The run", run.clone())), &["400", "401", "403", "413", "415"]),
        },
        "/v1/runs/{id}": {
            "get": op("One of the caller's runs with its consumption and the calls counted against it (another principal's run is a 404)", json!([id.clone()]), None,
                ("200", body("The run and its calls", run.clone())), &["400", "401", "404"]),
        },
        "/v1/runs/{id}/turns": {
            "post": op("Report one model turn of the run (409 once max_turns is spent)", json!([id.clone()]), None,
                ("200", body("The turns counted", json!({ "type": "object", "properties": { "turns": { "type": "integer" } } }))), &["400", "401", "404", "409"]),
        },
        "/v1/runs/{id}/finish": {
            "post": op("Finish the run: further calls naming it are refused budget_exhausted", json!([id]), None,
                ("200", body("The run", run)), &["400", "401", "404"]),
        },
    });
    if let (Some(all), Some(new)) = (doc["paths"].as_object_mut(), paths.as_object()) {
        for (path, item) in new {
            all.insert(path.clone(), item.clone());
        }
    }
}

fn add_servers(doc: &mut Value) {
    let name = path_param(
        "name",
        "Server name (the SERVER of SERVER__TOOL)",
        server_name_schema(),
    );
    let paths = json!({
        "/v1/servers": {
            "get": op("Every upstream MCP server: transport, where it is declared, state, tools served and waiting for approval", json!([]), None,
                ("200", json_body("ServerList", "The servers, by name")), &["401"]),
            "post": op("Add (store) a server and list its tools (needs toolgate.servers.manage); they wait for approval unless approve is true. An invalid name or entry is a 422 listing every problem", json!([]),
                Some(json!({ "required": true, "content": { "application/json": { "schema": schema_ref("AddServer") } } })),
                ("201", json_body("ServerDetail", "Added: the server as listed (or failed to start, its state says why)")), &["400", "401", "403", "409", "413", "415", "422"]),
        },
        "/v1/servers/{name}": {
            "get": op("One server: its state (with the last error and stderr), its entry (literal secrets redacted) and its tools", json!([name.clone()]), None,
                ("200", json_body("ServerDetail", "The server")), &["401", "404"]),
            "delete": op("Remove a server added through the API or the CLI (needs toolgate.servers.manage): its tools stop being served, its process stops, its pins are forgotten; config-file servers are removed there (409)", json!([name.clone()]), None,
                ("200", json_body("RemovedServer", "Removed, with the tool names no longer served")), &["401", "403", "404", "409"]),
        },
        "/v1/servers/{name}/tools": {
            "get": op("A server's tools with their status (approved, pending, quarantined, refused); a quarantined tool lists what changed since it was approved (old and new values)", json!([name.clone()]), None,
                ("200", json_body("ServerTools", "The tools, by upstream name")), &["401", "404"]),
        },
        "/v1/servers/{name}/restart": {
            "post": op("Restart a server (needs toolgate.servers.manage): its tools are listed anew and checked against their pins", json!([name.clone()]), None,
                ("200", json_body("ServerSummary", "The server after the restart")), &["401", "403", "404"]),
        },
        "/v1/servers/{name}/approve": {
            "post": op("Approve tools of a server (needs toolgate.servers.manage): their current definitions are pinned and they are served from now on. The body names the tools or says all; an empty body approves nothing (400)", json!([name]),
                Some(json!({ "required": true, "content": { "application/json": { "schema": schema_ref("ApproveServerTools") } } })),
                ("200", json_body("ApprovedTools", "What was approved, by whom")), &["400", "401", "403", "404", "409", "413", "415"]),
        },
    });
    if let (Some(all), Some(new)) = (doc["paths"].as_object_mut(), paths.as_object()) {
        for (path, item) in new {
            all.insert(path.clone(), item.clone());
        }
    }
    let state_props = json!({
        "name": { "type": "string" },
        "transport": { "enum": ["stdio", "http"] },
        "source": { "enum": ["config", "store"] },
        "state": { "enum": SERVER_STATES },
        "error": { "type": "string" },
        "stderrTail": { "type": "string" },
        "eager": { "type": "boolean" },
    });
    let mut summary_props = state_props.clone();
    summary_props["toolsServed"] = json!({ "type": "integer", "minimum": 0, "description": "How many of its tools are served" });
    summary_props["pendingChanges"] = json!({ "type": "integer", "minimum": 0, "description": "How many of its tools wait for approval" });
    let mut detail_props = state_props;
    detail_props["pendingChanges"] = summary_props["pendingChanges"].clone();
    detail_props["toolsServed"] = summary_props["toolsServed"].clone();
    detail_props["entry"] = json!({ "type": "object", "description": "The entry as declared, literal environment and header values replaced by [REDACTED]" });
    detail_props["tools"] = json!({ "type": "array", "items": schema_ref("ServerTool") });
    let summary_required = json!([
        "name",
        "transport",
        "source",
        "state",
        "eager",
        "toolsServed",
        "pendingChanges"
    ]);
    let schemas = json!({
        "ServerSummary": { "type": "object", "required": summary_required, "properties": summary_props },
        "ServerList": {
            "type": "object", "required": ["servers"],
            "properties": { "servers": { "type": "array", "items": schema_ref("ServerSummary") } }
        },
        "ServerDetail": {
            "type": "object", "required": ["name", "transport", "source", "state", "eager", "toolsServed", "pendingChanges", "entry", "tools"],
            "properties": detail_props
        },
        "ServerTool": {
            "type": "object", "required": ["upstreamName", "status", "hash"],
            "properties": {
                "upstreamName": { "type": "string" },
                "name": { "type": "string", "description": "The toolgate name it is (or would be) served under" },
                "status": { "enum": ["approved", "pending", "quarantined", "refused"] },
                "description": { "type": "string" },
                "hash": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
                "approvedHash": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
                "changes": { "type": "array", "items": {
                    "type": "object", "required": ["field", "old", "new"],
                    "properties": { "field": { "type": "string" }, "old": {}, "new": {} } } },
                "reason": { "type": "string" }
            }
        },
        "ServerTools": {
            "type": "object", "required": ["server", "tools"],
            "properties": { "server": { "type": "string" }, "tools": { "type": "array", "items": schema_ref("ServerTool") } }
        },
        "ApproveServerTools": {
            "type": "object", "additionalProperties": false,
            "description": "Either the tools to approve (upstream or toolgate names) or all: true",
            "properties": {
                "tools": { "type": "array", "minItems": 1, "items": { "type": "string" } },
                "all": { "const": true }
            },
            "oneOf": [ { "required": ["tools"], "not": { "required": ["all"] } }, { "required": ["all"], "not": { "required": ["tools"] } } ]
        },
        "AddServer": {
            "type": "object", "required": ["name", "entry"], "additionalProperties": false,
            "properties": {
                "name": server_name_schema(),
                "entry": { "type": "object", "description": "As [servers.NAME] in the config file: command and args (stdio) or url and headers (Streamable HTTP), and the other keys" },
                "approve": { "type": "boolean", "description": "Approve the tools of this first sight up front" }
            }
        },
        "ApprovedTools": {
            "type": "object", "required": ["server", "by", "approved"],
            "properties": { "server": { "type": "string" }, "by": { "type": "string" },
                "approved": { "type": "array", "items": schema_ref("ServerTool") } }
        },
        "RemovedServer": {
            "type": "object", "required": ["name", "toolsRemoved", "pinsRemoved"],
            "properties": { "name": { "type": "string" }, "toolsRemoved": { "type": "array", "items": { "type": "string" } },
                "pinsRemoved": { "type": "integer", "minimum": 0, "description": "Tool pins forgotten: tools seen again under this name wait for review" } }
        },
    });
    if let (Some(all), Some(new)) = (
        doc["components"]["schemas"].as_object_mut(),
        schemas.as_object(),
    ) {
        for (name, schema) in new {
            all.insert(name.clone(), schema.clone());
        }
    }
    // An added server leads to its reads, restart, approval and removal.
    let link = |path: &str, method: &str| {
        json!({
            "operationRef": format!("#/paths/{}/{method}", path.replace('~', "~0").replace('/', "~1")),
            "parameters": { "name": "$response.body#/name" }
        })
    };
    doc["paths"]["/v1/servers"]["post"]["responses"]["201"]["links"] = json!({
        "GetServer": link("/v1/servers/{name}", "get"),
        "ServerTools": link("/v1/servers/{name}/tools", "get"),
        "RestartServer": link("/v1/servers/{name}/restart", "post"),
        "RemoveServer": link("/v1/servers/{name}", "delete"),
    });
    let health = &mut doc["components"]["schemas"]["Health"];
    health["properties"]["servers"] = json!({
        "type": "array", "description": "Each upstream MCP server's state (details: GET /v1/servers)",
        "items": {
            "type": "object", "required": ["name", "state", "tools", "pendingChanges"], "additionalProperties": false,
            "properties": { "name": { "type": "string" }, "state": { "enum": SERVER_STATES },
                "tools": { "type": "integer", "minimum": 0 }, "pendingChanges": { "type": "integer", "minimum": 0 } }
        }
    });
    if let Some(required) = health["required"].as_array_mut() {
        required.push(json!("servers"));
    }
}

//! Anthropic Messages API tools: `{"name", "description", "input_schema"}` with the input schema
//! as written, except composition keywords at its top level, which the API rejects; with strict
//! mode, the schema rewritten to the subset strict tool use accepts and `"strict": true`; and the
//! examples of the input schema handed on as `input_examples`.
//!
//! Sources:
//! - the tool definition, <https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview>,
//!   and its error "input_schema does not support oneOf, allOf, or anyOf at the top level";
//! - strict tool use, <https://platform.claude.com/docs/en/agents-and-tools/tool-use/strict-tool-use>,
//!   with the JSON Schema subset of structured outputs
//!   (<https://platform.claude.com/docs/en/build-with-claude/structured-outputs>, "JSON Schema
//!   limitations"): types, `enum`/`const` of primitives, `anyOf`, `allOf`, local `$ref`/`$defs`
//!   (no recursion), `required`, `additionalProperties: false` on every object, string formats
//!   date-time, time, date, duration, email, hostname, uri, ipv4, ipv6, uuid, and `minItems` of 0
//!   or 1; no numeric, string-length or other array constraints. The same subset is what the
//!   official SDKs' `transform_schema` keeps. Its complexity limits (24 optional parameters and
//!   16 parameters with union types across the strict tools of a request) are checked per tool;
//! - `input_examples` (each example must be valid input for the schema), the `ToolParam` type of
//!   the official SDKs.

use serde_json::{Map, Value, json};
use toolgate_core::ToolSpec;

use crate::ExportNote;
use crate::context::{ANTHROPIC, ANTHROPIC_STRICT, Cx};
use crate::error::ExportError;
use crate::schema::{
    child, constraint_only, describe, drop_dialect, index, is_object_schema, resolve,
    root_object_rule, show, type_names,
};

/// Keywords Anthropic rejects at the top level of `input_schema`.
const ROOT_FORBIDDEN: &[&str] = &["anyOf", "oneOf", "allOf"];

/// String formats strict tool use accepts.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords strict tool use lacks whose removal would hand the model a different contract.
const STRICT_FAIL: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "$dynamicRef",
    "$recursiveRef",
];

/// Value limits strict tool use does not take; dropping them only widens what the model may send,
/// and toolgate's own validation still enforces them on every call.
const STRICT_RELAXED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

const JSON_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// Strict tools Anthropic takes in one request.
pub(crate) const MAX_STRICT_TOOLS: usize = 20;
/// Optional parameters strict tool use allows across the strict tools of one request.
pub(crate) const MAX_OPTIONAL: usize = 24;
/// Parameters with union types (`anyOf` or a type list) strict tool use allows per request.
pub(crate) const MAX_UNIONS: usize = 16;

/// Notes on the limits strict tool use sets per request (strict tools, optional properties and
/// union-typed properties, summed over the strict tools of the document), each on the first tool
/// that goes past one.
pub(crate) fn request_notes(tools: &[Value]) -> Vec<ExportNote> {
    let mut notes = Vec::new();
    let (mut strict, mut optional, mut unions) = (0, 0, 0);
    let mut reported = [false; 3];
    for tool in tools.iter().filter(|t| t["strict"] == true) {
        strict += 1;
        let (o, u) = complexity(&tool["input_schema"]);
        optional += o;
        unions += u;
        let totals = [
            (strict, MAX_STRICT_TOOLS, "strict tools"),
            (optional, MAX_OPTIONAL, "optional properties"),
            (
                unions,
                MAX_UNIONS,
                "properties with union types (anyOf or a type list)",
            ),
        ];
        for (i, (total, max, what)) in totals.into_iter().enumerate() {
            if total > max && !reported[i] {
                reported[i] = true;
                notes.push(ExportNote {
                    tool: tool["name"].as_str().unwrap_or_default().to_owned(),
                    path: "strict".into(),
                    message: format!(
                        "With this tool the strict tools have {total} {what} together, and Anthropic takes at most {max} in one request: send fewer strict tools at a time, or export some without --strict"
                    ),
                });
            }
        }
    }
    notes
}

/// Optional and union-typed properties in a converted schema (each definition counted once).
fn complexity(schema: &Value) -> (usize, usize) {
    let Value::Object(m) = schema else {
        return (0, 0);
    };
    let (mut optional, mut unions) = (0, 0);
    let mut add = |(o, u): (usize, usize)| {
        optional += o;
        unions += u;
    };
    if let Some(Value::Object(props)) = m.get("properties") {
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (name, property) in props {
            let own = (
                usize::from(!required.contains(&name.as_str())),
                usize::from(
                    property
                        .as_object()
                        .is_some_and(|p| p.contains_key("anyOf") || type_names(p).len() > 1),
                ),
            );
            add(own);
            add(complexity(property));
        }
    }
    if let Some(items) = m.get("items") {
        add(complexity(items));
    }
    for key in ["anyOf", "allOf"] {
        if let Some(Value::Array(branches)) = m.get(key) {
            branches.iter().for_each(|b| add(complexity(b)));
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = m.get(key) {
            defs.values().for_each(|d| add(complexity(d)));
        }
    }
    (optional, unions)
}

pub(crate) fn export_tool(
    spec: &ToolSpec,
    strict: bool,
) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let target = if strict { ANTHROPIC_STRICT } else { ANTHROPIC };
    let mut cx = Cx::new(spec.name().as_str(), target);
    let mut root = match spec.input_schema() {
        Value::Object(m) if is_object_schema(m) => m.clone(),
        _ => {
            return Err(cx.unsupported(
                "input_schema",
                "type",
                "is not an object schema, and input_schema must be one".into(),
            ));
        }
    };
    root_object_rule(&mut root, "input_schema", ROOT_FORBIDDEN, &mut cx)?;
    let examples = input_examples(spec, &mut root, &mut cx);
    let input_schema = if strict {
        drop_dialect(&mut root, "input_schema", &mut cx);
        let root = Value::Object(root);
        let mut s = Strict {
            root: &root,
            cx,
            inlining: Vec::new(),
            optional: 0,
            unions: 0,
        };
        let converted = s.node(&root, "input_schema", true)?;
        s.limits()?;
        cx = s.cx;
        converted
    } else {
        Value::Object(root)
    };
    let mut tool = Map::with_capacity(5);
    tool.insert("name".into(), json!(spec.name().as_str()));
    tool.insert("description".into(), json!(spec.description()));
    tool.insert("input_schema".into(), input_schema);
    if strict {
        tool.insert("strict".into(), Value::Bool(true));
    }
    if !examples.is_empty() {
        tool.insert("input_examples".into(), Value::Array(examples));
    }
    Ok((Value::Object(tool), cx.notes))
}

/// The `examples` of the input schema's top level (JSON Schema's own place for example
/// instances), moved out of the schema; each one the tool's schema rejects is left out with a
/// note, because the API refuses examples that do not match.
fn input_examples(spec: &ToolSpec, root: &mut Map<String, Value>, cx: &mut Cx) -> Vec<Value> {
    let Some(value) = root.shift_remove("examples") else {
        return Vec::new();
    };
    let path = "input_schema.examples";
    let Value::Array(values) = value else {
        cx.note(
            path,
            "Removed `examples`: it is not a list of example arguments",
        );
        return Vec::new();
    };
    let mut kept = Vec::with_capacity(values.len());
    for (i, example) in values.into_iter().enumerate() {
        if example.is_object() && spec.accepts_input(&example) {
            kept.push(example);
        } else {
            cx.note(
                &index(path, i),
                "Left out of `input_examples`: the tool's input schema rejects this example; fix or remove it in the definition",
            );
        }
    }
    if !kept.is_empty() {
        cx.note(
            path,
            format!(
                "Moved {} example{} to `input_examples`",
                kept.len(),
                if kept.len() == 1 { "" } else { "s" }
            ),
        );
    }
    kept
}

struct Strict<'a> {
    /// The whole schema, for resolving `$ref`s.
    root: &'a Value,
    cx: Cx,
    /// References being inlined or checked, innermost last (to stop on recursion).
    inlining: Vec<String>,
    /// Optional properties seen.
    optional: usize,
    /// Properties whose schema is a union (`anyOf` or a type list).
    unions: usize,
}

impl Strict<'_> {
    fn limits(&self) -> Result<(), ExportError> {
        if self.optional > MAX_OPTIONAL {
            return Err(self.cx.too_large(
                "optional properties",
                self.optional,
                "strict tool use allows (across the strict tools of a request)",
                MAX_OPTIONAL,
            ));
        }
        if self.unions > MAX_UNIONS {
            return Err(self.cx.too_large(
                "properties with union types (anyOf or a type list)",
                self.unions,
                "strict tool use allows (across the strict tools of a request)",
                MAX_UNIONS,
            ));
        }
        Ok(())
    }

    fn node(&mut self, schema: &Value, path: &str, is_root: bool) -> Result<Value, ExportError> {
        let m = match schema {
            Value::Object(m) => m,
            Value::Bool(b) => {
                return Err(self.cx.unsupported(
                    path,
                    "type",
                    format!(
                        "is the boolean schema `{b}` (it accepts {}), which strict tool use cannot express; give it a type",
                        if *b { "anything" } else { "nothing" }
                    ),
                ));
            }
            other => {
                return Err(self.cx.unsupported(
                    path,
                    "type",
                    format!("is {} rather than a schema object", show(other)),
                ));
            }
        };
        if let Some(reference) = m.get("$ref") {
            return self.reference(m, reference, path, is_root);
        }

        let mut out = Map::with_capacity(m.len() + 2);
        let mut hints = Vec::new();
        for (key, value) in m {
            let at = child(path, key);
            match key.as_str() {
                "type" => {
                    let valid = match value {
                        Value::String(t) => JSON_TYPES.contains(&t.as_str()),
                        Value::Array(ts) => ts
                            .iter()
                            .all(|t| t.as_str().is_some_and(|t| JSON_TYPES.contains(&t))),
                        _ => false,
                    };
                    if !valid {
                        return Err(self.cx.uses(
                            path,
                            "type",
                            format!("is {}, not a JSON Schema type name", show(value)),
                        ));
                    }
                    out.insert(key.clone(), value.clone());
                }
                "description" | "title" => {
                    out.insert(key.clone(), value.clone());
                }
                "enum" | "const" => {
                    let values: Vec<&Value> = match value {
                        Value::Array(vs) if key == "enum" => vs.iter().collect(),
                        v => vec![v],
                    };
                    if values.iter().any(|v| v.is_array() || v.is_object()) {
                        return Err(self.cx.uses(
                            path,
                            key,
                            "has arrays or objects among its values, and strict tool use takes only strings, numbers, booleans and null there",
                        ));
                    }
                    out.insert(key.clone(), value.clone());
                }
                "format" => {
                    if value.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        self.cx.note(
                            &at,
                            format!(
                                "Removed `format: {}`: strict tool use supports only {}; toolgate still checks the format when the tool is called",
                                show(value),
                                STRICT_FORMATS.join(", ")
                            ),
                        );
                    }
                }
                "minItems" => {
                    if matches!(value.as_u64(), Some(0 | 1)) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        self.cx.note(
                            &at,
                            "Removed `minItems` (strict tool use takes only 0 or 1); toolgate still enforces it when the tool is called",
                        );
                    }
                }
                // Rebuilt below for object schemas.
                "properties" | "required" | "additionalProperties" => {}
                "items" => {
                    if value.is_array() {
                        return Err(self.cx.uses(
                            path,
                            "items",
                            "is a list of schemas (a tuple), which strict tool use does not support",
                        ));
                    }
                    let items = self.node(value, &at, false)?;
                    out.insert(key.clone(), items);
                }
                "anyOf" | "oneOf" => {
                    if let Some(branches) = self.alternatives(m, key, value, path)? {
                        out.insert("anyOf".into(), Value::Array(branches));
                    }
                }
                "allOf" => {
                    let Value::Array(branches) = value else {
                        return Err(self.cx.uses(path, key, "is not a list of schemas"));
                    };
                    let mut converted = Vec::with_capacity(branches.len());
                    for (i, branch) in branches.iter().enumerate() {
                        let p = index(&at, i);
                        if branch.get("$ref").is_some() {
                            return Err(self.cx.uses(
                                &p,
                                "$ref",
                                "is inside `allOf`, which strict tool use does not support; inline the referenced schema",
                            ));
                        }
                        converted.push(self.node(branch, &p, false)?);
                    }
                    out.insert(key.clone(), Value::Array(converted));
                }
                "$defs" | "definitions" => {
                    let Value::Object(defs) = value else {
                        return Err(self.cx.uses(path, key, "is not an object of schemas"));
                    };
                    let mut converted = Map::with_capacity(defs.len());
                    for (name, def) in defs {
                        let p = child(&at, name);
                        let reference = format!("#/{key}/{name}");
                        self.inlining.push(reference);
                        let def = self.node(def, &p, false);
                        self.inlining.pop();
                        converted.insert(name.clone(), def?);
                    }
                    out.insert(key.clone(), Value::Object(converted));
                }
                "default" => {
                    hints.push(format!("Default: {}.", show(value)));
                    self.cx.note(
                        &at,
                        "Removed `default` (not part of strict tool use's schema subset) and mentioned it in the description; toolgate applies the default when the argument is absent",
                    );
                }
                k if STRICT_FAIL.contains(&k) => {
                    return Err(self.cx.uses(path, k, "strict tool use does not support"));
                }
                k if STRICT_RELAXED.contains(&k) => {
                    self.cx.note(
                        &at,
                        format!(
                            "Removed `{k}` (strict tool use does not support it); toolgate still enforces it when the tool is called"
                        ),
                    );
                }
                k => {
                    self.cx.note(
                        &at,
                        format!("Removed `{k}`: it is not part of strict tool use's schema subset"),
                    );
                }
            }
        }

        if is_object_schema(m) {
            self.object(m, path, is_root, &mut out)?;
        } else {
            for key in ["properties", "required", "additionalProperties"] {
                if m.contains_key(key) {
                    self.cx.note(
                        &child(path, key),
                        format!(
                            "Removed `{key}`: it has no effect on a schema that is not an object"
                        ),
                    );
                }
            }
        }
        if !["type", "anyOf", "allOf", "enum", "const"]
            .iter()
            .any(|k| out.contains_key(*k))
        {
            return Err(self.cx.unsupported(
                path,
                "type",
                "has no `type`, so it accepts any JSON value, which strict tool use cannot express; give it a type".into(),
            ));
        }
        for hint in hints {
            describe(&mut out, &hint);
        }
        Ok(Value::Object(out))
    }

    /// `anyOf` as is, `oneOf` as `anyOf` (with a note); `None` when the branches only constrain
    /// property combinations and were dropped.
    fn alternatives(
        &mut self,
        m: &Map<String, Value>,
        key: &str,
        value: &Value,
        path: &str,
    ) -> Result<Option<Vec<Value>>, ExportError> {
        let at = child(path, key);
        let Value::Array(branches) = value else {
            return Err(self.cx.uses(path, key, "is not a list of schemas"));
        };
        if key == "oneOf" && m.contains_key("anyOf") {
            return Err(self.cx.uses(
                path,
                "oneOf",
                "is combined with `anyOf` in the same schema, and strict tool use has only `anyOf`",
            ));
        }
        if branches.iter().all(constraint_only) {
            self.cx.note(
                &at,
                format!(
                    "Removed `{key}`: its branches only require combinations of properties, which strict tool use cannot express; toolgate still enforces it when the tool is called"
                ),
            );
            return Ok(None);
        }
        if key == "oneOf" {
            self.cx.note(
                &at,
                "Exported `oneOf` as `anyOf` (strict tool use has no oneOf); toolgate still checks that exactly one alternative matches",
            );
        }
        let mut converted = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            converted.push(self.node(branch, &index(&at, i), false)?);
        }
        Ok(Some(converted))
    }

    /// Strict tool use wants every object closed; optional properties stay optional.
    fn object(
        &mut self,
        m: &Map<String, Value>,
        path: &str,
        is_root: bool,
        out: &mut Map<String, Value>,
    ) -> Result<(), ExportError> {
        let empty = Map::new();
        let properties = match m.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(self
                    .cx
                    .uses(path, "properties", "is not an object of schemas"));
            }
        };
        let declared: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let additional = m.get("additionalProperties");
        let closed = additional == Some(&Value::Bool(false));
        if properties.is_empty() && !closed {
            if is_root {
                self.cx.note(
                    path,
                    "The schema declares no properties; exported as a tool that takes no arguments",
                );
            } else {
                return Err(self.cx.unsupported(
                    path,
                    "additionalProperties",
                    "is an object without declared properties (free-form), which strict tool use cannot express because every object must set `additionalProperties: false`; declare its properties".into(),
                ));
            }
        } else if additional.is_some() && !closed {
            self.cx.note(
                &child(path, "additionalProperties"),
                "Set to false (strict tool use requires it): the model can send only the declared properties",
            );
        }

        let props_path = child(path, "properties");
        let mut converted = Map::with_capacity(properties.len());
        for (name, schema) in properties {
            let property = self.node(schema, &child(&props_path, name), false)?;
            if !declared.contains(&name.as_str()) {
                self.optional += 1;
            }
            if property
                .as_object()
                .is_some_and(|p| p.contains_key("anyOf") || type_names(p).len() > 1)
            {
                self.unions += 1;
            }
            converted.insert(name.clone(), property);
        }
        let mut required = Vec::with_capacity(declared.len());
        for name in declared {
            if converted.contains_key(name) {
                required.push(json!(name));
            } else {
                self.cx.note(
                    &child(path, "required"),
                    format!("Dropped {name:?} from `required`: it is not a declared property, and strict tool use allows only declared ones"),
                );
            }
        }

        if !out.contains_key("type") {
            out.insert("type".into(), json!("object"));
        }
        out.insert("properties".into(), Value::Object(converted));
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }

    /// A `$ref` alone stays a reference once its target is known not to lead back to it; a
    /// `$ref` with sibling keywords is inlined.
    fn reference(
        &mut self,
        m: &Map<String, Value>,
        reference: &Value,
        path: &str,
        is_root: bool,
    ) -> Result<Value, ExportError> {
        let Some(r) = reference.as_str() else {
            return Err(self.cx.uses(path, "$ref", "is not a string"));
        };
        let target = resolve(self.root, r).ok_or_else(|| self.cx.unresolved(path, r))?;
        if self.inlining.iter().any(|x| x == r) {
            return Err(self.cx.recursive(path, r));
        }
        if m.len() == 1 {
            // Walk the target only to find recursion and what strict tool use cannot express;
            // its converted form is written once, under `$defs`.
            let notes = self.cx.notes.len();
            let (optional, unions) = (self.optional, self.unions);
            self.inlining.push(r.to_owned());
            let checked = self.node(target, path, false);
            self.inlining.pop();
            self.cx.notes.truncate(notes);
            (self.optional, self.unions) = (optional, unions);
            checked?;
            return Ok(json!({ "$ref": r }));
        }
        let mut merged = match target {
            Value::Object(t) => t.clone(),
            Value::Bool(true) => Map::new(),
            _ => {
                return Err(self.cx.uses(
                    path,
                    "$ref",
                    format!("points to {r}, which is not a schema object"),
                ));
            }
        };
        for (k, v) in m.iter().filter(|(k, _)| k.as_str() != "$ref") {
            merged.insert(k.clone(), v.clone());
        }
        self.cx.note(
            &child(path, "$ref"),
            format!("Inlined {r} here, with the keywords next to the reference"),
        );
        self.inlining.push(r.to_owned());
        let out = self.node(&Value::Object(merged), path, is_root);
        self.inlining.pop();
        out
    }
}

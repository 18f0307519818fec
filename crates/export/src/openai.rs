//! OpenAI function tools for Chat Completions and Responses, plain or rewritten to the
//! Structured Outputs strict subset ("Supported schemas" in OpenAI's Structured Outputs guide).
//!
//! Rules followed (OpenAI API reference and Structured Outputs guide,
//! <https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>, and the API's own
//! error "schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the
//! top level"):
//! - `parameters` is an object schema without `anyOf`/`oneOf`/`allOf`/`enum`/`not` at its top;
//!   `strict` is always written, because the Responses API defaults it to true.
//! - Strict: every object has `additionalProperties: false` and lists every property in
//!   `required`; optional properties accept `null` instead; the root is never `anyOf`; `$ref`
//!   stands alone (`$defs` and recursion are supported); `default`, unsupported formats and the
//!   value limits the subset lacks are dropped with a note; composition and conditional keywords
//!   it lacks are errors; at most 5000 properties, 10 levels of object nesting, 1000 enum values
//!   and 120,000 characters of names and enum/const values.

use serde_json::{Map, Value, json};
use toolgate_core::ToolSpec;

use crate::context::{Cx, OPENAI, OPENAI_STRICT};
use crate::error::ExportError;
use crate::schema::{
    child, constraint_only, describe, drop_dialect, index, is_object_schema, literal_types,
    resolve, root_object_rule, show, type_names,
};
use crate::{ExportFormat, ExportNote};

/// Keywords OpenAI rejects at the top level of `parameters`, strict or not.
const ROOT_FORBIDDEN: &[&str] = &["anyOf", "oneOf", "allOf", "enum", "not"];

/// String formats strict mode accepts.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords strict mode rejects that change which documents are valid in ways the subset cannot
/// approximate: exporting without them would hand the model a different contract.
const STRICT_FAIL: &[&str] = &[
    "allOf",
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

/// Value limits strict mode does not take; dropping them only widens what the model may send,
/// and toolgate's own validation still enforces them on every call.
const STRICT_RELAXED: &[&str] = &[
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

const JSON_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

// Strict-mode limits, from "Objects have limitations on nesting depth and size" in
// <https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>: "A schema may
// have up to 5000 object properties total, with up to 10 levels of nesting"; "In a schema, total
// string length of all property names, definition names, enum values, and const values cannot
// exceed 120,000 characters"; "A schema may have up to 1000 enum values across all enum
// properties"; "For a single enum property with string values, the total string length of all
// enum values cannot exceed 15,000 characters when there are more than 250 enum values".
const MAX_PROPERTIES: usize = 5000;
const MAX_OBJECT_DEPTH: usize = 10;
const MAX_ENUM_VALUES: usize = 1000;
const MAX_SCHEMA_CHARS: usize = 120_000;
const LARGE_ENUM: usize = 250;
const MAX_LARGE_ENUM_CHARS: usize = 15_000;

/// Longest function name: the API reference's `function.name`, "Must be a-z, A-Z, 0-9, or
/// contain underscores and dashes, with a maximum length of 64"
/// (<https://platform.openai.com/docs/api-reference/chat/create#chat-create-tools>).
const MAX_NAME_LEN: usize = 64;

/// Checks a function name against `^[a-zA-Z0-9_-]{1,64}$`. toolgate's own tool names are
/// narrower (snake_case, at most 64 characters), so this only guards against that rule changing.
fn check_name(name: &str, cx: &Cx) -> Result<(), ExportError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        return Ok(());
    }
    Err(cx.unsupported(
        "name",
        "name",
        format!(
            "is {name:?}, and OpenAI function names must be 1 to {MAX_NAME_LEN} letters, digits, underscores or dashes; rename the tool"
        ),
    ))
}

/// One tool in the Chat Completions or Responses shape.
pub(crate) fn export_tool(
    spec: &ToolSpec,
    format: ExportFormat,
    strict: bool,
) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let name = spec.name().as_str();
    check_name(
        name,
        &Cx::new(name, if strict { OPENAI_STRICT } else { OPENAI }),
    )?;
    let (parameters, notes) = if strict {
        strict_parameters(spec)?
    } else {
        plain_parameters(spec)?
    };
    let description = spec.description();
    let tool = match format {
        ExportFormat::OpenAiResponses => json!({
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": strict,
        }),
        _ => json!({
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": parameters,
                "strict": strict,
            },
        }),
    };
    Ok((tool, notes))
}

fn root_map(spec: &ToolSpec, cx: &Cx) -> Result<Map<String, Value>, ExportError> {
    match spec.input_schema() {
        Value::Object(m) if is_object_schema(m) => Ok(m.clone()),
        _ => Err(cx.unsupported(
            "parameters",
            "type",
            "is not an object schema, and function parameters must be one".into(),
        )),
    }
}

/// The input schema as written, minus `$schema` and the top-level keywords OpenAI rejects.
fn plain_parameters(spec: &ToolSpec) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let mut cx = Cx::new(spec.name().as_str(), OPENAI);
    let mut root = root_map(spec, &cx)?;
    drop_dialect(&mut root, "parameters", &mut cx);
    root_object_rule(&mut root, "parameters", ROOT_FORBIDDEN, &mut cx)?;
    Ok((Value::Object(root), cx.notes))
}

/// The input schema rewritten to the strict subset.
fn strict_parameters(spec: &ToolSpec) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let mut cx = Cx::new(spec.name().as_str(), OPENAI_STRICT);
    let mut root = root_map(spec, &cx)?;
    drop_dialect(&mut root, "parameters", &mut cx);
    root_object_rule(&mut root, "parameters", ROOT_FORBIDDEN, &mut cx)?;
    let root = Value::Object(root);
    let mut strict = Strict {
        root: &root,
        cx,
        inlining: Vec::new(),
    };
    let parameters = strict.node(&root, "parameters", true)?;
    let mut stats = Stats::default();
    measure(&parameters, 0, &mut stats, &strict.cx)?;
    stats.check(&strict.cx)?;
    Ok((parameters, strict.cx.notes))
}

struct Strict<'a> {
    /// The whole schema, for resolving `$ref`s.
    root: &'a Value,
    cx: Cx,
    /// References being inlined, innermost last (to stop on recursion).
    inlining: Vec<String>,
}

impl Strict<'_> {
    fn node(&mut self, schema: &Value, path: &str, is_root: bool) -> Result<Value, ExportError> {
        let m = match schema {
            Value::Object(m) => m,
            Value::Bool(b) => {
                return Err(self.cx.unsupported(
                    path,
                    "type",
                    format!(
                        "is the boolean schema `{b}` (it accepts {}), which strict mode cannot express; give it a type",
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

        let mut out = Map::with_capacity(m.len() + 3);
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
                "description" | "title" | "enum" | "const" | "pattern" | "multipleOf"
                | "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "minItems"
                | "maxItems" => {
                    out.insert(key.clone(), value.clone());
                }
                "format" => {
                    if value.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        self.cx.note(
                            &at,
                            format!(
                                "Removed `format: {}`: strict mode supports only {}; toolgate still checks the format when the tool is called",
                                show(value),
                                STRICT_FORMATS.join(", ")
                            ),
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
                            "is a list of schemas (a tuple), which strict mode does not support",
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
                "$defs" | "definitions" => {
                    let Value::Object(defs) = value else {
                        return Err(self.cx.uses(path, key, "is not an object of schemas"));
                    };
                    let mut converted = Map::with_capacity(defs.len());
                    for (name, def) in defs {
                        converted.insert(name.clone(), self.node(def, &child(&at, name), false)?);
                    }
                    out.insert(key.clone(), Value::Object(converted));
                }
                "default" => {
                    hints.push(format!("Default: {}.", show(value)));
                    self.cx.note(
                        &at,
                        "Removed `default` (strict mode does not allow it) and mentioned it in the description; toolgate applies the default when the argument is absent or null",
                    );
                }
                k if STRICT_FAIL.contains(&k) => {
                    return Err(self.cx.uses(path, k, "strict mode does not support"));
                }
                k if STRICT_RELAXED.contains(&k) => {
                    self.cx.note(
                        &at,
                        format!(
                            "Removed `{k}` (strict mode does not support it); toolgate still enforces it when the tool is called"
                        ),
                    );
                }
                k => {
                    self.cx.note(
                        &at,
                        format!("Removed `{k}`: it is not part of strict mode's schema subset"),
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
        if type_names(&out).contains(&"array") && !out.contains_key("items") {
            return Err(self.cx.unsupported(
                path,
                "items",
                "is an array without `items`, which strict mode cannot express; give the item schema".into(),
            ));
        }
        if !out.contains_key("type")
            && !out.contains_key("anyOf")
            && let Some(types) = literal_types(&out)
        {
            let mut typed = Map::with_capacity(out.len() + 1);
            let ty = match types.as_slice() {
                [one] => json!(one),
                many => json!(many),
            };
            typed.insert("type".into(), ty);
            typed.extend(out);
            out = typed;
        }
        if !["type", "anyOf", "enum", "const"]
            .iter()
            .any(|k| out.contains_key(*k))
        {
            return Err(self.cx.unsupported(
                path,
                "type",
                "has no `type`, so it accepts any JSON value, which strict mode cannot express; give it a type".into(),
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
                "is combined with `anyOf` in the same schema, and strict mode has only `anyOf`",
            ));
        }
        if branches.iter().all(constraint_only) {
            self.cx.note(
                &at,
                format!(
                    "Removed `{key}`: its branches only require combinations of properties, which strict mode cannot express; toolgate still enforces it when the tool is called"
                ),
            );
            return Ok(None);
        }
        if key == "oneOf" {
            self.cx.note(
                &at,
                "Exported `oneOf` as `anyOf` (strict mode has no oneOf); toolgate still checks that exactly one alternative matches",
            );
        }
        let mut converted = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            converted.push(self.node(branch, &index(&at, i), false)?);
        }
        Ok(Some(converted))
    }

    /// Strict mode wants every object closed and every property required; optional properties
    /// become nullable instead.
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
                    "is an object without declared properties (free-form), which strict mode cannot express because every property must be listed; declare its properties".into(),
                ));
            }
        } else if additional.is_some() && !closed {
            self.cx.note(
                &child(path, "additionalProperties"),
                "Set to false (strict mode requires it): the model can send only the declared properties",
            );
        }

        let props_path = child(path, "properties");
        let mut converted = Map::with_capacity(properties.len());
        let mut optional = Vec::new();
        for (name, schema) in properties {
            let mut property = self.node(schema, &child(&props_path, name), false)?;
            if !declared.contains(&name.as_str()) {
                property = make_nullable(property);
                optional.push(name.as_str());
            }
            converted.insert(name.clone(), property);
        }
        for name in declared.iter().filter(|n| !properties.contains_key(**n)) {
            self.cx.note(
                &child(path, "required"),
                format!("Dropped {name:?} from `required`: it is not a declared property, so no argument can satisfy it in strict mode"),
            );
        }
        if !optional.is_empty() {
            self.cx.note(
                &child(path, "required"),
                format!(
                    "Listed optional {} {} as required and nullable (strict mode requires every property); the model sends null for \"not given\", which toolgate treats as absent when the call arrives",
                    if optional.len() == 1 { "property" } else { "properties" },
                    optional.join(", ")
                ),
            );
        }

        if !out.contains_key("type") {
            out.insert("type".into(), json!("object"));
        }
        let names: Vec<Value> = converted.keys().map(|k| Value::String(k.clone())).collect();
        out.insert("properties".into(), Value::Object(converted));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }

    /// A `$ref` alone stays a reference (strict mode supports `$defs` and recursion); a `$ref`
    /// with sibling keywords is inlined, because strict mode wants `$ref` alone.
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
        if m.len() == 1 {
            return Ok(json!({ "$ref": r }));
        }
        if self.inlining.iter().any(|x| x == r) {
            return Err(self.cx.recursive(path, r));
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
            format!("Inlined {r} here: strict mode does not allow keywords next to `$ref`"),
        );
        self.inlining.push(r.to_owned());
        let out = self.node(&Value::Object(merged), path, is_root);
        self.inlining.pop();
        out
    }
}

/// Whether a (converted) schema already admits `null`.
fn accepts_null(m: &Map<String, Value>) -> bool {
    type_names(m).contains(&"null")
        || m.get("const") == Some(&Value::Null)
        || m.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.contains(&Value::Null))
        || m.get("anyOf").and_then(Value::as_array).is_some_and(|bs| {
            bs.iter()
                .any(|b| b.as_object().is_some_and(|b| type_names(b) == ["null"]))
        })
}

/// Makes a converted schema also accept `null`: `type: [t, "null"]` for plain scalars, an extra
/// `{"type": "null"}` alternative for everything else.
fn make_nullable(schema: Value) -> Value {
    let Value::Object(mut m) = schema else {
        return schema;
    };
    if accepts_null(&m) {
        return Value::Object(m);
    }
    let types: Vec<String> = type_names(&m).into_iter().map(str::to_owned).collect();
    let refers = m.contains_key("$ref") || m.contains_key("enum") || m.contains_key("const");
    let scalar = !types.is_empty() && types.iter().all(|t| t != "object" && t != "array");
    if scalar && !refers {
        let mut list: Vec<Value> = types.into_iter().map(Value::String).collect();
        list.push(json!("null"));
        m.insert("type".into(), Value::Array(list));
        return Value::Object(m);
    }
    if types.is_empty()
        && !refers
        && let Some(Value::Array(branches)) = m.get_mut("anyOf")
    {
        branches.push(json!({ "type": "null" }));
        return Value::Object(m);
    }
    let mut outer = Map::with_capacity(3);
    for key in ["title", "description"] {
        if let Some(v) = m.shift_remove(key) {
            outer.insert(key.into(), v);
        }
    }
    outer.insert(
        "anyOf".into(),
        json!([Value::Object(m), { "type": "null" }]),
    );
    Value::Object(outer)
}

#[derive(Default)]
struct Stats {
    properties: usize,
    depth: usize,
    enum_values: usize,
    chars: usize,
}

impl Stats {
    fn check(&self, cx: &Cx) -> Result<(), ExportError> {
        let limits = [
            (
                "object properties in total",
                self.properties,
                MAX_PROPERTIES,
            ),
            ("levels of object nesting", self.depth, MAX_OBJECT_DEPTH),
            ("enum values in total", self.enum_values, MAX_ENUM_VALUES),
            (
                "characters in property names, definition names, enum and const values",
                self.chars,
                MAX_SCHEMA_CHARS,
            ),
        ];
        for (what, actual, max) in limits {
            if actual > max {
                return Err(cx.too_large(what, actual, "strict mode allows", max));
            }
        }
        Ok(())
    }
}

fn string_chars(value: &Value) -> usize {
    value.as_str().map_or(0, |s| s.chars().count())
}

/// Counts what strict mode limits; `depth` is the number of object schemas enclosing `schema`.
fn measure(schema: &Value, depth: usize, stats: &mut Stats, cx: &Cx) -> Result<(), ExportError> {
    let Value::Object(m) = schema else {
        return Ok(());
    };
    let depth = if is_object_schema(m) {
        depth + 1
    } else {
        depth
    };
    stats.depth = stats.depth.max(depth);
    if let Some(Value::Object(props)) = m.get("properties") {
        stats.properties += props.len();
        for (name, sub) in props {
            stats.chars += name.chars().count();
            measure(sub, depth, stats, cx)?;
        }
    }
    if let Some(items) = m.get("items") {
        measure(items, depth, stats, cx)?;
    }
    if let Some(Value::Array(branches)) = m.get("anyOf") {
        for branch in branches {
            measure(branch, depth, stats, cx)?;
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = m.get(key) {
            for (name, def) in defs {
                stats.chars += name.chars().count();
                measure(def, 0, stats, cx)?;
            }
        }
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        stats.enum_values += values.len();
        let chars: usize = values.iter().map(string_chars).sum();
        stats.chars += chars;
        if values.len() > LARGE_ENUM && chars > MAX_LARGE_ENUM_CHARS {
            return Err(cx.too_large(
                "characters in one enum of more than 250 values",
                chars,
                "strict mode allows",
                MAX_LARGE_ENUM_CHARS,
            ));
        }
    }
    if let Some(value) = m.get("const") {
        stats.chars += string_chars(value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_follow_the_documented_pattern() {
        let cx = Cx::new("t", OPENAI);
        for ok in ["get_weather", "A-b_9", &"x".repeat(64)] {
            assert!(check_name(ok, &cx).is_ok(), "{ok}");
        }
        for bad in ["", "has space", "dotted.name", "ünï", &"x".repeat(65)] {
            let err = check_name(bad, &cx).unwrap_err().to_string();
            assert!(
                err.contains("1 to 64 letters, digits, underscores or dashes"),
                "{bad}: {err}"
            );
        }
    }
}

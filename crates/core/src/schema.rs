//! Compiling typed parameters into one draft 2020-12 object schema, and applying defaults.

use serde_json::{Map, Value, json};

use crate::definition::{Parameter, ToolDefinition};

/// The input schema of a definition: its raw `input_schema`, or its parameters compiled to
/// `{type: object, properties, required, additionalProperties: false}`.
pub fn input_schema(def: &ToolDefinition) -> Value {
    if let Some(raw) = &def.input_schema {
        return raw.clone();
    }
    compile_parameters(&def.parameters, &def.required)
}

/// Compiles typed parameters (plus the definition's separate `required` list) into an object
/// schema.
pub fn compile_parameters(params: &[Parameter], extra_required: &[String]) -> Value {
    let mut properties = Map::with_capacity(params.len());
    let mut required = Vec::new();
    for p in params {
        properties.insert(p.name.clone(), parameter_schema(p));
        if p.required || extra_required.iter().any(|r| r == &p.name) {
            required.push(Value::String(p.name.clone()));
        }
    }
    let mut schema = Map::with_capacity(4);
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(schema)
}

/// The property schema of one parameter: its `schema` merged with `type`, `description`,
/// `enum` and `default`.
pub fn parameter_schema(p: &Parameter) -> Value {
    let mut out = match &p.schema {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    out.insert("type".into(), json!(p.param_type.as_str()));
    if !p.description.is_empty() {
        out.insert("description".into(), Value::String(p.description.clone()));
    }
    if let Some(values) = &p.enum_values {
        out.insert("enum".into(), Value::Array(values.clone()));
    }
    if let Some(default) = &p.default {
        out.insert("default".into(), default.clone());
    }
    Value::Object(out)
}

/// Fills in defaults for absent top-level properties, taken from `properties.*.default` of the
/// input schema. Arguments that are not an object are left alone (validation reports them).
pub fn apply_defaults(schema: &Value, args: &mut Value) {
    let (Some(props), Value::Object(obj)) =
        (schema.get("properties").and_then(Value::as_object), args)
    else {
        return;
    };
    for (name, prop) in props {
        if let Some(default) = prop.get("default")
            && !obj.contains_key(name)
        {
            obj.insert(name.clone(), default.clone());
        }
    }
}

/// How many `$ref`s to follow along one path before giving up (guards recursive schemas).
const MAX_REF_HOPS: usize = 32;

/// Removes `null` arguments that mean "not given": an object member whose value is `null`, that
/// its schema does not require, and whose own schema does not accept `null`. Nested objects and
/// arrays are walked along the schema (local `$ref`s followed). OpenAI strict mode makes every
/// property required and nullable, so models send `null` for what they leave out; after this,
/// such calls validate against the tool's own schema and get its defaults.
pub fn strip_optional_nulls(schema: &Value, args: &mut Value) {
    strip(schema, schema, args, 0);
}

fn strip(root: &Value, schema: &Value, value: &mut Value, hops: usize) {
    let Some((schema, hops)) = follow(root, schema, hops) else {
        return;
    };
    match value {
        Value::Object(members) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            members.retain(|name, member| {
                !(member.is_null()
                    && !required.contains(&name.as_str())
                    && properties
                        .get(name)
                        .is_some_and(|p| !accepts_null(root, p, hops)))
            });
            for (name, member) in members.iter_mut() {
                if let Some(p) = properties.get(name) {
                    strip(root, p, member, hops);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    strip(root, item_schema, item, hops);
                }
            }
        }
        _ => {}
    }
}

/// The schema object behind any chain of local `$ref`s, with the hops used so far.
fn follow<'a>(
    root: &'a Value,
    schema: &'a Value,
    mut hops: usize,
) -> Option<(&'a Map<String, Value>, usize)> {
    let mut current = schema.as_object()?;
    while let Some(reference) = current.get("$ref").and_then(Value::as_str) {
        if hops >= MAX_REF_HOPS {
            return None;
        }
        hops += 1;
        current = resolve_ref(root, reference)?.as_object()?;
    }
    Some((current, hops))
}

/// Whether a schema accepts `null` (conservatively: anything unclear counts as accepting it, so
/// the argument is kept and validation decides).
fn accepts_null(root: &Value, schema: &Value, hops: usize) -> bool {
    let Some((m, hops)) = follow(root, schema, hops) else {
        return true;
    };
    match m.get("type") {
        Some(Value::String(t)) => return t == "null",
        Some(Value::Array(ts)) => return ts.iter().any(|t| t == "null"),
        _ => {}
    }
    if let Some(values) = m.get("enum").and_then(Value::as_array) {
        return values.contains(&Value::Null);
    }
    if let Some(c) = m.get("const") {
        return c.is_null();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = m.get(key).and_then(Value::as_array) {
            return branches.iter().any(|b| accepts_null(root, b, hops));
        }
    }
    true
}

/// Resolves a local reference (`#`, `#/$defs/node`, percent-encoded or `~`-escaped pointers)
/// within `root`; `None` for remote or malformed references.
pub fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(root);
    }
    if !fragment.starts_with('/') {
        return None;
    }
    root.pointer(&percent_decode(fragment)?)
}

fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Names of top-level properties marked sensitive in a definition (typed parameters only, or
/// `"x-sensitive": true` / `"writeOnly": true` in a raw schema).
pub fn sensitive_properties(def: &ToolDefinition, schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = def
        .parameters
        .iter()
        .filter(|p| p.sensitive)
        .map(|p| p.name.clone())
        .collect();
    if def.input_schema.is_some()
        && let Some(props) = schema.get("properties").and_then(Value::as_object)
    {
        for (name, prop) in props {
            let marked = prop.get("x-sensitive") == Some(&Value::Bool(true))
                || prop.get("writeOnly") == Some(&Value::Bool(true));
            if marked {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Replaces the values of `sensitive` top-level properties with `"[REDACTED]"`.
pub fn redact(args: &Value, sensitive: &[String]) -> Value {
    match args {
        Value::Object(obj) if !sensitive.is_empty() => Value::Object(
            obj.iter()
                .map(|(k, v)| {
                    let v = if sensitive.iter().any(|s| s == k) {
                        json!("[REDACTED]")
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

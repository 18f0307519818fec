//! Undoing strict mode's optional-to-nullable rewrite on incoming arguments, so a call made by a
//! model that saw a strict export validates against the tool's own schema and gets its defaults.

use serde_json::{Map, Value};
use toolgate_core::ToolSpec;

use crate::schema::{resolve, type_names};

/// How many `$ref`s to follow along one path before giving up (guards recursive schemas).
const MAX_REF_HOPS: usize = 32;

/// Removes `null` arguments that strict mode made the model send for "not given": an object
/// member whose value is `null`, that the tool's schema does not require, and whose own schema
/// does not accept `null`. Nested objects and arrays are walked along the schema.
///
/// Call it before validation on arguments from a model that was given a strict export
/// ([`crate::ExportOptions::strict`]). It is safe on any arguments: it only removes `null`s the
/// tool's schema would reject, so the defaults of those arguments apply instead.
pub fn strip_strict_nulls(spec: &ToolSpec, args: &mut Value) {
    let root = spec.input_schema();
    strip(root, root, args, 0);
}

fn strip(root: &Value, schema: &Value, value: &mut Value, hops: usize) {
    let Some(schema) = follow(root, schema, hops) else {
        return;
    };
    let (schema, hops) = schema;
    match value {
        Value::Object(members) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let Some(properties) = properties else {
                return;
            };
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

/// The schema object behind any chain of `$ref`s, with the hops used so far.
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
        current = resolve(root, reference)?.as_object()?;
    }
    Some((current, hops))
}

/// Whether a schema accepts `null` (conservatively: anything unclear counts as accepting it, so
/// the argument is kept and validation decides).
fn accepts_null(root: &Value, schema: &Value, hops: usize) -> bool {
    let Some((m, hops)) = follow(root, schema, hops) else {
        return true;
    };
    let types = type_names(m);
    if !types.is_empty() {
        return types.contains(&"null");
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

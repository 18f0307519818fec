//! JSON Schema helpers shared by the exporters: paths, local `$ref` resolution, type lookups and
//! the root-object rule OpenAI and Anthropic enforce.

use serde_json::{Map, Value};

use crate::context::Cx;

/// `path.key`.
pub(crate) fn child(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// `path[i]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// Compact JSON text of a value, for messages and descriptions.
pub(crate) fn show(value: &Value) -> String {
    value.to_string()
}

/// Resolves a local `$ref` within `root` (shared with the pipeline's null handling).
pub(crate) fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    toolgate_core::schema::resolve_ref(root, reference)
}

/// The `type` keyword as a list of names (empty when absent or malformed).
pub(crate) fn type_names(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The JSON types the `enum` or `const` values of a schema have, when they have one type plus
/// perhaps `null` (integers count as numbers when mixed with them); `None` otherwise.
pub(crate) fn literal_types(schema: &Map<String, Value>) -> Option<Vec<&'static str>> {
    let values: Vec<&Value> = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(vs)), None) => vs.iter().collect(),
        (None, Some(c)) => vec![c],
        _ => return None,
    };
    let mut names: Vec<&'static str> = Vec::new();
    for value in values {
        let name = match value {
            Value::String(_) => "string",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Array(_) | Value::Object(_) => return None,
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.contains(&"integer") && names.contains(&"number") {
        names.retain(|n| *n != "integer");
    }
    let non_null = names.iter().filter(|n| **n != "null").count();
    (non_null == 1).then_some(names)
}

/// Whether a schema describes objects (by `type` or by declaring `properties`).
pub(crate) fn is_object_schema(schema: &Map<String, Value>) -> bool {
    type_names(schema).contains(&"object")
        || (schema.get("type").is_none() && schema.contains_key("properties"))
}

/// Appends a sentence to a schema's description (creating it when absent).
pub(crate) fn describe(schema: &mut Map<String, Value>, sentence: &str) {
    let text = match schema.get("description").and_then(Value::as_str) {
        Some(existing) if !existing.trim().is_empty() => {
            let trimmed = existing.trim_end();
            if trimmed.ends_with(['.', '!', '?']) {
                format!("{trimmed} {sentence}")
            } else {
                format!("{trimmed}. {sentence}")
            }
        }
        _ => sentence.to_owned(),
    };
    schema.insert("description".into(), Value::String(text));
}

/// Keywords a branch may hold and still only constrain which property combinations are allowed
/// (it declares no properties or types of its own).
const CONSTRAINT_KEYWORDS: &[&str] = &[
    "required",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "description",
    "title",
    "$comment",
];

/// Whether a composition branch only constrains property combinations, like
/// `{"required": ["a"]}` in an "at least one of" `anyOf`.
pub(crate) fn constraint_only(branch: &Value) -> bool {
    match branch {
        Value::Object(m) => m.iter().all(|(k, v)| {
            CONSTRAINT_KEYWORDS.contains(&k.as_str()) || (k == "not" && constraint_only(v))
        }),
        _ => false,
    }
}

/// Whether the `anyOf`/`oneOf` at `at` (`key`) is exported, as every export decides: not when
/// its `branches` only constrain property combinations, which `subject` cannot express (dropped
/// with a note; toolgate still enforces it); else yes, with a note when `oneOf` goes out as
/// `anyOf`, `why` saying why (like "Gemini has no oneOf").
pub(crate) fn keeps_alternatives(
    cx: &mut Cx,
    key: &str,
    branches: &[Value],
    at: &str,
    subject: &str,
    why: &str,
) -> bool {
    if branches.iter().all(constraint_only) {
        cx.note(
            at,
            format!(
                "Removed `{key}`: its branches only require combinations of properties, which {subject} cannot express; toolgate still enforces it when the tool is called"
            ),
        );
        return false;
    }
    if key == "oneOf" {
        cx.note(
            at,
            format!(
                "Exported `oneOf` as `anyOf` ({why}); toolgate still checks that exactly one alternative matches"
            ),
        );
    }
    true
}

/// The rule OpenAI and Anthropic apply to a function's parameters: an object schema with none of
/// `keywords` at the top level. Composition that only constrains property combinations is dropped
/// with a note (toolgate still enforces it on every call); anything else is an error.
pub(crate) fn root_object_rule(
    root: &mut Map<String, Value>,
    path: &str,
    keywords: &[&str],
    cx: &mut Cx,
) -> Result<(), crate::ExportError> {
    for &keyword in keywords {
        let Some(value) = root.get(keyword) else {
            continue;
        };
        let droppable = match keyword {
            "anyOf" | "oneOf" | "allOf" => value
                .as_array()
                .is_some_and(|branches| branches.iter().all(constraint_only)),
            "not" => constraint_only(value),
            // An enum of whole argument objects only narrows what validation accepts.
            _ => true,
        };
        if !droppable {
            return Err(cx.uses(
                path,
                keyword,
                format!(
                    "{} does not accept at the top level of a tool's parameters (declare the parameters as plain properties instead)",
                    cx.target.name
                ),
            ));
        }
        root.shift_remove(keyword);
        cx.note(
            &child(path, keyword),
            format!(
                "Removed top-level `{keyword}` ({} rejects it there); it only constrains which argument combinations are valid, and toolgate still enforces it when the tool is called",
                cx.target.name
            ),
        );
    }
    Ok(())
}

/// Removes the root `$schema` keyword, with a note.
pub(crate) fn drop_dialect(root: &mut Map<String, Value>, path: &str, cx: &mut Cx) {
    if root.shift_remove("$schema").is_some() {
        cx.note(
            &child(path, "$schema"),
            "Removed `$schema`: the provider assumes its own dialect",
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::context::GEMINI;

    #[test]
    fn alternatives_that_only_constrain_combinations_are_dropped_and_one_of_is_noted() {
        let mut cx = Cx::new("t", GEMINI);
        let only = [json!({"required": ["a"]}), json!({"required": ["b"]})];
        assert!(!keeps_alternatives(
            &mut cx, "anyOf", &only, "p.anyOf", "Gemini", "-"
        ));
        assert_eq!(
            cx.notes[0].message,
            "Removed `anyOf`: its branches only require combinations of properties, which Gemini cannot express; toolgate still enforces it when the tool is called"
        );
        let typed = [json!({"type": "string"}), json!({"type": "integer"})];
        assert!(keeps_alternatives(
            &mut cx,
            "oneOf",
            &typed,
            "p.oneOf",
            "Gemini",
            "Gemini has no oneOf"
        ));
        assert_eq!(
            cx.notes[1].message,
            "Exported `oneOf` as `anyOf` (Gemini has no oneOf); toolgate still checks that exactly one alternative matches"
        );
        assert!(keeps_alternatives(
            &mut cx, "anyOf", &typed, "p.anyOf", "Gemini", "-"
        ));
        assert_eq!(cx.notes.len(), 2);
    }
}

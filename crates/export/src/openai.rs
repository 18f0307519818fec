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
    child, drop_dialect, is_object_schema, literal_types, root_object_rule, type_names,
};
use crate::strict::{Dialect, Strict};
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
    let mut strict = Strict::new(&root, cx, OpenAiStrict);
    let parameters = strict.node(&root, "parameters", true)?;
    let mut stats = Stats::default();
    measure(&parameters, 0, &mut stats, &strict.cx)?;
    stats.check(&strict.cx)?;
    Ok((parameters, strict.cx.notes))
}

/// OpenAI strict mode: every property required (optional ones nullable), references may
/// recurse, an array needs `items`, and a schema of literals gets their type.
#[derive(Clone)]
struct OpenAiStrict;

impl Dialect for OpenAiStrict {
    const NAME: &'static str = "strict mode";
    const KEPT: &'static [&'static str] = &[
        "description",
        "title",
        "enum",
        "const",
        "pattern",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    ];
    const FORMATS: &'static [&'static str] = STRICT_FORMATS;
    const FAIL: &'static [&'static str] = STRICT_FAIL;
    const RELAXED: &'static [&'static str] = STRICT_RELAXED;
    const DEFAULT_NOTE: &'static str = "Removed `default` (strict mode does not allow it) and mentioned it in the description; toolgate applies the default when the argument is absent or null";
    const FREE_FORM: &'static str = "every property must be listed";
    const RECURSIVE_REFS: bool = true;

    fn keyword(
        _: &mut Strict<'_, Self>,
        _: &str,
        _: &Value,
        _: &str,
        _: &mut Map<String, Value>,
    ) -> Result<bool, ExportError> {
        Ok(false)
    }

    /// Strict mode wants every property required; optional properties become nullable instead.
    fn property(&mut self, property: Value, optional: bool) -> Value {
        if optional {
            make_nullable(property)
        } else {
            property
        }
    }

    fn required(
        cx: &mut Cx,
        path: &str,
        declared: &[&str],
        converted: &Map<String, Value>,
        optional: &[&str],
    ) -> Option<Value> {
        for name in declared.iter().filter(|n| !converted.contains_key(**n)) {
            cx.note(
                &child(path, "required"),
                format!("Dropped {name:?} from `required`: it is not a declared property, so no argument can satisfy it in strict mode"),
            );
        }
        if !optional.is_empty() {
            cx.note(
                &child(path, "required"),
                format!(
                    "Listed optional {} {} as required and nullable (strict mode requires every property); the model sends null for \"not given\", which toolgate treats as absent when the call arrives",
                    if optional.len() == 1 { "property" } else { "properties" },
                    optional.join(", ")
                ),
            );
        }
        let names: Vec<Value> = converted.keys().map(|k| Value::String(k.clone())).collect();
        Some(Value::Array(names))
    }

    fn finish(cx: &Cx, path: &str, out: &mut Map<String, Value>) -> Result<(), ExportError> {
        if type_names(out).contains(&"array") && !out.contains_key("items") {
            return Err(cx.unsupported(
                path,
                "items",
                "is an array without `items`, which strict mode cannot express; give the item schema".into(),
            ));
        }
        if !out.contains_key("type")
            && !out.contains_key("anyOf")
            && let Some(types) = literal_types(out)
        {
            let mut typed = Map::with_capacity(out.len() + 1);
            let ty = match types.as_slice() {
                [one] => json!(one),
                many => json!(many),
            };
            typed.insert("type".into(), ty);
            typed.extend(std::mem::take(out));
            *out = typed;
        }
        Ok(())
    }

    fn inlined_note(reference: &str) -> String {
        format!("Inlined {reference} here: strict mode does not allow keywords next to `$ref`")
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

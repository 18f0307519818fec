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
use crate::schema::{child, drop_dialect, index, is_object_schema, root_object_rule, type_names};
use crate::strict::{Dialect, Strict};

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
        let mut s = Strict::new(&root, cx, AnthropicStrict::default());
        let converted = s.node(&root, "input_schema", true)?;
        s.dialect.limits(&s.cx)?;
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

/// Anthropic strict tool use: optional properties stay optional (counted, with the properties
/// of union type, against the per-request limits), references may not recurse, `enum`/`const`
/// take primitives only, `minItems` only 0 or 1, and `allOf` is kept.
#[derive(Clone, Default)]
struct AnthropicStrict {
    /// Optional properties seen.
    optional: usize,
    /// Properties whose schema is a union (`anyOf` or a type list).
    unions: usize,
}

impl AnthropicStrict {
    fn limits(&self, cx: &Cx) -> Result<(), ExportError> {
        if self.optional > MAX_OPTIONAL {
            return Err(cx.too_large(
                "optional properties",
                self.optional,
                "strict tool use allows (across the strict tools of a request)",
                MAX_OPTIONAL,
            ));
        }
        if self.unions > MAX_UNIONS {
            return Err(cx.too_large(
                "properties with union types (anyOf or a type list)",
                self.unions,
                "strict tool use allows (across the strict tools of a request)",
                MAX_UNIONS,
            ));
        }
        Ok(())
    }
}

impl Dialect for AnthropicStrict {
    const NAME: &'static str = "strict tool use";
    const KEPT: &'static [&'static str] = &["description", "title"];
    const FORMATS: &'static [&'static str] = STRICT_FORMATS;
    const FAIL: &'static [&'static str] = STRICT_FAIL;
    const RELAXED: &'static [&'static str] = STRICT_RELAXED;
    const DEFAULT_NOTE: &'static str = "Removed `default` (not part of strict tool use's schema subset) and mentioned it in the description; toolgate applies the default when the argument is absent";
    const FREE_FORM: &'static str = "every object must set `additionalProperties: false`";
    const RECURSIVE_REFS: bool = false;

    fn keyword(
        s: &mut Strict<'_, Self>,
        key: &str,
        value: &Value,
        path: &str,
        out: &mut Map<String, Value>,
    ) -> Result<bool, ExportError> {
        let at = child(path, key);
        match key {
            "enum" | "const" => {
                let values: Vec<&Value> = match value {
                    Value::Array(vs) if key == "enum" => vs.iter().collect(),
                    v => vec![v],
                };
                if values.iter().any(|v| v.is_array() || v.is_object()) {
                    return Err(s.cx.uses(
                        path,
                        key,
                        "has arrays or objects among its values, and strict tool use takes only strings, numbers, booleans and null there",
                    ));
                }
                out.insert(key.to_owned(), value.clone());
            }
            "minItems" => {
                if matches!(value.as_u64(), Some(0 | 1)) {
                    out.insert(key.to_owned(), value.clone());
                } else {
                    s.cx.note(
                        &at,
                        "Removed `minItems` (strict tool use takes only 0 or 1); toolgate still enforces it when the tool is called",
                    );
                }
            }
            "allOf" => {
                let Value::Array(branches) = value else {
                    return Err(s.cx.uses(path, key, "is not a list of schemas"));
                };
                let mut converted = Vec::with_capacity(branches.len());
                for (i, branch) in branches.iter().enumerate() {
                    let p = index(&at, i);
                    if branch.get("$ref").is_some() {
                        return Err(s.cx.uses(
                            &p,
                            "$ref",
                            "is inside `allOf`, which strict tool use does not support; inline the referenced schema",
                        ));
                    }
                    converted.push(s.node(branch, &p, false)?);
                }
                out.insert(key.to_owned(), Value::Array(converted));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn property(&mut self, property: Value, optional: bool) -> Value {
        if optional {
            self.optional += 1;
        }
        if property
            .as_object()
            .is_some_and(|p| p.contains_key("anyOf") || type_names(p).len() > 1)
        {
            self.unions += 1;
        }
        property
    }

    /// Optional properties stay optional: `required` keeps the declared ones.
    fn required(
        cx: &mut Cx,
        path: &str,
        declared: &[&str],
        converted: &Map<String, Value>,
        _: &[&str],
    ) -> Option<Value> {
        let mut required = Vec::with_capacity(declared.len());
        for name in declared {
            if converted.contains_key(*name) {
                required.push(json!(name));
            } else {
                cx.note(
                    &child(path, "required"),
                    format!("Dropped {name:?} from `required`: it is not a declared property, and strict tool use allows only declared ones"),
                );
            }
        }
        (!required.is_empty()).then_some(Value::Array(required))
    }

    fn finish(_: &Cx, _: &str, _: &mut Map<String, Value>) -> Result<(), ExportError> {
        Ok(())
    }

    fn inlined_note(reference: &str) -> String {
        format!("Inlined {reference} here, with the keywords next to the reference")
    }
}

//! Gemini function declarations with JSON Schema: `parametersJsonSchema` for the arguments and,
//! when the tool declares an output schema, `responseJsonSchema` for its result. References and
//! type lists stay as written; keywords outside what Gemini documents are removed with a note.
//!
//! Sources: the `FunctionDeclaration` object of the Gemini API reference
//! (<https://ai.google.dev/api/caching#FunctionDeclaration>: `parametersJsonSchema` "must describe
//! an object where the properties are the parameters to the function", mutually exclusive with
//! `parameters`; `responseJsonSchema` describes the output, mutually exclusive with `response`;
//! a function without parameters leaves them unset; its example uses `propertyOrdering`), the
//! JSON Schema support of structured output
//! (<https://ai.google.dev/gemini-api/docs/structured-output>: `enum` of strings and numbers,
//! formats date-time, date and time), and the official Python SDK's `JSONSchema` type
//! (google-genai 3.3.0, `extra="forbid"`), which lists the keywords kept here: `type` (one or a
//! list), `format`, `title`, `description`, `items`, `minItems`, `maxItems`, `enum`,
//! `properties`, `required`, `minProperties`, `maxProperties`, `minimum`, `maximum`,
//! `minLength`, `maxLength`, `pattern`, `additionalProperties`, `anyOf`, `uniqueItems`, `$ref`,
//! `$defs` and `oneOf` (exported as `anyOf`). Other keywords are removed with a note (toolgate
//! enforces them on every call) rather than sent to a model that may refuse them.

use serde_json::{Map, Value, json};
use toolgate_core::ToolSpec;

use crate::ExportNote;
use crate::context::{Cx, GEMINI_JSON};
use crate::error::ExportError;
use crate::gemini::merge_all_of;
use crate::schema::{
    child, describe, drop_dialect, index, is_object_schema, keeps_alternatives, resolve,
    root_object_rule, show,
};

/// Keywords Gemini's JSON Schema support rejects at the top level of the parameters.
const ROOT_FORBIDDEN: &[&str] = &["anyOf", "oneOf", "allOf"];

/// String formats Gemini documents.
const FORMATS: &[&str] = &["date-time", "date", "time"];

/// Keywords kept as they are (their values are not schemas).
const KEPT: &[&str] = &[
    "type",
    "title",
    "description",
    "required",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "uniqueItems",
    "propertyOrdering",
];

pub(crate) fn export_tool(spec: &ToolSpec) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let mut cx = Cx::new(spec.name().as_str(), GEMINI_JSON);
    let mut root = match spec.input_schema() {
        Value::Object(m) if is_object_schema(m) => m.clone(),
        _ => {
            return Err(cx.unsupported(
                "parametersJsonSchema",
                "type",
                "is not an object schema, and Gemini needs an object whose properties are the parameters".into(),
            ));
        }
    };
    drop_dialect(&mut root, "parametersJsonSchema", &mut cx);
    root_object_rule(&mut root, "parametersJsonSchema", ROOT_FORBIDDEN, &mut cx)?;
    let root = Value::Object(root);
    let parameters = Walk {
        root: &root,
        cx: &mut cx,
    }
    .node(&root, "parametersJsonSchema")?;

    let mut declaration = Map::with_capacity(4);
    declaration.insert("name".into(), json!(spec.name().as_str()));
    declaration.insert("description".into(), json!(spec.description()));
    let has_properties = parameters
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if has_properties {
        declaration.insert("parametersJsonSchema".into(), parameters);
    }
    if let Some(output) = spec.output_schema() {
        match response(output, &mut cx) {
            Ok(schema) => {
                declaration.insert("responseJsonSchema".into(), schema);
            }
            Err(e) => cx.note(
                "responseJsonSchema",
                format!("Left out the output schema, because {e}; toolgate still checks results against it"),
            ),
        }
    }
    Ok((Value::Object(declaration), cx.notes))
}

/// The output schema, converted with notes of its own (kept only when it converts).
fn response(output: &Value, cx: &mut Cx) -> Result<Value, ExportError> {
    let mut scratch = Cx::new(&cx.tool, cx.target);
    let mut root = output.clone();
    if let Value::Object(m) = &mut root {
        drop_dialect(m, "responseJsonSchema", &mut scratch);
    }
    let converted = Walk {
        root: &root,
        cx: &mut scratch,
    }
    .node(&root, "responseJsonSchema")?;
    cx.notes.append(&mut scratch.notes);
    Ok(converted)
}

struct Walk<'a, 'c> {
    /// The whole schema, for resolving `$ref`s in `allOf`.
    root: &'a Value,
    cx: &'c mut Cx,
}

impl Walk<'_, '_> {
    fn node(&mut self, schema: &Value, path: &str) -> Result<Value, ExportError> {
        let m = match schema {
            Value::Object(m) => m.clone(),
            Value::Bool(_) => return Ok(schema.clone()),
            other => {
                return Err(self.cx.unsupported(
                    path,
                    "type",
                    format!("is {} rather than a schema object", show(other)),
                ));
            }
        };
        let m = match m.get("allOf").cloned() {
            Some(all_of) => self.all_of(m, all_of, path)?,
            None => m,
        };
        let mut out = Map::with_capacity(m.len());
        let mut hints = Vec::new();
        let is_integer = m.get("type").and_then(Value::as_str) == Some("integer");
        for (key, value) in &m {
            let at = child(path, key);
            match key.as_str() {
                k if KEPT.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                "$ref" => {
                    let reference = match value.as_str() {
                        Some(r) if r.starts_with('#') => r,
                        _ => return Err(self.cx.unresolved(path, &show(value))),
                    };
                    let reference = match reference.strip_prefix("#/definitions/") {
                        Some(rest) if self.renames_definitions() => format!("#/$defs/{rest}"),
                        _ => reference.to_owned(),
                    };
                    out.insert(key.clone(), json!(reference));
                }
                "$defs" | "definitions" => {
                    let Value::Object(defs) = value else {
                        return Err(self.cx.uses(path, key, "is not an object of schemas"));
                    };
                    let mut converted = Map::with_capacity(defs.len());
                    for (name, def) in defs {
                        converted.insert(name.clone(), self.node(def, &child(&at, name))?);
                    }
                    let name = if key == "definitions" && self.renames_definitions() {
                        self.cx.note(
                            &at,
                            "Renamed `definitions` to `$defs` (the keyword Gemini documents) and pointed the references at it",
                        );
                        "$defs".to_owned()
                    } else {
                        key.clone()
                    };
                    out.insert(name, Value::Object(converted));
                }
                "properties" => {
                    let Value::Object(props) = value else {
                        return Err(self.cx.uses(path, key, "is not an object of schemas"));
                    };
                    let mut converted = Map::with_capacity(props.len());
                    for (name, schema) in props {
                        converted.insert(name.clone(), self.node(schema, &child(&at, name))?);
                    }
                    out.insert(key.clone(), Value::Object(converted));
                }
                "additionalProperties" | "items" if !value.is_array() => {
                    out.insert(key.clone(), self.node(value, &at)?);
                }
                "items" | "prefixItems" => self.cx.note(
                    &at,
                    format!("Removed `{key}` given as a list of schemas (a tuple): Gemini has no tuples; toolgate still enforces it when the tool is called"),
                ),
                "anyOf" | "oneOf" => {
                    if key == "oneOf" && m.contains_key("anyOf") {
                        return Err(self.cx.uses(
                            path,
                            "oneOf",
                            "is combined with `anyOf` in the same schema, and Gemini has only anyOf",
                        ));
                    }
                    if let Some(branches) = value.as_array()
                        && !keeps_alternatives(
                            self.cx,
                            key,
                            branches,
                            &at,
                            "Gemini",
                            "Gemini documents only anyOf",
                        )
                    {
                        continue;
                    }
                    let converted = self.list(value, &at)?;
                    out.insert("anyOf".into(), Value::Array(converted));
                }
                "enum" => {
                    let Value::Array(values) = value else {
                        return Err(self.cx.uses(path, "enum", "is not a list"));
                    };
                    if values.iter().all(|v| v.is_string() || v.is_number() || v.is_null()) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        let listed: Vec<String> = values.iter().map(show).collect();
                        hints.push(format!("Allowed values: {}.", listed.join(", ")));
                        self.cx.note(
                            &at,
                            "Removed `enum`: Gemini takes enums of strings and numbers only; the allowed values are listed in the description and toolgate still enforces them",
                        );
                    }
                }
                "const" => match value {
                    Value::String(_) | Value::Number(_) | Value::Null => {
                        out.insert("enum".into(), json!([value]));
                        self.cx.note(
                            &at,
                            "Exported `const` as a one-value `enum` (Gemini does not document const)",
                        );
                    }
                    other => {
                        hints.push(format!("Must be {}.", show(other)));
                        self.cx.note(
                            &at,
                            "Removed `const` (Gemini does not document it, and takes enums of strings and numbers only); mentioned in the description, and toolgate still enforces it",
                        );
                    }
                },
                "format" => {
                    if value.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        self.cx.note(
                            &at,
                            format!(
                                "Removed `format: {}`: Gemini documents only {}; toolgate still checks the format when the tool is called",
                                show(value),
                                FORMATS.join(", ")
                            ),
                        );
                    }
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {
                    let lower = key == "exclusiveMinimum";
                    let inclusive = if lower { "minimum" } else { "maximum" };
                    if m.contains_key(inclusive) {
                        self.cx.note(
                            &at,
                            format!("Removed `{key}` (Gemini has no exclusive bounds; `{inclusive}` is already set); toolgate still enforces it"),
                        );
                        continue;
                    }
                    let bound = match value.as_i64() {
                        Some(n) if is_integer => {
                            let n = if lower {
                                n.saturating_add(1)
                            } else {
                                n.saturating_sub(1)
                            };
                            self.cx.note(
                                &at,
                                format!("Exported `{key}` as the equivalent `{inclusive}: {n}` (Gemini has no exclusive bounds)"),
                            );
                            json!(n)
                        }
                        _ => {
                            self.cx.note(
                                &at,
                                format!("Exported `{key}` as an inclusive `{inclusive}` (Gemini has no exclusive bounds); toolgate still enforces the exclusive bound"),
                            );
                            value.clone()
                        }
                    };
                    out.insert(inclusive.into(), bound);
                }
                "default" => {
                    hints.push(format!("Default: {}.", show(value)));
                    self.cx.note(
                        &at,
                        "Removed `default` (Gemini does not document it) and mentioned it in the description; toolgate applies the default when the argument is absent",
                    );
                }
                "allOf" => {}
                "examples" | "$comment" | "deprecated" | "readOnly" | "writeOnly" => self.cx.note(
                    &at,
                    format!("Removed `{key}`: an annotation Gemini's JSON Schema support does not list"),
                ),
                k => self.cx.note(
                    &at,
                    format!("Removed `{k}` (Gemini's JSON Schema support does not list it); toolgate still enforces it when the tool is called"),
                ),
            }
        }
        for hint in hints {
            describe(&mut out, &hint);
        }
        Ok(Value::Object(out))
    }

    fn list(&mut self, value: &Value, at: &str) -> Result<Vec<Value>, ExportError> {
        let Value::Array(schemas) = value else {
            return Err(self
                .cx
                .unsupported(at, "items", "is not a list of schemas".into()));
        };
        let mut converted = Vec::with_capacity(schemas.len());
        for (i, schema) in schemas.iter().enumerate() {
            converted.push(self.node(schema, &index(at, i))?);
        }
        Ok(converted)
    }

    /// Whether the root's `definitions` become `$defs` (when it has no `$defs` of its own).
    fn renames_definitions(&self) -> bool {
        self.root.get("definitions").is_some() && self.root.get("$defs").is_none()
    }

    /// Merges the `allOf` branches (a branch that is a reference counts as its target) into
    /// their parent, as the Gemini subset export does: Gemini does not document allOf.
    fn all_of(
        &mut self,
        mut m: Map<String, Value>,
        all_of: Value,
        path: &str,
    ) -> Result<Map<String, Value>, ExportError> {
        m.shift_remove("allOf");
        let root = self.root;
        merge_all_of(
            self.cx,
            m,
            all_of,
            path,
            "Merged the `allOf` branches into one schema (Gemini does not document allOf)",
            |cx, r, p| match resolve(root, r) {
                Some(Value::Object(t)) => Ok(t.clone()),
                _ => Err(cx.unresolved(p, r)),
            },
        )
    }
}

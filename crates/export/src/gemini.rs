//! Gemini function declarations: `parameters` in Gemini's OpenAPI 3.0 Schema subset (the
//! `Schema` object of the Gemini API reference): references inlined, one type per schema with
//! `nullable`, string-only enums, and every keyword outside the subset removed with a note.
//!
//! Sources: the `Schema` and `FunctionDeclaration` objects of the Gemini API reference
//! (<https://ai.google.dev/api/caching#Schema>: type, format, title, description, nullable, enum
//! "of Type.STRING with enum format", items, min/maxItems, properties, required,
//! min/maxProperties, min/maxLength, pattern, anyOf, propertyOrdering, minimum, maximum; formats
//! date-time, int32/int64, float/double) and the errors the API returns for schemas outside it
//! ("Unknown name \"additionalProperties\"", "enum: only allowed for STRING type", "properties:
//! should be non-empty for OBJECT type", "properties: only allowed for OBJECT type").

use serde_json::{Map, Value, json};
use toolgate_core::ToolSpec;

use crate::ExportNote;
use crate::context::{Cx, GEMINI};
use crate::error::ExportError;
use crate::schema::{
    child, describe, index, keeps_alternatives, literal_types, resolve, show, type_names,
};

/// Assertion keywords outside the subset: dropping them widens what the model may send, and
/// toolgate's own validation still enforces them on every call.
const RELAXED: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "uniqueItems",
    "multipleOf",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
];

/// Formats the Gemini API documents, per type.
fn formats_for(ty: Option<&str>) -> &'static [&'static str] {
    match ty {
        Some("string") => &["date-time"],
        Some("integer") => &["int32", "int64"],
        Some("number") => &["float", "double"],
        _ => &[],
    }
}

/// The types a keyword applies to (`None`: every type).
fn applies_to(keyword: &str) -> Option<&'static [&'static str]> {
    match keyword {
        "properties"
        | "required"
        | "minProperties"
        | "maxProperties"
        | "propertyOrdering"
        | "additionalProperties" => Some(&["object"]),
        "items" | "minItems" | "maxItems" => Some(&["array"]),
        "minLength" | "maxLength" | "pattern" => Some(&["string"]),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
            Some(&["integer", "number"])
        }
        _ => None,
    }
}

fn fits(keyword: &str, ty: Option<&str>) -> bool {
    match (applies_to(keyword), ty) {
        (Some(types), Some(t)) => types.contains(&t),
        _ => true,
    }
}

/// Parameter names Vertex AI documents for function declarations.
fn plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

pub(crate) fn export_tool(spec: &ToolSpec) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let root = spec.input_schema();
    let mut gemini = Gemini {
        root,
        cx: Cx::new(spec.name().as_str(), GEMINI),
        stack: vec!["#".to_owned()],
    };
    let parameters = gemini.node(root, "parameters")?;
    let mut declaration = Map::with_capacity(3);
    declaration.insert("name".into(), json!(spec.name().as_str()));
    declaration.insert("description".into(), json!(spec.description()));
    match parameters.get("properties") {
        Some(Value::Object(props)) if !props.is_empty() => {
            let names: Vec<String> = props.keys().filter(|n| !plain_name(n)).cloned().collect();
            for name in names {
                gemini.cx.note(
                    &child("parameters.properties", &name),
                    "Parameter names should start with a letter or underscore and use only letters, digits and underscores (Vertex AI rejects others); rename the parameter if Gemini refuses the declaration",
                );
            }
            declaration.insert("parameters".into(), Value::Object(parameters));
        }
        // Gemini rejects an object with empty properties; a tool without parameters leaves
        // `parameters` out.
        _ => {}
    }
    Ok((Value::Object(declaration), gemini.cx.notes))
}

struct Gemini<'a> {
    root: &'a Value,
    cx: Cx,
    /// References being inlined, outermost first (`#` is the root itself).
    stack: Vec<String>,
}

impl Gemini<'_> {
    fn node(&mut self, schema: &Value, path: &str) -> Result<Map<String, Value>, ExportError> {
        match schema {
            Value::Object(m) => self.map(m.clone(), path),
            Value::Bool(true) => Ok(Map::new()),
            Value::Bool(false) => Err(self.cx.unsupported(
                path,
                "false",
                "is the schema `false` (no value is valid), which Gemini cannot express".into(),
            )),
            other => Err(self.cx.unsupported(
                path,
                "type",
                format!("is {} rather than a schema object", show(other)),
            )),
        }
    }

    /// The target of a local reference, as a schema map.
    fn target(&self, reference: &str, path: &str) -> Result<Map<String, Value>, ExportError> {
        target(self.root, &self.stack, &self.cx, reference, path)
    }

    fn map(
        &mut self,
        mut m: Map<String, Value>,
        path: &str,
    ) -> Result<Map<String, Value>, ExportError> {
        if let Some(reference) = m.shift_remove("$ref") {
            let Some(r) = reference.as_str() else {
                return Err(self.cx.uses(path, "$ref", "is not a string"));
            };
            let mut merged = self.target(r, path)?;
            // Keywords next to `$ref` refine the target (draft 2020-12 applies both).
            merged.extend(m);
            self.cx.note(
                &child(path, "$ref"),
                format!("Inlined {r}: Gemini does not support `$ref`"),
            );
            self.stack.push(r.to_owned());
            let out = self.map(merged, path);
            self.stack.pop();
            return out;
        }

        if let Some(all_of) = m.shift_remove("allOf") {
            return self.all_of(m, all_of, path);
        }

        let mut nullable = matches!(m.shift_remove("nullable"), Some(Value::Bool(true)));
        let mut types: Vec<String> = match m.shift_remove("type") {
            None => Vec::new(),
            Some(Value::String(t)) => vec![t],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            Some(other) => {
                return Err(self.cx.uses(
                    path,
                    "type",
                    format!("is {}, not a JSON Schema type name", show(&other)),
                ));
            }
        };
        if types.iter().any(|t| t == "null") {
            types.retain(|t| t != "null");
            nullable = true;
            self.cx.note(
                &child(path, "type"),
                "Exported the `null` type as `nullable: true` (Gemini takes one type per schema)",
            );
        }

        let mut alternatives: Option<(&str, Vec<Value>)> = None;
        for key in ["anyOf", "oneOf"] {
            let Some(value) = m.shift_remove(key) else {
                continue;
            };
            let at = child(path, key);
            let Value::Array(branches) = value else {
                return Err(self.cx.uses(path, key, "is not a list of schemas"));
            };
            if alternatives.is_some() {
                return Err(self.cx.uses(
                    path,
                    "oneOf",
                    "is combined with `anyOf` in the same schema, and Gemini has only anyOf",
                ));
            }
            if !keeps_alternatives(
                &mut self.cx,
                key,
                &branches,
                &at,
                "Gemini",
                "Gemini has no oneOf",
            ) {
                continue;
            }
            alternatives = Some((key, branches));
        }

        if types.len() > 1 {
            if alternatives.is_some() {
                return Err(self.cx.uses(
                    path,
                    "type",
                    "lists several types next to `anyOf`/`oneOf`, which Gemini cannot combine",
                ));
            }
            self.cx.note(
                &child(path, "type"),
                format!(
                    "Exported the type list {} as `anyOf` with one type per alternative (Gemini takes one type per schema)",
                    types.join(", ")
                ),
            );
            let mut branches = Vec::with_capacity(types.len());
            for t in &types {
                let mut branch = Map::new();
                branch.insert("type".into(), json!(t));
                for (k, v) in &m {
                    if applies_to(k).is_some_and(|ts| ts.contains(&t.as_str())) {
                        branch.insert(k.clone(), v.clone());
                    }
                }
                branches.push(Value::Object(branch));
            }
            m.retain(|k, _| applies_to(k).is_none());
            alternatives = Some(("anyOf", branches));
            types.clear();
        }

        let mut any_of = None;
        if let Some((key, branches)) = alternatives {
            let at = child(path, key);
            let total = branches.len();
            let rest: Vec<(usize, Value)> = branches
                .into_iter()
                .enumerate()
                .filter(|(_, b)| !null_only(b))
                .collect();
            if rest.len() < total {
                nullable = true;
                self.cx
                    .note(&at, "Exported the `null` alternative as `nullable: true`");
            }
            if rest.len() == 1 && types.is_empty() {
                // One real alternative: it is the schema.
                let (_, branch) = rest.into_iter().next().unwrap_or((0, Value::Bool(true)));
                match branch {
                    Value::Object(b) => merge(&mut m, b).map_err(|k| {
                        self.cx.uses(path, key, format!("has an alternative that disagrees with its parent on `{k}`, which Gemini cannot keep apart"))
                    })?,
                    Value::Bool(true) => {}
                    _ => return Err(self.cx.uses(path, key, "has an alternative that is not a schema object")),
                }
                if nullable {
                    m.insert("nullable".into(), Value::Bool(true));
                }
                return self.map(m, path);
            }
            let mut converted = Vec::with_capacity(rest.len());
            for (i, branch) in rest {
                let mut c = self.node(&branch, &index(&at, i))?;
                if nullable {
                    c.insert("nullable".into(), Value::Bool(true));
                }
                converted.push(Value::Object(c));
            }
            if !converted.is_empty() {
                any_of = Some(converted);
            }
        }

        let ty = types.into_iter().next().or_else(|| infer_type(&m));
        let out = self.keywords(m, ty, path, any_of.is_none() && nullable)?;
        let mut out = out;
        if let Some(branches) = any_of {
            out.insert("anyOf".into(), Value::Array(branches));
        }
        Ok(out)
    }

    /// Converts the keywords of a schema with at most one type.
    fn keywords(
        &mut self,
        m: Map<String, Value>,
        ty: Option<String>,
        path: &str,
        nullable: bool,
    ) -> Result<Map<String, Value>, ExportError> {
        let ty_ref = ty.as_deref();
        let mut out = Map::with_capacity(m.len() + 2);
        if let Some(t) = &ty {
            out.insert("type".into(), json!(t));
        }
        let mut nullable = nullable;
        let mut hints = Vec::new();
        let mut required = None;
        let mut format = None;
        let mut enum_kept = false;
        let has_minimum = m.contains_key("minimum");
        let has_maximum = m.contains_key("maximum");
        let free_form = m
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);

        for (key, value) in m {
            let at = child(path, &key);
            if !fits(&key, ty_ref) {
                self.cx.note(
                    &at,
                    format!(
                        "Removed `{key}`: it does not apply to type {} and Gemini rejects it there",
                        ty_ref.unwrap_or("(none)")
                    ),
                );
                continue;
            }
            match key.as_str() {
                "description" | "title" => {
                    if value.is_string() {
                        out.insert(key, value);
                    } else {
                        self.cx.note(&at, format!("Removed `{key}`: it is not a string"));
                    }
                }
                "properties" => {
                    let Value::Object(props) = value else {
                        return Err(self.cx.uses(path, "properties", "is not an object of schemas"));
                    };
                    let mut converted = Map::with_capacity(props.len());
                    for (name, schema) in props {
                        let p = child(&at, &name);
                        if schema == Value::Bool(false) {
                            self.cx.note(&p, "Left out: the schema `false` forbids this property");
                            continue;
                        }
                        converted.insert(name, Value::Object(self.node(&schema, &p)?));
                    }
                    if converted.is_empty() {
                        if path != "parameters" {
                            self.cx.note(
                                &at,
                                "Removed the empty `properties` (Gemini rejects an object type with empty properties)",
                            );
                        }
                    } else {
                        out.insert(key, Value::Object(converted));
                    }
                }
                "required" => required = Some(value),
                "items" => match value {
                    Value::Array(_) => self.cx.note(
                        &at,
                        "Removed `items` given as a list (a tuple): Gemini has no tuples; toolgate still enforces it when the tool is called",
                    ),
                    schema => {
                        out.insert(key, Value::Object(self.node(&schema, &at)?));
                    }
                },
                "enum" => {
                    let Value::Array(values) = value else {
                        return Err(self.cx.uses(path, "enum", "is not a list"));
                    };
                    if values.contains(&Value::Null) {
                        nullable = true;
                    }
                    let rest: Vec<Value> = values.into_iter().filter(|v| !v.is_null()).collect();
                    if rest.iter().all(Value::is_string) && matches!(ty_ref, None | Some("string")) {
                        if ty.is_none() {
                            out.insert("type".into(), json!("string"));
                        }
                        out.insert(key, Value::Array(rest));
                        enum_kept = true;
                    } else {
                        let listed: Vec<String> = rest.iter().map(show).collect();
                        hints.push(format!("Allowed values: {}.", listed.join(", ")));
                        self.cx.note(
                            &at,
                            "Removed `enum`: Gemini accepts enums of strings only; the allowed values are listed in the description and toolgate still enforces them",
                        );
                    }
                }
                "const" => match value {
                    Value::String(s) if matches!(ty_ref, None | Some("string")) => {
                        if ty.is_none() {
                            out.insert("type".into(), json!("string"));
                        }
                        out.insert("enum".into(), json!([s]));
                        enum_kept = true;
                        self.cx.note(
                            &at,
                            "Exported `const` as a one-value string enum (Gemini has no const)",
                        );
                    }
                    Value::Null => {
                        nullable = true;
                        self.cx.note(&at, "Exported `const: null` as `nullable: true`");
                    }
                    other => {
                        hints.push(format!("Must be {}.", show(&other)));
                        self.cx.note(
                            &at,
                            "Removed `const` (Gemini has no const and enums of strings only); mentioned in the description, and toolgate still enforces it",
                        );
                    }
                },
                "format" => format = Some(value),
                "default" => {
                    hints.push(format!("Default: {}.", show(&value)));
                    self.cx.note(
                        &at,
                        "Removed `default` (not part of Gemini's schema subset) and mentioned it in the description; toolgate applies the default when the argument is absent",
                    );
                }
                "minimum" | "maximum" | "minItems" | "maxItems" | "minLength" | "maxLength"
                | "pattern" | "minProperties" | "maxProperties" => {
                    out.insert(key, value);
                }
                "propertyOrdering" => {
                    out.insert(key, value);
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {
                    let lower = key == "exclusiveMinimum";
                    let inclusive = if lower { "minimum" } else { "maximum" };
                    if (lower && has_minimum) || (!lower && has_maximum) {
                        self.cx.note(
                            &at,
                            format!("Removed `{key}` (Gemini has no exclusive bounds; `{inclusive}` is already set); toolgate still enforces it"),
                        );
                        continue;
                    }
                    let bound = match (ty_ref, value.as_i64()) {
                        (Some("integer"), Some(n)) => {
                            let n = if lower { n.saturating_add(1) } else { n.saturating_sub(1) };
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
                            value
                        }
                    };
                    out.insert(inclusive.into(), bound);
                }
                "additionalProperties" => {
                    let message = if value == Value::Bool(false) {
                        "Removed `additionalProperties: false` (Gemini does not support it); toolgate rejects undeclared properties when the tool is called"
                    } else if free_form {
                        "Removed `additionalProperties` (Gemini does not support it): Gemini sees a free-form object and cannot be told what its entries look like; toolgate still validates them when the tool is called"
                    } else {
                        "Removed `additionalProperties` (Gemini does not support it): the model is only told about the declared properties"
                    };
                    self.cx.note(&at, message);
                }
                "$defs" | "definitions" => self.cx.note(
                    &at,
                    format!("Removed `{key}`: Gemini has no definitions; the references to them were inlined"),
                ),
                k if RELAXED.contains(&k) => self.cx.note(
                    &at,
                    format!("Removed `{k}` (Gemini does not support it); toolgate still enforces it when the tool is called"),
                ),
                k => self.cx.note(
                    &at,
                    format!("Removed `{k}`: it is not part of Gemini's schema subset"),
                ),
            }
        }

        if let Some(value) = required {
            let declared = out.get("properties").and_then(Value::as_object);
            let names: Vec<&str> = value
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let (kept, dropped): (Vec<&str>, Vec<&str>) = names
                .into_iter()
                .partition(|n| declared.is_some_and(|d| d.contains_key(*n)));
            if !dropped.is_empty() {
                self.cx.note(
                    &child(path, "required"),
                    format!(
                        "Dropped {} from `required`: Gemini requires every required name to be a declared property",
                        dropped.join(", ")
                    ),
                );
            }
            if !kept.is_empty() {
                out.insert("required".into(), json!(kept));
            }
        }

        let at = child(path, "format");
        if enum_kept {
            if let Some(f) = format.filter(|f| f != "enum") {
                self.cx.note(
                    &at,
                    format!("Replaced `format: {}` with `format: \"enum\"`, which Gemini uses for string enums", show(&f)),
                );
            }
            out.insert("format".into(), json!("enum"));
        } else if let Some(f) = format {
            if f.as_str().is_some_and(|f| formats_for(ty_ref).contains(&f)) {
                out.insert("format".into(), f);
            } else {
                self.cx.note(
                    &at,
                    format!(
                        "Removed `format: {}`: Gemini documents only date-time for strings, int32/int64 for integers and float/double for numbers; toolgate still checks the format when the tool is called",
                        show(&f)
                    ),
                );
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        for hint in hints {
            describe(&mut out, &hint);
        }
        Ok(out)
    }

    /// Merges `allOf` branches (references resolved) into their parent, then converts it.
    fn all_of(
        &mut self,
        m: Map<String, Value>,
        all_of: Value,
        path: &str,
    ) -> Result<Map<String, Value>, ExportError> {
        // The references merged in stay on the stack while the merged schema converts.
        let mut pushed = 0;
        let (root, stack) = (self.root, &mut self.stack);
        let merged = merge_all_of(
            &mut self.cx,
            m,
            all_of,
            path,
            "Merged the `allOf` branches into one schema (Gemini does not support allOf)",
            |cx, r, p| {
                let target = target(root, stack, cx, r, p)?;
                stack.push(r.to_owned());
                pushed += 1;
                Ok(target)
            },
        );
        let out = merged.and_then(|m| self.map(m, path));
        for _ in 0..pushed {
            self.stack.pop();
        }
        out
    }
}

/// The target of a local reference, as a schema map; a reference already on `stack` (being
/// inlined) is recursion.
fn target(
    root: &Value,
    stack: &[String],
    cx: &Cx,
    reference: &str,
    path: &str,
) -> Result<Map<String, Value>, ExportError> {
    if stack.iter().any(|r| r == reference) {
        return Err(cx.recursive(path, reference));
    }
    match resolve(root, reference) {
        Some(Value::Object(t)) => Ok(t.clone()),
        Some(Value::Bool(true)) => Ok(Map::new()),
        Some(_) => Err(cx.uses(
            path,
            "$ref",
            format!("points to {reference}, which is not a schema object"),
        )),
        None => Err(cx.unresolved(path, reference)),
    }
}

/// Merges the `allOf` branches into `m`, their parent, as Gemini has no allOf (both Gemini
/// exports do): a branch that is a reference counts as its target (which `target` resolves or
/// refuses), refined by the keywords beside the reference. `note` records the merge.
pub(crate) fn merge_all_of(
    cx: &mut Cx,
    mut m: Map<String, Value>,
    all_of: Value,
    path: &str,
    note: &str,
    mut target: impl FnMut(&Cx, &str, &str) -> Result<Map<String, Value>, ExportError>,
) -> Result<Map<String, Value>, ExportError> {
    let at = child(path, "allOf");
    let Value::Array(branches) = all_of else {
        return Err(cx.uses(path, "allOf", "is not a list of schemas"));
    };
    for (i, branch) in branches.into_iter().enumerate() {
        let branch_path = index(&at, i);
        let mut branch = match branch {
            Value::Object(b) => b,
            Value::Bool(true) => continue,
            _ => {
                return Err(cx.unsupported(
                    &branch_path,
                    "allOf",
                    "is not a schema object, which Gemini cannot merge".into(),
                ));
            }
        };
        if let Some(Value::String(r)) = branch.shift_remove("$ref") {
            let mut resolved = target(cx, &r, &branch_path)?;
            resolved.extend(branch);
            branch = resolved;
        }
        merge(&mut m, branch).map_err(|k| {
            cx.uses(
                path,
                "allOf",
                format!("has branches that disagree on `{k}`, and Gemini has no allOf to keep them apart"),
            )
        })?;
    }
    cx.note(&at, note);
    Ok(m)
}

/// The type a schema without `type` evidently has.
fn infer_type(m: &Map<String, Value>) -> Option<String> {
    if m.contains_key("properties") {
        Some("object".into())
    } else if m.contains_key("items") {
        Some("array".into())
    } else {
        literal_types(m)?
            .into_iter()
            .find(|t| *t != "null")
            .map(str::to_owned)
    }
}

/// Whether an alternative only admits `null`.
fn null_only(branch: &Value) -> bool {
    let Value::Object(b) = branch else {
        return false;
    };
    type_names(b) == ["null"]
        || b.get("const") == Some(&Value::Null)
        || b.get("enum") == Some(&json!([null]))
}

/// Merges `branch` into `base` as `allOf` would combine them; on a conflict, the keyword.
pub(crate) fn merge(
    base: &mut Map<String, Value>,
    branch: Map<String, Value>,
) -> Result<(), String> {
    for (key, value) in branch {
        match key.as_str() {
            "properties" => {
                let (Some(Value::Object(into)), Value::Object(from)) =
                    (base.get_mut("properties"), &value)
                else {
                    if base.get("properties").is_some_and(|p| p != &value) {
                        return Err(key);
                    }
                    base.insert(key, value);
                    continue;
                };
                for (name, schema) in from {
                    match into.get(name) {
                        Some(existing) if existing != schema => {
                            return Err(format!("properties.{name}"));
                        }
                        Some(_) => {}
                        None => {
                            into.insert(name.clone(), schema.clone());
                        }
                    }
                }
            }
            "required" => {
                let mut names = base
                    .get("required")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for name in value.as_array().cloned().unwrap_or_default() {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                base.insert(key, Value::Array(names));
            }
            // Annotations: the parent's wording wins.
            "description" | "title" | "$comment" | "examples" => {
                base.entry(key).or_insert(value);
            }
            _ => match base.get(&key) {
                None => {
                    base.insert(key, value);
                }
                Some(existing) if existing == &value => {}
                Some(_) => return Err(key),
            },
        }
    }
    Ok(())
}

//! The strict-schema rewrite OpenAI strict mode and Anthropic strict tool use share: one walk
//! over the input schema that keeps what the provider's subset takes, drops what only widens the
//! contract (with a note), refuses what would change it, closes every object and handles `$ref`.
//! What differs between the two subsets is a [`Dialect`]: the keyword lists, the words of the
//! notes, how optional properties are written, whether references may recurse, and the checks
//! a converted schema gets at the end.

use serde_json::{Map, Value, json};

use crate::context::Cx;
use crate::error::ExportError;
use crate::schema::{child, describe, index, is_object_schema, keeps_alternatives, resolve, show};

const JSON_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// What one provider's strict subset takes, as the shared walk asks it. `Clone` so that a walk
/// made only to check a reference's target can put the dialect's counts back.
pub(crate) trait Dialect: Clone + Sized {
    /// The subset as the notes name it: "strict mode", "strict tool use".
    const NAME: &'static str;
    /// Keywords copied as they are.
    const KEPT: &'static [&'static str];
    /// String formats the subset accepts.
    const FORMATS: &'static [&'static str];
    /// Keywords whose removal would hand the model a different contract: errors.
    const FAIL: &'static [&'static str];
    /// Value limits the subset lacks, dropped with a note (toolgate still enforces them).
    const RELAXED: &'static [&'static str];
    /// The note on a dropped `default`.
    const DEFAULT_NOTE: &'static str;
    /// Why a free-form object (no declared properties) cannot be expressed.
    const FREE_FORM: &'static str;
    /// Whether `$ref`s may lead back to themselves (a lone `$ref` is then kept unchecked).
    const RECURSIVE_REFS: bool;

    /// Keywords this dialect handles itself (after [`Self::KEPT`]): `Ok(true)` when `key` was
    /// one of them.
    fn keyword(
        s: &mut Strict<'_, Self>,
        key: &str,
        value: &Value,
        path: &str,
        out: &mut Map<String, Value>,
    ) -> Result<bool, ExportError>;

    /// A converted property of an object, `optional` when the object does not require it.
    fn property(&mut self, property: Value, optional: bool) -> Value;

    /// The object's `required` list (`None` to leave it out), from the `declared` names, the
    /// `converted` properties and the `optional` ones; notes what it changes.
    fn required(
        cx: &mut Cx,
        path: &str,
        declared: &[&str],
        converted: &Map<String, Value>,
        optional: &[&str],
    ) -> Option<Value>;

    /// Last checks and changes to a converted schema, before its type is required.
    fn finish(cx: &Cx, path: &str, out: &mut Map<String, Value>) -> Result<(), ExportError>;

    /// The note on a `$ref` inlined because keywords stand next to it.
    fn inlined_note(reference: &str) -> String;
}

/// One strict rewrite in progress.
pub(crate) struct Strict<'a, D> {
    /// The whole schema, for resolving `$ref`s.
    root: &'a Value,
    pub(crate) cx: Cx,
    /// References being inlined or checked, innermost last (to stop on recursion).
    inlining: Vec<String>,
    /// The dialect and what it counts.
    pub(crate) dialect: D,
}

impl<'a, D: Dialect> Strict<'a, D> {
    pub(crate) fn new(root: &'a Value, cx: Cx, dialect: D) -> Self {
        Self {
            root,
            cx,
            inlining: Vec::new(),
            dialect,
        }
    }

    /// `schema` at `path` rewritten to the subset.
    pub(crate) fn node(
        &mut self,
        schema: &Value,
        path: &str,
        is_root: bool,
    ) -> Result<Value, ExportError> {
        let m = match schema {
            Value::Object(m) => m,
            Value::Bool(b) => {
                return Err(self.cx.unsupported(
                    path,
                    "type",
                    format!(
                        "is the boolean schema `{b}` (it accepts {}), which {} cannot express; give it a type",
                        if *b { "anything" } else { "nothing" },
                        D::NAME
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
                k if D::KEPT.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                k if D::keyword(self, k, value, path, &mut out)? => {}
                "format" => {
                    if value.as_str().is_some_and(|f| D::FORMATS.contains(&f)) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        self.cx.note(
                            &at,
                            format!(
                                "Removed `format: {}`: {} supports only {}; toolgate still checks the format when the tool is called",
                                show(value),
                                D::NAME,
                                D::FORMATS.join(", ")
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
                            format!(
                                "is a list of schemas (a tuple), which {} does not support",
                                D::NAME
                            ),
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
                        let p = child(&at, name);
                        let def = if D::RECURSIVE_REFS {
                            self.node(def, &p, false)
                        } else {
                            self.inlining.push(format!("#/{key}/{name}"));
                            let def = self.node(def, &p, false);
                            self.inlining.pop();
                            def
                        };
                        converted.insert(name.clone(), def?);
                    }
                    out.insert(key.clone(), Value::Object(converted));
                }
                "default" => {
                    hints.push(format!("Default: {}.", show(value)));
                    self.cx.note(&at, D::DEFAULT_NOTE);
                }
                k if D::FAIL.contains(&k) => {
                    return Err(self
                        .cx
                        .uses(path, k, format!("{} does not support", D::NAME)));
                }
                k if D::RELAXED.contains(&k) => {
                    self.cx.note(
                        &at,
                        format!(
                            "Removed `{k}` ({} does not support it); toolgate still enforces it when the tool is called",
                            D::NAME
                        ),
                    );
                }
                k => {
                    self.cx.note(
                        &at,
                        format!(
                            "Removed `{k}`: it is not part of {}'s schema subset",
                            D::NAME
                        ),
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
        D::finish(&self.cx, path, &mut out)?;
        if !["type", "anyOf", "allOf", "enum", "const"]
            .iter()
            .any(|k| out.contains_key(*k))
        {
            return Err(self.cx.unsupported(
                path,
                "type",
                format!(
                    "has no `type`, so it accepts any JSON value, which {} cannot express; give it a type",
                    D::NAME
                ),
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
                format!(
                    "is combined with `anyOf` in the same schema, and {} has only `anyOf`",
                    D::NAME
                ),
            ));
        }
        let why = format!("{} has no oneOf", D::NAME);
        if !keeps_alternatives(&mut self.cx, key, branches, &at, D::NAME, &why) {
            return Ok(None);
        }
        let mut converted = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            converted.push(self.node(branch, &index(&at, i), false)?);
        }
        Ok(Some(converted))
    }

    /// Every object closed (`additionalProperties: false`), its properties rewritten and its
    /// `required` list as the dialect writes it.
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
                    format!(
                        "is an object without declared properties (free-form), which {} cannot express because {}; declare its properties",
                        D::NAME,
                        D::FREE_FORM
                    ),
                ));
            }
        } else if additional.is_some() && !closed {
            self.cx.note(
                &child(path, "additionalProperties"),
                format!(
                    "Set to false ({} requires it): the model can send only the declared properties",
                    D::NAME
                ),
            );
        }

        let props_path = child(path, "properties");
        let mut converted = Map::with_capacity(properties.len());
        let mut optional = Vec::new();
        for (name, schema) in properties {
            let property = self.node(schema, &child(&props_path, name), false)?;
            let is_optional = !declared.contains(&name.as_str());
            if is_optional {
                optional.push(name.as_str());
            }
            converted.insert(name.clone(), self.dialect.property(property, is_optional));
        }
        let required = D::required(&mut self.cx, path, &declared, &converted, &optional);

        if !out.contains_key("type") {
            out.insert("type".into(), json!("object"));
        }
        out.insert("properties".into(), Value::Object(converted));
        if let Some(required) = required {
            out.insert("required".into(), required);
        }
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }

    /// A `$ref` alone stays a reference (where references may not recurse, once its target is
    /// known not to lead back to it); a `$ref` with sibling keywords is inlined.
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
        if D::RECURSIVE_REFS && m.len() == 1 {
            return Ok(json!({ "$ref": r }));
        }
        if self.inlining.iter().any(|x| x == r) {
            return Err(self.cx.recursive(path, r));
        }
        if m.len() == 1 {
            // Walk the target only to find recursion and what the subset cannot express; its
            // converted form is written once, under `$defs`.
            let notes = self.cx.notes.len();
            let counts = self.dialect.clone();
            self.inlining.push(r.to_owned());
            let checked = self.node(target, path, false);
            self.inlining.pop();
            self.cx.notes.truncate(notes);
            self.dialect = counts;
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
        self.cx.note(&child(path, "$ref"), D::inlined_note(r));
        self.inlining.push(r.to_owned());
        let out = self.node(&Value::Object(merged), path, is_root);
        self.inlining.pop();
        out
    }
}

//! The `validate_output` built-in (seed 002): checks an agent's output against a named output
//! type and returns `{valid, errors, warnings}`; warnings never make `valid` false.
//!
//! # Output types
//!
//! An output type is a JSON document (a file `NAME.json` for [`OutputTypes::load_dir`]):
//!
//! ```json
//! {
//!   "description": "What the output is (shown to models)",
//!   "schema":   { "JSON Schema (draft 2020-12)": "violations are errors" },
//!   "warnings": { "JSON Schema (draft 2020-12)": "violations are warnings" }
//! }
//! ```
//!
//! Only `schema` is required. Names are snake_case (`^[a-z][a-z0-9_]*$`, at most 64 characters).
//! [`OutputTypes::with_defaults`] holds `domain_map` (seed 002's example,
//! `crates/builtins/output_types/domain_map.json`); inserting a type of the same name replaces it.
//!
//! # Messages
//!
//! A violation reads `PATH: problem` (`/domains/0/name: value is not of type "string"`;
//! `(root)` for the whole value), unless the schema says otherwise with `errorMessage` (in the
//! style of ajv-errors), in the subschema that holds the failing keyword:
//!
//! - a string: used for any failing keyword of that subschema;
//! - an object keyed by keyword (`{"minItems": "…", "type": "…"}`), with `"_"` as a fallback;
//! - for a failed `required` of property `X`, `properties.X.errorMessage` (its string, or its
//!   `"required"` entry) comes first.
//!
//! A message may name parts of the data: `${0}` is the failing value, `${1}` its parent, and
//! `${0/name}` / `${1/name}` follow a JSON pointer inside them (strings are inserted without
//! quotes); `${path}` is the failing value's path. Equal messages are reported once.
//!
//! Governance: category `system`, effect `read`, no permission required (it reads nothing but
//! its arguments).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde::Serialize;
use serde_json::{Map, Value, json};
use toolgate_core::{
    BoxFuture, Category, Consequence, Effect, Tool, ToolBuilder, ToolContext, ToolDefinition,
    ToolError, ToolOutput,
};

/// The tool's name.
pub const VALIDATE_OUTPUT: &str = "validate_output";

/// The embedded `domain_map` output type (also at `crates/builtins/output_types/domain_map.json`).
pub const DOMAIN_MAP_DEFINITION: &str = include_str!("../output_types/domain_map.json");

/// Longest output type name.
pub const MAX_OUTPUT_TYPE_NAME: usize = 64;

/// Why an output type could not be added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputTypeError {
    /// The name is not snake_case or too long.
    #[error(
        "Invalid output type name {name:?}: use lower-case letters, digits and _, starting with a letter, at most 64 characters (the file name without .json)"
    )]
    BadName { name: String },
    /// The definition is not `{description?, schema, warnings?}` or a schema does not compile.
    #[error("Output type {name}: {message}")]
    BadDefinition { name: String, message: String },
    /// A file or directory could not be read or parsed.
    #[error("Cannot load output types from {path}: {message}")]
    Io { path: String, message: String },
}

/// What [`OutputType::check`] found: seed 002's `ValidationResult`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OutputReport {
    /// No errors (warnings do not count).
    pub valid: bool,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// One compiled output type.
pub struct OutputType {
    name: String,
    description: Option<String>,
    schema: Value,
    validator: Validator,
    warnings: Option<(Value, Validator)>,
}

impl fmt::Debug for OutputType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputType")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl OutputType {
    /// Compiles a definition `{description?, schema, warnings?}` named `name`.
    pub fn compile(name: &str, definition: Value) -> Result<Self, OutputTypeError> {
        check_name(name)?;
        let bad = |message: String| OutputTypeError::BadDefinition {
            name: name.to_owned(),
            message,
        };
        let Value::Object(mut fields) = definition else {
            return Err(bad(
                "the definition must be a JSON object {\"description\", \"schema\", \"warnings\"}"
                    .to_owned(),
            ));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "description" | "schema" | "warnings"))
        {
            return Err(bad(format!(
                "unknown field {unknown:?}; a definition has description, schema and warnings"
            )));
        }
        let description = match fields.remove("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(bad("description must be a string".to_owned())),
        };
        let schema = fields.remove("schema").ok_or_else(|| {
            bad("missing \"schema\" (the JSON Schema the output must match)".to_owned())
        })?;
        let validator = compile_schema(&schema).map_err(|e| bad(format!("schema: {e}")))?;
        let warnings = match fields.remove("warnings") {
            None | Some(Value::Null) => None,
            Some(w) => {
                let v = compile_schema(&w).map_err(|e| bad(format!("warnings: {e}")))?;
                Some((w, v))
            }
        };
        Ok(Self {
            name: name.to_owned(),
            description,
            schema,
            validator,
            warnings,
        })
    }

    /// The type's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the output is.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The schema whose violations are errors.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The schema whose violations are warnings, if any.
    pub fn warnings_schema(&self) -> Option<&Value> {
        self.warnings.as_ref().map(|(schema, _)| schema)
    }

    /// Checks `data`: errors from the schema, warnings from the warnings schema (always both).
    pub fn check(&self, data: &Value) -> OutputReport {
        let errors = messages(&self.schema, &self.validator, data);
        let warnings = match &self.warnings {
            Some((schema, validator)) => messages(schema, validator, data),
            None => Vec::new(),
        };
        OutputReport {
            valid: errors.is_empty(),
            errors,
            warnings,
        }
    }
}

/// Named output types. Build once, share behind an `Arc`.
#[derive(Debug, Default)]
pub struct OutputTypes {
    types: BTreeMap<String, Arc<OutputType>>,
}

impl OutputTypes {
    /// No output types.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in output types: `domain_map`.
    pub fn with_defaults() -> Self {
        let mut types = Self::new();
        // The embedded definition is checked by a test; a broken one would be left out
        // (and that test fails), never a panic.
        if let Ok(definition) = serde_json::from_str(DOMAIN_MAP_DEFINITION) {
            let _ = types.insert("domain_map", definition);
        }
        types
    }

    /// Adds (or replaces) the type `name`.
    pub fn insert(&mut self, name: &str, definition: Value) -> Result<(), OutputTypeError> {
        let compiled = OutputType::compile(name, definition)?;
        self.types.insert(name.to_owned(), Arc::new(compiled));
        Ok(())
    }

    /// Adds (or replaces) the type `name` from a JSON file.
    pub fn load_file(&mut self, name: &str, path: &Path) -> Result<(), OutputTypeError> {
        let io = |message: String| OutputTypeError::Io {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| io(e.to_string()))?;
        let definition: Value =
            serde_json::from_str(&text).map_err(|e| io(format!("not valid JSON: {e}")))?;
        self.insert(name, definition).map_err(|e| match e {
            OutputTypeError::BadDefinition { name, message } => OutputTypeError::BadDefinition {
                name,
                message: format!("{message} (in {})", path.display()),
            },
            other => other,
        })
    }

    /// Adds (or replaces) one type per `*.json` file directly in `dir`, named by the file stem,
    /// in name order; returns the names. The first bad file stops the load with its error.
    pub fn load_dir(&mut self, dir: &Path) -> Result<Vec<String>, OutputTypeError> {
        let entries = std::fs::read_dir(dir).map_err(|e| OutputTypeError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut names = Vec::with_capacity(files.len());
        for path in files {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            self.load_file(&name, &path)?;
            names.push(name);
        }
        Ok(names)
    }

    /// The type named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<OutputType>> {
        self.types.get(name)
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    /// How many types there are.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Checks `data` against the type `name`; `None` if there is no such type.
    pub fn check(&self, name: &str, data: &Value) -> Option<OutputReport> {
        self.get(name).map(|t| t.check(data))
    }

    fn known(&self) -> String {
        if self.types.is_empty() {
            "none are configured".to_owned()
        } else {
            format!(
                "known types: {}",
                self.names().collect::<Vec<_>>().join(", ")
            )
        }
    }
}

fn check_name(name: &str) -> Result<(), OutputTypeError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_OUTPUT_TYPE_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(OutputTypeError::BadName {
            name: name.to_owned(),
        })
    }
}

fn compile_schema(schema: &Value) -> Result<Validator, String> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err("must be a JSON Schema (an object)".to_owned());
    }
    jsonschema::draft202012::options()
        .build(schema)
        .map_err(|e| format!("not a valid JSON Schema (draft 2020-12): {e}"))
}

/// Every violation of `validator` by `data` as a message, duplicates removed, in order.
fn messages(schema: &Value, validator: &Validator, data: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for error in validator.iter_errors(data) {
        let message = match custom_message(schema, &error) {
            Some(template) => render(template, &error, data),
            None => generic(&error),
        };
        if !out.contains(&message) {
            out.push(message);
        }
    }
    out
}

fn generic(error: &ValidationError<'_>) -> String {
    let path = error.instance_path().as_str();
    let at = if path.is_empty() { "(root)" } else { path };
    format!("{at}: {}", error.masked())
}

/// The `errorMessage` that applies to `error`, if the schema has one.
fn custom_message<'s>(schema: &'s Value, error: &ValidationError<'_>) -> Option<&'s str> {
    let keyword_at = error.schema_path().as_str();
    let (parent, keyword) = keyword_at.rsplit_once('/')?;
    let keyword = unescape(keyword);
    let subschema = schema.pointer(parent)?;
    if let ValidationErrorKind::Required { property } = error.kind()
        && let Some(property) = property.as_str()
        && let Some(message) = subschema
            .get("properties")
            .and_then(|p| p.get(property))
            .and_then(|p| p.get("errorMessage"))
            .and_then(|m| pick(m, "required"))
    {
        return Some(message);
    }
    subschema
        .get("errorMessage")
        .and_then(|m| pick(m, &keyword))
}

fn pick<'s>(message: &'s Value, keyword: &str) -> Option<&'s str> {
    match message {
        Value::String(s) => Some(s),
        Value::Object(by_keyword) => by_keyword
            .get(keyword)
            .or_else(|| by_keyword.get("_"))
            .and_then(Value::as_str),
        _ => None,
    }
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// Fills in `${path}`, `${N}` and `${N/pointer}` (see the module documentation).
fn render(template: &str, error: &ValidationError<'_>, data: &Value) -> String {
    if !template.contains("${") {
        return template.to_owned();
    }
    let path = error.instance_path().as_str();
    let segments: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let expr = &after[..end];
        match placeholder(expr, path, &segments, data) {
            Some(text) => out.push_str(&text),
            None => {
                out.push_str("${");
                out.push_str(expr);
                out.push('}');
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn placeholder(expr: &str, path: &str, segments: &[String], data: &Value) -> Option<String> {
    if expr == "path" {
        return Some(if path.is_empty() {
            "(root)".to_owned()
        } else {
            path.to_owned()
        });
    }
    let (up, pointer) = match expr.split_once('/') {
        Some((n, p)) => (n, format!("/{p}")),
        None => (expr, String::new()),
    };
    let up: usize = up.parse().ok()?;
    let depth = segments.len().checked_sub(up)?;
    let mut value = data;
    for segment in &segments[..depth] {
        value = match value {
            Value::Object(m) => m.get(segment)?,
            Value::Array(a) => a.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    let target = value.pointer(&pointer);
    Some(match target {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        // Nothing there (a domain without a name): name the place instead.
        None => {
            let mut at = String::new();
            for s in &segments[..depth] {
                at.push('/');
                at.push_str(s);
            }
            if at.is_empty() {
                "(root)".to_owned()
            } else {
                at
            }
        }
    })
}

/// `validate_output`: `{outputType, data}` → `{valid, errors, warnings}`.
#[derive(Clone)]
pub struct ValidateOutput {
    types: Arc<OutputTypes>,
    definition: ToolDefinition,
}

impl fmt::Debug for ValidateOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidateOutput")
            .field("types", &self.types.names().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ValidateOutput {
    /// The tool over `types`.
    pub fn new(types: Arc<OutputTypes>) -> Self {
        let known: Vec<&str> = types.names().collect();
        let listed = if known.is_empty() {
            "No output types are configured yet.".to_owned()
        } else {
            let mut names = known.join(", ");
            if names.len() > 300 {
                names = format!("{} types; the outputType parameter lists them", known.len());
            }
            format!("Output types: {names}.")
        };
        let description = format!(
            "Checks a structured output you produced against a named output type before you hand \
it on, and returns {{valid, errors, warnings}}. Use it on every output that has a declared type, \
fix what errors says and check again until valid is true; warnings point at weak spots but never \
make the output invalid. errors and warnings are short messages, each naming the place in data \
(a JSON pointer like /domains/0/name) unless the type gives its own message. {listed} An unknown \
outputType fails with the list of known types."
        );
        let mut type_help = String::from("The output type to check against");
        for t in known.iter().filter_map(|n| types.get(n)) {
            type_help.push_str(&format!("; {}", t.name()));
            if let Some(d) = t.description() {
                type_help.push_str(&format!(": {}", first_sentence(d)));
            }
        }
        let definition = ToolBuilder::new(VALIDATE_OUTPUT, description)
            .title("Validate output")
            .category(Category::System)
            .effect(Effect::Read)
            .consequence(Consequence::Low)
            .requires_confirmation(false)
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "outputType": {"type": "string", "minLength": 1, "description": type_help},
                    "data": {"description": "The output to check, as JSON (usually an object)"}
                },
                "required": ["outputType", "data"],
                "additionalProperties": false
            }))
            .output_schema(json!({
                "type": "object",
                "properties": {
                    "valid": {"type": "boolean", "description": "true when there are no errors"},
                    "errors": {"type": "array", "items": {"type": "string"}, "description": "What must be fixed"},
                    "warnings": {"type": "array", "items": {"type": "string"}, "description": "What should be looked at; never blocks"}
                },
                "required": ["valid", "errors", "warnings"],
                "additionalProperties": false
            }))
            .tag("validation")
            .definition()
            .clone();
        Self { types, definition }
    }
}

fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(i) => &text[..=i],
        None => text,
    }
}

impl Tool for ValidateOutput {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            ctx.check_cancelled()?;
            let mut args = match args {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            let name = match args.get("outputType") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(ToolError::validation(format!(
                        "Missing outputType (a string); {}",
                        self.types.known()
                    )));
                }
            };
            let data = args.remove("data").ok_or_else(|| {
                ToolError::validation("Missing data: pass the output to check as data")
            })?;
            let Some(output_type) = self.types.get(&name) else {
                return Err(ToolError::validation(format!(
                    "Unknown output type {name:?}; {}",
                    self.types.known()
                )));
            };
            let report = output_type.check(&data);
            serde_json::to_value(report)
                .map_err(|e| ToolError::execution(format!("Could not write the report: {e}")))
        })
    }
}

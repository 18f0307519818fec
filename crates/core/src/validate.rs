//! Definition validation: every rule of `docs/tool-model.md#validation-codes`,
//! all problems reported at once as `{path, code, message}`, plus warnings that never block.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::definition::{Effect, Isolation, ParamType, Parameter, RUN_KINDS, ToolDefinition};
use crate::limits::*;
use crate::names::{
    MAX_NAME_LEN, NameProblem, Permission, RESERVED_NAMES, ToolName, check_snake_case,
};
use crate::schema;
use crate::schema_level::{SchemaLevel, TierCaps, beyond};
use crate::spec::ToolSpec;
use crate::telemetry;

/// One problem (or warning) in a definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// Where, like `parameters[1].default`; empty for the whole definition.
    pub path: String,
    /// Stable machine-readable code, like `parameter.required_default`.
    pub code: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} [{}]", self.message, self.code)
        } else {
            write!(f, "{}: {} [{}]", self.path, self.message, self.code)
        }
    }
}

/// Everything validation found: errors block, warnings do not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationReport {
    /// Problems that make the definition invalid.
    pub errors: Vec<Issue>,
    /// Advice that never blocks.
    pub warnings: Vec<Issue>,
}

impl ValidationReport {
    /// True when there are no errors.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    fn error(&mut self, path: impl Into<String>, code: &str, message: impl Into<String>) {
        self.errors.push(Issue {
            path: path.into(),
            code: code.to_owned(),
            message: message.into(),
        });
    }

    fn warn(&mut self, path: impl Into<String>, code: &str, message: impl Into<String>) {
        self.warnings.push(Issue {
            path: path.into(),
            code: code.to_owned(),
            message: message.into(),
        });
    }
}

impl fmt::Display for ValidationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for issue in &self.errors {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

/// What a name refers to in the registry a definition is validated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// No tool of that name.
    Absent,
    /// A custom (non-built-in) tool.
    Custom,
    /// A built-in tool.
    Builtin,
}

/// The surroundings a definition is validated in: the registry (for `depends_on` and built-in
/// names), the strongest isolation level and the JSON Schema level the plan in force allows.
#[derive(Clone, Copy)]
pub struct ValidationEnv<'a> {
    /// The strongest isolation level a definition may need.
    pub max_isolation: Isolation,
    /// How much of JSON Schema a custom definition's schemas may use (built-ins are exempt).
    pub schema_level: SchemaLevel,
    /// What a name refers to in the registry; `None` skips the checks that need the registry.
    pub lookup: Option<&'a (dyn Fn(&str) -> Lookup + Sync)>,
    /// Whether the definition is being validated as a built-in (may take a built-in name).
    pub builtin: bool,
}

impl Default for ValidationEnv<'_> {
    fn default() -> Self {
        Self {
            max_isolation: Isolation::Restricted,
            schema_level: SchemaLevel::Full,
            lookup: None,
            builtin: false,
        }
    }
}

impl fmt::Debug for ValidationEnv<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidationEnv")
            .field("max_isolation", &self.max_isolation)
            .field("schema_level", &self.schema_level)
            .field("builtin", &self.builtin)
            .finish_non_exhaustive()
    }
}

/// Validates a definition on its own (no registry, every isolation level allowed).
pub fn validate(def: &ToolDefinition) -> Result<ToolSpec, ValidationReport> {
    validate_in(def, &ValidationEnv::default())
}

/// Validates a definition in `env`, returning the resolved, compiled [`ToolSpec`] or every problem.
pub fn validate_in(
    def: &ToolDefinition,
    env: &ValidationEnv<'_>,
) -> Result<ToolSpec, ValidationReport> {
    let started = Instant::now();
    let mut r = ValidationReport::default();
    let name = check_name(def, env, &mut r);
    check_description(def, &mut r);
    check_parameters(def, &mut r);
    let input_schema = schema::input_schema(def);
    let input_validator = check_input_schema(def, &input_schema, &mut r);
    let output_validator = def
        .output_schema
        .as_ref()
        .and_then(|s| compile_schema(s, "output_schema", "output_schema.invalid", &mut r));
    check_schema_level(def, env, &mut r);
    check_constraints(def, &mut r);
    check_isolation(def, env, &mut r);
    let permissions = check_lists(def, env, &mut r);
    check_warnings(def, &mut r);

    let outcome = match (name, input_validator) {
        (Some(name), Some(input_validator)) if r.is_valid() => Ok(ToolSpec::new(
            def.clone(),
            name,
            input_schema,
            input_validator,
            output_validator,
            permissions,
            r.warnings,
        )),
        _ => Err(r),
    };
    telemetry::record_validation(def, started.elapsed(), outcome.is_ok());
    outcome
}

fn check_name(
    def: &ToolDefinition,
    env: &ValidationEnv<'_>,
    r: &mut ValidationReport,
) -> Option<ToolName> {
    let name = def.name.as_str();
    let problem = match check_snake_case(name) {
        Err(NameProblem::Empty) => Some((
            "name.empty",
            "Name is empty: give the tool a snake_case name like get_weather".to_owned(),
        )),
        Err(NameProblem::TooLong) => Some((
            "name.too_long",
            format!(
                "Name is {} characters long; use at most {MAX_NAME_LEN}",
                name.len()
            ),
        )),
        Err(_) => Some((
            "name.format",
            format!(
                "Name {name:?} is not snake_case: use lowercase letters, digits and underscores, starting with a letter (e.g. {:?})",
                suggest_snake(name)
            ),
        )),
        Ok(()) if RESERVED_NAMES.contains(&name) => Some((
            "name.reserved",
            format!(
                "Name {name:?} is reserved ({}); use a verb-noun name like run_tests",
                RESERVED_NAMES.join(", ")
            ),
        )),
        Ok(()) => None,
    };
    if let Some((code, message)) = problem {
        r.error("name", code, message);
        return None;
    }
    if !env.builtin
        && let Some(lookup) = env.lookup
        && lookup(name) == Lookup::Builtin
    {
        r.error(
            "name",
            "name.builtin",
            format!(
                "Name {name:?} belongs to a built-in tool and cannot be taken; choose another name"
            ),
        );
    }
    ToolName::parse(name).ok()
}

fn suggest_snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.trim().chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else if !out.ends_with('_') {
            out.push('_');
            prev_lower = false;
        }
    }
    let trimmed = out.trim_matches('_');
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) || trimmed.is_empty() {
        format!("tool_{trimmed}")
    } else {
        trimmed.to_owned()
    }
}

fn check_description(def: &ToolDefinition, r: &mut ValidationReport) {
    if let Some(title) = &def.title
        && (title.trim().is_empty() || title.chars().count() > 128)
    {
        r.error(
            "title",
            "title.length",
            "Title must be 1-128 characters (or leave it out)",
        );
    }
    let d = def.description.trim();
    if d.is_empty() {
        r.error("description", "description.empty", "Description is empty: say what the tool does and when to use it (it is how a model picks the tool)");
        return;
    }
    // The limit is on what is stored and sent; the short warning is on what a model reads.
    let stored = def.description.chars().count();
    if stored > MAX_DESCRIPTION_LEN {
        r.error(
            "description",
            "description.too_long",
            format!("Description is {stored} characters long; use at most {MAX_DESCRIPTION_LEN}"),
        );
    }
    let chars = d.chars().count();
    if chars < SHORT_DESCRIPTION_LEN {
        r.warn("description", "description.short", format!("Description is only {chars} characters; say what the tool returns and when to use it"));
    } else if d.split_whitespace().count() < 4 {
        r.warn("description", "description.vague", "Description has fewer than four words; models route better with a sentence that says when to use the tool");
    }
}

fn check_parameters(def: &ToolDefinition, r: &mut ValidationReport) {
    if def.input_schema.is_some() && !def.parameters.is_empty() {
        r.error(
            "input_schema",
            "input_schema.conflict",
            "Give either parameters or input_schema, not both",
        );
    }
    let mut seen = HashSet::with_capacity(def.parameters.len());
    for (i, p) in def.parameters.iter().enumerate() {
        let at = |field: &str| format!("parameters[{i}].{field}");
        if check_snake_case(&p.name).is_err() {
            r.error(at("name"), "parameter.name_format", format!("Parameter name {:?} is not snake_case (lowercase letters, digits, underscores; at most {MAX_NAME_LEN})", p.name));
        } else if !seen.insert(p.name.as_str()) {
            r.error(
                at("name"),
                "parameter.duplicate_name",
                format!("Parameter {:?} is declared more than once", p.name),
            );
        }
        if p.description.trim().is_empty() {
            r.warn(at("description"), "parameter.description_missing", format!("Parameter {:?} has no description; models fill parameters better when told what they mean", p.name));
        }
        check_parameter_values(p, &at, r);
    }
    for (i, name) in def.required.iter().enumerate() {
        if !def.parameters.iter().any(|p| &p.name == name) {
            r.error(
                format!("required[{i}]"),
                "required.undeclared",
                format!("Required parameter {name:?} is not declared in parameters"),
            );
        }
        if let Some(p) = def.parameters.iter().find(|p| &p.name == name)
            && p.default.is_some()
        {
            r.error(
                format!("required[{i}]"),
                "parameter.required_default",
                format!("Parameter {name:?} is required and has a default; drop one of them"),
            );
        }
    }
}

fn check_parameter_values(p: &Parameter, at: &dyn Fn(&str) -> String, r: &mut ValidationReport) {
    let ty = p.param_type;
    if p.required && p.default.is_some() {
        r.error(at("default"), "parameter.required_default", format!("Parameter {:?} is required and has a default; a required parameter is always given, so drop one of them", p.name));
    }
    if p.sensitive && p.default.is_some() {
        r.error(at("default"), "parameter.sensitive_default", format!("Parameter {:?} is sensitive and has a default; defaults are shown in schemas sent to models and in tool listings, so pass the value with each call instead", p.name));
    }
    if let Some(values) = &p.enum_values {
        if values.is_empty() {
            r.error(
                at("enum"),
                "parameter.enum_empty",
                "Enum is empty: list the allowed values or remove enum",
            );
        }
        for (j, v) in values.iter().enumerate() {
            if !ty.matches(v) {
                r.error(
                    format!("{}[{j}]", at("enum")),
                    "parameter.enum_type",
                    format!(
                        "Enum value {v} is not of the parameter's type {}",
                        ty.as_str()
                    ),
                );
            }
        }
        let mut distinct = HashSet::new();
        if values.iter().any(|v| !distinct.insert(v.to_string())) {
            r.warn(
                at("enum"),
                "parameter.enum_duplicate",
                "Enum lists the same value more than once",
            );
        }
    }
    let compiled = match &p.schema {
        Some(Value::Object(s)) => {
            if let Some(t) = s.get("type")
                && t != &Value::String(ty.as_str().into())
            {
                r.error(
                    at("schema"),
                    "parameter.schema_type_mismatch",
                    format!(
                        "Schema type {t} disagrees with the parameter's type {:?}",
                        ty.as_str()
                    ),
                );
            }
            compile_schema(
                &schema::parameter_schema(p),
                &at("schema"),
                "parameter.schema_invalid",
                r,
            )
        }
        Some(_) => {
            r.error(
                at("schema"),
                "parameter.schema_invalid",
                "Schema must be a JSON object",
            );
            None
        }
        None => {
            if matches!(ty, ParamType::Array | ParamType::Object) && p.enum_values.is_none() {
                r.error(at("schema"), "parameter.schema_missing", format!("{} parameter {:?} needs a schema (items for arrays, properties for objects) or an enum", ty.as_str(), p.name));
            }
            None
        }
    };
    if let Some(default) = &p.default {
        if !ty.matches(default) {
            r.error(
                at("default"),
                "parameter.default_type",
                format!(
                    "Default {default} is not of the parameter's type {}",
                    ty.as_str()
                ),
            );
        } else if p
            .enum_values
            .as_ref()
            .is_some_and(|e| !e.iter().any(|v| json_equal(v, default)))
        {
            r.error(
                at("default"),
                "parameter.default_enum",
                format!("Default {default} is not one of the enum values"),
            );
        } else if let Some(v) = &compiled
            && let Some(err) = v.iter_errors(default).next()
        {
            r.error(
                at("default"),
                "parameter.default_schema",
                format!("Default does not match the schema: {err}"),
            );
        }
    }
}

/// JSON equality as JSON Schema's `enum` sees it: numbers by value (`1` equals `1.0`).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, a)| y.get(k).is_some_and(|b| json_equal(a, b)))
        }
        _ => a == b,
    }
}

fn check_input_schema(
    def: &ToolDefinition,
    schema: &Value,
    r: &mut ValidationReport,
) -> Option<Arc<jsonschema::Validator>> {
    if def.input_schema.is_some() {
        let is_object = schema.get("type") == Some(&Value::String("object".into()));
        if !is_object {
            r.error("input_schema", "input_schema.not_object", "Input schema must be an object schema: {\"type\": \"object\", \"properties\": {...}}");
            return None;
        }
        let validator = compile_schema(schema, "input_schema", "input_schema.invalid", r)?;
        check_required_declared(schema, "input_schema", &[], r);
        check_raw_defaults(def, schema, &validator, r);
        Some(validator)
    } else {
        // Parameter schemas were checked one by one; a failure here names the parameter set,
        // unless it only repeats a problem already reported for one parameter.
        let mut whole = ValidationReport::default();
        let validator =
            compile_schema(schema, "parameters", "parameter.schema_invalid", &mut whole);
        if !r
            .errors
            .iter()
            .any(|e| e.code == "parameter.schema_invalid")
        {
            r.errors.extend(whole.errors);
        }
        validator
    }
}

/// Subschemas that describe the same instance as their parent (so a `required` there may name
/// a property the parent declares).
const SAME_INSTANCE: [&str; 7] = ["allOf", "anyOf", "oneOf", "if", "then", "else", "not"];

/// A `required` list names only declared parameters, for raw schemas too: every
/// name in an object schema's `required` is declared in its `properties` (or, inside
/// `allOf`/`anyOf`/`oneOf`/`if`/`then`/`else`/`not`, in the enclosing schema's), at every depth:
/// `properties.*`, `items`, `prefixItems`, `additionalProperties`, `$defs`/`definitions`,
/// `dependentSchemas`. Schemas with `patternProperties` are left alone (a pattern may declare the
/// name).
fn check_required_declared(
    schema: &Value,
    path: &str,
    inherited: &[&str],
    r: &mut ValidationReport,
) {
    let Some(node) = schema.as_object() else {
        return;
    };
    let own = node.get("properties").and_then(Value::as_object);
    let declared =
        |name: &str| own.is_some_and(|p| p.contains_key(name)) || inherited.contains(&name);
    if let Some(required) = node.get("required").and_then(Value::as_array)
        && !node.contains_key("patternProperties")
    {
        let where_ = if own.is_none() && !inherited.is_empty() {
            "the enclosing schema's properties".to_owned()
        } else {
            format!("{path}.properties")
        };
        for (i, name) in required.iter().enumerate() {
            if let Some(name) = name.as_str()
                && !declared(name)
            {
                r.error(
                    format!("{path}.required[{i}]"),
                    "input_schema.required_undeclared",
                    format!("{name:?} is not declared in {where_}; declare it there or remove it from required"),
                );
            }
        }
    }
    // What a same-instance subschema may rely on: this schema's properties and its parent's.
    let mut context: Vec<&str> = inherited.to_vec();
    context.extend(own.into_iter().flat_map(|p| p.keys().map(String::as_str)));
    for key in SAME_INSTANCE {
        match node.get(key) {
            Some(Value::Array(items)) => {
                for (i, sub) in items.iter().enumerate() {
                    check_required_declared(sub, &format!("{path}.{key}[{i}]"), &context, r);
                }
            }
            Some(sub) => check_required_declared(sub, &format!("{path}.{key}"), &context, r),
            None => {}
        }
    }
    for key in ["properties", "$defs", "definitions", "dependentSchemas"] {
        if let Some(map) = node.get(key).and_then(Value::as_object) {
            for (name, sub) in map {
                let sub_context: &[&str] = if key == "dependentSchemas" {
                    &context
                } else {
                    &[]
                };
                check_required_declared(sub, &format!("{path}.{key}.{name}"), sub_context, r);
            }
        }
    }
    for key in ["items", "additionalProperties", "contains"] {
        if let Some(sub) = node.get(key) {
            check_required_declared(sub, &format!("{path}.{key}"), &[], r);
        }
    }
    if let Some(items) = node.get("prefixItems").and_then(Value::as_array) {
        for (i, sub) in items.iter().enumerate() {
            check_required_declared(sub, &format!("{path}.prefixItems[{i}]"), &[], r);
        }
    }
}

/// Checks each top-level `properties.*.default` of a raw input schema against the schema (a bad
/// default would make every call that leaves the argument out fail), and refuses defaults on
/// properties marked sensitive.
fn check_raw_defaults(
    def: &ToolDefinition,
    schema: &Value,
    validator: &jsonschema::Validator,
    r: &mut ValidationReport,
) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let sensitive = crate::schema::sensitive_properties(def, schema);
    for (name, prop) in props {
        let Some(default) = prop.get("default") else {
            continue;
        };
        let at = format!("input_schema.properties.{name}.default");
        if sensitive.contains(name) {
            r.error(at, "input_schema.sensitive_default", format!("Property {name:?} is sensitive and has a default; defaults are shown in schemas sent to models and in tool listings, so pass the value with each call instead"));
            continue;
        }
        let instance = serde_json::json!({ name.as_str(): default });
        let own = format!("/{}", name.replace('~', "~0").replace('/', "~1"));
        let problems: Vec<String> = validator
            .iter_errors(&instance)
            .filter(|e| {
                let path = e.instance_path().to_string();
                path == own || path.starts_with(&format!("{own}/"))
            })
            .map(|e| e.to_string())
            .collect();
        if !problems.is_empty() {
            r.error(
                at,
                "input_schema.default_invalid",
                format!(
                    "Default does not match the property's schema: {}",
                    problems.join("; ")
                ),
            );
        }
    }
}

/// Compiles a draft 2020-12 schema, checking it against the meta-schema; remote `$ref`s are refused.
pub(crate) fn compile_schema(
    schema: &Value,
    path: &str,
    code: &str,
    r: &mut ValidationReport,
) -> Option<Arc<jsonschema::Validator>> {
    match jsonschema::draft202012::options().build(schema) {
        Ok(v) => Some(Arc::new(v)),
        Err(e) => {
            let at = e.instance_path().to_string();
            let full = if at.is_empty() || at == "/" {
                path.to_owned()
            } else {
                format!("{path}{}", pointer_to_path(&at))
            };
            r.error(
                full,
                code,
                format!("Not a valid JSON Schema (draft 2020-12): {e}"),
            );
            None
        }
    }
}

/// `/properties/a/0` → `.properties.a[0]`.
fn pointer_to_path(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|seg| {
            if seg.parse::<usize>().is_ok() {
                format!("[{seg}]")
            } else {
                format!(".{seg}")
            }
        })
        .collect()
}

fn check_constraints(def: &ToolDefinition, r: &mut ValidationReport) {
    let Some(c) = &def.constraints else { return };
    if let Some(t) = c.timeout_ms
        && !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&t)
    {
        r.error("constraints.timeout_ms", "constraints.timeout_range", format!("Timeout {t} ms is outside the allowed range {MIN_TIMEOUT_MS}-{MAX_TIMEOUT_MS} ms (1 s to 10 min)"));
    }
    if let Some(b) = c.max_output_bytes
        && !(MIN_OUTPUT_BYTES..=MAX_OUTPUT_BYTES).contains(&b)
    {
        r.error("constraints.max_output_bytes", "constraints.output_range", format!("Output limit {b} bytes is outside the allowed range {MIN_OUTPUT_BYTES}-{MAX_OUTPUT_BYTES} (1 KiB to 100 MiB)"));
    }
    if let Some(a) = c.max_attempts
        && !(1..=MAX_ATTEMPTS).contains(&a)
    {
        r.error(
            "constraints.max_attempts",
            "constraints.attempts_range",
            format!("max_attempts {a} is outside the allowed range 1-{MAX_ATTEMPTS}"),
        );
    }

    if c.allow_side_effects == Some(false) && def.effect.is_some_and(|e| e != Effect::Read) {
        r.warn(
            "constraints.allow_side_effects",
            "constraints.side_effects_conflict",
            "allow_side_effects is false but the tool's effect is not read",
        );
    }
}

/// The plan caps the isolation a tool *needs*, explicit or by default for its run kind.
fn check_isolation(def: &ToolDefinition, env: &ValidationEnv<'_>, r: &mut ValidationReport) {
    let iso = crate::spec::Limits::of(def).isolation;
    if iso > env.max_isolation {
        let how = if def
            .constraints
            .as_ref()
            .is_some_and(|c| c.isolation.is_some())
        {
            String::new()
        } else {
            format!(
                " (the default for run kind {:?})",
                def.run.as_ref().map_or("", |r| r.kind.as_str())
            )
        };
        r.error("constraints.isolation", "constraints.isolation_plan", format!("Isolation {iso}{how} is not allowed by the plan in force (at most {}); choose a weaker level or change the plan", env.max_isolation));
    }
}

impl ValidationEnv<'_> {
    /// The plan's caps of this environment.
    pub fn caps(&self) -> TierCaps {
        TierCaps {
            max_isolation: self.max_isolation,
            schema_level: self.schema_level,
        }
    }
}

/// The plan caps how much of JSON Schema a custom definition's schemas use (raw
/// `input_schema`, each parameter's `schema`, `output_schema`); built-ins are exempt.
fn check_schema_level(def: &ToolDefinition, env: &ValidationEnv<'_>, r: &mut ValidationReport) {
    if env.builtin || env.schema_level == SchemaLevel::Full {
        return;
    }
    let mut schemas: Vec<(String, &Value)> = Vec::new();
    if let Some(s) = &def.input_schema {
        schemas.push(("input_schema".to_owned(), s));
    }
    for (i, p) in def.parameters.iter().enumerate() {
        if let Some(s) = &p.schema {
            schemas.push((format!("parameters[{i}].schema"), s));
        }
    }
    if let Some(s) = &def.output_schema {
        schemas.push(("output_schema".to_owned(), s));
    }
    let allowed = env.schema_level;
    for (path, schema) in schemas {
        for b in beyond(schema, &path, allowed) {
            let plan = b.needs.lowest_plan();
            r.error(
                b.path,
                "schema.plan_level",
                format!(
                    "`{}`{} is {} JSON Schema, and the plan in force allows only {allowed} JSON Schema; the lowest plan that allows it is `{plan}` (set `plan = \"{plan}\"` in the config file), or remove the keyword",
                    b.keyword, b.note, b.needs
                ),
            );
        }
    }
}

fn check_lists(
    def: &ToolDefinition,
    env: &ValidationEnv<'_>,
    r: &mut ValidationReport,
) -> Vec<Permission> {
    let mut permissions = Vec::with_capacity(def.required_permissions.len());
    for (i, p) in def.required_permissions.iter().enumerate() {
        match Permission::parse(p) {
            Ok(p) if p.as_str().ends_with('*') => r.error(
                format!("required_permissions[{i}]"),
                "permission.wildcard",
                "A required permission cannot be a wildcard; name the exact permission",
            ),
            Ok(p) => permissions.push(p),
            Err(msg) => r.error(
                format!("required_permissions[{i}]"),
                "permission.format",
                msg,
            ),
        }
    }
    let mut tags = HashSet::new();
    for (i, t) in def.tags.iter().enumerate() {
        if t.trim().is_empty() || t.chars().count() > 64 {
            r.error(
                format!("tags[{i}]"),
                "tag.length",
                "Tags must be 1-64 characters",
            );
        } else if !tags.insert(t.as_str()) {
            r.warn(
                format!("tags[{i}]"),
                "tag.duplicate",
                format!("Tag {t:?} is listed twice"),
            );
        }
    }
    if let Some(v) = &def.version
        && semver::Version::parse(v).is_err()
    {
        r.error(
            "version",
            "version.semver",
            format!("Version {v:?} is not semantic versioning; write it like 1.2.0"),
        );
    }
    for (i, d) in def.depends_on.iter().enumerate() {
        let at = format!("depends_on[{i}]");
        if d == &def.name {
            r.error(at, "depends_on.self", "A tool cannot depend on itself");
        } else if ToolName::parse(d).is_err() {
            r.error(
                at,
                "depends_on.format",
                format!("{d:?} is not a valid tool name"),
            );
        } else if let Some(lookup) = env.lookup
            && lookup(d) == Lookup::Absent
        {
            r.error(at, "depends_on.unknown", format!("Dependency {d:?} is not registered; register it first or remove it from depends_on"));
        }
    }
    if let Some(run) = &def.run
        && !RUN_KINDS.contains(&run.kind.as_str())
    {
        r.error(
            "run.kind",
            "run.unknown_kind",
            format!(
                "Unknown run kind {:?}; use one of {}",
                run.kind,
                RUN_KINDS.join(", ")
            ),
        );
    }
    permissions
}

fn check_warnings(def: &ToolDefinition, r: &mut ValidationReport) {
    let spec_like = crate::spec::Resolved::of(def);
    if (spec_like.effect == Effect::Delete || spec_like.consequence == crate::Consequence::High)
        && !spec_like.requires_confirmation
    {
        r.warn("requires_confirmation", "confirmation.missing", "Delete and high-consequence tools usually need requires_confirmation = true so a person approves each call");
    }
    if let (Some(level), true) = (
        def.safety_level,
        def.consequence.is_some() || def.requires_confirmation.is_some(),
    ) {
        let (c, rc) = level.expand();
        if def.consequence.is_some_and(|x| x != c)
            || def.requires_confirmation.is_some_and(|x| x != rc)
        {
            r.warn("safety_level", "safety_level.overridden", "Explicit consequence/requires_confirmation override safety_level; the explicit fields win");
        }
    }
    if def.idempotent == Some(true) && spec_like.effect == Effect::Delete {
        r.warn("idempotent", "idempotent.delete", "A delete tool marked idempotent will be retried automatically on transient failures; make sure that is safe");
    }
}

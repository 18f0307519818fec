//! [`ToolSpec`]: a definition that passed validation, with every default resolved and its
//! schemas compiled. Only validation creates one, so holding a `ToolSpec` proves validity.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::definition::{Category, Consequence, Effect, Isolation, TaskSupport, ToolDefinition};
use crate::limits::*;
use crate::names::{Permission, ToolName};
use crate::schema;
use crate::validate::Issue;

/// The governance fields of a definition with defaults and `safety_level` applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Functional domain.
    pub category: Category,
    /// Mutation class.
    pub effect: Effect,
    /// Real-world impact.
    pub consequence: Consequence,
    /// Whether a person must approve each call.
    pub requires_confirmation: bool,
    /// Whether failures may be retried.
    pub idempotent: bool,
    /// Whether MCP clients may run its calls as tasks.
    pub tasks: TaskSupport,
}

impl Resolved {
    /// Resolves: explicit fields win over `safety_level`, which wins over the defaults.
    /// `idempotent` defaults to `effect == read`.
    pub fn of(def: &ToolDefinition) -> Self {
        let (level_consequence, level_confirm) = def
            .safety_level
            .map(|l| l.expand())
            .unwrap_or((Consequence::Low, false));
        let effect = def.effect.unwrap_or_default();
        let requires_confirmation = def.requires_confirmation.unwrap_or(level_confirm);
        Self {
            category: def.category.unwrap_or_default(),
            effect,
            consequence: def.consequence.unwrap_or(level_consequence),
            requires_confirmation,
            idempotent: def.idempotent.unwrap_or(effect == Effect::Read),
            tasks: def.tasks.unwrap_or(if requires_confirmation {
                TaskSupport::Optional
            } else {
                TaskSupport::Forbidden
            }),
        }
    }
}

/// Execution limits with defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Output cap in bytes.
    pub max_output_bytes: u64,
    /// Whether the tool may have side effects.
    pub allow_side_effects: bool,
    /// The isolation the tool must run in.
    pub isolation: Isolation,
    /// Whether retryable failures may be retried.
    pub retryable: bool,
    /// Most attempts.
    pub max_attempts: u32,
}

impl Limits {
    pub(crate) fn of(def: &ToolDefinition) -> Self {
        let c = def.constraints.clone().unwrap_or_default();
        let runs_code = def
            .run
            .as_ref()
            .is_some_and(|r| matches!(r.kind.as_str(), "command" | "wasm"));
        Self {
            timeout: Duration::from_millis(c.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
            max_output_bytes: c.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
            allow_side_effects: c.allow_side_effects.unwrap_or(true),
            isolation: c.isolation.unwrap_or(if runs_code {
                Isolation::Standard
            } else {
                Isolation::None
            }),
            retryable: c.retryable.unwrap_or(true),
            max_attempts: c.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        }
    }
}

struct Inner {
    definition: ToolDefinition,
    name: ToolName,
    resolved: Resolved,
    limits: Limits,
    input_schema: Value,
    input_validator: Arc<jsonschema::Validator>,
    output_validator: Option<Arc<jsonschema::Validator>>,
    permissions: Vec<Permission>,
    sensitive: Vec<String>,
    warnings: Vec<Issue>,
    search_text: String,
    hash: OnceLock<String>,
}

/// A validated tool definition. Cheap to clone (shared).
#[derive(Clone)]
pub struct ToolSpec(Arc<Inner>);

impl ToolSpec {
    pub(crate) fn new(
        definition: ToolDefinition,
        name: ToolName,
        input_schema: Value,
        input_validator: Arc<jsonschema::Validator>,
        output_validator: Option<Arc<jsonschema::Validator>>,
        permissions: Vec<Permission>,
        warnings: Vec<Issue>,
    ) -> Self {
        let sensitive = schema::sensitive_properties(&definition, &input_schema);
        let search_text = format!("{}\n{}", definition.name, definition.description).to_lowercase();
        Self(Arc::new(Inner {
            resolved: Resolved::of(&definition),
            limits: Limits::of(&definition),
            definition,
            name,
            input_schema,
            input_validator,
            output_validator,
            permissions,
            sensitive,
            warnings,
            search_text,
            hash: OnceLock::new(),
        }))
    }

    /// The definition as written.
    pub fn definition(&self) -> &ToolDefinition {
        &self.0.definition
    }

    /// The validated name.
    pub fn name(&self) -> &ToolName {
        &self.0.name
    }

    /// Description (the routing contract).
    pub fn description(&self) -> &str {
        &self.0.definition.description
    }

    /// Governance fields with defaults applied.
    pub fn resolved(&self) -> &Resolved {
        &self.0.resolved
    }

    /// Category with default applied.
    pub fn category(&self) -> Category {
        self.0.resolved.category
    }

    /// Effect with default applied.
    pub fn effect(&self) -> Effect {
        self.0.resolved.effect
    }

    /// Consequence with `safety_level` and default applied.
    pub fn consequence(&self) -> Consequence {
        self.0.resolved.consequence
    }

    /// Whether each call needs an explicit yes.
    pub fn requires_confirmation(&self) -> bool {
        self.0.resolved.requires_confirmation
    }

    /// Whether MCP clients may run its calls as tasks (declared, or the default).
    pub fn task_support(&self) -> TaskSupport {
        self.0.resolved.tasks
    }

    /// Whether automatic retries are safe.
    pub fn idempotent(&self) -> bool {
        self.0.resolved.idempotent
    }

    /// Execution limits with defaults applied.
    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    /// The draft 2020-12 object schema arguments are validated against.
    pub fn input_schema(&self) -> &Value {
        &self.0.input_schema
    }

    /// The declared output schema, if any.
    pub fn output_schema(&self) -> Option<&Value> {
        self.0.definition.output_schema.as_ref()
    }

    /// Whether `input` is valid arguments for this tool (its input schema accepts it), as the
    /// pipeline would check them; exporters use it to vet examples before handing them on.
    pub fn accepts_input(&self, input: &Value) -> bool {
        self.0.input_validator.is_valid(input)
    }

    pub(crate) fn input_validator(&self) -> &jsonschema::Validator {
        &self.0.input_validator
    }

    pub(crate) fn output_validator(&self) -> Option<&jsonschema::Validator> {
        self.0.output_validator.as_deref()
    }

    /// Permissions a caller must hold.
    pub fn required_permissions(&self) -> &[Permission] {
        &self.0.permissions
    }

    /// Top-level argument names whose values are redacted in logs and the audit.
    pub fn sensitive_arguments(&self) -> &[String] {
        &self.0.sensitive
    }

    /// Arguments with sensitive values replaced by `"[REDACTED]"`.
    pub fn redact(&self, args: &Value) -> Value {
        schema::redact(args, &self.0.sensitive)
    }

    /// Non-blocking warnings found by validation.
    pub fn warnings(&self) -> &[Issue] {
        &self.0.warnings
    }

    /// Lower-cased `name\ndescription`, for free-text search.
    pub(crate) fn search_text(&self) -> &str {
        &self.0.search_text
    }

    /// Tags as written.
    pub fn tags(&self) -> &[String] {
        &self.0.definition.tags
    }

    /// Hex SHA-256 of the definition's canonical JSON (object keys sorted, no whitespace).
    /// Approvals and audit records bind to it: any change to the definition changes the hash.
    pub fn definition_hash(&self) -> &str {
        self.0.hash.get_or_init(|| {
            let value = serde_json::to_value(&self.0.definition).unwrap_or(Value::Null);
            let mut canonical = String::new();
            write_canonical(&value, &mut canonical);
            let digest = Sha256::digest(canonical.as_bytes());
            digest.iter().map(|b| format!("{b:02x}")).collect()
        })
    }
}

impl fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.0.name)
            .field("resolved", &self.0.resolved)
            .field("limits", &self.0.limits)
            .finish_non_exhaustive()
    }
}

/// Canonical JSON: object keys sorted by code point, no insignificant whitespace. Strings and
/// numbers are written exactly as `serde_json` writes them (hashes over this text are stored, so
/// it must never change).
pub fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                if let Some(v) = map.get(*k) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        Value::String(s) => write_json_string(s, out),
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(_) => {
            use std::fmt::Write as _;
            // Writing into a String cannot fail.
            let _ = write!(out, "{value}");
        }
    }
}

/// Appends `s` as a JSON string literal, escaped exactly as `serde_json` escapes it: quote and
/// backslash, the short escapes `\b \t \n \f \r`, other control characters as `\u00xx`, everything
/// else (including non-ASCII) as is.
pub fn write_json_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    /// Bytes checked at once for anything to escape.
    const CHUNK: usize = 16;
    fn needs_escape(byte: u8) -> bool {
        byte < 0x20 || byte == b'"' || byte == b'\\'
    }
    out.reserve(s.len() + 2);
    out.push('"');
    let mut start = 0;
    // A chunk with nothing to escape (all of a hash, an id or a time, the longer stretches of a
    // JSON text) is passed over after one branch-free check, which the compiler turns into
    // vector instructions; only a chunk with something to escape is walked byte by byte. This
    // runs for every column of every audit entry (issue 24).
    for (n, chunk) in s.as_bytes().chunks(CHUNK).enumerate() {
        if !chunk.iter().fold(false, |hit, &b| hit | needs_escape(b)) {
            continue;
        }
        for (i, &byte) in (n * CHUNK..).zip(chunk) {
            let escape: &str = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                0x08 => "\\b",
                b'\t' => "\\t",
                b'\n' => "\\n",
                0x0c => "\\f",
                b'\r' => "\\r",
                0x00..=0x1f => "",
                _ => continue,
            };
            out.push_str(&s[start..i]);
            if escape.is_empty() {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            } else {
                out.push_str(escape);
            }
            start = i + 1;
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

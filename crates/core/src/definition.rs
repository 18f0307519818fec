//! The tool definition document: every field of `docs/tool-model.md#definition-fields`, as written
//! in TOML, JSON or YAML files.
//!
//! A [`ToolDefinition`] is the *lossless* document form: fields that have a default but whose
//! absence matters (for example `effect`, which `safety_level` may fill in) are `Option`s, so a
//! definition loaded from a file and written back says exactly what the file said. The validated,
//! resolved form with every default applied is [`crate::ToolSpec`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Functional domain of a tool (`docs/tool-model.md#definition-fields`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Reads or changes files.
    Filesystem,
    /// Fetches from or sends to network hosts.
    Network,
    /// Queries or changes a database.
    Database,
    /// Runs code or programs.
    CodeExecution,
    /// Calls a third-party API.
    ExternalApi,
    /// Looks up reference knowledge (an encyclopedia, documentation).
    Knowledge,
    /// Sends messages to people (mail, chat).
    Communication,
    /// Everything else: computation, planning, toolgate itself (the default).
    #[default]
    System,
}

/// Mutation class of a tool (`docs/tool-model.md#effect`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Changes nothing (the default); the only effect that is idempotent by default.
    #[default]
    Read,
    /// Creates or changes data.
    Write,
    /// Removes data.
    Delete,
    /// Acts on the world beyond data: sends a message, starts a job.
    SideEffect,
}

/// Real-world impact of a call, independent of its [`Effect`] (`docs/tool-model.md#consequence`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Consequence {
    /// Little harm if it goes wrong (the default).
    #[default]
    Low,
    /// Noticeable harm, recoverable.
    Medium,
    /// Serious or irreversible harm; such tools usually require confirmation.
    High,
}

/// Shorthand for (consequence, confirmation); explicit fields win over it
/// (`docs/tool-model.md#safety-level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SafetyLevel {
    /// Low consequence, no confirmation.
    Safe,
    /// Medium consequence, no confirmation, logged.
    Cautious,
    /// High consequence, confirmation required.
    Dangerous,
}

impl SafetyLevel {
    /// The (consequence, requires_confirmation) pair this level stands for.
    pub fn expand(self) -> (Consequence, bool) {
        match self {
            Self::Safe => (Consequence::Low, false),
            Self::Cautious => (Consequence::Medium, false),
            Self::Dangerous => (Consequence::High, true),
        }
    }
}

/// OS-level isolation a tool must run in (`docs/tool-model.md#isolation`), weakest first.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// In-process; trusted code only.
    #[default]
    None,
    /// Child process with resource limits.
    Standard,
    /// Adds a filesystem allow-list, syscall filtering and declared hosts only.
    Strict,
    /// No filesystem beyond the program, no network, low memory.
    Restricted,
}

/// Whether an MCP client may run a call to the tool as a task (`docs/tool-model.md#tasks`;
/// MCP's `execution.taskSupport`): answered at once with a task handle, the result read later
/// with `tasks/get`. The default is `optional` for a tool that requires confirmation (its call
/// waits for a person's yes) and `forbidden` for every other tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Calls are always answered directly.
    Forbidden,
    /// A client that speaks the MCP tasks extension gets a task; others a direct answer.
    Optional,
    /// Only a client that speaks the MCP tasks extension may call the tool.
    Required,
}

/// JSON type of a typed parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    /// A JSON string.
    String,
    /// A whole number (`2.0` counts).
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON array; needs a `schema` (with `items`) or an `enum`.
    Array,
    /// A JSON object; needs a `schema` (with `properties`) or an `enum`.
    Object,
}

impl ParamType {
    /// Every type, in order.
    pub const ALL: &'static [ParamType] = &[
        Self::String,
        Self::Integer,
        Self::Number,
        Self::Boolean,
        Self::Array,
        Self::Object,
    ];

    /// The JSON Schema `type` keyword value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    /// Whether `value` is of this type (an integer is also a number; `2.0` counts as an integer).
    pub fn matches(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Integer => match value {
                Value::Number(n) => {
                    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
                }
                _ => false,
            },
            Self::Number => value.is_number(),
            Self::Boolean => value.is_boolean(),
            Self::Array => value.is_array(),
            Self::Object => value.is_object(),
        }
    }
}

/// One typed parameter (`docs/tool-model.md#parameters`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Parameter {
    /// The argument's key: snake_case, unique within the tool.
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]*$"), length(min = 1, max = 64))]
    pub name: String,
    /// What the argument means (a missing one is a warning).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The JSON type (`type` in files).
    #[serde(rename = "type")]
    pub param_type: ParamType,
    /// Whether every call must give it (a required parameter has no default).
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// `Some(Value::Null)` when the file says `default: null` (kept, so validation can refuse it).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(
        description = "The value a call that omits the parameter gets: of the parameter's type, in its enum, never with `required` or `sensitive`."
    )]
    pub default: Option<Value>,
    /// The allowed values (`enum` in files), each of the parameter's type.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<Value>>,
    /// Full JSON Schema for `array` and `object` parameters (merged with `type` and `description`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Redacted in logs and the audit log.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sensitive: bool,
}

impl Parameter {
    /// A parameter of the given name and type with every optional field empty.
    pub fn new(name: impl Into<String>, param_type: ParamType) -> Self {
        Self {
            name: name.into(),
            description: String::new(),
            param_type,
            required: false,
            default: None,
            enum_values: None,
            schema: None,
            sensitive: false,
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// Marks the parameter required.
    #[must_use]
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Sets a default value.
    #[must_use]
    pub fn default_value(mut self, value: Value) -> Self {
        self.default = Some(value);
        self
    }

    /// Restricts the parameter to the given values.
    #[must_use]
    pub fn one_of(mut self, values: Vec<Value>) -> Self {
        self.enum_values = Some(values);
        self
    }

    /// Sets the JSON Schema of an array or object parameter.
    #[must_use]
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Marks the parameter sensitive (redacted in logs and the audit).
    #[must_use]
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }
}

/// Execution limits (`docs/tool-model.md#constraints`); absent fields take the defaults in
/// [`crate::limits`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Per-attempt timeout in milliseconds (1000–600000, default 15000).
    #[schemars(range(min = crate::limits::MIN_TIMEOUT_MS, max = crate::limits::MAX_TIMEOUT_MS))]
    #[serde(default, alias = "timeoutMs", skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Output cap in bytes (1 KiB–100 MiB, default 10 MiB); larger output is cut, not refused.
    #[schemars(range(min = crate::limits::MIN_OUTPUT_BYTES, max = crate::limits::MAX_OUTPUT_BYTES))]
    #[serde(
        default,
        alias = "maxOutputBytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_output_bytes: Option<u64>,
    /// Whether the tool may have side effects (default true; `false` with a non-read effect
    /// is a warning).
    #[serde(
        default,
        alias = "allowSideEffects",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_side_effects: Option<bool>,
    /// The isolation the tool must run in (default: `standard` for run kinds that run code,
    /// `none` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// Whether retryable failures may be retried at all (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Most attempts for retryable failures (1–10, default 3).
    #[schemars(range(min = 1, max = crate::limits::MAX_ATTEMPTS))]
    #[serde(
        default,
        alias = "maxAttempts",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_attempts: Option<u32>,
}

/// How a declarative tool executes: `kind` plus kind-specific settings kept as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSpec {
    /// The run kind, one of [`RUN_KINDS`] (`docs/tool-model.md#run-kinds`).
    #[schemars(
        extend("enum" = RUN_KINDS),
        description = "The run kind: `http` and `command` run; `builtin`, `wasm` and `mcp` are reserved (docs/tool-model.md#run-kinds)."
    )]
    pub kind: String,
    /// The kind's own settings, checked by the installed [`crate::RunKind`].
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

/// Run kinds toolgate knows; a definition naming another kind is invalid.
pub const RUN_KINDS: &[&str] = &["builtin", "http", "command", "wasm", "mcp"];

/// A tool definition as written by a person or a program (`docs/tool-model.md#definition-fields`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    /// `"$schema"`: a JSON Schema link for editors, accepted and ignored (never written back).
    #[serde(rename = "$schema", default, skip_serializing)]
    #[schemars(description = "The JSON Schema of this file, for editors; ignored by toolgate.")]
    pub schema_link: SchemaLink,
    /// The tool's name (`docs/tool-model.md#naming-rules`).
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]*$"), length(min = 1, max = 64))]
    pub name: String,
    /// Display name, 1–128 characters.
    #[schemars(length(min = 1, max = 128))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The routing contract: what the tool does and when to use it (at most 1024 characters).
    #[schemars(length(min = 1, max = crate::limits::MAX_DESCRIPTION_LEN))]
    #[serde(default)]
    pub description: String,
    /// Functional domain (default `system`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// Mutation class (default `read`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
    /// Real-world impact (default `low`, or what `safety_level` says).
    #[serde(
        default,
        alias = "consequenceLevel",
        skip_serializing_if = "Option::is_none"
    )]
    pub consequence: Option<Consequence>,
    /// Whether a person must approve each call (default false, or what `safety_level` says).
    #[serde(
        default,
        alias = "requiresConfirmation",
        skip_serializing_if = "Option::is_none"
    )]
    pub requires_confirmation: Option<bool>,
    /// Shorthand for `consequence` and `requires_confirmation`; explicit fields win.
    #[serde(
        default,
        alias = "safetyLevel",
        skip_serializing_if = "Option::is_none"
    )]
    pub safety_level: Option<SafetyLevel>,
    /// Whether MCP clients may run its calls as tasks (default: `optional` when it requires
    /// confirmation, otherwise `forbidden`).
    #[serde(
        default,
        alias = "taskSupport",
        skip_serializing_if = "Option::is_none"
    )]
    pub tasks: Option<TaskSupport>,
    /// Typed parameters, compiled to one object schema (not with `input_schema`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    /// A separate list of required parameter names (merged with `parameters[].required`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    /// A raw JSON Schema object schema for the arguments (not with `parameters`).
    #[schemars(extend("type" = "object"))]
    #[serde(
        default,
        alias = "inputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_schema: Option<Value>,
    /// The schema the output is checked against after the tool ran.
    #[serde(
        default,
        alias = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<Value>,
    /// Execution limits; absent ones take their defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Constraints>,
    /// Permissions the caller must hold, every one of them.
    #[serde(
        default,
        alias = "requiredPermissions",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub required_permissions: Vec<String>,
    /// Free keywords for search and filtering.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Semantic version of the definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Tools that must be registered first; never a cycle.
    #[serde(default, alias = "dependsOn", skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Whether running it twice is safe, so failures may be retried (default: effect is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// Free data toolgate keeps and does not read.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// How a declarative tool runs (`docs/tool-model.md#run-kinds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSpec>,
}

impl ToolDefinition {
    /// A definition with the given name and description and every other field at its default.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            schema_link: SchemaLink,
            name: name.into(),
            title: None,
            description: description.into(),
            category: None,
            effect: None,
            consequence: None,
            requires_confirmation: None,
            safety_level: None,
            tasks: None,
            parameters: Vec::new(),
            required: Vec::new(),
            input_schema: None,
            output_schema: None,
            constraints: None,
            required_permissions: Vec::new(),
            tags: Vec::new(),
            version: None,
            depends_on: Vec::new(),
            idempotent: None,
            metadata: Map::new(),
            run: None,
        }
    }
}

macro_rules! wire_names {
    ($($ty:ident { $($variant:ident => $name:literal),+ $(,)? })+) => {$(
        impl $ty {
            /// Every value, in order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The snake_case name used in files and on the wire.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),+ }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err(format!("unknown {} {s:?}; use one of: {}", stringify!($ty).to_lowercase(), [$($name),+].join(", "))),
                }
            }
        }
    )+};
}

wire_names! {
    Category { Filesystem => "filesystem", Network => "network", Database => "database", CodeExecution => "code_execution", ExternalApi => "external_api", Knowledge => "knowledge", Communication => "communication", System => "system" }
    Effect { Read => "read", Write => "write", Delete => "delete", SideEffect => "side_effect" }
    Consequence { Low => "low", Medium => "medium", High => "high" }
    SafetyLevel { Safe => "safe", Cautious => "cautious", Dangerous => "dangerous" }
    TaskSupport { Forbidden => "forbidden", Optional => "optional", Required => "required" }
    Isolation { None => "none", Standard => "standard", Strict => "strict", Restricted => "restricted" }
}

/// A definition file's `"$schema"` (an editor's JSON Schema link): any value is accepted and
/// dropped, so a definition with one equals the same definition without.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchemaLink;

impl<'de> Deserialize<'de> for SchemaLink {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| SchemaLink)
    }
}

impl JsonSchema for SchemaLink {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SchemaLink".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A JSON Schema for editors (like `https://…/definition.schema.json`); ignored by toolgate."
        })
    }
}

/// Distinguishes a present `null` from an absent key.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn is_false(b: &bool) -> bool {
    !*b
}

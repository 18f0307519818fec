//! toolgate exports: validated tools as OpenAI (Chat Completions and Responses), Anthropic,
//! Gemini and MCP `tools/list` tool schemas, each accepted by that provider's documented rules.
//!
//! Every export is a pure function of the [`ToolSpec`]s given: the same tools in the same order
//! always give the same document. What an export had to drop or change to fit a provider is
//! reported as [`ExportNote`]s; what it cannot express at all is an [`ExportError`] that names the
//! tool, the place in its schema and the reason.
//!
//! The way back lives beside each exporter: [`openai_calls`], [`anthropic_calls`] and
//! [`gemini_calls`] read a response's tool calls into provider-neutral [`ToolCall`]s (parallel
//! calls in order, a call with broken arguments kept as that call's [`ArgumentsError`]) and write
//! [`ToolOutcome`]s back in the provider's tool-result shape. Running the calls is the runtime's
//! (`toolgate_runtime::Runtime::run_tool_calls`): this crate stays pure.
//!
//! ```
//! use toolgate_core::{ParamType, Parameter, ToolBuilder, validate};
//! use toolgate_export::{ExportFormat, ExportOptions, export};
//!
//! let def = ToolBuilder::new("get_weather", "Current weather for a city, when the user asks about now.")
//!     .param(Parameter::new("city", ParamType::String).description("City name").required())
//!     .definition()
//!     .clone();
//! let spec = validate(&def).map_err(|r| r.to_string())?;
//! let options = ExportOptions { strict: true, ..ExportOptions::default() };
//! let out = export(&[spec], ExportFormat::OpenAi, &options)?;
//! assert_eq!(out.document[0]["function"]["strict"], true);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, unreachable_pub)]

mod anthropic;
pub mod anthropic_calls;
pub mod calls;
mod context;
mod error;
mod gemini;
pub mod gemini_calls;
mod gemini_json;
mod mcp;
mod openai;
pub mod openai_calls;
mod schema;
mod strict;

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_core::ToolSpec;

pub use calls::{
    ArgumentsError, ArgumentsErrorKind, CallsError, CallsErrorKind, ToolCall, ToolOutcome,
};
pub use error::{ExportError, ExportErrorKind};
pub use mcp::GOVERNANCE_META_KEY;

/// A target an export is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExportFormat {
    /// OpenAI Chat Completions `tools`: `{"type": "function", "function": {...}}`.
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI Responses `tools`: `{"type": "function", "name", ...}` (flat).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Anthropic Messages `tools`: `{"name", "description", "input_schema"}`.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Gemini `Tool`: `{"functionDeclarations": [...]}` with OpenAPI-subset schemas.
    #[serde(rename = "gemini")]
    Gemini,
    /// Gemini `Tool` with JSON Schema: `parametersJsonSchema` and, for tools that declare an
    /// output schema, `responseJsonSchema`.
    #[serde(rename = "gemini-json-schema")]
    GeminiJsonSchema,
    /// MCP `tools/list` result: `{"tools": [...]}` with annotations and governance `_meta`.
    #[serde(rename = "mcp")]
    Mcp,
}

impl ExportFormat {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [ExportFormat; 6] = [
        Self::OpenAi,
        Self::OpenAiResponses,
        Self::Anthropic,
        Self::Gemini,
        Self::GeminiJsonSchema,
        Self::Mcp,
    ];

    /// The name used on the command line and in `/v1/export/{format}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::OpenAiResponses => "openai-responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::GeminiJsonSchema => "gemini-json-schema",
            Self::Mcp => "mcp",
        }
    }

    /// Whether [`ExportOptions::strict`] means anything for this format: OpenAI's Structured
    /// Outputs strict mode and Anthropic's strict tool use.
    pub fn supports_strict(self) -> bool {
        matches!(self, Self::OpenAi | Self::OpenAiResponses | Self::Anthropic)
    }
}

impl fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExportFormat {
    type Err = ExportError;

    /// Parses a format name, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ExportError::UnknownFormat(s.to_owned()))
    }
}

/// How to export.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportOptions {
    /// OpenAI and Anthropic formats only: rewrite schemas to the provider's strict subset and set
    /// `"strict": true`. OpenAI's subset makes every property required and optional ones nullable
    /// (models then send `null` for arguments that were optional; the pipeline treats those as
    /// absent, `toolgate_core::schema::strip_optional_nulls`); Anthropic's closes every object
    /// and keeps optional properties optional. A tool the subset cannot express is exported
    /// non-strict with a note, unless `require_strict` is set.
    #[serde(default)]
    pub strict: bool,
    /// Implies `strict`: fail, listing every tool that cannot be strict and why, instead of
    /// exporting those tools non-strict.
    #[serde(default)]
    pub require_strict: bool,
}

impl ExportOptions {
    /// Whether strict schemas are wanted (asked for, or required).
    pub fn wants_strict(&self) -> bool {
        self.strict || self.require_strict
    }
}

/// One thing an export dropped or changed to fit the target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExportNote {
    /// The tool the note is about.
    pub tool: String,
    /// Where in the exported tool, like `parameters.properties.units.default`.
    pub path: String,
    /// What was dropped or changed, and what it means for calls.
    pub message: String,
}

impl fmt::Display for ExportNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.tool, self.path, self.message)
    }
}

/// An exported document and what had to change to produce it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Export {
    /// The document to hand to the provider (an array of tools for OpenAI and Anthropic, a
    /// `Tool` object for Gemini, a `tools/list` result for MCP).
    pub document: Value,
    /// What was dropped or changed, tool by tool, in document order.
    pub notes: Vec<ExportNote>,
}

/// Exports `specs`, in the order given, as one document in `format`.
///
/// Fails on the first tool that cannot be expressed in the format, when a tool name appears
/// twice, or when `options.strict` is set for a format without a strict mode. With `strict`, a
/// tool the strict subset cannot express is exported non-strict (OpenAI and Anthropic accept both
/// in one request) with a note at path `strict` saying why; [`export_one`] refuses it instead.
/// With `require_strict`, every tool is tried and the export fails with
/// [`ExportError::NotStrict`], which lists every tool that cannot be strict with its reason.
pub fn export(
    specs: &[ToolSpec],
    format: ExportFormat,
    options: &ExportOptions,
) -> Result<Export, ExportError> {
    check_options(format, options)?;
    let mut seen = HashSet::with_capacity(specs.len());
    let mut tools = Vec::with_capacity(specs.len());
    let mut notes = Vec::new();
    let mut not_strict = Vec::new();
    for spec in specs {
        if !seen.insert(spec.name().as_str()) {
            return Err(ExportError::DuplicateTool(spec.name().as_str().to_owned()));
        }
        let (tool, mut tool_notes) = match export_one(spec, format, options) {
            Err(e) if options.require_strict && e.kind() == ExportErrorKind::Unsupported => {
                not_strict.push(e);
                continue;
            }
            // OpenAI and Anthropic take strict and non-strict tools side by side: a tool the
            // strict subset cannot express goes in as it is written, with a note saying why.
            Err(e) if options.strict && e.kind() == ExportErrorKind::Unsupported => {
                let (tool, mut notes) =
                    export_one(spec, format, &ExportOptions::default()).map_err(|_| e.clone())?;
                notes.insert(
                    0,
                    ExportNote {
                        tool: spec.name().as_str().to_owned(),
                        path: "strict".into(),
                        message: if format == ExportFormat::Anthropic {
                            format!("Exported without strict tool use (no \"strict\"), because {e}")
                        } else {
                            format!("Exported without strict mode (\"strict\": false), because {e}")
                        },
                    },
                );
                (tool, notes)
            }
            other => other?,
        };
        tools.push(tool);
        notes.append(&mut tool_notes);
    }
    if !not_strict.is_empty() {
        return Err(ExportError::NotStrict {
            format,
            failures: not_strict,
        });
    }
    if format == ExportFormat::Anthropic && options.wants_strict() {
        notes.extend(anthropic::request_notes(&tools));
    }
    let document = match format {
        ExportFormat::OpenAi | ExportFormat::OpenAiResponses | ExportFormat::Anthropic => {
            Value::Array(tools)
        }
        ExportFormat::Gemini | ExportFormat::GeminiJsonSchema => {
            json!({ "functionDeclarations": tools })
        }
        ExportFormat::Mcp => json!({ "tools": tools }),
    };
    Ok(Export { document, notes })
}

/// Exports one tool: the element [`export`] would put in the document for it, and its notes.
pub fn export_one(
    spec: &ToolSpec,
    format: ExportFormat,
    options: &ExportOptions,
) -> Result<(Value, Vec<ExportNote>), ExportError> {
    check_options(format, options)?;
    let strict = options.wants_strict();
    match format {
        ExportFormat::OpenAi | ExportFormat::OpenAiResponses => {
            openai::export_tool(spec, format, strict)
        }
        ExportFormat::Anthropic => anthropic::export_tool(spec, strict),
        ExportFormat::Gemini => gemini::export_tool(spec),
        ExportFormat::GeminiJsonSchema => gemini_json::export_tool(spec),
        ExportFormat::Mcp => Ok(mcp::export_tool(spec)),
    }
}

fn check_options(format: ExportFormat, options: &ExportOptions) -> Result<(), ExportError> {
    if options.wants_strict() && !format.supports_strict() {
        return Err(ExportError::StrictNotSupported(format));
    }
    Ok(())
}

//! [`ExportError`]: why a set of tools cannot be exported in a format, naming the tool, the place
//! in its schema and the reason.

use crate::ExportFormat;

/// Why an export failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The format name is not one of [`ExportFormat::ALL`].
    #[error(
        "Unknown export format {0:?}: use one of openai, openai-responses, anthropic, gemini, gemini-json-schema, mcp"
    )]
    UnknownFormat(String),
    /// `strict` was asked for a format that has no strict mode.
    #[error(
        "Strict mode exists only for the openai, openai-responses and anthropic formats, not {0}; leave out --strict and --require-strict or choose one of those formats"
    )]
    StrictNotSupported(ExportFormat),
    /// The same tool name appears twice; providers require unique function names.
    #[error("Cannot export: tool {0} is listed more than once, and tool names must be unique")]
    DuplicateTool(String),
    /// A schema uses something the target cannot express.
    #[error("Cannot export tool {tool} {target}: {path} {detail}")]
    Unsupported {
        /// The tool whose schema cannot be exported.
        tool: String,
        /// `in OpenAI strict mode`, `to Gemini`, …
        target: &'static str,
        /// Where, like `parameters.properties.a`.
        path: String,
        /// The offending keyword, like `patternProperties`.
        keyword: String,
        /// The rest of the sentence after the path, like "uses `allOf`, which … does not support".
        detail: String,
    },
    /// A `$ref` points back to a schema it is inside, and the target needs references inlined.
    #[error(
        "Cannot export tool {tool} {target}: {path} uses `$ref` to {reference}, which refers back to a schema that contains it; {target_name} cannot express recursive schemas (flatten the recursion or cap it at a fixed depth)"
    )]
    Recursive {
        /// The tool whose schema cannot be exported.
        tool: String,
        /// `in OpenAI strict mode`, `to Gemini`, …
        target: &'static str,
        /// The target's name for the message, like `Gemini`.
        target_name: &'static str,
        /// Where the reference is, like `parameters.properties.a`.
        path: String,
        /// The reference, like `#/$defs/Node`.
        reference: String,
    },
    /// A `$ref` does not point inside the tool's own schema.
    #[error(
        "Cannot export tool {tool} {target}: {path} uses `$ref` to {reference}, which does not resolve inside the tool's schema (only local references like #/$defs/Name can be exported)"
    )]
    UnresolvedRef {
        /// The tool whose schema cannot be exported.
        tool: String,
        /// `in OpenAI strict mode`, `to Gemini`, …
        target: &'static str,
        /// Where the reference is, like `parameters.properties.a`.
        path: String,
        /// The reference as written.
        reference: String,
    },
    /// A documented size limit of the target is exceeded.
    #[error(
        "Cannot export tool {tool} {target}: the schema has {actual} {what}; {limit} at most {max}"
    )]
    TooLarge {
        /// The tool whose schema cannot be exported.
        tool: String,
        /// `in OpenAI strict mode`, `to Gemini`, …
        target: &'static str,
        /// What was counted, like "levels of object nesting".
        what: &'static str,
        /// How many the schema has.
        actual: usize,
        /// Who sets the limit, like "strict mode allows".
        limit: &'static str,
        /// The most the target allows.
        max: usize,
    },
    /// Strict schemas were required and some tools cannot have one; every such tool is listed
    /// with its reason.
    #[error("{}", not_strict_message(*format, failures))]
    NotStrict {
        /// The format strict mode was required for.
        format: ExportFormat,
        /// Why each tool cannot be strict, one error per tool, in the order given.
        failures: Vec<ExportError>,
    },
}

fn not_strict_message(format: ExportFormat, failures: &[ExportError]) -> String {
    let mut text = format!(
        "Cannot export to {format} with strict mode required: {} {} cannot be strict (fix {} as said below, or ask for --strict instead of --require-strict to export {} without strict mode, with a note saying why):",
        failures.len(),
        if failures.len() == 1 { "tool" } else { "tools" },
        if failures.len() == 1 { "it" } else { "them" },
        if failures.len() == 1 { "it" } else { "them" },
    );
    for failure in failures {
        text.push_str("\n  - ");
        text.push_str(&failure.to_string());
    }
    text
}

/// Stable, machine-readable class of an [`ExportError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExportErrorKind {
    /// Bad request: unknown format or option combination.
    BadRequest,
    /// The tool list itself is invalid (duplicate names).
    Conflict,
    /// A tool's schema cannot be expressed in the target format.
    Unsupported,
}

impl ExportError {
    /// The class of this error.
    pub fn kind(&self) -> ExportErrorKind {
        match self {
            Self::UnknownFormat(_) | Self::StrictNotSupported(_) => ExportErrorKind::BadRequest,
            Self::DuplicateTool(_) => ExportErrorKind::Conflict,
            Self::Unsupported { .. }
            | Self::Recursive { .. }
            | Self::UnresolvedRef { .. }
            | Self::TooLarge { .. }
            | Self::NotStrict { .. } => ExportErrorKind::Unsupported,
        }
    }

    /// The tool the error is about, when it is about one (the first, for
    /// [`ExportError::NotStrict`]).
    pub fn tool(&self) -> Option<&str> {
        match self {
            Self::UnknownFormat(_) | Self::StrictNotSupported(_) => None,
            Self::NotStrict { failures, .. } => failures.first().and_then(Self::tool),
            Self::DuplicateTool(tool)
            | Self::Unsupported { tool, .. }
            | Self::Recursive { tool, .. }
            | Self::UnresolvedRef { tool, .. }
            | Self::TooLarge { tool, .. } => Some(tool),
        }
    }
}

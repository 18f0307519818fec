//! [`ExportError`]: why a set of tools cannot be exported in a format, naming the tool, the place
//! in its schema and the reason.

use crate::ExportFormat;

/// Why an export failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The format name is not one of [`ExportFormat::ALL`].
    #[error(
        "Unknown export format {0:?}: use one of openai, openai-responses, anthropic, gemini, mcp"
    )]
    UnknownFormat(String),
    /// `strict` was asked for a format that has no strict mode.
    #[error(
        "Strict mode exists only for the openai and openai-responses formats, not {0}; leave out --strict or choose an OpenAI format"
    )]
    StrictNotSupported(ExportFormat),
    /// The same tool name appears twice; providers require unique function names.
    #[error("Cannot export: tool {0} is listed more than once, and tool names must be unique")]
    DuplicateTool(String),
    /// A schema uses something the target cannot express.
    #[error("Cannot export tool {tool} {target}: {path} {detail}")]
    Unsupported {
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
        "Cannot export tool {tool} {target}: {path} uses `$ref` to {reference}, which refers back to a schema that contains it; {target_name} needs references inlined and cannot express recursive schemas (flatten the recursion or cap it at a fixed depth)"
    )]
    Recursive {
        tool: String,
        target: &'static str,
        target_name: &'static str,
        path: String,
        reference: String,
    },
    /// A `$ref` does not point inside the tool's own schema.
    #[error(
        "Cannot export tool {tool} {target}: {path} uses `$ref` to {reference}, which does not resolve inside the tool's schema (only local references like #/$defs/Name can be exported)"
    )]
    UnresolvedRef {
        tool: String,
        target: &'static str,
        path: String,
        reference: String,
    },
    /// A documented size limit of the target is exceeded.
    #[error(
        "Cannot export tool {tool} {target}: the schema has {actual} {what}; {limit} at most {max}"
    )]
    TooLarge {
        tool: String,
        target: &'static str,
        /// What was counted, like "levels of object nesting".
        what: &'static str,
        actual: usize,
        /// Who sets the limit, like "strict mode allows".
        limit: &'static str,
        max: usize,
    },
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
            | Self::TooLarge { .. } => ExportErrorKind::Unsupported,
        }
    }

    /// The tool the error is about, when it is about one.
    pub fn tool(&self) -> Option<&str> {
        match self {
            Self::UnknownFormat(_) | Self::StrictNotSupported(_) => None,
            Self::DuplicateTool(tool)
            | Self::Unsupported { tool, .. }
            | Self::Recursive { tool, .. }
            | Self::UnresolvedRef { tool, .. }
            | Self::TooLarge { tool, .. } => Some(tool),
        }
    }
}

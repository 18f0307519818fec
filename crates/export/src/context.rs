//! The per-tool state of one conversion: which tool and target, and the notes collected so far.

use crate::ExportNote;
use crate::error::ExportError;

/// Which provider rules a conversion follows, as error messages name them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// Phrase after the tool name: "in OpenAI strict mode", "to Gemini".
    pub phrase: &'static str,
    /// Subject for sentences: "OpenAI strict mode", "Gemini".
    pub name: &'static str,
}

pub(crate) const OPENAI: Target = Target {
    phrase: "to OpenAI",
    name: "OpenAI",
};
pub(crate) const OPENAI_STRICT: Target = Target {
    phrase: "in OpenAI strict mode",
    name: "strict mode",
};
pub(crate) const ANTHROPIC: Target = Target {
    phrase: "to Anthropic",
    name: "Anthropic",
};
pub(crate) const ANTHROPIC_STRICT: Target = Target {
    phrase: "in Anthropic strict tool use",
    name: "Anthropic strict tool use",
};
pub(crate) const GEMINI_JSON: Target = Target {
    phrase: "to Gemini (JSON Schema)",
    name: "Gemini's JSON Schema support",
};
pub(crate) const GEMINI: Target = Target {
    phrase: "to Gemini",
    name: "Gemini",
};

/// Conversion state for one tool.
pub(crate) struct Cx {
    pub tool: String,
    pub target: Target,
    pub notes: Vec<ExportNote>,
}

impl Cx {
    pub(crate) fn new(tool: &str, target: Target) -> Self {
        Self {
            tool: tool.to_owned(),
            target,
            notes: Vec::new(),
        }
    }

    /// Records that something at `path` was dropped or changed.
    pub(crate) fn note(&mut self, path: &str, message: impl Into<String>) {
        self.notes.push(ExportNote {
            tool: self.tool.clone(),
            path: path.to_owned(),
            message: message.into(),
        });
    }

    /// `path uses `keyword`, which {reason}`.
    pub(crate) fn uses(&self, path: &str, keyword: &str, reason: impl AsRef<str>) -> ExportError {
        self.unsupported(
            path,
            keyword,
            format!("uses `{keyword}`, which {}", reason.as_ref()),
        )
    }

    /// `path {detail}`, for problems that are not one keyword's fault.
    pub(crate) fn unsupported(&self, path: &str, keyword: &str, detail: String) -> ExportError {
        ExportError::Unsupported {
            tool: self.tool.clone(),
            target: self.target.phrase,
            path: path.to_owned(),
            keyword: keyword.to_owned(),
            detail,
        }
    }

    pub(crate) fn recursive(&self, path: &str, reference: &str) -> ExportError {
        ExportError::Recursive {
            tool: self.tool.clone(),
            target: self.target.phrase,
            target_name: self.target.name,
            path: path.to_owned(),
            reference: reference.to_owned(),
        }
    }

    pub(crate) fn unresolved(&self, path: &str, reference: &str) -> ExportError {
        ExportError::UnresolvedRef {
            tool: self.tool.clone(),
            target: self.target.phrase,
            path: path.to_owned(),
            reference: reference.to_owned(),
        }
    }

    pub(crate) fn too_large(
        &self,
        what: &'static str,
        actual: usize,
        limit: &'static str,
        max: usize,
    ) -> ExportError {
        ExportError::TooLarge {
            tool: self.tool.clone(),
            target: self.target.phrase,
            what,
            actual,
            limit,
            max,
        }
    }
}

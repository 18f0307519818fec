//! Reading and writing definition files in TOML, JSON and YAML, chosen by file extension.

use std::path::Path;

use crate::definition::ToolDefinition;
use crate::error::CoreError;

/// A definition file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// TOML (`.toml`).
    Toml,
    /// JSON (`.json`).
    Json,
    /// YAML (`.yaml`, `.yml`).
    Yaml,
}

impl Format {
    /// The format a path's extension names (`.toml`, `.json`, `.yaml`/`.yml`), if any.
    pub fn from_path(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "toml" => Some(Self::Toml),
            "json" => Some(Self::Json),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }

    /// Lower-case name, as used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Toml => "toml",
            Self::Json => "json",
            Self::Yaml => "yaml",
        }
    }
}

impl ToolDefinition {
    /// Parses a definition written in `format`. Unknown fields are errors (they are usually typos).
    pub fn parse(text: &str, format: Format) -> Result<Self, CoreError> {
        let parsed = match format {
            Format::Toml => toml::from_str(text).map_err(|e| e.to_string()),
            Format::Json => serde_json::from_str(text).map_err(|e| e.to_string()),
            Format::Yaml => serde_norway::from_str(text).map_err(|e| e.to_string()),
        };
        parsed.map_err(|message| CoreError::Parse {
            format: format.as_str(),
            message: message.trim().to_owned(),
        })
    }

    /// Writes the definition in `format`; parsing the result gives back an equal definition.
    pub fn render(&self, format: Format) -> Result<String, CoreError> {
        let rendered = match format {
            Format::Toml => toml::to_string_pretty(self).map_err(|e| e.to_string()),
            Format::Json => serde_json::to_string_pretty(self)
                .map(|mut s| {
                    s.push('\n');
                    s
                })
                .map_err(|e| e.to_string()),
            Format::Yaml => serde_norway::to_string(self).map_err(|e| e.to_string()),
        };
        rendered.map_err(|message| CoreError::Render {
            format: format.as_str(),
            message,
        })
    }

    /// Reads and parses a definition file; the format comes from the extension.
    pub fn load(path: &Path) -> Result<Self, CoreError> {
        let format = Format::from_path(path).ok_or_else(|| CoreError::UnknownFormat {
            path: path.display().to_string(),
        })?;
        let text = std::fs::read_to_string(path).map_err(|e| CoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&text, format).map_err(|e| e.at_path(path))
    }
}

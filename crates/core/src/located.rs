//! Definition text with positions: parse errors with the parser's line and column, and a
//! validation path (`parameters[1].name`) found back in the TOML, JSON or YAML text it came from.

use serde::Serialize;

use crate::definition::ToolDefinition;
use crate::format::Format;

/// A 1-based line and column in definition text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TextPosition {
    /// Line, counting from 1.
    pub line: usize,
    /// Column in characters, counting from 1.
    pub column: usize,
}

impl TextPosition {
    /// The position of byte `offset` in `text` (clamped to the text).
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let mut end = offset.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &text[..end];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// Text that does not read as a definition: the parser's message and where it stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseProblem {
    /// The parser's message, without its own "at line … column …" suffix.
    pub message: String,
    /// Where the parser stopped, when it says.
    pub position: Option<TextPosition>,
}

impl Format {
    /// The format named `toml`, `json` or `yaml` (`yml` too), case-insensitively.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "toml" => Some(Self::Toml),
            "json" => Some(Self::Json),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }
}

impl ToolDefinition {
    /// Parses like [`ToolDefinition::parse`], keeping the line and column of a syntax, type or
    /// unknown-field error.
    pub fn parse_located(text: &str, format: Format) -> Result<Self, ParseProblem> {
        match format {
            Format::Toml => toml::from_str(text).map_err(|e| ParseProblem {
                message: e.message().trim().to_owned(),
                position: e.span().map(|s| TextPosition::of_offset(text, s.start)),
            }),
            Format::Json => serde_json::from_str(text).map_err(|e| ParseProblem {
                message: strip_location(&e.to_string()),
                position: (e.line() > 0).then(|| TextPosition {
                    line: e.line(),
                    column: e.column().max(1),
                }),
            }),
            Format::Yaml => serde_norway::from_str(text).map_err(|e| ParseProblem {
                message: strip_location(&e.to_string()),
                position: e.location().map(|l| TextPosition {
                    line: l.line().max(1),
                    column: l.column().max(1),
                }),
            }),
        }
    }
}

fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].trim().to_owned(),
        None => message.trim().to_owned(),
    }
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(path: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while let Some((index, tail)) = rest.split_once(']') {
            if let Ok(i) = index.parse() {
                out.push(Segment::Index(i));
            }
            rest = tail.strip_prefix('[').unwrap_or(tail);
        }
    }
    out
}

/// Where the validation `path` (`constraints.timeout_ms`, `parameters[1].name`, `run.url`) is
/// written in `text`: the key of the deepest part found, or `None` when not even the first is.
/// A reading of the text, not a parse: keys are found in document order, so `parameters[1].name`
/// is the second `name` key after `parameters`.
pub fn locate(text: &str, path: &str) -> Option<TextPosition> {
    let segs = segments(path);
    let mut from = 0;
    let mut found = None;
    let mut i = 0;
    while i < segs.len() {
        match segs[i] {
            Segment::Key(key) => {
                let Some(at) = find_key(text, key, from) else {
                    break;
                };
                found = Some(at);
                from = at + key.len();
            }
            Segment::Index(n) => {
                // Skip the first n items: the next key is written once per item, or else `name`
                // (every parameter has one).
                if let Some(Segment::Key(next)) = segs.get(i + 1) {
                    let then_next = |f: &usize| find_key(text, next, *f).is_some();
                    let skipped = skip(text, next, n, from).filter(then_next);
                    match skipped.or_else(|| skip(text, "name", n, from).filter(then_next)) {
                        Some(after) => from = after,
                        None => break,
                    }
                }
            }
        }
        i += 1;
    }
    found.map(|o| TextPosition::of_offset(text, o))
}

/// Where the text continues after the `n`th occurrence of `key` from `from`.
fn skip(text: &str, key: &str, n: usize, mut from: usize) -> Option<usize> {
    for _ in 0..n {
        from = find_key(text, key, from)? + key.len();
    }
    Some(from)
}

/// The next place at or after `from` where `key` is written as a key: not inside a longer word,
/// and followed (after an optional closing quote and spaces) by `:` (JSON, YAML), `=` (TOML), or
/// `]` / `.` (a TOML table header or dotted key).
fn find_key(text: &str, key: &str, from: usize) -> Option<usize> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut start = from;
    while let Some(rel) = text.get(start..)?.find(key) {
        let at = start + rel;
        let before_ok = text[..at].chars().next_back().is_none_or(|c| !word(c));
        let after = &text[at + key.len()..];
        let after_ok = after.chars().next().is_none_or(|c| !word(c)) && {
            let rest = after
                .trim_start_matches(['"', '\''])
                .trim_start_matches([' ', '\t']);
            rest.starts_with([':', '=', ']', '.'])
        };
        if before_ok && after_ok {
            return Some(at);
        }
        start = at + key.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, column: usize) -> Option<TextPosition> {
        Some(TextPosition { line, column })
    }

    #[test]
    fn paths_are_found_in_toml_json_and_yaml() {
        let toml = "name = \"x\"\ndescription = \"d\"\n\n[[parameters]]\nname = \"a\"\ntype = \"string\"\n\n[[parameters]]\nname = \"b\"\n\n[constraints]\ntimeout_ms = 5\n";
        assert_eq!(locate(toml, "parameters[1].name"), at(9, 1));
        assert_eq!(locate(toml, "parameters[0].type"), at(6, 1));
        assert_eq!(locate(toml, "constraints.timeout_ms"), at(12, 1));
        assert_eq!(locate(toml, "name"), at(1, 1));
        // A missing key: its parent.
        assert_eq!(locate(toml, "constraints.isolation"), at(11, 2));
        assert_eq!(locate(toml, "run.url"), None);

        let json = "{\n  \"name\": \"x\",\n  \"parameters\": [\n    {\"name\": \"a\"},\n    {\"name\": \"b\", \"type\": \"name\"}\n  ]\n}";
        assert_eq!(locate(json, "parameters[1].name"), at(5, 7));
        assert_eq!(locate(json, "parameters[1].type"), at(5, 20));

        let yaml =
            "name: x\nparameters:\n  - name: a\n  - name: b\nrun:\n  kind: http\n  url: ftp://x\n";
        assert_eq!(locate(yaml, "parameters[1].name"), at(4, 5));
        assert_eq!(locate(yaml, "run.url"), at(7, 3));
    }

    #[test]
    fn parse_errors_carry_the_parsers_position() {
        let toml = "name = \"x\"\ndescription = \"d\"\nefect = \"read\"\n";
        let e = ToolDefinition::parse_located(toml, Format::Toml).unwrap_err();
        assert_eq!(e.position, at(3, 1));
        assert!(e.message.contains("efect"), "{}", e.message);

        let json = "{\"name\": \"x\",\n \"description\": 5}";
        let e = ToolDefinition::parse_located(json, Format::Json).unwrap_err();
        assert_eq!(e.position.map(|p| p.line), Some(2));
        assert!(!e.message.contains(" at line "), "{}", e.message);

        let yaml = "name: x\ndescription: d\ncategory: nowhere\n";
        let e = ToolDefinition::parse_located(yaml, Format::Yaml).unwrap_err();
        assert_eq!(e.position.map(|p| p.line), Some(3));
        assert_eq!(Format::from_name("YML"), Some(Format::Yaml));
        assert_eq!(Format::from_name("xml"), None);
    }
}

//! Every problem of definition text that does not deserialize, at once: the text is read as a
//! plain document (TOML, JSON or YAML) and checked against the definition's JSON Schema
//! (`toolgate schema definition`), so unknown fields (with the closest known one), wrong types,
//! bad enum values and missing fields are all reported, each with its path, line and column,
//! where serde stops at the first. Positions are exact in TOML (its parser keeps spans) and found
//! by key in JSON and YAML ([`crate::locate`]). The CLI's `tools validate` and REST's
//! `POST /v1/tools/validate` with definition text both use it.

use serde_json::Value;

use crate::{Format, Issue, TextPosition};

/// The problems of `text` in `format`, each at its line and column, in document order; empty
/// when it is not even well-formed (the parser's own message then says where) or when the
/// schema finds nothing.
pub fn document_problems(text: &str, format: Format) -> Vec<(TextPosition, Issue)> {
    let doc: Value = match format {
        Format::Toml => match toml::from_str(text) {
            Ok(v) => v,
            Err(_) => return Vec::new(),
        },
        Format::Json => match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return Vec::new(),
        },
        Format::Yaml => match serde_norway::from_str(text) {
            Ok(v) => v,
            Err(_) => return Vec::new(),
        },
    };
    let schema = crate::definition_schema();
    let Ok(validator) = jsonschema::draft202012::new(&schema) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for error in validator.iter_errors(&doc) {
        collect(&schema, &error, &mut found);
    }
    let mut issues: Vec<(TextPosition, Issue)> = found
        .into_iter()
        .map(|(segments, code, message, at_key)| {
            let path = dotted(&segments);
            let at = match format {
                Format::Toml => locate_toml(text, &segments, at_key)
                    .map(|offset| TextPosition::of_offset(text, offset)),
                Format::Json | Format::Yaml => crate::locate(text, &path),
            }
            .unwrap_or(TextPosition { line: 1, column: 1 });
            let issue = Issue {
                path,
                code: code.to_owned(),
                message,
            };
            (at, issue)
        })
        .collect();
    issues.sort_by_key(|(at, _)| (at.line, at.column));
    issues.dedup_by(|a, b| a.1 == b.1);
    issues
}

/// (path segments, code, message, whether the last segment is a key to point at).
type Found = (Vec<String>, &'static str, String, bool);

fn collect(schema: &Value, error: &jsonschema::ValidationError<'_>, out: &mut Vec<Found>) {
    use jsonschema::error::ValidationErrorKind as K;
    let segments: Vec<String> = error
        .instance_path()
        .as_str()
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    match error.kind() {
        K::AdditionalProperties { unexpected } => {
            let known = known_keys(schema, &segments);
            for key in unexpected {
                let mut path = segments.clone();
                path.push(key.clone());
                let hint = match closest(key, &known) {
                    Some(k) => format!("did you mean `{k}`?"),
                    None => format!("expected one of {}", known.join(", ")),
                };
                out.push((
                    path,
                    "field.unknown",
                    format!("unknown field `{key}`; {hint}"),
                    true,
                ));
            }
        }
        // `Option<T>` is `anyOf [T, null]`: the first branch says what is wrong.
        K::AnyOf { context } => match context.iter().find(|branch| !branch.is_empty()) {
            Some(branch) => {
                for e in branch {
                    collect(schema, e, out);
                }
            }
            None => out.push((segments, "field.invalid", error.to_string(), false)),
        },
        // An enum whose values schemars wrote as `oneOf` of `const`s (to keep their docs).
        K::OneOfNotValid { .. } if !allowed_values(schema, &segments).is_empty() => {
            let values = allowed_values(schema, &segments);
            out.push((
                segments,
                "field.enum",
                format!("{} is not one of {}", error.instance(), values.join(", ")),
                false,
            ));
        }
        K::Type { .. } => out.push((segments, "field.type", error.to_string(), false)),
        K::Enum { .. } => out.push((segments, "field.enum", error.to_string(), false)),
        K::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            out.push((
                segments,
                "field.missing",
                format!("missing field `{name}`"),
                false,
            ));
        }
        _ => out.push((segments, "field.invalid", error.to_string(), false)),
    }
}

/// The values of a `oneOf` of `const`s at `segments`, if that is what the schema has there.
fn allowed_values(schema: &Value, segments: &[String]) -> Vec<String> {
    let Some(at) = node_at(schema, segments) else {
        return Vec::new();
    };
    at.get("oneOf")
        .and_then(Value::as_array)
        .map(|branches| {
            branches
                .iter()
                .filter_map(|b| b.get("const"))
                .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The schema node for the instance at `segments` (through `$ref`, `anyOf` and `items`).
fn node_at<'a>(schema: &'a Value, segments: &[String]) -> Option<&'a Value> {
    let mut at = resolve(schema, schema);
    for seg in segments {
        let next = if seg.parse::<usize>().is_ok() {
            at.get("items")
        } else {
            at.get("properties").and_then(|p| p.get(seg))
        };
        at = resolve(schema, next?);
    }
    Some(at)
}

/// The property names the schema allows at `segments`.
fn known_keys(schema: &Value, segments: &[String]) -> Vec<String> {
    let Some(at) = node_at(schema, segments) else {
        return Vec::new();
    };
    at.get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.keys()
                .filter(|k| k.as_str() != "$schema")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `node` with `$ref` followed and an `anyOf`'s first non-null branch taken.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let mut node = node;
    for _ in 0..8 {
        if let Some(r) = node.get("$ref").and_then(Value::as_str)
            && let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p))
        {
            node = target;
        } else if let Some(first) = node.get("anyOf").and_then(Value::as_array).and_then(|b| {
            b.iter()
                .find(|s| s.get("type") != Some(&Value::from("null")))
        }) {
            node = first;
        } else {
            break;
        }
    }
    node
}

/// The known name closest to `key`, if it is close enough to be a typo.
fn closest<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    let key_lower = key.to_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&key_lower, &k.to_lowercase()), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// `parameters[1].default` from `["parameters", "1", "default"]`.
fn dotted(segments: &[String]) -> String {
    let mut path = String::new();
    for seg in segments {
        if seg.parse::<usize>().is_ok() {
            path.push_str(&format!("[{seg}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(seg);
        }
    }
    path
}

/// The byte offset of the value (or, with `at_key`, the key) at `segments` in TOML, from the
/// parser's spans (JSON and YAML go through [`crate::locate`], which finds the key).
fn locate_toml(text: &str, segments: &[String], at_key: bool) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    let mut offset = 0;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let value = if let Some(items) = array.take() {
            let item = items.get(seg.parse::<usize>().ok()?)?;
            offset = item.span().start;
            item
        } else {
            let (key, value) = table.iter().find(|(k, _)| k.get_ref().as_ref() == seg)?;
            offset = if last && at_key {
                key.span().start
            } else {
                value.span().start
            };
            value
        };
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            DeValue::Array(a) => array = Some(a),
            _ if last => {}
            _ => return Some(offset),
        }
    }
    Some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_field() {
        let known: Vec<String> = ["required", "name", "description"]
            .map(String::from)
            .to_vec();
        assert_eq!(closest("requird", &known), Some("required"));
        assert_eq!(closest("descripton", &known), Some("description"));
        assert_eq!(closest("zzz", &known), None);
        assert_eq!(
            dotted(&["parameters".into(), "1".into(), "default".into()]),
            "parameters[1].default"
        );
    }
}

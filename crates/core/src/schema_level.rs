//! How much of JSON Schema a plan lets custom definitions use (`docs/tool-model.md#plans`):
//! `basic`, `advanced` (all of draft 2020-12) or `full` (plus custom formats, custom keywords and
//! `errorMessage`), and the walk that finds the keywords of a schema beyond a level.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::definition::Isolation;

/// A level of JSON Schema, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaLevel {
    /// Types, `properties`, `required`, `enum`/`const`, defaults, annotations, simple bounds
    /// (`minimum`, `maximum`, their exclusive forms, `minLength`, `maxLength`, `minItems`,
    /// `maxItems`), `items` and a boolean `additionalProperties`.
    Basic,
    /// Every keyword of draft 2020-12 (`pattern`, `oneOf`/`anyOf`/`allOf`/`not`, `$ref`/`$defs`,
    /// `if`/`then`/`else`, standard `format`s, `additionalProperties` as a schema, …).
    Advanced,
    /// Advanced plus custom formats, keywords outside draft 2020-12 and `errorMessage`.
    Full,
}

impl SchemaLevel {
    /// Every level, weakest first.
    pub const ALL: [SchemaLevel; 3] = [Self::Basic, Self::Advanced, Self::Full];

    /// `basic`, `advanced` or `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Advanced => "advanced",
            Self::Full => "full",
        }
    }

    /// The weakest of the plans (`docs/tool-model.md#plans`: core and writer_pro basic, teams
    /// advanced, enterprise full + custom) that allows this level. The store's plan table is tested
    /// against this.
    pub fn lowest_plan(self) -> &'static str {
        match self {
            Self::Basic => "core",
            Self::Advanced => "teams",
            Self::Full => "enterprise",
        }
    }
}

impl fmt::Display for SchemaLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the plan in force allows a definition: the strongest isolation it may ask for and the
/// JSON Schema level of its schemas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierCaps {
    /// The strongest isolation level a definition may need.
    pub max_isolation: Isolation,
    /// How much of JSON Schema custom definitions may use.
    pub schema_level: SchemaLevel,
}

impl TierCaps {
    /// No limit: every isolation level, full JSON Schema.
    pub const UNLIMITED: TierCaps = TierCaps {
        max_isolation: Isolation::Restricted,
        schema_level: SchemaLevel::Full,
    };

    /// The stricter of the two on each axis.
    pub fn min(self, other: TierCaps) -> TierCaps {
        TierCaps {
            max_isolation: self.max_isolation.min(other.max_isolation),
            schema_level: self.schema_level.min(other.schema_level),
        }
    }
}

impl Default for TierCaps {
    fn default() -> Self {
        Self::UNLIMITED
    }
}

/// Keywords of the basic level (besides `additionalProperties`, basic only as a boolean).
const BASIC: &[&str] = &[
    "type",
    "properties",
    "required",
    "enum",
    "const",
    "default",
    "description",
    "title",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$schema",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "items",
];

/// The other keywords of draft 2020-12 (every vocabulary, plus `definitions` and
/// `dependencies`, which validators still honour).
const ADVANCED: &[&str] = &[
    "$id",
    "$ref",
    "$defs",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "definitions",
    "dependencies",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "multipleOf",
    "pattern",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// The formats draft 2020-12 defines; any other is a custom format.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose value is a map of subschemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is one subschema.
const SCHEMA_ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// One keyword beyond the allowed level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BeyondLevel {
    /// The keyword as written (a custom format with its value: `format: "ticket-id"`).
    pub keyword: String,
    /// Why it needs the level, when the keyword alone does not say (`" (a custom format)"`).
    pub note: &'static str,
    /// `path` of the schema plus `.keyword`.
    pub path: String,
    /// The weakest level that allows it.
    pub needs: SchemaLevel,
}

/// The level a keyword (with its value) needs, how to show it and why.
fn level_of(keyword: &str, value: &Value) -> (SchemaLevel, String, &'static str) {
    let plain = |level| (level, keyword.to_owned(), "");
    match keyword {
        "additionalProperties" if value.is_boolean() => plain(SchemaLevel::Basic),
        "format" => match value.as_str() {
            Some(f) if !STANDARD_FORMATS.contains(&f) => (
                SchemaLevel::Full,
                format!("format: {f:?}"),
                " (a custom format)",
            ),
            _ => plain(SchemaLevel::Advanced),
        },
        "additionalProperties" => (
            SchemaLevel::Advanced,
            keyword.to_owned(),
            " (as a schema; `true` or `false` is basic)",
        ),
        k if BASIC.contains(&k) => plain(SchemaLevel::Basic),
        k if ADVANCED.contains(&k) => plain(SchemaLevel::Advanced),
        "errorMessage" => plain(SchemaLevel::Full),
        _ => (
            SchemaLevel::Full,
            keyword.to_owned(),
            " (a keyword outside draft 2020-12)",
        ),
    }
}

/// Every keyword of `schema` (at `path`, in the `a.b[0]` form) that `allowed` does not cover,
/// in document order. Values of `enum`, `const`, `default`, `examples` and `errorMessage` are
/// data, not schemas, and are not walked.
pub(crate) fn beyond(schema: &Value, path: &str, allowed: SchemaLevel) -> Vec<BeyondLevel> {
    let mut out = Vec::new();
    if allowed < SchemaLevel::Full {
        walk(schema, path, allowed, &mut out);
    }
    out
}

fn walk(schema: &Value, path: &str, allowed: SchemaLevel, out: &mut Vec<BeyondLevel>) {
    let Some(node) = schema.as_object() else {
        return;
    };
    for (keyword, value) in node {
        let at = format!("{path}.{keyword}");
        let (needs, shown, note) = level_of(keyword, value);
        if needs > allowed {
            out.push(BeyondLevel {
                keyword: shown,
                note,
                path: at.clone(),
                needs,
            });
        }
        let k = keyword.as_str();
        if SCHEMA_MAPS.contains(&k) {
            if let Some(map) = value.as_object() {
                for (name, sub) in map {
                    walk(sub, &format!("{at}.{name}"), allowed, out);
                }
            }
        } else if SCHEMA_ONE.contains(&k) {
            walk(value, &at, allowed, out);
        } else if SCHEMA_LISTS.contains(&k)
            && let Some(list) = value.as_array()
        {
            for (i, sub) in list.iter().enumerate() {
                walk(sub, &format!("{at}[{i}]"), allowed, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn found(schema: Value, allowed: SchemaLevel) -> Vec<(String, SchemaLevel)> {
        beyond(&schema, "s", allowed)
            .into_iter()
            .map(|b| (b.path, b.needs))
            .collect()
    }

    #[test]
    fn levels_by_keyword() {
        let basic = json!({
            "type": "object",
            "title": "T",
            "properties": {
                "n": {"type": "integer", "minimum": 0, "maximum": 9, "default": 1},
                "s": {"type": "string", "minLength": 1, "maxLength": 5, "enum": ["a"]},
                "l": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}
            },
            "required": ["n"],
            "additionalProperties": false
        });
        assert!(found(basic.clone(), SchemaLevel::Basic).is_empty());
        let advanced = json!({
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^a", "format": "email"}},
            "additionalProperties": {"type": "string"},
            "oneOf": [{"required": ["s"]}],
            "$defs": {"x": {"type": "string"}}
        });
        assert_eq!(
            found(advanced.clone(), SchemaLevel::Basic),
            vec![
                ("s.properties.s.pattern".to_owned(), SchemaLevel::Advanced),
                ("s.properties.s.format".to_owned(), SchemaLevel::Advanced),
                ("s.additionalProperties".to_owned(), SchemaLevel::Advanced),
                ("s.oneOf".to_owned(), SchemaLevel::Advanced),
                ("s.$defs".to_owned(), SchemaLevel::Advanced),
            ]
        );
        assert!(found(advanced, SchemaLevel::Advanced).is_empty());
        let full = json!({
            "type": "object",
            "properties": {"d": {"type": "string", "format": "x-ticket-id"}},
            "errorMessage": {"required": {"d": "give d"}},
            "x-vendor": true
        });
        assert_eq!(
            found(full.clone(), SchemaLevel::Advanced),
            vec![
                ("s.properties.d.format".to_owned(), SchemaLevel::Full),
                ("s.errorMessage".to_owned(), SchemaLevel::Full),
                ("s.x-vendor".to_owned(), SchemaLevel::Full),
            ]
        );
        assert!(found(full, SchemaLevel::Full).is_empty());
        // Data is not walked: an enum of objects with keyword-like keys is fine.
        assert!(
            found(
                json!({"enum": [{"pattern": 1}], "default": {"oneOf": 2}}),
                SchemaLevel::Basic
            )
            .is_empty()
        );
    }

    #[test]
    fn lowest_plans_rise_with_the_level() {
        assert_eq!(SchemaLevel::Basic.lowest_plan(), "core");
        assert_eq!(SchemaLevel::Advanced.lowest_plan(), "teams");
        assert_eq!(SchemaLevel::Full.lowest_plan(), "enterprise");
        let caps = TierCaps {
            max_isolation: Isolation::Strict,
            schema_level: SchemaLevel::Full,
        };
        assert_eq!(
            caps.min(TierCaps {
                max_isolation: Isolation::Restricted,
                schema_level: SchemaLevel::Basic
            }),
            TierCaps {
                max_isolation: Isolation::Strict,
                schema_level: SchemaLevel::Basic
            }
        );
    }
}

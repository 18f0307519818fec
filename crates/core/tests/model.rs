//! The definition model: lossless TOML/JSON/YAML round trips, defaults and `safety_level`
//! resolution, compiled parameter schemas, defaults and redaction, and the definition hash.
#![cfg(test)]

use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::schema::{
    apply_defaults, compile_parameters, parameter_schema, redact, strip_optional_nulls,
};
use toolgate_core::{
    Category, Consequence, Constraints, CoreError, CoreErrorKind, Effect, Format, Isolation,
    Limits, ParamType, Parameter, Resolved, RunSpec, SafetyLevel, SchemaLink, TaskSupport,
    ToolDefinition, validate, write_canonical,
};

const FORMATS: [Format; 3] = [Format::Toml, Format::Json, Format::Yaml];

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// A definition that sets every field (struct literals without `..`, so a new field fails to
/// compile here until the round-trip test covers it). Not valid: it has both `parameters` and
/// `input_schema`, which only matters to validation.
fn every_field() -> ToolDefinition {
    ToolDefinition {
        schema_link: SchemaLink,
        name: "get_weather".into(),
        title: Some("Get weather".into()),
        description: "Current weather for a city. Use when the user asks about conditions now, \"not\" forecasts.\nSecond line: ünïcödé ✓".into(),
        category: Some(Category::ExternalApi),
        effect: Some(Effect::SideEffect),
        consequence: Some(Consequence::Medium),
        requires_confirmation: Some(true),
        safety_level: Some(SafetyLevel::Cautious),
        tasks: Some(TaskSupport::Optional),
        parameters: vec![
            Parameter {
                name: "city".into(),
                description: "City name".into(),
                param_type: ParamType::String,
                required: true,
                default: None,
                enum_values: None,
                schema: Some(json!({"minLength": 1, "maxLength": 100})),
                sensitive: true,
            },
            Parameter {
                name: "units".into(),
                description: "Unit system".into(),
                param_type: ParamType::String,
                required: false,
                default: Some(json!("metric")),
                enum_values: Some(vec![json!("metric"), json!("imperial")]),
                schema: None,
                sensitive: false,
            },
            Parameter {
                name: "days".into(),
                description: String::new(),
                param_type: ParamType::Array,
                required: false,
                default: Some(json!([0, 1])),
                enum_values: None,
                schema: Some(json!({"items": {"type": "integer", "minimum": 0}, "maxItems": 7})),
                sensitive: false,
            },
            Parameter {
                name: "ratio".into(),
                description: "A ratio".into(),
                param_type: ParamType::Number,
                required: false,
                default: Some(json!(0.25)),
                enum_values: Some(vec![json!(0.25), json!(0.5), json!(1)]),
                schema: None,
                sensitive: false,
            },
            Parameter {
                name: "flags".into(),
                description: "Flags".into(),
                param_type: ParamType::Object,
                required: false,
                default: Some(json!({"verbose": false})),
                enum_values: None,
                schema: Some(json!({"properties": {"verbose": {"type": "boolean"}}})),
                sensitive: false,
            },
            Parameter::new("count", ParamType::Integer),
            Parameter::new("on", ParamType::Boolean),
        ],
        required: vec!["city".into(), "count".into()],
        input_schema: Some(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "nested": {"type": "array", "items": [{"const": "x"}]}},
            "required": ["city"]
        })),
        output_schema: Some(json!({
            "type": "object",
            "properties": {"temperature": {"type": "number"}, "summary": {"type": "string"}},
            "additionalProperties": false
        })),
        constraints: Some(Constraints {
            timeout_ms: Some(5000),
            max_output_bytes: Some(65_536),
            allow_side_effects: Some(false),
            isolation: Some(Isolation::Strict),
            retryable: Some(false),
            max_attempts: Some(5),
        }),
        required_permissions: vec!["tool.network.fetch".into(), "tool.weather.read".into()],
        tags: vec!["weather".into(), "geo".into()],
        version: Some("1.2.0-beta.1".into()),
        depends_on: vec!["geocode".into(), "get_time".into()],
        idempotent: Some(true),
        metadata: obj(json!({
            "owner": "weather-team",
            "cost": 3,
            "ratio": 1.5,
            "negative": -7,
            "enabled": true,
            "labels": ["a", "b"],
            "nested": {"deep": {"list": [1, {"x": "y"}]}}
        })),
        run: Some(RunSpec {
            kind: "http".into(),
            settings: obj(json!({
                "method": "GET",
                "url": "https://api.example.com/weather?city={city}&units={units}",
                "headers": {"Accept": "application/json"},
                "retry_on": [502, 503]
            })),
        }),
    }
}

/// A valid definition using every field but `input_schema` (it excludes `parameters`).
fn valid_every_field() -> ToolDefinition {
    let mut d = every_field();
    d.input_schema = None;
    d.safety_level = Some(SafetyLevel::Dangerous);
    d.consequence = Some(Consequence::High);
    d.constraints = Some(Constraints {
        isolation: Some(Isolation::None),
        retryable: Some(true),
        allow_side_effects: Some(true),
        ..d.constraints.clone().unwrap()
    });
    for p in &mut d.parameters {
        if p.description.is_empty() {
            p.description = "Described".into();
        }
    }
    d
}

#[test]
fn every_field_definition_is_valid_in_its_valid_form() {
    let spec = validate(&valid_every_field()).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
}

#[test]
fn round_trip_is_lossless_in_every_format() {
    let def = every_field();
    for format in FORMATS {
        let text = def.render(format).unwrap();
        let back = ToolDefinition::parse(&text, format)
            .unwrap_or_else(|e| panic!("{format:?}: {e}\n{text}"));
        assert_eq!(back, def, "{format:?}:\n{text}");
        // Rendering is stable.
        assert_eq!(back.render(format).unwrap(), text, "{format:?}");
    }
}

#[test]
fn round_trip_is_lossless_across_formats() {
    let def = every_field();
    for from in FORMATS {
        for to in FORMATS {
            let first = ToolDefinition::parse(&def.render(from).unwrap(), from).unwrap();
            let second = ToolDefinition::parse(&first.render(to).unwrap(), to).unwrap();
            assert_eq!(second, def, "{from:?} -> {to:?}");
        }
    }
}

#[test]
fn minimal_definition_round_trips_without_inventing_fields() {
    let def = ToolDefinition::new(
        "ping",
        "Checks that the service answers. Use before other calls.",
    );
    for format in FORMATS {
        let text = def.render(format).unwrap();
        assert_eq!(
            ToolDefinition::parse(&text, format).unwrap(),
            def,
            "{format:?}"
        );
        for absent in [
            "category",
            "effect",
            "constraints",
            "parameters",
            "metadata",
            "run",
        ] {
            assert!(!text.contains(absent), "{format:?} wrote {absent}:\n{text}");
        }
    }
    let json: Value = serde_json::from_str(&def.render(Format::Json).unwrap()).unwrap();
    assert_eq!(
        json,
        json!({"name": "ping", "description": "Checks that the service answers. Use before other calls."})
    );
}

#[test]
fn design_example_file_parses_and_validates() {
    let text = r#"
name = "get_weather"
description = "Current weather for a city. Use when the user asks about conditions now, not forecasts."
category = "external_api"
effect = "read"
consequence = "low"
tags = ["weather"]
required_permissions = ["tool.network.fetch"]

[[parameters]]
name = "city"
type = "string"
description = "City name"
required = true

[[parameters]]
name = "units"
type = "string"
description = "Unit system"
enum = ["metric", "imperial"]
default = "metric"

[constraints]
timeout_ms = 5000

[run]
kind = "http"
method = "GET"
url = "https://api.example.com/weather?city={city}&units={units}"
"#;
    let def = ToolDefinition::parse(text, Format::Toml).unwrap();
    let spec = validate(&def).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(spec.limits().timeout, Duration::from_secs(5));
    assert_eq!(spec.limits().isolation, Isolation::None);
    assert_eq!(def.run.as_ref().unwrap().settings["method"], "GET");
    assert_eq!(
        spec.required_permissions()[0].as_str(),
        "tool.network.fetch"
    );
}

#[test]
fn safety_level_expands_and_explicit_fields_win() {
    type Row = (
        Option<SafetyLevel>,
        Option<Consequence>,
        Option<bool>,
        Consequence,
        bool,
    );
    let rows: &[Row] = &[
        (None, None, None, Consequence::Low, false),
        (Some(SafetyLevel::Safe), None, None, Consequence::Low, false),
        (
            Some(SafetyLevel::Cautious),
            None,
            None,
            Consequence::Medium,
            false,
        ),
        (
            Some(SafetyLevel::Dangerous),
            None,
            None,
            Consequence::High,
            true,
        ),
        (
            Some(SafetyLevel::Dangerous),
            Some(Consequence::Low),
            None,
            Consequence::Low,
            true,
        ),
        (
            Some(SafetyLevel::Dangerous),
            None,
            Some(false),
            Consequence::High,
            false,
        ),
        (
            Some(SafetyLevel::Safe),
            Some(Consequence::High),
            Some(true),
            Consequence::High,
            true,
        ),
        (
            Some(SafetyLevel::Cautious),
            None,
            Some(true),
            Consequence::Medium,
            true,
        ),
        (
            None,
            Some(Consequence::Medium),
            Some(true),
            Consequence::Medium,
            true,
        ),
    ];
    for (level, consequence, confirm, want_consequence, want_confirm) in rows {
        let mut d = ToolDefinition::new("t", "d");
        d.safety_level = *level;
        d.consequence = *consequence;
        d.requires_confirmation = *confirm;
        let r = Resolved::of(&d);
        assert_eq!(
            r.consequence, *want_consequence,
            "{level:?} {consequence:?} {confirm:?}"
        );
        assert_eq!(
            r.requires_confirmation, *want_confirm,
            "{level:?} {consequence:?} {confirm:?}"
        );
        // safety_level never touches effect or category.
        assert_eq!(r.effect, Effect::Read);
        assert_eq!(r.category, Category::System);
    }
    assert_eq!(SafetyLevel::Safe.expand(), (Consequence::Low, false));
    assert_eq!(SafetyLevel::Cautious.expand(), (Consequence::Medium, false));
    assert_eq!(SafetyLevel::Dangerous.expand(), (Consequence::High, true));
}

#[test]
fn resolved_values_reach_the_spec() {
    let mut d = ToolDefinition::new(
        "drop_table",
        "Drops a database table. Use only when asked to.",
    );
    d.safety_level = Some(SafetyLevel::Dangerous);
    d.effect = Some(Effect::Delete);
    d.category = Some(Category::Database);
    let spec = validate(&d).unwrap();
    assert_eq!(spec.category(), Category::Database);
    assert_eq!(spec.effect(), Effect::Delete);
    assert_eq!(spec.consequence(), Consequence::High);
    assert!(spec.requires_confirmation());
    assert!(!spec.idempotent());
    assert_eq!(spec.resolved(), &Resolved::of(&d));
    assert_eq!(
        spec.task_support(),
        TaskSupport::Optional,
        "confirmation → optional"
    );
    // The definition is kept exactly as written.
    assert_eq!(spec.definition(), &d);
    assert_eq!(spec.definition().consequence, None);
}

#[test]
fn idempotent_defaults_to_effect_read_and_explicit_wins() {
    for effect in Effect::ALL {
        let mut d = ToolDefinition::new("t", "d");
        d.effect = Some(*effect);
        assert_eq!(
            Resolved::of(&d).idempotent,
            *effect == Effect::Read,
            "{effect}"
        );
        d.idempotent = Some(false);
        assert!(!Resolved::of(&d).idempotent, "{effect}");
        d.idempotent = Some(true);
        assert!(Resolved::of(&d).idempotent, "{effect}");
    }
    assert!(Resolved::of(&ToolDefinition::new("t", "d")).idempotent);
}

fn limits_of(d: &ToolDefinition) -> Limits {
    *validate(d).unwrap().limits()
}

#[test]
fn default_limits() {
    let d = ToolDefinition::new(
        "ping_host",
        "Pings a host on the network. Use to test reachability.",
    );
    assert_eq!(
        limits_of(&d),
        Limits {
            timeout: Duration::from_millis(15_000),
            max_output_bytes: 10 * 1024 * 1024,
            allow_side_effects: true,
            isolation: Isolation::None,
            retryable: true,
            max_attempts: 3,
        }
    );
    // Explicit values win field by field; the rest keep their defaults.
    let mut d2 = d.clone();
    d2.constraints = Some(Constraints {
        timeout_ms: Some(2000),
        max_attempts: Some(1),
        ..Constraints::default()
    });
    let l = limits_of(&d2);
    assert_eq!(l.timeout, Duration::from_secs(2));
    assert_eq!(l.max_attempts, 1);
    assert_eq!(l.max_output_bytes, 10 * 1024 * 1024);
    assert!(l.retryable);
}

#[test]
fn default_isolation_depends_on_the_run_kind() {
    let cases: &[(Option<&str>, Isolation)] = &[
        (None, Isolation::None),
        (Some("builtin"), Isolation::None),
        (Some("http"), Isolation::None),
        (Some("mcp"), Isolation::None),
        (Some("command"), Isolation::Standard),
        (Some("wasm"), Isolation::Standard),
    ];
    for (kind, want) in cases {
        let mut d = ToolDefinition::new(
            "run_tests",
            "Runs the project's test suite. Use after edits.",
        );
        d.run = kind.map(|k| RunSpec {
            kind: k.into(),
            settings: Map::new(),
        });
        assert_eq!(limits_of(&d).isolation, *want, "{kind:?}");
        // An explicit level always wins.
        d.constraints = Some(Constraints {
            isolation: Some(Isolation::Restricted),
            ..Constraints::default()
        });
        assert_eq!(limits_of(&d).isolation, Isolation::Restricted, "{kind:?}");
        d.constraints = Some(Constraints {
            isolation: Some(Isolation::None),
            ..Constraints::default()
        });
        assert_eq!(limits_of(&d).isolation, Isolation::None, "{kind:?}");
    }
}

fn snapshot_parameters() -> Vec<Parameter> {
    vec![
        Parameter::new("path", ParamType::String)
            .description("File path, relative to the root")
            .required()
            .schema(json!({"minLength": 1, "pattern": "^[^/]"})),
        Parameter::new("encoding", ParamType::String)
            .description("Text encoding")
            .one_of(vec![json!("utf-8"), json!("latin-1")])
            .default_value(json!("utf-8")),
        Parameter::new("max_lines", ParamType::Integer)
            .description("Stop after this many lines")
            .default_value(json!(1000))
            .schema(json!({"minimum": 1})),
        Parameter::new("ratio", ParamType::Number),
        Parameter::new("follow_links", ParamType::Boolean).description("Follow symlinks"),
        Parameter::new("columns", ParamType::Array)
            .description("Columns to keep")
            .schema(json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true})),
        Parameter::new("filter", ParamType::Object)
            .description("Row filter")
            .schema(json!({
                "properties": {"field": {"type": "string"}, "equals": {}},
                "required": ["field"],
                "additionalProperties": false
            })),
        Parameter::new("token", ParamType::String)
            .description("API token")
            .sensitive(),
    ]
}

#[test]
fn compile_parameters_snapshot() {
    let schema = compile_parameters(&snapshot_parameters(), &["token".to_owned()]);
    insta::assert_json_snapshot!("compiled_parameters", schema);
}

#[test]
fn compiled_schema_shape() {
    let params = snapshot_parameters();
    let schema = compile_parameters(&params, &["token".to_owned(), "undeclared".to_owned()]);
    // Property order follows the parameters; `required` merges both sources, declared names only.
    let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    let names: Vec<&String> = params.iter().map(|p| &p.name).collect();
    assert_eq!(keys, names);
    assert_eq!(schema["required"], json!(["path", "token"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(schema["type"], json!("object"));
    // The parameter's own type wins over its schema's, and nothing toolgate-specific leaks.
    let filter = parameter_schema(&params[6]);
    assert_eq!(filter["type"], "object");
    assert!(schema.to_string().find("sensitive").is_none());
    // No parameters: an empty object schema, no `required`.
    assert_eq!(
        compile_parameters(&[], &[]),
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
    // The spec's input schema is the compiled one, or the raw one as given.
    let mut d = ToolDefinition::new("read_rows", "Reads rows from a file. Use to inspect data.");
    d.parameters = params.clone();
    d.required = vec!["token".into()];
    let spec = validate(&d).unwrap();
    assert_eq!(
        spec.input_schema(),
        &compile_parameters(&params, &d.required)
    );
    let raw = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    let mut d = ToolDefinition::new(
        "search_docs",
        "Searches the docs. Use for product questions.",
    );
    d.input_schema = Some(raw.clone());
    assert_eq!(validate(&d).unwrap().input_schema(), &raw);
}

#[test]
fn apply_defaults_fills_absent_top_level_properties_only() {
    let schema = json!({
        "type": "object",
        "properties": {
            "units": {"type": "string", "default": "metric"},
            "days": {"type": "array", "default": [0]},
            "city": {"type": "string"},
            "opts": {"type": "object", "default": {"a": 1}, "properties": {"b": {"default": 2}}}
        }
    });
    let cases: &[(Value, Value)] = &[
        (
            json!({}),
            json!({"units": "metric", "days": [0], "opts": {"a": 1}}),
        ),
        (
            json!({"city": "Oslo"}),
            json!({"city": "Oslo", "units": "metric", "days": [0], "opts": {"a": 1}}),
        ),
        (
            json!({"units": "imperial", "days": [], "opts": {}}),
            json!({"units": "imperial", "days": [], "opts": {}}),
        ),
        // An explicit null is a value: it is kept (and validation judges it).
        (
            json!({"units": null}),
            json!({"units": null, "days": [0], "opts": {"a": 1}}),
        ),
        // Not an object: untouched.
        (json!([1, 2]), json!([1, 2])),
        (json!("x"), json!("x")),
        (Value::Null, Value::Null),
    ];
    for (input, want) in cases {
        let mut args = input.clone();
        apply_defaults(&schema, &mut args);
        assert_eq!(&args, want, "{input}");
    }
    let mut args = json!({"a": 1});
    apply_defaults(&json!({"type": "object"}), &mut args);
    assert_eq!(args, json!({"a": 1}));
}

#[test]
fn strip_optional_nulls_treats_null_as_absent_for_optional_non_nullable_properties() {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "units": {"type": "string", "default": "metric"},
            "note": {"type": ["string", "null"]},
            "any": {},
            "days": {"type": "array"}
        },
        "required": ["city"]
    });
    let cases: &[(Value, Value)] = &[
        (
            json!({"city": "Oslo", "units": null, "days": null}),
            json!({"city": "Oslo"}),
        ),
        // Required, nullable or untyped properties keep their null; unknown ones too.
        (
            json!({"city": null, "note": null, "any": null, "extra": null}),
            json!({"city": null, "note": null, "any": null, "extra": null}),
        ),
        (json!({"units": "si"}), json!({"units": "si"})),
        (json!([null]), json!([null])),
    ];
    for (input, want) in cases {
        let mut args = input.clone();
        strip_optional_nulls(&schema, &mut args);
        assert_eq!(&args, want, "{input}");
    }
    // Nested objects, arrays and local $refs are walked; anyOf without a null branch refuses null.
    let nested = json!({
        "type": "object",
        "properties": {
            "root": {"$ref": "#/$defs/node"},
            "pick": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        },
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                },
                "required": ["label"]
            }
        }
    });
    let nested_cases: &[(Value, Value)] = &[
        (
            json!({"root": null, "pick": null, "maybe": null}),
            json!({"maybe": null}),
        ),
        (
            json!({"root": {"label": "a", "kids": null}}),
            json!({"root": {"label": "a"}}),
        ),
        (
            json!({"root": {"label": "a", "kids": [{"label": "b", "kids": null}, {"label": null}]}}),
            json!({"root": {"label": "a", "kids": [{"label": "b"}, {"label": null}]}}),
        ),
    ];
    for (input, want) in nested_cases {
        let mut args = input.clone();
        strip_optional_nulls(&nested, &mut args);
        assert_eq!(&args, want, "{input}");
    }
    // With defaults applied afterwards, a dropped null takes the default.
    let mut args = json!({"city": "Oslo", "units": null});
    strip_optional_nulls(&schema, &mut args);
    apply_defaults(&schema, &mut args);
    assert_eq!(args, json!({"city": "Oslo", "units": "metric"}));
}

#[test]
fn redact_replaces_sensitive_top_level_values() {
    let sensitive = vec!["token".to_owned(), "password".to_owned()];
    let cases: &[(Value, Value)] = &[
        (
            json!({"token": "s3cret", "user": "ann", "password": {"x": 1}}),
            json!({"token": "[REDACTED]", "user": "ann", "password": "[REDACTED]"}),
        ),
        (json!({"user": "ann"}), json!({"user": "ann"})),
        (
            json!({"nested": {"token": "x"}}),
            json!({"nested": {"token": "x"}}),
        ),
        (json!(["token"]), json!(["token"])),
        (json!("token"), json!("token")),
    ];
    for (input, want) in cases {
        assert_eq!(&redact(input, &sensitive), want, "{input}");
    }
    assert_eq!(redact(&json!({"token": "x"}), &[]), json!({"token": "x"}));
}

#[test]
fn spec_redacts_sensitive_parameters_and_marked_raw_properties() {
    let mut d = ToolDefinition::new(
        "call_api",
        "Calls the partner API. Use for partner data lookups.",
    );
    d.parameters = vec![
        Parameter::new("endpoint", ParamType::String).description("Endpoint"),
        Parameter::new("api_key", ParamType::String)
            .description("Key")
            .sensitive(),
    ];
    let spec = validate(&d).unwrap();
    assert_eq!(spec.sensitive_arguments(), ["api_key".to_owned()]);
    assert_eq!(
        spec.redact(&json!({"endpoint": "/x", "api_key": "k"})),
        json!({"endpoint": "/x", "api_key": "[REDACTED]"})
    );

    let mut raw = ToolDefinition::new(
        "call_api",
        "Calls the partner API. Use for partner data lookups.",
    );
    raw.input_schema = Some(json!({
        "type": "object",
        "properties": {
            "endpoint": {"type": "string"},
            "password": {"type": "string", "writeOnly": true},
            "secret": {"type": "string", "x-sensitive": true},
            "public": {"type": "string", "x-sensitive": false}
        }
    }));
    let spec = validate(&raw).unwrap();
    let mut names = spec.sensitive_arguments().to_vec();
    names.sort();
    assert_eq!(names, ["password".to_owned(), "secret".to_owned()]);
    assert_eq!(
        spec.redact(&json!({"endpoint": "e", "password": "p", "secret": "s", "public": "u"})),
        json!({"endpoint": "e", "password": "[REDACTED]", "secret": "[REDACTED]", "public": "u"})
    );
}

fn hash_of(d: &ToolDefinition) -> String {
    validate(d)
        .unwrap_or_else(|r| panic!("{r}"))
        .definition_hash()
        .to_owned()
}

/// Reverses the key order of every object, recursively.
fn reverse_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reverse_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(reverse_keys).collect()),
        other => other.clone(),
    }
}

#[test]
fn definition_hash_is_sha256_of_canonical_json() {
    let d = valid_every_field();
    let hash = hash_of(&d);
    assert_eq!(hash.len(), 64);
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    let mut canonical = String::new();
    write_canonical(&serde_json::to_value(&d).unwrap(), &mut canonical);
    let expected: String = Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hash, expected);
}

#[test]
fn write_canonical_sorts_keys_without_whitespace() {
    let mut out = String::new();
    write_canonical(
        &json!({"b": [3, {"z": 1, "a": "x y"}], "a": null, "é": 1.5, "A": true}),
        &mut out,
    );
    assert_eq!(
        out,
        r#"{"A":true,"a":null,"b":[3,{"a":"x y","z":1}],"é":1.5}"#
    );
}

#[test]
fn definition_hash_is_stable_across_formats_and_key_order() {
    let d = valid_every_field();
    let reference = hash_of(&d);
    for format in FORMATS {
        let parsed = ToolDefinition::parse(&d.render(format).unwrap(), format).unwrap();
        assert_eq!(hash_of(&parsed), reference, "{format:?}");
    }
    let reordered = reverse_keys(&serde_json::to_value(&d).unwrap());
    let text = serde_json::to_string_pretty(&reordered).unwrap();
    assert!(text.find("\"run\"").unwrap() < text.find("\"name\"").unwrap());
    let parsed = ToolDefinition::parse(&text, Format::Json).unwrap();
    assert_eq!(hash_of(&parsed), reference);
    // camelCase aliases are the same definition.
    let camel = text
        .replace("\"required_permissions\"", "\"requiredPermissions\"")
        .replace("\"depends_on\"", "\"dependsOn\"")
        .replace("\"timeout_ms\"", "\"timeoutMs\"");
    assert_eq!(
        hash_of(&ToolDefinition::parse(&camel, Format::Json).unwrap()),
        reference
    );
}

#[test]
fn definition_hash_changes_with_any_field() {
    type Edit = fn(&mut ToolDefinition);
    let edits: &[(&str, Edit)] = &[
        ("name", |d| d.name = "get_weather_v2".into()),
        ("title", |d| d.title = Some("Weather".into())),
        ("title removed", |d| d.title = None),
        ("description", |d| d.description.push('!')),
        ("category", |d| d.category = Some(Category::Network)),
        ("category removed", |d| d.category = None),
        ("effect", |d| d.effect = Some(Effect::Write)),
        ("consequence", |d| d.consequence = Some(Consequence::Medium)),
        ("requires_confirmation", |d| {
            d.requires_confirmation = Some(false)
        }),
        ("safety_level", |d| d.safety_level = None),
        ("parameter description", |d| {
            d.parameters[0].description = "Town".into()
        }),
        ("parameter type", |d| {
            d.parameters[6].param_type = ParamType::String;
        }),
        ("parameter required", |d| d.parameters[0].required = false),
        ("parameter default", |d| {
            d.parameters[1].default = Some(json!("imperial"))
        }),
        ("parameter enum", |d| {
            d.parameters[1].enum_values =
                Some(vec![json!("metric"), json!("imperial"), json!("si")]);
        }),
        ("parameter schema", |d| d.parameters[0].schema = None),
        ("parameter sensitive", |d| d.parameters[0].sensitive = false),
        ("parameter order", |d| d.parameters.swap(3, 4)),
        ("parameter removed", |d| {
            d.parameters.pop();
        }),
        ("required list", |d| {
            d.required.pop();
        }),
        ("input_schema instead of parameters", |d| {
            d.parameters.clear();
            d.required.clear();
            d.input_schema = Some(json!({"type": "object"}));
        }),
        ("output_schema", |d| {
            d.output_schema = Some(json!({"type": "object"}))
        }),
        ("constraints removed", |d| d.constraints = None),
        ("timeout", |d| {
            d.constraints.as_mut().unwrap().timeout_ms = Some(5001)
        }),
        ("output cap", |d| {
            d.constraints.as_mut().unwrap().max_output_bytes = None
        }),
        ("allow_side_effects", |d| {
            d.constraints.as_mut().unwrap().allow_side_effects = Some(false)
        }),
        ("isolation", |d| {
            d.constraints.as_mut().unwrap().isolation = Some(Isolation::Standard)
        }),
        ("retryable", |d| {
            d.constraints.as_mut().unwrap().retryable = Some(false)
        }),
        ("max_attempts", |d| {
            d.constraints.as_mut().unwrap().max_attempts = Some(3)
        }),
        ("permission", |d| {
            d.required_permissions.push("tool.extra".into())
        }),
        ("tag order", |d| d.tags.reverse()),
        ("version", |d| d.version = Some("1.2.0".into())),
        ("depends_on", |d| {
            d.depends_on.pop();
        }),
        ("idempotent", |d| d.idempotent = Some(false)),
        ("metadata value", |d| {
            d.metadata.insert("cost".into(), json!(4));
        }),
        ("metadata nested", |d| {
            d.metadata["nested"]["deep"]["list"][1]["x"] = json!("z");
        }),
        ("metadata number type", |d| {
            d.metadata.insert("cost".into(), json!(3.0));
        }),
        ("run kind", |d| d.run.as_mut().unwrap().kind = "mcp".into()),
        ("run setting", |d| {
            d.run
                .as_mut()
                .unwrap()
                .settings
                .insert("method".into(), json!("POST"));
        }),
        ("run removed", |d| d.run = None),
    ];
    let base = valid_every_field();
    let reference = hash_of(&base);
    let mut seen = std::collections::HashMap::new();
    seen.insert(reference.clone(), "base");
    for (label, edit) in edits {
        let mut d = base.clone();
        edit(&mut d);
        assert_ne!(d, base, "{label}: the edit changed nothing");
        let hash = hash_of(&d);
        if let Some(other) = seen.insert(hash, label) {
            panic!("{label} gives the same hash as {other}");
        }
    }
}

#[test]
fn unknown_fields_are_rejected_with_a_message_naming_them() {
    let cases: &[(Format, &str, &str)] = &[
        (
            Format::Toml,
            "name = \"x\"\ndescription = \"y\"\nbogus_field = 1\n",
            "bogus_field",
        ),
        (
            Format::Json,
            r#"{"name": "x", "description": "y", "bogus_field": 1}"#,
            "bogus_field",
        ),
        (
            Format::Yaml,
            "name: x\ndescription: y\nbogus_field: 1\n",
            "bogus_field",
        ),
        (
            Format::Toml,
            "name = \"x\"\ndescription = \"y\"\n[[parameters]]\nname = \"a\"\ntype = \"string\"\nrequird = true\n",
            "requird",
        ),
        (
            Format::Json,
            r#"{"name": "x", "description": "y", "constraints": {"timeout": 5}}"#,
            "timeout",
        ),
        (
            Format::Yaml,
            "name: x\ndescription: y\nconstraints:\n  max_output: 5\n",
            "max_output",
        ),
        (
            Format::Json,
            r#"{"name": "x", "description": "y", "timeout": 5000}"#,
            "timeout",
        ),
    ];
    for (format, text, field) in cases {
        let err = ToolDefinition::parse(text, *format).unwrap_err();
        assert_eq!(err.kind(), CoreErrorKind::Parse);
        let message = err.to_string();
        assert!(
            message.contains(&format!("unknown field `{field}`")),
            "{format:?}: {message}"
        );
        assert!(message.contains(format.as_str()), "{format:?}: {message}");
    }
}

#[test]
fn bad_values_are_parse_errors() {
    let cases: &[(Format, &str, &str)] = &[
        (
            Format::Json,
            r#"{"name": "x", "description": "y", "effect": "destroy"}"#,
            "unknown variant `destroy`",
        ),
        (
            Format::Toml,
            "name = \"x\"\ndescription = \"y\"\ncategory = \"misc\"\n",
            "unknown variant `misc`",
        ),
        (
            Format::Yaml,
            "name: x\ndescription: y\nparameters:\n  - name: a\n    type: str\n",
            "unknown variant `str`",
        ),
        (
            Format::Json,
            r#"{"description": "y"}"#,
            "missing field `name`",
        ),
        (Format::Json, "{not json", "json"),
    ];
    for (format, text, needle) in cases {
        let err = ToolDefinition::parse(text, *format).unwrap_err();
        assert!(matches!(err, CoreError::Parse { .. }), "{err:?}");
        assert!(err.to_string().contains(needle), "{format:?}: {err}");
    }
}

#[test]
fn camel_case_aliases_are_accepted() {
    let camel = r#"{
        "name": "delete_file",
        "description": "Deletes a file under the root. Use only when asked to remove it.",
        "effect": "delete",
        "consequenceLevel": "high",
        "requiresConfirmation": true,
        "safetyLevel": "dangerous",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "requiredPermissions": ["tool.filesystem.delete"],
        "dependsOn": ["read_file"],
        "constraints": {"timeoutMs": 2000, "maxOutputBytes": 2048, "allowSideEffects": true, "maxAttempts": 1}
    }"#;
    let snake = r#"{
        "name": "delete_file",
        "description": "Deletes a file under the root. Use only when asked to remove it.",
        "effect": "delete",
        "consequence": "high",
        "requires_confirmation": true,
        "safety_level": "dangerous",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "output_schema": {"type": "object"},
        "required_permissions": ["tool.filesystem.delete"],
        "depends_on": ["read_file"],
        "constraints": {"timeout_ms": 2000, "max_output_bytes": 2048, "allow_side_effects": true, "max_attempts": 1}
    }"#;
    let a = ToolDefinition::parse(camel, Format::Json).unwrap();
    let b = ToolDefinition::parse(snake, Format::Json).unwrap();
    assert_eq!(a, b);
    assert!(a.input_schema.is_some());
    assert_eq!(a.requires_confirmation, Some(true));
    assert_eq!(a.constraints.as_ref().unwrap().timeout_ms, Some(2000));
    // Files are written in snake_case.
    let rendered = a.render(Format::Json).unwrap();
    assert!(rendered.contains("\"input_schema\"") && !rendered.contains("inputSchema"));
    assert!(rendered.contains("\"requires_confirmation\""));
    // YAML takes the aliases too.
    let yaml =
        "name: t\ndescription: d\ninputSchema:\n  type: object\nrequiresConfirmation: true\n";
    let y = ToolDefinition::parse(yaml, Format::Yaml).unwrap();
    assert_eq!(y.input_schema, Some(json!({"type": "object"})));
    assert_eq!(y.requires_confirmation, Some(true));
}

#[test]
fn load_reads_files_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let def = valid_every_field();
    for (ext, format) in [
        ("toml", Format::Toml),
        ("json", Format::Json),
        ("yaml", Format::Yaml),
        ("yml", Format::Yaml),
        ("TOML", Format::Toml),
    ] {
        let path = dir.path().join(format!("tool.{ext}"));
        assert_eq!(Format::from_path(&path), Some(format));
        std::fs::write(&path, def.render(format).unwrap()).unwrap();
        assert_eq!(ToolDefinition::load(&path).unwrap(), def, "{ext}");
    }

    let txt = dir.path().join("tool.txt");
    std::fs::write(&txt, "name = \"x\"").unwrap();
    let err = ToolDefinition::load(&txt).unwrap_err();
    assert!(matches!(err, CoreError::UnknownFormat { .. }), "{err:?}");
    assert_eq!(
        Format::from_path(std::path::Path::new("no_extension")),
        None
    );

    let missing = dir.path().join("missing.toml");
    let err = ToolDefinition::load(&missing).unwrap_err();
    assert_eq!(err.kind(), CoreErrorKind::Io);
    assert!(err.to_string().contains("missing.toml"));

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"name": "x", "nope": 1}"#).unwrap();
    let err = ToolDefinition::load(&bad).unwrap_err();
    assert_eq!(err.kind(), CoreErrorKind::Parse);
    let message = toolgate_core::error_chain(&err);
    assert!(
        message.contains("bad.json") && message.contains("nope"),
        "{message}"
    );
}

#[test]
fn enum_wire_names_round_trip() {
    fn check<T>(all: &[T])
    where
        T: Copy
            + std::fmt::Debug
            + PartialEq
            + std::fmt::Display
            + std::str::FromStr<Err = String>
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        for v in all {
            let name = v.to_string();
            assert_eq!(name.parse::<T>().unwrap(), *v);
            assert_eq!(serde_json::to_value(v).unwrap(), json!(name));
            assert_eq!(serde_json::from_value::<T>(json!(name)).unwrap(), *v);
        }
        let err = "Nope".parse::<T>().unwrap_err();
        assert!(
            err.contains("Nope") && err.contains(&all[0].to_string()),
            "{err}"
        );
    }
    check(Category::ALL);
    check(Effect::ALL);
    check(Consequence::ALL);
    check(SafetyLevel::ALL);
    check(Isolation::ALL);
    assert_eq!(Category::ALL.len(), 8);
    assert_eq!(Category::CodeExecution.as_str(), "code_execution");
    assert_eq!(Effect::SideEffect.as_str(), "side_effect");
    // Isolation levels are ordered weakest first.
    assert!(Isolation::None < Isolation::Standard);
    assert!(Isolation::Standard < Isolation::Strict);
    assert!(Isolation::Strict < Isolation::Restricted);
    for t in ParamType::ALL {
        assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
    }
}

#[test]
fn param_type_matches_json_values() {
    let values = [
        json!("s"),
        json!(1),
        json!(-1),
        json!(2.0),
        json!(2.5),
        json!(true),
        json!([1]),
        json!({"a": 1}),
        Value::Null,
    ];
    let table: &[(ParamType, [bool; 9])] = &[
        (
            ParamType::String,
            [true, false, false, false, false, false, false, false, false],
        ),
        (
            ParamType::Integer,
            [false, true, true, true, false, false, false, false, false],
        ),
        (
            ParamType::Number,
            [false, true, true, true, true, false, false, false, false],
        ),
        (
            ParamType::Boolean,
            [false, false, false, false, false, true, false, false, false],
        ),
        (
            ParamType::Array,
            [false, false, false, false, false, false, true, false, false],
        ),
        (
            ParamType::Object,
            [false, false, false, false, false, false, false, true, false],
        ),
    ];
    for (ty, expected) in table {
        for (v, want) in values.iter().zip(expected) {
            assert_eq!(ty.matches(v), *want, "{ty:?} {v}");
        }
    }
}

#[test]
fn write_json_string_escapes_exactly_like_serde_json() {
    let mut every_char: String = (0u32..0x800).filter_map(char::from_u32).collect();
    every_char.push_str("😀\u{2028}\u{fffd}");
    for s in [
        String::new(),
        "plain".to_owned(),
        every_char,
        "\"\\\u{0}\u{1f}\u{7f}".to_owned(),
        // Long strings are checked 16 bytes at a time: plain ones, and one escape at either
        // edge of a later chunk.
        "0123456789abcdef".repeat(5),
        format!("{}\"{}", "a".repeat(15), "b".repeat(20)),
        format!("{}\n{}", "a".repeat(16), "b".repeat(20)),
        format!("{}\\", "é".repeat(20)),
    ] {
        let mut out = String::new();
        toolgate_core::write_json_string(&s, &mut out);
        assert_eq!(out, serde_json::to_string(&s).unwrap());
    }
}

#[test]
fn task_support_defaults_follow_confirmation_and_a_declaration_wins() {
    let mut d = ToolDefinition::new("report", "Builds a report. Use when asked for one.");
    assert_eq!(validate(&d).unwrap().task_support(), TaskSupport::Forbidden);
    d.requires_confirmation = Some(true);
    assert_eq!(validate(&d).unwrap().task_support(), TaskSupport::Optional);
    d.tasks = Some(TaskSupport::Forbidden);
    assert_eq!(validate(&d).unwrap().task_support(), TaskSupport::Forbidden);
    d.requires_confirmation = None;
    d.tasks = Some(TaskSupport::Required);
    assert_eq!(validate(&d).unwrap().task_support(), TaskSupport::Required);
    // Written as in files, either spelling.
    let toml: ToolDefinition =
        toml::from_str("name = \"report\"\ndescription = \"d\"\ntasks = \"optional\"\n").unwrap();
    assert_eq!(toml.tasks, Some(TaskSupport::Optional));
    let json: ToolDefinition = serde_json::from_value(
        json!({"name": "report", "description": "d", "taskSupport": "required"}),
    )
    .unwrap();
    assert_eq!(json.tasks, Some(TaskSupport::Required));
    assert!(
        serde_json::from_value::<ToolDefinition>(
            json!({"name": "r", "description": "d", "tasks": "always"})
        )
        .is_err()
    );
}

//! Definition validation: every rule of `docs/tool-model.md#validation-codes` with the exact
//! `path` and `code` of each issue, and the definition schema's acceptance criteria and unit tests.
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{
    Category, Consequence, Constraints, CoreError, CoreErrorKind, Effect, Isolation, Issue, Lookup,
    ParamType, Parameter, RUN_KINDS, Registry, RunSpec, SafetyLevel, SchemaLevel, Tool,
    ToolBuilder, ToolDefinition, ValidationEnv, ValidationReport, validate, validate_in,
};

/// A valid definition with no warnings: every case below changes one thing about it.
fn base() -> ToolDefinition {
    let mut d = ToolDefinition::new(
        "get_weather",
        "Current weather for a city. Use when the user asks about conditions now.",
    );
    d.parameters = vec![
        Parameter::new("city", ParamType::String)
            .description("City name")
            .required(),
        Parameter::new("units", ParamType::String)
            .description("Unit system")
            .one_of(vec![json!("metric"), json!("imperial")])
            .default_value(json!("metric")),
    ];
    d
}

fn pairs(issues: &[Issue]) -> Vec<(String, String)> {
    issues
        .iter()
        .map(|i| (i.path.clone(), i.code.clone()))
        .collect()
}

fn expected(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
        .collect()
}

/// Validation outcome as (errors, warnings), whether or not it passed.
fn outcome(d: &ToolDefinition, env: &ValidationEnv<'_>) -> (Vec<Issue>, Vec<Issue>) {
    match validate_in(d, env) {
        Ok(spec) => (Vec::new(), spec.warnings().to_vec()),
        Err(report) => {
            assert!(!report.errors.is_empty(), "an Err report must hold errors");
            (report.errors, report.warnings)
        }
    }
}

struct Case {
    label: &'static str,
    edit: fn(&mut ToolDefinition),
    errors: &'static [(&'static str, &'static str)],
    warnings: &'static [(&'static str, &'static str)],
}

fn run_cases(cases: &[Case], env: &ValidationEnv<'_>) {
    let mut failures = Vec::new();
    for case in cases {
        let mut d = base();
        (case.edit)(&mut d);
        let (errors, warnings) = outcome(&d, env);
        let (errors, warnings) = (pairs(&errors), pairs(&warnings));
        if errors != expected(case.errors) || warnings != expected(case.warnings) {
            failures.push(format!(
                "{}:\n  errors   {errors:?}\n  expected {:?}\n  warnings {warnings:?}\n  expected {:?}",
                case.label, case.errors, case.warnings
            ));
        }
        // Every issue is actionable: a non-empty message.
        if let Err(report) = validate_in(&d, env) {
            for issue in report.errors.iter().chain(&report.warnings) {
                assert!(
                    !issue.message.trim().is_empty(),
                    "{}: empty message",
                    case.label
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn string_param(name: &str) -> Parameter {
    Parameter::new(name, ParamType::String).description("A string")
}

#[test]
fn base_definition_is_valid_without_warnings() {
    let spec = validate(&base()).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(spec.name().as_str(), "get_weather");
}

#[test]
fn name_rules() {
    run_cases(
        &[
            Case {
                label: "empty",
                edit: |d| d.name = String::new(),
                errors: &[("name", "name.empty")],
                warnings: &[],
            },
            Case {
                label: "uppercase",
                edit: |d| d.name = "ReadFile".into(),
                errors: &[("name", "name.format")],
                warnings: &[],
            },
            Case {
                label: "space",
                edit: |d| d.name = "read file".into(),
                errors: &[("name", "name.format")],
                warnings: &[],
            },
            Case {
                label: "hyphen",
                edit: |d| d.name = "read-file".into(),
                errors: &[("name", "name.format")],
                warnings: &[],
            },
            Case {
                label: "leading digit",
                edit: |d| d.name = "123_tool".into(),
                errors: &[("name", "name.format")],
                warnings: &[],
            },
            Case {
                label: "leading underscore",
                edit: |d| d.name = "_tool".into(),
                errors: &[("name", "name.format")],
                warnings: &[],
            },
            Case {
                label: "non-ascii",
                edit: |d| d.name = "café".into(),
                errors: &[("name", "name.format")],
                warnings: &[],
            },
            Case {
                label: "65 characters",
                edit: |d| d.name = "a".repeat(65),
                errors: &[("name", "name.too_long")],
                warnings: &[],
            },
            Case {
                label: "64 characters",
                edit: |d| d.name = "a".repeat(64),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "digits and underscores after the first letter",
                edit: |d| d.name = "get_v2_weather_".into(),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "reserved execute",
                edit: |d| d.name = "execute".into(),
                errors: &[("name", "name.reserved")],
                warnings: &[],
            },
            Case {
                label: "reserved run",
                edit: |d| d.name = "run".into(),
                errors: &[("name", "name.reserved")],
                warnings: &[],
            },
            Case {
                label: "reserved call",
                edit: |d| d.name = "call".into(),
                errors: &[("name", "name.reserved")],
                warnings: &[],
            },
            Case {
                label: "reserved invoke",
                edit: |d| d.name = "invoke".into(),
                errors: &[("name", "name.reserved")],
                warnings: &[],
            },
            Case {
                label: "reserved word as a prefix is fine",
                edit: |d| d.name = "run_tests".into(),
                errors: &[],
                warnings: &[],
            },
        ],
        &ValidationEnv::default(),
    );
}

#[test]
fn name_format_message_suggests_a_snake_case_name() {
    for (bad, suggestion) in [
        ("ReadFile", "read_file"),
        ("read file", "read_file"),
        ("read-file", "read_file"),
        ("123_tool", "tool_123_tool"),
    ] {
        let mut d = base();
        d.name = bad.into();
        let report = validate(&d).unwrap_err();
        let message = &report.errors[0].message;
        assert!(message.contains(&format!("{bad:?}")), "{message}");
        assert!(message.contains("snake_case"), "{message}");
        assert!(message.contains(&format!("{suggestion:?}")), "{message}");
    }
}

#[test]
fn built_in_names_cannot_be_taken() {
    let lookup = |n: &str| {
        if n == "read_file" {
            Lookup::Builtin
        } else {
            Lookup::Absent
        }
    };
    let env = ValidationEnv {
        lookup: Some(&lookup),
        ..ValidationEnv::default()
    };
    let mut d = base();
    d.name = "read_file".into();
    let report = validate_in(&d, &env).unwrap_err();
    assert_eq!(pairs(&report.errors), expected(&[("name", "name.builtin")]));
    assert!(report.errors[0].message.contains("built-in"));

    // A built-in may be validated under its own name.
    let builtin_env = ValidationEnv {
        builtin: true,
        ..env
    };
    assert!(validate_in(&d, &builtin_env).is_ok());
    // Other names are unaffected by the lookup.
    assert!(validate_in(&base(), &env).is_ok());
}

#[test]
fn description_and_title_rules() {
    run_cases(
        &[
            Case {
                label: "empty description",
                edit: |d| d.description = String::new(),
                errors: &[("description", "description.empty")],
                warnings: &[],
            },
            Case {
                label: "blank description",
                edit: |d| d.description = " \n\t ".into(),
                errors: &[("description", "description.empty")],
                warnings: &[],
            },
            Case {
                label: "1025 characters",
                edit: |d| d.description = "word ".repeat(205),
                errors: &[("description", "description.too_long")],
                warnings: &[],
            },
            Case {
                label: "1025 multibyte characters are counted as characters",
                edit: |d| d.description = "wörd ".repeat(205),
                errors: &[("description", "description.too_long")],
                warnings: &[],
            },
            Case {
                label: "1024 characters",
                edit: |d| d.description = format!("{}x", "word ".repeat(204) + "abc"),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "1024 multibyte characters (more than 1024 bytes)",
                edit: |d| d.description = format!("{}ö", "wörd ".repeat(204) + "abc"),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "short description is a warning only",
                edit: |d| d.description = "Reads a file".into(),
                errors: &[],
                warnings: &[("description", "description.short")],
            },
            Case {
                label: "vague description is a warning only",
                edit: |d| d.description = "Weather lookup service".into(),
                errors: &[],
                warnings: &[("description", "description.vague")],
            },
            Case {
                label: "empty title",
                edit: |d| d.title = Some(String::new()),
                errors: &[("title", "title.length")],
                warnings: &[],
            },
            Case {
                label: "129-character title",
                edit: |d| d.title = Some("t".repeat(129)),
                errors: &[("title", "title.length")],
                warnings: &[],
            },
            Case {
                label: "normal title",
                edit: |d| d.title = Some("Get weather".into()),
                errors: &[],
                warnings: &[],
            },
        ],
        &ValidationEnv::default(),
    );
    // The 1024-character cases above really are 1024 characters long.
    assert_eq!(
        format!("{}x", "word ".repeat(204) + "abc").chars().count(),
        1024
    );
    assert_eq!(
        format!("{}ö", "wörd ".repeat(204) + "abc").chars().count(),
        1024
    );
}

#[test]
fn parameter_rules() {
    run_cases(
        &[
            Case {
                label: "uppercase parameter name",
                edit: |d| d.parameters[0].name = "City".into(),
                errors: &[("parameters[0].name", "parameter.name_format")],
                warnings: &[],
            },
            Case {
                label: "parameter name with a space",
                edit: |d| d.parameters[1].name = "unit system".into(),
                errors: &[("parameters[1].name", "parameter.name_format")],
                warnings: &[],
            },
            Case {
                label: "empty parameter name",
                edit: |d| d.parameters[1].name = String::new(),
                errors: &[("parameters[1].name", "parameter.name_format")],
                warnings: &[],
            },
            Case {
                label: "65-character parameter name",
                edit: |d| d.parameters[1].name = "u".repeat(65),
                errors: &[("parameters[1].name", "parameter.name_format")],
                warnings: &[],
            },
            Case {
                label: "duplicate parameter name",
                edit: |d| d.parameters.push(string_param("city")),
                errors: &[("parameters[2].name", "parameter.duplicate_name")],
                warnings: &[],
            },
            Case {
                label: "parameter without description is a warning",
                edit: |d| d.parameters[0].description = String::new(),
                errors: &[],
                warnings: &[("parameters[0].description", "parameter.description_missing")],
            },
            Case {
                label: "required parameter with a default",
                edit: |d| d.parameters[0].default = Some(json!("Oslo")),
                errors: &[("parameters[0].default", "parameter.required_default")],
                warnings: &[],
            },
            Case {
                label: "required list names a parameter with a default",
                edit: |d| d.required = vec!["city".into(), "units".into()],
                errors: &[("required[1]", "parameter.required_default")],
                warnings: &[],
            },
            Case {
                label: "required list names an undeclared parameter",
                edit: |d| d.required = vec!["country".into()],
                errors: &[("required[0]", "required.undeclared")],
                warnings: &[],
            },
            Case {
                label: "required list names declared parameters",
                edit: |d| {
                    d.parameters[0].required = false;
                    d.required = vec!["city".into()];
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "integer enum with a string and a fraction",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("count", ParamType::Integer)
                            .description("How many")
                            .one_of(vec![json!(1), json!("a"), json!(2.5), json!(3.0)]),
                    );
                },
                errors: &[
                    ("parameters[2].enum[1]", "parameter.enum_type"),
                    ("parameters[2].enum[2]", "parameter.enum_type"),
                ],
                warnings: &[],
            },
            Case {
                label: "boolean enum with a string",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("flag", ParamType::Boolean)
                            .description("A flag")
                            .one_of(vec![json!(true), json!("false")]),
                    );
                },
                errors: &[("parameters[2].enum[1]", "parameter.enum_type")],
                warnings: &[],
            },
            Case {
                label: "number enum accepts integers",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ratio", ParamType::Number)
                            .description("A ratio")
                            .one_of(vec![json!(1), json!(0.5)]),
                    );
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "empty enum",
                edit: |d| d.parameters.push(string_param("mode").one_of(vec![])),
                errors: &[("parameters[2].enum", "parameter.enum_empty")],
                warnings: &[],
            },
            Case {
                label: "duplicate enum value is a warning",
                edit: |d| {
                    d.parameters
                        .push(string_param("mode").one_of(vec![json!("a"), json!("a")]))
                },
                errors: &[],
                warnings: &[("parameters[2].enum", "parameter.enum_duplicate")],
            },
            Case {
                label: "array without schema or enum",
                edit: |d| {
                    d.parameters
                        .push(Parameter::new("ids", ParamType::Array).description("Ids"))
                },
                errors: &[("parameters[2].schema", "parameter.schema_missing")],
                warnings: &[],
            },
            Case {
                label: "object without schema or enum",
                edit: |d| {
                    d.parameters
                        .push(Parameter::new("opts", ParamType::Object).description("Options"))
                },
                errors: &[("parameters[2].schema", "parameter.schema_missing")],
                warnings: &[],
            },
            Case {
                label: "array with an enum needs no schema",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("pair", ParamType::Array)
                            .description("A pair")
                            .one_of(vec![json!([1, 2]), json!([3, 4])]),
                    )
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "array with a schema",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!({"items": {"type": "integer"}})),
                    )
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "schema type disagrees with parameter type",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!({"type": "object"})),
                    )
                },
                errors: &[("parameters[2].schema", "parameter.schema_type_mismatch")],
                warnings: &[],
            },
            Case {
                label: "schema type agrees with parameter type",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!({"type": "array", "items": {"type": "string"}})),
                    )
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "schema is not an object",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!(5)),
                    )
                },
                errors: &[("parameters[2].schema", "parameter.schema_invalid")],
                warnings: &[],
            },
            Case {
                label: "invalid JSON Schema (reported once)",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!({"type": "array", "items": {"type": 5}})),
                    )
                },
                errors: &[(
                    "parameters[2].schema.items.type",
                    "parameter.schema_invalid",
                )],
                warnings: &[],
            },
            Case {
                label: "default of the wrong type",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("count", ParamType::Integer)
                            .description("How many")
                            .default_value(json!("3")),
                    )
                },
                errors: &[("parameters[2].default", "parameter.default_type")],
                warnings: &[],
            },
            Case {
                label: "fractional default of an integer",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("count", ParamType::Integer)
                            .description("How many")
                            .default_value(json!(1.5)),
                    )
                },
                errors: &[("parameters[2].default", "parameter.default_type")],
                warnings: &[],
            },
            Case {
                label: "default outside the enum",
                edit: |d| d.parameters[1].default = Some(json!("kelvin")),
                errors: &[("parameters[1].default", "parameter.default_enum")],
                warnings: &[],
            },
            Case {
                label: "default against the schema",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!({"items": {"type": "integer"}}))
                            .default_value(json!(["a"])),
                    )
                },
                errors: &[("parameters[2].default", "parameter.default_schema")],
                warnings: &[],
            },
            Case {
                label: "string default against a pattern schema",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("code", ParamType::String)
                            .description("Code")
                            .schema(json!({"pattern": "^[A-Z]{2}$"}))
                            .default_value(json!("nope")),
                    )
                },
                errors: &[("parameters[2].default", "parameter.default_schema")],
                warnings: &[],
            },
            Case {
                label: "default matching the schema",
                edit: |d| {
                    d.parameters.push(
                        Parameter::new("ids", ParamType::Array)
                            .description("Ids")
                            .schema(json!({"items": {"type": "integer"}}))
                            .default_value(json!([1, 2])),
                    )
                },
                errors: &[],
                warnings: &[],
            },
        ],
        &ValidationEnv::default(),
    );
}

#[test]
fn schema_rules() {
    run_cases(
        &[
            Case {
                label: "parameters and input_schema both given",
                edit: |d| d.input_schema = Some(json!({"type": "object"})),
                errors: &[("input_schema", "input_schema.conflict")],
                warnings: &[],
            },
            Case {
                label: "input_schema of an array",
                edit: |d| {
                    d.parameters.clear();
                    d.input_schema = Some(json!({"type": "array"}));
                },
                errors: &[("input_schema", "input_schema.not_object")],
                warnings: &[],
            },
            Case {
                label: "input_schema that is not a JSON object",
                edit: |d| {
                    d.parameters.clear();
                    d.input_schema = Some(json!(5));
                },
                errors: &[("input_schema", "input_schema.not_object")],
                warnings: &[],
            },
            Case {
                label: "invalid input_schema",
                edit: |d| {
                    d.parameters.clear();
                    d.input_schema = Some(json!({
                        "type": "object",
                        "properties": {"a": {"minimum": "x"}}
                    }));
                },
                errors: &[("input_schema.properties.a.minimum", "input_schema.invalid")],
                warnings: &[],
            },
            Case {
                label: "valid input_schema",
                edit: |d| {
                    d.parameters.clear();
                    d.input_schema = Some(json!({
                        "type": "object",
                        "properties": {"a": {"type": "integer", "minimum": 0}},
                        "required": ["a"]
                    }));
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "invalid output_schema",
                edit: |d| {
                    d.output_schema = Some(json!({
                        "type": "object",
                        "properties": {"a": {"type": "nope"}}
                    }))
                },
                errors: &[("output_schema.properties.a.type", "output_schema.invalid")],
                warnings: &[],
            },
            Case {
                label: "invalid output_schema at the root",
                edit: |d| d.output_schema = Some(json!({"type": 7})),
                errors: &[("output_schema.type", "output_schema.invalid")],
                warnings: &[],
            },
            Case {
                label: "valid output_schema",
                edit: |d| {
                    d.output_schema = Some(json!({
                        "type": "object",
                        "properties": {"temperature": {"type": "number"}}
                    }))
                },
                errors: &[],
                warnings: &[],
            },
        ],
        &ValidationEnv::default(),
    );
}

#[test]
fn constraint_ranges() {
    type Set = fn(&mut Constraints, u64);
    type Row<'a> = (&'a str, Set, u64, Option<(&'a str, &'a str)>);
    let timeout: Set = |c, v| c.timeout_ms = Some(v);
    let output: Set = |c, v| c.max_output_bytes = Some(v);
    let attempts: Set = |c, v| c.max_attempts = Some(u32::try_from(v).unwrap());
    let cases: &[Row<'_>] = &[
        (
            "timeout 0",
            timeout,
            0,
            Some(("constraints.timeout_ms", "constraints.timeout_range")),
        ),
        (
            "timeout 999",
            timeout,
            999,
            Some(("constraints.timeout_ms", "constraints.timeout_range")),
        ),
        ("timeout 1000", timeout, 1000, None),
        ("timeout 600000", timeout, 600_000, None),
        (
            "timeout 600001",
            timeout,
            600_001,
            Some(("constraints.timeout_ms", "constraints.timeout_range")),
        ),
        (
            "output 1023",
            output,
            1023,
            Some(("constraints.max_output_bytes", "constraints.output_range")),
        ),
        ("output 1024", output, 1024, None),
        ("output 104857600", output, 104_857_600, None),
        (
            "output 104857601",
            output,
            104_857_601,
            Some(("constraints.max_output_bytes", "constraints.output_range")),
        ),
        (
            "attempts 0",
            attempts,
            0,
            Some(("constraints.max_attempts", "constraints.attempts_range")),
        ),
        ("attempts 1", attempts, 1, None),
        ("attempts 10", attempts, 10, None),
        (
            "attempts 11",
            attempts,
            11,
            Some(("constraints.max_attempts", "constraints.attempts_range")),
        ),
    ];
    for (label, set, value, want) in cases {
        let mut d = base();
        let mut c = Constraints::default();
        set(&mut c, *value);
        d.constraints = Some(c);
        let (errors, _) = outcome(&d, &ValidationEnv::default());
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(p, c)| ((*p).into(), (*c).into()))
            .collect();
        assert_eq!(pairs(&errors), want, "{label}");
    }
}

#[test]
fn isolation_must_be_allowed_by_the_plan() {
    for max in Isolation::ALL {
        let env = ValidationEnv {
            max_isolation: *max,
            ..ValidationEnv::default()
        };
        for level in Isolation::ALL {
            let mut d = base();
            d.constraints = Some(Constraints {
                isolation: Some(*level),
                ..Constraints::default()
            });
            let (errors, _) = outcome(&d, &env);
            if level > max {
                assert_eq!(
                    pairs(&errors),
                    expected(&[("constraints.isolation", "constraints.isolation_plan")]),
                    "{level} under a {max} plan"
                );
                assert!(errors[0].message.contains(level.as_str()));
            } else {
                assert!(errors.is_empty(), "{level} under a {max} plan: {errors:?}");
            }
        }
    }
    // The default plan allows everything.
    let mut d = base();
    d.constraints = Some(Constraints {
        isolation: Some(Isolation::Restricted),
        ..Constraints::default()
    });
    assert!(validate(&d).is_ok());
}

#[test]
fn the_plan_caps_the_default_isolation_of_a_run_kind_too() {
    // A command tool needs standard isolation by default, though it does not say so.
    let mut d = base();
    d.run = Some(toolgate_core::RunSpec {
        kind: "command".into(),
        settings: Default::default(),
    });
    let none_only = ValidationEnv {
        max_isolation: Isolation::None,
        ..ValidationEnv::default()
    };
    let (errors, _) = outcome(&d, &none_only);
    assert_eq!(
        pairs(&errors),
        expected(&[("constraints.isolation", "constraints.isolation_plan")])
    );
    assert!(
        errors[0].message.contains("default for run kind"),
        "{}",
        errors[0].message
    );
    assert!(outcome(&d, &ValidationEnv::default()).0.is_empty());
}

#[test]
fn sensitive_values_never_get_defaults() {
    let mut d = base();
    d.parameters.push(
        Parameter::new("api_key", ParamType::String)
            .description("Key")
            .sensitive()
            .default_value(json!("sk-live-SECRET")),
    );
    let (errors, _) = outcome(&d, &ValidationEnv::default());
    assert_eq!(
        pairs(&errors),
        expected(&[("parameters[2].default", "parameter.sensitive_default")])
    );
    assert!(errors.iter().all(|e| !e.message.contains("SECRET")));

    let mut raw = ToolDefinition::new("call_api", "Calls the API with a key. Use for API calls.");
    raw.input_schema = Some(json!({
        "type": "object",
        "properties": {"key": {"type": "string", "writeOnly": true, "default": "sk-live-SECRET"}}
    }));
    let (errors, _) = outcome(&raw, &ValidationEnv::default());
    assert_eq!(
        pairs(&errors),
        expected(&[(
            "input_schema.properties.key.default",
            "input_schema.sensitive_default"
        )])
    );
}

#[test]
fn raw_input_schema_defaults_must_match_their_property() {
    let mut d = ToolDefinition::new(
        "count_words",
        "Counts words in a text. Use for word counts.",
    );
    d.input_schema = Some(json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "n": {"type": "integer", "default": "x"},
            "mode": {"$ref": "#/$defs/mode", "default": "fast"},
            "ok": {"type": "integer", "minimum": 1, "default": 2}
        },
        "required": ["text"],
        "$defs": {"mode": {"enum": ["slow", "exact"]}}
    }));
    let (errors, _) = outcome(&d, &ValidationEnv::default());
    assert_eq!(
        pairs(&errors),
        expected(&[
            (
                "input_schema.properties.n.default",
                "input_schema.default_invalid"
            ),
            (
                "input_schema.properties.mode.default",
                "input_schema.default_invalid"
            ),
        ])
    );
}

#[test]
fn defaults_compare_numbers_by_value_and_null_defaults_are_kept() {
    let mut d = base();
    d.parameters.push(
        Parameter::new("ratio", ParamType::Number)
            .description("Ratio")
            .one_of(vec![json!(1.0), json!(2.5)])
            .default_value(json!(1)),
    );
    assert!(outcome(&d, &ValidationEnv::default()).0.is_empty());

    let file = r#"{"name": "t_null", "description": "Has a null default. Use in tests only.",
        "parameters": [{"name": "a", "type": "string", "description": "A", "default": null}]}"#;
    let def = ToolDefinition::parse(file, toolgate_core::Format::Json).unwrap();
    assert_eq!(def.parameters[0].default, Some(Value::Null));
    let (errors, _) = outcome(&def, &ValidationEnv::default());
    assert_eq!(
        pairs(&errors),
        expected(&[("parameters[0].default", "parameter.default_type")])
    );
}

#[test]
fn permission_rules() {
    let cases: &[(&str, Option<&str>)] = &[
        ("tool.filesystem.read", None),
        ("tool.net-work.fetch_2", None),
        ("admin", None),
        ("Tool.filesystem", Some("permission.format")),
        ("tool..read", Some("permission.format")),
        ("tool.read.", Some("permission.format")),
        ("", Some("permission.format")),
        ("tool fs", Some("permission.format")),
        ("tool.*.read", Some("permission.format")),
        ("tool.fs*", Some("permission.format")),
        ("tool.*", Some("permission.wildcard")),
        ("*", Some("permission.wildcard")),
    ];
    for (permission, code) in cases {
        let mut d = base();
        d.required_permissions = vec!["tool.ok".into(), (*permission).to_owned()];
        let (errors, _) = outcome(&d, &ValidationEnv::default());
        let want = code
            .map(|c| vec![("required_permissions[1]".to_owned(), c.to_owned())])
            .unwrap_or_default();
        assert_eq!(pairs(&errors), want, "{permission:?}");
    }
    let mut d = base();
    d.required_permissions = vec![format!("tool.{}", "a".repeat(124))];
    assert_eq!(d.required_permissions[0].len(), 129);
    let (errors, _) = outcome(&d, &ValidationEnv::default());
    assert_eq!(
        pairs(&errors),
        expected(&[("required_permissions[0]", "permission.format")])
    );
}

#[test]
fn tag_version_dependency_and_run_rules() {
    run_cases(
        &[
            Case {
                label: "empty tag",
                edit: |d| d.tags = vec!["weather".into(), String::new()],
                errors: &[("tags[1]", "tag.length")],
                warnings: &[],
            },
            Case {
                label: "blank tag",
                edit: |d| d.tags = vec!["  ".into()],
                errors: &[("tags[0]", "tag.length")],
                warnings: &[],
            },
            Case {
                label: "65-character tag",
                edit: |d| d.tags = vec!["t".repeat(65)],
                errors: &[("tags[0]", "tag.length")],
                warnings: &[],
            },
            Case {
                label: "64-character tag",
                edit: |d| d.tags = vec!["t".repeat(64)],
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "duplicate tag is a warning",
                edit: |d| d.tags = vec!["weather".into(), "geo".into(), "weather".into()],
                errors: &[],
                warnings: &[("tags[2]", "tag.duplicate")],
            },
            Case {
                label: "semver version",
                edit: |d| d.version = Some("1.2.0".into()),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "semver pre-release",
                edit: |d| d.version = Some("1.0.0-beta.1+build.5".into()),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "two-part version",
                edit: |d| d.version = Some("1.0".into()),
                errors: &[("version", "version.semver")],
                warnings: &[],
            },
            Case {
                label: "v-prefixed version",
                edit: |d| d.version = Some("v1.0.0".into()),
                errors: &[("version", "version.semver")],
                warnings: &[],
            },
            Case {
                label: "depends on itself",
                edit: |d| d.depends_on = vec!["get_weather".into()],
                errors: &[("depends_on[0]", "depends_on.self")],
                warnings: &[],
            },
            Case {
                label: "depends on a malformed name",
                edit: |d| d.depends_on = vec!["geocode".into(), "Bad-Name".into()],
                errors: &[("depends_on[1]", "depends_on.format")],
                warnings: &[],
            },
            Case {
                label: "depends on a reserved name",
                edit: |d| d.depends_on = vec!["run".into()],
                errors: &[("depends_on[0]", "depends_on.format")],
                warnings: &[],
            },
            Case {
                label: "depends on an unchecked name (no registry)",
                edit: |d| d.depends_on = vec!["geocode".into()],
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "unknown run kind",
                edit: |d| {
                    d.run = Some(RunSpec {
                        kind: "teleport".into(),
                        settings: Default::default(),
                    })
                },
                errors: &[("run.kind", "run.unknown_kind")],
                warnings: &[],
            },
        ],
        &ValidationEnv::default(),
    );
    for kind in RUN_KINDS {
        let mut d = base();
        d.run = Some(RunSpec {
            kind: (*kind).to_owned(),
            settings: Default::default(),
        });
        assert!(validate(&d).is_ok(), "run kind {kind}");
    }
}

#[test]
fn depends_on_resolves_through_the_env_lookup() {
    let lookup = |n: &str| match n {
        "geocode" => Lookup::Custom,
        "read_file" => Lookup::Builtin,
        _ => Lookup::Absent,
    };
    let env = ValidationEnv {
        lookup: Some(&lookup),
        ..ValidationEnv::default()
    };
    let mut d = base();
    d.depends_on = vec!["geocode".into(), "read_file".into(), "missing_tool".into()];
    let report = validate_in(&d, &env).unwrap_err();
    assert_eq!(
        pairs(&report.errors),
        expected(&[("depends_on[2]", "depends_on.unknown")])
    );
    assert!(report.errors[0].message.contains("missing_tool"));
}

#[test]
fn warnings_never_block() {
    run_cases(
        &[
            Case {
                label: "delete without confirmation",
                edit: |d| d.effect = Some(Effect::Delete),
                errors: &[],
                warnings: &[("requires_confirmation", "confirmation.missing")],
            },
            Case {
                label: "high consequence without confirmation",
                edit: |d| d.consequence = Some(Consequence::High),
                errors: &[],
                warnings: &[("requires_confirmation", "confirmation.missing")],
            },
            Case {
                label: "delete with confirmation",
                edit: |d| {
                    d.effect = Some(Effect::Delete);
                    d.requires_confirmation = Some(true);
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "write, medium, no confirmation: no warning",
                edit: |d| {
                    d.effect = Some(Effect::Write);
                    d.consequence = Some(Consequence::Medium);
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "dangerous safety level implies confirmation",
                edit: |d| d.safety_level = Some(SafetyLevel::Dangerous),
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "dangerous overridden by requires_confirmation = false",
                edit: |d| {
                    d.safety_level = Some(SafetyLevel::Dangerous);
                    d.requires_confirmation = Some(false);
                },
                errors: &[],
                warnings: &[
                    ("requires_confirmation", "confirmation.missing"),
                    ("safety_level", "safety_level.overridden"),
                ],
            },
            Case {
                label: "safe overridden by consequence = medium",
                edit: |d| {
                    d.safety_level = Some(SafetyLevel::Safe);
                    d.consequence = Some(Consequence::Medium);
                },
                errors: &[],
                warnings: &[("safety_level", "safety_level.overridden")],
            },
            Case {
                label: "explicit fields agreeing with the safety level",
                edit: |d| {
                    d.safety_level = Some(SafetyLevel::Cautious);
                    d.consequence = Some(Consequence::Medium);
                    d.requires_confirmation = Some(false);
                },
                errors: &[],
                warnings: &[],
            },
            Case {
                label: "idempotent delete",
                edit: |d| {
                    d.effect = Some(Effect::Delete);
                    d.requires_confirmation = Some(true);
                    d.idempotent = Some(true);
                },
                errors: &[],
                warnings: &[("idempotent", "idempotent.delete")],
            },
            Case {
                label: "no side effects allowed for a write tool",
                edit: |d| {
                    d.effect = Some(Effect::Write);
                    d.constraints = Some(Constraints {
                        allow_side_effects: Some(false),
                        ..Constraints::default()
                    });
                },
                errors: &[],
                warnings: &[(
                    "constraints.allow_side_effects",
                    "constraints.side_effects_conflict",
                )],
            },
        ],
        &ValidationEnv::default(),
    );
}

#[test]
fn warnings_are_also_reported_next_to_errors() {
    let mut d = base();
    d.name = "Bad".into();
    d.effect = Some(Effect::Delete);
    let report = validate(&d).unwrap_err();
    assert_eq!(pairs(&report.errors), expected(&[("name", "name.format")]));
    assert_eq!(
        pairs(&report.warnings),
        expected(&[("requires_confirmation", "confirmation.missing")])
    );
}

#[test]
fn a_definition_with_many_problems_reports_all_of_them_at_once() {
    let mut d = ToolDefinition::new("Bad Name", "");
    d.title = Some(String::new());
    d.parameters = vec![
        Parameter::new("Bad", ParamType::String).description("x"),
        Parameter::new("dup", ParamType::Integer)
            .description("x")
            .required()
            .default_value(json!("nine"))
            .one_of(vec![json!("a")]),
        Parameter::new("dup", ParamType::Array).description("x"),
        Parameter::new("obj", ParamType::Object)
            .description("x")
            .schema(json!({"type": "array"})),
    ];
    d.required = vec!["ghost".into()];
    d.input_schema = Some(json!({"type": "object"}));
    d.output_schema = Some(json!({"type": "nope"}));
    d.constraints = Some(Constraints {
        timeout_ms: Some(999),
        max_output_bytes: Some(104_857_601),
        allow_side_effects: None,
        isolation: Some(Isolation::Strict),
        retryable: None,
        max_attempts: Some(0),
    });
    d.required_permissions = vec!["BAD".into(), "tool.*".into()];
    d.tags = vec![String::new()];
    d.version = Some("one".into());
    d.depends_on = vec!["Bad Name".into(), "x-y".into(), "absent".into()];
    d.run = Some(RunSpec {
        kind: "teleport".into(),
        settings: Default::default(),
    });
    let lookup = |_: &str| Lookup::Absent;
    let env = ValidationEnv {
        max_isolation: Isolation::Standard,
        lookup: Some(&lookup),
        builtin: false,
        ..ValidationEnv::default()
    };
    let report = validate_in(&d, &env).unwrap_err();
    let want = expected(&[
        ("name", "name.format"),
        ("description", "description.empty"),
        ("input_schema", "input_schema.conflict"),
        ("parameters[0].name", "parameter.name_format"),
        ("parameters[1].default", "parameter.required_default"),
        ("parameters[1].enum[0]", "parameter.enum_type"),
        ("parameters[1].default", "parameter.default_type"),
        ("parameters[2].name", "parameter.duplicate_name"),
        ("parameters[2].schema", "parameter.schema_missing"),
        ("parameters[3].schema", "parameter.schema_type_mismatch"),
        ("required[0]", "required.undeclared"),
        ("output_schema.type", "output_schema.invalid"),
        ("constraints.timeout_ms", "constraints.timeout_range"),
        ("constraints.max_output_bytes", "constraints.output_range"),
        ("constraints.max_attempts", "constraints.attempts_range"),
        ("constraints.isolation", "constraints.isolation_plan"),
        ("required_permissions[0]", "permission.format"),
        ("required_permissions[1]", "permission.wildcard"),
        ("tags[0]", "tag.length"),
        ("version", "version.semver"),
        ("depends_on[0]", "depends_on.self"),
        ("depends_on[1]", "depends_on.format"),
        ("depends_on[2]", "depends_on.unknown"),
        ("run.kind", "run.unknown_kind"),
        ("title", "title.length"),
    ]);
    let mut got = pairs(&report.errors);
    let mut want_sorted = want.clone();
    got.sort();
    want_sorted.sort();
    assert_eq!(got, want_sorted, "{report:#?}");
    assert_eq!(report.errors.len(), 25);
    assert!(!report.is_valid());
    // The Display form lists every error.
    let text = report.to_string();
    for issue in &report.errors {
        assert!(text.contains(&issue.code), "{text}");
    }
}

#[test]
fn report_and_issue_serialize_as_path_code_message() {
    let mut d = base();
    d.name = "Bad".into();
    let report = validate(&d).unwrap_err();
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(value["errors"][0]["path"], "name");
    assert_eq!(value["errors"][0]["code"], "name.format");
    assert!(
        value["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("Bad")
    );
    assert_eq!(value["warnings"], json!([]));
    let back: ValidationReport = serde_json::from_value(value).unwrap();
    assert_eq!(back, report);
    let issue = &report.errors[0];
    assert_eq!(
        issue.to_string(),
        format!("name: {} [name.format]", issue.message)
    );
}

#[test]
fn validation_is_deterministic() {
    let mut d = base();
    d.name = "Bad".into();
    d.tags = vec![String::new(), String::new()];
    d.parameters
        .push(string_param("x").one_of(vec![json!(1), json!(2)]));
    let first = validate(&d).unwrap_err();
    for _ in 0..5 {
        assert_eq!(validate(&d).unwrap_err(), first);
    }
}

// ---- Acceptance criteria of the definition schema --------------------------------------------

fn every_field_definition() -> ToolDefinition {
    let text = r#"
name = "get_weather"
title = "Get weather"
description = "Current weather for a city. Use when the user asks about conditions now, not forecasts."
category = "external_api"
effect = "read"
consequence = "low"
requires_confirmation = false
safety_level = "safe"
required = ["city"]
output_schema = { type = "object", properties = { temperature = { type = "number" } } }
required_permissions = ["tool.network.fetch"]
tags = ["weather", "geo"]
version = "1.2.0"
depends_on = ["geocode"]
idempotent = true
metadata = { owner = "weather-team", cost = 3 }

[[parameters]]
name = "city"
type = "string"
description = "City name"

[[parameters]]
name = "units"
type = "string"
description = "Unit system"
enum = ["metric", "imperial"]
default = "metric"

[[parameters]]
name = "api_key"
type = "string"
description = "Key for the weather API"
sensitive = true

[[parameters]]
name = "days"
type = "array"
description = "Days to include"
schema = { items = { type = "integer", minimum = 0 }, maxItems = 7 }
default = [0]

[constraints]
timeout_ms = 5000
max_output_bytes = 65536
allow_side_effects = false
isolation = "none"
retryable = true
max_attempts = 2

[run]
kind = "http"
method = "GET"
url = "https://api.example.com/weather?city={city}&units={units}"
"#;
    ToolDefinition::parse(text, toolgate_core::Format::Toml).unwrap()
}

#[test]
fn criterion_1_definition_with_all_fields_validates() {
    let d = every_field_definition();
    let spec = validate(&d).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(spec.category(), Category::ExternalApi);
    assert_eq!(spec.limits().timeout, Duration::from_millis(5000));
    assert_eq!(spec.sensitive_arguments(), ["api_key".to_owned()]);
}

#[test]
fn criterion_2_invalid_tool_name_fails_with_clear_error() {
    for name in ["ReadFile", "read file", "Read File"] {
        let mut d = base();
        d.name = name.into();
        let report = validate(&d).unwrap_err();
        assert_eq!(
            pairs(&report.errors),
            expected(&[("name", "name.format")]),
            "{name}"
        );
        let message = &report.errors[0].message;
        assert!(message.contains(name), "{message}");
        assert!(message.contains("lowercase"), "{message}");
    }
}

#[test]
fn criterion_3_enum_values_validate_against_parameter_type() {
    let cases: &[(ParamType, Value, bool)] = &[
        (ParamType::String, json!("a"), true),
        (ParamType::String, json!(1), false),
        (ParamType::Integer, json!(1), true),
        (ParamType::Integer, json!("a"), false),
        (ParamType::Integer, json!(1.5), false),
        (ParamType::Number, json!(1.5), true),
        (ParamType::Number, json!(true), false),
        (ParamType::Boolean, json!(false), true),
        (ParamType::Boolean, json!(0), false),
        (ParamType::Array, json!([1]), true),
        (ParamType::Array, json!({"a": 1}), false),
        (ParamType::Object, json!({"a": 1}), true),
        (ParamType::Object, json!([1]), false),
        (ParamType::String, Value::Null, false),
    ];
    for (ty, value, ok) in cases {
        let mut d = base();
        d.parameters.push(
            Parameter::new("p", *ty)
                .description("A parameter")
                .one_of(vec![value.clone()]),
        );
        let (errors, _) = outcome(&d, &ValidationEnv::default());
        if *ok {
            assert!(errors.is_empty(), "{ty:?} {value}: {errors:?}");
        } else {
            assert_eq!(
                pairs(&errors),
                expected(&[("parameters[2].enum[0]", "parameter.enum_type")]),
                "{ty:?} {value}"
            );
        }
    }
}

#[test]
fn criterion_4_constraints_outside_allowed_ranges_fail() {
    let mut d = base();
    d.constraints = Some(Constraints {
        timeout_ms: Some(600_001),
        max_output_bytes: Some(1023),
        max_attempts: Some(11),
        ..Constraints::default()
    });
    let report = validate(&d).unwrap_err();
    assert_eq!(
        pairs(&report.errors),
        expected(&[
            ("constraints.timeout_ms", "constraints.timeout_range"),
            ("constraints.max_output_bytes", "constraints.output_range"),
            ("constraints.max_attempts", "constraints.attempts_range"),
        ])
    );
}

#[test]
fn criterion_7_empty_parameter_list_validates() {
    let d = ToolDefinition::new(
        "list_things",
        "Lists every thing there is. Use to see what exists.",
    );
    let spec = validate(&d).unwrap();
    assert_eq!(
        spec.input_schema(),
        &json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

#[test]
fn criterion_8_null_constraints_use_system_defaults() {
    let mut d = base();
    d.constraints = None;
    let spec = validate(&d).unwrap();
    let limits = spec.limits();
    assert_eq!(limits.timeout, Duration::from_millis(15_000));
    assert_eq!(limits.max_output_bytes, 10 * 1024 * 1024);
    assert!(limits.allow_side_effects);
    assert_eq!(limits.isolation, Isolation::None);
    assert!(limits.retryable);
    assert_eq!(limits.max_attempts, 3);
    // An empty constraints table means the same.
    d.constraints = Some(Constraints::default());
    assert_eq!(validate(&d).unwrap().limits(), limits);
}

fn tool(name: &str) -> Arc<dyn Tool> {
    Arc::new(
        ToolBuilder::new(
            name,
            "Reads a file from the sandbox root. Use to inspect files.",
        )
        .handler(|_, _| async { Ok(json!("ok")) }),
    )
}

#[test]
fn criterion_10_built_in_definitions_cannot_be_overwritten() {
    let registry = Registry::new();
    registry.register_builtin(tool("read_file")).unwrap();
    let before = registry
        .get("read_file")
        .unwrap()
        .spec()
        .definition_hash()
        .to_owned();
    let mut other = ToolDefinition::new(
        "read_file",
        "A replacement that does something else entirely.",
    );
    other.tags = vec!["evil".into()];

    let attempts: Vec<(&str, CoreError)> = vec![
        (
            "register",
            registry.register(tool("read_file")).unwrap_err(),
        ),
        (
            "register_definition",
            registry.register_definition(other.clone()).unwrap_err(),
        ),
        (
            "register_definitions",
            registry
                .register_definitions(vec![
                    ToolDefinition::new("fine_tool", "A fine tool that does fine things."),
                    other.clone(),
                ])
                .unwrap_err(),
        ),
        (
            "replace_definition",
            registry.replace_definition(other.clone()).unwrap_err(),
        ),
        ("replace", registry.replace(tool("read_file")).unwrap_err()),
        ("remove", registry.remove("read_file").unwrap_err()),
    ];
    for (op, err) in attempts {
        let protected = matches!(&err, CoreError::BuiltinProtected(n) if n == "read_file")
            || err
                .report()
                .is_some_and(|r| r.errors.iter().any(|e| e.code == "name.builtin"));
        assert!(protected, "{op}: {err:?}");
        assert_eq!(err.kind(), CoreErrorKind::Forbidden, "{op}");
    }
    let after = registry.get("read_file").unwrap();
    assert!(after.is_builtin());
    assert_eq!(after.spec().definition_hash(), before);
    assert!(
        registry.get("fine_tool").is_none(),
        "batch must be all or none"
    );
}

// ---- Unit tests of the definition schema ---------------------------------------------------

#[test]
fn valid_definition_should_pass_validation() {
    let mut d = ToolDefinition::new("read_file", "Read the contents of a file");
    d.category = Some(Category::Filesystem);
    d.parameters = vec![
        Parameter::new("path", ParamType::String)
            .description("The file path")
            .required(),
    ];
    assert!(validate(&d).is_ok());
}

#[test]
fn invalid_name_should_fail_validation() {
    for name in ["ReadFile", "read file", "read-file", "123_tool", ""] {
        let mut d = ToolDefinition::new(name, "Test tool");
        d.category = Some(Category::System);
        let report = validate(&d).unwrap_err();
        assert!(!report.is_valid(), "{name:?}");
        assert!(
            report.errors.iter().any(|e| e.path == "name"),
            "{name:?}: {report:?}"
        );
    }
}

#[test]
fn required_parameter_with_default_should_fail_validation() {
    let mut d = ToolDefinition::new("test_tool", "Test tool");
    d.category = Some(Category::System);
    d.parameters = vec![
        Parameter::new("param", ParamType::String)
            .description("Test param")
            .required()
            .default_value(json!("default_value")),
    ];
    let report = validate(&d).unwrap_err();
    assert!(!report.is_valid());
}

#[test]
fn invalid_execution_timeout_should_fail_validation() {
    for seconds in [0u64, 601] {
        let mut d = ToolDefinition::new("test_tool", "Test tool");
        d.category = Some(Category::System);
        d.constraints = Some(Constraints {
            timeout_ms: Some(seconds * 1000),
            ..Constraints::default()
        });
        let report = validate(&d).unwrap_err();
        assert!(!report.is_valid(), "{seconds} s");
    }
}

#[test]
fn null_constraints_should_use_defaults() {
    let mut d = ToolDefinition::new("test_tool", "Test tool");
    d.category = Some(Category::System);
    d.constraints = None;
    let spec = validate(&d).unwrap();
    // "Test tool" is short: a warning, never an error.
    assert_eq!(
        pairs(spec.warnings()),
        expected(&[("description", "description.short")])
    );
}

/// A raw-schema definition (no parameters) with `input_schema` set to `schema`.
fn raw(schema: Value) -> ToolDefinition {
    let mut d = base();
    d.parameters.clear();
    d.input_schema = Some(schema);
    d
}

/// A `required` list names only declared parameters (`input_schema.required_undeclared`), for raw
/// input schemas too, at every depth, with the path of the offending entry.
#[test]
fn raw_input_schema_required_must_name_declared_properties() {
    let undeclared = |schema: Value| -> Vec<(String, String)> {
        let (errors, _) = outcome(&raw(schema), &ValidationEnv::default());
        pairs(&errors)
    };
    let code = "input_schema.required_undeclared";
    // Top level: the second entry names nothing declared.
    assert_eq!(
        undeclared(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city", "foo"]
        })),
        expected(&[("input_schema.required[1]", code)])
    );
    // No properties at all.
    assert_eq!(
        undeclared(json!({"type": "object", "required": ["a"]})),
        expected(&[("input_schema.required[0]", code)])
    );
    // Nested: an object property, array items, $defs, prefixItems, additionalProperties.
    assert_eq!(
        undeclared(json!({
            "type": "object",
            "properties": {
                "x": {"type": "object", "properties": {"a": {}}, "required": ["a", "b"]},
                "list": {"type": "array", "items": {"type": "object", "required": ["id"]}},
                "pair": {"type": "array", "prefixItems": [{"type": "object", "properties": {}, "required": ["k"]}]},
                "map": {"type": "object", "additionalProperties": {"type": "object", "required": ["v"]}}
            },
            "$defs": {"point": {"type": "object", "properties": {"x": {}}, "required": ["y"]}}
        })),
        expected(&[
            ("input_schema.properties.x.required[1]", code),
            ("input_schema.properties.list.items.required[0]", code),
            (
                "input_schema.properties.pair.prefixItems[0].required[0]",
                code
            ),
            (
                "input_schema.properties.map.additionalProperties.required[0]",
                code
            ),
            ("input_schema.$defs.point.required[0]", code),
        ])
    );
    // Declared names pass, and so do combinator branches naming the enclosing schema's
    // properties, schemas with patternProperties, and dependentSchemas.
    for fine in [
        json!({"type": "object", "properties": {"a": {}}, "required": ["a"]}),
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "if": {"required": ["a"]}, "then": {"required": ["b"]}, "not": {"required": ["a", "b"]}}),
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "dependentSchemas": {"a": {"required": ["b"]}}}),
        json!({"type": "object", "patternProperties": {"^x_": {}}, "required": ["x_1"]}),
        json!({"type": "object", "properties": {"o": {"type": "object", "properties": {"p": {}}, "anyOf": [{"required": ["p"]}]}}}),
    ] {
        assert!(undeclared(fine.clone()).is_empty(), "{fine}");
    }
    // A combinator branch cannot name what neither it nor its schema declares.
    assert_eq!(
        undeclared(
            json!({"type": "object", "properties": {"a": {}}, "allOf": [{"required": ["z"]}]})
        ),
        expected(&[("input_schema.allOf[0].required[0]", code)])
    );
    // The message names the entry, where it is missing and the fix.
    let (errors, _) = outcome(
        &raw(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "x": {"type": "object", "properties": {}, "required": ["deep"]}},
            "required": ["city", "foo"]
        })),
        &ValidationEnv::default(),
    );
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!("required_undeclared_messages", lines.join("\n"));
}

/// The plans' JSON Schema levels (`docs/tool-model.md#plans`): basic (core, writer_pro), advanced
/// (teams), full + custom (enterprise). A schema beyond the plan's level is refused, naming the
/// keyword, its path and the lowest plan that allows it; within the level it passes; built-ins are
/// exempt.
#[test]
fn the_plan_caps_the_json_schema_level() {
    let basic = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 80, "description": "City"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5}
        },
        "required": ["city"],
        "additionalProperties": false
    });
    let advanced = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "pattern": "^[A-Z]"},
            "when": {"type": "string", "format": "date"},
            "where": {"$ref": "#/$defs/place"}
        },
        "$defs": {"place": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        "required": ["city"]
    });
    let full = json!({
        "type": "object",
        "properties": {"ticket": {"type": "string", "format": "ticket-id"}},
        "required": ["ticket"],
        "errorMessage": {"required": {"ticket": "Give the ticket id"}}
    });
    let env = |level| ValidationEnv {
        schema_level: level,
        ..ValidationEnv::default()
    };
    let codes = |schema: &Value, level| {
        let (errors, _) = outcome(&raw(schema.clone()), &env(level));
        pairs(&errors)
    };
    let plan = "schema.plan_level";
    for level in SchemaLevel::ALL {
        assert!(codes(&basic, level).is_empty(), "basic under {level}");
    }
    assert_eq!(
        codes(&advanced, SchemaLevel::Basic),
        expected(&[
            ("input_schema.properties.city.pattern", plan),
            ("input_schema.properties.when.format", plan),
            ("input_schema.properties.where.$ref", plan),
            ("input_schema.$defs", plan),
            ("input_schema.$defs.place.oneOf", plan),
        ])
    );
    assert!(codes(&advanced, SchemaLevel::Advanced).is_empty());
    assert!(codes(&advanced, SchemaLevel::Full).is_empty());
    assert_eq!(
        codes(&full, SchemaLevel::Advanced),
        expected(&[
            ("input_schema.properties.ticket.format", plan),
            ("input_schema.errorMessage", plan),
        ])
    );
    assert_eq!(codes(&full, SchemaLevel::Basic).len(), 2);
    assert!(codes(&full, SchemaLevel::Full).is_empty());

    // Parameter schemas and the output schema are held to the level too.
    let mut d = base();
    d.parameters.push(
        Parameter::new("ids", ParamType::Array)
            .description("Ids")
            .schema(json!({"items": {"type": "string", "pattern": "^[0-9]+$"}})),
    );
    d.output_schema = Some(json!({"type": "object", "anyOf": [{"required": ["a"]}]}));
    let (errors, _) = outcome(&d, &env(SchemaLevel::Basic));
    assert_eq!(
        pairs(&errors),
        expected(&[
            ("parameters[2].schema.items.pattern", plan),
            ("output_schema.anyOf", plan),
        ])
    );
    // Built-ins are not custom definitions: any level.
    let builtin = ValidationEnv {
        builtin: true,
        ..env(SchemaLevel::Basic)
    };
    assert!(outcome(&raw(full.clone()), &builtin).0.is_empty());

    // The messages, per plan level.
    let mut lines = Vec::new();
    for (level, schema) in [
        (SchemaLevel::Basic, &advanced),
        (SchemaLevel::Advanced, &full),
    ] {
        lines.push(format!("under {level}:"));
        let (errors, _) = outcome(&raw(schema.clone()), &env(level));
        lines.extend(errors.iter().map(ToString::to_string));
    }
    insta::assert_snapshot!("schema_level_messages", lines.join("\n"));

    // The registry applies its caps, and a check under a caller's caps never exceeds them.
    let registry = Registry::with_caps(toolgate_core::TierCaps {
        max_isolation: Isolation::Restricted,
        schema_level: SchemaLevel::Advanced,
    });
    let err = registry.register_definition(raw(full.clone())).unwrap_err();
    assert_eq!(err.kind(), CoreErrorKind::Invalid);
    assert!(registry.register_definition(raw(advanced.clone())).is_ok());
    let basic_caps = toolgate_core::TierCaps {
        max_isolation: Isolation::Restricted,
        schema_level: SchemaLevel::Basic,
    };
    let mut other = raw(advanced.clone());
    other.name = "get_weather_two".into();
    assert!(
        registry
            .check(other.clone(), false, Some(basic_caps))
            .is_err()
    );
    assert!(registry.check(other.clone(), false, None).is_ok());
    assert!(
        registry
            .check(raw(full), true, Some(toolgate_core::TierCaps::UNLIMITED))
            .unwrap_err()
            .report()
            .is_some_and(|r| r.errors.iter().all(|e| e.code == "schema.plan_level"))
    );
}

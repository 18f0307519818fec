//! Structural and behavioural rules of the exports: Gemini output stays inside Gemini's schema
//! subset, strict OpenAI output is closed and fully required, failures name tool and keyword,
//! MCP hints follow the governance fields, and strict arguments round-trip to the tool's schema.
#![cfg(test)]

mod common;

use serde_json::{Map, Value, json};
use toolgate_core::{Category, Consequence, Effect, ParamType, Parameter, ToolBuilder, validate};
use toolgate_export::{
    Export, ExportError, ExportErrorKind, ExportFormat, ExportOptions, GOVERNANCE_META_KEY, export,
    export_one,
};

const PLAIN: ExportOptions = ExportOptions {
    strict: false,
    require_strict: false,
};
const STRICT: ExportOptions = ExportOptions {
    strict: true,
    require_strict: false,
};
const REQUIRE_STRICT: ExportOptions = ExportOptions {
    strict: false,
    require_strict: true,
};

/// Calls `visit(path, schema)` for every schema in `schema`, walking the schema-valued keywords
/// only (property names are never taken for keywords).
fn walk_schemas(schema: &Value, path: &str, visit: &mut dyn FnMut(&str, &Map<String, Value>)) {
    let Value::Object(m) = schema else { return };
    visit(path, m);
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = m.get(key) {
            for (name, child) in children {
                walk_schemas(child, &format!("{path}.{key}.{name}"), visit);
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = m.get(key) {
            walk_schemas(child, &format!("{path}.{key}"), visit);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = m.get(key) {
            for (i, child) in children.iter().enumerate() {
                walk_schemas(child, &format!("{path}.{key}[{i}]"), visit);
            }
        }
    }
}

fn tools(out: &Export, format: ExportFormat) -> Vec<Value> {
    match format {
        ExportFormat::Gemini | ExportFormat::GeminiJsonSchema => {
            out.document["functionDeclarations"]
                .as_array()
                .unwrap()
                .clone()
        }
        ExportFormat::Mcp => out.document["tools"].as_array().unwrap().clone(),
        _ => out.document.as_array().unwrap().clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Gemini

/// The `Schema` fields of the Gemini API reference that toolgate emits.
const GEMINI_FIELDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "propertyOrdering",
    "items",
    "minimum",
    "maximum",
];

const GEMINI_REJECTED: &[&str] = &[
    "additionalProperties",
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "const",
    "oneOf",
    "allOf",
    "not",
    "default",
    "examples",
    "patternProperties",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "uniqueItems",
];

fn assert_gemini_subset(parameters: &Value, tool: &str) {
    walk_schemas(parameters, "parameters", &mut |path, m| {
        for key in m.keys() {
            assert!(
                !GEMINI_REJECTED.contains(&key.as_str()),
                "{tool}: {path} has rejected keyword {key}"
            );
            assert!(
                GEMINI_FIELDS.contains(&key.as_str()),
                "{tool}: {path} has {key}, which is not a Gemini Schema field"
            );
        }
        let ty = m.get("type");
        if let Some(ty) = ty {
            let t = ty
                .as_str()
                .unwrap_or_else(|| panic!("{tool}: {path} type is not one string: {ty}"));
            assert!(
                ["string", "number", "integer", "boolean", "array", "object"].contains(&t),
                "{tool}: {path} has type {t}"
            );
        }
        if let Some(values) = m.get("enum") {
            assert!(
                values.as_array().unwrap().iter().all(Value::is_string),
                "{tool}: {path} enum has non-strings"
            );
            assert_eq!(
                ty,
                Some(&json!("string")),
                "{tool}: {path} enum on a non-string"
            );
        }
        if let Some(props) = m.get("properties") {
            assert_eq!(
                ty,
                Some(&json!("object")),
                "{tool}: {path} properties on a non-object"
            );
            assert!(
                !props.as_object().unwrap().is_empty(),
                "{tool}: {path} has empty properties"
            );
        }
        if let Some(required) = m.get("required") {
            let props = m.get("properties").and_then(Value::as_object).unwrap();
            for name in required.as_array().unwrap() {
                assert!(
                    props.contains_key(name.as_str().unwrap()),
                    "{tool}: {path} requires undeclared {name}"
                );
            }
        }
        if m.contains_key("items") {
            assert_eq!(
                ty,
                Some(&json!("array")),
                "{tool}: {path} items on a non-array"
            );
        }
    });
}

#[test]
fn gemini_output_stays_inside_the_documented_subset() {
    let mut specs = common::fixtures();
    specs.push(common::raw(
        "composed",
        json!({
            "type": "object",
            "$defs": {
                "base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                "level": {"type": "integer", "enum": [1, 2], "default": 1}
            },
            "properties": {
                "item": {"allOf": [{"$ref": "#/$defs/base"}, {"properties": {"n": {"type": "number", "multipleOf": 0.5}}}]},
                "maybe": {"anyOf": [{"$ref": "#/$defs/base"}, {"type": "null"}]},
                "either": {"type": ["string", "integer"], "minLength": 2, "minimum": 3},
                "flags": {"type": "object", "additionalProperties": {"type": "boolean"}},
                "level": {"$ref": "#/$defs/level"},
                "exact": {"const": 4},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"}},
                "limit": {"type": "integer", "exclusiveMaximum": 10},
                "opt": {"type": ["object", "null"], "properties": {"a": {"type": "string"}}, "required": ["a"]}
            },
            "anyOf": [{"required": ["item"]}, {"required": ["maybe"]}]
        }),
    ));
    let out = export(&specs, ExportFormat::Gemini, &PLAIN).unwrap();
    for declaration in tools(&out, ExportFormat::Gemini) {
        let name = declaration["name"].as_str().unwrap().to_owned();
        let keys: Vec<&String> = declaration.as_object().unwrap().keys().collect();
        assert!(
            keys.iter()
                .all(|k| ["name", "description", "parameters"].contains(&k.as_str()))
        );
        if let Some(parameters) = declaration.get("parameters") {
            assert_eq!(parameters["type"], "object", "{name}");
            assert_gemini_subset(parameters, &name);
        }
    }
}

#[test]
fn gemini_changes_are_noted_with_tool_and_path() {
    let out = export(
        &[common::fixture("search_catalog")],
        ExportFormat::Gemini,
        &PLAIN,
    )
    .unwrap();
    let find = |path: &str| {
        out.notes
            .iter()
            .find(|n| n.path == path)
            .unwrap_or_else(|| panic!("no note at {path}: {:#?}", out.notes))
    };
    assert!(out.notes.iter().all(|n| n.tool == "search_catalog"));
    assert!(find("parameters.$schema").message.contains("$schema"));
    assert!(
        find("parameters.properties.max_price.$ref")
            .message
            .contains("#/$defs/money")
    );
    assert!(
        find("parameters.properties.api_version.const")
            .message
            .contains("enum")
    );
    assert!(
        find("parameters.properties.sku.oneOf")
            .message
            .contains("anyOf")
    );
    assert!(
        find("parameters.properties.priority.enum")
            .message
            .contains("strings only")
    );
    assert!(
        find("parameters.properties.sort.default")
            .message
            .contains("description")
    );
    assert!(
        find("parameters.additionalProperties")
            .message
            .contains("additionalProperties")
    );
    let params = &out.document["functionDeclarations"][0]["parameters"];
    assert_eq!(
        params["properties"]["cursor"],
        json!({"type": "string", "description": "Pagination cursor from the previous page", "nullable": true})
    );
    assert_eq!(params["properties"]["api_version"]["enum"], json!(["v2"]));
    assert_eq!(
        params["properties"]["max_price"]["properties"]["amount"]["minimum"],
        json!(0)
    );
    assert!(
        params["properties"]["priority"]["description"]
            .as_str()
            .unwrap()
            .ends_with("Allowed values: 1, 2, 3.")
    );
}

#[test]
fn gemini_refuses_recursive_schemas_naming_the_tool() {
    let tree = common::raw(
        "walk_tree",
        json!({
            "type": "object",
            "$defs": {"node": {"type": "object", "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
            }}},
            "properties": {"root": {"$ref": "#/$defs/node"}},
            "required": ["root"]
        }),
    );
    let err = export(std::slice::from_ref(&tree), ExportFormat::Gemini, &PLAIN).unwrap_err();
    assert!(matches!(err, ExportError::Recursive { .. }), "{err:?}");
    assert_eq!(err.kind(), ExportErrorKind::Unsupported);
    assert_eq!(err.tool(), Some("walk_tree"));
    let message = err.to_string();
    assert!(message.starts_with("Cannot export tool walk_tree to Gemini: parameters.properties.root.properties.children.items uses `$ref` to #/$defs/node"), "{message}");
    assert!(message.contains("recursive"), "{message}");

    // Recursion through the root itself is caught as well.
    let self_ref = common::raw(
        "nest",
        json!({"type": "object", "properties": {"next": {"$ref": "#"}}}),
    );
    let err = export_one(&self_ref, ExportFormat::Gemini, &PLAIN).unwrap_err();
    assert!(
        matches!(err, ExportError::Recursive { ref reference, .. } if reference == "#"),
        "{err:?}"
    );

    // OpenAI strict mode supports recursion through $defs and keeps the reference.
    let (tool, _) = export_one(&tree, ExportFormat::OpenAi, &STRICT).unwrap();
    assert_eq!(
        tool["function"]["parameters"]["$defs"]["node"]["properties"]["children"]["anyOf"][0]["items"],
        json!({"$ref": "#/$defs/node"})
    );
}

#[test]
fn gemini_omits_parameters_for_tools_without_any() {
    let (declaration, _) =
        export_one(&common::fixture("list_inbox"), ExportFormat::Gemini, &PLAIN).unwrap();
    assert_eq!(declaration.get("parameters"), None);
}

// ---------------------------------------------------------------------------------------------
// OpenAI

fn openai_parameters(tool: &Value, format: ExportFormat) -> &Value {
    match format {
        ExportFormat::OpenAi => &tool["function"]["parameters"],
        _ => &tool["parameters"],
    }
}

/// Strict mode's structural rules, on every schema of every fixture.
fn assert_strict_subset(parameters: &Value, tool: &str) {
    assert!(parameters.get("anyOf").is_none(), "{tool}: root anyOf");
    assert_eq!(parameters["type"], "object", "{tool}: root type");
    walk_schemas(parameters, "parameters", &mut |path, m| {
        for key in [
            "default",
            "allOf",
            "oneOf",
            "not",
            "if",
            "then",
            "else",
            "patternProperties",
            "$schema",
            "minLength",
            "uniqueItems",
        ] {
            assert!(!m.contains_key(key), "{tool}: {path} has {key}");
        }
        if m.contains_key("$ref") {
            assert_eq!(m.len(), 1, "{tool}: {path} has keywords next to $ref");
            return;
        }
        let is_object = match m.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.contains(&json!("object")),
            _ => false,
        };
        if is_object {
            assert_eq!(
                m.get("additionalProperties"),
                Some(&json!(false)),
                "{tool}: {path} is not closed"
            );
            let names: Vec<Value> = m["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| json!(k))
                .collect();
            assert_eq!(
                m.get("required"),
                Some(&Value::Array(names)),
                "{tool}: {path} does not require every property"
            );
        }
        assert!(
            ["type", "anyOf", "enum", "const"]
                .iter()
                .any(|k| m.contains_key(*k)),
            "{tool}: {path} has no type"
        );
    });
}

#[test]
fn strict_output_is_closed_and_fully_required_everywhere() {
    let specs = common::fixtures();
    for format in [ExportFormat::OpenAi, ExportFormat::OpenAiResponses] {
        let out = export(&specs, format, &STRICT).unwrap();
        for tool in tools(&out, format) {
            let strict = if format == ExportFormat::OpenAi {
                &tool["function"]["strict"]
            } else {
                &tool["strict"]
            };
            assert_eq!(strict, &json!(true));
            let name = tool
                .pointer("/function/name")
                .or(tool.get("name"))
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned();
            assert_strict_subset(openai_parameters(&tool, format), &name);
        }
    }
}

#[test]
fn plain_openai_keeps_the_schema_and_says_not_strict() {
    let spec = common::fixture("search_catalog");
    for format in [ExportFormat::OpenAi, ExportFormat::OpenAiResponses] {
        let (tool, notes) = export_one(&spec, format, &PLAIN).unwrap();
        let mut expected = spec.input_schema().clone();
        expected.as_object_mut().unwrap().remove("$schema");
        assert_eq!(openai_parameters(&tool, format), &expected);
        assert_eq!(notes.len(), 1, "{notes:#?}");
        let strict = tool
            .pointer("/function/strict")
            .or(tool.get("strict"))
            .unwrap();
        assert_eq!(
            strict,
            &json!(false),
            "Responses defaults strict to true, so false is explicit"
        );
    }
}

#[test]
fn strict_failures_name_tool_path_and_keyword() {
    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {"^x": {"type": "string"}}}}}),
            "Cannot export tool probe in OpenAI strict mode: parameters.properties.a uses `patternProperties`, which strict mode does not support",
            "patternProperties",
        ),
        (
            json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}, {"maxLength": 3}]}}}),
            "Cannot export tool probe in OpenAI strict mode: parameters.properties.a uses `allOf`, which strict mode does not support",
            "allOf",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"if": {"type": "string"}, "then": {"minLength": 1}}}}}),
            "Cannot export tool probe in OpenAI strict mode: parameters.properties.a.items uses `if`, which strict mode does not support",
            "if",
        ),
        (
            json!({"type": "object", "properties": {"meta": {"type": "object"}}}),
            "Cannot export tool probe in OpenAI strict mode: parameters.properties.meta is an object without declared properties (free-form)",
            "additionalProperties",
        ),
        (
            json!({"type": "object", "properties": {"any": {"description": "anything at all"}}}),
            "Cannot export tool probe in OpenAI strict mode: parameters.properties.any has no `type`",
            "type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "dependentRequired": {"a": ["b"]}}),
            "Cannot export tool probe in OpenAI strict mode: parameters uses `dependentRequired`, which strict mode does not support",
            "dependentRequired",
        ),
    ];
    for (schema, message, keyword) in cases {
        let spec = common::raw("probe", schema);
        for format in [ExportFormat::OpenAi, ExportFormat::OpenAiResponses] {
            let err = export_one(&spec, format, &STRICT).unwrap_err();
            // In a whole document, the tool goes in non-strict, with the reason as a note.
            let doc = export(std::slice::from_ref(&spec), format, &STRICT).unwrap();
            let tool = &doc.document[0];
            let strict = tool.get("function").unwrap_or(tool)["strict"].clone();
            assert_eq!(strict, false, "{format}");
            assert_eq!(doc.notes[0].path, "strict");
            assert!(
                doc.notes[0].message.contains(message),
                "{}",
                doc.notes[0].message
            );
            assert!(
                err.to_string().starts_with(message),
                "got: {err}\nwant: {message}"
            );
            assert!(
                matches!(&err, ExportError::Unsupported { keyword: k, tool, .. } if k == keyword && tool == "probe"),
                "{err:?}"
            );
            assert_eq!(err.kind(), ExportErrorKind::Unsupported);
        }
        // Not strict, the same schema exports as written.
        assert!(export(std::slice::from_ref(&spec), ExportFormat::OpenAi, &PLAIN).is_ok());
    }
}

#[test]
fn strict_limits_are_enforced() {
    let mut schema =
        json!({"type": "object", "properties": {"leaf": {"type": "string"}}, "required": ["leaf"]});
    for _ in 0..10 {
        schema = json!({"type": "object", "properties": {"inner": schema}, "required": ["inner"]});
    }
    let err = export_one(&common::raw("deep", schema), ExportFormat::OpenAi, &STRICT).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot export tool deep in OpenAI strict mode: the schema has 11 levels of object nesting; strict mode allows at most 10"
    );

    let values: Vec<Value> = (0..1001).map(|i| json!(format!("v{i}"))).collect();
    let schema =
        json!({"type": "object", "properties": {"pick": {"type": "string", "enum": values}}});
    let err = export_one(&common::raw("wide", schema), ExportFormat::OpenAi, &STRICT).unwrap_err();
    assert!(
        err.to_string().contains("1001 enum values in total"),
        "{err}"
    );

    let props: Map<String, Value> = (0..5001)
        .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
        .collect();
    let err = export_one(
        &common::raw("broad", json!({"type": "object", "properties": props})),
        ExportFormat::OpenAi,
        &STRICT,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("5001 object properties in total; strict mode allows at most 5000"),
        "{err}"
    );

    // More than 250 string values may hold at most 15,000 characters together.
    let values: Vec<Value> = (0..251).map(|i| json!(format!("{i:0>60}"))).collect();
    let schema =
        json!({"type": "object", "properties": {"pick": {"type": "string", "enum": values}}});
    let err = export_one(&common::raw("long", schema), ExportFormat::OpenAi, &STRICT).unwrap_err();
    assert!(
        err.to_string().contains(
            "15060 characters in one enum of more than 250 values; strict mode allows at most 15000"
        ),
        "{err}"
    );
    // In a document the tool goes in non-strict, with the limit as the note.
    let doc = export(&[common::raw("long2", json!({"type": "object", "properties": {"pick": {"type": "string", "enum": (0..251).map(|i| json!(format!("{i:0>60}"))).collect::<Vec<_>>()}}}))], ExportFormat::OpenAi, &STRICT).unwrap();
    assert_eq!(doc.notes[0].path, "strict");
    assert!(
        doc.notes[0].message.contains("at most 15000"),
        "{}",
        doc.notes[0].message
    );
}

#[test]
fn top_level_composition_is_dropped_when_it_only_constrains_and_refused_otherwise() {
    let at_least_one = common::raw(
        "update_issue",
        json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
               "anyOf": [{"required": ["title"]}, {"required": ["body"]}]}),
    );
    for format in [ExportFormat::OpenAi, ExportFormat::Anthropic] {
        let (tool, notes) = export_one(&at_least_one, format, &PLAIN).unwrap();
        assert!(tool.to_string().find("anyOf").is_none(), "{format}: {tool}");
        assert!(
            notes.iter().any(
                |n| n.path.ends_with(".anyOf") && n.message.contains("toolgate still enforces")
            ),
            "{notes:#?}"
        );
    }
    let variants = common::raw(
        "shape",
        json!({"type": "object", "oneOf": [
            {"properties": {"radius": {"type": "number"}}, "required": ["radius"]},
            {"properties": {"side": {"type": "number"}}, "required": ["side"]}
        ]}),
    );
    let err = export_one(&variants, ExportFormat::Anthropic, &PLAIN).unwrap_err();
    assert!(err.to_string().starts_with("Cannot export tool shape to Anthropic: input_schema uses `oneOf`, which Anthropic does not accept at the top level"), "{err}");
    let err = export_one(&variants, ExportFormat::OpenAiResponses, &PLAIN).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Cannot export tool shape to OpenAI: parameters uses `oneOf`"),
        "{err}"
    );
}

/// Arguments valid for the tool, written the way a strict model writes them (every optional
/// property present as null), validate against the strict schema; stripping the nulls gives
/// arguments that validate against the tool's own schema again.
#[test]
fn strict_arguments_round_trip_to_the_tool_schema() {
    let cases = [
        (
            "get_weather",
            json!({"city": "Oslo"}),
            json!({"city": "Oslo", "units": null, "days": null, "include_hourly": null}),
        ),
        (
            "search_catalog",
            json!({"query": "lamp", "filters": {"dimensions": {"width_cm": 30}}, "sku": 7, "cursor": null, "max_price": {"amount": 10, "currency": "EUR"}}),
            json!({"query": "lamp", "max_price": {"amount": 10, "currency": "EUR"}, "min_price": null,
                   "filters": {"brand": null, "dimensions": {"width_cm": 30, "height_cm": null}},
                   "api_version": null, "sku": 7, "priority": null, "cursor": null, "tags": null,
                   "updated_after": null, "sort": null}),
        ),
        ("list_inbox", json!({}), json!({})),
    ];
    for (name, original, strict_form) in cases {
        let spec = common::fixture(name);
        let own = jsonschema::draft202012::new(spec.input_schema()).unwrap();
        assert!(own.is_valid(&original), "{name}: fixture arguments invalid");
        let (tool, _) = export_one(&spec, ExportFormat::OpenAiResponses, &STRICT).unwrap();
        let strict = jsonschema::draft202012::new(&tool["parameters"]).unwrap();
        let errors: Vec<String> = strict
            .iter_errors(&strict_form)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{name}: strict schema rejects the strict form: {errors:?}"
        );
        let mut args = strict_form.clone();
        toolgate_core::schema::strip_optional_nulls(spec.input_schema(), &mut args);
        assert_eq!(args, original, "{name}");
        assert!(own.is_valid(&args), "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// Anthropic

#[test]
fn anthropic_keeps_the_input_schema_as_written() {
    for spec in common::fixtures() {
        let (tool, notes) = export_one(&spec, ExportFormat::Anthropic, &PLAIN).unwrap();
        // Examples move to `input_examples`; everything else stays as written.
        let mut want = spec.input_schema().clone();
        let examples = want.as_object_mut().unwrap().shift_remove("examples");
        assert_eq!(tool["input_schema"], want);
        assert_eq!(tool["name"], spec.name().as_str());
        assert_eq!(tool.get("strict"), None);
        match examples {
            Some(examples) => {
                assert_eq!(tool["input_examples"], examples);
                assert_eq!(notes.len(), 1, "{notes:?}");
                assert_eq!(notes[0].message, "Moved 2 examples to `input_examples`");
            }
            None => assert!(notes.is_empty(), "{notes:?}"),
        }
    }
}

/// Checks that a strict Anthropic input schema stays inside the documented subset.
fn assert_anthropic_strict_subset(schema: &Value, tool: &str) {
    const ALLOWED: &[&str] = &[
        "type",
        "description",
        "title",
        "enum",
        "const",
        "format",
        "minItems",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
    ];
    walk_schemas(schema, "input_schema", &mut |path, m| {
        for key in m.keys() {
            assert!(
                ALLOWED.contains(&key.as_str()),
                "{tool}: {path} has {key}, outside strict tool use's subset"
            );
        }
        if m.contains_key("properties") {
            assert_eq!(m["additionalProperties"], false, "{tool}: {path} is open");
        }
        if let Some(n) = m.get("minItems") {
            assert!(n == 0 || n == 1, "{tool}: {path} minItems {n}");
        }
    });
}

#[test]
fn anthropic_strict_closes_objects_keeps_optional_properties_and_says_why_not() {
    for spec in common::fixtures() {
        let (tool, _) = export_one(&spec, ExportFormat::Anthropic, &STRICT)
            .unwrap_or_else(|e| panic!("{}: {e}", spec.name()));
        assert_eq!(tool["strict"], true);
        assert_anthropic_strict_subset(&tool["input_schema"], spec.name().as_str());
    }
    // Optional properties stay optional (unlike OpenAI's strict mode).
    let weather = common::fixture("get_weather");
    let (tool, _) = export_one(&weather, ExportFormat::Anthropic, &STRICT).unwrap();
    assert_eq!(tool["input_schema"]["required"], json!(["city"]));

    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}),
            "Cannot export tool probe in Anthropic strict tool use: input_schema.properties.a uses `not`, which strict tool use does not support",
        ),
        (
            json!({"type": "object", "properties": {"meta": {"type": "object"}}}),
            "Cannot export tool probe in Anthropic strict tool use: input_schema.properties.meta is an object without declared properties (free-form)",
        ),
        (
            json!({"type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}},
                   "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}),
            "Cannot export tool probe in Anthropic strict tool use: input_schema.$defs.node.properties.kids.items uses `$ref` to #/$defs/node, which refers back",
        ),
        (
            json!({"type": "object", "properties": {"pick": {"enum": [{"a": 1}, "b"]}}}),
            "Cannot export tool probe in Anthropic strict tool use: input_schema.properties.pick uses `enum`, which has arrays or objects among its values",
        ),
    ];
    for (schema, message) in cases {
        let spec = common::raw("probe", schema);
        let err = export_one(&spec, ExportFormat::Anthropic, &STRICT).unwrap_err();
        assert!(
            err.to_string().starts_with(message),
            "got: {err}\nwant: {message}"
        );
        // In a whole document the tool goes in without strict, with the reason as a note.
        let doc = export(
            std::slice::from_ref(&spec),
            ExportFormat::Anthropic,
            &STRICT,
        )
        .unwrap();
        assert_eq!(doc.document[0].get("strict"), None);
        assert_eq!(doc.notes[0].path, "strict");
        assert!(
            doc.notes[0].message.contains(message),
            "{}",
            doc.notes[0].message
        );
    }

    // Value limits strict tool use lacks are dropped with a note; toolgate still enforces them.
    let spec = common::raw(
        "bounded",
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["n"]}),
    );
    let (tool, notes) = export_one(&spec, ExportFormat::Anthropic, &STRICT).unwrap();
    assert_eq!(
        tool["input_schema"]["properties"]["n"],
        json!({"type": "integer"})
    );
    assert!(
        notes
            .iter()
            .any(|n| n.path == "input_schema.properties.n.minimum"
                && n.message.contains("toolgate still enforces it"))
    );

    // More optional parameters than strict tool use takes in a request.
    let props: Map<String, Value> = (0..25)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let spec = common::raw("many", json!({"type": "object", "properties": props}));
    let err = export_one(&spec, ExportFormat::Anthropic, &STRICT).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot export tool many in Anthropic strict tool use: the schema has 25 optional properties; strict tool use allows (across the strict tools of a request) at most 24"
    );
}

#[test]
fn anthropic_strict_notes_the_per_request_limits() {
    // 21 strict tools of 2 optional properties (one a union) each: past every per-request limit.
    let specs: Vec<_> = (0..21)
        .map(|i| {
            common::raw(
                &format!("tool_{i:02}"),
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]}}}),
            )
        })
        .collect();
    let out = export(&specs, ExportFormat::Anthropic, &STRICT).unwrap();
    let limits: Vec<(&str, &str)> = out
        .notes
        .iter()
        .filter(|n| n.path == "strict")
        .map(|n| (n.tool.as_str(), n.message.as_str()))
        .collect();
    assert_eq!(limits.len(), 3, "{limits:?}");
    assert_eq!(limits[0].0, "tool_12");
    assert!(
        limits[0].1.starts_with("With this tool the strict tools have 26 optional properties together, and Anthropic takes at most 24 in one request"),
        "{}",
        limits[0].1
    );
    assert_eq!(limits[1].0, "tool_16");
    assert!(
        limits[1].1.contains("17 properties with union types"),
        "{}",
        limits[1].1
    );
    assert_eq!(limits[2].0, "tool_20");
    assert!(
        limits[2].1.contains("21 strict tools together"),
        "{}",
        limits[2].1
    );
    // Without strict, no such notes.
    let plain = export(&specs, ExportFormat::Anthropic, &PLAIN).unwrap();
    assert!(plain.notes.iter().all(|n| n.path != "strict"));
}

#[test]
fn anthropic_input_examples_come_from_the_schema_and_must_match_it() {
    let spec = common::raw(
        "lookup",
        json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
               "examples": [{"id": 7}, {"id": "seven"}, "not an object"]}),
    );
    for options in [PLAIN, STRICT] {
        let (tool, notes) = export_one(&spec, ExportFormat::Anthropic, &options).unwrap();
        assert_eq!(tool["input_examples"], json!([{"id": 7}]));
        assert_eq!(tool["input_schema"].get("examples"), None);
        let paths: Vec<&str> = notes.iter().map(|n| n.path.as_str()).collect();
        assert!(paths.contains(&"input_schema.examples[1]"), "{paths:?}");
        assert!(paths.contains(&"input_schema.examples[2]"), "{paths:?}");
        assert!(
            notes[0]
                .message
                .contains("the tool's input schema rejects this example")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Required strict mode

#[test]
fn require_strict_fails_listing_every_tool_and_reason() {
    let bad_a = common::raw(
        "bad_a",
        json!({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {"^x": {"type": "string"}}}}}),
    );
    let bad_b = common::raw(
        "bad_b",
        json!({"type": "object", "properties": {"meta": {"type": "object"}}}),
    );
    let good = common::fixture("get_weather");
    let specs = vec![bad_a, good.clone(), bad_b];
    for format in [
        ExportFormat::OpenAi,
        ExportFormat::OpenAiResponses,
        ExportFormat::Anthropic,
    ] {
        let err = export(&specs, format, &REQUIRE_STRICT).unwrap_err();
        assert_eq!(err.kind(), ExportErrorKind::Unsupported);
        let ExportError::NotStrict { failures, .. } = &err else {
            panic!("{err:?}");
        };
        let tools: Vec<Option<&str>> = failures.iter().map(ExportError::tool).collect();
        assert_eq!(tools, [Some("bad_a"), Some("bad_b")], "{format}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "Cannot export to {format} with strict mode required: 2 tools cannot be strict"
            )),
            "{text}"
        );
        assert!(
            text.contains("\n  - Cannot export tool bad_a") && text.contains("patternProperties"),
            "{text}"
        );
        assert!(
            text.contains("\n  - Cannot export tool bad_b") && text.contains("free-form"),
            "{text}"
        );
        // Every tool that can be strict exports strict.
        let ok = export(std::slice::from_ref(&good), format, &REQUIRE_STRICT).unwrap();
        let tool = &ok.document[0];
        assert_eq!(
            tool.get("function").unwrap_or(tool)["strict"],
            true,
            "{format}"
        );
    }
    for format in [
        ExportFormat::Gemini,
        ExportFormat::GeminiJsonSchema,
        ExportFormat::Mcp,
    ] {
        let err = export(&specs, format, &REQUIRE_STRICT).unwrap_err();
        assert_eq!(err, ExportError::StrictNotSupported(format));
    }
}

// ---------------------------------------------------------------------------------------------
// Gemini with JSON Schema

/// Keywords the JSON Schema variant may emit (Gemini's documented JSON Schema support).
const GEMINI_JSON_FIELDS: &[&str] = &[
    "$ref",
    "$defs",
    "type",
    "title",
    "description",
    "enum",
    "format",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "uniqueItems",
    "anyOf",
    "propertyOrdering",
];

#[test]
fn gemini_json_schema_keeps_references_and_exports_output_schemas() {
    let out = export(&common::fixtures(), ExportFormat::GeminiJsonSchema, &PLAIN).unwrap();
    for tool in tools(&out, ExportFormat::GeminiJsonSchema) {
        let name = tool["name"].as_str().unwrap();
        assert_eq!(tool.get("parameters"), None, "{name}");
        for key in ["parametersJsonSchema", "responseJsonSchema"] {
            if let Some(schema) = tool.get(key) {
                walk_schemas(schema, key, &mut |path, m| {
                    for k in m.keys() {
                        assert!(
                            GEMINI_JSON_FIELDS.contains(&k.as_str()),
                            "{name}: {path} has {k}"
                        );
                    }
                });
            }
        }
    }
    let decls = tools(&out, ExportFormat::GeminiJsonSchema);
    let catalog = decls
        .iter()
        .find(|t| t["name"] == "search_catalog")
        .unwrap();
    let params = &catalog["parametersJsonSchema"];
    assert_eq!(
        params["properties"]["min_price"],
        json!({"$ref": "#/$defs/money"})
    );
    assert_eq!(params["additionalProperties"], false);
    assert_eq!(
        params["properties"]["cursor"]["type"],
        json!(["string", "null"])
    );
    let summarize = decls
        .iter()
        .find(|t| t["name"] == "summarize_document")
        .unwrap();
    assert_eq!(
        summarize["responseJsonSchema"]["required"],
        json!(["summary", "word_count"])
    );
    assert_eq!(params["properties"]["query"]["minLength"], 1);
    assert!(out.notes.iter().any(
        |n| n.tool == "search_catalog" && n.path == "parametersJsonSchema.properties.sku.oneOf"
    ));
}

// ---------------------------------------------------------------------------------------------
// MCP

#[test]
fn mcp_annotations_follow_the_governance_fields() {
    // (category, effect, consequence, idempotent) → (readOnly, destructive, idempotent, openWorld)
    let cases = [
        (
            Category::Filesystem,
            Effect::Read,
            Consequence::Low,
            None,
            (true, false, true, false),
        ),
        (
            Category::Filesystem,
            Effect::Delete,
            Consequence::Low,
            None,
            (false, true, false, false),
        ),
        (
            Category::Database,
            Effect::Write,
            Consequence::High,
            None,
            (false, true, false, false),
        ),
        (
            Category::Database,
            Effect::Write,
            Consequence::Medium,
            Some(true),
            (false, false, true, false),
        ),
        (
            Category::System,
            Effect::SideEffect,
            Consequence::Low,
            None,
            (false, false, false, true),
        ),
        (
            Category::Network,
            Effect::Read,
            Consequence::Low,
            None,
            (true, false, true, true),
        ),
        (
            Category::ExternalApi,
            Effect::Read,
            Consequence::Low,
            Some(false),
            (true, false, false, true),
        ),
        (
            Category::Communication,
            Effect::Write,
            Consequence::Low,
            None,
            (false, false, false, true),
        ),
        (
            Category::Knowledge,
            Effect::Read,
            Consequence::High,
            None,
            (true, false, true, false),
        ),
    ];
    for (category, effect, consequence, idempotent, (ro, destructive, idem, open)) in cases {
        let mut builder =
            ToolBuilder::new("probe", "A test tool used to check the MCP annotations.")
                .category(category)
                .effect(effect)
                .consequence(consequence)
                .param(Parameter::new("x", ParamType::String).description("Anything"));
        if let Some(yes) = idempotent {
            builder = builder.idempotent(yes);
        }
        let spec = validate(builder.definition()).unwrap();
        let (tool, _) = export_one(&spec, ExportFormat::Mcp, &PLAIN).unwrap();
        let case = format!("{category:?}/{effect:?}/{consequence:?}");
        assert_eq!(
            tool["annotations"],
            json!({"readOnlyHint": ro, "destructiveHint": destructive, "idempotentHint": idem, "openWorldHint": open}),
            "{case}"
        );
        let meta = &tool["_meta"][GOVERNANCE_META_KEY];
        assert_eq!(meta["effect"], json!(effect), "{case}");
        assert_eq!(meta["definitionHash"], spec.definition_hash(), "{case}");
    }
}

#[test]
fn mcp_output_schema_only_when_it_is_an_object() {
    let out = export(&common::fixtures(), ExportFormat::Mcp, &PLAIN).unwrap();
    let listed = tools(&out, ExportFormat::Mcp);
    let by_name = |n: &str| listed.iter().find(|t| t["name"] == n).unwrap().clone();
    assert_eq!(
        by_name("summarize_document")["outputSchema"]["type"],
        "object"
    );
    assert_eq!(by_name("summarize_document")["title"], "Summarize document");
    assert_eq!(
        by_name("summarize_document")["annotations"]["title"],
        "Summarize document"
    );
    assert!(by_name("list_inbox").get("outputSchema").is_none());
    assert!(by_name("get_weather").get("outputSchema").is_none());
    assert!(by_name("get_weather").get("title").is_none());
    let note = out.notes.iter().find(|n| n.tool == "list_inbox").unwrap();
    assert_eq!(note.path, "outputSchema");
}

// ---------------------------------------------------------------------------------------------
// Whole exports

#[test]
fn exports_are_deterministic_and_keep_the_given_order() {
    let specs = common::fixtures();
    let mut reversed = specs.clone();
    reversed.reverse();
    for format in ExportFormat::ALL {
        let a = export(&specs, format, &PLAIN).unwrap();
        let b = export(&specs, format, &PLAIN).unwrap();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "{format}"
        );
        let names: Vec<Value> = tools(&export(&reversed, format, &PLAIN).unwrap(), format)
            .iter()
            .map(|t| {
                t.pointer("/function/name")
                    .or(t.get("name"))
                    .unwrap()
                    .clone()
            })
            .collect();
        let want: Vec<Value> = reversed.iter().map(|s| json!(s.name().as_str())).collect();
        assert_eq!(names, want, "{format}");
    }
}

#[test]
fn bad_requests_are_refused() {
    let specs = common::fixtures();
    for format in [
        ExportFormat::Gemini,
        ExportFormat::GeminiJsonSchema,
        ExportFormat::Mcp,
    ] {
        let err = export(&specs, format, &STRICT).unwrap_err();
        assert_eq!(err, ExportError::StrictNotSupported(format));
        assert_eq!(err.kind(), ExportErrorKind::BadRequest);
    }
    let twice = vec![specs[0].clone(), specs[0].clone()];
    let err = export(&twice, ExportFormat::Mcp, &PLAIN).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot export: tool get_weather is listed more than once, and tool names must be unique"
    );
    assert_eq!(err.kind(), ExportErrorKind::Conflict);
}

#[test]
fn format_names_round_trip() {
    for format in ExportFormat::ALL {
        assert_eq!(format.to_string().parse::<ExportFormat>().unwrap(), format);
        assert_eq!(
            serde_json::to_value(format).unwrap(),
            json!(format.as_str())
        );
    }
    assert_eq!(
        "OpenAI-Responses".parse::<ExportFormat>().unwrap(),
        ExportFormat::OpenAiResponses
    );
    let err = "claude".parse::<ExportFormat>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown export format \"claude\": use one of openai, openai-responses, anthropic, gemini, gemini-json-schema, mcp"
    );
    assert!(
        export(&[], ExportFormat::Gemini, &PLAIN).unwrap().document
            == json!({"functionDeclarations": []})
    );
}

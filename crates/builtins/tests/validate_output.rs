//! `validate_output`: seed 002's example exactly (through a real pipeline), the shipped
//! `domain_map` type's errors and warnings, `errorMessage` rules, loading types from files, and
//! refusals (unknown type, bad definitions).
#![cfg(test)]

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_builtins::{
    DOMAIN_MAP_DEFINITION, OutputTypeError, OutputTypes, VALIDATE_OUTPUT, ValidateOutput,
};
use toolgate_core::{
    CallRequest, Category, Effect, ErrorKind, Pipeline, PipelineBuilder, Principal, PrincipalId,
    Registry, Tool, ToolResult, validate,
};

fn pipeline(types: OutputTypes) -> Pipeline {
    let registry = Arc::new(Registry::new());
    registry
        .register_all(vec![Arc::new(ValidateOutput::new(Arc::new(types)))], true)
        .unwrap();
    PipelineBuilder::new(registry).build()
}

/// A caller with no grants at all: the tool needs no permission.
async fn call(p: &Pipeline, args: Value) -> ToolResult {
    p.call(
        CallRequest::new(VALIDATE_OUTPUT, args)
            .principal(Principal::new(PrincipalId::parse("agent").unwrap())),
    )
    .await
}

fn domain_map(data: Value) -> Value {
    OutputTypes::with_defaults()
        .check("domain_map", &data)
        .map(|r| serde_json::to_value(r).unwrap())
        .unwrap()
}

#[tokio::test]
async fn seed_002_example_exactly() {
    let p = pipeline(OutputTypes::with_defaults());
    let r = call(
        &p,
        json!({"outputType":"domain_map","data":{"domains":[],"layout":{},"summary":{}}}),
    )
    .await;
    assert_eq!(
        r.data().unwrap(),
        &json!({"valid":false,"errors":["Missing 'domains' array"],"warnings":[]})
    );
}

#[tokio::test]
async fn a_good_domain_map_is_valid_without_warnings() {
    let p = pipeline(OutputTypes::with_defaults());
    let data = json!({
        "domains": [
            {"name": "Product settings", "description": "Where a product is configured",
             "paths": ["/apps/webapp/settings"], "sources": ["github:org/repo"], "confidence": 0.9},
            {"name": "Dashboard", "description": "The home view", "sources": ["github:org/repo"]}
        ],
        "layout": {"groups": [["Product settings", "Dashboard"]]},
        "summary": {"text": "Two domains"}
    });
    let r = call(&p, json!({"outputType": "domain_map", "data": data})).await;
    assert_eq!(
        r.data().unwrap(),
        &json!({"valid": true, "errors": [], "warnings": []})
    );
}

#[test]
fn domain_map_errors() {
    // Missing, empty or mistyped domains all read as the seed's message.
    for data in [
        json!({"layout": {}, "summary": {}}),
        json!({"domains": "billing", "layout": {}, "summary": {}}),
        json!({"domains": [], "layout": {}, "summary": {}}),
    ] {
        assert_eq!(
            domain_map(data)["errors"],
            json!(["Missing 'domains' array"])
        );
    }
    let report = domain_map(json!({
        "domains": [
            {"name": ""},
            "billing",
            {"description": "no name", "paths": ["/x"]},
            {"name": "Search", "confidence": 2, "paths": [3]}
        ],
        "summary": []
    }));
    insta::assert_json_snapshot!(report);
    assert_eq!(
        domain_map(json!("just text"))["errors"],
        json!(["A domain map must be a JSON object with domains, layout and summary"])
    );
}

#[test]
fn domain_map_warnings_never_make_it_invalid() {
    let report = domain_map(json!({
        "domains": [
            {"name": "Billing"},
            {"name": "Search", "description": "", "paths": []},
            {"name": "Auth", "description": "Sign-in", "sources": ["github:org/auth"], "confidence": 0.2}
        ],
        "layout": {},
        "summary": {}
    }));
    assert_eq!(report["valid"], true);
    assert_eq!(report["errors"], json!([]));
    assert_eq!(
        report["warnings"],
        json!([
            "Domain 'Billing' has no description",
            "Domain 'Billing' names no paths or sources; say where it lives",
            "Domain 'Search' has an empty description",
            "Domain 'Search' names no paths or sources; say where it lives",
            "Domain 'Auth' has a low confidence (0.2); check it or say why in its description"
        ])
    );
}

#[test]
fn generic_messages_name_the_path_and_custom_ones_follow_the_rules() {
    let mut types = OutputTypes::new();
    types
        .insert(
            "report",
            json!({
                "schema": {
                    "$defs": {"count": {"type": "integer", "errorMessage": "${path} must be a whole number, not ${0}"}},
                    "type": "object",
                    "required": ["title", "rows"],
                    "properties": {
                        "title": {"type": "string", "errorMessage": {"required": "A report needs a title", "type": "The title must be text"}},
                        "rows": {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "count": {"$ref": "#/$defs/count"}}}},
                        "tags": {"type": "array", "maxItems": 2, "errorMessage": {"_": "At most two tags"}}
                    },
                    "additionalProperties": false
                }
            }),
        )
        .unwrap();
    let check = |data: Value| serde_json::to_value(types.check("report", &data).unwrap()).unwrap();
    assert_eq!(
        check(json!({"rows": []}))["errors"],
        json!(["A report needs a title"])
    );
    assert_eq!(
        check(
            json!({"title": 5, "rows": [{"id": 1}, {"count": 2.5, "id": "b"}, {}], "tags": ["a", "b", "c"], "extra": true})
        )["errors"],
        json!([
            "The title must be text",
            "/rows/0/id: value is not of type \"string\"",
            "/rows/1/count must be a whole number, not 2.5",
            "/rows/2: \"id\" is a required property",
            "At most two tags",
            "(root): Additional properties are not allowed ('extra' was unexpected)"
        ])
    );
    assert_eq!(
        check(json!({"title": "t", "rows": []})),
        json!({"valid": true, "errors": [], "warnings": []})
    );
}

#[tokio::test]
async fn unknown_output_type_lists_the_known_ones() {
    let mut types = OutputTypes::with_defaults();
    types
        .insert("release_notes", json!({"schema": {"type": "object"}}))
        .unwrap();
    let p = pipeline(types);
    let r = call(&p, json!({"outputType": "domain_mapp", "data": {}})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Validation));
    assert_eq!(
        r.error().unwrap(),
        "Unknown output type \"domain_mapp\"; known types: domain_map, release_notes"
    );
    let r = call(
        &pipeline(OutputTypes::new()),
        json!({"outputType": "x", "data": 1}),
    )
    .await;
    assert_eq!(
        r.error().unwrap(),
        "Unknown output type \"x\"; none are configured"
    );
    // data is required (null is a value to check, and fails the type)
    let r = call(&p, json!({"outputType": "domain_map"})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Validation));
    let r = call(&p, json!({"outputType": "domain_map", "data": null})).await;
    assert_eq!(r.data().unwrap()["valid"], false);
}

#[test]
fn definition_is_valid_and_governed() {
    let tool = ValidateOutput::new(Arc::new(OutputTypes::with_defaults()));
    let def = tool.definition();
    let spec = validate(&def).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(def.name, VALIDATE_OUTPUT);
    assert_eq!(def.category, Some(Category::System));
    assert_eq!(def.effect, Some(Effect::Read));
    assert!(def.required_permissions.is_empty());
    assert!(def.description.contains("domain_map"));
    let help = def.input_schema.as_ref().unwrap()["properties"]["outputType"]["description"]
        .as_str()
        .unwrap();
    assert!(
        help.contains("domain_map: A map of a product's functional domains"),
        "{help}"
    );
}

#[test]
fn the_shipped_example_file_is_the_embedded_default() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/output_types/domain_map.json");
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        DOMAIN_MAP_DEFINITION
    );
    let types = OutputTypes::with_defaults();
    assert_eq!(types.names().collect::<Vec<_>>(), ["domain_map"]);
    assert!(types.get("domain_map").unwrap().warnings_schema().is_some());
}

#[test]
fn loading_types_from_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("release_notes.json"),
        r#"{"description": "Notes", "schema": {"type": "object", "required": ["version"]}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("domain_map.json"),
        r#"{"schema": {"type": "array"}}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "not a type").unwrap();
    let mut types = OutputTypes::with_defaults();
    let names = types.load_dir(dir.path()).unwrap();
    assert_eq!(names, ["domain_map", "release_notes"]);
    // the file replaced the default domain_map
    assert_eq!(
        types.check("domain_map", &json!([])).unwrap().errors,
        Vec::<String>::new()
    );
    assert_eq!(
        types.check("release_notes", &json!({})).unwrap().errors,
        vec!["(root): \"version\" is a required property".to_owned()]
    );

    // refusals name the file or the type and what is wrong
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("broken.json"), "{").unwrap();
    let err = OutputTypes::new().load_dir(bad.path()).unwrap_err();
    assert!(matches!(err, OutputTypeError::Io { .. }), "{err}");
    assert!(err.to_string().contains("broken.json"), "{err}");
    let err = OutputTypes::new()
        .load_dir(&dir.path().join("missing"))
        .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn bad_definitions_are_refused() {
    let mut types = OutputTypes::new();
    let cases = [
        ("Domain-Map", json!({"schema": {}})),
        ("ok_name", json!([])),
        ("ok_name", json!({"description": "no schema"})),
        (
            "ok_name",
            json!({"schema": {"type": "object"}, "warning": {}}),
        ),
        ("ok_name", json!({"schema": {"type": "nope"}})),
        (
            "ok_name",
            json!({"schema": {}, "warnings": {"minItems": -1}}),
        ),
        ("ok_name", json!({"schema": "string"})),
    ];
    let mut out = String::new();
    for (name, def) in cases {
        let err = types.insert(name, def).unwrap_err();
        out.push_str(&format!("{err}\n"));
    }
    assert!(types.is_empty());
    insta::assert_snapshot!(out);
}

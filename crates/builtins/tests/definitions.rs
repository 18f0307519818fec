//! The built-in definitions: each validates without errors or warnings, carries the governance
//! fields seed 001 and DESIGN.md ask for, and real outputs match its output schema.
#![cfg(test)]

use std::fs;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_builtins::{BUILTIN_NAMES, builtin_tools};
use toolgate_core::{
    Category, Consequence, Effect, Principal, Tool, ToolContext, ToolName, validate,
};

fn tools() -> (tempfile::TempDir, Vec<Arc<dyn Tool>>) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    fs::write(dir.path().join("sub/a.txt"), "aaa").unwrap();
    let tools = builtin_tools(dir.path()).unwrap();
    (dir, tools)
}

#[test]
fn every_definition_validates_without_errors_or_warnings() {
    let (_dir, tools) = tools();
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    assert_eq!(names, BUILTIN_NAMES);
    for tool in &tools {
        let def = tool.definition();
        let spec = validate(&def).unwrap_or_else(|r| panic!("{}: {r:?}", def.name));
        assert!(
            spec.warnings().is_empty(),
            "{}: {:?}",
            def.name,
            spec.warnings()
        );
        assert!(
            def.output_schema.is_some(),
            "{} has no output schema",
            def.name
        );
        assert!(def.title.is_some(), "{} has no title", def.name);
        assert!(
            def.description.len() >= 300,
            "{}: the description is the routing contract; say what, when and the limits",
            def.name
        );
        for p in &def.parameters {
            assert!(!p.description.is_empty(), "{}.{}", def.name, p.name);
        }
    }
}

/// What one built-in must declare.
struct Expect {
    name: &'static str,
    category: Category,
    effect: Effect,
    consequence: Consequence,
    confirmation: bool,
    permissions: &'static [&'static str],
    required: &'static [&'static str],
}

const FILES: Category = Category::Filesystem;

#[test]
fn governance_fields() {
    let (_dir, tools) = tools();
    let want = [
        Expect {
            name: "calculator",
            category: Category::System,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &[],
            required: &["expression"],
        },
        Expect {
            name: "read_file",
            category: FILES,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &["tool.filesystem.read"],
            required: &["path"],
        },
        Expect {
            name: "write_file",
            category: FILES,
            effect: Effect::Write,
            consequence: Consequence::Medium,
            confirmation: true,
            permissions: &["tool.filesystem.write"],
            required: &["path", "content"],
        },
        Expect {
            name: "list_directory",
            category: FILES,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &["tool.filesystem.read"],
            required: &["path"],
        },
        Expect {
            name: "delete_file",
            category: FILES,
            effect: Effect::Delete,
            consequence: Consequence::High,
            confirmation: true,
            permissions: &["tool.filesystem.delete"],
            required: &["path"],
        },
        Expect {
            name: "web_search",
            category: Category::Network,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &["tool.network.search"],
            required: &["query"],
        },
        Expect {
            name: "wikipedia",
            category: Category::Knowledge,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &["tool.network.search"],
            required: &["query"],
        },
        Expect {
            name: "web_scraper",
            category: Category::Network,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &["tool.network.fetch"],
            required: &["url"],
        },
        Expect {
            name: "todo_manager",
            category: Category::System,
            effect: Effect::Write,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &["tool.todo.write"],
            required: &["action"],
        },
        Expect {
            name: "validate_output",
            category: Category::System,
            effect: Effect::Read,
            consequence: Consequence::Low,
            confirmation: false,
            permissions: &[],
            required: &["outputType", "data"],
        },
    ];
    assert_eq!(tools.len(), want.len());
    for (tool, want) in tools.iter().zip(&want) {
        let name = want.name;
        let spec = validate(&tool.definition()).unwrap();
        assert_eq!(spec.name().as_str(), name);
        assert_eq!(spec.category(), want.category, "{name}");
        assert_eq!(spec.effect(), want.effect, "{name}");
        assert_eq!(spec.consequence(), want.consequence, "{name}");
        assert_eq!(spec.requires_confirmation(), want.confirmation, "{name}");
        let got: Vec<&str> = spec
            .required_permissions()
            .iter()
            .map(|p| p.as_str())
            .collect();
        assert_eq!(got, want.permissions, "{name}");
        assert_eq!(
            spec.input_schema()["required"],
            json!(want.required),
            "{name} required parameters"
        );
        assert_eq!(spec.input_schema()["additionalProperties"], json!(false));
    }
}

#[test]
fn input_schemas_carry_seed_001_defaults() {
    let (_dir, tools) = tools();
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.definition().name == name).unwrap();
        validate(&tool.definition()).unwrap().input_schema().clone()
    };
    let list = schema("list_directory");
    assert_eq!(list["properties"]["recursive"]["default"], json!(false));
    let read = schema("read_file");
    assert_eq!(read["properties"]["encoding"]["default"], json!("utf-8"));
    assert_eq!(
        read["properties"]["encoding"]["enum"],
        json!(["utf-8", "base64"])
    );
}

fn check(schema: &Value, instance: &Value, what: &str) {
    let validator = jsonschema::draft202012::new(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{what}: {instance} fails: {errors:?}");
}

#[tokio::test]
async fn real_outputs_match_the_output_schemas() {
    let (_dir, tools) = tools();
    let calls: &[(&str, Value)] = &[
        ("calculator", json!({"expression": "2 + 2"})),
        ("calculator", json!({"expression": "sqrt(2)"})),
        (
            "read_file",
            json!({"path": "sub/a.txt", "encoding": "utf-8"}),
        ),
        (
            "read_file",
            json!({"path": "sub/a.txt", "encoding": "base64"}),
        ),
        ("write_file", json!({"path": "new/b.txt", "content": "bbb"})),
        ("list_directory", json!({"path": ".", "recursive": true})),
        ("list_directory", json!({"path": "sub", "recursive": false})),
        // Pages with a nextCursor.
        (
            "list_directory",
            json!({"path": ".", "recursive": true, "limit": 1}),
        ),
        (
            "write_file",
            json!({"path": "new/lines.txt", "content": "one\ntwo\n"}),
        ),
        ("read_file", json!({"path": "new/lines.txt", "limit": 1})),
        ("delete_file", json!({"path": "new/b.txt"})),
    ];
    for (name, args) in calls {
        let tool = tools.iter().find(|t| t.definition().name == *name).unwrap();
        let spec = validate(&tool.definition()).unwrap();
        check(spec.input_schema(), args, &format!("{name} input"));
        let ctx = ToolContext::detached(ToolName::parse(name).unwrap(), Principal::local());
        let out = tool
            .call(args.clone(), ctx)
            .await
            .unwrap_or_else(|e| panic!("{name} {args}: {e}"));
        check(
            spec.output_schema().unwrap(),
            &out,
            &format!("{name} output"),
        );
    }
}

//! The newcomer's path: `toolgate init` (a project that validates and loads, never overwritten)
//! and the editor schemas of `toolgate schema` (published in docs/schemas/, true to the parser:
//! they accept every definition and config in the repository and reject broken ones).
#![cfg(test)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use toolgate_core::{Format, ToolDefinition};
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The schema `toolgate schema WHAT` prints, as a validator.
fn validator(what: &str) -> jsonschema::Validator {
    let tg = Toolgate::new(BIN, std::env::temp_dir());
    let schema: Value = serde_json::from_str(&ok(&tg.output(["schema", what]))).unwrap();
    jsonschema::draft202012::new(&schema).unwrap()
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A definition or config file as JSON, whatever its format.
fn as_json(text: &str, format: Format) -> Value {
    match format {
        Format::Toml => toml::from_str(text).unwrap(),
        Format::Json => serde_json::from_str(text).unwrap(),
        Format::Yaml => serde_norway::from_str(text).unwrap(),
    }
}

#[test]
fn the_published_schemas_are_the_generated_ones() {
    let tg = Toolgate::new(BIN, std::env::temp_dir());
    for what in ["definition", "config"] {
        let generated = ok(&tg.output(["schema", what]));
        let path = repo().join(format!("docs/schemas/{what}.schema.json"));
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            generated == committed,
            "docs/schemas/{what}.schema.json differs from what the code generates; regenerate it with\n  cargo run -p toolgate-cli -- schema {what} > docs/schemas/{what}.schema.json\nand review the diff"
        );
    }
}

/// Every definition file in the repository, and every TOML block of the README that is one.
fn repo_definitions() -> Vec<(String, String, Format)> {
    let mut files = Vec::new();
    for dir in [
        "examples/http-tools",
        "crates/export/tests/fixtures",
        "crates/cli/src/init/tools",
    ] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if let Some(format) = Format::from_path(&path) {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.display().to_string(), text, format));
            }
        }
    }
    let good = repo().join("crates/cli/tests/fixtures/get_weather.toml");
    files.push((
        good.display().to_string(),
        std::fs::read_to_string(&good).unwrap(),
        Format::Toml,
    ));
    for (line, block) in readme_toml_blocks() {
        if block.contains("\nname = ") || block.starts_with("name = ") {
            files.push((format!("README.md:{line}"), block, Format::Toml));
        }
    }
    files
}

/// Every config: the one `toolgate init` writes and the README's config blocks.
fn repo_configs() -> Vec<(String, String)> {
    let mut files = vec![(
        "crates/cli/src/init/toolgate.toml".to_owned(),
        std::fs::read_to_string(repo().join("crates/cli/src/init/toolgate.toml")).unwrap(),
    )];
    for (line, block) in readme_toml_blocks() {
        let definition = block.contains("\nname = ") || block.starts_with("name = ");
        // `[run]` alone is a fragment of a definition.
        if !definition && !block.starts_with("[run]") {
            files.push((format!("README.md:{line}"), block));
        }
    }
    files
}

/// The README's ```toml blocks with the line each starts on.
fn readme_toml_blocks() -> Vec<(usize, String)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in readme.lines().enumerate() {
        match &mut current {
            None if line.trim() == "```toml" => current = Some((i + 2, String::new())),
            Some(_) if line.trim() == "```" => blocks.extend(current.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn the_schemas_accept_every_definition_and_config_in_the_repository() {
    let definition = validator("definition");
    let defs = repo_definitions();
    assert!(defs.len() >= 15, "{}", defs.len());
    for (name, text, format) in &defs {
        ToolDefinition::parse(text, *format).unwrap_or_else(|e| panic!("{name}: {e}"));
        let problems = errors(&definition, &as_json(text, *format));
        assert!(problems.is_empty(), "{name}: {problems:#?}");
    }
    let config = validator("config");
    let configs = repo_configs();
    assert!(configs.len() >= 6, "{}", configs.len());
    for (name, text) in &configs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(&path, text).unwrap();
        toolgate_runtime::Config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let problems = errors(&config, &as_json(text, Format::Toml));
        assert!(problems.is_empty(), "{name}: {problems:#?}");
    }
}

const GOOD: &str = r#"
name = "get_weather"
description = "Current weather for a city. Use for conditions now."
[[parameters]]
name = "city"
type = "string"
description = "City name"
required = true
"#;

#[test]
fn the_schemas_reject_broken_files_as_toolgate_does() {
    let definition = validator("definition");
    // Each breaks one rule; the schema and toolgate (parser or validation) both refuse it.
    let broken = [
        ("unknown field", "requird = [\"city\"]\n"),
        ("wrong type", "tags = \"weather\"\n"),
        ("bad enum", "effect = \"destroy\"\n"),
        ("bad category", "category = \"weather\"\n"),
        ("timeout out of range", "[constraints]\ntimeout_ms = 999\n"),
        ("unknown run kind", "[run]\nkind = \"shell\"\n"),
        (
            "bad parameter type",
            "[[parameters]]\nname = \"days\"\ntype = \"int\"\n",
        ),
        (
            "unknown parameter field",
            "[[parameters]]\nname = \"days\"\ntype = \"integer\"\nrequird = true\n",
        ),
    ];
    let mut good = toml::from_str::<toml::Table>(GOOD).unwrap();
    assert!(errors(&definition, &serde_json::to_value(&good).unwrap()).is_empty());
    for (what, extra) in broken {
        let text = if extra.starts_with('[') {
            format!("{GOOD}{extra}")
        } else {
            format!("{extra}{GOOD}")
        };
        let doc = as_json(&text, Format::Toml);
        assert!(
            !errors(&definition, &doc).is_empty(),
            "the schema accepts a definition with {what}:\n{text}"
        );
        let refused = match ToolDefinition::parse(&text, Format::Toml) {
            Err(_) => true,
            Ok(def) => toolgate_core::validate(&def).is_err(),
        };
        assert!(refused, "toolgate accepts a definition with {what}");
    }
    // Whole-document mistakes: a bad name, no description.
    good.insert("name".into(), "Get Weather".into());
    assert!(!errors(&definition, &serde_json::to_value(&good).unwrap()).is_empty());
    good.insert("name".into(), "get_weather".into());
    good.remove("description");
    assert!(!errors(&definition, &serde_json::to_value(&good).unwrap()).is_empty());

    let config = validator("config");
    let broken = [
        ("unknown section", "[sever]\nmax_sessions = 3\n"),
        ("unknown key", "[server]\nmax_session = 3\n"),
        ("bad plan", "plan = \"gold\"\n"),
        ("wrong type", "[network]\nmax_redirects = \"five\"\n"),
        (
            "bad permission",
            "[principals.agent]\ngrants = [\"Tool Read\"]\n",
        ),
        (
            "misspelt server key",
            "[servers.files]\ncomand = \"/usr/bin/npx\"\n",
        ),
        (
            "bad isolation",
            "[servers.files]\ncommand = \"/usr/bin/npx\"\nisolation = \"tight\"\n",
        ),
        (
            "zero attempts",
            "[approvals]\nwebhook_max_attempts = 0\nwebhook_url = \"https://h.example/x\"\nwebhook_secret_env = \"S\"\n",
        ),
    ];
    for (what, text) in broken {
        assert!(
            !errors(&config, &as_json(text, Format::Toml)).is_empty(),
            "the schema accepts a config with {what}:\n{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(&path, text).unwrap();
        let refused = toolgate_runtime::Config::load(&path)
            .and_then(|c| {
                c.approvals
                    .webhook_with_vars(|_| Some("secret".into()))
                    .map(|_| c)
            })
            .is_err();
        assert!(refused, "toolgate accepts a config with {what}");
    }
}

#[test]
fn a_json_definition_may_name_its_schema_and_every_alias_is_in_it() {
    let with = r#"{"$schema": "../schemas/definition.schema.json", "name": "echo_text", "description": "Returns the text. Use to test."}"#;
    let without = r#"{"name": "echo_text", "description": "Returns the text. Use to test."}"#;
    let parsed = ToolDefinition::parse(with, Format::Json).unwrap();
    assert_eq!(
        parsed,
        ToolDefinition::parse(without, Format::Json).unwrap()
    );
    assert!(!parsed.render(Format::Json).unwrap().contains("$schema"));
    let definition = validator("definition");
    assert!(errors(&definition, &serde_json::from_str(with).unwrap()).is_empty());

    // The camelCase aliases the parser takes are in the schema, with their field's type.
    let mut doc: serde_json::Map<String, Value> = serde_json::from_str(without).unwrap();
    let mut constraints = serde_json::Map::new();
    let sample = |field: &str| -> Value {
        match field {
            "consequence" => "high".into(),
            "safety_level" => "dangerous".into(),
            "tasks" => "optional".into(),
            "requires_confirmation" | "allow_side_effects" => true.into(),
            "input_schema" => serde_json::json!({"type": "object"}),
            "output_schema" => serde_json::json!({"type": "string"}),
            "required_permissions" => serde_json::json!(["tool.x.read"]),
            "depends_on" => serde_json::json!([]),
            "timeout_ms" => 2000.into(),
            "max_output_bytes" => 4096.into(),
            "max_attempts" => 2.into(),
            other => panic!("no sample for {other}"),
        }
    };
    for (object, alias, field) in toolgate_core::DEFINITION_ALIASES {
        let target = if object.is_empty() {
            &mut doc
        } else {
            &mut constraints
        };
        target.insert((*alias).to_owned(), sample(field));
    }
    doc.insert("constraints".into(), Value::Object(constraints));
    let doc = Value::Object(doc);
    ToolDefinition::parse(&doc.to_string(), Format::Json).unwrap();
    assert_eq!(errors(&definition, &doc), Vec::<String>::new());
}

/// Runs `toolgate ARGS` in `dir` with the project's database.
fn in_dir(dir: &Path, args: &[&str]) -> Output {
    Toolgate::new(BIN, dir).output(args)
}

fn snapshot_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn init_writes_a_project_that_validates_and_loads_and_never_overwrites() {
    let parent = tempfile::tempdir().unwrap();
    let out = in_dir(parent.path(), &["init", "project"]);
    insta::assert_snapshot!(ok(&out));
    let dir = parent.path().join("project");

    // The example tools validate against the written config; the config loads.
    let mut validate = vec!["--config", "toolgate.toml", "tools", "validate"];
    let tools: Vec<String> = std::fs::read_dir(dir.join("tools"))
        .unwrap()
        .map(|e| format!("tools/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    assert_eq!(tools.len(), 3);
    validate.extend(tools.iter().map(String::as_str));
    let report = ok(&in_dir(&dir, &validate));
    assert!(report.contains("3 of 3 file(s) valid"), "{report}");
    let list = ok(&in_dir(
        &dir,
        &["--config", "toolgate.toml", "tools", "list", "--json"],
    ));
    let list: Value = serde_json::from_str(&list).unwrap();
    for name in ["utc_time", "toolgate_health", "deploy_service"] {
        assert!(
            list["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == name),
            "{name} is not listed"
        );
    }
    // The file tools see workspace/, never the config, the database or its audit key.
    let read = |path: &str| {
        in_dir(
            &dir,
            &[
                "--config",
                "toolgate.toml",
                "call",
                "read_file",
                "--args",
                &format!("{{\"path\": \"{path}\"}}"),
            ],
        )
    };
    ok(&read("README.md"));
    let outside = read("../toolgate.db.audit-key");
    assert_eq!(outside.status.code(), Some(1), "{}", text(&outside.stdout));
    assert!(
        text(&outside.stdout).contains("Permission denied"),
        "{}",
        text(&outside.stdout)
    );
    // The schemas it wrote are the published ones; the .gitignore covers the database.
    for what in ["definition", "config"] {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("schemas/{what}.schema.json"))).unwrap(),
            std::fs::read_to_string(repo().join(format!("docs/schemas/{what}.schema.json")))
                .unwrap()
        );
    }
    let gitignore = std::fs::read_to_string(dir.join(".gitignore")).unwrap();
    assert!(gitignore.contains("/toolgate.db\n") && gitignore.contains("/toolgate.db.*"));

    // A second init refuses, names the file and what to do, and changes nothing.
    let before = snapshot_of(&dir);
    let again = in_dir(parent.path(), &["init", "project"]);
    assert_eq!(again.status.code(), Some(2));
    let err = text(&again.stderr);
    assert!(
        err.contains("project/toolgate.toml")
            && err.contains("nothing was written")
            && err.contains("toolgate init NEW_DIR"),
        "{err}"
    );
    assert_eq!(snapshot_of(&dir), before);

    // One existing file is enough to write nothing at all.
    let other = parent.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join(".gitignore"), "mine\n").unwrap();
    let refused = in_dir(&other, &["init"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("./.gitignore already exists"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        snapshot_of(&other),
        vec![(other.join(".gitignore"), b"mine\n".to_vec())]
    );
}

#[test]
fn the_init_config_shows_every_section_of_the_schema() {
    let template =
        std::fs::read_to_string(repo().join("crates/cli/src/init/toolgate.toml")).unwrap();
    let tg = Toolgate::new(BIN, std::env::temp_dir());
    let schema: Value = serde_json::from_str(&ok(&tg.output(["schema", "config"]))).unwrap();
    for key in schema["properties"].as_object().unwrap().keys() {
        let shown = template.lines().any(|l| {
            let l = l.trim_start_matches(['#', ' ']);
            l.starts_with(&format!("[{key}]"))
                || l.starts_with(&format!("[{key}."))
                || l.starts_with(&format!("{key} ="))
        });
        assert!(
            shown,
            "crates/cli/src/init/toolgate.toml does not show `{key}`: add it (commented, with its default) so `toolgate init` writes every section"
        );
    }
}

const FIVE_MISTAKES: &str = r#"name = "get_weather"
description = "Current weather for a city. Use for conditions now."
effect = "destroy"
tags = "weather"

[[parameters]]
name = "city"
type = "string"
description = "City name"
requird = true

[[parameters]]
name = "days"
type = "int"

[constraints]
timeout_ms = 999
"#;

#[test]
fn a_definition_with_five_mistakes_gets_all_five_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("weather.toml"), FIVE_MISTAKES).unwrap();
    let out = in_dir(dir.path(), &["tools", "validate", "weather.toml"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(text(&out.stdout));
    // `tools add` refuses it with the same five, and stores nothing.
    let out = in_dir(dir.path(), &["tools", "add", "weather.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.matches("\n  error    ").count(), 5, "{err}");
    assert!(err.contains("did you mean `required`?"), "{err}");

    // JSON and YAML: the same problems, found by their keys.
    let json = r#"{
  "name": "get_weather",
  "description": "Current weather for a city. Use for conditions now.",
  "effect": "destroy",
  "parameters": [
    {"name": "city", "type": "string", "requird": true}
  ]
}
"#;
    let yaml = "name: get_weather\ndescription: Current weather for a city. Use for conditions now.\neffect: destroy\nparameters:\n  - name: city\n    type: string\n    requird: true\n";
    for (file, body) in [("weather.json", json), ("weather.yaml", yaml)] {
        std::fs::write(dir.path().join(file), body).unwrap();
        let out = in_dir(dir.path(), &["tools", "validate", file]);
        let report = text(&out.stdout);
        let lines = if file.ends_with("json") {
            (4, 6)
        } else {
            (3, 7)
        };
        assert!(
            report.contains("effect: \"destroy\" is not one of")
                && report.contains(&format!("(line {}, column", lines.0))
                && report.contains(
                    "parameters[0].requird: unknown field `requird`; did you mean `required`?"
                )
                && report.contains(&format!("(line {}, column", lines.1)),
            "{file}:\n{report}"
        );
    }
}

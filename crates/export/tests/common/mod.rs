//! Test fixtures: representative tool definitions under tests/fixtures, validated into specs.
#![cfg(test)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use toolgate_core::{Format, ToolDefinition, ToolSpec, validate};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture, in file-name order.
pub fn fixtures() -> Vec<ToolSpec> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

fn load(path: &Path) -> ToolSpec {
    let def = ToolDefinition::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    validate(&def).unwrap_or_else(|r| panic!("{}: {r}", path.display()))
}

/// A spec from a JSON definition.
pub fn spec(json: Value) -> ToolSpec {
    let def = ToolDefinition::parse(&json.to_string(), Format::Json).expect("definition parses");
    validate(&def).unwrap_or_else(|r| panic!("invalid fixture: {r}"))
}

/// A spec with a raw input schema.
pub fn raw(name: &str, input_schema: Value) -> ToolSpec {
    spec(serde_json::json!({
        "name": name,
        "description": "A test tool used to check how schemas are exported.",
        "input_schema": input_schema,
    }))
}

pub fn fixture(name: &str) -> ToolSpec {
    fixtures()
        .into_iter()
        .find(|s| s.name().as_str() == name)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

//! The JSON Schema of a definition file, for editors and checkers (`toolgate schema definition`,
//! published as `docs/schemas/definition.schema.json`), generated from [`ToolDefinition`].

use serde_json::Value;

use crate::definition::ToolDefinition;

/// The camelCase spellings the parser accepts besides the snake_case names, as (schema object,
/// alias, field): `""` is the definition itself, `"Constraints"` its `constraints` table. Keep in
/// step with the `alias = …` attributes in `definition.rs` (a test parses each of them).
pub const DEFINITION_ALIASES: &[(&str, &str, &str)] = &[
    ("", "consequenceLevel", "consequence"),
    ("", "requiresConfirmation", "requires_confirmation"),
    ("", "safetyLevel", "safety_level"),
    ("", "taskSupport", "tasks"),
    ("", "inputSchema", "input_schema"),
    ("", "outputSchema", "output_schema"),
    ("", "requiredPermissions", "required_permissions"),
    ("", "dependsOn", "depends_on"),
    ("Constraints", "timeoutMs", "timeout_ms"),
    ("Constraints", "maxOutputBytes", "max_output_bytes"),
    ("Constraints", "allowSideEffects", "allow_side_effects"),
    ("Constraints", "maxAttempts", "max_attempts"),
];

/// The JSON Schema (draft 2020-12) of a tool definition file in TOML, JSON or YAML: the fields
/// the parser accepts (aliases included, unknown ones refused) with the enums and ranges
/// validation enforces. The `run` section's kind-specific settings are left open: each run kind
/// checks its own when the definition is registered.
pub fn definition_schema() -> Value {
    let mut schema = published(
        schemars::schema_for!(ToolDefinition),
        "toolgate tool definition (docs/tool-model.md)",
    );
    if let Some(root) = schema.as_object_mut() {
        // `description` has a default for lossless round trips, but validation requires it.
        if let Some(Value::Array(required)) = root.get_mut("required")
            && !required.iter().any(|r| r == "description")
        {
            required.push("description".into());
        }
        if let Some(Value::Object(description)) = root
            .get_mut("properties")
            .and_then(|p| p.get_mut("description"))
        {
            description.remove("default");
        }
    }
    for (object, alias, field) in DEFINITION_ALIASES {
        let target = if object.is_empty() {
            Some(&mut schema)
        } else {
            schema.pointer_mut(&format!("/$defs/{object}"))
        };
        if let Some(target) = target {
            add_aliases(target, &[(alias, field)]);
        }
    }
    schema
}

/// `schema` as published: `$schema`, `title` and `description` first, then the rest as
/// generated, so the files read from the top.
pub fn published(schema: schemars::Schema, title: &str) -> Value {
    let mut generated = match schema.to_value() {
        Value::Object(map) => map,
        other => return other,
    };
    let mut out = serde_json::Map::new();
    if let Some(meta) = generated.remove("$schema") {
        out.insert("$schema".into(), meta);
    }
    out.insert("title".into(), Value::from(title));
    generated.remove("title");
    if let Some(description) = generated.remove("description") {
        out.insert("description".into(), description);
    }
    out.extend(generated);
    Value::Object(out)
}

/// Adds each `(alias, field)` to `object`'s `properties` with the field's own schema, so a
/// schema with `additionalProperties: false` accepts the alias as the parser does.
pub fn add_aliases(object: &mut Value, pairs: &[(&str, &str)]) {
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (alias, field) in pairs {
        if let Some(mut property) = properties.get(*field).cloned() {
            if let Some(p) = property.as_object_mut() {
                p.insert(
                    "description".into(),
                    Value::from(format!("Alias of `{field}`.")),
                );
            }
            properties.insert((*alias).to_owned(), property);
        }
    }
}

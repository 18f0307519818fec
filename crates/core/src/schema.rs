//! Compiling typed parameters into one draft 2020-12 object schema, and applying defaults.

use serde_json::{Map, Value, json};

use crate::definition::{Parameter, ToolDefinition};

/// The input schema of a definition: its raw `input_schema`, or its parameters compiled to
/// `{type: object, properties, required, additionalProperties: false}`.
pub fn input_schema(def: &ToolDefinition) -> Value {
    if let Some(raw) = &def.input_schema {
        return raw.clone();
    }
    compile_parameters(&def.parameters, &def.required)
}

/// Compiles typed parameters (plus seed 004's separate `required` list) into an object schema.
pub fn compile_parameters(params: &[Parameter], extra_required: &[String]) -> Value {
    let mut properties = Map::with_capacity(params.len());
    let mut required = Vec::new();
    for p in params {
        properties.insert(p.name.clone(), parameter_schema(p));
        if p.required || extra_required.iter().any(|r| r == &p.name) {
            required.push(Value::String(p.name.clone()));
        }
    }
    let mut schema = Map::with_capacity(4);
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(schema)
}

/// The property schema of one parameter: its `schema` merged with `type`, `description`,
/// `enum` and `default`.
pub fn parameter_schema(p: &Parameter) -> Value {
    let mut out = match &p.schema {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    out.insert("type".into(), json!(p.param_type.as_str()));
    if !p.description.is_empty() {
        out.insert("description".into(), Value::String(p.description.clone()));
    }
    if let Some(values) = &p.enum_values {
        out.insert("enum".into(), Value::Array(values.clone()));
    }
    if let Some(default) = &p.default {
        out.insert("default".into(), default.clone());
    }
    Value::Object(out)
}

/// Fills in defaults for absent top-level properties, taken from `properties.*.default` of the
/// input schema. Arguments that are not an object are left alone (validation reports them).
pub fn apply_defaults(schema: &Value, args: &mut Value) {
    let (Some(props), Value::Object(obj)) =
        (schema.get("properties").and_then(Value::as_object), args)
    else {
        return;
    };
    for (name, prop) in props {
        if let Some(default) = prop.get("default")
            && !obj.contains_key(name)
        {
            obj.insert(name.clone(), default.clone());
        }
    }
}

/// Removes top-level `null` arguments for optional properties whose schema does not accept null:
/// OpenAI strict mode makes every property required and nullable, so models send `null` for
/// what they leave out. Such a `null` means "absent" (and the default then applies).
pub fn drop_null_optionals(schema: &Value, args: &mut Value) {
    let (Some(props), Value::Object(obj)) =
        (schema.get("properties").and_then(Value::as_object), args)
    else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    obj.retain(|name, value| {
        if !value.is_null() || required.contains(&name.as_str()) {
            return true;
        }
        let refuses_null = match props.get(name).and_then(|p| p.get("type")) {
            Some(Value::String(t)) => t != "null",
            Some(Value::Array(types)) => !types.iter().any(|t| t == "null"),
            _ => false,
        };
        !refuses_null
    });
}

/// Names of top-level properties marked sensitive in a definition (typed parameters only, or
/// `"x-sensitive": true` / `"writeOnly": true` in a raw schema).
pub fn sensitive_properties(def: &ToolDefinition, schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = def
        .parameters
        .iter()
        .filter(|p| p.sensitive)
        .map(|p| p.name.clone())
        .collect();
    if def.input_schema.is_some()
        && let Some(props) = schema.get("properties").and_then(Value::as_object)
    {
        for (name, prop) in props {
            let marked = prop.get("x-sensitive") == Some(&Value::Bool(true))
                || prop.get("writeOnly") == Some(&Value::Bool(true));
            if marked {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Replaces the values of `sensitive` top-level properties with `"[REDACTED]"`.
pub fn redact(args: &Value, sensitive: &[String]) -> Value {
    match args {
        Value::Object(obj) if !sensitive.is_empty() => Value::Object(
            obj.iter()
                .map(|(k, v)| {
                    let v = if sensitive.iter().any(|s| s == k) {
                        json!("[REDACTED]")
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

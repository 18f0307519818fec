//! A model driven by an OpenAI strict export sends `null` for every optional parameter it leaves
//! out; such calls must pass toolgate's own validation, with defaults applied.
#![cfg(test)]

use std::sync::Arc;

use serde_json::json;
use toolgate_core::{
    CallRequest, ErrorKind, ParamType, Parameter, Pipeline, Registry, ToolBuilder, validate,
};
use toolgate_export::{ExportFormat, ExportOptions, export_one};

fn weather() -> toolgate_core::FnTool {
    ToolBuilder::new(
        "get_weather",
        "Current weather for a city. Use for conditions now.",
    )
    .param(
        Parameter::new("city", ParamType::String)
            .description("City")
            .required(),
    )
    .param(
        Parameter::new("units", ParamType::String)
            .description("Unit system")
            .one_of(vec![json!("metric"), json!("imperial")])
            .default_value(json!("metric")),
    )
    .param(Parameter::new("days", ParamType::Integer).description("Days ahead"))
    .handler(|args, _ctx| async move { Ok(args) })
}

#[tokio::test]
async fn strict_nulls_mean_absent_and_defaults_apply() {
    let tool = weather();
    let spec = validate(&toolgate_core::Tool::definition(&tool)).unwrap();
    let (exported, _) = export_one(
        &spec,
        ExportFormat::OpenAi,
        &ExportOptions {
            strict: true,
            ..ExportOptions::default()
        },
    )
    .unwrap();
    // The strict schema indeed requires every property, so the model must send the nulls.
    assert_eq!(
        exported["function"]["parameters"]["required"],
        json!(["city", "units", "days"])
    );

    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(tool)).unwrap();
    let pipeline = Pipeline::new(registry);
    let result = pipeline
        .call(CallRequest::new(
            "get_weather",
            json!({"city": "Oslo", "units": null, "days": null}),
        ))
        .await;
    assert_eq!(
        result.data(),
        Some(&json!({"city": "Oslo", "units": "metric"})),
        "{result:?}"
    );

    // A null for a required parameter is still an error, naming the parameter.
    let result = pipeline
        .call(CallRequest::new("get_weather", json!({"city": null})))
        .await;
    assert_eq!(result.error_kind(), Some(ErrorKind::Validation));
    assert!(result.error().unwrap().contains("/city"), "{result:?}");
}

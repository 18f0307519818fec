//! Three ways to define a toolgate tool in Rust — implementing the `Tool` trait, a builder with
//! a closure that captures context (a factory), and a typed tool whose schema comes from a struct —
//! then calling each through the full pipeline.
//!
//! Run: `cargo run -p toolgate-examples --example three_ways`

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_core::{
    BoxFuture, CallRequest, Category, Effect, ParamType, Parameter, Pipeline, Registry, Tool,
    ToolBuilder, ToolContext, ToolDefinition, ToolError, ToolOutput,
};

/// 1. Implement the trait: full control over the definition and the handler.
struct Echo;

impl Tool for Echo {
    fn definition(&self) -> ToolDefinition {
        let mut def = ToolDefinition::new(
            "echo_text",
            "Returns the given text unchanged. Use to test that tool calls reach toolgate.",
        );
        def.parameters.push(
            Parameter::new("text", ParamType::String)
                .description("Text to echo")
                .required(),
        );
        def
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            ctx.check_cancelled()?; // check for cancellation before any I/O
            Ok(json!({ "text": args["text"], "caller": ctx.user_id().as_str() }))
        })
    }
}

/// Application state a factory closes over (the factory pattern: a closure over it makes the tool).
#[derive(Clone)]
struct Catalog {
    product_id: String,
    sources: Vec<&'static str>,
}

/// 2. A builder and a closure: the factory captures the catalog and the product id.
fn read_sources_tool(catalog: Catalog) -> impl Tool {
    ToolBuilder::new(
        "read_sources",
        "Lists the source repositories of the current product. Use before mapping its domains.",
    )
    .category(Category::Knowledge)
    .param(
        Parameter::new("limit", ParamType::Integer)
            .description("Most sources to return")
            .default_value(json!(50)),
    )
    .handler(move |args, _ctx| {
        let catalog = catalog.clone();
        async move {
            let limit = args["limit"].as_u64().unwrap_or(50) as usize;
            let sources: Vec<&str> = catalog.sources.iter().copied().take(limit).collect();
            Ok(json!({ "productId": catalog.product_id, "sources": sources }))
        }
    })
}

/// 3. Typed: the input schema is derived from `AddInput`, the output schema from `AddOutput`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddInput {
    /// First addend.
    a: f64,
    /// Second addend.
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct AddOutput {
    sum: f64,
}

fn add_tool() -> impl Tool {
    ToolBuilder::new(
        "add_numbers",
        "Adds two numbers and returns their sum. Use for exact addition.",
    )
    .effect(Effect::Read)
    .typed(|input: AddInput, _ctx| async move {
        let sum = input.a + input.b;
        if !sum.is_finite() {
            return Err(ToolError::execution("Sum is not a finite number"));
        }
        Ok(AddOutput { sum })
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(Echo))?;
    registry.register(Arc::new(read_sources_tool(Catalog {
        product_id: "prod_123".into(),
        sources: vec!["github:org/webapp", "github:org/ui"],
    })))?;
    registry.register(Arc::new(add_tool()))?;
    let pipeline = Pipeline::new(registry);

    let calls = [
        ("echo_text", json!({ "text": "hello" })),
        ("read_sources", json!({})),
        ("add_numbers", json!({ "a": 2, "b": 40 })),
        ("add_numbers", json!({ "a": "two" })),
        ("no_such_tool", json!({})),
    ];
    for (tool, args) in calls {
        let result = pipeline.call(CallRequest::new(tool, args)).await;
        println!("{}", serde_json::to_string(&result)?);
    }

    // The examples double as a smoke test: fail loudly if a contract breaks.
    let ok = pipeline
        .call(CallRequest::new("add_numbers", json!({ "a": 2, "b": 40 })))
        .await;
    assert_eq!(ok.data(), Some(&json!({ "sum": 42.0 })));
    let bad = pipeline
        .call(CallRequest::new("add_numbers", json!({ "a": "two" })))
        .await;
    assert_eq!(bad.error_kind(), Some(toolgate_core::ErrorKind::Validation));
    Ok(())
}

//! Observability: each call opens an `execute_tool` span with OpenTelemetry GenAI attributes, and
//! the metrics of DESIGN.md §4 (seed 003 §8 plus per-tool call metrics) reach the `metrics` facade.
#![cfg(test)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;
use toolgate_core::telemetry::*;
use toolgate_core::{
    CallRequest, Category, ParamType, Parameter, Pipeline, Registry, ToolBuilder, ToolDefinition,
    ToolError, validate,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Records every span's name and fields.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<SpanRecord>>>);

/// A span's name and its fields.
type SpanRecord = (String, BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields));
    }
}

fn pipeline() -> Pipeline {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(
            ToolBuilder::new(
                "get_weather",
                "Current weather for a city. Use for conditions now.",
            )
            .category(Category::ExternalApi)
            .param(
                Parameter::new("city", ParamType::String)
                    .description("City")
                    .required(),
            )
            .handler(|args, _ctx| async move {
                if args["city"] == "Atlantis" {
                    Err(ToolError::execution("City not found: Atlantis"))
                } else {
                    Ok(json!({"temperature": 3.5}))
                }
            }),
        ))
        .unwrap();
    Pipeline::new(registry)
}

#[test]
fn each_call_opens_an_execute_tool_span_with_genai_attributes() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let request = CallRequest::new("get_weather", json!({"city": "Oslo"}));
    let call_id = request.call_id.to_string();
    tracing::subscriber::with_default(subscriber, || {
        rt.block_on(pipeline().call(request));
    });
    let spans = spans.0.lock().unwrap();
    let (name, fields) = spans
        .iter()
        .find(|(n, _)| n == "execute_tool")
        .expect("an execute_tool span");
    assert_eq!(name, "execute_tool");
    assert_eq!(fields["otel.name"], "execute_tool get_weather");
    assert_eq!(fields["gen_ai.operation.name"], "execute_tool");
    assert_eq!(fields["gen_ai.tool.name"], "get_weather");
    assert_eq!(fields["gen_ai.tool.call.id"], call_id);
}

#[test]
fn definition_and_call_metrics_reach_the_facade() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        // Validation: one success, one failure.
        validate(&ToolDefinition::new(
            "fine_tool",
            "Does a fine thing when asked to.",
        ))
        .unwrap();
        validate(&ToolDefinition::new("Bad Name", "")).unwrap_err();
        // Registration of a custom tool, and two calls (one failing).
        let p = pipeline();
        rt.block_on(p.call(CallRequest::new("get_weather", json!({"city": "Oslo"}))));
        rt.block_on(p.call(CallRequest::new("get_weather", json!({"city": "Atlantis"}))));
        // Made-up names share one label value instead of minting new ones.
        rt.block_on(p.call(CallRequest::new("made_up_1", json!({}))));
        rt.block_on(p.call(CallRequest::new("made_up_2", json!({}))));
    });
    let mut seen: BTreeMap<String, Vec<(Vec<String>, DebugValue)>> = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels = key
            .key()
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        seen.entry(key.key().name().to_owned())
            .or_default()
            .push((labels, value));
    }
    let get = |name: &str| {
        seen.get(name)
            .unwrap_or_else(|| panic!("metric {name} missing: {:?}", seen.keys()))
    };
    assert!(matches!(&get(VALIDATION_DURATION)[0].1, DebugValue::Histogram(v) if v.len() >= 3));
    assert!(matches!(
        get(VALIDATION_FAILURES)[0].1,
        DebugValue::Counter(1)
    ));
    assert!(matches!(
        get(DEFINITIONS_CREATED)[0].1,
        DebugValue::Counter(1)
    ));
    let by_category = get(DEFINITIONS_BY_CATEGORY);
    assert!(
        by_category
            .iter()
            .any(|(l, v)| l == &["category=external_api"]
                && matches!(v, DebugValue::Gauge(g) if g.into_inner() == 1.0))
    );
    let calls = get(CALLS);
    assert!(
        calls
            .iter()
            .any(|(l, v)| l == &["tool=get_weather"] && matches!(v, DebugValue::Counter(2)))
    );
    assert!(
        calls
            .iter()
            .any(|(l, v)| l == &["tool=(unknown)"] && matches!(v, DebugValue::Counter(2)))
    );
    assert!(
        !calls
            .iter()
            .any(|(l, _)| l.iter().any(|x| x.contains("made_up")))
    );
    let errors = get(CALL_ERRORS);
    assert!(
        errors
            .iter()
            .any(|(l, v)| l.contains(&"error_kind=execution".to_owned())
                && matches!(v, DebugValue::Counter(1)))
    );
    let durations = get(CALL_DURATION);
    assert!(durations.iter().any(|(l, v)| l == &["tool=get_weather"]
        && matches!(v, DebugValue::Histogram(h) if h.len() == 2)));
}

//! Criterion benchmarks: definition validation, one no-op call through the whole pipeline, and
//! registry lookup and filtered listing with 100,000 tools — each beside a baseline measured in
//! the same run (`scripts/bench-table.py` prints medians and ratios).
//!
//! A benchmark is not a test: a setup step that fails ends the run with its error (`main`
//! returns it), and a timed step returns its `Result` (checked once before the timing) instead
//! of unwrapping it.

use std::collections::HashMap;
use std::error::Error;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use serde_json::{Value, json};
use toolgate_core::{
    CallRequest, Category, Effect, ParamType, Parameter, Pipeline, Query, Registry, Tool,
    ToolBuilder, ToolContext, ToolDefinition, ToolName, validate,
};

fn ten_parameter_definition() -> ToolDefinition {
    let mut def = ToolDefinition::new(
        "search_orders",
        "Searches customer orders by status, date range and amount. Use to answer questions about past orders.",
    );
    def.category = Some(Category::Database);
    def.required_permissions = vec!["tool.database.read".into()];
    def.tags = vec!["orders".into(), "sales".into()];
    def.version = Some("1.2.0".into());
    def.parameters = vec![
        Parameter::new("customer_id", ParamType::String).description("Customer id").required(),
        Parameter::new("status", ParamType::String)
            .description("Order status")
            .one_of(vec![json!("open"), json!("shipped"), json!("cancelled")])
            .default_value(json!("open")),
        Parameter::new("from_date", ParamType::String).description("Earliest order date (YYYY-MM-DD)"),
        Parameter::new("to_date", ParamType::String).description("Latest order date (YYYY-MM-DD)"),
        Parameter::new("min_amount", ParamType::Number).description("Smallest amount"),
        Parameter::new("max_amount", ParamType::Number).description("Largest amount"),
        Parameter::new("limit", ParamType::Integer).description("Most orders to return").default_value(json!(20)),
        Parameter::new("include_items", ParamType::Boolean).description("Include line items").default_value(json!(false)),
        Parameter::new("sort", ParamType::Object)
            .description("Sort order")
            .schema(json!({"type": "object", "properties": {"field": {"type": "string"}, "descending": {"type": "boolean"}}, "additionalProperties": false})),
        Parameter::new("sku_filter", ParamType::Array)
            .description("Only orders containing these SKUs")
            .schema(json!({"type": "array", "items": {"type": "string"}, "maxItems": 50})),
    ];
    def
}

type BoxError = Box<dyn Error>;

fn bench_validation(c: &mut Criterion) -> Result<(), BoxError> {
    let def = ten_parameter_definition();
    let as_json = serde_json::to_value(&def)?;
    serde_json::from_value::<ToolDefinition>(as_json.clone())?;
    validate(&def).map_err(|report| format!("the benchmark's definition is invalid: {report}"))?;
    let mut g = c.benchmark_group("validate");
    g.bench_function("baseline_deserialize_10_params", |b| {
        b.iter(|| serde_json::from_value::<ToolDefinition>(black_box(as_json.clone())))
    });
    g.bench_function("definition_10_params", |b| {
        b.iter(|| validate(black_box(&def)))
    });
    g.finish();
    Ok(())
}

fn noop_tool() -> impl Tool {
    ToolBuilder::new(
        "noop",
        "Does nothing and returns an empty object. Used to measure overhead.",
    )
    .param(Parameter::new("x", ParamType::Integer).description("Ignored"))
    .handler(|_args, _ctx| async { Ok(json!({})) })
}

fn bench_pipeline(c: &mut Criterion) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let registry = Arc::new(Registry::new());
    let tool: Arc<dyn Tool> = Arc::new(noop_tool());
    registry.register(Arc::clone(&tool))?;
    let pipeline = Pipeline::new(registry);
    let args = json!({"x": 1});
    let ctx = ToolContext::detached(
        ToolName::parse("noop")
            .map_err(|problem| format!("\"noop\" is not a tool name: {problem:?}"))?,
        toolgate_core::Principal::local(),
    );
    rt.block_on(tool.call(args.clone(), ctx.clone()))?;
    let mut g = c.benchmark_group("pipeline");
    g.bench_function("baseline_direct_handler_call", |b| {
        b.iter(|| rt.block_on(tool.call(black_box(args.clone()), ctx.clone())))
    });
    g.bench_function("noop_call_full_pipeline", |b| {
        b.iter(|| {
            let r = rt.block_on(pipeline.call(CallRequest::new("noop", black_box(args.clone()))));
            assert!(r.is_ok());
            r
        })
    });
    g.finish();
    Ok(())
}

const N: usize = 100_000;
const CATEGORIES: [Category; 4] = [
    Category::Database,
    Category::Network,
    Category::Knowledge,
    Category::System,
];

fn big_registry() -> Result<Registry, BoxError> {
    let registry = Registry::new();
    let defs: Vec<ToolDefinition> = (0..N)
        .map(|i| {
            let mut d = ToolDefinition::new(
                format!("tool_{i:06}"),
                format!("Synthetic tool number {i} for the registry benchmark; does nothing."),
            );
            d.category = Some(CATEGORIES[i % 4]);
            d.effect = Some(if i % 10 == 0 {
                Effect::Write
            } else {
                Effect::Read
            });
            d.tags = vec![format!("group_{}", i % 100)];
            if i % 10 == 0 {
                d.requires_confirmation = Some(false);
            }
            d
        })
        .collect();
    registry.register_definitions(defs)?;
    Ok(registry)
}

fn bench_registry(c: &mut Criterion) -> Result<(), BoxError> {
    let registry = big_registry()?;
    let names: Vec<String> = (0..1000)
        .map(|i| format!("tool_{:06}", (i * 97) % N))
        .collect();
    let map: HashMap<String, Value> = (0..N).map(|i| (format!("tool_{i:06}"), json!(i))).collect();
    // Benchmarks must measure real hits, not fast misses.
    assert!(names.iter().all(|n| registry.get(n).is_some()));
    let mut g = c.benchmark_group("registry_100k");
    g.bench_function("baseline_hashmap_get", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % names.len();
            black_box(map.get(&names[i]))
        })
    });
    g.bench_function("lookup", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % names.len();
            black_box(registry.get(&names[i]))
        })
    });
    let category = Query {
        category: Some(Category::Network),
        ..Query::default()
    };
    // The simplest in-memory equivalent: a Vec of the same facets, filtered linearly.
    let plain: Vec<(String, Category, Effect, Vec<String>)> = registry
        .snapshot()
        .iter()
        .map(|t| {
            let s = t.spec();
            (
                s.name().to_string(),
                s.category(),
                s.effect(),
                s.tags().to_vec(),
            )
        })
        .collect();
    let vec_page = |category: Category, effect: Option<Effect>, tag: Option<&str>| -> Vec<String> {
        plain
            .iter()
            .filter(|(_, c, e, tags)| {
                *c == category
                    && effect.is_none_or(|x| x == *e)
                    && tag.is_none_or(|t| tags.iter().any(|x| x == t))
            })
            .take(51)
            .map(|(name, ..)| name.clone())
            .collect::<Vec<String>>()
    };
    g.bench_function("baseline_vec_filter_category_page50", |b| {
        b.iter(|| vec_page(black_box(Category::Network), None, None))
    });
    g.bench_function("baseline_vec_filter_category_effect_tag_page50", |b| {
        b.iter(|| {
            vec_page(
                black_box(Category::Database),
                Some(Effect::Write),
                Some("group_40"),
            )
        })
    });
    g.bench_function("list_category_page50", |b| {
        b.iter(|| registry.list(black_box(&category)))
    });
    let filtered = Query {
        category: Some(Category::Database),
        effect: Some(Effect::Write),
        tag: Some("group_40".into()),
        ..Query::default()
    };
    g.bench_function("list_category_effect_tag_page50", |b| {
        b.iter(|| registry.list(black_box(&filtered)))
    });
    let rare_text = Query {
        text: Some("number 99999 ".into()),
        ..Query::default()
    };
    assert_eq!(registry.list(&rare_text)?.items.len(), 1);
    assert_eq!(registry.list(&category)?.items.len(), 50);
    assert!(!registry.list(&filtered)?.items.is_empty());
    g.bench_function("list_text_full_scan", |b| {
        b.iter(|| registry.list(black_box(&rare_text)))
    });
    g.bench_function("list_text_first_after_change", |b| {
        // A changed snapshot has no text index yet: this pays for building it.
        b.iter_batched(
            || (*registry.snapshot()).clone(),
            |snapshot| snapshot.list(&rare_text),
            criterion::BatchSize::LargeInput,
        )
    });
    g.bench_function("baseline_hashmap_full_scan", |b| {
        b.iter(|| map.values().filter(|v| v.as_u64() == Some(99_999)).count())
    });
    g.finish();
    Ok(())
}

/// What `criterion_group!` and `criterion_main!` would write, except that a failed setup ends
/// the run with its error.
fn main() -> Result<(), BoxError> {
    let mut criterion = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_validation(&mut criterion)?;
    bench_pipeline(&mut criterion)?;
    bench_registry(&mut criterion)?;
    criterion.final_summary();
    Ok(())
}

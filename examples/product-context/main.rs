//! Seed 002's product context tools — `read_sources`, `read_baseline`, `read_context_inputs` —
//! built with the factory pattern (`create_read_sources_tool(ctx, product_id)`): each tool is a
//! closure over a context (an SQLite connection pool) and the product of the agent run, called
//! through toolgate's pipeline. The database is created from `fixture.sql` in a temp dir.
//!
//! Run: `cargo run -p toolgate-examples --example product_context`
//! Test: `cargo test -p toolgate-examples --example product_context`
//!
//! Contracts (see README.md next to this file for the reasoning):
//!
//! - `read_sources {productId, limit?, cursor?}` → `SourceContext[]` (`{sourceId,
//!   classification, signals, notes}`), ordered by `sourceId`. `limit` defaults to 50 and is at
//!   most 50 (51 is a `validation` error). Pagination: the output stays the seed's plain array;
//!   to get the next page pass the `sourceId` of the last element as `cursor`. A page shorter than
//!   `limit` is the last one.
//! - `read_baseline {productId}` → `ProductBaseline` (`{name, type, valueProposition,
//!   primaryUsers, coreJobs}`), or `{}` when the product has no baseline.
//! - `read_context_inputs {productId}` → `{uiSitemap, userFlows, businessDataModel,
//!   repoTopology}` from the latest *completed* context run; each is `null` when there is no such
//!   run or the run did not write that output.
//! - A tool is bound to the product it was made for: a call with another `productId` fails with
//!   an `authorization` error (the agent was given one product; it may not read others).

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use toolgate_core::{
    CallRequest, Category, Effect, FnTool, Pipeline, Registry, Tool, ToolBuilder, ToolContext,
    ToolError,
};

/// The product database's schema and rows.
const FIXTURE: &str = include_str!("fixture.sql");

/// Default and maximum page size of `read_sources` (seed 002: "max 50 por defecto").
const MAX_SOURCES: u32 = 50;

/// The four outputs of a context run, in the order they are returned.
const CONTEXT_INPUTS: [&str; 4] = [
    "uiSitemap",
    "userFlows",
    "businessDataModel",
    "repoTopology",
];

/// What the factories close over: seed 002's `ctx`. Cheap to clone (the pool is shared).
#[derive(Clone, Debug)]
pub struct AgentContext {
    pool: SqlitePool,
}

impl AgentContext {
    /// Opens (creating) an SQLite database at `path` and loads the fixture into it.
    pub async fn with_fixture(path: &Path) -> Result<Self, sqlx::Error> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        sqlx::raw_sql(FIXTURE).execute(&pool).await?;
        Ok(Self { pool })
    }
}

/// `productId` as an input property: required, and named in the description as the bound one.
fn product_property(product_id: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "description": format!("The product to read. This tool serves product {product_id} only")
    })
}

/// Refuses a `productId` other than the one the tool was made for.
fn check_product(args: &Value, bound: &str, tool: &str) -> Result<(), ToolError> {
    match args.get("productId").and_then(Value::as_str) {
        Some(asked) if asked == bound => Ok(()),
        Some(asked) => Err(ToolError::authorization(format!(
            "{tool} serves product {bound} (the product of this agent run) and may not read product {asked}; call it with productId {bound:?}"
        ))),
        None => Err(ToolError::validation(format!(
            "Missing productId (a string): pass {bound:?}"
        ))),
    }
}

fn db_error(action: &'static str) -> impl FnOnce(sqlx::Error) -> ToolError {
    move |e| ToolError::unavailable(format!("The product database failed while {action}: {e}"))
}

/// A JSON list stored as text; unreadable data is an `execution` error naming the column.
fn json_list(raw: &str, what: &str) -> Result<Value, ToolError> {
    match serde_json::from_str::<Value>(raw) {
        Ok(list @ Value::Array(_)) => Ok(list),
        Ok(_) | Err(_) => Err(ToolError::execution(format!(
            "The product database holds an unreadable {what} (expected a JSON array of strings)"
        ))),
    }
}

fn string_list_schema() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn nullable_list_schema(description: &str) -> Value {
    json!({"type": ["array", "null"], "items": {"type": "string"}, "description": description})
}

/// `read_sources` bound to `product_id`.
pub fn create_read_sources_tool(ctx: &AgentContext, product_id: &str) -> FnTool {
    let ctx = ctx.clone();
    let bound: Arc<str> = Arc::from(product_id);
    ToolBuilder::new(
        "read_sources",
        "Lists the classified sources (repositories, docs) of the product: [{sourceId, \
classification, signals, notes}], ordered by sourceId. Use it first, to learn where the product \
lives before reading code or mapping domains. Returns at most limit sources (default and maximum \
50); for the next page call again with cursor set to the sourceId of the last source you got. A \
page shorter than limit is the last one.",
    )
    .title("Read sources")
    .category(Category::Database)
    .effect(Effect::Read)
    .input_schema(json!({
        "type": "object",
        "properties": {
            "productId": product_property(product_id),
            "limit": {
                "type": "integer", "minimum": 1, "maximum": MAX_SOURCES, "default": MAX_SOURCES,
                "description": "Most sources to return (1-50)"
            },
            "cursor": {
                "type": "string", "minLength": 1,
                "description": "The sourceId of the last source of the previous page; leave out for the first page"
            }
        },
        "required": ["productId"],
        "additionalProperties": false
    }))
    .output_schema(json!({
        "type": "array",
        "maxItems": MAX_SOURCES,
        "items": {
            "type": "object",
            "properties": {
                "sourceId": {"type": "string"},
                "classification": {"type": "string"},
                "signals": string_list_schema(),
                "notes": {"type": "string"}
            },
            "required": ["sourceId", "classification", "signals", "notes"],
            "additionalProperties": false
        }
    }))
    .tag("product-context")
    .handler(move |args: Value, ctx_call: ToolContext| {
        let (ctx, bound) = (ctx.clone(), Arc::clone(&bound));
        async move {
            check_product(&args, &bound, "read_sources")?;
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(u64::from(MAX_SOURCES));
            if !(1..=u64::from(MAX_SOURCES)).contains(&limit) {
                return Err(ToolError::validation(format!(
                    "limit must be between 1 and {MAX_SOURCES}, not {limit}"
                )));
            }
            let after = args.get("cursor").and_then(Value::as_str).unwrap_or("");
            ctx_call.check_cancelled()?;
            let rows = sqlx::query(
                "SELECT source_id, classification, signals_json, notes FROM product_sources \
                 WHERE product_id = ?1 AND source_id > ?2 ORDER BY source_id LIMIT ?3",
            )
            .bind(&*bound)
            .bind(after)
            .bind(i64::try_from(limit).unwrap_or(i64::from(MAX_SOURCES)))
            .fetch_all(&ctx.pool)
            .await
            .map_err(db_error("reading sources"))?;
            let mut sources = Vec::with_capacity(rows.len());
            for row in rows {
                let read = db_error("reading a source");
                let source_id: String = row.try_get("source_id").map_err(read)?;
                let signals: String = row
                    .try_get("signals_json")
                    .map_err(db_error("reading a source"))?;
                sources.push(json!({
                    "sourceId": source_id,
                    "classification": row.try_get::<String, _>("classification").map_err(db_error("reading a source"))?,
                    "signals": json_list(&signals, "source signals list")?,
                    "notes": row.try_get::<String, _>("notes").map_err(db_error("reading a source"))?,
                }));
            }
            Ok(Value::Array(sources))
        }
    })
}

/// `read_baseline` bound to `product_id`.
pub fn create_read_baseline_tool(ctx: &AgentContext, product_id: &str) -> FnTool {
    let ctx = ctx.clone();
    let bound: Arc<str> = Arc::from(product_id);
    ToolBuilder::new(
        "read_baseline",
        "Reads the product's baseline — only what the product is, not everything about it: \
{name, type, valueProposition, primaryUsers, coreJobs}. Use it to ground an analysis in the \
product's stated purpose and users. Returns {} (an empty object) when the product has no baseline \
yet; then work from the sources instead.",
    )
    .title("Read baseline")
    .category(Category::Database)
    .effect(Effect::Read)
    .input_schema(json!({
        "type": "object",
        "properties": {"productId": product_property(product_id)},
        "required": ["productId"],
        "additionalProperties": false
    }))
    .output_schema(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string"},
            "valueProposition": {"type": "string"},
            "primaryUsers": string_list_schema(),
            "coreJobs": string_list_schema()
        },
        "anyOf": [
            {"required": ["name", "type", "valueProposition", "primaryUsers", "coreJobs"]},
            {"maxProperties": 0}
        ],
        "additionalProperties": false
    }))
    .tag("product-context")
    .handler(move |args: Value, ctx_call: ToolContext| {
        let (ctx, bound) = (ctx.clone(), Arc::clone(&bound));
        async move {
            check_product(&args, &bound, "read_baseline")?;
            ctx_call.check_cancelled()?;
            let row = sqlx::query(
                "SELECT name, type, value_proposition, primary_users_json, core_jobs_json \
                 FROM product_baselines WHERE product_id = ?1",
            )
            .bind(&*bound)
            .fetch_optional(&ctx.pool)
            .await
            .map_err(db_error("reading the baseline"))?;
            let Some(row) = row else {
                return Ok(json!({}));
            };
            let text = |column: &str| -> Result<String, ToolError> {
                row.try_get(column).map_err(db_error("reading the baseline"))
            };
            Ok(json!({
                "name": text("name")?,
                "type": text("type")?,
                "valueProposition": text("value_proposition")?,
                "primaryUsers": json_list(&text("primary_users_json")?, "baseline primaryUsers list")?,
                "coreJobs": json_list(&text("core_jobs_json")?, "baseline coreJobs list")?,
            }))
        }
    })
}

/// `read_context_inputs` bound to `product_id`.
pub fn create_read_context_inputs_tool(ctx: &AgentContext, product_id: &str) -> FnTool {
    let ctx = ctx.clone();
    let bound: Arc<str> = Arc::from(product_id);
    ToolBuilder::new(
        "read_context_inputs",
        "Reads what the previous context run found for the product: {uiSitemap, userFlows, \
businessDataModel, repoTopology}, each a list of strings, from the latest completed run. Use it to \
build on earlier work instead of starting over. Each field is null when there is no completed run \
yet or that run did not produce it; treat null as unknown, not empty.",
    )
    .title("Read context inputs")
    .category(Category::Database)
    .effect(Effect::Read)
    .input_schema(json!({
        "type": "object",
        "properties": {"productId": product_property(product_id)},
        "required": ["productId"],
        "additionalProperties": false
    }))
    .output_schema(json!({
        "type": "object",
        "properties": {
            "uiSitemap": nullable_list_schema("Routes or screens of the UI"),
            "userFlows": nullable_list_schema("Things users do, end to end"),
            "businessDataModel": nullable_list_schema("The business entities"),
            "repoTopology": nullable_list_schema("How the repositories are laid out")
        },
        "required": CONTEXT_INPUTS,
        "additionalProperties": false
    }))
    .tag("product-context")
    .handler(move |args: Value, ctx_call: ToolContext| {
        let (ctx, bound) = (ctx.clone(), Arc::clone(&bound));
        async move {
            check_product(&args, &bound, "read_context_inputs")?;
            ctx_call.check_cancelled()?;
            let mut out: Map<String, Value> = CONTEXT_INPUTS
                .iter()
                .map(|k| ((*k).to_owned(), Value::Null))
                .collect();
            let run: Option<i64> = sqlx::query_scalar(
                "SELECT id FROM context_runs WHERE product_id = ?1 AND status = 'completed' \
                 ORDER BY finished_at DESC, id DESC LIMIT 1",
            )
            .bind(&*bound)
            .fetch_optional(&ctx.pool)
            .await
            .map_err(db_error("finding the latest context run"))?;
            if let Some(run) = run {
                let rows = sqlx::query(
                    "SELECT kind, items_json FROM context_run_outputs WHERE run_id = ?1",
                )
                .bind(run)
                .fetch_all(&ctx.pool)
                .await
                .map_err(db_error("reading context run outputs"))?;
                for row in rows {
                    let kind: String = row
                        .try_get("kind")
                        .map_err(db_error("reading context run outputs"))?;
                    let items: String = row
                        .try_get("items_json")
                        .map_err(db_error("reading context run outputs"))?;
                    if let Some(slot) = out.get_mut(&kind) {
                        *slot = json_list(&items, "context run output")?;
                    }
                }
            }
            Ok(Value::Object(out))
        }
    })
}

/// The three tools of one agent run, for `product_id`.
pub fn product_tools(ctx: &AgentContext, product_id: &str) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(create_read_sources_tool(ctx, product_id)),
        Arc::new(create_read_baseline_tool(ctx, product_id)),
        Arc::new(create_read_context_inputs_tool(ctx, product_id)),
    ]
}

/// A pipeline over a registry holding the three tools for `product_id`.
pub fn pipeline_for(
    ctx: &AgentContext,
    product_id: &str,
) -> Result<Pipeline, toolgate_core::CoreError> {
    let registry = Arc::new(Registry::new());
    registry.register_all(product_tools(ctx, product_id), false)?;
    Ok(Pipeline::new(registry))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ctx = AgentContext::with_fixture(&dir.path().join("products.db")).await?;

    // Seed 002's example calls, for the agent run on prod_123.
    let hikai = pipeline_for(&ctx, "prod_123")?;
    let calls = [
        (
            "read_sources",
            json!({"productId": "prod_123", "limit": 50}),
        ),
        ("read_baseline", json!({"productId": "prod_123"})),
        ("read_context_inputs", json!({"productId": "prod_123"})),
        // A tool made for prod_123 will not read another product.
        ("read_baseline", json!({"productId": "prod_456"})),
    ];
    for (tool, args) in calls {
        let result = hikai.call(CallRequest::new(tool, args)).await;
        println!("{}", serde_json::to_string_pretty(&result)?);
    }

    // A product with no baseline and no completed run: {} and nulls.
    let nova = pipeline_for(&ctx, "prod_789")?;
    for tool in ["read_baseline", "read_context_inputs"] {
        let result = nova
            .call(CallRequest::new(tool, json!({"productId": "prod_789"})))
            .await;
        println!("{}", serde_json::to_string_pretty(&result)?);
    }
    ctx.pool.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use toolgate_core::{ErrorKind, ToolResult, validate};

    use super::*;

    async fn setup() -> (tempfile::TempDir, AgentContext) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = AgentContext::with_fixture(&dir.path().join("products.db"))
            .await
            .unwrap();
        (dir, ctx)
    }

    async fn call(p: &Pipeline, tool: &str, args: Value) -> ToolResult {
        p.call(CallRequest::new(tool, args)).await
    }

    async fn data(p: &Pipeline, tool: &str, args: Value) -> Value {
        let r = call(p, tool, args.clone()).await;
        assert!(
            r.is_ok(),
            "{tool} {args}: {:?} {:?}",
            r.error_kind(),
            r.error()
        );
        r.data().unwrap().clone()
    }

    fn ids(page: &Value) -> Vec<String> {
        page.as_array()
            .unwrap()
            .iter()
            .map(|s| s["sourceId"].as_str().unwrap().to_owned())
            .collect()
    }

    #[tokio::test]
    async fn seed_002_examples_exactly() {
        let (_dir, ctx) = setup().await;
        let p = pipeline_for(&ctx, "prod_123").unwrap();
        assert_eq!(
            data(
                &p,
                "read_sources",
                json!({"productId": "prod_123", "limit": 50})
            )
            .await,
            json!([{
                "sourceId": "github:org/repo",
                "classification": "product_core",
                "signals": ["/apps/webapp", "/packages/ui"],
                "notes": "Monorepo con app principal"
            }])
        );
        assert_eq!(
            data(&p, "read_baseline", json!({"productId": "prod_123"})).await,
            json!({
                "name": "Hikai",
                "type": "SaaS",
                "valueProposition": "Product intelligence hub",
                "primaryUsers": ["PM", "Design"],
                "coreJobs": ["decision support"]
            })
        );
        assert_eq!(
            data(&p, "read_context_inputs", json!({"productId": "prod_123"})).await,
            json!({
                "uiSitemap": ["/settings/product", "/dashboard"],
                "userFlows": ["Create project", "Invite member"],
                "businessDataModel": ["project", "milestone"],
                "repoTopology": ["apps/webapp", "packages/convex"]
            })
        );
    }

    #[tokio::test]
    async fn no_baseline_is_an_empty_object_and_no_run_is_nulls() {
        let (_dir, ctx) = setup().await;
        let nova = pipeline_for(&ctx, "prod_789").unwrap();
        assert_eq!(
            data(&nova, "read_baseline", json!({"productId": "prod_789"})).await,
            json!({})
        );
        // prod_789 has only a running (not completed) run: nothing to build on
        assert_eq!(
            data(
                &nova,
                "read_context_inputs",
                json!({"productId": "prod_789"})
            )
            .await,
            json!({"uiSitemap": null, "userFlows": null, "businessDataModel": null, "repoTopology": null})
        );
        assert_eq!(
            data(&nova, "read_sources", json!({"productId": "prod_789"})).await,
            json!([])
        );
        // prod_456's run wrote two of the four outputs: the others are null
        let atlas = pipeline_for(&ctx, "prod_456").unwrap();
        assert_eq!(
            data(
                &atlas,
                "read_context_inputs",
                json!({"productId": "prod_456"})
            )
            .await,
            json!({"uiSitemap": ["/maps"], "userFlows": null, "businessDataModel": null, "repoTopology": ["services"]})
        );
        assert_eq!(
            data(&atlas, "read_baseline", json!({"productId": "prod_456"})).await,
            json!({})
        );
    }

    #[tokio::test]
    async fn limit_defaults_to_fifty_and_cannot_exceed_it() {
        let (_dir, ctx) = setup().await;
        let atlas = pipeline_for(&ctx, "prod_456").unwrap();
        let r = call(&atlas, "read_sources", json!({"productId": "prod_456"})).await;
        assert_eq!(r.input["limit"], 50, "the default is applied and echoed");
        assert_eq!(r.data().unwrap().as_array().unwrap().len(), 50);
        let r = call(
            &atlas,
            "read_sources",
            json!({"productId": "prod_456", "limit": 51}),
        )
        .await;
        assert_eq!(r.error_kind(), Some(ErrorKind::Validation));
        assert!(r.error().unwrap().contains("/limit"), "{:?}", r.error());
        assert!(r.error().unwrap().contains("50"), "{:?}", r.error());
        let r = call(
            &atlas,
            "read_sources",
            json!({"productId": "prod_456", "limit": 0}),
        )
        .await;
        assert_eq!(r.error_kind(), Some(ErrorKind::Validation));
        let page = data(
            &atlas,
            "read_sources",
            json!({"productId": "prod_456", "limit": 3}),
        )
        .await;
        assert_eq!(
            ids(&page),
            [
                "github:atlas/repo-001",
                "github:atlas/repo-002",
                "github:atlas/repo-003"
            ]
        );
    }

    #[tokio::test]
    async fn cursor_pages_through_every_source_once() {
        let (_dir, ctx) = setup().await;
        let atlas = pipeline_for(&ctx, "prod_456").unwrap();
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut args = json!({"productId": "prod_456"});
            if let Some(c) = &cursor {
                args["cursor"] = json!(c);
            }
            let page = ids(&data(&atlas, "read_sources", args).await);
            sizes.push(page.len());
            cursor = page.last().cloned();
            let last_page = page.len() < 50;
            seen.extend(page);
            if last_page {
                break;
            }
        }
        assert_eq!(sizes, [50, 50, 20]);
        assert_eq!(seen.len(), 120);
        assert_eq!(seen.first().unwrap(), "github:atlas/repo-001");
        assert_eq!(seen.last().unwrap(), "github:atlas/repo-120");
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, seen, "ordered, no repeats");
        // past the end: an empty page
        assert_eq!(
            data(
                &atlas,
                "read_sources",
                json!({"productId": "prod_456", "cursor": "github:atlas/repo-120"})
            )
            .await,
            json!([])
        );
    }

    #[tokio::test]
    async fn a_tool_reads_only_its_own_product() {
        let (_dir, ctx) = setup().await;
        let p = pipeline_for(&ctx, "prod_123").unwrap();
        for tool in ["read_sources", "read_baseline", "read_context_inputs"] {
            let r = call(&p, tool, json!({"productId": "prod_456"})).await;
            assert_eq!(r.error_kind(), Some(ErrorKind::Authorization), "{tool}");
            assert_eq!(
                r.error().unwrap(),
                format!(
                    "{tool} serves product prod_123 (the product of this agent run) and may not read product prod_456; call it with productId \"prod_123\""
                )
            );
            let r = call(&p, tool, json!({})).await;
            assert_eq!(r.error_kind(), Some(ErrorKind::Validation), "{tool}");
        }
    }

    #[tokio::test]
    async fn definitions_validate_cleanly_and_unknown_tools_are_errors() {
        let (_dir, ctx) = setup().await;
        for tool in product_tools(&ctx, "prod_123") {
            let def = tool.definition();
            let spec = validate(&def).unwrap();
            assert!(
                spec.warnings().is_empty(),
                "{}: {:?}",
                def.name,
                spec.warnings()
            );
        }
        // seed 002: a tool that does not exist gives an error result, never a throw
        let p = pipeline_for(&ctx, "prod_123").unwrap();
        let r = call(&p, "read_everything", json!({"productId": "prod_123"})).await;
        assert_eq!(r.error_kind(), Some(ErrorKind::NotFound));
        assert_eq!(r.input, json!({"productId": "prod_123"}));
    }
}

//! The runtime's use cases on each store backend (SQLite in a temp dir; PostgreSQL in a schema
//! of its own when 127.0.0.1:5432 answers): definition add/update/remove, the list and show
//! views and their JSON shape, approve/deny and running an approved call.
#![cfg(test)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use toolgate_core::{
    Effect, ErrorKind, Permission, Pipeline, PipelineBuilder, Principal, PrincipalId, Registry,
    ToolBuilder, ToolDefinition,
};
use toolgate_runtime::decide::{self, Decider, Run};
use toolgate_runtime::definitions::{self, DefinitionParts, Editor};
use toolgate_runtime::views::{self, CallFilter, ToolFilter, ToolSummary};
use toolgate_runtime::{OpError, OpErrorKind};
use toolgate_store::{
    ApprovalStatus, DbUrl, DurableApproval, EventKind, Store, StoreOptions, Tier,
};
use toolgate_test_support::pg;

/// One store per backend: SQLite always, PostgreSQL (a fresh schema) when reachable.
async fn backends() -> Vec<(Store, Option<(String, String)>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(
        &DbUrl::Sqlite(dir.path().join("toolgate.db")),
        &StoreOptions::default(),
    )
    .await
    .unwrap();
    let mut out = vec![(sqlite, None, Some(dir))];
    if let Some(url) = pg::available("the PostgreSQL half of this test").await {
        let schema = pg::unique_schema("tg_runtime");
        let options = StoreOptions {
            pg_schema: Some(schema.clone()),
            ..StoreOptions::default()
        };
        let store = Store::open(&DbUrl::parse(&url).unwrap(), &options)
            .await
            .unwrap();
        out.push((store, Some((url, schema)), None));
    }
    out
}

async fn cleanup(store: Store, schema: Option<(String, String)>) {
    store.close().await;
    if let Some((url, schema)) = schema {
        pg::drop_schema(&url, &schema).await;
    }
}

macro_rules! on_each_backend {
    ($($name:ident => $body:path;)+) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for (store, schema, _dir) in backends().await {
                eprintln!("-- {} on {}", stringify!($name), store.backend());
                $body(&store).await;
                cleanup(store, schema).await;
            }
        }
    )+};
}

on_each_backend! {
    adding_validates_stores_serves_and_records_the_parameters => add_body;
    updating_keeps_history_and_refuses_what_is_not_stored => update_body;
    removing_refuses_built_ins_files_and_dependencies_before_writing => remove_body;
    the_plan_caps_and_counts_definitions => plan_body;
    views_list_and_show_what_the_caller_may_see => views_body;
    approving_runs_the_call_once_and_denying_never_runs_it => decide_body;
    an_approved_call_whose_principal_is_gone_ends_with_an_authorization_result => gone_body;
    deciding_needs_the_permission_and_a_visible_tool => decider_body;
}

fn enterprise() -> Tier {
    Tier::named("enterprise").unwrap()
}

/// A registry with one built-in, `calculator`.
fn registry() -> Registry {
    let registry = Registry::new();
    let calculator = ToolBuilder::new("calculator", "Evaluates arithmetic for tests, exactly.")
        .handler(|_, _| async { Ok(json!(1)) });
    registry.register_builtin(Arc::new(calculator)).unwrap();
    registry
}

fn parts<'a>(store: &'a Store, registry: &'a Registry) -> DefinitionParts<'a> {
    DefinitionParts {
        store,
        registry,
        program_user: None,
    }
}

fn weather() -> ToolDefinition {
    let text = r#"{"name": "weather_now", "description": "Current weather for a city. Use when asked about the weather.",
        "parameters": [{"name": "city", "type": "string", "required": true}, {"name": "units", "type": "string"}]}"#;
    ToolDefinition::parse(text, toolgate_core::Format::Json).unwrap()
}

/// A definition with a raw input schema of three properties (no `parameters`).
fn schema_only() -> ToolDefinition {
    let text = r#"{"name": "lookup", "description": "Looks a record up by its key, for tests only.",
        "input_schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "integer"}}}}"#;
    ToolDefinition::parse(text, toolgate_core::Format::Json).unwrap()
}

async fn validated_counts(store: &Store) -> Vec<(String, u64)> {
    store
        .events(0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventKind::Validated)
        .map(|e| {
            let n = e.detail.unwrap()["parameterCount"].as_u64().unwrap();
            (e.tool, n)
        })
        .collect()
}

async fn add_body(store: &Store) {
    let registry = registry();
    let me = Principal::local();
    let editor = Editor {
        principal: &me,
        plan: &enterprise(),
        actor: "test",
    };
    let change = definitions::add(parts(store, &registry), editor, weather())
        .await
        .unwrap();
    assert_eq!(change.stored.version, 1);
    assert!(change.changed_fields.is_empty());
    assert!(
        registry.get("weather_now").is_some(),
        "served after the add"
    );
    assert_eq!(
        store
            .definition("weather_now")
            .await
            .unwrap()
            .unwrap()
            .version,
        1
    );
    // The validated event counts the parameters of the resolved input schema: a definition
    // with a raw input schema counts its properties (the REST API used to count 0 here).
    definitions::add(parts(store, &registry), editor, schema_only())
        .await
        .unwrap();
    assert_eq!(
        validated_counts(store).await,
        [("weather_now".to_owned(), 2), ("lookup".to_owned(), 3)]
    );
    // A duplicate and a built-in name are refused by the registry; nothing more is written.
    let e = definitions::add(parts(store, &registry), editor, weather())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Conflict, "{e}");
    let mut clash = weather();
    clash.name = "calculator".into();
    let e = definitions::add(parts(store, &registry), editor, clash)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Forbidden, "{e}");
    // Every validation problem at once.
    let mut bad = weather();
    bad.name = "Bad-Name".into();
    bad.description = String::new();
    let e = definitions::add(parts(store, &registry), editor, bad)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Invalid);
    let OpError::Refused { error, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(error.report().unwrap().errors.len() >= 2, "{e}");
    assert_eq!(store.definitions().await.unwrap().len(), 2);
}

async fn update_body(store: &Store) {
    let registry = registry();
    let me = Principal::local();
    let editor = Editor {
        principal: &me,
        plan: &enterprise(),
        actor: "test",
    };
    definitions::add(parts(store, &registry), editor, weather())
        .await
        .unwrap();
    let mut v2 = weather();
    v2.tags = vec!["weather".into()];
    let change = definitions::update(parts(store, &registry), editor, v2.clone())
        .await
        .unwrap();
    assert_eq!(change.stored.version, 2);
    assert_eq!(change.changed_fields, ["tags"]);
    assert_eq!(
        registry.get("weather_now").unwrap().spec().tags(),
        ["weather"]
    );
    // The same again changes (and writes) nothing.
    let same = definitions::update(parts(store, &registry), editor, v2)
        .await
        .unwrap();
    assert_eq!(same.stored.version, 2);
    assert!(same.changed_fields.is_empty());
    assert_eq!(store.history("weather_now").await.unwrap().len(), 2);
    // Built-ins cannot be changed; a served tool that is not stored (a tools-directory file)
    // and an unknown one are not found in the store.
    let mut calc = weather();
    calc.name = "calculator".into();
    let e = definitions::update(parts(store, &registry), editor, calc)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Forbidden, "{e}");
    registry.register_definition(schema_only()).unwrap();
    let e = definitions::update(parts(store, &registry), editor, schema_only())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("tools directory"), "{e}");
    let mut unknown = weather();
    unknown.name = "nowhere".into();
    let e = definitions::update(parts(store, &registry), editor, unknown)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound, "{e}");
    // A principal that may not see the tool gets the same answer as for a missing one.
    let other = Principal::new(PrincipalId::parse("other").unwrap()).only_tools(["calculator"]);
    let hidden = Editor {
        principal: &other,
        ..editor
    };
    let e = definitions::update(parts(store, &registry), hidden, weather())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound, "{e}");
}

async fn remove_body(store: &Store) {
    let registry = registry();
    let me = Principal::local();
    let editor = Editor {
        principal: &me,
        plan: &enterprise(),
        actor: "test",
    };
    definitions::add(parts(store, &registry), editor, weather())
        .await
        .unwrap();
    let mut dependent = schema_only();
    dependent.depends_on = vec!["weather_now".into()];
    definitions::add(parts(store, &registry), editor, dependent)
        .await
        .unwrap();
    // Still depended on: refused before anything is written (the store keeps it too).
    let e = definitions::remove(parts(store, &registry), editor, "weather_now")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Conflict, "{e}");
    assert!(store.definition("weather_now").await.unwrap().is_some());
    assert!(registry.get("weather_now").is_some());
    definitions::remove(parts(store, &registry), editor, "lookup")
        .await
        .unwrap();
    let removed = definitions::remove(parts(store, &registry), editor, "weather_now")
        .await
        .unwrap();
    assert_eq!(removed.version, 1);
    assert!(registry.get("weather_now").is_none());
    assert!(store.definition("weather_now").await.unwrap().is_none());
    assert!(
        store.history("weather_now").await.unwrap()[0]
            .deleted_at
            .is_some()
    );
    // Built-ins, tools-directory files and unknown names.
    let e = definitions::remove(parts(store, &registry), editor, "calculator")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Forbidden, "{e}");
    registry.register_definition(weather()).unwrap();
    let e = definitions::remove(parts(store, &registry), editor, "weather_now")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Conflict, "{e}");
    let e = definitions::remove(parts(store, &registry), editor, "nowhere")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound, "{e}");
}

async fn plan_body(store: &Store) {
    let registry = registry();
    let me = Principal::local();
    let core = Tier::named("core").unwrap();
    let editor = Editor {
        principal: &me,
        plan: &core,
        actor: "test",
    };
    // core allows no custom definitions: the store refuses in the insert's transaction.
    let e = definitions::add(parts(store, &registry), editor, weather())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::PlanLimit, "{e}");
    assert!(registry.get("weather_now").is_none(), "not served");
    // writer_pro caps isolation at standard: a strict definition is invalid under it.
    let writer = Tier::named("writer_pro").unwrap();
    let mut strict = weather();
    strict.constraints = Some(toolgate_core::Constraints {
        isolation: Some(toolgate_core::Isolation::Strict),
        ..Default::default()
    });
    let e = definitions::add(
        parts(store, &registry),
        Editor {
            plan: &writer,
            ..editor
        },
        strict,
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Invalid, "{e}");
    assert!(store.definitions().await.unwrap().is_empty());
}

async fn views_body(store: &Store) {
    let registry = registry();
    let me = Principal::local();
    let editor = Editor {
        principal: &me,
        plan: &enterprise(),
        actor: "test",
    };
    definitions::add(parts(store, &registry), editor, weather())
        .await
        .unwrap();
    registry.register_definition(schema_only()).unwrap();
    let all = views::all_tools(&registry, &me, &ToolFilter::default()).unwrap();
    let names: Vec<&str> = all.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["calculator", "lookup", "weather_now"]);
    assert_eq!(all.next_cursor, None);
    // Pages, and the filters of the REST API.
    let page = views::tools_page(&registry, &me, &ToolFilter::default(), 2, None).unwrap();
    assert_eq!(page.tools.len(), 2);
    let rest =
        views::tools_page(&registry, &me, &ToolFilter::default(), 2, page.next_cursor).unwrap();
    assert_eq!(rest.tools.len(), 1);
    let custom = ToolFilter {
        builtin: Some(false),
        ..ToolFilter::default()
    };
    assert_eq!(
        views::all_tools(&registry, &me, &custom)
            .unwrap()
            .tools
            .len(),
        2
    );
    // What a principal may not see is not listed, shown or given a history.
    let other = Principal::new(PrincipalId::parse("other").unwrap()).only_tools(["calculator"]);
    let seen = views::all_tools(&registry, &other, &ToolFilter::default()).unwrap();
    assert_eq!(seen.tools.len(), 1);
    assert!(
        views::tool_detail(&registry, store, &other, "weather_now")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        views::history(store, &other, "weather_now")
            .await
            .unwrap()
            .is_none()
    );
    // The one JSON shape (as /openapi.json documents it): optional fields left out when absent.
    let calculator = &all.tools[0];
    let json = serde_json::to_value(calculator).unwrap();
    assert_eq!(
        json,
        json!({
            "name": "calculator", "description": "Evaluates arithmetic for tests, exactly.",
            "category": "system", "effect": "read", "consequence": "low",
            "requiresConfirmation": false, "tags": [], "builtin": true, "implemented": true,
            "definitionHash": calculator.definition_hash,
        })
    );
    let weather_summary: &ToolSummary = &all.tools[2];
    assert!(
        !weather_summary.implemented,
        "a definition without a run kind"
    );
    let detail = views::tool_detail(&registry, store, &me, "weather_now")
        .await
        .unwrap()
        .unwrap();
    let json = serde_json::to_value(&detail).unwrap();
    assert_eq!(json["storedVersion"], 1);
    assert_eq!(json["name"], "weather_now");
    assert_eq!(json["definition"]["name"], "weather_now");
    assert_eq!(json["limits"]["maxAttempts"], detail.limits.max_attempts);
    assert!(json["inputSchema"]["properties"]["city"].is_object());
    assert!(json.get("outputSchema").is_none());
    let file_tool = views::tool_detail(&registry, store, &me, "lookup")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(file_tool.stored_version, None);
    let history = views::history(store, &me, "weather_now")
        .await
        .unwrap()
        .unwrap();
    let json = serde_json::to_value(&history).unwrap();
    assert_eq!(json["versions"][0]["version"], 1);
    assert!(json["versions"][0]["updatedAt"].is_string());
    // Calls: the shape every front-end lists.
    let page = views::calls_page(store, &CallFilter::default(), 10, None, |_, _| true)
        .await
        .unwrap();
    let json = serde_json::to_value(&page).unwrap();
    assert_eq!(json, json!({ "calls": [], "nextCursor": null }));
}

/// A registry with `send_email` (confirmation required), whose runs are counted, and a pipeline
/// with the durable gate.
fn gated(store: &Store, count: Arc<AtomicU32>) -> (Arc<Registry>, Pipeline) {
    let registry = Arc::new(Registry::new());
    let tool = ToolBuilder::new("send_email", "Sends one email to one address, for tests.")
        .effect(Effect::SideEffect)
        .requires_confirmation(true)
        .input_schema(
            json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        )
        .handler(move |args, _ctx| {
            let count = Arc::clone(&count);
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"sent": args["to"]}))
            }
        });
    registry.register(Arc::new(tool)).unwrap();
    let gate = Arc::new(DurableApproval::new(
        store.clone(),
        Duration::from_secs(600),
        Arc::new(|a| format!("decide {}", a.id)),
    ));
    let pipeline = PipelineBuilder::new(Arc::clone(&registry))
        .approval(gate)
        .build();
    (registry, pipeline)
}

/// Asks for approval as `principal`; returns the approval id.
async fn pending(pipeline: &Pipeline, principal: Principal) -> String {
    let r = pipeline
        .call(
            toolgate_core::CallRequest::new("send_email", json!({"to": "a@example.com"}))
                .principal(principal),
        )
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::ConfirmationRequired));
    r.approval_id.unwrap()
}

fn agent() -> Principal {
    Principal::new(PrincipalId::parse("agent").unwrap())
}

async fn decide_body(store: &Store) {
    let count = Arc::new(AtomicU32::new(0));
    let (_registry, pipeline) = gated(store, Arc::clone(&count));
    let me = Principal::local();
    let decider = Decider {
        principal: &me,
        actor: "cli:test",
    };
    let id = pending(&pipeline, agent()).await;
    let approved = decide::approve(store, decider, &id, Some("fine"))
        .await
        .unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    let ran = decide::run_approved(store, &pipeline, &id, |p| (p == "agent").then(agent))
        .await
        .unwrap();
    let Run::Ran { approval, result } = ran else {
        panic!("it should run here")
    };
    assert_eq!(approval.status, ApprovalStatus::Executed);
    assert_eq!(result.data(), Some(&json!({"sent": "a@example.com"})));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Once: a second runner does not run it, a second decision is refused.
    let again = decide::run_approved(store, &pipeline, &id, |_| Some(agent()))
        .await
        .unwrap();
    assert!(matches!(again, Run::NotClaimed));
    let e = decide::approve(store, decider, &id, None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains("executed"), "{e}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Denied: never runs.
    let id = pending(&pipeline, agent()).await;
    let denied = decide::deny(store, decider, &id, None).await.unwrap();
    assert_eq!(denied.status, ApprovalStatus::Denied);
    let ran = decide::run_approved(store, &pipeline, &id, |_| Some(agent()))
        .await
        .unwrap();
    assert!(matches!(ran, Run::NotClaimed));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let e = decide::run_approved(store, &pipeline, "apr_nope", |_| None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound);
}

async fn gone_body(store: &Store) {
    let count = Arc::new(AtomicU32::new(0));
    let (_registry, pipeline) = gated(store, Arc::clone(&count));
    let me = Principal::local();
    let decider = Decider {
        principal: &me,
        actor: "api:ops",
    };
    let id = pending(&pipeline, agent()).await;
    decide::approve(store, decider, &id, None).await.unwrap();
    // The principal is no longer configured: nothing runs, and the approval does not stay
    // `approved` (the CLI used to leave it so); it ends with an authorization result, a whole
    // envelope naming the approval's tool and call.
    let ran = decide::run_approved(store, &pipeline, &id, |_| None)
        .await
        .unwrap();
    let Run::Ran { approval, result } = ran else {
        panic!("it should be settled here")
    };
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_eq!(approval.status, ApprovalStatus::Executed);
    assert_eq!(result.error_kind(), Some(ErrorKind::Authorization));
    assert!(result.error().unwrap().contains("agent"), "{result:?}");
    assert_eq!(result.tool, "send_email");
    assert_eq!(result.call_id.to_string(), approval.call_id);
    let stored = approval.result.unwrap();
    assert_eq!(stored["errorKind"], "authorization");
    let parsed: toolgate_core::ToolResult = serde_json::from_value(stored).unwrap();
    assert_eq!(parsed.tool, "send_email");
}

async fn decider_body(store: &Store) {
    let count = Arc::new(AtomicU32::new(0));
    let (_registry, pipeline) = gated(store, Arc::clone(&count));
    let id = pending(&pipeline, agent()).await;
    // Without toolgate.approvals.decide: forbidden.
    let viewer = agent().grant(Permission::parse("toolgate.audit.read").unwrap());
    let e = decide::approve(
        store,
        Decider {
            principal: &viewer,
            actor: "api:agent",
        },
        &id,
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::Forbidden, "{e}");
    // A tool the decider may not see: the approval does not exist for it.
    let blind = Principal::new(PrincipalId::parse("blind").unwrap())
        .grant(Permission::parse("toolgate.approvals.decide").unwrap())
        .only_tools(["calculator"]);
    let e = decide::deny(
        store,
        Decider {
            principal: &blind,
            actor: "api:blind",
        },
        &id,
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound, "{e}");
    let e = decide::deny(
        store,
        Decider {
            principal: &Principal::local(),
            actor: "cli:test",
        },
        "apr_00000000000000000000000000000000",
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), OpErrorKind::NotFound, "{e}");
    assert_eq!(
        store.approval(&id).await.unwrap().unwrap().status,
        ApprovalStatus::Pending
    );
}

on_each_backend! {
    the_runtime_offers_the_use_cases_over_its_own_parts => runtime_body;
}

/// The same use cases as `Runtime` methods, over an assembled runtime (its production pipeline
/// with the durable gate, its principals: here the local one only).
async fn runtime_body(store: &Store) {
    let count = Arc::new(AtomicU32::new(0));
    let (registry, _) = gated(store, Arc::clone(&count));
    let runtime = toolgate_runtime::Runtime::assemble(
        toolgate_runtime::Parts::new(store.clone(), Arc::clone(&registry)).unwrap(),
    );
    let me = Principal::local();
    let editor = Editor {
        principal: &me,
        plan: &enterprise(),
        actor: "test",
    };
    let change = runtime.add_definition(editor, weather()).await.unwrap();
    assert_eq!(change.stored.version, 1);
    let page = runtime.all_tools(&me, &ToolFilter::default()).unwrap();
    assert_eq!(page.tools.len(), 2);
    assert!(
        runtime
            .tool_detail(&me, "weather_now")
            .await
            .unwrap()
            .is_some()
    );
    runtime
        .remove_definition(editor, "weather_now")
        .await
        .unwrap();
    // `local` (the command line's principal) always resolves; an unknown id does not.
    assert!(runtime.principal_now("local").is_some());
    assert!(runtime.principal_now("agent").is_none());
    let decider = Decider {
        principal: &me,
        actor: "cli:test",
    };
    let id = pending(runtime.pipeline(), Principal::local()).await;
    runtime.approve(decider, &id, None).await.unwrap();
    let Run::Ran { result, .. } = runtime.run_approved(&id).await.unwrap() else {
        panic!("it should run here")
    };
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let id = pending(runtime.pipeline(), agent()).await;
    runtime.approve(decider, &id, None).await.unwrap();
    let Run::Ran { result, .. } = runtime.run_approved(&id).await.unwrap() else {
        panic!("it should be settled here")
    };
    assert_eq!(result.error_kind(), Some(ErrorKind::Authorization));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let denied = pending(runtime.pipeline(), agent()).await;
    runtime.deny(decider, &denied, None).await.unwrap();
    assert!(matches!(
        runtime.run_approved(&denied).await.unwrap(),
        Run::NotClaimed
    ));
}

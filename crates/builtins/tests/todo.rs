//! `todo_manager` through a real pipeline (registry, authorization, input and output validation)
//! over the in-memory plan store: seed 002's example exactly, every action, the focus rules, the
//! 15-item limit, per-principal and per-planId plans, error messages, and concurrent updates.
#![cfg(test)]

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_builtins::{
    MAX_PLAN_ITEMS, MemoryPlanStore, PlanStore, TODO_MANAGER, TODO_PERMISSION, TodoManager,
};
use toolgate_core::{
    CallRequest, Category, Effect, ErrorKind, Permission, Pipeline, PipelineBuilder, Principal,
    PrincipalId, Registry, Tool, ToolResult, validate,
};

fn pipeline_over(store: Arc<dyn PlanStore>) -> Pipeline {
    let registry = Arc::new(Registry::new());
    registry
        .register_all(vec![Arc::new(TodoManager::new(store))], true)
        .unwrap();
    // No approval handler: the default one denies everything, so a passing call proves the tool
    // needs no confirmation.
    PipelineBuilder::new(registry).build()
}

fn pipeline() -> Pipeline {
    pipeline_over(Arc::new(MemoryPlanStore::new()))
}

fn who(id: &str) -> Principal {
    Principal::new(PrincipalId::parse(id).unwrap())
        .grant(Permission::parse(TODO_PERMISSION).unwrap())
}

async fn call_as(p: &Pipeline, principal: &str, args: Value) -> ToolResult {
    p.call(CallRequest::new(TODO_MANAGER, args).principal(who(principal)))
        .await
}

/// The plan's items after a call that must succeed.
async fn ok(p: &Pipeline, principal: &str, args: Value) -> Value {
    let r = call_as(p, principal, args.clone()).await;
    assert!(
        r.is_ok(),
        "{args} failed: {:?} {:?}",
        r.error_kind(),
        r.error()
    );
    r.data().unwrap().clone()
}

/// The kind and message of a call that must fail.
async fn fails(p: &Pipeline, principal: &str, args: Value) -> (ErrorKind, String) {
    let r = call_as(p, principal, args.clone()).await;
    assert!(!r.is_ok(), "{args} unexpectedly succeeded: {:?}", r.data());
    (r.error_kind().unwrap(), r.error().unwrap().to_owned())
}

/// `[[id, status], …]` of a plan, for compact assertions.
fn states(plan: &Value) -> Vec<(String, String)> {
    plan["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap().to_owned(),
                i["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn st(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test]
async fn seed_002_example_exactly() {
    let p = pipeline();
    let input = json!({"action":"create","items":[{"id":"1","content":"Gather context","status":"pending"},{"id":"2","content":"Map domains","status":"pending"}]});
    let r = call_as(&p, "agent", input).await;
    assert_eq!(
        r.data().unwrap(),
        &json!({"items":[{"id":"1","content":"Gather context","status":"in_progress"},{"id":"2","content":"Map domains","status":"pending"}]})
    );
    // The envelope echoes the input with planId's default applied.
    assert_eq!(r.input["planId"], "default");
    assert_eq!(r.attempts, 1);
}

#[test]
fn definition_is_valid_and_governed() {
    let tool = TodoManager::new(Arc::new(MemoryPlanStore::new()));
    let def = tool.definition();
    let spec = validate(&def).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(def.name, TODO_MANAGER);
    assert_eq!(def.category, Some(Category::System));
    assert_eq!(def.effect, Some(Effect::Write));
    assert_eq!(def.requires_confirmation, Some(false));
    assert_eq!(def.idempotent, Some(false));
    assert_eq!(def.required_permissions, vec![TODO_PERMISSION.to_owned()]);
    assert!(def.output_schema.is_some());
    assert!(def.description.len() >= 300);
}

#[tokio::test]
async fn every_action_in_turn() {
    let p = pipeline();
    let plan = ok(
        &p,
        "a",
        json!({"action": "create", "items": [
            {"content": "Gather context"}, {"content": "Map domains"}, {"content": "Write summary"}
        ]}),
    )
    .await;
    // ids are numbered, statuses default to pending, the first pending item is started
    assert_eq!(
        states(&plan),
        st(&[("1", "in_progress"), ("2", "pending"), ("3", "pending")])
    );

    // add appends, numbering after the highest id
    let plan = ok(
        &p,
        "a",
        json!({"action": "add", "items": [{"content": "Review"}]}),
    )
    .await;
    assert_eq!(
        plan["items"][3],
        json!({"id": "4", "content": "Review", "status": "pending"})
    );

    // complete moves the focus to the next pending item
    let plan = ok(&p, "a", json!({"action": "complete", "itemId": "1"})).await;
    assert_eq!(
        states(&plan),
        st(&[
            ("1", "completed"),
            ("2", "in_progress"),
            ("3", "pending"),
            ("4", "pending")
        ])
    );

    // update with top-level fields: content only
    let plan = ok(
        &p,
        "a",
        json!({"action": "update", "itemId": "3", "content": "Write the summary"}),
    )
    .await;
    assert_eq!(plan["items"][2]["content"], "Write the summary");
    assert_eq!(plan["items"][2]["status"], "pending");

    // update via the one item in items (its id names the item): setting in_progress moves focus
    let plan = ok(
        &p,
        "a",
        json!({"action": "update", "items": [{"id": "4", "status": "in_progress"}]}),
    )
    .await;
    assert_eq!(
        states(&plan),
        st(&[
            ("1", "completed"),
            ("2", "pending"),
            ("3", "pending"),
            ("4", "in_progress")
        ])
    );

    // remove the focused item: the first pending one takes over
    let plan = ok(&p, "a", json!({"action": "remove", "itemId": "4"})).await;
    assert_eq!(
        states(&plan),
        st(&[("1", "completed"), ("2", "in_progress"), ("3", "pending")])
    );

    // list reads without changing
    let listed = ok(&p, "a", json!({"action": "list"})).await;
    assert_eq!(listed, plan);

    // completing everything leaves nothing in progress
    ok(&p, "a", json!({"action": "complete", "itemId": "2"})).await;
    let plan = ok(&p, "a", json!({"action": "complete", "itemId": "3"})).await;
    assert_eq!(
        states(&plan),
        st(&[("1", "completed"), ("2", "completed"), ("3", "completed")])
    );

    // reopening a completed item makes it the focus again
    let plan = ok(
        &p,
        "a",
        json!({"action": "update", "itemId": "1", "status": "pending", "content": "Gather more context"}),
    )
    .await;
    assert_eq!(
        plan["items"][0],
        json!({"id": "1", "content": "Gather more context", "status": "in_progress"})
    );

    // create replaces the whole plan
    let plan = ok(
        &p,
        "a",
        json!({"action": "create", "items": [{"id": "x", "content": "Only step", "status": "completed"}]}),
    )
    .await;
    assert_eq!(states(&plan), st(&[("x", "completed")]));
}

#[tokio::test]
async fn list_of_a_plan_never_created_is_empty() {
    let p = pipeline();
    assert_eq!(
        ok(&p, "a", json!({"action": "list"})).await,
        json!({"items": []})
    );
    assert_eq!(
        ok(&p, "a", json!({"action": "list", "planId": "other"})).await,
        json!({"items": []})
    );
}

#[tokio::test]
async fn add_with_an_in_progress_item_moves_the_focus() {
    let p = pipeline();
    ok(
        &p,
        "a",
        json!({"action": "create", "items": [{"content": "One"}, {"content": "Two"}]}),
    )
    .await;
    let plan = ok(
        &p,
        "a",
        json!({"action": "add", "items": [{"content": "Urgent", "status": "in_progress"}]}),
    )
    .await;
    assert_eq!(
        states(&plan),
        st(&[("1", "pending"), ("2", "pending"), ("3", "in_progress")])
    );
}

#[tokio::test]
async fn principals_and_plan_ids_never_share_plans() {
    let store: Arc<dyn PlanStore> = Arc::new(MemoryPlanStore::new());
    let p = pipeline_over(Arc::clone(&store));
    let alice = ok(
        &p,
        "alice",
        json!({"action": "create", "items": [{"content": "Alice's step"}]}),
    )
    .await;
    let bob = ok(
        &p,
        "bob",
        json!({"action": "create", "items": [{"content": "Bob's step"}, {"content": "Bob again"}]}),
    )
    .await;
    let alice_release = ok(
        &p,
        "alice",
        json!({"action": "create", "planId": "release-1.2", "items": [{"content": "Tag the release"}]}),
    )
    .await;
    assert_eq!(ok(&p, "alice", json!({"action": "list"})).await, alice);
    assert_eq!(ok(&p, "bob", json!({"action": "list"})).await, bob);
    assert_eq!(
        ok(
            &p,
            "alice",
            json!({"action": "list", "planId": "release-1.2"})
        )
        .await,
        alice_release
    );
    assert_eq!(
        ok(
            &p,
            "bob",
            json!({"action": "list", "planId": "release-1.2"})
        )
        .await,
        json!({"items": []})
    );
    // Bob cannot touch Alice's item 1 through his own plan: his item 1 changes instead.
    ok(&p, "bob", json!({"action": "remove", "itemId": "1"})).await;
    assert_eq!(ok(&p, "alice", json!({"action": "list"})).await, alice);
    // and the store keys by principal id and plan key
    let raw = store
        .load(&PrincipalId::parse("alice").unwrap(), "release-1.2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw, alice_release["items"]);
}

#[tokio::test]
async fn at_most_fifteen_items() {
    let p = pipeline();
    let many = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"content": format!("Step {i}")}))
            .collect()
    };
    let (kind, msg) = fails(&p, "a", json!({"action": "create", "items": many(16)})).await;
    assert_eq!(kind, ErrorKind::Validation);
    assert_eq!(
        msg,
        "A plan holds at most 15 items; this one would have 16. Remove or complete-and-remove items first"
    );
    let plan = ok(&p, "a", json!({"action": "create", "items": many(14)})).await;
    assert_eq!(plan["items"].as_array().unwrap().len(), 14);
    let plan = ok(&p, "a", json!({"action": "add", "items": many(1)})).await;
    assert_eq!(plan["items"].as_array().unwrap().len(), MAX_PLAN_ITEMS);
    let (kind, msg) = fails(&p, "a", json!({"action": "add", "items": many(2)})).await;
    assert_eq!(kind, ErrorKind::Validation);
    assert!(
        msg.contains("at most 15 items; this one would have 17"),
        "{msg}"
    );
    // the refused add changed nothing
    assert_eq!(
        ok(&p, "a", json!({"action": "list"})).await["items"]
            .as_array()
            .unwrap()
            .len(),
        15
    );
}

#[tokio::test]
async fn a_failed_call_changes_nothing() {
    let p = pipeline();
    let before = ok(
        &p,
        "a",
        json!({"action": "create", "items": [{"id": "1", "content": "One"}]}),
    )
    .await;
    fails(&p, "a", json!({"action": "add", "items": [{"id": "2", "content": "Two"}, {"id": "1", "content": "Dup"}]})).await;
    fails(&p, "a", json!({"action": "complete", "itemId": "9"})).await;
    assert_eq!(ok(&p, "a", json!({"action": "list"})).await, before);
}

#[tokio::test]
async fn the_permission_is_required() {
    let p = pipeline();
    let r = p
        .call(
            CallRequest::new(TODO_MANAGER, json!({"action": "list"}))
                .principal(Principal::new(PrincipalId::parse("nobody").unwrap())),
        )
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Authorization));
    assert!(
        r.error().unwrap().contains(TODO_PERMISSION),
        "{:?}",
        r.error()
    );
}

/// Twelve concurrent adds of one item each to the same plan: all twelve arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_adds_lose_nothing() {
    let p = pipeline();
    let mut tasks = Vec::new();
    for i in 0..12 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            ok(&p, "a", json!({"action": "add", "items": [{"id": format!("t{i}"), "content": format!("Task {i}")}]})).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let plan = ok(&p, "a", json!({"action": "list"})).await;
    let items = plan["items"].as_array().unwrap();
    assert_eq!(items.len(), 12);
    let in_progress = items
        .iter()
        .filter(|i| i["status"] == "in_progress")
        .count();
    assert_eq!(in_progress, 1);
}

/// Every refusal, its kind and message (the messages are what a model reads to fix its call).
#[tokio::test]
async fn error_messages() {
    let p = pipeline();
    ok(
        &p,
        "a",
        json!({"action": "create", "items": [{"id": "1", "content": "One"}, {"id": "2", "content": "Two"}]}),
    )
    .await;
    let cases = [
        json!({"action": "explode"}),
        json!({}),
        json!({"action": "create"}),
        json!({"action": "create", "items": []}),
        json!({"action": "add", "items": [{"status": "pending"}]}),
        json!({"action": "create", "items": [{"id": "1", "content": "A"}, {"id": "1", "content": "B"}]}),
        json!({"action": "add", "items": [{"id": "2", "content": "Again"}]}),
        json!({"action": "create", "items": [{"content": "A", "status": "in_progress"}, {"content": "B", "status": "in_progress"}]}),
        json!({"action": "create", "items": [{"content": "   "}]}),
        json!({"action": "complete"}),
        json!({"action": "complete", "itemId": "9"}),
        json!({"action": "remove", "itemId": "9", "planId": "empty"}),
        json!({"action": "update", "itemId": "1"}),
        json!({"action": "update", "status": "completed"}),
        json!({"action": "update", "itemId": "1", "status": "done"}),
        json!({"action": "update", "itemId": "1", "status": "completed", "items": [{"id": "1", "content": "X"}]}),
        json!({"action": "update", "itemId": "1", "items": [{"id": "2", "content": "X"}]}),
        json!({"action": "update", "items": [{"id": "1", "content": "X"}, {"id": "2", "content": "Y"}]}),
        json!({"action": "list", "itemId": "1"}),
        json!({"action": "complete", "itemId": "1", "items": [{"content": "X"}]}),
        json!({"action": "create", "items": [{"content": "X"}], "status": "pending"}),
        json!({"action": "list", "planId": "no spaces"}),
        json!({"action": "add", "items": [{"content": "X", "priority": "high"}]}),
    ];
    let mut out = String::new();
    for args in cases {
        let (kind, msg) = fails(&p, "a", args.clone()).await;
        out.push_str(&format!("{args}\n  {kind}: {msg}\n"));
    }
    insta::assert_snapshot!(out);
}

#[tokio::test]
async fn list_pages_the_plan_with_limit_and_cursor() {
    let p = pipeline();
    let items: Vec<Value> = (1..=7)
        .map(|i| json!({"content": format!("Step {i}")}))
        .collect();
    ok(&p, "ana", json!({"action": "create", "items": items})).await;
    let whole = ok(&p, "ana", json!({"action": "list"})).await;
    assert_eq!(whole["items"].as_array().unwrap().len(), 7);
    assert!(whole.get("nextCursor").is_none(), "{whole}");

    // Pages of 3: every item once, in plan order.
    let mut seen = Vec::new();
    let mut args = json!({"action": "list", "limit": 3});
    let mut sizes = Vec::new();
    loop {
        let page = ok(&p, "ana", args.clone()).await;
        let items = page["items"].as_array().unwrap();
        sizes.push(items.len());
        seen.extend(items.iter().cloned());
        match page.get("nextCursor") {
            Some(c) => args["cursor"] = c.clone(),
            None => break,
        }
    }
    assert_eq!(sizes, [3, 3, 1]);
    assert_eq!(Value::Array(seen), whole["items"]);

    // The cursor is bound to its plan; a removed item makes it stale; garbage is refused.
    let first = ok(&p, "ana", json!({"action": "list", "limit": 2})).await;
    let cursor = first["nextCursor"].clone();
    ok(
        &p,
        "ana",
        json!({"action": "create", "planId": "other", "items": [{"content": "X"}]}),
    )
    .await;
    let (kind, message) = fails(
        &p,
        "ana",
        json!({"action": "list", "planId": "other", "cursor": cursor}),
    )
    .await;
    assert_eq!(kind, ErrorKind::Validation);
    assert!(
        message.starts_with("cursor was made for planId \"default\""),
        "{message}"
    );
    ok(&p, "ana", json!({"action": "remove", "itemId": "2"})).await;
    let (kind, message) = fails(&p, "ana", json!({"action": "list", "cursor": cursor})).await;
    assert_eq!(kind, ErrorKind::Validation);
    assert_eq!(
        message,
        "cursor is stale: item \"2\" was removed from plan \"default\" since the previous page; list again without cursor"
    );
    let (kind, message) = fails(&p, "ana", json!({"action": "list", "cursor": "xyz"})).await;
    assert_eq!(kind, ErrorKind::Validation);
    assert!(message.contains("leave cursor out"), "{message}");
    // Only list pages.
    let (kind, message) = fails(
        &p,
        "ana",
        json!({"action": "complete", "itemId": "1", "limit": 2}),
    )
    .await;
    assert_eq!(kind, ErrorKind::Validation);
    assert!(
        message.starts_with("Action complete does not take limit"),
        "{message}"
    );
    let (kind, _) = fails(&p, "ana", json!({"action": "list", "limit": 16})).await;
    assert_eq!(kind, ErrorKind::Validation);
}

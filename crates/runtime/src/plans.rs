//! `todo_manager`'s plans in the database: [`StorePlans`] implements the built-in's `PlanStore`
//! over the store's `todo_plans` table, so plans persist across restarts and, on PostgreSQL, are
//! shared by every instance. Updates are atomic per plan (see `Store::update_todo_plan`).

use serde_json::Value;
use toolgate_builtins::{PlanEdit, PlanStore};
use toolgate_core::{BoxFuture, PrincipalId, ToolError};
use toolgate_store::{Store, StoreError, StoreErrorKind};

/// The store as `todo_manager`'s plan store.
#[derive(Clone, Debug)]
pub struct StorePlans(pub Store);

/// A store failure as the tool error a caller sees.
fn tool_error(e: StoreError) -> ToolError {
    let message = format!("The plan store failed: {}", toolgate_core::ErrorChain(&e));
    match e.kind() {
        StoreErrorKind::Unavailable => ToolError::unavailable(message),
        StoreErrorKind::Invalid => ToolError::validation(message),
        _ => ToolError::execution(message),
    }
}

impl PlanStore for StorePlans {
    fn load<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        Box::pin(async move {
            self.0
                .load_todo_plan(principal.as_str(), plan)
                .await
                .map_err(tool_error)
        })
    }

    fn save<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
        items: &'a Value,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            self.0
                .save_todo_plan(principal.as_str(), plan, items)
                .await
                .map_err(tool_error)
        })
    }

    fn update<'a>(
        &'a self,
        principal: &'a PrincipalId,
        plan: &'a str,
        edit: PlanEdit,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            self.0
                .update_todo_plan(principal.as_str(), plan, edit)
                .await
                .map_err(tool_error)?
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use toolgate_builtins::{TODO_MANAGER, TODO_PERMISSION, TodoManager};
    use toolgate_core::{CallRequest, Permission, Pipeline, Principal, Registry, ToolResult};
    use toolgate_store::{DbUrl, StoreOptions};

    use super::*;
    use crate::{Parts, Runtime};

    /// The production pipeline over the todo tool with its plans in the store (a write tool,
    /// audited).
    fn pipeline(store: &Store) -> Pipeline {
        let registry = Arc::new(Registry::new());
        let tool = TodoManager::new(Arc::new(StorePlans(store.clone())));
        registry.register_all(vec![Arc::new(tool)], true).unwrap();
        let runtime = Runtime::assemble(Parts::new(store.clone(), registry).unwrap());
        runtime.pipeline().clone()
    }

    async fn call(p: &Pipeline, who: &str, args: Value) -> ToolResult {
        let principal = Principal::new(PrincipalId::parse(who).unwrap())
            .grant(Permission::parse(TODO_PERMISSION).unwrap());
        p.call(CallRequest::new(TODO_MANAGER, args).principal(principal))
            .await
    }

    /// Plans made through one store survive closing it; the reopened database has them, per
    /// principal, and keeps updating them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plans_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let url = DbUrl::Sqlite(dir.path().join("toolgate.db"));
        let store = Store::open(&url, &StoreOptions::default()).await.unwrap();
        let p = pipeline(&store);
        let created = call(
            &p,
            "alice",
            json!({"action": "create", "items": [{"id": "1", "content": "Gather context"}, {"id": "2", "content": "Map domains"}]}),
        )
        .await;
        assert!(created.is_ok(), "{:?}", created.error());
        let done = call(&p, "alice", json!({"action": "complete", "itemId": "1"})).await;
        assert!(done.is_ok(), "{:?}", done.error());
        call(
            &p,
            "bob",
            json!({"action": "create", "items": [{"content": "Bob's"}]}),
        )
        .await;
        drop(p);
        store.close().await;
        drop(store);

        let reopened = Store::open(&url, &StoreOptions::default()).await.unwrap();
        let p = pipeline(&reopened);
        let listed = call(&p, "alice", json!({"action": "list"})).await;
        assert_eq!(listed.data(), done.data());
        assert_eq!(
            listed.data().unwrap(),
            &json!({"items": [
                {"id": "1", "content": "Gather context", "status": "completed"},
                {"id": "2", "content": "Map domains", "status": "in_progress"}
            ]})
        );
        let bob = call(&p, "bob", json!({"action": "list"})).await;
        assert_eq!(bob.data().unwrap()["items"][0]["content"], "Bob's");
        let plans = StorePlans(reopened.clone());
        let raw = plans
            .load(&PrincipalId::parse("alice").unwrap(), "default")
            .await
            .unwrap();
        assert_eq!(raw.as_ref(), Some(&listed.data().unwrap()["items"]));
        reopened.close().await;
    }
}

//! Durable approvals in the server: the pipeline's default approval gate, running an approved
//! call once (with the principal's grants as configured now), recovery at startup, and the
//! `approval` events waiters watch.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_store::{Approval, DurableApproval, HintFn, RecoveredApprovals, run_approved};

use crate::error::ServerError;
use crate::events::{EventHub, HubEvent};
use crate::{Gateway, Webhook};

/// How a pending approval can be decided, as the server tells callers.
pub(crate) fn hint() -> HintFn {
    Arc::new(|a: &Approval| {
        format!(
            "a person can approve it with POST /v1/approvals/{id}/approve (or `toolgate approvals approve {id}`); watch GET /v1/approvals/{id} or the `approval` events of GET /v1/events",
            id = a.id
        )
    })
}

/// The gate every call without a handler of its own goes through; every approval it creates
/// is announced as an `approval` event and, when one is configured, to the webhook (which
/// sends in a task of its own).
pub(crate) fn durable(
    store: toolgate_store::Store,
    ttl: std::time::Duration,
    hub: EventHub,
    webhook: Option<Arc<Webhook>>,
) -> Arc<DurableApproval> {
    Arc::new(
        DurableApproval::new(store, ttl, hint()).on_created(Arc::new(move |a: &Approval| {
            hub.publish_event(event(a));
            if let Some(webhook) = &webhook {
                webhook.notify(a);
            }
        })),
    )
}

/// The `approval` event of an approval.
pub(crate) fn event(a: &Approval) -> HubEvent {
    HubEvent {
        name: "approval",
        tool: a.tool.clone(),
        data: Arc::new(summary(a)),
    }
}

/// An approval as events and REST show it (the redacted arguments only).
pub(crate) fn summary(a: &Approval) -> Value {
    let mut v = json!({
        "id": a.id,
        "callId": a.call_id,
        "tool": a.tool,
        "principal": a.principal,
        "status": a.status,
    });
    if let Some(kind) = a.result.as_ref().and_then(|r| r.get("errorKind")) {
        v["errorKind"] = kind.clone();
    }
    v
}

impl Gateway {
    /// Publishes an `approval` event (created, decided, executed, indeterminate).
    pub(crate) fn publish_approval(&self, a: &Approval) {
        self.events().publish_event(event(a));
    }

    /// Runs approval `id` in a tracked task if it is approved (once: the store's claim decides
    /// who runs it). The principal's grants are those configured now; a principal that no
    /// longer exists gets an `authorization` result and nothing runs.
    pub fn run_approval(self: &Arc<Self>, id: String) {
        let gw = Arc::clone(self);
        self.calls.spawn(async move {
            if let Err(e) = gw.run_approval_now(&id).await {
                tracing::error!(approval = %id, error = %e, "an approved call could not be run");
            }
        });
    }

    async fn run_approval_now(&self, id: &str) -> Result<(), ServerError> {
        let store = self.store();
        let Some(approval) = store.approval(id).await? else {
            return Ok(());
        };
        let Some(caller) = self.auth().caller_by_id(&approval.principal) else {
            // Claim it so it never runs, and record why.
            if store.claim_approval(id).await?.is_some() {
                let result = json!({
                    "tool": approval.tool,
                    "callId": approval.call_id,
                    "error": format!("Principal {} is no longer configured, so its approved call to {} was not run", approval.principal, approval.tool),
                    "errorKind": "authorization",
                });
                let done = store.finish_approval(id, &result).await?;
                self.publish_approval(&done);
            }
            return Ok(());
        };
        let principal = (*caller.principal).clone();
        if let Some((done, _)) = run_approved(store, &self.pipeline, id, principal).await? {
            self.publish_approval(&done);
        }
        Ok(())
    }

    /// At startup: calls interrupted mid-run become `indeterminate` (never re-run), approved
    /// calls that never started run now, once.
    pub async fn recover_approvals(self: &Arc<Self>) -> Result<RecoveredApprovals, ServerError> {
        let recovered = self.store().recover_approvals().await?;
        for a in &recovered.indeterminate {
            tracing::warn!(approval = %a.id, tool = %a.tool, "an approved call was interrupted before its result was recorded; marked indeterminate (check its effect by hand)");
            self.publish_approval(a);
        }
        for a in &recovered.ready {
            self.run_approval(a.id.clone());
        }
        Ok(recovered)
    }
}

//! Durable approvals: the pipeline's default approval gate (announced as an event and to the
//! webhook), running an approved call once (with the principal's grants as configured now),
//! recovery at startup, and the `approval` events waiters watch — published at once for changes
//! this process makes, and by the approval follower for changes read from the store, whoever
//! made them (the CLI, another instance), each (approval, status) once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use toolgate_core::CancellationToken;
use toolgate_core::ErrorChain;
use toolgate_store::{
    Approval, ApprovalCursor, ApprovalStatus, DurableApproval, HintFn, RecoveredApprovals, Store,
    StoreError,
};

use crate::error::RuntimeError;
use crate::events::{EventHub, HubEvent};
use crate::{OpError, OpErrorKind};
use crate::{Runtime, Webhook};

/// How a pending approval can be decided when the front-end names no way of its own: the
/// CLI's command.
pub fn default_hint() -> HintFn {
    Arc::new(|a: &Approval| {
        format!(
            "approve it with `toolgate approvals approve {id}` (or deny it with `toolgate approvals deny {id}`)",
            id = a.id
        )
    })
}

/// A durable approval gate whose approvals expire after `ttl` and say how to decide them with
/// `hint`; every approval it creates is announced as an `approval` event and, when one is
/// configured, to the webhook (which sends in a task of its own).
pub(crate) fn durable(
    store: Store,
    ttl: Duration,
    hint: HintFn,
    hub: EventHub,
    webhook: Option<Arc<Webhook>>,
) -> Arc<DurableApproval> {
    Arc::new(
        DurableApproval::new(store, ttl, hint).on_created(Arc::new(move |a: &Approval| {
            hub.publish_approval(a);
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
        data: Arc::new(approval_summary(a)),
    }
}

/// An approval as events and REST show it (the redacted arguments only).
pub fn approval_summary(a: &Approval) -> Value {
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

impl Runtime {
    /// A durable approval gate like the pipeline's default one (same store, time-to-live,
    /// event and webhook announcements), saying how to decide with `hint`: for a front-end
    /// that overrides the approval handler of one call with its own hint.
    pub fn durable_approval(&self, hint: HintFn) -> Arc<DurableApproval> {
        durable(
            self.store.clone(),
            self.approval_ttl,
            hint,
            self.hub.clone(),
            self.webhook.clone(),
        )
    }

    /// Publishes an `approval` event (created, decided, executed, indeterminate), unless the
    /// approval follower got there first.
    pub fn publish_approval(&self, a: &Approval) {
        self.events().publish_approval(a);
    }

    /// Starts the approval follower: every [`APPROVAL_POLL`] it reads the approvals changed
    /// since it last looked (by any process sharing the store) and publishes the `approval`
    /// event of each whose status was not published yet, so decisions made by the CLI or
    /// another instance reach `/v1/events` too. Changes before the call are not replayed. It
    /// stops when the runtime stops ([`Runtime::drain`]); [`Runtime::start_sync`] calls it.
    pub async fn follow_approvals(&self) -> Result<JoinHandle<()>, RuntimeError> {
        let cursor = self.store().approval_cursor().await?;
        Ok(tokio::spawn(follow(
            self.store().clone(),
            self.events().clone(),
            cursor,
            self.stopped.child_token(),
        )))
    }

    /// Runs approval `id` in a tracked task if it is approved (once: the store's claim decides
    /// who runs it), with `toolgate_runtime::decide::run_approved`: the principal's grants are
    /// those configured now; a principal that no longer exists gets an `authorization` result
    /// and nothing runs.
    pub fn run_approval(self: &Arc<Self>, id: String) {
        let runtime = Arc::clone(self);
        self.calls.spawn(async move {
            if let Err(e) = runtime.run_approval_now(&id).await {
                tracing::error!(approval = %id, error = %ErrorChain(&e), "an approved call could not be run");
            }
        });
    }

    async fn run_approval_now(&self, id: &str) -> Result<(), RuntimeError> {
        match self.run_approved(id).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == OpErrorKind::NotFound => Ok(()),
            Err(OpError::Store(e)) => Err(e.into()),
            Err(e) => Err(RuntimeError::Internal(e.to_string())),
        }
    }

    /// At startup: calls interrupted mid-run become `indeterminate` (never re-run), approved
    /// calls that never started run now, once; with a webhook configured, every approval still
    /// pending is announced again (see [`Runtime::announce_pending`]).
    pub async fn recover_approvals(self: &Arc<Self>) -> Result<RecoveredApprovals, RuntimeError> {
        let recovered = self.store().recover_approvals().await?;
        for a in &recovered.indeterminate {
            tracing::warn!(approval = %a.id, tool = %a.tool, "an approved call was interrupted before its result was recorded; marked indeterminate (check its effect by hand)");
            self.publish_approval(a);
        }
        for a in &recovered.ready {
            self.run_approval(a.id.clone());
        }
        self.announce_pending().await?;
        Ok(recovered)
    }

    /// Announces every pending approval to the webhook, if one is configured, and returns how
    /// many. Deliveries are not stored, so one that was lost with a previous process (in flight
    /// at exit, or never made) is made now — and one that landed is made again: receivers get
    /// each pending approval at least once and tell repeats apart by the approval id.
    pub async fn announce_pending(&self) -> Result<usize, RuntimeError> {
        let Some(webhook) = &self.webhook else {
            return Ok(0);
        };
        let pending = self
            .store()
            .approvals(Some(ApprovalStatus::Pending), None, ANNOUNCE_LIMIT)
            .await?;
        if pending.len() == ANNOUNCE_LIMIT as usize {
            tracing::warn!(
                limit = ANNOUNCE_LIMIT,
                "more pending approvals than are announced at startup; the oldest were not announced again (list them with `toolgate approvals list --status pending`)"
            );
        }
        for approval in &pending {
            webhook.notify(approval);
        }
        if !pending.is_empty() {
            tracing::info!(
                count = pending.len(),
                "pending approvals announced to the webhook again"
            );
        }
        Ok(pending.len())
    }
}

/// Most pending approvals [`Runtime::announce_pending`] announces (newest first).
const ANNOUNCE_LIMIT: u32 = 10_000;

/// How often the approval follower reads approval changes from the store (one indexed query).
pub const APPROVAL_POLL: Duration = Duration::from_millis(500);

/// How many changed approvals the follower reads per query.
const FOLLOW_BATCH: u32 = 200;

/// The approval follower's loop (see [`Runtime::follow_approvals`]).
async fn follow(store: Store, hub: EventHub, mut cursor: ApprovalCursor, stop: CancellationToken) {
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(APPROVAL_POLL) => {}
        }
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            outcome = publish_changes(&store, &hub, &mut cursor) => outcome,
        };
        match outcome {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("approval changes are read from the store again");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %ErrorChain(&e), "approval changes could not be read from the store; `approval` events for changes made elsewhere wait until it answers again");
            }
            Err(e) => {
                tracing::debug!(error = %ErrorChain(&e), "approval changes still cannot be read")
            }
        }
    }
}

/// Publishes the approvals changed after `cursor` and moves it past them.
async fn publish_changes(
    store: &Store,
    hub: &EventHub,
    cursor: &mut ApprovalCursor,
) -> Result<(), StoreError> {
    loop {
        let (changed, next) = store.approval_changes(cursor, FOLLOW_BATCH).await?;
        *cursor = next;
        for a in &changed {
            hub.publish_approval(a);
        }
        if changed.len() < FOLLOW_BATCH as usize {
            return Ok(());
        }
    }
}

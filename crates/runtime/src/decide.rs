//! Deciding a durable approval and running an approved call: the one implementation behind
//! `toolgate approvals approve|deny` and `POST /v1/approvals/{id}/approve|deny`.
//!
//! Approving moves `pending → approved`; running claims the approval (`approved → running`,
//! committed before the tool starts), calls the tool through the pipeline as its principal with
//! the grants configured now, bound to the approved definition and arguments, and records the
//! result (`executed`). An approval whose principal is no longer configured is claimed too and
//! ends `executed` with an `authorization` result: it never runs, and it never stays `approved`
//! for every later start to retry.

use toolgate_core::{CallId, ErrorKind, Permission, Pipeline, Principal, ToolResult};
use toolgate_store::{Approval, Cancel, Store};

use crate::op_error::OpError;

/// The permission deciding approvals needs (and seeing everyone's).
pub const DECIDE_PERMISSION: &str = "toolgate.approvals.decide";

/// Who decides.
#[derive(Clone, Copy, Debug)]
pub struct Decider<'a> {
    /// The deciding principal: it must see the tool and hold [`DECIDE_PERMISSION`].
    pub principal: &'a Principal,
    /// How the approval records the decider (`cli:alice`, `api:ops`, …).
    pub actor: &'a str,
}

/// What became of running an approved call.
#[derive(Clone, Debug)]
pub enum Run {
    /// It ran here (or was refused here because its principal is gone): the approval as now
    /// stored (`executed`) and the call's result.
    Ran {
        /// The approval, `executed`, with the result.
        approval: Box<Approval>,
        /// The call's result envelope.
        result: Box<ToolResult>,
    },
    /// Nothing ran here: the approval is not `approved` (another runner claimed it first, or it
    /// was never approved). Its stored result is what to wait for.
    NotClaimed,
}

/// Whether `principal` may decide approvals (and read everyone's).
pub fn may_decide(principal: &Principal) -> bool {
    Permission::parse(DECIDE_PERMISSION).is_ok_and(|p| principal.holds(&p))
}

/// Approves a pending approval. Run it next with [`run_approved`] (here, or in a task).
///
/// Errors: [`OpError::NotFound`] for an approval the decider cannot see;
/// [`OpError::Forbidden`] without [`DECIDE_PERMISSION`]; the store's `Conflict` when it is not
/// pending (its message names the current status).
pub async fn approve(
    store: &Store,
    decider: Decider<'_>,
    id: &str,
    reason: Option<&str>,
) -> Result<Approval, OpError> {
    decide(store, decider, id, true, reason).await
}

/// Denies a pending approval: the call never runs.
///
/// Errors: as [`approve`].
pub async fn deny(
    store: &Store,
    decider: Decider<'_>,
    id: &str,
    reason: Option<&str>,
) -> Result<Approval, OpError> {
    decide(store, decider, id, false, reason).await
}

async fn decide(
    store: &Store,
    decider: Decider<'_>,
    id: &str,
    approve: bool,
    reason: Option<&str>,
) -> Result<Approval, OpError> {
    match store.approval(id).await? {
        Some(current) if decider.principal.may_call(&current.tool) => {}
        _ => return Err(not_found(id)),
    }
    if !may_decide(decider.principal) {
        return Err(OpError::Forbidden(format!(
            "Principal {} lacks permission {DECIDE_PERMISSION}, which deciding approvals requires; grant it in the config file",
            decider.principal.id
        )));
    }
    Ok(store
        .decide_approval(id, approve, decider.actor, reason)
        .await?)
}

/// Runs approval `id` once if it is approved: as the principal `principal_of` gives for its id
/// (the grants configured now), through `pipeline`. A principal that is no longer configured
/// gets an `authorization` result, recorded as the approval's result, and nothing runs.
///
/// Errors: [`OpError::NotFound`] for an unknown id; the store's errors.
pub async fn run_approved(
    store: &Store,
    pipeline: &Pipeline,
    id: &str,
    principal_of: impl FnOnce(&str) -> Option<Principal>,
) -> Result<Run, OpError> {
    run_approved_with(store, pipeline, id, principal_of, Cancel::default()).await
}

/// [`run_approved`], the call stoppable through `cancel` (see `crate::running`).
pub(crate) async fn run_approved_with(
    store: &Store,
    pipeline: &Pipeline,
    id: &str,
    principal_of: impl FnOnce(&str) -> Option<Principal>,
    cancel: Cancel,
) -> Result<Run, OpError> {
    let Some(approval) = store.approval(id).await? else {
        return Err(not_found(id));
    };
    let Some(principal) = principal_of(&approval.principal) else {
        // Claim it so it never runs, and record why.
        if store.claim_approval(id).await?.is_none() {
            return Ok(Run::NotClaimed);
        }
        let result = principal_gone(&approval);
        let json = serde_json::to_value(&result).map_err(|e| {
            OpError::Store(toolgate_store::StoreError::Invalid(format!(
                "Cannot encode a call result: {e}"
            )))
        })?;
        let approval = store.finish_approval(id, &json).await?;
        return Ok(Run::Ran {
            approval: Box::new(approval),
            result: Box::new(result),
        });
    };
    Ok(
        match toolgate_store::run_approved_with(store, pipeline, id, principal, cancel).await? {
            Some((approval, result)) => Run::Ran {
                approval: Box::new(approval),
                result: Box::new(result),
            },
            None => Run::NotClaimed,
        },
    )
}

/// The result of an approved call whose principal is no longer configured: an envelope like
/// every other (the approval's tool, call id and redacted arguments), with nothing run.
fn principal_gone(approval: &Approval) -> ToolResult {
    ToolResult::refused(
        approval.tool.clone(),
        CallId::parse(&approval.call_id).unwrap_or_default(),
        approval.display.clone(),
        ErrorKind::Authorization,
        format!(
            "Principal {} is no longer configured, so its approved call to {} was not run; configure the principal again and call the tool anew",
            approval.principal, approval.tool
        ),
    )
}

fn not_found(id: &str) -> OpError {
    OpError::NotFound(format!(
        "No approval {id} (`toolgate approvals list` or GET /v1/approvals lists the ones you may see)"
    ))
}

impl crate::Runtime {
    /// The principal an approval made by `id` runs as now: the configured principal with its
    /// current grants under its plan, or — for `local`, the command line's principal — the local
    /// principal under the default plan; `None` when the id is no longer configured.
    pub fn principal_now(&self, id: &str) -> Option<Principal> {
        if let Some(entry) = self.principals().get(id) {
            return Some(entry.restricted());
        }
        (id == Principal::local().id.as_str()).then(|| self.plan().restrict(Principal::local()))
    }

    /// Approves a pending approval ([`approve`]) and publishes its `approval` event. Run it
    /// next with [`crate::Runtime::run_approved`], or in a tracked task with
    /// [`crate::Runtime::run_approval`].
    ///
    /// Errors: as [`approve`].
    pub async fn approve(
        &self,
        decider: Decider<'_>,
        id: &str,
        reason: Option<&str>,
    ) -> Result<Approval, OpError> {
        let decided = approve(self.store(), decider, id, reason).await?;
        self.publish_approval(&decided);
        Ok(decided)
    }

    /// Denies a pending approval ([`deny`]) and publishes its `approval` event.
    ///
    /// Errors: as [`deny`].
    pub async fn deny(
        &self,
        decider: Decider<'_>,
        id: &str,
        reason: Option<&str>,
    ) -> Result<Approval, OpError> {
        let decided = deny(self.store(), decider, id, reason).await?;
        self.publish_approval(&decided);
        Ok(decided)
    }

    /// Runs approval `id` here, once, through the production pipeline as
    /// [`crate::Runtime::principal_now`] gives its principal ([`run_approved`]), and publishes
    /// the approval's new status.
    ///
    /// Errors: as [`run_approved`].
    pub async fn run_approved(&self, id: &str) -> Result<Run, OpError> {
        // Stoppable while it runs here (`Runtime::cancel_running_approval`).
        let running = self.running.enter(id, &self.cancel_calls);
        let ran = run_approved_with(
            self.store(),
            self.pipeline(),
            id,
            |p| self.principal_now(p),
            running.cancel(),
        )
        .await;
        drop(running);
        let ran = ran?;
        if let Run::Ran { approval, .. } = &ran {
            self.publish_approval(approval);
        }
        Ok(ran)
    }
}

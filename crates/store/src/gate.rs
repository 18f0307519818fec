//! The approval gate backed by the store: [`DurableApproval`] turns a call that needs a yes into
//! a pending approval; [`run_approved`] runs an approved one exactly once, bound to what was
//! approved ([`BoundApproval`] re-checks principal, definition hash and arguments at run time).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolgate_core::ErrorChain;
use toolgate_core::pipeline::{ApprovalHandler, ApprovalRequest, Decision};
use toolgate_core::{BoxFuture, CallId, CallRequest, Pipeline, Principal, ToolResult};

use crate::Store;
use crate::approvals::{Approval, NewApproval, arguments_sha256};
use crate::error::StoreError;

/// How long an approval waits for a decision by default.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(24 * 3600);

/// Says how to approve a pending approval, for the surface that created it.
pub type HintFn = Arc<dyn Fn(&Approval) -> String + Send + Sync>;

/// Told about every approval [`DurableApproval`] creates (not about repeats of an idempotency
/// key): events, webhooks.
pub type CreatedFn = Arc<dyn Fn(&Approval) + Send + Sync>;

/// Records every call that needs confirmation as a pending approval and answers
/// [`Decision::Pending`] naming it. If the store cannot record it, the call is refused
/// (`Unanswered`): nothing runs without a durable yes.
#[derive(Clone)]
pub struct DurableApproval {
    store: Store,
    ttl: Duration,
    hint: HintFn,
    on_created: Option<CreatedFn>,
}

impl std::fmt::Debug for DurableApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableApproval")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl DurableApproval {
    /// Approvals that expire after `ttl`; `hint` says how to approve one.
    pub fn new(store: Store, ttl: Duration, hint: HintFn) -> Self {
        Self {
            store,
            ttl,
            hint,
            on_created: None,
        }
    }

    /// Calls `f` with every approval this gate creates, right after it is committed.
    #[must_use]
    pub fn on_created(mut self, f: CreatedFn) -> Self {
        self.on_created = Some(f);
        self
    }
}

impl ApprovalHandler for DurableApproval {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let new = NewApproval {
                call_id: request.call_id.to_string(),
                tool: request.spec.name().as_str().to_owned(),
                definition_hash: request.spec.definition_hash().to_owned(),
                arguments: request.input.clone(),
                display: request.arguments.clone(),
                principal: request.principal.id.as_str().to_owned(),
                reason: request.reason.map(str::to_owned),
                idempotency_key: request.idempotency_key.map(str::to_owned),
                ttl: self.ttl,
                origin: request.origin.cloned(),
                run: request.run,
            };
            match self.store.request_approval(new).await {
                Ok((approval, created)) => {
                    if created && let Some(f) = &self.on_created {
                        f(&approval);
                    }
                    Decision::Pending {
                        hint: (self.hint)(&approval),
                        id: approval.id,
                    }
                }
                // A reused idempotency key says what to do itself.
                Err(e) if e.kind() == crate::StoreErrorKind::Conflict => Decision::Unanswered {
                    hint: ErrorChain(&e).to_string(),
                },
                Err(e) => Decision::Unanswered {
                    hint: format!(
                        "the approval could not be recorded ({}); try again",
                        ErrorChain(&e)
                    ),
                },
            }
        })
    }
}

/// Approves exactly the call that was approved: same principal, same definition hash, same
/// canonical arguments — anything else is `rejected`, saying what changed.
#[derive(Clone, Debug)]
pub struct BoundApproval {
    approval: Approval,
}

impl BoundApproval {
    /// Approves only what `approval` was given for.
    pub fn new(approval: Approval) -> Self {
        Self { approval }
    }
}

impl ApprovalHandler for BoundApproval {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        let a = &self.approval;
        let decision = if request.principal.id.as_str() != a.principal {
            Decision::Denied {
                reason: Some(format!(
                    "approval {} was given to principal {}, not {}",
                    a.id, a.principal, request.principal.id
                )),
            }
        } else if request.spec.definition_hash() != a.definition_hash {
            Decision::Denied {
                reason: Some(format!(
                    "approval {} was given for another version of {} (definition {}, now {}); the tool changed since, so call it again to ask for a new approval",
                    a.id,
                    a.tool,
                    short(&a.definition_hash),
                    short(request.spec.definition_hash())
                )),
            }
        } else if arguments_sha256(request.input) != a.arguments_sha256 {
            Decision::Denied {
                reason: Some(format!(
                    "approval {} was given for other arguments; call the tool again to ask for a new approval",
                    a.id
                )),
            }
        } else {
            Decision::Approved
        };
        Box::pin(async move { decision })
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Runs an approved approval once: claims it (`approved → running`, committed before the call
/// starts), calls the tool through `pipeline` as `principal` (permissions are checked again,
/// now) bound by [`BoundApproval`], and records the result (`executed`). `Ok(None)` when the
/// approval is not `approved` (someone else runs it, or it was never approved): nothing ran.
pub async fn run_approved(
    store: &Store,
    pipeline: &Pipeline,
    id: &str,
    principal: Principal,
) -> Result<Option<(Approval, ToolResult)>, StoreError> {
    run_approved_with(store, pipeline, id, principal, Cancel::default()).await
}

/// How an approved call can be stopped while it runs: its cancellation token, and the note
/// whoever fires it writes first (who cancelled, kept in the audit record).
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    /// Fires the call's cancellation.
    pub token: toolgate_core::CancellationToken,
    /// Who cancelled.
    pub note: toolgate_core::CancelNote,
}

/// [`run_approved`] with the call's cancellation in the caller's hands (`cancel`).
pub async fn run_approved_with(
    store: &Store,
    pipeline: &Pipeline,
    id: &str,
    principal: Principal,
    cancel: Cancel,
) -> Result<Option<(Approval, ToolResult)>, StoreError> {
    let Some(approval) = store.claim_approval(id).await? else {
        return Ok(None);
    };
    let mut request = CallRequest::new(approval.tool.clone(), approval.arguments.clone())
        .principal(principal)
        .approval(Arc::new(BoundApproval::new(approval.clone())));
    request.cancel = cancel.token;
    request.cancelled_by = cancel.note;
    // The call runs with the origin it was asked from, not the approver's, and in the run it
    // was asked in: counted there, refused `budget_exhausted` when that run is spent by now.
    request.origin.clone_from(&approval.origin);
    request.run = approval.run;
    if let Ok(call_id) = CallId::parse(&approval.call_id) {
        request = request.call_id(call_id);
    }
    let result = pipeline.call(request).await;
    let json: Value = serde_json::to_value(&result)
        .map_err(|e| StoreError::Invalid(format!("Cannot encode a call result: {e}")))?;
    let done = store.finish_approval(&approval.id, &json).await?;
    Ok(Some((done, result)))
}

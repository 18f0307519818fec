//! Runs over MCP: a `tools/call` names its run in `_meta["toolgate/run"]` (the id
//! `POST /v1/runs` returned); a call without one, in a session of a principal with a configured
//! budget (`[budget]` or `[principals.NAME.budget]`), counts against the session's own run,
//! started with the session from the principal's budget. So a session that makes more than
//! `max_tool_calls` calls gets `budget_exhausted`. Stateless (2026-07-28) requests have no
//! session: they name their run in `_meta`.
//!
//! Turns: a client marks the first `tools/call` of each model turn with
//! `_meta["toolgate/turn"]: true`; that call counts one turn of its run before it is counted
//! itself, and once `max_turns` is spent it gets `budget_exhausted` without running (as
//! `POST /v1/runs/{id}/turns` answers 409).

use rmcp::ErrorData as McpError;
use serde_json::{Map, Value};
use tokio::sync::OnceCell;
use toolgate_core::{Budget, RunId};
use toolgate_store::Admission;

use crate::Gateway;
use crate::auth::Caller;

/// The `_meta` key a request names its run with.
pub(crate) const RUN_META_KEY: &str = "toolgate/run";

/// The `_meta` key that marks a call as the first of a new model turn.
pub(crate) const TURN_META_KEY: &str = "toolgate/turn";

/// Counts one turn of `run` when the request's `_meta` marks a new turn. `Some(message)`: the
/// turn is refused (`max_turns` spent, or the run closed), and the call with it.
pub(crate) async fn count_turn(
    gw: &Gateway,
    caller: &Caller,
    meta: &Map<String, Value>,
    run: RunId,
) -> Result<Option<String>, McpError> {
    match meta.get(TURN_META_KEY) {
        None | Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Bool(true)) => {}
        Some(_) => {
            return Err(McpError::invalid_params(
                format!(
                    "_meta[\"{TURN_META_KEY}\"] must be true (this call starts a new model turn) or left out"
                ),
                None,
            ));
        }
    }
    let counted = gw
        .runtime()
        .run_turn(&caller.principal, run)
        .await
        .map_err(|e| {
            McpError::internal_error(
                format!(
                    "the run's turn could not be counted: {}",
                    toolgate_core::ErrorChain(&e)
                ),
                None,
            )
        })?;
    Ok(match counted {
        Admission::Counted(_) => None,
        Admission::Refused(why) => Some(why.message(&run)),
        // The call names a run the caller does not have: the pipeline says `not_found`.
        Admission::NotFound => None,
    })
}

/// The run a call counts against: the request's `_meta` run, else (in a session) the session's
/// own run when the principal has a budget; `None` when the call is not counted.
pub(crate) async fn run_for(
    gw: &Gateway,
    caller: &Caller,
    meta: &Map<String, Value>,
    session_run: Option<&OnceCell<RunId>>,
) -> Result<Option<RunId>, McpError> {
    if let Some(raw) = meta.get(RUN_META_KEY) {
        let Some(raw) = raw.as_str() else {
            return Err(McpError::invalid_params(
                format!(
                    "_meta[\"{RUN_META_KEY}\"] must be a run id string, as POST /v1/runs returns it"
                ),
                None,
            ));
        };
        return RunId::parse(raw)
            .map(Some)
            .map_err(|e| McpError::invalid_params(e, None));
    }
    match session_run {
        Some(cell) => session_run_id(gw, caller, cell).await,
        None => Ok(None),
    }
}

/// The session's own run, started on first use (at `initialize`, or at the first call of a
/// session the server took back from sleep), when the principal has a budget.
pub(crate) async fn session_run_id(
    gw: &Gateway,
    caller: &Caller,
    cell: &OnceCell<RunId>,
) -> Result<Option<RunId>, McpError> {
    let runtime = gw.runtime();
    if !runtime.has_budget(&caller.principal) {
        return Ok(None);
    }
    let run = cell
        .get_or_try_init(|| async {
            runtime
                .start_run(&caller.principal, &Budget::default())
                .await
                .map(|run| run.id)
                .map_err(|e| {
                    McpError::internal_error(
                        format!(
                            "the session's run could not be started: {}",
                            toolgate_core::ErrorChain(&e)
                        ),
                        None,
                    )
                })
        })
        .await?;
    Ok(Some(*run))
}

//! Confirmation under MCP 2026-07-28, which has no server-initiated requests: a call that needs a
//! yes is answered with an input-required result carrying the confirmation form, and the client
//! calls again with its user's answer (`inputResponses`) and the `requestState` it got. The state
//! is an opaque, single-use token kept in the store (its SHA-256, so the database never holds a
//! usable token), bound to the principal, the tool and the arguments of the first call, and valid
//! for [`TTL`]: the second round may land on any instance on the same database (a load balancer
//! that is not sticky). The answer goes through the same explicit-yes rule as elicitation
//! (`mcp::elicited_decision`).

use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::{
    ApprovalHandler, ApprovalRequest, BoxFuture, Decision, ElicitAnswer, ToolError,
};
use toolgate_store::{Store, StoreError};

/// The key of the confirmation form in `inputRequests` and `inputResponses`.
pub(crate) const CONFIRM_KEY: &str = "confirm";

/// How long a first round's `requestState` can be answered.
pub(crate) const TTL: Duration = Duration::from_secs(600);

fn binding(principal: &str, tool: &str, arguments: &Value) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [principal, tool] {
        hash.update(part.len().to_le_bytes());
        hash.update(part.as_bytes());
    }
    canonical(arguments, &mut hash);
    hash.finalize().into()
}

/// Feeds `value` to `hash` with object keys in sorted order, so that equal arguments sent with
/// their keys in another order bind alike.
fn canonical(value: &Value, hash: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hash.update(b"{");
            for key in keys {
                hash.update(Value::String(key.clone()).to_string().as_bytes());
                hash.update(b":");
                if let Some(v) = map.get(key) {
                    canonical(v, hash);
                }
                hash.update(b",");
            }
            hash.update(b"}");
        }
        Value::Array(items) => {
            hash.update(b"[");
            for item in items {
                canonical(item, hash);
                hash.update(b",");
            }
            hash.update(b"]");
        }
        other => hash.update(other.to_string().as_bytes()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn token_key(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// A new `requestState` for a first round of `tool` with `arguments` by `principal`, stored so
/// that any instance on the same database can redeem it.
pub(crate) async fn issue(
    store: &Store,
    principal: &str,
    tool: &str,
    arguments: &Value,
) -> Result<String, StoreError> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    let ttl = i64::try_from(TTL.as_millis()).unwrap_or(i64::MAX);
    let expires = chrono::Utc::now().timestamp_millis().saturating_add(ttl);
    store
        .put_request_state(
            &token_key(&token),
            &hex(&binding(principal, tool, arguments)),
            expires,
        )
        .await?;
    Ok(token)
}

/// Takes `token` (it cannot be used twice, on any instance): whether it was issued for this
/// principal, tool and arguments and has not expired.
pub(crate) async fn redeem(
    store: &Store,
    token: &str,
    principal: &str,
    tool: &str,
    arguments: &Value,
) -> Result<bool, StoreError> {
    let Some((bound, expires)) = store.take_request_state(&token_key(token)).await? else {
        return Ok(false);
    };
    Ok(expires > chrono::Utc::now().timestamp_millis()
        && bound == hex(&binding(principal, tool, arguments)))
}

/// The approval handler of a first round: it cannot wait for the client, so it records the
/// question and answers that nobody could be asked yet; the call then comes back as an
/// input-required result instead of its `confirmation_required` refusal.
#[derive(Default)]
pub(crate) struct AskNextRound {
    asked: Mutex<Option<String>>,
}

impl AskNextRound {
    /// The confirmation message, when the call asked for one.
    pub(crate) fn asked(&self) -> Option<String> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl ApprovalHandler for AskNextRound {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            *self.asked.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(crate::mcp::confirmation_message(request));
            Decision::Unanswered {
                hint: "the MCP client's user is asked through an input-required result; the call runs when the client calls again with approve: true".into(),
            }
        })
    }
}

/// The approval handler of a second round: the decision the client's answer made.
pub(crate) struct Answered(pub(crate) Decision);

impl ApprovalHandler for Answered {
    fn decide<'a>(&'a self, _request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(std::future::ready(self.0.clone()))
    }
}

/// The input-required result asking the confirmation form, with its `requestState`.
pub(crate) fn input_required(
    message: String,
    token: String,
) -> Result<InputRequiredResult, String> {
    let form: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": crate::mcp::approval_form(),
        }
    }))
    .map_err(|e| format!("the confirmation form is not an MCP input request: {e}"))?;
    let mut requests = InputRequests::new();
    requests.insert(CONFIRM_KEY.into(), form);
    Ok(InputRequiredResult::new(Some(requests), Some(token)))
}

/// The client's answer to the confirmation form in `responses`, if it gave one. An answer that
/// is not an elicitation result is an error (which decides nothing: the call does not run).
pub(crate) fn answer_of(
    responses: Option<&InputResponses>,
) -> Option<Result<ElicitAnswer, ToolError>> {
    let answer = responses?.get(CONFIRM_KEY)?;
    let action = answer.get("action").and_then(Value::as_str);
    Some(match action {
        Some("accept") => Ok(ElicitAnswer::Accept(match answer.get("content") {
            Some(Value::Object(map)) => map.clone(),
            _ => serde_json::Map::new(),
        })),
        Some("decline") => Ok(ElicitAnswer::Decline),
        Some("cancel") => Ok(ElicitAnswer::Cancel),
        _ => Err(ToolError::execution(format!(
            "the answer to the confirmation form is not an elicitation result (action accept, decline or cancel): {answer}"
        ))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_state_is_single_use_and_bound_to_its_call() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &toolgate_store::DbUrl::Sqlite(dir.path().join("t.db")),
            &toolgate_store::StoreOptions::default(),
        )
        .await
        .unwrap();
        let s = &store;
        let args = json!({"path": "a", "content": "b"});
        let token = issue(s, "alice", "write_file", &args).await.unwrap();
        // Another principal, tool or arguments does not redeem it, and uses it up.
        assert!(!redeem(s, &token, "bob", "write_file", &args).await.unwrap());
        assert!(
            !redeem(s, &token, "alice", "write_file", &args)
                .await
                .unwrap()
        );
        let token = issue(s, "alice", "write_file", &args).await.unwrap();
        let other = json!({"path": "other", "content": "b"});
        assert!(
            !redeem(s, &token, "alice", "write_file", &other)
                .await
                .unwrap()
        );
        let token = issue(s, "alice", "write_file", &args).await.unwrap();
        assert!(
            !redeem(s, &token, "alice", "delete_file", &args)
                .await
                .unwrap()
        );
        // The same call redeems it once (its keys in any order).
        let token = issue(s, "alice", "write_file", &args).await.unwrap();
        let reordered = json!({"content": "b", "path": "a"});
        assert!(
            redeem(s, &token, "alice", "write_file", &reordered)
                .await
                .unwrap()
        );
        assert!(
            !redeem(s, &token, "alice", "write_file", &args)
                .await
                .unwrap()
        );
        assert!(
            !redeem(s, "never-issued", "alice", "write_file", &args)
                .await
                .unwrap()
        );
    }

    #[test]
    fn an_answer_is_read_from_the_confirm_key_only() {
        let mut responses = InputResponses::new();
        assert!(answer_of(Some(&responses)).is_none());
        responses.insert(
            "other".into(),
            json!({"action": "accept", "content": {"approve": true}}),
        );
        assert!(answer_of(Some(&responses)).is_none());
        responses.insert(CONFIRM_KEY.into(), json!({"action": "accept"}));
        assert!(
            matches!(answer_of(Some(&responses)), Some(Ok(ElicitAnswer::Accept(m))) if m.is_empty())
        );
        responses.insert(CONFIRM_KEY.into(), json!({"approve": true}));
        assert!(matches!(answer_of(Some(&responses)), Some(Err(_))));
    }

    #[test]
    fn the_input_request_is_the_confirmation_form() {
        let result = input_required("Allow?".into(), "t".into()).unwrap();
        let wire = serde_json::to_value(&result).unwrap();
        let form = &wire["inputRequests"][CONFIRM_KEY];
        assert_eq!(form["method"], "elicitation/create", "{wire}");
        assert_eq!(
            form["params"]["requestedSchema"],
            crate::mcp::approval_form(),
            "{wire}"
        );
        assert_eq!(wire["requestState"], "t", "{wire}");
    }
}

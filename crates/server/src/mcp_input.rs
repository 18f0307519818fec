//! Input from the client under MCP 2026-07-28, which has no server-initiated requests: a call
//! that needs something from the client — its user's yes (a confirmation), a form filled in
//! (elicitation), a reply of its model (sampling), its roots — is answered with an input-required
//! result naming each question by a key, and the client calls again with the answers
//! (`inputResponses`) and the `requestState` it got. The tool runs again from the start with
//! those answers (the server keeps nothing in memory between rounds); what one round learnt
//! rides to the next in the state.
//!
//! The state is an opaque, single-use token kept in the store (its SHA-256, so the database never
//! holds a usable token) with what it carries (the keys its round asked and the answers of
//! earlier rounds, which the client therefore cannot alter), bound to the principal, the tool and
//! the arguments of the first call, and valid for [`TTL`]: the next round may land on any
//! instance on the same database (a load balancer that is not sticky). A state that is unknown,
//! altered, used, expired or bound to another call is refused.
//!
//! A confirmation is only answered through a state whose round asked it (an answer sent without
//! one, or to a round that did not ask, decides nothing), and its answer goes through the same
//! explicit-yes rule as elicitation (`mcp::elicited_decision`). Answers to a tool's own
//! questions may come without a state (the ephemeral flow). A question is only asked when the
//! request's `_meta` client capabilities declare that kind of input.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::{
    ApprovalHandler, ApprovalRequest, BoxFuture, Decision, ElicitAnswer, Root, SamplingReply,
    SamplingRequest, ToolError,
};
use toolgate_store::{RequestState, Store, StoreError};

/// The key of the confirmation form in `inputRequests` and `inputResponses`.
pub(crate) const CONFIRM_KEY: &str = "confirm";

/// How long a round's `requestState` can be answered.
pub(crate) const TTL: Duration = Duration::from_secs(600);

/// The most a round's answers may weigh (their JSON), so that a state stays small.
pub(crate) const MAX_ANSWERS_BYTES: usize = 256 * 1024;

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

/// What a `requestState` carries to the next round.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Carried {
    /// The keys its round asked.
    asked: BTreeSet<String>,
    /// The answers the call used so far, by key.
    answers: Map<String, Value>,
}

/// A new `requestState` for the next round of `tool` with `arguments` by `principal`, stored
/// with what it carries so that any instance on the same database can redeem it.
pub(crate) async fn issue(
    store: &Store,
    principal: &str,
    tool: &str,
    arguments: &Value,
    carried: &Carried,
) -> Result<String, StoreError> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    let ttl = i64::try_from(TTL.as_millis()).unwrap_or(i64::MAX);
    let state = RequestState {
        binding: hex(&binding(principal, tool, arguments)),
        expires_ms: chrono::Utc::now().timestamp_millis().saturating_add(ttl),
        carried: serde_json::to_string(carried).unwrap_or_else(|_| "{}".into()),
    };
    store.put_request_state(&token_key(&token), &state).await?;
    Ok(token)
}

/// Takes `token` (it cannot be used twice, on any instance): what it carries, if it was issued
/// for this principal, tool and arguments and has not expired; `None` otherwise.
pub(crate) async fn redeem(
    store: &Store,
    token: &str,
    principal: &str,
    tool: &str,
    arguments: &Value,
) -> Result<Option<Carried>, StoreError> {
    let Some(state) = store.take_request_state(&token_key(token)).await? else {
        return Ok(None);
    };
    if state.expires_ms <= chrono::Utc::now().timestamp_millis()
        || state.binding != hex(&binding(principal, tool, arguments))
    {
        return Ok(None);
    }
    // The store wrote it from a `Carried`; anything else is not a state this server issued.
    Ok(serde_json::from_str(&state.carried).ok())
}

/// Every answer of the call so far, when this request answers everything the round before
/// asked (the answers `carried` brought, then the client's `responses`); `None` while a
/// question of that round is unanswered. A tool that asks before its task (see
/// `Tool::asks_before_task`) becomes a task on such a round, with these answers.
pub(crate) fn answered(
    carried: &Carried,
    responses: Option<&InputResponses>,
) -> Option<Map<String, Value>> {
    let mut answers = carried.answers.clone();
    for (key, answer) in responses.into_iter().flatten() {
        if key == CONFIRM_KEY && !carried.asked.contains(CONFIRM_KEY) {
            continue;
        }
        answers.entry(key.clone()).or_insert_with(|| answer.clone());
    }
    carried
        .asked
        .iter()
        .all(|key| answers.contains_key(key))
        .then_some(answers)
}

/// Why a round cannot start from the request.
#[derive(Debug, PartialEq)]
pub(crate) enum RoundError {
    /// The answers weigh more than [`MAX_ANSWERS_BYTES`].
    TooLarge(usize),
}

/// What the client declared it can answer (the request's `_meta` client capabilities).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Can {
    pub(crate) elicit: bool,
    pub(crate) sample: bool,
    pub(crate) list_roots: bool,
}

/// One round of a call: the answers the tool may read and the questions it asks for the next.
#[derive(Debug)]
pub(crate) struct Round {
    can: Can,
    answers: Map<String, Value>,
    inner: Mutex<RoundInner>,
}

#[derive(Debug, Default)]
struct RoundInner {
    asked: InputRequests,
    used: BTreeSet<String>,
    next_key: usize,
    /// The first answer that was not the kind of result its question asks for.
    malformed: Option<String>,
    /// The first kind of input the tool asked for that the request did not declare it can give
    /// (its client capability's name: `elicitation`, `sampling`, `roots`).
    missing: Option<&'static str>,
}

impl Round {
    /// The round that `carried` (what a redeemed state carried, `None` without a state) and
    /// this request's `responses` make. Answers carried from earlier rounds win over the
    /// client's; a confirmation answer counts only when the redeemed state's round asked it.
    pub(crate) fn new(
        can: Can,
        carried: Option<Carried>,
        responses: Option<InputResponses>,
    ) -> Result<Self, RoundError> {
        let (asked, mut answers) = match carried {
            Some(c) => (c.asked, c.answers),
            None => (BTreeSet::new(), Map::new()),
        };
        let mut weight = 0;
        for (key, answer) in responses.into_iter().flatten() {
            if key == CONFIRM_KEY && !asked.contains(CONFIRM_KEY) {
                continue;
            }
            weight += key.len() + answer.to_string().len();
            answers.entry(key).or_insert(answer);
        }
        if weight > MAX_ANSWERS_BYTES {
            return Err(RoundError::TooLarge(weight));
        }
        Ok(Self {
            can,
            answers,
            inner: Mutex::default(),
        })
    }

    /// Whether the request declared it can answer elicitation.
    pub(crate) fn can_elicit(&self) -> bool {
        self.can.elicit
    }

    /// Whether the request declared it can answer sampling.
    pub(crate) fn can_sample(&self) -> bool {
        self.can.sample
    }

    /// Whether the request declared it can list its roots.
    pub(crate) fn can_list_roots(&self) -> bool {
        self.can.list_roots
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RoundInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A key for a question the tool did not name: `kind-N`, N counting the call's questions
    /// in the order it asks them (the same on every round of a tool that asks alike).
    pub(crate) fn auto_key(&self, kind: &str) -> String {
        let mut inner = self.lock();
        inner.next_key += 1;
        format!("{kind}-{}", inner.next_key)
    }

    /// The answer to `key`, marking it used (it rides to the next round); or `request` is
    /// asked under `key` and the tool is told it has to wait for the next round.
    fn answer_or_ask(&self, key: &str, request: Value) -> Result<&Value, ToolError> {
        self.ask_as(key, request, false)
    }

    fn ask_as(&self, key: &str, request: Value, confirming: bool) -> Result<&Value, ToolError> {
        if key == CONFIRM_KEY && !confirming {
            return Err(ToolError::execution(format!(
                "the question key {CONFIRM_KEY} is toolgate's confirmation form; name the tool's question otherwise"
            )));
        }
        let mut inner = self.lock();
        if let Some(answer) = self.answers.get(key) {
            inner.used.insert(key.to_owned());
            return Ok(answer);
        }
        match serde_json::from_value::<InputRequest>(request) {
            Ok(request) => {
                inner.asked.insert(key.to_owned(), request);
                Err(ToolError::unavailable(format!(
                    "waiting for the MCP client's answer to {key}: the call is answered with an input-required result and runs again when the client calls with its answers"
                ))
                .permanent())
            }
            Err(e) => Err(ToolError::execution(format!(
                "the question {key} is not an MCP input request: {e}"
            ))),
        }
    }

    /// Asks the client's user to fill in a form (`elicitation/create`).
    pub(crate) fn elicit(
        &self,
        key: &str,
        message: String,
        schema: Value,
    ) -> Result<ElicitAnswer, ToolError> {
        if !self.can.elicit {
            self.note_missing("elicitation");
            return Err(ToolError::unavailable(
                "The MCP client did not declare the elicitation capability in this request's _meta, so it cannot ask its user",
            )
            .permanent());
        }
        let answer = elicit_answer(
            key,
            self.answer_or_ask(key, elicit_request(message, schema))?,
        );
        self.check(answer)
    }

    /// Asks the client's model for a reply (`sampling/createMessage`).
    pub(crate) fn sample(
        &self,
        key: &str,
        request: SamplingRequest,
    ) -> Result<SamplingReply, ToolError> {
        if !self.can.sample {
            self.note_missing("sampling");
            return Err(ToolError::unavailable(
                "The MCP client did not declare the sampling capability in this request's _meta, so it cannot answer sampling requests",
            )
            .permanent());
        }
        let reply = sampling_reply(key, self.answer_or_ask(key, sample_request(request))?);
        self.check(reply)
    }

    /// Asks the client for its roots (`roots/list`).
    pub(crate) fn list_roots(&self, key: &str) -> Result<Vec<Root>, ToolError> {
        if !self.can.list_roots {
            self.note_missing("roots");
            return Err(ToolError::unavailable(
                "The MCP client did not declare the roots capability in this request's _meta, so it cannot list its roots",
            )
            .permanent());
        }
        let request = roots_request();
        let roots = roots(key, self.answer_or_ask(key, request)?);
        self.check(roots)
    }

    /// Notes an answer that does not parse (see [`malformed`](Self::malformed)).
    fn check<T>(&self, parsed: Result<T, ToolError>) -> Result<T, ToolError> {
        if let Err(e) = &parsed {
            self.lock()
                .malformed
                .get_or_insert_with(|| e.message().to_owned());
        }
        parsed
    }

    /// Why an answer the client sent is not the kind of result its question asks for: the
    /// request is invalid (a JSON-RPC error, not a tool failure), when the call failed on it.
    pub(crate) fn malformed(&self) -> Option<String> {
        self.lock().malformed.clone()
    }

    fn note_missing(&self, capability: &'static str) {
        self.lock().missing.get_or_insert(capability);
    }

    /// The client capability the tool needed and the request did not declare (the first one
    /// asked for), when the call failed for want of it: the request is answered with
    /// `-32021`, naming it, rather than with a tool failure.
    pub(crate) fn missing(&self) -> Option<&'static str> {
        self.lock().missing
    }

    /// The client's answer to the confirmation form, if the round has a trusted one.
    fn confirmation(&self) -> Option<Result<ElicitAnswer, ToolError>> {
        let answer = self.answers.get(CONFIRM_KEY)?;
        self.lock().used.insert(CONFIRM_KEY.to_owned());
        Some(elicit_answer(CONFIRM_KEY, answer))
    }

    /// What the tool asked this round, with what the next round's state must carry; `None`
    /// when it asked nothing.
    pub(crate) fn next(&self) -> Option<(InputRequests, Carried)> {
        let inner = self.lock();
        if inner.asked.is_empty() {
            return None;
        }
        let answers = inner
            .used
            .iter()
            .filter_map(|k| Some((k.clone(), self.answers.get(k)?.clone())))
            .collect();
        let carried = Carried {
            asked: inner.asked.keys().cloned().collect(),
            answers,
        };
        Some((inner.asked.clone(), carried))
    }
}

/// The approval handler of a call under 2026-07-28 whose client can ask its user: the round's
/// answer to the confirmation form decides (explicit yes only); without one the form is asked
/// for the next round and the call is not run.
pub(crate) struct Confirm(pub(crate) std::sync::Arc<Round>);

impl ApprovalHandler for Confirm {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if let Some(answer) = self.0.confirmation() {
                return crate::mcp::elicited_decision(answer);
            }
            let message = crate::mcp::confirmation_message(request);
            // Asked on the round; the error only says so (the call is answered input-required).
            let _ = self.0.ask_as(CONFIRM_KEY, confirm_request(message), true);
            Decision::Unanswered {
                hint: "the MCP client's user is asked through an input-required result; the call runs when the client calls again with approve: true".into(),
            }
        })
    }
}

/// The wire request asking the client's user to fill in a form (`elicitation/create`), as an
/// input-required round and a task's `inputRequests` both carry it.
pub(crate) fn elicit_request(message: String, schema: Value) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    })
}

/// The wire request asking the client's model for a reply (`sampling/createMessage`).
pub(crate) fn sample_request(request: SamplingRequest) -> Value {
    let mut params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": request.prompt}}],
        "maxTokens": request.max_tokens,
    });
    if let Some(system) = request.system_prompt {
        params["systemPrompt"] = json!(system);
    }
    json!({"method": "sampling/createMessage", "params": params})
}

/// The wire request asking the client for its roots (`roots/list`).
pub(crate) fn roots_request() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn confirm_request(message: String) -> Value {
    elicit_request(message, crate::mcp::approval_form())
}

/// The input-required result asking `requests`, with its `requestState`.
pub(crate) fn input_required(requests: InputRequests, token: String) -> InputRequiredResult {
    InputRequiredResult::new(Some(requests), Some(token))
}

/// An answer to an elicitation: an error (which decides nothing) when it is not one.
pub(crate) fn elicit_answer(key: &str, answer: &Value) -> Result<ElicitAnswer, ToolError> {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(ElicitAnswer::Accept(match answer.get("content") {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        })),
        Some("decline") => Ok(ElicitAnswer::Decline),
        Some("cancel") => Ok(ElicitAnswer::Cancel),
        _ => Err(ToolError::execution(format!(
            "the answer to {key} is not an elicitation result (action accept, decline or cancel): {answer}"
        ))),
    }
}

/// An answer to a sampling request (a `CreateMessageResult`).
pub(crate) fn sampling_reply(key: &str, answer: &Value) -> Result<SamplingReply, ToolError> {
    let text = match answer.get("content") {
        Some(Value::Array(blocks)) => Some(
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<String>(),
        ),
        Some(block) => block.get("text").and_then(Value::as_str).map(str::to_owned),
        None => None,
    };
    let (Some(text), Some(model)) = (text, answer.get("model").and_then(Value::as_str)) else {
        return Err(ToolError::execution(format!(
            "the answer to {key} is not a sampling result (content with text, and model): {answer}"
        )));
    };
    Ok(SamplingReply {
        text,
        model: model.to_owned(),
        stop_reason: answer
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// An answer to `roots/list` (a `ListRootsResult`).
pub(crate) fn roots(key: &str, answer: &Value) -> Result<Vec<Root>, ToolError> {
    let not = || {
        ToolError::execution(format!(
            "the answer to {key} is not a roots/list result (roots, each with a uri): {answer}"
        ))
    };
    let list = answer
        .get("roots")
        .and_then(Value::as_array)
        .ok_or_else(not)?;
    list.iter()
        .map(|root| {
            Ok(Root {
                uri: root
                    .get("uri")
                    .and_then(Value::as_str)
                    .ok_or_else(not)?
                    .to_owned(),
                name: root.get("name").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &toolgate_store::DbUrl::Sqlite(dir.path().join("t.db")),
            &toolgate_store::StoreOptions::default(),
        )
        .await
        .unwrap();
        (store, dir)
    }

    fn form() -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string"}}})
    }

    const ALL: Can = Can {
        elicit: true,
        sample: true,
        list_roots: true,
    };

    fn responses(pairs: &[(&str, Value)]) -> Option<InputResponses> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    #[tokio::test]
    async fn a_request_state_is_single_use_and_bound_to_its_call() {
        let (store, _dir) = store().await;
        let s = &store;
        let c = &Carried::default();
        let args = json!({"path": "a", "content": "b"});
        let token = issue(s, "alice", "write_file", &args, c).await.unwrap();
        // Another principal, tool or arguments does not redeem it, and uses it up.
        assert!(
            redeem(s, &token, "bob", "write_file", &args)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            redeem(s, &token, "alice", "write_file", &args)
                .await
                .unwrap()
                .is_none()
        );
        let token = issue(s, "alice", "write_file", &args, c).await.unwrap();
        let other = json!({"path": "other", "content": "b"});
        assert!(
            redeem(s, &token, "alice", "write_file", &other)
                .await
                .unwrap()
                .is_none()
        );
        let token = issue(s, "alice", "write_file", &args, c).await.unwrap();
        assert!(
            redeem(s, &token, "alice", "delete_file", &args)
                .await
                .unwrap()
                .is_none()
        );
        // The same call redeems it once (its keys in any order), with what it carries.
        let carried = Carried {
            asked: ["step2".to_owned()].into(),
            answers: json!({"step1": {"action": "accept", "content": {"name": "Al"}}})
                .as_object()
                .unwrap()
                .clone(),
        };
        let token = issue(s, "alice", "write_file", &args, &carried)
            .await
            .unwrap();
        let reordered = json!({"content": "b", "path": "a"});
        assert_eq!(
            redeem(s, &token, "alice", "write_file", &reordered)
                .await
                .unwrap(),
            Some(carried)
        );
        assert!(
            redeem(s, &token, "alice", "write_file", &args)
                .await
                .unwrap()
                .is_none()
        );
        // An altered token is not one this server issued.
        let token = issue(s, "alice", "write_file", &args, c).await.unwrap();
        let tampered = format!("{token}-TAMPERED");
        assert!(
            redeem(s, &tampered, "alice", "write_file", &args)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_question_without_its_answer_is_asked_for_the_next_round() {
        let round = Round::new(ALL, None, None).unwrap();
        let err = round
            .elicit("user_name", "What is your name?".into(), form())
            .unwrap_err();
        assert!(err.message().contains("user_name"), "{}", err.message());
        let roots = round.list_roots("client_roots").unwrap_err();
        assert!(roots.message().contains("client_roots"));
        let (asked, carried) = round.next().unwrap();
        let wire = serde_json::to_value(&asked).unwrap();
        assert_eq!(wire["user_name"]["method"], "elicitation/create", "{wire}");
        assert_eq!(wire["client_roots"]["method"], "roots/list", "{wire}");
        assert_eq!(carried.asked.len(), 2);
        // Asked nothing: no next round.
        assert!(Round::new(ALL, None, None).unwrap().next().is_none());
    }

    #[test]
    fn answers_are_read_and_the_used_ones_ride_to_the_next_round() {
        let round = Round::new(
            ALL,
            None,
            responses(&[
                ("step1", json!({"action": "accept", "content": {"name": "Al"}})),
                ("greeting", json!({"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"})),
                ("client_roots", json!({"roots": [{"uri": "file:///r", "name": "R"}]})),
                ("unknown_extra_key", json!({"action": "accept"})),
            ]),
        )
        .unwrap();
        let name = round.elicit("step1", "?".into(), form()).unwrap();
        assert!(matches!(name, ElicitAnswer::Accept(m) if m["name"] == "Al"));
        let reply = round
            .sample(
                "greeting",
                SamplingRequest {
                    prompt: "p".into(),
                    system_prompt: None,
                    max_tokens: 5,
                },
            )
            .unwrap();
        assert_eq!((reply.text.as_str(), reply.model.as_str()), ("Hi", "m"));
        let roots = round.list_roots("client_roots").unwrap();
        assert_eq!(roots[0].uri, "file:///r");
        assert!(round.elicit("step2", "?".into(), form()).is_err());
        let (_, carried) = round.next().unwrap();
        let kept: Vec<&String> = carried.answers.keys().collect();
        assert_eq!(
            kept,
            ["client_roots", "greeting", "step1"],
            "extra keys are not carried"
        );
        // A malformed answer is an error naming its key, not an answer.
        let round = Round::new(ALL, None, responses(&[("k", json!(12345))])).unwrap();
        assert!(round.malformed().is_none());
        let err = round.elicit("k", "?".into(), form()).unwrap_err();
        assert!(err.message().contains("not an elicitation result"));
        assert!(round.malformed().unwrap().contains("the answer to k"));
        assert!(
            round.next().is_none(),
            "a malformed answer is not asked again"
        );
    }

    #[test]
    fn carried_answers_win_over_the_clients() {
        let carried = Carried {
            asked: ["step2".to_owned()].into(),
            answers: json!({"step1": {"action": "accept", "content": {"name": "Al"}}})
                .as_object()
                .unwrap()
                .clone(),
        };
        let round = Round::new(
            ALL,
            Some(carried),
            responses(&[(
                "step1",
                json!({"action": "accept", "content": {"name": "Mallory"}}),
            )]),
        )
        .unwrap();
        let name = round.elicit("step1", "?".into(), form()).unwrap();
        assert!(matches!(name, ElicitAnswer::Accept(m) if m["name"] == "Al"));
    }

    #[test]
    fn only_declared_kinds_of_input_are_asked() {
        let sampling_only = Can {
            elicit: false,
            sample: true,
            list_roots: false,
        };
        let round = Round::new(sampling_only, None, None).unwrap();
        let err = round.elicit("user_name", "?".into(), form()).unwrap_err();
        assert!(
            err.message().contains("elicitation capability"),
            "{}",
            err.message()
        );
        let err = round.list_roots("client_roots").unwrap_err();
        assert!(
            err.message().contains("roots capability"),
            "{}",
            err.message()
        );
        assert!(round.next().is_none(), "nothing undeclared is asked");
        assert_eq!(round.missing(), Some("elicitation"), "the first one wanted");
        let declared = Round::new(sampling_only, None, None).unwrap();
        assert_eq!(declared.missing(), None);
        let request = SamplingRequest {
            prompt: "p".into(),
            system_prompt: None,
            max_tokens: 5,
        };
        assert!(round.sample("q", request).is_err());
        let (asked, _) = round.next().unwrap();
        assert_eq!(asked.keys().collect::<Vec<_>>(), ["q"]);
    }

    #[test]
    fn a_confirmation_counts_only_when_the_state_asked_it() {
        let yes = json!({"action": "accept", "content": {"approve": true}});
        // Without a state (or a state whose round did not ask it), a confirm answer is dropped.
        let round = Round::new(ALL, None, responses(&[(CONFIRM_KEY, yes.clone())])).unwrap();
        assert!(round.confirmation().is_none());
        let other = Carried {
            asked: ["user_name".to_owned()].into(),
            answers: Map::new(),
        };
        let round = Round::new(ALL, Some(other), responses(&[(CONFIRM_KEY, yes.clone())])).unwrap();
        assert!(round.confirmation().is_none());
        let asked = Carried {
            asked: [CONFIRM_KEY.to_owned()].into(),
            answers: Map::new(),
        };
        let round = Round::new(ALL, Some(asked), responses(&[(CONFIRM_KEY, yes)])).unwrap();
        assert!(matches!(
            round.confirmation(),
            Some(Ok(ElicitAnswer::Accept(_)))
        ));
        // A tool cannot ask under toolgate's own key.
        let round = Round::new(ALL, None, None).unwrap();
        let err = round.elicit(CONFIRM_KEY, "?".into(), form()).unwrap_err();
        assert!(err.message().contains("confirmation form"));
        assert!(round.next().is_none());
    }

    #[test]
    fn answers_have_a_size_limit() {
        let big = json!({"action": "accept", "content": {"x": "a".repeat(MAX_ANSWERS_BYTES)}});
        assert!(matches!(
            Round::new(ALL, None, responses(&[("k", big)])),
            Err(RoundError::TooLarge(_))
        ));
    }

    #[test]
    fn the_confirmation_request_is_the_approval_form() {
        let request: InputRequest =
            serde_json::from_value(confirm_request("Allow?".into())).unwrap();
        let mut requests = InputRequests::new();
        requests.insert(CONFIRM_KEY.into(), request);
        let wire = serde_json::to_value(input_required(requests, "t".into())).unwrap();
        let form = &wire["inputRequests"][CONFIRM_KEY];
        assert_eq!(form["method"], "elicitation/create", "{wire}");
        assert_eq!(
            form["params"]["requestedSchema"],
            crate::mcp::approval_form(),
            "{wire}"
        );
        assert_eq!(wire["requestState"], "t", "{wire}");
        assert_eq!(wire["resultType"], "input_required", "{wire}");
    }
}

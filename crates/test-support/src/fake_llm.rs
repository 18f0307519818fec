//! Fake model APIs for the agent loop's tests: a server on 127.0.0.1 speaking OpenAI Chat
//! Completions (`POST /v1/chat/completions`) or Anthropic Messages (`POST /v1/messages`) on the
//! real wire format, playing a scripted model.
//!
//! Every request is checked as the real API checks it, and refused with that API's error shape
//! (HTTP 400/401) when it would be refused there: the key header; a `tools` array the API would
//! reject (a function name outside `^[a-zA-Z0-9_-]{1,64}$`, parameters or `input_schema` that
//! is not an object schema, a name given twice); and the conversation's pairing rules (OpenAI:
//! every `tool_calls[].id` of an assistant message answered by the `tool` messages right after
//! it, and no `tool` message without its call; Anthropic: roles alternating from `user`, every
//! `tool_use` of an assistant message answered by a `tool_result` block of the next user
//! message, and no `tool_result` whose `tool_use_id` the previous assistant message did not
//! send). The checks are plain functions ([`check_openai`], [`check_anthropic`]) tested on their
//! own.
//!
//! The model is a [`Script`]: turn number (from 0) and request in, [`Turn`] out (tool calls
//! with ids `call_T_I` / `toolu_T_I`, or text, after an optional delay). Requests are kept for
//! the test to inspect ([`FakeModel::requests`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The key the fake APIs accept.
pub const KEY: &str = "test-key";

/// Which API the fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// What the model does in one turn.
#[derive(Clone, Debug)]
pub struct Turn {
    /// Wait this long before answering.
    pub delay: Duration,
    /// Text it writes (with or without calls).
    pub text: Option<String>,
    /// Tool calls: (tool name, arguments), in order.
    pub calls: Vec<(String, Value)>,
}

impl Turn {
    /// A final answer.
    pub fn answer(text: &str) -> Self {
        Self {
            delay: Duration::ZERO,
            text: Some(text.to_owned()),
            calls: Vec::new(),
        }
    }

    /// Tool calls, without text.
    pub fn calls(calls: &[(&str, Value)]) -> Self {
        Self {
            delay: Duration::ZERO,
            text: None,
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.clone()))
                .collect(),
        }
    }

    /// The same turn, answered after `delay`.
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// The scripted model: turn number (from 0) and the request body, to what it does.
pub type Script = Arc<dyn Fn(usize, &Value) -> Turn + Send + Sync>;

/// A running fake API; it stops when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for FakeModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeModel")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

struct State {
    api: Api,
    script: Script,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeModel {
    /// Starts the fake `api` on 127.0.0.1 (a free port) in a thread of its own.
    ///
    /// # Panics
    ///
    /// When the port cannot be bound.
    pub fn start(api: Api, script: Script) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State {
            api,
            script,
            requests: Arc::clone(&requests),
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = addr_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = addr_tx.send(listener.local_addr().map_err(|e| e.to_string()));
                let app =
                    Router::new().fallback(move |headers: HeaderMap, uri: Uri, body: Bytes| {
                        let state = Arc::clone(&state);
                        async move { handle(&state, &headers, &uri, &body).await }
                    });
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let addr = match addr_rx.recv() {
            Ok(Ok(addr)) => addr,
            other => panic!("the fake model API could not listen on 127.0.0.1: {other:?}"),
        };
        Self {
            addr,
            requests,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The base URL to give the agent (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body received so far (refused ones included), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn handle(state: &State, headers: &HeaderMap, uri: &Uri, body: &Bytes) -> Response {
    let api = state.api;
    let expected = match api {
        Api::OpenAi => "/v1/chat/completions",
        Api::Anthropic => "/v1/messages",
    };
    if uri.path() != expected {
        return error(
            api,
            StatusCode::NOT_FOUND,
            &format!("no route {}", uri.path()),
        );
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let authorized = match api {
        Api::OpenAi => header("authorization") == Some(&format!("Bearer {KEY}")),
        Api::Anthropic => header("x-api-key") == Some(KEY),
    };
    if !authorized {
        return error(
            api,
            StatusCode::UNAUTHORIZED,
            "invalid x-api-key / Authorization",
        );
    }
    if api == Api::Anthropic && header("anthropic-version").is_none() {
        return error(
            api,
            StatusCode::BAD_REQUEST,
            "anthropic-version: header is required",
        );
    }
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return error(api, StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}")),
    };
    let turn_index = {
        let Ok(mut requests) = state.requests.lock() else {
            return error(api, StatusCode::INTERNAL_SERVER_ERROR, "poisoned");
        };
        requests.push(request.clone());
        requests.len() - 1
    };
    let checked = match api {
        Api::OpenAi => check_openai(&request),
        Api::Anthropic => check_anthropic(&request),
    };
    if let Err(message) = checked {
        return error(api, StatusCode::BAD_REQUEST, &message);
    }
    let turn = (state.script)(turn_index, &request);
    if !turn.delay.is_zero() {
        tokio::time::sleep(turn.delay).await;
    }
    let model = request["model"].clone();
    axum::Json(match api {
        Api::OpenAi => openai_reply(turn_index, &model, &turn),
        Api::Anthropic => anthropic_reply(turn_index, &model, &turn),
    })
    .into_response()
}

fn error(api: Api, status: StatusCode, message: &str) -> Response {
    let body = match api {
        Api::OpenAi => json!({"error": {
            "message": message, "type": "invalid_request_error", "param": null, "code": null
        }}),
        Api::Anthropic => json!({"type": "error", "error": {
            "type": if status == StatusCode::UNAUTHORIZED { "authentication_error" } else { "invalid_request_error" },
            "message": message
        }}),
    };
    (status, axum::Json(body)).into_response()
}

fn openai_reply(turn: usize, model: &Value, t: &Turn) -> Value {
    let calls: Vec<Value> = t
        .calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{turn}_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": t.text, "refusal": null});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": format!("chatcmpl-fake-{turn}"), "object": "chat.completion", "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": if t.calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    })
}

fn anthropic_reply(turn: usize, model: &Value, t: &Turn) -> Value {
    let mut content = Vec::new();
    if let Some(text) = &t.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (i, (name, args)) in t.calls.iter().enumerate() {
        content.push(
            json!({"type": "tool_use", "id": format!("toolu_{turn}_{i}"),
                            "name": name, "input": args}),
        );
    }
    json!({
        "id": format!("msg_fake_{turn}"), "type": "message", "role": "assistant", "model": model,
        "content": content,
        "stop_reason": if t.calls.is_empty() { "end_turn" } else { "tool_use" },
        "stop_sequence": null,
        "usage": {"input_tokens": 0, "output_tokens": 0}
    })
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$` (both APIs' rule for tool names).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A JSON Schema the APIs take as a tool's input: an object schema.
fn object_schema(schema: &Value, what: &str) -> Result<(), String> {
    if !schema.is_object() {
        return Err(format!("{what}: must be an object"));
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!("{what}.type: Field required to be 'object'"));
    }
    if let Some(p) = schema.get("properties")
        && !p.is_object()
    {
        return Err(format!("{what}.properties: must be an object"));
    }
    Ok(())
}

fn unique_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(format!(
                "tools: Tool names must be unique; {n} appears twice"
            ));
        }
    }
    Ok(())
}

/// The checks OpenAI Chat Completions makes of a request body (see the module docs); the
/// error message is what the API would say, roughly.
///
/// # Errors
///
/// Why the real API would refuse it.
pub fn check_openai(body: &Value) -> Result<(), String> {
    if body
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("you must provide a model parameter".into());
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Err("messages: Field required".into());
    };
    if messages.is_empty() {
        return Err("messages: array too short; expected at least 1 element".into());
    }
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return Err("tools: must be an array".into());
        };
        for (i, tool) in tools.iter().enumerate() {
            if tool.get("type").and_then(Value::as_str) != Some("function") {
                return Err(format!("tools[{i}].type: must be 'function'"));
            }
            let f = &tool["function"];
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            if !valid_name(name) {
                return Err(format!(
                    "Invalid 'tools[{i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' of at most 64 characters"
                ));
            }
            if let Some(d) = f.get("description")
                && !d.is_string()
            {
                return Err(format!("tools[{i}].function.description: must be a string"));
            }
            if let Some(p) = f.get("parameters") {
                object_schema(p, &format!("tools[{i}].function.parameters"))?;
            }
        }
        unique_names(tools.iter().filter_map(|t| t["function"]["name"].as_str()))?;
    }
    // Tool messages answer the calls of the assistant message just before them, all of them.
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "tool" {
            let id = m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(pos) = open.iter().position(|o| o == id) else {
                return Err(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[{i}].tool_call_id {id:?})"
                ));
            };
            open.remove(pos);
            if !m.get("content").is_some_and(Value::is_string) {
                return Err(format!("messages[{i}].content: must be a string"));
            }
            continue;
        }
        if !open.is_empty() {
            return Err(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.join(", ")
            ));
        }
        match role {
            "system" | "developer" | "user" => {}
            "assistant" => {
                for call in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                    if call["function"]["arguments"].as_str().is_none() {
                        return Err(format!(
                            "messages[{i}].tool_calls: arguments must be a string"
                        ));
                    }
                    open.push(id.to_owned());
                }
            }
            other => return Err(format!("messages[{i}].role: invalid value {other:?}")),
        }
    }
    if !open.is_empty() {
        return Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            open.join(", ")
        ));
    }
    Ok(())
}

/// The checks Anthropic Messages makes of a request body (see the module docs).
///
/// # Errors
///
/// Why the real API would refuse it.
pub fn check_anthropic(body: &Value) -> Result<(), String> {
    if body
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("model: Field required".into());
    }
    if body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_none_or(|n| n == 0)
    {
        return Err("max_tokens: Field required (a positive integer)".into());
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Err("messages: Field required".into());
    };
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return Err("tools: Input should be a valid list".into());
        };
        for (i, tool) in tools.iter().enumerate() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            if !valid_name(name) {
                return Err(format!(
                    "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                ));
            }
            let Some(schema) = tool.get("input_schema") else {
                return Err(format!("tools.{i}.custom.input_schema: Field required"));
            };
            object_schema(schema, &format!("tools.{i}.custom.input_schema"))?;
        }
        unique_names(tools.iter().filter_map(|t| t["name"].as_str()))?;
    }
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!(
                "messages.{i}.role: roles must alternate between \"user\" and \"assistant\", starting with \"user\"; found {role:?}"
            ));
        }
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(_)) => Vec::new(),
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => return Err(format!("messages.{i}.content: Field required")),
        };
        if role == "user" {
            let results: Vec<&str> = blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| b["tool_use_id"].as_str().unwrap_or_default())
                .collect();
            for id in &results {
                if !pending.iter().any(|p| p == id) {
                    return Err(format!(
                        "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
            }
            if let Some(missing) = pending.iter().find(|p| !results.contains(&p.as_str())) {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                ));
            }
            for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                if let Some(e) = b.get("is_error")
                    && !e.is_boolean()
                {
                    return Err(format!("messages.{i}.content: is_error must be a boolean"));
                }
            }
            pending.clear();
        } else {
            pending = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap_or_default().to_owned())
                .collect();
        }
    }
    if messages.last().and_then(|m| m["role"].as_str()) != Some("user") {
        return Err("messages: the last message must be a user message".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(tools: Value, messages: Value) -> Result<(), String> {
        check_openai(&json!({"model": "m", "messages": messages, "tools": tools}))
    }

    #[test]
    fn openai_refuses_what_the_api_refuses() {
        let ok_tool = json!({"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}}});
        let user = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(openai(json!([ok_tool]), user.clone()), Ok(()));
        let bad_name = json!([{"type": "function", "function": {"name": "files.read"}}]);
        assert!(
            openai(bad_name, user.clone())
                .unwrap_err()
                .contains("pattern")
        );
        let long = "a".repeat(65);
        let too_long = json!([{"type": "function", "function": {"name": long}}]);
        assert!(openai(too_long, user.clone()).is_err());
        let not_object = json!([{"type": "function", "function": {"name": "x", "parameters": {"type": "string"}}}]);
        assert!(
            openai(not_object, user.clone())
                .unwrap_err()
                .contains("'object'")
        );
        let twice = json!([ok_tool, ok_tool]);
        assert!(openai(twice, user).unwrap_err().contains("unique"));
        // An unanswered call, and a result without its call.
        let unanswered = json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "calc", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "1"}
        ]);
        assert!(
            openai(json!([ok_tool]), unanswered)
                .unwrap_err()
                .contains("b")
        );
        let stray = json!([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "z", "content": "1"}]);
        assert!(
            openai(json!([ok_tool]), stray)
                .unwrap_err()
                .contains("preceeding")
        );
    }

    fn anthropic(tools: Value, messages: Value) -> Result<(), String> {
        check_anthropic(
            &json!({"model": "m", "max_tokens": 10, "messages": messages, "tools": tools}),
        )
    }

    #[test]
    fn anthropic_refuses_what_the_api_refuses() {
        let ok_tool = json!({"name": "calc", "input_schema": {"type": "object"}});
        let user = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(anthropic(json!([ok_tool]), user.clone()), Ok(()));
        assert!(
            anthropic(
                json!([{"name": "a b", "input_schema": {"type": "object"}}]),
                user.clone()
            )
            .is_err()
        );
        assert!(
            anthropic(
                json!([{"name": "x", "input_schema": {"type": "array"}}]),
                user.clone()
            )
            .is_err()
        );
        assert!(anthropic(json!([{"name": "x"}]), user.clone()).is_err());
        assert!(
            check_anthropic(&json!({"model": "m", "messages": user})).is_err(),
            "max_tokens"
        );
        let wrong_id = json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "calc", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "1"}]}
        ]);
        assert!(
            anthropic(json!([ok_tool]), wrong_id)
                .unwrap_err()
                .contains("t2")
        );
        let missing = json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "calc", "input": {}}]},
            {"role": "user", "content": "no results"}
        ]);
        assert!(
            anthropic(json!([ok_tool]), missing)
                .unwrap_err()
                .contains("t1")
        );
        let not_alternating =
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]);
        assert!(anthropic(json!([ok_tool]), not_alternating).is_err());
    }
}

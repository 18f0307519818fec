//! One model round trip on the wire: the request body each API takes (OpenAI Chat Completions,
//! Anthropic Messages), the POST with the key in its header, and the reply read back into the
//! assistant message to keep, its text and its tool calls (parsed by `toolgate_export`'s
//! per-provider parsers). Tool results go back with the same crate's formatters.

use std::time::Duration;

use serde_json::{Map, Value, json};
use toolgate_export::{ToolCall, ToolOutcome, anthropic_calls, openai_calls};

use crate::error::AgentError;
use crate::model::{ApiKey, BaseUrl, ModelSpec, Provider};

/// The Messages API version toolgate writes (the one its wire format follows).
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How much of an error response's body an error message quotes.
const BODY_EXCERPT: usize = 600;

/// A model's reply, read.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The assistant message to append to the conversation, in the provider's shape.
    pub(crate) message: Value,
    /// Its text, if any.
    pub(crate) text: Option<String>,
    /// Its tool calls, in order.
    pub(crate) calls: Vec<ToolCall>,
}

/// The model's endpoint with its key.
pub(crate) struct Client {
    http: reqwest::Client,
    model: ModelSpec,
    url: String,
    key: ApiKey,
    max_tokens: u32,
    system: Option<String>,
}

impl Client {
    pub(crate) fn new(
        model: ModelSpec,
        base: &BaseUrl,
        key: ApiKey,
        max_tokens: u32,
        system: Option<String>,
    ) -> Result<Self, AgentError> {
        let url = base.join(match model.provider() {
            Provider::OpenAi => "chat/completions",
            Provider::Anthropic => "messages",
        });
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| AgentError::Unreachable {
                url: url.clone(),
                reason: format!("cannot set up the HTTP client: {e}"),
            })?;
        Ok(Self {
            http,
            model,
            url,
            key,
            max_tokens,
            system,
        })
    }

    /// The endpoint requests go to.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The first message of a conversation.
    pub(crate) fn user_message(text: &str) -> Value {
        json!({ "role": "user", "content": text })
    }

    /// Sends the conversation with the tools and reads the reply.
    pub(crate) async fn send(
        &self,
        messages: &[Value],
        tools: &[Value],
    ) -> Result<Reply, AgentError> {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.name().to_owned()));
        let request = match self.model.provider() {
            Provider::OpenAi => {
                let mut all = Vec::with_capacity(messages.len() + 1);
                if let Some(system) = &self.system {
                    all.push(json!({ "role": "system", "content": system }));
                }
                all.extend(messages.iter().cloned());
                body.insert("messages".into(), Value::Array(all));
                if !tools.is_empty() {
                    body.insert("tools".into(), Value::Array(tools.to_vec()));
                }
                self.http.post(&self.url).bearer_auth(self.key.expose())
            }
            Provider::Anthropic => {
                body.insert("max_tokens".into(), Value::from(self.max_tokens));
                if let Some(system) = &self.system {
                    body.insert("system".into(), Value::String(system.clone()));
                }
                body.insert("messages".into(), Value::Array(messages.to_vec()));
                if !tools.is_empty() {
                    body.insert("tools".into(), Value::Array(tools.to_vec()));
                }
                self.http
                    .post(&self.url)
                    .header("x-api-key", self.key.expose())
                    .header("anthropic-version", ANTHROPIC_VERSION)
            }
        };
        let response = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(Value::Object(body).to_string())
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let mut body: String = text.chars().take(BODY_EXCERPT).collect();
            if text.chars().count() > BODY_EXCERPT {
                body.push('…');
            }
            return Err(AgentError::Status {
                url: self.url.clone(),
                status: status.as_u16(),
                body,
            });
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| AgentError::Response {
            url: self.url.clone(),
            reason: format!("not JSON ({e})"),
        })?;
        self.read(&value)
    }

    fn unreachable(&self, e: &reqwest::Error) -> AgentError {
        // reqwest's message names the URL only (the key is in a header, never shown).
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            reason.push_str(": ");
            reason.push_str(&cause.to_string());
            source = cause.source();
        }
        AgentError::Unreachable {
            url: self.url.clone(),
            reason,
        }
    }

    fn read(&self, response: &Value) -> Result<Reply, AgentError> {
        match self.model.provider() {
            Provider::OpenAi => {
                let calls = openai_calls::parse_chat_completion(response)?;
                let message = &response["choices"][0]["message"];
                let text = message
                    .get("content")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned);
                // Only what the API takes back: role, content, tool_calls.
                let mut kept = json!({
                    "role": "assistant",
                    "content": text.clone().map_or(Value::Null, Value::String),
                });
                if let Some(tool_calls) = message.get("tool_calls").filter(|t| t.is_array()) {
                    kept["tool_calls"] = tool_calls.clone();
                }
                Ok(Reply {
                    message: kept,
                    text,
                    calls,
                })
            }
            Provider::Anthropic => {
                let calls = anthropic_calls::parse_message(response)?;
                let content = response.get("content").cloned().unwrap_or(Value::Null);
                let text: Vec<&str> = content
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                let text = Some(text.join("\n")).filter(|t| !t.is_empty());
                Ok(Reply {
                    message: json!({ "role": "assistant", "content": content }),
                    text,
                    calls,
                })
            }
        }
    }

    /// The messages carrying `outcomes` back, to append after the assistant message.
    pub(crate) fn results(&self, outcomes: &[ToolOutcome]) -> Result<Vec<Value>, AgentError> {
        Ok(match self.model.provider() {
            Provider::OpenAi => openai_calls::chat_tool_messages(outcomes)?,
            Provider::Anthropic => vec![anthropic_calls::tool_results_message(outcomes)?],
        })
    }
}

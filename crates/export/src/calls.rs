//! Tool calls a model asked for, in a provider-neutral form: what the per-provider parsers
//! (`openai_calls.rs`, `anthropic_calls.rs`, `gemini_calls.rs`) read out of a response and what
//! their formatters turn back into the provider's tool-result shape.
//!
//! A response that cannot be read at all (not the provider's shape) is a [`CallsError`]. One bad
//! call in a good response is not: its [`ToolCall::arguments`] carries an [`ArgumentsError`], and
//! [`ToolCall::request`] turns that into an error result the model is sent back, so the other
//! calls of the batch still run and the model can correct the one it got wrong.

use serde_json::{Map, Value};
use thiserror::Error;
use toolgate_core::{CallId, CallRequest, Content, EmbeddedResource, ErrorKind, Role, ToolResult};

/// One tool call a model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The provider's id for the call, sent back with its result: OpenAI Chat `tool_calls[].id`,
    /// Responses `call_id`, Anthropic `tool_use.id`, Gemini `functionCall.id` (optional there).
    pub id: Option<String>,
    /// The tool's name as the model wrote it (the pipeline resolves it, or answers `not_found`).
    pub name: String,
    /// The arguments as a JSON object, or why they are not one.
    pub arguments: Result<Map<String, Value>, ArgumentsError>,
}

/// Why a call's arguments cannot be run (the call gets a `validation` error result).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ArgumentsError {
    /// The arguments string is not JSON.
    #[error(
        "the arguments are not valid JSON ({reason}); send the arguments as one JSON object that \
         matches the tool's parameters"
    )]
    NotJson {
        /// The arguments as the model sent them.
        raw: String,
        /// What the JSON parser said.
        reason: String,
    },
    /// The arguments are JSON but not an object.
    #[error(
        "the arguments are {found}, not a JSON object; send the arguments as one JSON object \
         whose keys are the tool's parameter names"
    )]
    NotAnObject {
        /// The arguments as the model sent them.
        raw: Value,
        /// What they are instead (`an array`, `a string`, …).
        found: &'static str,
    },
}

/// What kind of [`ArgumentsError`] a call has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgumentsErrorKind {
    /// [`ArgumentsError::NotJson`].
    NotJson,
    /// [`ArgumentsError::NotAnObject`].
    NotAnObject,
}

impl ArgumentsError {
    /// The kind of error.
    pub fn kind(&self) -> ArgumentsErrorKind {
        match self {
            Self::NotJson { .. } => ArgumentsErrorKind::NotJson,
            Self::NotAnObject { .. } => ArgumentsErrorKind::NotAnObject,
        }
    }

    /// The arguments as sent, kept as the error result's `input`.
    pub fn raw(&self) -> Value {
        match self {
            Self::NotJson { raw, .. } => Value::String(raw.clone()),
            Self::NotAnObject { raw, .. } => raw.clone(),
        }
    }
}

/// A response the parser cannot read, or a result that cannot be sent back.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CallsError {
    /// A field the provider always sends is missing or has the wrong type.
    #[error(
        "the {provider} response does not have {expected} at `{path}`: pass the provider's \
         whole response body, as its API returned it"
    )]
    Shape {
        /// `OpenAI Chat Completions`, `OpenAI Responses`, `Anthropic Messages`, `Gemini`.
        provider: &'static str,
        /// Where in the response, like `choices[0].message.tool_calls[1].id`.
        path: String,
        /// What should be there (`a string`, `an array`, …).
        expected: &'static str,
    },
    /// A result to send back belongs to a call without an id, which this provider needs.
    #[error(
        "the call to `{tool}` has no id, and {provider} pairs a result with its call by id: \
         keep the id the parser read"
    )]
    MissingId {
        /// The provider whose result shape needs the id.
        provider: &'static str,
        /// The call's tool.
        tool: String,
    },
}

/// What kind of [`CallsError`] happened, for callers that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallsErrorKind {
    /// [`CallsError::Shape`].
    Shape,
    /// [`CallsError::MissingId`].
    MissingId,
}

impl CallsError {
    /// The kind of error.
    pub fn kind(&self) -> CallsErrorKind {
        match self {
            Self::Shape { .. } => CallsErrorKind::Shape,
            Self::MissingId { .. } => CallsErrorKind::MissingId,
        }
    }
}

/// A call and the result toolgate's pipeline gave it (or the error result it got without
/// running), ready to be formatted for the provider.
#[derive(Clone, Debug)]
pub struct ToolOutcome {
    /// The call as the model asked for it.
    pub call: ToolCall,
    /// The result envelope.
    pub result: ToolResult,
}

impl ToolCall {
    /// A call with arguments as JSON text (OpenAI sends them so): parsed here, and a string that
    /// is not a JSON object is kept as the call's [`ArgumentsError`].
    pub fn from_json_text(id: Option<String>, name: String, text: &str) -> Self {
        // Some models send an empty string for a call without arguments.
        let arguments = if text.trim().is_empty() {
            Ok(Map::new())
        } else {
            match serde_json::from_str::<Value>(text) {
                Ok(value) => object(value),
                Err(e) => Err(ArgumentsError::NotJson {
                    raw: text.to_owned(),
                    reason: e.to_string(),
                }),
            }
        };
        Self {
            id,
            name,
            arguments,
        }
    }

    /// A call with arguments as a JSON value (Anthropic's `input`, Gemini's `args`).
    pub fn from_json_value(id: Option<String>, name: String, value: Value) -> Self {
        let arguments = match value {
            // Gemini leaves `args` out for a call without arguments.
            Value::Null => Ok(Map::new()),
            other => object(other),
        };
        Self {
            id,
            name,
            arguments,
        }
    }

    /// The pipeline request for this call (local principal, fresh call id: adjust it with
    /// [`CallRequest`]'s builder methods), or, when its arguments are not a JSON object, the
    /// `validation` error result to send back without running anything.
    pub fn request(&self) -> Result<CallRequest, Box<ToolResult>> {
        match &self.arguments {
            Ok(arguments) => Ok(CallRequest::new(
                self.name.clone(),
                Value::Object(arguments.clone()),
            )),
            Err(e) => Err(Box::new(ToolResult::refused(
                self.name.clone(),
                CallId::new(),
                e.raw(),
                ErrorKind::Validation,
                format!("toolgate did not run `{}`: {e}", self.name),
            ))),
        }
    }
}

fn object(value: Value) -> Result<Map<String, Value>, ArgumentsError> {
    let found = match &value {
        Value::Object(_) => "",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    };
    match value {
        Value::Object(map) => Ok(map),
        raw => Err(ArgumentsError::NotAnObject { raw, found }),
    }
}

/// The text a result is sent back as where the provider takes text: a string result as it is,
/// any other data as JSON, an error as `{"error": message, "errorKind": kind}` (the envelope's
/// own field names, `docs/envelope.md`), with `approvalId` when the call waits for an approval.
pub(crate) fn result_text(result: &ToolResult) -> String {
    match result.data() {
        Some(Value::String(text)) => text.clone(),
        Some(data) => data.to_string(),
        None => Value::Object(error_object(result)).to_string(),
    }
}

/// The content blocks a tool attached that are meant for the model: every block but those whose
/// annotations name an audience without the assistant (MCP's `audience: ["user"]`: for the
/// person, not the model). Only successes carry blocks.
pub(crate) fn model_blocks(result: &ToolResult) -> Vec<&Content> {
    result
        .content
        .iter()
        .filter(|block| {
            annotations(block)
                .and_then(|a| a.audience.as_ref())
                .is_none_or(|roles| roles.contains(&Role::Assistant))
        })
        .collect()
}

fn annotations(block: &Content) -> Option<&toolgate_core::Annotations> {
    match block {
        Content::Text { annotations, .. }
        | Content::Image { annotations, .. }
        | Content::Audio { annotations, .. }
        | Content::Resource { annotations, .. }
        | Content::ResourceLink { annotations, .. } => annotations.as_ref(),
    }
}

/// How a provider writes each kind of attached content block in a tool result: what differs
/// between the providers' walkers ([`write_blocks`], [`blocks_or_text`]). A block the provider
/// does not take becomes whatever the writer makes of a [`left_out_note`].
pub(crate) trait BlockWriter {
    /// A text block, a note, a resource link's or a data's text.
    fn text(&mut self, text: String) -> Value;
    /// An image block (base64 `data`).
    fn image(&mut self, mime: &str, data: &str) -> Value;
    /// A sound block (base64 `data`).
    fn audio(&mut self, mime: &str, data: &str) -> Value;
    /// An embedded resource (text or base64 blob).
    fn resource(&mut self, resource: &EmbeddedResource) -> Value;
}

/// Each block as `writer` writes it, in order (a resource link as its text).
pub(crate) fn write_blocks(blocks: &[&Content], writer: &mut impl BlockWriter) -> Vec<Value> {
    blocks
        .iter()
        .map(|block| match block {
            Content::Text { text, .. } => writer.text(text.clone()),
            Content::Image {
                data, mime_type, ..
            } => writer.image(mime_type, data),
            Content::Audio {
                data, mime_type, ..
            } => writer.audio(mime_type, data),
            Content::Resource { resource, .. } => writer.resource(resource),
            Content::ResourceLink {
                uri,
                name,
                description,
                ..
            } => writer.text(link_text(uri, name, description.as_deref())),
        })
        .collect()
}

/// A tool result's content where the provider takes text or a list of blocks: the result's text
/// when no block is meant for the model, else the data's text (when there is any) followed by
/// the blocks, as `writer` writes them.
pub(crate) fn blocks_or_text(outcome: &ToolOutcome, writer: &mut impl BlockWriter) -> Value {
    let blocks = model_blocks(&outcome.result);
    if blocks.is_empty() {
        return Value::String(result_text(&outcome.result));
    }
    let mut out: Vec<Value> = data_text_beside(&outcome.result, &blocks)
        .into_iter()
        .map(|t| writer.text(t))
        .collect();
    out.extend(write_blocks(&blocks, writer));
    Value::Array(out)
}

/// The data as text beside attached blocks: `None` when the data is `null` and blocks carry the
/// result (an upstream whose answer starts with an image has no data of its own).
pub(crate) fn data_text_beside(result: &ToolResult, blocks: &[&Content]) -> Option<String> {
    match result.data() {
        Some(Value::Null) if !blocks.is_empty() => None,
        _ => Some(result_text(result)),
    }
}

/// The text of a resource link, a text block's stand-in where links are not a block type.
pub(crate) fn link_text(uri: &str, name: &str, description: Option<&str>) -> String {
    match description {
        Some(d) => format!("[resource link] {name} <{uri}>: {d}"),
        None => format!("[resource link] {name} <{uri}>"),
    }
}

/// The text of an embedded text resource.
pub(crate) fn resource_text(uri: &str, text: &str) -> String {
    format!("[resource {uri}]\n{text}")
}

/// What stands in for a block a provider cannot carry in a tool result: what it was, its size,
/// and why it is not there, so the model knows something was left out.
pub(crate) fn left_out_note(what: &str, mime: &str, base64: &str, why: &str) -> String {
    // Base64 carries 3 bytes in 4 characters.
    let bytes = base64.trim_end_matches('=').len() * 3 / 4;
    format!("[toolgate: the tool also returned {what} ({mime}, {bytes} bytes), left out: {why}]")
}

/// `data:MIME;base64,DATA`, the form OpenAI takes inline images and files in.
pub(crate) fn data_url(mime: &str, base64: &str) -> String {
    format!("data:{mime};base64,{base64}")
}

/// The last path segment of a URI, as a file name (`file.pdf` of `file:///docs/file.pdf`).
pub(crate) fn file_name(uri: &str) -> &str {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    path.rsplit('/').find(|s| !s.is_empty()).unwrap_or(path)
}

/// `{"error": message, "errorKind": kind, "approvalId"?: id}` for a failed result.
pub(crate) fn error_object(result: &ToolResult) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(
        "error".into(),
        Value::String(result.error().unwrap_or_default().to_owned()),
    );
    if let Some(kind) = result.error_kind() {
        map.insert(
            "errorKind".into(),
            serde_json::to_value(kind).unwrap_or(Value::Null),
        );
    }
    if let Some(id) = &result.approval_id {
        map.insert("approvalId".into(), Value::String(id.clone()));
    }
    map
}

/// Reads a response: a small path-tracking accessor, so a missing field names where it was
/// expected.
pub(crate) struct Reader {
    pub(crate) provider: &'static str,
}

impl Reader {
    pub(crate) fn shape(&self, path: &str, expected: &'static str) -> CallsError {
        CallsError::Shape {
            provider: self.provider,
            path: path.to_owned(),
            expected,
        }
    }

    /// The array at `value[key]`; `None` when absent or null.
    pub(crate) fn opt_array<'a>(
        &self,
        value: &'a Value,
        key: &str,
        path: &str,
    ) -> Result<Option<&'a Vec<Value>>, CallsError> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(_) => Err(self.shape(&join(path, key), "an array")),
        }
    }

    /// The string at `value[key]`.
    pub(crate) fn string<'a>(
        &self,
        value: &'a Value,
        key: &str,
        path: &str,
    ) -> Result<&'a str, CallsError> {
        value
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| self.shape(&join(path, key), "a string"))
    }

    /// The string at `value[key]`, if any.
    pub(crate) fn opt_string(
        &self,
        value: &Value,
        key: &str,
        path: &str,
    ) -> Result<Option<String>, CallsError> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.shape(&join(path, key), "a string")),
        }
    }

    /// Checks that `value` is an object.
    pub(crate) fn object(&self, value: &Value, path: &str) -> Result<(), CallsError> {
        if value.is_object() {
            Ok(())
        } else {
            Err(self.shape(if path.is_empty() { "$" } else { path }, "an object"))
        }
    }
}

/// `path.key`, or `key` at the top.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The id a provider needs to pair a result with its call.
pub(crate) fn required_id<'a>(
    provider: &'static str,
    outcome: &'a ToolOutcome,
) -> Result<&'a str, CallsError> {
    outcome
        .call
        .id
        .as_deref()
        .ok_or_else(|| CallsError::MissingId {
            provider,
            tool: outcome.call.name.clone(),
        })
}

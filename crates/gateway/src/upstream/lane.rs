//! The fast lane: `tools/call` sent and answered without passing through rmcp's service loop.
//!
//! rmcp's client owns a connection's session (the handshake, `tools/list`, the upstream's own
//! requests and `list_changed`), but a call sent through it wakes rmcp's loop task, its send
//! task and the transport's worker before the reply reaches the caller. A [`Lane`] lets the
//! caller's task write the request itself and be woken once, by whoever reads the reply: on
//! stdio the pipe reader, on Streamable HTTP the caller's own POST. A lane never changes what
//! the caller sees: the same result, the same progress and log messages, the same
//! cancellation sent upstream when the call is dropped.

use rmcp::model::{CallToolResult, ErrorData, JsonObject};
use serde::Serialize;
use toolgate_core::{BoxFuture, ToolContext};

use super::client::RouteGuard;

/// How a call sent on a lane ended.
#[derive(Debug)]
#[allow(dead_code)] // until the stdio and HTTP lanes construct every variant
pub(crate) enum LaneOutcome {
    /// The upstream answered with a tool result.
    Done(CallToolResult),
    /// The upstream answered with a JSON-RPC error.
    Refused(ErrorData),
    /// The connection ended before the answer (the caller reports the server as lost).
    Lost,
    /// The lane cannot carry this call now (say, an HTTP session the server forgot): send it
    /// through rmcp's client instead, which re-establishes what is needed.
    Fallback,
}

/// A direct path for `tools/call` on one live connection.
///
/// The returned future sends the request and waits for its answer. Dropping it before the
/// answer sends `notifications/cancelled` for the request upstream. Progress notifications
/// for the call go to `route`'s call (bind the request's progress token and id to it before
/// sending); log messages, elicitation and sampling requests that belong to the call go to
/// `ctx`'s client where the transport tells which call they belong to.
pub(crate) trait Lane: Send + Sync {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Option<&'a JsonObject>,
        route: &'a RouteGuard,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, LaneOutcome>;
}

/// A lane's `tools/call` request as it is written: the request id doubles as its progress token.
#[derive(Serialize)]
pub(crate) struct CallRequest<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'static str,
    params: CallParams<'a>,
}

#[derive(Serialize)]
struct CallParams<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a JsonObject>,
    #[serde(rename = "_meta")]
    meta: CallMeta<'a>,
}

#[derive(Serialize)]
struct CallMeta<'a> {
    #[serde(rename = "progressToken")]
    progress_token: &'a str,
}

impl<'a> CallRequest<'a> {
    /// `tools/call` of `tool` with `arguments`, as request `id` with progress token `id`.
    pub(crate) fn new(id: &'a str, tool: &'a str, arguments: Option<&'a JsonObject>) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            method: "tools/call",
            params: CallParams {
                name: tool,
                arguments,
                meta: CallMeta { progress_token: id },
            },
        }
    }
}

//! A served upstream tool as a registry tool: its governed definition and a handler that
//! forwards each call to the upstream, after the pipeline has done everything else.

use std::sync::Weak;

use serde_json::Value;
use toolgate_core::{BoxFuture, Tool, ToolContext, ToolDefinition, ToolError, ToolOutput};
use toolgate_gateway::govern;
use toolgate_gateway::upstream::Upstream;

use super::views::ToolStatus;
use super::{Inner, Servers};

/// One approved upstream tool.
pub(super) struct Forwarded {
    definition: ToolDefinition,
    /// The upstream's own name for the tool.
    upstream_tool: String,
    /// The hash of the approved version this definition was made from.
    hash: String,
    server: String,
    upstream: Upstream,
    servers: Weak<Inner>,
}

impl Forwarded {
    pub(super) fn new(
        definition: ToolDefinition,
        upstream_tool: String,
        upstream: Upstream,
        servers: Weak<Inner>,
    ) -> Self {
        let pinned = govern::Upstream::of(&definition);
        Self {
            hash: pinned.as_ref().map(|u| u.hash.clone()).unwrap_or_default(),
            server: upstream.name().to_string(),
            definition,
            upstream_tool,
            upstream,
            servers,
        }
    }

    /// Before the first call of a connection, the tools are listed and checked against their
    /// pins; the call goes on only while this tool is still the approved version.
    async fn check(&self) -> Result<(), ToolError> {
        let Some(inner) = self.servers.upgrade() else {
            return Err(ToolError::unavailable(format!(
                "Server {} is shut down",
                self.server
            )));
        };
        let servers = Servers { inner };
        if !servers.is_verified(&self.server) {
            // Boxed: the listing's future is large and awaited once per connection; inline it
            // would be part of (and copied with) every call's future.
            Box::pin(servers.refresh(&self.server)).await.map_err(|e| {
                ToolError::unavailable(format!(
                    "Server {} is unavailable: {e}; see `toolgate servers show {}`",
                    self.server, self.server
                ))
            })?;
        }
        let servers = servers.lock();
        let state = servers
            .get(&self.server)
            .and_then(|s| s.tools.get(&self.upstream_tool));
        match state {
            Some(t) if t.status == ToolStatus::Approved && t.hash == self.hash => Ok(()),
            Some(t) => Err(ToolError::unavailable(t.reason.clone().unwrap_or_else(|| {
                format!(
                    "Tool {} of server {} changed since it was approved; see `toolgate servers tools {}`",
                    self.upstream_tool, self.server, self.server
                )
            }))
            .permanent()),
            None => Err(ToolError::unavailable(format!(
                "Server {} no longer lists the tool {}",
                self.server, self.upstream_tool
            ))
            .permanent()),
        }
    }
}

impl Tool for Forwarded {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            self.check().await?;
            self.upstream.call(&self.upstream_tool, args, &ctx).await
        })
    }
}

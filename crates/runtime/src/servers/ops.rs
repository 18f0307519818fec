//! The use cases on upstream servers every front-end offers (`toolgate servers …`,
//! `/v1/servers…`, the web UI): list, show, tools, approve, restart, remove, add, import.
//! Reading needs no permission (a tool the reader may not call is left out, as everywhere);
//! changing needs [`MANAGE_PERMISSION`].

use toolgate_core::Principal;

use super::views::{
    ApprovedTools, RemovedServer, ServerDetail, ServerList, ServerSource, ServerSummary,
    ServerTools, ToolStatus,
};
use super::{MANAGE_PERMISSION, Servers, may_manage, state};
use crate::op_error::OpError;

/// Who changes servers or approves their tools.
#[derive(Clone, Copy, Debug)]
pub struct Manager<'a> {
    /// The principal: it must hold [`MANAGE_PERMISSION`].
    pub principal: &'a Principal,
    /// How pins and the audit record it (`cli:alice`, `api:ops`, …).
    pub actor: &'a str,
}

impl Manager<'_> {
    fn check(&self, what: &str) -> Result<(), OpError> {
        if may_manage(self.principal) {
            Ok(())
        } else {
            Err(OpError::Forbidden(format!(
                "Principal {} may not {what}: it needs the permission {MANAGE_PERMISSION}",
                self.principal.id
            )))
        }
    }
}

fn unknown(name: &str) -> OpError {
    OpError::NotFound(format!(
        "No server named {name}; list them with `toolgate servers list` (GET /v1/servers)"
    ))
}

impl Servers {
    /// Every server with its state and tool counts (`GET /v1/servers`, `toolgate servers list`).
    pub fn list(&self, principal: &Principal) -> ServerList {
        ServerList {
            servers: self.lock().values().map(|s| s.summary(principal)).collect(),
        }
    }

    /// One server in full: its summary, its entry (literal secrets redacted) and its tools.
    ///
    /// Errors: [`OpError::NotFound`] for an unknown server.
    pub fn show(&self, principal: &Principal, name: &str) -> Result<ServerDetail, OpError> {
        let servers = self.lock();
        let server = servers.get(name).ok_or_else(|| unknown(name))?;
        Ok(ServerDetail {
            summary: server.summary(principal),
            entry: server.redacted_entry(),
            tools: server.tool_views(principal),
        })
    }

    /// A server's tools, each with its status and toolgate name.
    ///
    /// Errors: [`OpError::NotFound`] for an unknown server.
    pub fn tools(&self, principal: &Principal, name: &str) -> Result<ServerTools, OpError> {
        let servers = self.lock();
        let server = servers.get(name).ok_or_else(|| unknown(name))?;
        Ok(ServerTools {
            server: name.to_owned(),
            tools: server.tool_views(principal),
        })
    }

    /// The summary of one server.
    ///
    /// Errors: [`OpError::NotFound`] for an unknown server.
    pub fn summary(&self, principal: &Principal, name: &str) -> Result<ServerSummary, OpError> {
        let servers = self.lock();
        let server = servers.get(name).ok_or_else(|| unknown(name))?;
        Ok(server.summary(principal))
    }

    /// Approves one tool of a server (by its upstream name or its toolgate name) or, with
    /// `tool` `None`, every tool waiting for approval: the current definitions are pinned as
    /// approved by `manager`, and the tools are registered (callable) from now on.
    ///
    /// Errors: [`OpError::Forbidden`] without [`MANAGE_PERMISSION`]; [`OpError::NotFound`] for
    /// an unknown server or tool; [`OpError::Conflict`] for a tool that waits for nothing (it
    /// is served already, or refused: its reason says what to change).
    pub async fn approve(
        &self,
        manager: Manager<'_>,
        server: &str,
        tool: Option<&str>,
    ) -> Result<ApprovedTools, OpError> {
        manager.check("approve server tools")?;
        let waiting: Vec<String> = {
            let servers = self.lock();
            let entry = servers.get(server).ok_or_else(|| unknown(server))?;
            let visible = entry.visible_tools(manager.principal);
            match tool {
                None => visible
                    .iter()
                    .filter(|(_, t)| t.status.awaits_approval())
                    .map(|(u, _)| (*u).clone())
                    .collect(),
                Some(wanted) => {
                    let (upstream, state) = visible
                        .iter()
                        .find(|(u, t)| *u == wanted || t.name.as_deref() == Some(wanted))
                        .ok_or_else(|| {
                            OpError::NotFound(format!(
                                "Server {server} has no tool {wanted}; see its tools with `toolgate servers tools {server}`"
                            ))
                        })?;
                    if !state.status.awaits_approval() {
                        return Err(OpError::Conflict(match state.status {
                            ToolStatus::Refused => format!(
                                "Tool {wanted} of server {server} cannot be served: {}",
                                state
                                    .reason
                                    .as_deref()
                                    .unwrap_or("see `toolgate servers tools`")
                            ),
                            _ => format!(
                                "Tool {wanted} of server {server} is approved already and unchanged: nothing to approve"
                            ),
                        }));
                    }
                    vec![(*upstream).clone()]
                }
            }
        };
        let approved = self.approve_tools(server, &waiting, manager.actor).await?;
        Ok(ApprovedTools {
            server: server.to_owned(),
            by: manager.actor.to_owned(),
            approved,
        })
    }

    /// Removes a stored server: its tools leave the registry, its process stops, its pins and
    /// its stored entry are forgotten. A server of the config file cannot be removed here.
    ///
    /// Errors: [`OpError::Forbidden`] without [`MANAGE_PERMISSION`]; [`OpError::NotFound`] for
    /// an unknown server; [`OpError::Conflict`] for a server of the config file.
    pub async fn remove(&self, manager: Manager<'_>, name: &str) -> Result<RemovedServer, OpError> {
        manager.check("remove servers")?;
        {
            let servers = self.lock();
            let server = servers.get(name).ok_or_else(|| unknown(name))?;
            if server.source == ServerSource::Config {
                return Err(OpError::Conflict(format!(
                    "Server {name} is declared in the config file ([servers.{name}]); remove it there and restart toolgate"
                )));
            }
        }
        let tools_removed = self.forget(name).await?;
        Ok(RemovedServer {
            name: name.to_owned(),
            tools_removed,
        })
    }

    /// Restarts a server (stops its process or session and starts it again, listing its tools
    /// anew) and returns its summary.
    ///
    /// Errors: [`OpError::Forbidden`] without [`MANAGE_PERMISSION`]; [`OpError::NotFound`] for
    /// an unknown server.
    pub async fn restart(
        &self,
        manager: Manager<'_>,
        name: &str,
    ) -> Result<ServerSummary, OpError> {
        manager.check("restart servers")?;
        if !self.lock().contains_key(name) {
            return Err(unknown(name));
        }
        self.restart_server(name).await;
        self.summary(manager.principal, name)
    }

    /// Marks `upstream` tools of `server` approved and serves them (in memory: the pins join
    /// the store once it keeps them).
    async fn approve_tools(
        &self,
        server: &str,
        upstream: &[String],
        by: &str,
    ) -> Result<Vec<super::views::ServerToolView>, OpError> {
        let mut servers = self.lock();
        let entry = servers.get_mut(server).ok_or_else(|| unknown(server))?;
        let mut approved = Vec::new();
        for name in upstream {
            if let Some(tool) = entry.tools.get_mut(name) {
                tool.status = ToolStatus::Approved;
                tool.approved_hash = None;
                tool.changes.clear();
                tool.reason = None;
                if let Some(n) = &tool.name
                    && let Err(e) = self.inner.registry.release(n)
                {
                    tracing::warn!(tool = %n, error = %e, "an approved tool stays withheld");
                }
                approved.push(tool.view(name));
            }
        }
        drop(servers);
        for tool in &approved {
            self.publish(server, tool, Some(by));
        }
        Ok(approved)
    }

    /// Forgets a server: its tools leave the registry (withheld names are released).
    async fn forget(&self, name: &str) -> Result<Vec<String>, OpError> {
        let Some(server) = self.lock().remove(name) else {
            return Err(unknown(name));
        };
        let mut removed = Vec::new();
        for tool in server.tools.values() {
            let Some(n) = &tool.name else { continue };
            if self.inner.registry.remove(n).is_ok() {
                removed.push(n.clone());
            }
            let _ = self.inner.registry.release(n);
        }
        Ok(removed)
    }

    /// Restarts a server's connection.
    async fn restart_server(&self, name: &str) {
        if let Some(server) = self.lock().get_mut(name) {
            server.state = state::stopped();
        }
    }
}

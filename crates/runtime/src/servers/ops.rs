//! The use cases on upstream servers every front-end offers (`toolgate servers …`,
//! `/v1/servers…`, the web UI): list, show, tools, approve, restart, remove, add, import.
//! Reading needs no permission (a tool the reader may not call is left out, as everywhere);
//! changing needs [`MANAGE_PERMISSION`].

use std::time::Duration;

use serde_json::Value;
use toolgate_core::{ErrorChain, Principal};
use toolgate_store::{EventKind, GatewayAudit, StoredEvent};

use super::listing::unserve;
use super::views::{
    ApprovedTools, ImportReport, RemovedServer, ServerDetail, ServerList, ServerSource,
    ServerSummary, ServerToolView, ServerTools, SkippedServer, ToolStatus,
};
use super::{MANAGE_PERMISSION, Servers, may_manage};
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
                "Principal {} may not {what}: it needs the permission {MANAGE_PERMISSION}; grant it to the principal in the config file",
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

/// How long removing a server waits for a listing of it under way.
const LISTING_WAIT: Duration = Duration::from_secs(10);

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

    /// A server's tools as it lists them now: the server is started if needed and its tools
    /// listed and checked against their pins first (what `toolgate servers tools` shows from a
    /// one-shot command, where nothing may have started yet). A server that cannot start
    /// answers what is known, its state saying why.
    ///
    /// Errors: [`OpError::NotFound`] for an unknown server.
    pub async fn tools_now(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<ServerTools, OpError> {
        if !self.lock().contains_key(name) {
            return Err(unknown(name));
        }
        if let Err(e) = self.refresh(name).await {
            tracing::debug!(server = %name, error = %e, "listed from what is stored");
        }
        self.tools(principal, name)
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
                        .find(|(u, t)| {
                            *u == wanted || t.name.as_ref().is_some_and(|n| n.as_str() == wanted)
                        })
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
    /// its stored entry are forgotten (a stored entry that no longer loads too). A server of
    /// the config file cannot be removed here; once taken out of the file, removing it forgets
    /// the pins it left, so that tools seen again under its name wait for review.
    ///
    /// Errors: [`OpError::Forbidden`] without [`MANAGE_PERMISSION`]; [`OpError::NotFound`] for
    /// a server neither served, stored nor pinned; [`OpError::Conflict`] for a server of the
    /// config file.
    pub async fn remove(&self, manager: Manager<'_>, name: &str) -> Result<RemovedServer, OpError> {
        manager.check("remove servers")?;
        let source = self.lock().get(name).map(|s| s.source);
        if source.is_none() {
            // A stored entry that no longer loads is not served, but can be removed.
            let stored = self.inner.store.server(name).await?.is_some();
            if stored {
                self.inner.store.remove_server(name, manager.actor).await?;
            }
            let pins_removed = self.inner.store.remove_pins(name).await?;
            if !stored && pins_removed == 0 {
                return Err(unknown(name));
            }
            return Ok(RemovedServer {
                name: name.to_owned(),
                tools_removed: Vec::new(),
                pins_removed,
            });
        }
        {
            let servers = self.lock();
            let server = servers.get(name).ok_or_else(|| unknown(name))?;
            if server.source == ServerSource::Config {
                return Err(OpError::Conflict(format!(
                    "Server {name} is declared in the config file ([servers.{name}]); remove it there and restart toolgate"
                )));
            }
        }
        let (tools_removed, pins_removed) = self.forget(name, manager.actor).await?;
        Ok(RemovedServer {
            name: name.to_owned(),
            tools_removed,
            pins_removed,
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
        self.restart_server(name).await?;
        self.summary(manager.principal, name)
    }

    /// Adds (stores) a server entry and starts it to list its tools: with `approve`, the tools
    /// of this first sight are approved up front; otherwise they wait for review
    /// ([`Servers::approve`]). Returns the server as it is once listed (or failed to start).
    ///
    /// Errors: [`OpError::Forbidden`] without [`MANAGE_PERMISSION`]; [`OpError::Conflict`] for
    /// a name in use; [`OpError::BadRequest`] for an invalid name or entry (every problem).
    pub async fn add(
        &self,
        manager: Manager<'_>,
        name: &str,
        entry: Value,
        approve: bool,
    ) -> Result<ServerDetail, OpError> {
        manager.check("add servers")?;
        let (name, entry) = super::load::parse_entry(name, &entry).map_err(OpError::BadRequest)?;
        if self.lock().contains_key(name.as_str()) {
            return Err(OpError::Conflict(format!(
                "A server named {name} exists already; remove it first (`toolgate servers rm {name}`) or choose another name"
            )));
        }
        let json = serde_json::to_value(&entry).map_err(|e| OpError::BadRequest(e.to_string()))?;
        // Refused when stored meanwhile (by someone else, or an entry that no longer loads:
        // `remove` takes that one out).
        self.inner
            .store
            .add_server(name.as_str(), &json, manager.actor)
            .await?;
        let pins = self.inner.store.pins(name.as_str()).await?;
        let key = name.to_string();
        self.insert(name, entry, ServerSource::Store, approve);
        let remembered = super::load::remembered(&pins);
        let first_sight = remembered.is_empty();
        self.apply_remembered(key.clone(), remembered);
        if first_sight {
            // Listed here, so the answer shows the tools (a failure shows in the state).
            let _ = self.refresh(&key).await;
        }
        self.show(manager.principal, &key)
    }

    /// Imports the `mcpServers` JSON of Claude Desktop, Cursor or VS Code (bare commands such as
    /// `npx` resolved through `PATH` now): each server is added as [`Servers::add`] does (with
    /// `approve` for their first sight); servers whose name is taken, or that toolgate cannot
    /// run, are skipped with the reason.
    ///
    /// Errors: [`OpError::Forbidden`] without [`MANAGE_PERMISSION`]; [`OpError::BadRequest`]
    /// for a file that is not such JSON.
    pub async fn import(
        &self,
        manager: Manager<'_>,
        json: &str,
        approve: bool,
    ) -> Result<ImportReport, OpError> {
        manager.check("import servers")?;
        let path = std::env::var("PATH").unwrap_or_default();
        let resolve = toolgate_gateway::import::path_resolver(path, is_executable);
        let import = toolgate_gateway::import::from_mcp_servers(json, &resolve)
            .map_err(|e| OpError::BadRequest(e.to_string()))?;
        let mut report = ImportReport {
            added: Vec::new(),
            skipped: import
                .skipped
                .into_iter()
                .map(|s| SkippedServer {
                    name: s.name,
                    reason: s.reason,
                })
                .collect(),
            notes: import.notes,
        };
        for (name, entry) in import.servers {
            let value = serde_json::to_value(&entry).unwrap_or_default();
            match self.add(manager, name.as_str(), value, approve).await {
                Ok(_) => report.added.push(name.to_string()),
                Err(e) => report.skipped.push(SkippedServer {
                    name: name.to_string(),
                    reason: e.to_string(),
                }),
            }
        }
        Ok(report)
    }

    /// Approves `upstream` tools of `server` as their state shows them (the hash the approver
    /// saw: a definition that changed again meanwhile is refused by the store), serves them,
    /// and writes an audit entry and an event for each.
    async fn approve_tools(
        &self,
        server: &str,
        upstream: &[String],
        by: &str,
    ) -> Result<Vec<ServerToolView>, OpError> {
        let store = &self.inner.store;
        let lock = self.listing_lock(server);
        let _listing = lock.lock().await;
        let mut approved = Vec::new();
        for tool in upstream {
            let Some((name, state)) = self
                .lock()
                .get(server)
                .and_then(|s| s.tools.get(tool).map(|t| (s.name.clone(), t.clone())))
            else {
                continue;
            };
            store.approve_pin(server, tool, &state.hash, by).await?;
            let (Some(toolname), Some(definition)) = (&state.name, &state.definition) else {
                continue;
            };
            // The definition was made from this version: it carries the approved hash.
            if let Err(reason) = self.serve(&name, tool, toolname, definition.clone()) {
                return Err(OpError::Conflict(reason));
            }
            let view = {
                let mut servers = self.lock();
                let Some(entry) = servers.get_mut(server).and_then(|s| s.tools.get_mut(tool))
                else {
                    continue;
                };
                entry.status = ToolStatus::Approved;
                entry.approved_hash = None;
                entry.changes.clear();
                entry.reason = None;
                entry.view(tool)
            };
            let audit = GatewayAudit::approved(
                toolname.as_str(),
                server,
                tool,
                &state.hash,
                state.approved_hash.as_deref(),
                by,
            );
            if let Err(e) = store.audit_gateway_event(&audit).await {
                tracing::warn!(tool = %toolname, error = %ErrorChain(&e), "an approval could not be audited");
            }
            self.publish(server, &view, Some(by));
            approved.push(view);
        }
        Ok(approved)
    }

    /// Forgets a stored server: its tools leave the registry, its process stops, its pins and
    /// its stored entry are removed. Returns the tools no longer served and how many pins went.
    async fn forget(&self, name: &str, by: &str) -> Result<(Vec<String>, u64), OpError> {
        self.inner.store.remove_server(name, by).await?;
        let Some(removed) = self.withdraw(name).await else {
            return Err(unknown(name));
        };
        let pins = match self.inner.store.remove_pins(name).await {
            Ok(pins) => pins,
            Err(e) => {
                tracing::warn!(server = %name, error = %ErrorChain(&e), "the pins of a removed server stay");
                0
            }
        };
        Ok((removed, pins))
    }

    /// Takes server `name` out of this instance: out of the map, its process or session
    /// stopped, its tools out of the registry. Returns the names of the tools it served (its
    /// approved ones), or `None` when it was not here. Its stored entry and pins are left as
    /// they are.
    async fn withdraw(&self, name: &str) -> Option<Vec<String>> {
        let server = self.lock().remove(name)?;
        server.stop.cancel();
        if let Some(upstream) = &server.upstream {
            upstream.stop().await;
        }
        // A listing that started before the server left the map (a `PinApproved` event starts
        // one on every instance) ends before its tools leave the registry and, on the removing
        // instance, its pins go: otherwise it could serve or pin them again. One that starts
        // later finds the server gone. Not forever: a listing stuck on an unresponsive server
        // does not hold up the removal.
        let _listing = tokio::time::timeout(LISTING_WAIT, server.listing.lock())
            .await
            .ok();
        let mut served = Vec::new();
        for tool in server.tools.values() {
            let Some(n) = &tool.name else { continue };
            if tool.status == ToolStatus::Approved {
                served.push(n.to_string());
            }
            unserve(&self.inner.registry, n);
        }
        Some(served)
    }

    /// Restarts a server's connection and lists its tools again.
    async fn restart_server(&self, name: &str) -> Result<(), OpError> {
        let upstream = self.lock().get(name).and_then(|s| s.upstream.clone());
        if let Some(upstream) = upstream {
            self.set_verified(name, false);
            upstream.stop().await;
        }
        // Listing starts it again; a failure shows in its state.
        let _ = self.refresh(name).await;
        Ok(())
    }

    /// Stops every server's process or session (the runtime is shutting down).
    pub(crate) async fn shutdown(&self) {
        let upstreams: Vec<_> = self
            .lock()
            .values()
            .filter_map(|s| {
                s.stop.cancel();
                s.upstream.clone()
            })
            .collect();
        for upstream in upstreams {
            upstream.stop().await;
        }
    }

    /// Follows the store's gateway events made elsewhere (another process approved a tool,
    /// added or removed a server): the server's pins are read again.
    pub(crate) fn on_store_event(&self, event: &StoredEvent) {
        if event.kind.is_definition() {
            return;
        }
        let server = event
            .detail
            .as_ref()
            .and_then(|d| d.get("server"))
            .and_then(Value::as_str)
            .unwrap_or(&event.tool)
            .to_owned();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let servers = self.clone();
        let kind = event.kind;
        handle.spawn(async move {
            if let Err(e) = servers.reload(&server, kind).await {
                tracing::warn!(server = %server, error = %e, "a server change made elsewhere was not applied");
            }
        });
    }

    /// Reads server `name`'s stored state again after a change made elsewhere.
    async fn reload(&self, name: &str, kind: EventKind) -> Result<(), String> {
        let store = &self.inner.store;
        let known = self.lock().get(name).map(|s| s.source);
        match (kind, known) {
            (EventKind::ServerRemoved, Some(ServerSource::Store)) => {
                self.withdraw(name).await;
                Ok(())
            }
            (
                EventKind::ServerAdded | EventKind::ServerUpdated,
                None | Some(ServerSource::Store),
            ) => {
                let Some(stored) = store
                    .server(name)
                    .await
                    .map_err(|e| ErrorChain(&e).to_string())?
                else {
                    return Ok(());
                };
                let (server, entry) = super::load::parse_entry(name, &stored.entry)?;
                if known.is_some_and(|_| self.lock().get(name).is_some_and(|s| s.entry == entry)) {
                    return Ok(());
                }
                let pins = store
                    .pins(name)
                    .await
                    .map_err(|e| ErrorChain(&e).to_string())?;
                self.insert(server, entry, ServerSource::Store, false);
                self.apply_remembered(name.to_owned(), super::load::remembered(&pins));
                Ok(())
            }
            (EventKind::PinApproved | EventKind::PinRestored, Some(_)) => {
                let pins = store
                    .pins(name)
                    .await
                    .map_err(|e| ErrorChain(&e).to_string())?;
                let remembered = super::load::remembered(&pins);
                // Only what is approved now changes anything here; a running server is listed
                // again, which checks the new pins against what it lists.
                let running = self.lock().get(name).is_some_and(|s| s.verified);
                if running {
                    self.set_verified(name, false);
                    self.refresh(name).await
                } else {
                    let lock = self.listing_lock(name);
                    let _listing = lock.lock().await;
                    self.register_remembered(name, remembered);
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

/// Whether `path` is an executable file (the import's look at the filesystem).
fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

//! A server's tools listing applied: each tool named (`naming::assign`), governed
//! (`govern::definition_in`) and checked against its pin in the store (`Store::observe_tool`);
//! approved and unchanged tools are registered with a handler that forwards calls, the others
//! withheld with the reason, and tools the server no longer lists leave the registry.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use toolgate_core::{ErrorChain, ToolDefinition, ToolName};
use toolgate_gateway::{ServerEntry, ServerName, UpstreamTool, govern, naming, pin};
use toolgate_store::{GatewayAudit, Observed, Pin, PinStatus};

use super::Servers;
use super::forward::Forwarded;
use super::state::{ToolState, field_changes};
use super::views::ToolStatus;

/// One tool as listed by the upstream, or as the store remembers it.
#[derive(Clone, Debug)]
pub(super) struct Listed {
    pub(super) tool: UpstreamTool,
    /// What the store said of it: remembered at startup, or observed now.
    pub(super) verdict: Verdict,
}

/// Where a tool stands against its pin.
#[derive(Clone, Debug)]
pub(super) enum Verdict {
    /// The approved definition: serve it.
    Approved,
    /// Never approved: withhold it until a person approves it.
    Pending,
    /// Changed since approved (the approved definition, to say what changed): withhold it.
    Quarantined(Option<Box<UpstreamTool>>),
}

impl Listed {
    /// A tool as the store remembers it.
    pub(super) fn from_pin(tool: UpstreamTool, pin: &Pin) -> Self {
        Self {
            tool,
            verdict: verdict_of(pin),
        }
    }
}

fn verdict_of(pin: &Pin) -> Verdict {
    match pin.status {
        PinStatus::Approved => Verdict::Approved,
        PinStatus::Quarantined => Verdict::Quarantined(
            pin.approved
                .as_ref()
                .and_then(|a| UpstreamTool::from_json(a).ok())
                .map(Box::new),
        ),
        _ => Verdict::Pending,
    }
}

impl Servers {
    /// Whether server `key`'s tools were listed since its connection (re)started.
    pub(super) fn is_verified(&self, key: &str) -> bool {
        self.lock().get(key).is_some_and(|s| s.verified)
    }

    /// Marks whether server `key`'s tools were listed since its connection (re)started.
    pub(super) fn set_verified(&self, key: &str, verified: bool) {
        if let Some(server) = self.lock().get_mut(key) {
            server.verified = verified;
        }
    }

    /// The lock that serializes the changes of server `key`'s tools.
    pub(super) fn listing_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.lock()
            .get(key)
            .map(|s| Arc::clone(&s.listing))
            .unwrap_or_default()
    }

    /// Lists server `key`'s tools (starting it if needed) and applies the listing.
    ///
    /// Errors: the server is unknown, cannot start, or its listing or the store failed (the
    /// message, also kept as the server's problem).
    pub(super) async fn refresh(&self, key: &str) -> Result<(), String> {
        let (upstream, lock) = {
            let servers = self.lock();
            let server = servers
                .get(key)
                .ok_or_else(|| format!("No server named {key}"))?;
            match &server.upstream {
                Some(u) => (u.clone(), Arc::clone(&server.listing)),
                None => return Err(server.problem.clone().unwrap_or_default()),
            }
        };
        let _listing = lock.lock().await;
        let outcome = match upstream.tools().await {
            Ok(tools) => self.apply(key, tools).await,
            Err(e) => Err(ErrorChain(&e).to_string()),
        };
        let mut servers = self.lock();
        if let Some(server) = servers.get_mut(key) {
            server.problem = outcome.as_ref().err().cloned();
            server.verified = outcome.is_ok();
        }
        outcome
    }

    /// Applies a fresh listing of server `key`: every tool observed against its pin, then
    /// served or withheld; tools no longer listed leave the registry.
    async fn apply(&self, key: &str, tools: Vec<UpstreamTool>) -> Result<(), String> {
        let Some((name, entry, first_sight, approve_first)) = self.lock().get(key).map(|s| {
            (
                s.name.clone(),
                s.entry.clone(),
                s.first_sight,
                s.approve_first_sight,
            )
        }) else {
            return Ok(());
        };
        let store = &self.inner.store;
        // New tools join without review on a server that says so (not on its first sight,
        // which is reviewed unless approved up front).
        let auto_approve = if first_sight {
            approve_first
        } else {
            entry.auto_approve_new_tools
        };
        let mut listed = Vec::with_capacity(tools.len());
        let mut present = Vec::with_capacity(tools.len());
        for tool in tools {
            if entry.tool_disabled(&tool.name) {
                continue;
            }
            let hash = pin::hash(&tool);
            let observed = store
                .observe_tool(key, &tool.name, &hash, &tool.pinned(), auto_approve)
                .await
                .map_err(|e| ErrorChain(&e).to_string())?;
            present.push(tool.name.clone());
            let verdict = match &observed {
                Observed::Changed { approved, .. } => {
                    Verdict::Quarantined(UpstreamTool::from_json(approved).ok().map(Box::new))
                }
                other => verdict_of(other.pin()),
            };
            let newly_quarantined = matches!(observed, Observed::Changed { .. });
            listed.push((Listed { tool, verdict }, newly_quarantined));
        }
        if let Err(e) = store.forget_missing(key, &present).await {
            tracing::warn!(server = %key, error = %ErrorChain(&e), "the pins of tools gone upstream stay");
        }
        let quarantined: Vec<String> = listed
            .iter()
            .filter(|(_, q)| *q)
            .map(|(l, _)| l.tool.name.clone())
            .collect();
        let states = self.place(
            key,
            &name,
            &entry,
            listed.into_iter().map(|(l, _)| l).collect(),
        );
        if let Some(server) = self.lock().get_mut(key) {
            server.first_sight = false;
        }
        // Each quarantine once (only the instance that saw the change first gets `Changed`):
        // an audit entry and an event.
        for upstream in quarantined {
            let Some(state) = states.get(&upstream) else {
                continue;
            };
            let view = state.view(&upstream);
            if let Some(tool) = &state.name {
                let summary = state.reason.clone().unwrap_or_default();
                let event = GatewayAudit::quarantined(
                    tool.as_str(),
                    key,
                    &upstream,
                    state.approved_hash.as_deref().unwrap_or_default(),
                    &state.hash,
                    serde_json::to_value(&state.changes).unwrap_or_default(),
                    &summary,
                );
                if let Err(e) = store.audit_gateway_event(&event).await {
                    tracing::warn!(tool = %tool, error = %ErrorChain(&e), "a quarantine could not be audited");
                }
            }
            self.publish(key, &view, None);
        }
        Ok(())
    }

    /// Registers or withholds the tools the store remembers of server `key`, before it starts.
    pub(super) fn register_remembered(&self, key: &str, remembered: Vec<Listed>) {
        let Some((name, entry)) = self
            .lock()
            .get(key)
            .map(|s| (s.name.clone(), s.entry.clone()))
        else {
            return;
        };
        let remembered = remembered
            .into_iter()
            .filter(|l| !entry.tool_disabled(&l.tool.name))
            .collect();
        self.place(key, &name, &entry, remembered);
    }

    /// Names and governs `listed` (the server's whole list), serves or withholds each tool, and
    /// takes the server's tools not in it out of the registry. Returns the new tool states.
    fn place(
        &self,
        key: &str,
        server: &ServerName,
        entry: &ServerEntry,
        listed: Vec<Listed>,
    ) -> BTreeMap<String, ToolState> {
        let registry = &self.inner.registry;
        // Who holds which name besides this server.
        let (owners, previous): (HashMap<String, String>, BTreeMap<String, ToolState>) = {
            let servers = self.lock();
            let owners = servers
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .flat_map(|(k, s)| {
                    s.tools
                        .values()
                        .filter_map(|t| t.name.as_ref())
                        .map(move |n| (n.to_string(), k.clone()))
                })
                .collect();
            let previous = servers
                .get(key)
                .map(|s| s.tools.clone())
                .unwrap_or_default();
            (owners, previous)
        };
        // A name is free for this server when nobody else holds it: another server's tool, or
        // any registered tool that is not this server's own (a definition, a built-in).
        let taken = |n: &str| -> Option<String> {
            if let Some(other) = owners.get(n) {
                return Some(format!("tool {n} of server {other}"));
            }
            registry
                .get(n)
                .filter(|t| !is_ours(t.spec().definition(), server))
                .map(|t| {
                    if t.is_builtin() {
                        format!("{} {n}", toolgate_gateway::naming::BUILTIN_OWNER)
                    } else {
                        format!("the tool {n}")
                    }
                })
        };
        let upstream_names: Vec<String> = listed.iter().map(|l| l.tool.name.clone()).collect();
        let names: HashMap<String, Result<ToolName, String>> =
            match naming::assign(server, entry.prefix, &upstream_names, &taken) {
                Ok(pairs) => pairs.into_iter().map(|(u, n)| (u, Ok(n))).collect(),
                // Some collide: name each on its own, so the others are served.
                Err(_) => upstream_names
                    .iter()
                    .map(|u| {
                        let one =
                            naming::assign(server, entry.prefix, std::slice::from_ref(u), &taken)
                                .map_err(|e| e.to_string())
                                .and_then(|mut v| v.pop().map(|(_, n)| n).ok_or_default());
                        (u.clone(), one)
                    })
                    .collect(),
            };
        let mut states = BTreeMap::new();
        for Listed { tool, verdict } in listed {
            let upstream = tool.name.clone();
            let hash = pin::hash(&tool);
            let name = names.get(&upstream).cloned().unwrap_or_else(|| {
                Err(format!("Tool {upstream:?} of server {server} got no name"))
            });
            let state = self.settle(server, entry, tool, hash, name, verdict, &previous);
            states.insert(upstream, state);
        }
        // Tools gone upstream leave the registry.
        for (upstream, old) in &previous {
            if states.contains_key(upstream) {
                continue;
            }
            if let Some(n) = &old.name {
                unserve(registry, n);
            }
        }
        if let Some(s) = self.lock().get_mut(key) {
            s.tools = states.clone();
        }
        states
    }

    /// Serves or withholds one tool; returns its state.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &self,
        server: &ServerName,
        entry: &ServerEntry,
        tool: UpstreamTool,
        hash: String,
        name: Result<ToolName, String>,
        verdict: Verdict,
        previous: &BTreeMap<String, ToolState>,
    ) -> ToolState {
        let registry = &self.inner.registry;
        let upstream = tool.name.clone();
        let mut state = ToolState {
            name: None,
            status: ToolStatus::Refused,
            upstream: tool,
            definition: None,
            hash,
            approved_hash: None,
            changes: Vec::new(),
            reason: None,
        };
        let name = match name {
            Ok(n) => n,
            Err(reason) => {
                // A name it held before (its server's prefix mode changed) is let go.
                if let Some(n) = previous.get(&upstream).and_then(|p| p.name.as_ref()) {
                    unserve(registry, n);
                }
                state.reason = Some(reason);
                return state;
            }
        };
        if let Some(old) = previous.get(&upstream).and_then(|p| p.name.as_ref())
            && old != &name
        {
            unserve(registry, old);
        }
        state.name = Some(name.clone());
        let definition = match govern::definition_in(
            server,
            entry,
            &state.upstream,
            &name,
            registry.caps(),
        ) {
            Ok(d) => d,
            Err(issues) => {
                unserve(registry, &name);
                state.reason = Some(format!(
                    "Tool {name} of server {server} cannot be served: {}; change [servers.{server}] or ask the server's authors",
                    issues
                        .iter()
                        .map(|i| format!("{}: {}", i.path, i.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
                return state;
            }
        };
        state.definition = Some(definition.clone());
        match verdict {
            Verdict::Approved => match self.serve(server, &upstream, &name, definition) {
                Ok(()) => state.status = ToolStatus::Approved,
                Err(reason) => {
                    unserve(registry, &name);
                    state.reason = Some(reason);
                }
            },
            Verdict::Pending => {
                state.status = ToolStatus::Pending;
                let reason = format!(
                    "Tool {name} of server {server} is new and not approved yet; review it with `toolgate servers tools {server}` and approve it with `toolgate servers approve {server} {upstream}`"
                );
                withhold(registry, &name, &reason);
                state.reason = Some(reason);
            }
            Verdict::Quarantined(approved) => {
                state.status = ToolStatus::Quarantined;
                let changes = approved
                    .as_ref()
                    .map(|a| pin::diff(a, &state.upstream))
                    .unwrap_or_default();
                state.approved_hash = approved.as_deref().map(pin::hash);
                let what = if changes.is_empty() {
                    "its definition changed".to_owned()
                } else {
                    format!("its definition changed ({})", pin::summary(&changes))
                };
                let reason = format!(
                    "Tool {name} is quarantined: {what} since it was approved; approve the new version with `toolgate servers approve {server} {upstream}`"
                );
                withhold(registry, &name, &reason);
                state.changes = field_changes(&changes);
                state.reason = Some(reason);
            }
        }
        state
    }

    /// Registers (or replaces) `name` as the tool forwarding to `server`'s `upstream` tool with
    /// `definition`; nothing changes when that exact definition is registered already.
    ///
    /// Errors: the registry refused it (the message).
    pub(super) fn serve(
        &self,
        server: &ServerName,
        upstream: &str,
        name: &ToolName,
        definition: ToolDefinition,
    ) -> Result<(), String> {
        let registry = &self.inner.registry;
        let Some(connection) = self
            .lock()
            .get(server.as_str())
            .and_then(|s| s.upstream.clone())
        else {
            return Err(format!("Server {server} cannot start"));
        };
        let existing = registry.get(name.as_str());
        if existing
            .as_ref()
            .is_some_and(|t| t.spec().definition() == &definition)
        {
            return Ok(());
        }
        let tool = Arc::new(Forwarded::new(
            definition,
            upstream.to_owned(),
            connection,
            Arc::downgrade(&self.inner),
        ));
        let outcome = match existing {
            Some(t) if is_ours(t.spec().definition(), server) => registry.replace(tool),
            _ => registry.register(tool),
        };
        outcome.map(|_| ()).map_err(|e| {
            format!(
                "Tool {name} of server {server} cannot be served: {}",
                ErrorChain(&e)
            )
        })
    }
}

/// Whether `def` is a tool of `server` (its `metadata.upstream`).
fn is_ours(def: &ToolDefinition, server: &ServerName) -> bool {
    govern::Upstream::of(def).is_some_and(|u| u.server == server.as_str())
}

/// Withholds `name` with `reason`.
fn withhold(registry: &toolgate_core::Registry, name: &ToolName, reason: &str) {
    if let Err(e) = registry.withhold(name, reason) {
        tracing::warn!(tool = %name, error = %ErrorChain(&e), "an upstream tool could not be withheld");
    }
}

/// Takes `name` out of the registry: unregistered and no longer withheld.
pub(super) fn unserve(registry: &toolgate_core::Registry, name: &ToolName) {
    if registry
        .get(name.as_str())
        .is_some_and(|t| govern::Upstream::of(t.spec().definition()).is_some())
    {
        let _ = registry.remove(name.as_str());
    }
    let _ = registry.release(name.as_str());
}

trait OkOrDefault<T> {
    fn ok_or_default(self) -> Result<T, String>;
}

impl<T> OkOrDefault<T> for Option<T> {
    fn ok_or_default(self) -> Result<T, String> {
        self.ok_or_else(|| "no name was given".to_owned())
    }
}

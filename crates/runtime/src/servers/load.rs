//! Startup: the server entries (the config file's, then the store's) with their stored pins,
//! read while the runtime is prepared; then, when it is assembled, the pinned tools registered
//! (approved) or withheld (the others) before anything starts, and the servers with nothing
//! pinned yet (or `eager`) started.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use tokio_util::sync::CancellationToken;
use toolgate_core::Registry;
use toolgate_gateway::upstream::{Connector, ServerState, Upstream, UpstreamEvent};
use toolgate_gateway::{ServerEntry, ServerName, UpstreamTool};
use toolgate_store::{Pin, PinStatus, Store};

use super::listing::Listed;
use super::state::Server;
use super::views::ServerSource;
use super::{Inner, Servers};
use crate::config::Config;
use crate::error::RuntimeError;
use crate::events::EventHub;

/// The server entries and their pins as read from the config and the store: what
/// `Runtime::assemble` turns into [`Servers`]. Empty by default (no servers).
#[derive(Debug, Default)]
pub struct Loaded {
    servers: Vec<LoadedServer>,
    /// Stored entries that no longer load, one line each.
    pub warnings: Vec<String>,
}

#[derive(Debug)]
struct LoadedServer {
    name: ServerName,
    entry: ServerEntry,
    source: ServerSource,
    pins: Vec<Pin>,
}

impl Loaded {
    /// Reads the config's `[servers]` (validated when the config was loaded) and the stored
    /// entries (a stored entry that no longer validates, or whose name the config file uses,
    /// is skipped with a warning), each with its pins.
    ///
    /// Errors: an invalid `[servers]` entry; the store could not be read.
    pub async fn read(config: &Config, store: &Store) -> Result<Self, RuntimeError> {
        let mut loaded = Self::default();
        for (name, entry) in config.server_entries()? {
            let pins = store.pins(name.as_str()).await?;
            loaded.servers.push(LoadedServer {
                name,
                entry,
                source: ServerSource::Config,
                pins,
            });
        }
        for stored in store.servers().await? {
            if loaded
                .servers
                .iter()
                .any(|s| s.name.as_str() == stored.name)
            {
                loaded.warnings.push(format!(
                    "stored server {} is ignored: the config file declares a server of that name; remove one of them (`toolgate servers rm {}`)",
                    stored.name, stored.name
                ));
                continue;
            }
            match parse_entry(&stored.name, &stored.entry) {
                Ok((name, entry)) => {
                    let pins = store.pins(name.as_str()).await?;
                    loaded.servers.push(LoadedServer {
                        name,
                        entry,
                        source: ServerSource::Store,
                        pins,
                    });
                }
                Err(e) => loaded.warnings.push(format!(
                    "stored server {} no longer loads: {e}",
                    stored.name
                )),
            }
        }
        Ok(loaded)
    }
}

/// A stored (or submitted) entry as a validated name and entry; every problem in one message.
pub(super) fn parse_entry(
    name: &str,
    entry: &serde_json::Value,
) -> Result<(ServerName, ServerEntry), String> {
    let name = ServerName::parse(name).map_err(|e| e.to_string())?;
    let entry: ServerEntry =
        serde_json::from_value(entry.clone()).map_err(|e| format!("servers.{name}: {e}"))?;
    entry.validate(&name).map_err(|issues| {
        issues
            .iter()
            .map(|i| format!("{}: {}", i.path, i.message))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    Ok((name, entry))
}

/// The listing the store remembers of a server: each present pin's definition (the approved
/// one for approved tools, the one awaiting review for the others).
pub(super) fn remembered(pins: &[Pin]) -> Vec<Listed> {
    pins.iter()
        .filter(|p| p.present)
        .filter_map(|p| {
            let current = match p.status {
                PinStatus::Approved => p.approved.as_ref(),
                _ => p.pending.as_ref().or(p.approved.as_ref()),
            }?;
            let tool = UpstreamTool::from_json(current).ok()?;
            Some(Listed::from_pin(tool, p))
        })
        .collect()
}

impl Servers {
    /// The servers of a runtime: every loaded entry with its pinned tools registered or
    /// withheld, servers seen for the first time (and `eager` ones) starting, and a watcher per
    /// server following its tool-list changes until `stop` fires. Tasks are only spawned inside
    /// a Tokio runtime.
    pub(crate) fn assemble(
        loaded: Loaded,
        store: Store,
        registry: Arc<Registry>,
        hub: EventHub,
        connector: Connector,
        stop: CancellationToken,
    ) -> Self {
        let servers = Self {
            inner: Arc::new(Inner {
                store,
                registry,
                hub,
                connector,
                stop,
                servers: Mutex::new(BTreeMap::new()),
            }),
        };
        for server in loaded.servers {
            let key = server.name.to_string();
            servers.insert(server.name, server.entry, server.source, false);
            servers.apply_remembered(key, remembered(&server.pins));
        }
        servers
    }

    /// Adds `entry` as server `name` (not started; replacing a server of that name) with its
    /// watcher.
    pub(super) fn insert(
        &self,
        name: ServerName,
        entry: ServerEntry,
        source: ServerSource,
        approve_first_sight: bool,
    ) {
        let key = name.to_string();
        let (upstream, problem) = match entry.expanded(&name, &|var| std::env::var(var).ok()) {
            Ok(expanded) => (
                Some(Upstream::new(
                    name.clone(),
                    expanded,
                    self.inner.connector.clone(),
                )),
                None,
            ),
            Err(e) => (None, Some(e.to_string())),
        };
        let stop = self.inner.stop.child_token();
        let server = Server {
            name,
            entry,
            source,
            upstream: upstream.clone(),
            problem,
            tools: BTreeMap::new(),
            listing: Arc::default(),
            verified: false,
            first_sight: true,
            approve_first_sight,
            stop: stop.clone(),
        };
        let replaced = self.lock().insert(key.clone(), server);
        if let Some(old) = replaced {
            // Its tools forward to the old connection: they are registered again from the new
            // entry's listing.
            old.stop.cancel();
            for tool in old.tools.values() {
                if let Some(n) = &tool.name {
                    super::listing::unserve(&self.inner.registry, n);
                }
            }
        }
        if let (Some(upstream), Ok(handle)) = (upstream, tokio::runtime::Handle::try_current()) {
            handle.spawn(watch(Arc::downgrade(&self.inner), key, upstream, stop));
        }
    }

    /// Registers or withholds the tools the store remembers of the server named in `key`, and
    /// starts the server when there are none (first sight) or it is `eager`.
    pub(super) fn apply_remembered(&self, key: String, remembered: Vec<Listed>) {
        let start = {
            let mut servers = self.lock();
            let Some(server) = servers.get_mut(&key) else {
                return;
            };
            server.first_sight = remembered.is_empty();
            server.first_sight || server.entry.eager
        };
        self.register_remembered(&key, remembered);
        if start && let Ok(handle) = tokio::runtime::Handle::try_current() {
            let servers = self.clone();
            handle.spawn(async move {
                if let Err(e) = servers.refresh(&key).await {
                    tracing::warn!(server = %key, error = %e, "an upstream server did not start");
                }
            });
        }
    }
}

/// Follows `upstream`'s events until `stop` fires or the servers are gone: a tool-list change
/// or a new connection lists the tools again; any other state means the next call waits for a
/// listing first.
async fn watch(inner: Weak<Inner>, key: String, upstream: Upstream, stop: CancellationToken) {
    let mut events = upstream.subscribe();
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => break,
            event = events.recv() => event,
        };
        let Some(inner) = inner.upgrade() else { break };
        let servers = Servers { inner };
        use tokio::sync::broadcast::error::RecvError;
        match event {
            Ok(UpstreamEvent::ToolsChanged) | Err(RecvError::Lagged(_)) => {
                servers.set_verified(&key, false);
                if let Err(e) = servers.refresh(&key).await {
                    tracing::warn!(server = %key, error = %e, "an upstream's tools could not be listed");
                }
            }
            Ok(UpstreamEvent::State(ServerState::Ready)) => {
                if !servers.is_verified(&key)
                    && let Err(e) = servers.refresh(&key).await
                {
                    tracing::warn!(server = %key, error = %e, "an upstream's tools could not be listed");
                }
            }
            Ok(_) => servers.set_verified(&key, false),
            Err(RecvError::Closed) => break,
        }
    }
    upstream.stop().await;
}

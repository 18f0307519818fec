//! Upstream MCP servers as one more source of tools in the runtime (issue 20).
//!
//! [`Servers`] holds every server entry (the config file's `[servers]` and the store's) with
//! its connection (`toolgate_gateway::upstream::Upstream`) and the state of each of its tools.
//! A served upstream tool is an ordinary registry tool whose handler forwards the call to the
//! upstream (`forward.rs`), so the whole pipeline (allow-lists, permissions, approvals, rate
//! limits, timeouts, output caps, audit) applies to it. A tool that was never approved, or
//! whose definition changed since it was approved, is withheld (`Registry::withhold`): in no
//! list or export, and a call to it is refused `unavailable` with the reason, until a person
//! approves it ([`Servers::approve`]).
//!
//! When servers start: tools must be listable before anything calls them, so at startup the
//! tools pinned in the store are registered (approved ones) or withheld (the others) from
//! their stored definitions, without starting anything (`load.rs`); the server starts on the
//! first call, and that call waits until the tools were listed and checked against their pins
//! (so a definition changed while toolgate was down is quarantined before any call reaches
//! it). A server with nothing pinned yet (first sight) starts at once, so its tools can be
//! reviewed, and so does an `eager` one. Every listing (start, restart,
//! `notifications/tools/list_changed`) goes through `listing.rs`.
//!
//! The use cases the front-ends offer are the methods of [`Servers`] (`ops.rs`); what they
//! answer are the views of [`views`].

mod forward;
mod listing;
mod load;
mod ops;
mod spawner;
mod state;
pub mod views;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;
use toolgate_core::{Permission, Principal, Registry};
use toolgate_gateway::upstream::Connector;
use toolgate_store::Store;

use crate::events::EventHub;
pub use load::Loaded;
pub use ops::Manager;
pub(crate) use spawner::NoStdio;
pub use spawner::SandboxSpawner;
use state::Server;

/// The permission managing servers needs: adding, removing, restarting them and approving
/// their tools.
pub const MANAGE_PERMISSION: &str = "toolgate.servers.manage";

/// Whether `principal` may manage servers ([`MANAGE_PERMISSION`]).
pub fn may_manage(principal: &Principal) -> bool {
    Permission::parse(MANAGE_PERMISSION).is_ok_and(|p| principal.holds(&p))
}

/// Every upstream server of the runtime. Cheap to clone (a shared handle).
#[derive(Clone)]
pub struct Servers {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    registry: Arc<Registry>,
    hub: EventHub,
    connector: Connector,
    /// Fires when the runtime stops: watchers end.
    stop: CancellationToken,
    /// Every server by name.
    servers: Mutex<BTreeMap<String, Server>>,
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servers")
            .field("servers", &self.lock().keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Servers {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Server>> {
        self.inner
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes a `server` event: a tool of `server` changed status (approved, withheld).
    fn publish(&self, server: &str, tool: &views::ServerToolView, by: Option<&str>) {
        let mut data = serde_json::json!({
            "server": server,
            "tool": tool,
        });
        if let Some(by) = by {
            data["by"] = serde_json::json!(by);
        }
        self.inner.hub.publish_event(crate::events::HubEvent {
            name: "server",
            tool: tool.name.clone().unwrap_or_default(),
            data: Arc::new(data),
        });
    }
}

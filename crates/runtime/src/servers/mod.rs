//! Upstream MCP servers as one more source of tools in the runtime (issue 20).
//!
//! [`Servers`] holds every server entry (the config file's `[servers]` and the store's) with
//! its state and the state of each of its tools. A served upstream tool is an ordinary
//! registry tool whose handler forwards the call to the upstream, so the whole pipeline
//! (allow-lists, permissions, approvals, rate limits, timeouts, output caps, audit) applies.
//! A tool that was never approved, or whose definition changed since it was approved, is
//! withheld from the registry (`Registry::withhold`): in no list or export, and a call to it is
//! refused `unavailable` with the reason, until a person approves it ([`Servers::approve`]).
//!
//! The use cases the front-ends offer are the methods of [`Servers`] (`ops.rs`); what they
//! answer are the views of [`views`].

mod ops;
mod state;
pub mod views;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use toolgate_core::{Permission, Principal, Registry};

use crate::events::EventHub;
pub use ops::Manager;
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
    registry: Arc<Registry>,
    hub: EventHub,
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
    /// The servers of a runtime over `store` and `registry`, publishing to `hub`; none yet.
    pub(crate) fn new(registry: Arc<Registry>, hub: EventHub) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry,
                hub,
                servers: Mutex::new(BTreeMap::new()),
            }),
        }
    }

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

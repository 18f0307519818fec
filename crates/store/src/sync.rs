//! Keeping a registry in step with the store: stored definitions join it at start and after
//! every change, including changes made by other processes or instances.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use toolgate_core::ErrorChain;
use toolgate_core::{CancellationToken, CoreError, Registry};

use crate::Store;
use crate::error::StoreError;
use crate::events::{EventKind, StoredEvent};

/// How often the sync task catches up by event id even without a notification (SQLite has no
/// cross-process notifications; PostgreSQL's may be missed while reconnecting).
pub const SYNC_INTERVAL: Duration = Duration::from_secs(1);

impl Store {
    /// Registers every stored definition in `registry` (dependencies first, whatever the order)
    /// and returns the id of the newest event, the point to follow changes from.
    pub async fn load_into(&self, registry: &Registry) -> Result<i64, StoreError> {
        let last = self.latest_event_id().await?;
        let definitions: Vec<_> = self
            .definitions()
            .await?
            .into_iter()
            .map(|d| d.definition)
            // Already there, unchanged (the caller loaded it before): nothing to do.
            .filter(|d| {
                registry
                    .get(&d.name)
                    .is_none_or(|t| t.spec().definition() != d)
            })
            .collect();
        let names: Vec<String> = definitions.iter().map(|d| d.name.clone()).collect();
        for (name, outcome) in names.iter().zip(registry.register_each(definitions)) {
            if let Err(e) = outcome {
                tracing::warn!(tool = %name, error = %ErrorChain(&e), "a stored definition could not join the registry");
            }
        }
        Ok(last)
    }

    /// Follows definition events from `after_id` and applies them to `registry` until `stop`
    /// fires: created and updated definitions are (re)registered, deleted ones removed.
    pub fn keep_in_sync(
        &self,
        registry: Arc<Registry>,
        after_id: i64,
        stop: CancellationToken,
    ) -> JoinHandle<()> {
        self.keep_in_sync_with(registry, after_id, stop, |_| {})
    }

    /// [`Store::keep_in_sync`], also handing every event, once applied, to `on_event` (a
    /// server's event stream, say), so one follower serves both.
    pub fn keep_in_sync_with(
        &self,
        registry: Arc<Registry>,
        after_id: i64,
        stop: CancellationToken,
        on_event: impl Fn(&StoredEvent) + Send + Sync + 'static,
    ) -> JoinHandle<()> {
        let store = self.clone();
        let mut events = store.subscribe();
        tokio::spawn(async move {
            let mut last = after_id;
            loop {
                match store.apply_events(&registry, last, &on_event).await {
                    Ok(newest) => last = newest,
                    Err(e) => {
                        tracing::warn!(error = %ErrorChain(&e), "registry sync could not read events")
                    }
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    received = events.recv() => {
                        if matches!(received, Err(RecvError::Closed)) {
                            events = store.subscribe();
                        }
                    }
                    () = tokio::time::sleep(SYNC_INTERVAL) => {}
                }
            }
        })
    }

    /// Applies the events after `after_id`; returns the newest id seen.
    async fn apply_events(
        &self,
        registry: &Registry,
        after_id: i64,
        on_event: &(impl Fn(&StoredEvent) + Sync),
    ) -> Result<i64, StoreError> {
        let mut last = after_id;
        loop {
            let batch = self.events(last, 500).await?;
            let Some(newest) = batch.last().map(|e| e.id) else {
                return Ok(last);
            };
            for event in &batch {
                match event.kind {
                    EventKind::Created | EventKind::Updated => {
                        if let Some(stored) = self.definition(&event.tool).await? {
                            apply_definition(registry, stored.definition);
                        }
                    }
                    EventKind::Deleted => match registry.remove(&event.tool) {
                        Ok(_) | Err(CoreError::NotFound(_)) => {}
                        Err(e) => {
                            tracing::warn!(tool = %event.tool, error = %ErrorChain(&e), "a deleted definition stays in the registry")
                        }
                    },
                    // Validation and the MCP gateway's events change no stored definition; the
                    // gateway follows its own through `on_event`.
                    EventKind::Validated
                    | EventKind::ServerAdded
                    | EventKind::ServerUpdated
                    | EventKind::ServerRemoved
                    | EventKind::PinPending
                    | EventKind::PinApproved
                    | EventKind::Quarantined
                    | EventKind::PinRestored => {}
                }
                on_event(event);
            }
            last = newest;
        }
    }

    async fn latest_event_id(&self) -> Result<i64, StoreError> {
        let mut last = 0;
        loop {
            let batch = self.events(last, 500).await?;
            match batch.last() {
                Some(e) => last = e.id,
                None => return Ok(last),
            }
        }
    }
}

/// Registers or replaces one definition; the registry's current version wins ties.
fn apply_definition(registry: &Registry, definition: toolgate_core::ToolDefinition) {
    let name = definition.name.clone();
    let same = registry
        .get(&name)
        .is_some_and(|t| t.spec().definition() == &definition);
    if same {
        return;
    }
    let outcome = if registry.get(&name).is_some() {
        registry.replace_definition(definition)
    } else {
        registry.register_definition(definition)
    };
    if let Err(e) = outcome {
        tracing::warn!(tool = %name, error = %ErrorChain(&e), "a stored definition could not join the registry");
    }
}

//! The event hub behind `GET /v1/events`: definition events read from the store by the registry
//! sync (so changes made by the CLI or another instance appear too) and a summary of every
//! finished call.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use toolgate_core::{BoxFuture, CallObserver, CallRecord};
use toolgate_store::StoredEvent;

/// How many events a slow SSE client may fall behind before it misses some.
const BACKLOG: usize = 1024;

/// One event as sent to SSE clients: its SSE `event` name, the tool it concerns and its data.
#[derive(Clone, Debug)]
pub struct HubEvent {
    /// `definition`, `call` or `approval`.
    pub name: &'static str,
    pub tool: String,
    pub data: Arc<Value>,
}

/// Fans events out to every subscriber.
#[derive(Clone, Debug)]
pub struct EventHub {
    sender: broadcast::Sender<HubEvent>,
}

impl Default for EventHub {
    fn default() -> Self {
        Self::new()
    }
}

impl EventHub {
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(BACKLOG);
        Self { sender }
    }

    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.sender.subscribe()
    }

    fn publish(&self, event: HubEvent) {
        // No subscribers is fine.
        let _ = self.sender.send(event);
    }

    /// Publishes any event (used for `approval` events).
    pub fn publish_event(&self, event: HubEvent) {
        self.publish(event);
    }

    /// Publishes a definition event read from the store (see [`crate::Gateway::start_sync`]).
    pub fn publish_definition(&self, event: &StoredEvent) {
        if self.sender.receiver_count() == 0 {
            return;
        }
        self.publish(HubEvent {
            name: "definition",
            tool: event.tool.clone(),
            data: Arc::new(serde_json::to_value(event).unwrap_or(Value::Null)),
        });
    }
}

impl CallObserver for EventHub {
    fn on_call<'a>(&'a self, record: &'a CallRecord<'a>) -> BoxFuture<'a, ()> {
        if self.sender.receiver_count() > 0 {
            let r = record.result;
            let mut data = json!({
                "callId": r.call_id,
                "tool": r.tool,
                "principal": record.principal.id.as_str(),
                "fetchedAt": r.fetched_at_string(),
                "attempts": r.attempts,
                "durationMs": r.duration_ms,
            });
            if let Some(kind) = r.error_kind() {
                data["errorKind"] = json!(kind);
            }
            self.publish(HubEvent {
                name: "call",
                tool: r.tool.clone(),
                data: Arc::new(data),
            });
        }
        Box::pin(async {})
    }
}

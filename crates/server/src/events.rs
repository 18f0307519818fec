//! The event hub behind `GET /v1/events`: definition events read from the store (so changes
//! made by the CLI or another instance appear too) and a summary of every finished call.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use toolgate_core::{BoxFuture, CallObserver, CallRecord, CancellationToken};
use toolgate_store::{SYNC_INTERVAL, Store};

/// How many events a slow SSE client may fall behind before it misses some.
const BACKLOG: usize = 1024;

/// One event as sent to SSE clients: its SSE `event` name, the tool it concerns and its data.
#[derive(Clone, Debug)]
pub struct HubEvent {
    /// `definition` or `call`.
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

    /// Follows the store's definition events after `after_id` until `stop` fires: on every
    /// in-process or NOTIFY'd event at once, and every second for other processes.
    pub fn follow_store(
        &self,
        store: Store,
        after_id: i64,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        let mut wake = store.subscribe();
        tokio::spawn(async move {
            let mut last = after_id;
            loop {
                loop {
                    match store.events(last, 500).await {
                        Ok(batch) if !batch.is_empty() => {
                            for event in batch {
                                last = event.id;
                                let tool = event.tool.clone();
                                let data = serde_json::to_value(&event).unwrap_or(Value::Null);
                                hub.publish(HubEvent {
                                    name: "definition",
                                    tool,
                                    data: Arc::new(data),
                                });
                            }
                        }
                        Ok(_) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "event hub could not read events");
                            break;
                        }
                    }
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    received = wake.recv() => {
                        if matches!(received, Err(RecvError::Closed)) {
                            wake = store.subscribe();
                        }
                    }
                    () = tokio::time::sleep(SYNC_INTERVAL) => {}
                }
            }
        })
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

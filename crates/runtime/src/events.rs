//! The event hub (served as `GET /v1/events` by the server, which does the SSE framing):
//! definition events read from the store by the registry
//! sync (so changes made by the CLI or another instance appear too), a summary of every
//! finished call, and approval events — published by this process as it changes an approval
//! and by the approval follower for changes read from the store (made anywhere), each
//! (approval, status) once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use toolgate_core::{BoxFuture, CallObserver, CallRecord};
use toolgate_store::{Approval, ApprovalStatus, StoredEvent};

/// How many events a slow SSE client may fall behind before it misses some.
const BACKLOG: usize = 1024;

/// How many approvals the hub remembers the last published status of (oldest forgotten first).
/// Forgetting one costs at most a repeated event in a rare race, never a missed one.
const REMEMBERED_APPROVALS: usize = 4096;

/// One event as sent to SSE clients: its SSE `event` name, the tool it concerns and its data.
#[derive(Clone, Debug)]
pub struct HubEvent {
    /// `definition`, `call`, `approval` or `server` (a tool of an upstream server approved or
    /// withheld).
    pub name: &'static str,
    /// The tool the event concerns.
    pub tool: String,
    /// The event's JSON data.
    pub data: Arc<Value>,
}

/// Fans events out to every subscriber.
#[derive(Clone, Debug)]
pub struct EventHub {
    sender: broadcast::Sender<HubEvent>,
    /// How far each recently published approval has got, shared by every publishing path.
    approvals: Arc<Mutex<Published>>,
}

/// The furthest status published per approval id, bounded (oldest id forgotten first).
#[derive(Debug, Default)]
struct Published {
    stage: HashMap<String, u8>,
    order: VecDeque<String>,
}

impl Published {
    /// Records `status` for `id`; `false` when that status, or a later one, was published
    /// already (a repeat, or a stale read of an approval that has moved on).
    fn advance(&mut self, id: &str, status: ApprovalStatus) -> bool {
        let stage = stage(status);
        if let Some(seen) = self.stage.get_mut(id) {
            if *seen >= stage {
                return false;
            }
            *seen = stage;
            return true;
        }
        while self.order.len() >= REMEMBERED_APPROVALS {
            if let Some(old) = self.order.pop_front() {
                self.stage.remove(&old);
            }
        }
        self.stage.insert(id.to_owned(), stage);
        self.order.push_back(id.to_owned());
        true
    }
}

/// How far along its life an approval with `status` is. Statuses only ever move to a later
/// stage (`pending → approved | denied | expired`, `approved → running → executed |
/// indeterminate`), so a status at or before the last published stage is old news.
fn stage(status: ApprovalStatus) -> u8 {
    match status {
        ApprovalStatus::Pending => 0,
        ApprovalStatus::Approved | ApprovalStatus::Denied | ApprovalStatus::Expired => 1,
        ApprovalStatus::Running => 2,
        ApprovalStatus::Executed | ApprovalStatus::Indeterminate => 3,
    }
}

impl Default for EventHub {
    fn default() -> Self {
        Self::new()
    }
}

impl EventHub {
    /// A hub with no subscribers.
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(BACKLOG);
        Self {
            sender,
            approvals: Arc::default(),
        }
    }

    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.sender.subscribe()
    }

    fn publish(&self, event: HubEvent) {
        // No subscribers is fine.
        let _ = self.sender.send(event);
    }

    /// Publishes any event as it is (approvals go through [`EventHub::publish_approval`]).
    pub fn publish_event(&self, event: HubEvent) {
        self.publish(event);
    }

    /// Publishes the `approval` event of `approval` unless its status (or a later one) was
    /// published already — by this process as it made the change, or by the follower that
    /// reads changes from the store. Returns whether it was published.
    pub fn publish_approval(&self, approval: &Approval) -> bool {
        let event = crate::approvals::event(approval);
        // Sent under the lock, so subscribers get an approval's statuses in order.
        let mut published = self.published();
        if !published.advance(&approval.id, approval.status) {
            return false;
        }
        self.publish(event);
        drop(published);
        true
    }

    fn published(&self) -> MutexGuard<'_, Published> {
        self.approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes a definition event read from the store (see [`crate::Runtime::start_sync`]).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_approval_status_is_published_once_and_never_backwards() {
        let mut p = Published::default();
        assert!(p.advance("a", ApprovalStatus::Pending));
        assert!(!p.advance("a", ApprovalStatus::Pending));
        assert!(p.advance("a", ApprovalStatus::Approved));
        assert!(p.advance("a", ApprovalStatus::Running));
        // Once it runs, a stale read (approved, pending) is old news.
        assert!(!p.advance("a", ApprovalStatus::Approved));
        assert!(!p.advance("a", ApprovalStatus::Pending));
        assert!(p.advance("a", ApprovalStatus::Executed));
        assert!(!p.advance("a", ApprovalStatus::Executed));
        // A status first seen late (the follower missed the earlier ones) is published.
        assert!(p.advance("b", ApprovalStatus::Denied));
    }

    #[test]
    fn the_memory_of_published_approvals_is_bounded() {
        let mut p = Published::default();
        for i in 0..REMEMBERED_APPROVALS + 10 {
            assert!(p.advance(&format!("a{i}"), ApprovalStatus::Pending));
        }
        assert_eq!(p.stage.len(), REMEMBERED_APPROVALS);
        assert_eq!(p.order.len(), REMEMBERED_APPROVALS);
        // The oldest were forgotten (a repeat costs one event, never a missed one).
        assert!(p.advance("a0", ApprovalStatus::Pending));
        assert!(!p.advance(
            &format!("a{}", REMEMBERED_APPROVALS + 9),
            ApprovalStatus::Pending
        ));
    }
}

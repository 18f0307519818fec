//! Definition events (`docs/tool-model.md#definition-events`): written in the same transaction as
//! the change, published in-process after commit and, on PostgreSQL, announced to other instances
//! with NOTIFY.

use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::broadcast;
use toolgate_core::Category;
use toolgate_core::ErrorChain;

use crate::error::StoreError;
use crate::{LOCK_DEFINITIONS, Store, from_json, on_pool, parse_ts, write_tx};

/// What happened to a definition, or (the MCP gateway's events, `tool` being the server or
/// `SERVER__TOOL`, the detail naming both) to an upstream server or one of its tools' pins.
/// Definition sync acts on the definition kinds only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A custom definition was added.
    Created,
    /// A custom definition was replaced by a new version.
    Updated,
    /// A custom definition was removed.
    Deleted,
    /// A definition passed validation (CLI or REST).
    Validated,
    /// An upstream server entry was added to the store (`tool` is the server's name; detail
    /// `{server}`).
    ServerAdded,
    /// A stored upstream server entry was replaced (`tool` is the server's name; detail
    /// `{server}`).
    ServerUpdated,
    /// A stored upstream server entry was removed with its pins (`tool` is the server's name;
    /// detail `{server, pinsRemoved}`).
    ServerRemoved,
    /// An upstream tool's definition awaits review: a new tool, or a newer definition of one
    /// never approved (detail `{server, tool, hash, previousHash?}`).
    PinPending,
    /// An upstream tool's definition was approved, by a person or, for a new tool of a server
    /// that auto-approves, by `toolgate` (detail `{server, tool, hash, previousHash?, auto?}`).
    PinApproved,
    /// An approved upstream tool showed a different definition: it is held until a person
    /// approves the new one (detail `{server, tool, approvedHash, hash}`).
    Quarantined,
    /// A quarantined upstream tool showed its approved definition again: released, the
    /// unreviewed definition dropped (detail `{server, tool, hash, droppedHash}`).
    PinRestored,
}

impl EventKind {
    /// The stored (and serialized) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Deleted => "deleted",
            Self::Validated => "validated",
            Self::ServerAdded => "server_added",
            Self::ServerUpdated => "server_updated",
            Self::ServerRemoved => "server_removed",
            Self::PinPending => "pin_pending",
            Self::PinApproved => "pin_approved",
            Self::Quarantined => "quarantined",
            Self::PinRestored => "pin_restored",
        }
    }

    /// Every kind, definition events first.
    pub const ALL: [Self; 11] = [
        Self::Created,
        Self::Updated,
        Self::Deleted,
        Self::Validated,
        Self::ServerAdded,
        Self::ServerUpdated,
        Self::ServerRemoved,
        Self::PinPending,
        Self::PinApproved,
        Self::Quarantined,
        Self::PinRestored,
    ];

    /// Whether the event is about a custom definition (`created`, `updated`, `deleted`,
    /// `validated`) rather than the MCP gateway.
    pub fn is_definition(self) -> bool {
        matches!(
            self,
            Self::Created | Self::Updated | Self::Deleted | Self::Validated
        )
    }

    fn parse(raw: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == raw)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown event kind {raw:?}")))
    }
}

/// One stored event. Ids increase in commit order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    /// The event's id: a gap-free cursor in commit order.
    pub id: i64,
    /// What happened.
    pub kind: EventKind,
    /// The tool it happened to.
    pub tool: String,
    /// Top-level definition fields that changed (`updated` only).
    pub changed_fields: Vec<String>,
    /// Who did it.
    pub actor: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Extra facts: `version` and `definitionHash` for created/updated/deleted; `category`,
    /// `parameterCount` and `durationMs` for validated; the server, the upstream tool and the
    /// hashes for the gateway's events (see [`EventKind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

/// An event about to be written.
pub(crate) struct NewEvent<'a> {
    pub kind: EventKind,
    pub tool: &'a str,
    pub changed_fields: &'a [String],
    pub actor: &'a str,
    pub detail: Option<Value>,
}

/// Inserts `$ev` (a [`NewEvent`]) through `$tx` and, on PostgreSQL, queues a NOTIFY that fires at
/// commit. Evaluates to the [`StoredEvent`].
macro_rules! insert_event {
    ($store:expr, $tx:ident, $ev:expr) => {{
        let ev: $crate::events::NewEvent<'_> = $ev;
        let at = $crate::now();
        let changed = serde_json::to_string(ev.changed_fields).unwrap_or_else(|_| "[]".into());
        let detail = ev.detail.as_ref().map(|d| d.to_string());
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO tool_events (kind, tool, changed_fields_json, actor, detail_json, at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(ev.kind.as_str())
        .bind(ev.tool)
        .bind(changed)
        .bind(ev.actor)
        .bind(detail)
        .bind($crate::ts(at))
        .fetch_one(&mut *$tx)
        .await
        .map_err($crate::StoreError::db("writing an event"))?;
        if $store.backend() == "postgres" {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(&$store.inner.channel)
                .bind(format!("{}:{id}", $store.inner.origin))
                .execute(&mut *$tx)
                .await
                .map_err($crate::StoreError::db("announcing an event"))?;
        }
        $crate::events::StoredEvent {
            id,
            kind: ev.kind,
            tool: ev.tool.to_owned(),
            changed_fields: ev.changed_fields.to_vec(),
            actor: ev.actor.to_owned(),
            at,
            detail: ev.detail,
        }
    }};
}
pub(crate) use insert_event;

const EVENT_COLUMNS: &str = "id, kind, tool, changed_fields_json, actor, detail_json, at";

macro_rules! event_from_row {
    ($row:expr) => {{
        use sqlx::Row;
        let row = &$row;
        let get = $crate::StoreError::db;
        let detail: Option<String> = row
            .try_get("detail_json")
            .map_err(get("reading an event"))?;
        let kind: String = row.try_get("kind").map_err(get("reading an event"))?;
        let changed: String = row
            .try_get("changed_fields_json")
            .map_err(get("reading an event"))?;
        let at: String = row.try_get("at").map_err(get("reading an event"))?;
        StoredEvent {
            id: row.try_get("id").map_err(get("reading an event"))?,
            kind: EventKind::parse(&kind)?,
            tool: row.try_get("tool").map_err(get("reading an event"))?,
            changed_fields: from_json(&changed, "event changed fields")?,
            actor: row.try_get("actor").map_err(get("reading an event"))?,
            at: parse_ts(&at)?,
            detail: match detail {
                Some(d) => Some(from_json(&d, "event detail")?),
                None => None,
            },
        }
    }};
}

impl Store {
    /// Events with an id greater than `after_id`, oldest first, at most `limit`.
    pub async fn events(&self, after_id: i64, limit: u32) -> Result<Vec<StoredEvent>, StoreError> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {EVENT_COLUMNS} FROM tool_events WHERE id > $1 ORDER BY id LIMIT $2"
        ));
        on_pool!(self, p => {
            let rows = sqlx::query(sql)
                .bind(after_id)
                .bind(i64::from(limit))
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading events"))?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(event_from_row!(row));
            }
            Ok(out)
        })
    }

    /// Records that a definition passed validation (`docs/tool-model.md#definition-events`).
    pub async fn record_validated(
        &self,
        name: &str,
        category: Category,
        parameter_count: usize,
        duration: Duration,
    ) -> Result<StoredEvent, StoreError> {
        let detail = json!({
            "category": category.as_str(),
            "parameterCount": parameter_count,
            "durationMs": duration.as_secs_f64() * 1000.0,
        });
        let event = write_tx!(self, LOCK_DEFINITIONS, tx => {
            insert_event!(self, tx, NewEvent {
                kind: EventKind::Validated,
                tool: name,
                changed_fields: &[],
                actor: "system",
                detail: Some(detail),
            })
        });
        self.publish(&event);
        Ok(event)
    }

    /// Events as they happen: in this process after each commit and, on PostgreSQL, changes made
    /// by other instances (a LISTEN task starts with the first subscriber; await
    /// [`Store::listening`] to know it is active). A slow receiver gets `Lagged` and can catch up
    /// with [`Store::events`].
    pub fn subscribe(&self) -> broadcast::Receiver<StoredEvent> {
        let rx = self.inner.events.subscribe();
        if let crate::Pool::Postgres(pool) = &self.inner.pool
            && !self.listener_flag().swap(true, Ordering::SeqCst)
        {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(listen(
                        pool.clone(),
                        self.inner.channel.clone(),
                        self.inner.origin.clone(),
                        self.inner.events.clone(),
                        self.inner.listening.clone(),
                        self.inner.shutdown.clone(),
                    ));
                }
                Err(_) => {
                    tracing::warn!(
                        "Store::subscribe outside a tokio runtime: changes by other instances will not be seen"
                    );
                    self.mark_listener(false);
                }
            }
        }
        rx
    }

    /// Waits until this instance listens for other instances' changes (PostgreSQL, after
    /// [`Store::subscribe`]); returns at once on SQLite, where events are in-process only. Waits
    /// as long as the server cannot be reached: wrap it in a timeout.
    pub async fn listening(&self) {
        if self.backend() != "postgres" {
            return;
        }
        let mut rx = self.inner.listening.subscribe();
        let _ = rx.wait_for(|l| *l).await;
    }

    pub(crate) fn publish(&self, event: &StoredEvent) {
        // An error only means nobody is subscribed.
        let _ = self.inner.events.send(event.clone());
    }
}

/// The LISTEN task: fetches each announced event by id and publishes it in-process. Notifications
/// missed while the connection was down are not replayed; read them with [`Store::events`].
async fn listen(
    pool: PgPool,
    channel: String,
    origin: String,
    events: broadcast::Sender<StoredEvent>,
    listening: tokio::sync::watch::Sender<bool>,
    shutdown: toolgate_core::CancellationToken,
) {
    let mut listener = loop {
        let attempt = async {
            let mut l = PgListener::connect_with(&pool).await?;
            l.listen(&channel).await?;
            Ok::<_, sqlx::Error>(l)
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            got = attempt => match got {
                Ok(l) => break l,
                Err(e) => {
                    tracing::warn!(error = %ErrorChain(&e), "cannot LISTEN for toolgate events; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    };
    listening.send_replace(true);
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {EVENT_COLUMNS} FROM tool_events WHERE id = $1"
    ));
    let sql: sqlx::SqlStr = sqlx::SqlSafeStr::into_sql_str(sql);
    loop {
        let note = tokio::select! {
            () = shutdown.cancelled() => break,
            note = listener.recv() => note,
        };
        let note = match note {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %ErrorChain(&e), "lost the toolgate event LISTEN connection; reconnecting");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let Some((from, id)) = note.payload().split_once(':') else {
            continue;
        };
        if from == origin {
            continue; // published in-process already
        }
        let Ok(id) = id.parse::<i64>() else { continue };
        let fetched: Result<Option<StoredEvent>, StoreError> = async {
            let row = sqlx::query(sql.clone())
                .bind(id)
                .fetch_optional(&pool)
                .await
                .map_err(StoreError::db("reading an announced event"))?;
            Ok(match row {
                Some(row) => Some(event_from_row!(row)),
                None => None,
            })
        }
        .await;
        match fetched {
            Ok(Some(event)) => {
                let _ = events.send(event);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %ErrorChain(&e), event = id, "cannot read an announced event")
            }
        }
    }
    listening.send_replace(false);
}

//! Definition events (seed 003 §11): written in the same transaction as the change, published
//! in-process after commit and, on PostgreSQL, announced to other instances with NOTIFY.

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

/// What happened to a definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    Created,
    Updated,
    Deleted,
    Validated,
}

impl EventKind {
    /// The stored (and serialized) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Deleted => "deleted",
            Self::Validated => "validated",
        }
    }

    fn parse(raw: &str) -> Result<Self, StoreError> {
        match raw {
            "created" => Ok(Self::Created),
            "updated" => Ok(Self::Updated),
            "deleted" => Ok(Self::Deleted),
            "validated" => Ok(Self::Validated),
            other => Err(StoreError::Corrupt(format!("unknown event kind {other:?}"))),
        }
    }
}

/// One stored event. Ids increase in commit order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    pub id: i64,
    pub kind: EventKind,
    pub tool: String,
    /// Top-level definition fields that changed (`updated` only).
    pub changed_fields: Vec<String>,
    pub actor: String,
    pub at: DateTime<Utc>,
    /// Extra facts: `version` and `definitionHash` for created/updated/deleted; `category`,
    /// `parameterCount` and `durationMs` for validated (seed 003's event records).
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

    /// Records that a definition passed validation (seed 003's `ToolDefinitionValidatedEvent`).
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

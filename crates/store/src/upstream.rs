//! The MCP gateway's state: upstream server entries added through the CLI, REST or the web UI
//! (config-file entries are not stored), and the pins of upstream tools, against tool poisoning
//! and rug pulls.
//!
//! A pin is kept per (server, upstream tool name), for config-file servers too: the approved
//! definition (JSON, as the gateway pins it) and its hash, and a definition awaiting review when
//! one that was not approved was seen. [`PinStatus`] says where it stands: `approved` (servable),
//! `pending` (a new tool, never approved) or `quarantined` (changed after approval; held until
//! a person approves the new definition). The store keeps strings and JSON: hashes are computed
//! by the gateway (`toolgate_gateway::pin::hash`), entries are its `ServerEntry` as JSON.
//!
//! Every status change is made in a write transaction under the lock that serializes events
//! (SQLite `BEGIN IMMEDIATE`; PostgreSQL the advisory lock of definition events), together with
//! its event, so when several instances see the same change at once exactly one of them
//! quarantines the tool and writes the one `quarantined` event; the others find it quarantined
//! already ([`Observed::Pending`]). Seeing the approved definition again (the common case) is one
//! conditional `UPDATE` of `last_seen`, without that lock.
//!
//! A tool the server stops listing ([`Store::forget_missing`]) keeps its approved record, marked
//! not present, so the same definition coming back needs no new review (a different one is
//! quarantined as usual); a tool that was never approved is forgotten outright.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::StoreError;
use crate::events::{EventKind, NewEvent, StoredEvent, insert_event};
use crate::{LOCK_DEFINITIONS, Store, from_json, now, on_pool, parse_ts, ts, write_tx};

/// Longest server or upstream tool name the store keeps.
const MAX_NAME_CHARS: usize = 256;
/// Who approves new tools of a server that auto-approves them, and writes what the gateway saw.
const GATEWAY_ACTOR: &str = "toolgate";

/// Where an upstream tool's pin stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinStatus {
    /// The definition the server shows is the approved one: the tool is served.
    Approved,
    /// A new tool awaiting review: nothing of it was ever approved; not served.
    Pending,
    /// Changed after approval: the new definition awaits review; not served.
    Quarantined,
}

impl PinStatus {
    /// Every status.
    pub const ALL: [Self; 3] = [Self::Approved, Self::Pending, Self::Quarantined];

    /// The snake_case name stored and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Pending => "pending",
            Self::Quarantined => "quarantined",
        }
    }
}

impl fmt::Display for PinStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PinStatus {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "Unknown pin status {s:?}; use one of {}",
                    Self::ALL.map(Self::as_str).join(", ")
                ))
            })
    }
}

/// The pin of one upstream tool.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The upstream server's name.
    pub server: String,
    /// The upstream's own name for the tool.
    pub tool: String,
    /// Where it stands.
    pub status: PinStatus,
    /// Hash of the approved definition (`None` while `pending`).
    pub approved_hash: Option<String>,
    /// The approved definition.
    pub approved: Option<Value>,
    /// When it was approved.
    pub approved_at: Option<DateTime<Utc>>,
    /// Who approved it (`toolgate` for a new tool of a server that auto-approves).
    pub approved_by: Option<String>,
    /// Hash of the definition awaiting review (`None` while `approved`).
    pub pending_hash: Option<String>,
    /// The definition awaiting review.
    pub pending: Option<Value>,
    /// When that definition was first seen.
    pub pending_since: Option<DateTime<Utc>>,
    /// Whether the server listed the tool the last time its tools were read.
    pub present: bool,
    /// When the tool was first seen.
    pub first_seen: DateTime<Utc>,
    /// When the tool was last seen.
    pub last_seen: DateTime<Utc>,
}

impl Pin {
    /// Whether the tool may be served: its current definition is the approved one.
    pub fn servable(&self) -> bool {
        self.status == PinStatus::Approved
    }
}

/// What [`Store::observe_tool`] found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Observed {
    /// First sight of the tool: approved at once when the caller auto-approves (event
    /// `pin_approved` by `toolgate`), else pending (event `pin_pending`).
    New {
        /// Whether it was approved at once.
        approved: bool,
        /// The pin as it is now.
        pin: Pin,
    },
    /// The approved definition, as before (only `last_seen` was touched).
    Unchanged {
        /// The pin as it is now.
        pin: Pin,
    },
    /// A definition differing from the approved one, seen for the first time: the tool is now
    /// quarantined with it (event `quarantined`). Only one caller gets this for one change,
    /// whatever the number of instances seeing it at once; write the audit entry
    /// ([`Store::audit_gateway_event`]) and withhold the tool.
    Changed {
        /// Hash of the approved definition.
        approved_hash: String,
        /// The approved definition (to diff against the new one).
        approved: Value,
        /// The pin as it is now (`pending` holds the new definition).
        pin: Pin,
    },
    /// The definition already awaiting review (a pending or quarantined tool seen again): nothing
    /// was written but `last_seen`, no event.
    Pending {
        /// The pin as it is now.
        pin: Pin,
    },
    /// A tool never approved showed a newer definition than the one awaiting review: that one
    /// awaits review instead (event `pin_pending`); an approval of the older hash is refused.
    Replaced {
        /// Hash of the definition that no longer awaits review.
        previous_hash: String,
        /// The pin as it is now.
        pin: Pin,
    },
    /// A quarantined tool showed its approved definition again: it is approved and servable
    /// again, the unreviewed definition dropped (event `pin_restored`).
    Restored {
        /// Hash of the dropped definition.
        dropped_hash: String,
        /// The pin as it is now.
        pin: Pin,
    },
}

impl Observed {
    /// The pin as it is after the observation.
    pub fn pin(&self) -> &Pin {
        match self {
            Self::New { pin, .. }
            | Self::Unchanged { pin }
            | Self::Changed { pin, .. }
            | Self::Pending { pin }
            | Self::Replaced { pin, .. }
            | Self::Restored { pin, .. } => pin,
        }
    }

    /// Whether the tool may be served.
    pub fn servable(&self) -> bool {
        self.pin().servable()
    }
}

/// One upstream server entry kept in the store.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredServer {
    /// The server's name.
    pub name: String,
    /// The entry as given (`${env:NAME}` references unexpanded).
    pub entry: Value,
    /// When it was first added.
    pub created_at: DateTime<Utc>,
    /// Who added it.
    pub created_by: String,
    /// When it was last written.
    pub updated_at: DateTime<Utc>,
    /// Who last wrote it.
    pub updated_by: String,
}

type PinRow = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    bool,
    String,
    String,
);

type ServerRow = (String, String, String, String, String, String);

/// `SELECT <pin columns> FROM gateway_pins <rest>`.
macro_rules! select_pins {
    ($rest:literal) => {
        concat!(
            "SELECT server, tool, status, approved_hash, approved_json, approved_at, approved_by, \
             pending_hash, pending_json, pending_since, present, first_seen, last_seen \
             FROM gateway_pins ",
            $rest
        )
    };
}

/// `SELECT <server columns> FROM gateway_servers <rest>`.
macro_rules! select_servers {
    ($rest:literal) => {
        concat!(
            "SELECT name, entry_json, created_at, created_by, updated_at, updated_by \
             FROM gateway_servers ",
            $rest
        )
    };
}

fn pin_from_row(row: PinRow) -> Result<Pin, StoreError> {
    let (
        server,
        tool,
        status,
        approved_hash,
        approved,
        approved_at,
        approved_by,
        pending_hash,
        pending,
        pending_since,
        present,
        first_seen,
        last_seen,
    ) = row;
    let opt_ts = |v: Option<String>| v.as_deref().map(parse_ts).transpose();
    let opt_json = |v: Option<String>| {
        v.as_deref()
            .map(|j| from_json(j, "pinned tool definition"))
            .transpose()
    };
    Ok(Pin {
        status: status
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("pin status {status:?}")))?,
        approved: opt_json(approved)?,
        approved_at: opt_ts(approved_at)?,
        pending: opt_json(pending)?,
        pending_since: opt_ts(pending_since)?,
        first_seen: parse_ts(&first_seen)?,
        last_seen: parse_ts(&last_seen)?,
        server,
        tool,
        approved_hash,
        approved_by,
        pending_hash,
        present,
    })
}

fn server_from_row(row: ServerRow) -> Result<StoredServer, StoreError> {
    let (name, entry, created_at, created_by, updated_at, updated_by) = row;
    Ok(StoredServer {
        entry: from_json(&entry, "server entry")?,
        created_at: parse_ts(&created_at)?,
        updated_at: parse_ts(&updated_at)?,
        name,
        created_by,
        updated_by,
    })
}

/// Refuses an empty, overlong or control-character name.
fn check_name(what: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(StoreError::Invalid(format!(
            "Invalid {what} name {name:?}: use 1 to {MAX_NAME_CHARS} characters without control characters"
        )));
    }
    Ok(())
}

/// Refuses a hash that is not lower-case hex (the gateway's SHA-256).
fn check_hash(hash: &str) -> Result<(), StoreError> {
    if hash.is_empty()
        || hash.len() > 128
        || !hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(StoreError::Invalid(format!(
            "Invalid definition hash {hash:?}: expected lower-case hex (the gateway's SHA-256 of the tool's canonical definition)"
        )));
    }
    Ok(())
}

/// The first 12 characters of a hash, for messages.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The name events give a pin: the default toolgate name of an upstream tool.
fn event_tool(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

/// Sets `last_seen` and `present` of a pin through `$tx`.
macro_rules! touch {
    ($tx:ident, $at:expr, $server:expr, $tool:expr) => {{
        sqlx::query(
            "UPDATE gateway_pins SET last_seen = $1, present = TRUE WHERE server = $2 AND tool = $3",
        )
        .bind($at)
        .bind($server)
        .bind($tool)
        .execute(&mut *$tx)
        .await
        .map_err(StoreError::db("touching a pinned tool"))?;
    }};
}

/// Reads a pin that exists through `$tx`.
macro_rules! read_pin {
    ($tx:ident, $server:expr, $tool:expr) => {{
        let row: PinRow = sqlx::query_as(select_pins!("WHERE server = $1 AND tool = $2"))
            .bind($server)
            .bind($tool)
            .fetch_one(&mut *$tx)
            .await
            .map_err(StoreError::db("reading a pinned tool"))?;
        pin_from_row(row)?
    }};
}

/// Approves `$pin`'s definition awaiting review through `$tx` (by `$by` at `$at`) and writes
/// its `pin_approved` event; evaluates to the [`StoredEvent`].
macro_rules! approve {
    ($store:expr, $tx:ident, $pin:expr, $at:expr, $by:expr) => {{
        let pin: &Pin = $pin;
        let by: &str = $by;
        sqlx::query(
            "UPDATE gateway_pins SET status = 'approved', approved_hash = pending_hash, \
             approved_json = pending_json, approved_at = $1, approved_by = $2, pending_hash = NULL, \
             pending_json = NULL, pending_since = NULL WHERE server = $3 AND tool = $4",
        )
        .bind($at)
        .bind(by)
        .bind(&pin.server)
        .bind(&pin.tool)
        .execute(&mut *$tx)
        .await
        .map_err(StoreError::db("approving a tool's definition"))?;
        let etool = event_tool(&pin.server, &pin.tool);
        let event: StoredEvent = insert_event!($store, $tx, NewEvent {
            kind: EventKind::PinApproved,
            tool: &etool,
            changed_fields: &[],
            actor: by,
            detail: Some(json!({
                "server": pin.server,
                "tool": pin.tool,
                "hash": pin.pending_hash,
                "previousHash": pin.approved_hash,
            })),
        });
        event
    }};
}

fn pin_not_found(server: &str, tool: &str) -> StoreError {
    StoreError::NotFound(format!(
        "Server `{server}` has no tool `{tool}` on record (list its tools with `toolgate servers tools {server}`)"
    ))
}

impl Store {
    // ------------------------------------------------------------------------------------------
    // Server entries

    /// Adds or replaces the stored entry of server `name` (an entry made through the CLI, REST or
    /// the web UI; `entry` must be a JSON object), writing a `server_added` or `server_updated`
    /// event by `by`. Returns the entry as stored and whether it is new.
    pub async fn put_server(
        &self,
        name: &str,
        entry: &Value,
        by: &str,
    ) -> Result<(StoredServer, bool), StoreError> {
        self.write_server(name, entry, by, true).await
    }

    /// Adds the entry of server `name` like [`Store::put_server`], but refuses (`conflict`) when
    /// one is stored already: two people adding the same name at once do not overwrite each
    /// other.
    pub async fn add_server(
        &self,
        name: &str,
        entry: &Value,
        by: &str,
    ) -> Result<StoredServer, StoreError> {
        self.write_server(name, entry, by, false)
            .await
            .map(|(server, _)| server)
    }

    async fn write_server(
        &self,
        name: &str,
        entry: &Value,
        by: &str,
        replace: bool,
    ) -> Result<(StoredServer, bool), StoreError> {
        check_name("server", name)?;
        if !entry.is_object() {
            return Err(StoreError::Invalid(format!(
                "The entry of server `{name}` must be a JSON object (like {{\"command\": \"/usr/bin/npx\", \"args\": [...]}} or {{\"url\": \"https://...\"}})"
            )));
        }
        let json = entry.to_string();
        let at = ts(now());
        let (server, created, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let existing: Option<ServerRow> = sqlx::query_as(select_servers!("WHERE name = $1"))
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db("reading a server entry"))?;
            let created = existing.is_none();
            if !created && !replace {
                return Err(StoreError::GatewayState(format!(
                    "A server named `{name}` is already stored (choose another name, or remove it first with `toolgate servers rm {name}`)"
                )));
            }
            if created {
                sqlx::query(
                    "INSERT INTO gateway_servers (name, entry_json, created_at, created_by, updated_at, updated_by) \
                     VALUES ($1, $2, $3, $4, $3, $4)",
                )
                .bind(name)
                .bind(&json)
                .bind(&at)
                .bind(by)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("writing a server entry"))?;
            } else {
                sqlx::query(
                    "UPDATE gateway_servers SET entry_json = $1, updated_at = $2, updated_by = $3 WHERE name = $4",
                )
                .bind(&json)
                .bind(&at)
                .bind(by)
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("writing a server entry"))?;
            }
            let event = insert_event!(self, tx, NewEvent {
                kind: if created { EventKind::ServerAdded } else { EventKind::ServerUpdated },
                tool: name,
                changed_fields: &[],
                actor: by,
                detail: Some(json!({ "server": name })),
            });
            let row: ServerRow = sqlx::query_as(select_servers!("WHERE name = $1"))
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(StoreError::db("reading a server entry"))?;
            (server_from_row(row)?, created, event)
        });
        self.publish(&event);
        Ok((server, created))
    }

    /// The stored entry of server `name` (`None` for a server of the config file, or none).
    pub async fn server(&self, name: &str) -> Result<Option<StoredServer>, StoreError> {
        let row: Option<ServerRow> = on_pool!(self, p => {
            sqlx::query_as(select_servers!("WHERE name = $1"))
                .bind(name)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a server entry"))?
        });
        row.map(server_from_row).transpose()
    }

    /// Every stored server entry, by name.
    pub async fn servers(&self) -> Result<Vec<StoredServer>, StoreError> {
        let rows: Vec<ServerRow> = on_pool!(self, p => {
            sqlx::query_as(select_servers!("ORDER BY name"))
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading server entries"))?
        });
        rows.into_iter().map(server_from_row).collect()
    }

    /// Removes the stored entry of server `name` and every pin of its tools, in one transaction,
    /// writing a `server_removed` event by `by`. Returns the removed entry; `not_found` when no
    /// entry is stored (a config-file server is removed by editing the file; forget its pins
    /// with [`Store::remove_pins`]).
    pub async fn remove_server(&self, name: &str, by: &str) -> Result<StoredServer, StoreError> {
        let (server, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let existing: Option<ServerRow> = sqlx::query_as(select_servers!("WHERE name = $1"))
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db("reading a server entry"))?;
            let Some(existing) = existing else {
                return Err(StoreError::NotFound(format!(
                    "No server named `{name}` in the store (list them with `toolgate servers list`; servers of the config file are removed by editing it)"
                )));
            };
            let server = server_from_row(existing)?;
            let pins = sqlx::query("DELETE FROM gateway_pins WHERE server = $1")
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("removing a server's pins"))?
                .rows_affected();
            sqlx::query("DELETE FROM gateway_servers WHERE name = $1")
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("removing a server entry"))?;
            let event = insert_event!(self, tx, NewEvent {
                kind: EventKind::ServerRemoved,
                tool: name,
                changed_fields: &[],
                actor: by,
                detail: Some(json!({ "server": name, "pinsRemoved": pins })),
            });
            (server, event)
        });
        self.publish(&event);
        Ok(server)
    }

    // ------------------------------------------------------------------------------------------
    // Pins

    /// Records that server `server` lists tool `tool` with definition `definition` whose hash is
    /// `hash`, and says what that means (see [`Observed`]): atomically, so instances seeing the
    /// same listing at once agree. `auto_approve` approves a tool seen for the first time (the
    /// server's `auto_approve_new_tools`, or `servers add --approve` for a new server's first
    /// listing); it never approves a changed definition.
    pub async fn observe_tool(
        &self,
        server: &str,
        tool: &str,
        hash: &str,
        definition: &Value,
        auto_approve: bool,
    ) -> Result<Observed, StoreError> {
        check_name("server", server)?;
        check_name("upstream tool", tool)?;
        check_hash(hash)?;
        let at = ts(now());
        // The common case, without the write lock: the approved definition (or the one already
        // awaiting review) seen again. Touching it changes no status, so needs no event.
        let touched = on_pool!(self, p => {
            sqlx::query(
                "UPDATE gateway_pins SET last_seen = $1, present = TRUE \
                 WHERE server = $2 AND tool = $3 AND \
                 ((status = 'approved' AND approved_hash = $4) OR (status <> 'approved' AND pending_hash = $4))",
            )
            .bind(&at)
            .bind(server)
            .bind(tool)
            .bind(hash)
            .execute(p)
            .await
            .map_err(StoreError::db("touching a pinned tool"))?
            .rows_affected()
        });
        if touched > 0
            && let Some(pin) = self.pin(server, tool).await?
        {
            // Read after the touch: a change made meanwhile by another instance shows here, and
            // is then decided under the lock below.
            if pin.status == PinStatus::Approved && pin.approved_hash.as_deref() == Some(hash) {
                return Ok(Observed::Unchanged { pin });
            }
            if pin.status != PinStatus::Approved && pin.pending_hash.as_deref() == Some(hash) {
                return Ok(Observed::Pending { pin });
            }
        }
        let json = definition.to_string();
        let etool = event_tool(server, tool);
        let (outcome, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let row: Option<PinRow> = sqlx::query_as(select_pins!("WHERE server = $1 AND tool = $2"))
                .bind(server)
                .bind(tool)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db("reading a pinned tool"))?;
            let current = row.map(pin_from_row).transpose()?;
            // What to write: (kind of outcome, event to record).
            let (kind, event): (Step, Option<NewEvent<'_>>) = match &current {
                None => {
                    let status = if auto_approve { "approved" } else { "pending" };
                    sqlx::query(
                        "INSERT INTO gateway_pins (server, tool, status, approved_hash, approved_json, approved_at, approved_by, \
                         pending_hash, pending_json, pending_since, present, first_seen, last_seen) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, TRUE, $11, $11)",
                    )
                    .bind(server)
                    .bind(tool)
                    .bind(status)
                    .bind(auto_approve.then_some(hash))
                    .bind(auto_approve.then_some(json.as_str()))
                    .bind(auto_approve.then_some(at.as_str()))
                    .bind(auto_approve.then_some(GATEWAY_ACTOR))
                    .bind((!auto_approve).then_some(hash))
                    .bind((!auto_approve).then_some(json.as_str()))
                    .bind((!auto_approve).then_some(at.as_str()))
                    .bind(&at)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("recording a new tool"))?;
                    let event = if auto_approve {
                        NewEvent {
                            kind: EventKind::PinApproved,
                            tool: &etool,
                            changed_fields: &[],
                            actor: GATEWAY_ACTOR,
                            detail: Some(json!({
                                "server": server, "tool": tool, "hash": hash, "auto": true,
                            })),
                        }
                    } else {
                        NewEvent {
                            kind: EventKind::PinPending,
                            tool: &etool,
                            changed_fields: &[],
                            actor: GATEWAY_ACTOR,
                            detail: Some(json!({ "server": server, "tool": tool, "hash": hash })),
                        }
                    };
                    (Step::New, Some(event))
                }
                Some(pin) if pin.approved_hash.as_deref() == Some(hash) => {
                    sqlx::query(
                        "UPDATE gateway_pins SET status = 'approved', pending_hash = NULL, pending_json = NULL, \
                         pending_since = NULL, present = TRUE, last_seen = $1 WHERE server = $2 AND tool = $3",
                    )
                    .bind(&at)
                    .bind(server)
                    .bind(tool)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("updating a pinned tool"))?;
                    match &pin.pending_hash {
                        Some(dropped) => (
                            Step::Restored(dropped.clone()),
                            Some(NewEvent {
                                kind: EventKind::PinRestored,
                                tool: &etool,
                                changed_fields: &[],
                                actor: GATEWAY_ACTOR,
                                detail: Some(json!({
                                    "server": server, "tool": tool, "hash": hash, "droppedHash": dropped,
                                })),
                            }),
                        ),
                        None => (Step::Unchanged, None),
                    }
                }
                Some(pin) if pin.pending_hash.as_deref() == Some(hash) => {
                    touch!(tx, &at, server, tool);
                    (Step::Pending, None)
                }
                Some(pin) => {
                    sqlx::query(
                        "UPDATE gateway_pins SET status = $1, pending_hash = $2, pending_json = $3, \
                         pending_since = $4, present = TRUE, last_seen = $4 WHERE server = $5 AND tool = $6",
                    )
                    .bind(if pin.approved_hash.is_some() { "quarantined" } else { "pending" })
                    .bind(hash)
                    .bind(&json)
                    .bind(&at)
                    .bind(server)
                    .bind(tool)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("quarantining a changed tool"))?;
                    match (&pin.approved_hash, &pin.approved) {
                        (Some(approved_hash), Some(approved)) => (
                            Step::Changed(approved_hash.clone(), approved.clone()),
                            Some(NewEvent {
                                kind: EventKind::Quarantined,
                                tool: &etool,
                                changed_fields: &[],
                                actor: GATEWAY_ACTOR,
                                detail: Some(json!({
                                    "server": server, "tool": tool,
                                    "approvedHash": approved_hash, "hash": hash,
                                    "previousHash": pin.pending_hash,
                                })),
                            }),
                        ),
                        _ => {
                            let previous = pin.pending_hash.clone().unwrap_or_default();
                            let detail = json!({
                                "server": server, "tool": tool, "hash": hash, "previousHash": previous,
                            });
                            (
                                Step::Replaced(previous),
                                Some(NewEvent {
                                    kind: EventKind::PinPending,
                                    tool: &etool,
                                    changed_fields: &[],
                                    actor: GATEWAY_ACTOR,
                                    detail: Some(detail),
                                }),
                            )
                        }
                    }
                }
            };
            let event = match event {
                Some(ev) => Some(insert_event!(self, tx, ev)),
                None => None,
            };
            let row: PinRow = sqlx::query_as(select_pins!("WHERE server = $1 AND tool = $2"))
                .bind(server)
                .bind(tool)
                .fetch_one(&mut *tx)
                .await
                .map_err(StoreError::db("reading a pinned tool"))?;
            let pin = pin_from_row(row)?;
            let outcome = match kind {
                Step::New => Observed::New { approved: auto_approve, pin },
                Step::Unchanged => Observed::Unchanged { pin },
                Step::Pending => Observed::Pending { pin },
                Step::Restored(dropped_hash) => Observed::Restored { dropped_hash, pin },
                Step::Replaced(previous_hash) => Observed::Replaced { previous_hash, pin },
                Step::Changed(approved_hash, approved) => Observed::Changed { approved_hash, approved, pin },
            };
            (outcome, event)
        });
        if let Some(event) = &event {
            self.publish(event);
        }
        Ok(outcome)
    }

    /// Approves the definition of `server`'s tool `tool` awaiting review, provided its hash is
    /// `hash` (what the approver saw), writing a `pin_approved` event by `by`. Refused
    /// (`conflict`) when `hash` is not the definition awaiting review — it changed again
    /// meanwhile, or there is none; approving the approved definition again is a no-op.
    pub async fn approve_pin(
        &self,
        server: &str,
        tool: &str,
        hash: &str,
        by: &str,
    ) -> Result<Pin, StoreError> {
        let at = ts(now());
        let (pin, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let row: Option<PinRow> = sqlx::query_as(select_pins!("WHERE server = $1 AND tool = $2"))
                .bind(server)
                .bind(tool)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db("reading a pinned tool"))?;
            let Some(pin) = row.map(pin_from_row).transpose()? else {
                return Err(pin_not_found(server, tool));
            };
            match pin.pending_hash.as_deref() {
                Some(pending) if pending == hash => {
                    let event = approve!(self, tx, &pin, &at, by);
                    let pin = read_pin!(tx, server, tool);
                    (pin, Some(event))
                }
                None if pin.approved_hash.as_deref() == Some(hash) => (pin, None),
                Some(pending) if pin.approved_hash.as_deref() == Some(hash) => {
                    return Err(StoreError::GatewayState(format!(
                        "Definition {} of `{tool}` (server `{server}`) is already the approved one; the tool is held because the server now shows {}, which awaits review: review it (`toolgate servers tools {server}`) and approve {} to serve the tool again",
                        short(hash),
                        short(pending),
                        short(pending),
                    )));
                }
                Some(pending) => {
                    return Err(StoreError::GatewayState(format!(
                        "Definition {} of `{tool}` (server `{server}`) is not the one awaiting review, {}: the server changed it again since it was reviewed, or the hash is mistyped; review {} (`toolgate servers tools {server}`) and approve that one",
                        short(hash),
                        short(pending),
                        short(pending),
                    )));
                }
                None => {
                    return Err(StoreError::GatewayState(format!(
                        "Nothing of `{tool}` (server `{server}`) awaits review, and {} is not its approved definition ({}); list its tools with `toolgate servers tools {server}`",
                        short(hash),
                        pin.approved_hash.as_deref().map(short).unwrap_or("none"),
                    )));
                }
            }
        });
        if let Some(event) = &event {
            self.publish(event);
        }
        Ok(pin)
    }

    /// Approves every definition of `server`'s tools awaiting review (pending and quarantined
    /// tools alike), each as it stands at this moment, writing one `pin_approved` event each by
    /// `by`. Returns the pins approved.
    pub async fn approve_all(&self, server: &str, by: &str) -> Result<Vec<Pin>, StoreError> {
        let at = ts(now());
        let (pins, events) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let rows: Vec<PinRow> = sqlx::query_as(select_pins!(
                "WHERE server = $1 AND pending_hash IS NOT NULL ORDER BY tool"
            ))
            .bind(server)
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::db("reading pinned tools"))?;
            let mut pins = Vec::with_capacity(rows.len());
            let mut events = Vec::with_capacity(rows.len());
            for row in rows {
                let pin = pin_from_row(row)?;
                events.push(approve!(self, tx, &pin, &at, by));
                pins.push(read_pin!(tx, server, &pin.tool));
            }
            (pins, events)
        });
        for event in &events {
            self.publish(event);
        }
        Ok(pins)
    }

    /// The pins of `server`'s tools, by tool name (those no longer listed included, with
    /// `present` false).
    pub async fn pins(&self, server: &str) -> Result<Vec<Pin>, StoreError> {
        let rows: Vec<PinRow> = on_pool!(self, p => {
            sqlx::query_as(select_pins!("WHERE server = $1 ORDER BY tool"))
                .bind(server)
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading pinned tools"))?
        });
        rows.into_iter().map(pin_from_row).collect()
    }

    /// The pin of `server`'s tool `tool`, if it was ever seen.
    pub async fn pin(&self, server: &str, tool: &str) -> Result<Option<Pin>, StoreError> {
        let row: Option<PinRow> = on_pool!(self, p => {
            sqlx::query_as(select_pins!("WHERE server = $1 AND tool = $2"))
                .bind(server)
                .bind(tool)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a pinned tool"))?
        });
        row.map(pin_from_row).transpose()
    }

    /// After a complete listing of `server`'s tools (never after a failed one: every tool would
    /// look gone): the tools not in `present_tools` are marked not present when something of
    /// them was approved (the approved record stays: the same definition coming back is served
    /// without a new review; a definition awaiting review stays too), and forgotten when nothing
    /// was (a new tool that went away before review). Writes no event. Returns the names of the
    /// tools marked or forgotten now, by name.
    pub async fn forget_missing(
        &self,
        server: &str,
        present_tools: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let listed: HashSet<&str> = present_tools.iter().map(String::as_str).collect();
        let gone = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let rows: Vec<(String, Option<String>, bool)> = sqlx::query_as(
                "SELECT tool, approved_hash, present FROM gateway_pins WHERE server = $1 ORDER BY tool",
            )
            .bind(server)
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::db("reading pinned tools"))?;
            let mut gone = Vec::new();
            for (tool, approved_hash, present) in rows {
                if listed.contains(tool.as_str()) {
                    continue;
                }
                if approved_hash.is_none() {
                    sqlx::query("DELETE FROM gateway_pins WHERE server = $1 AND tool = $2")
                        .bind(server)
                        .bind(&tool)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::db("forgetting a tool"))?;
                } else if present {
                    sqlx::query("UPDATE gateway_pins SET present = FALSE WHERE server = $1 AND tool = $2")
                        .bind(server)
                        .bind(&tool)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::db("marking a tool missing"))?;
                } else {
                    continue;
                }
                gone.push(tool);
            }
            gone
        });
        Ok(gone)
    }

    /// Forgets every pin of `server`'s tools (a config-file server taken out of the file);
    /// returns how many. Its tools, if seen again, are new tools.
    pub async fn remove_pins(&self, server: &str) -> Result<u64, StoreError> {
        let removed = write_tx!(self, LOCK_DEFINITIONS, tx => {
            sqlx::query("DELETE FROM gateway_pins WHERE server = $1")
                .bind(server)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("removing a server's pins"))?
                .rows_affected()
        });
        Ok(removed)
    }
}

/// What [`Store::observe_tool`] decided under the lock, before the pin is read back.
enum Step {
    New,
    Unchanged,
    Pending,
    Restored(String),
    Replaced(String),
    Changed(String, Value),
}

#[cfg(test)]
mod tests {
    use sqlx::migrate::Migrator;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

    use super::*;

    #[test]
    fn statuses_read_back_and_unknown_ones_are_named() {
        for status in PinStatus::ALL {
            assert_eq!(status.as_str().parse::<PinStatus>().unwrap(), status);
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                json!(status.as_str())
            );
        }
        let e = "held".parse::<PinStatus>().unwrap_err();
        assert!(
            e.to_string().contains("approved, pending, quarantined"),
            "{e}"
        );
    }

    #[test]
    fn every_event_kind_reads_back_under_its_serialized_name() {
        for kind in EventKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
        }
    }

    /// SQLite cannot change a CHECK, so migration 9 rebuilds `tool_events`: its rows stay and
    /// its AUTOINCREMENT counter too, so an id is never handed out twice (a follower's cursor
    /// past a removed newest event must not miss the next one).
    #[tokio::test]
    async fn the_sqlite_rebuild_of_tool_events_keeps_rows_and_ids() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("t.db"))
            .create_if_missing(true);
        let pool = SqlitePool::connect_with(options).await.unwrap();
        let all = crate::migrations("sqlite");
        let before: Vec<_> = all.iter().filter(|m| m.version < 9).cloned().collect();
        Migrator::with_migrations(before).run(&pool).await.unwrap();
        for tool in ["a", "b", "c"] {
            sqlx::query(
                "INSERT INTO tool_events (kind, tool, actor, at) VALUES ('created', $1, 't', 'x')",
            )
            .bind(tool)
            .execute(&pool)
            .await
            .unwrap();
        }
        sqlx::query("DELETE FROM tool_events WHERE id = 3")
            .execute(&pool)
            .await
            .unwrap();
        let refused = sqlx::query(
            "INSERT INTO tool_events (kind, tool, actor, at) VALUES ('quarantined', 'q', 't', 'x')",
        )
        .execute(&pool)
        .await;
        assert!(refused.is_err(), "before 9 the gateway's kinds are refused");

        Migrator::with_migrations(all).run(&pool).await.unwrap();
        let rows: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT id, kind, tool FROM tool_events ORDER BY id")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert_eq!(
            rows,
            [
                (1, "created".into(), "a".into()),
                (2, "created".into(), "b".into())
            ]
        );
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO tool_events (kind, tool, actor, at) VALUES ('quarantined', 'q', 't', 'x') RETURNING id",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(id, 4, "id 3 was handed out before");
        let unknown = sqlx::query(
            "INSERT INTO tool_events (kind, tool, actor, at) VALUES ('nonsense', 'q', 't', 'x')",
        )
        .execute(&pool)
        .await;
        assert!(unknown.is_err(), "the kind is still checked");
        pool.close().await;
    }
}

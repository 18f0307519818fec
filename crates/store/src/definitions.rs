//! Custom tool definitions: one row per version, history kept, plan limits enforced atomically.
//!
//! Built-in tools are never stored (they live in code); callers refuse built-in names before
//! calling [`Store::insert_definition`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use toolgate_core::{ToolDefinition, ToolSpec, write_canonical};

use crate::error::StoreError;
use crate::events::{EventKind, NewEvent, insert_event};
use crate::tier::Tier;
use crate::{LOCK_DEFINITIONS, Store, from_json, now, on_pool, parse_ts, ts, write_tx};

/// One stored version of a custom definition.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredDefinition {
    /// The definition as stored.
    pub definition: ToolDefinition,
    /// 1 for a new tool; +1 per update. Re-adding a removed name continues after the highest
    /// earlier version, so `(name, version)` always names one row of the history.
    pub version: i64,
    /// Hex SHA-256 of the definition's canonical JSON (equals `ToolSpec::definition_hash`).
    pub definition_hash: String,
    /// When version 1 of this tool was created.
    pub created_at: DateTime<Utc>,
    /// When this version was written.
    pub updated_at: DateTime<Utc>,
    /// Who wrote this version.
    pub created_by: String,
    /// When the tool was removed (set on every version of a removed tool).
    pub deleted_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str =
    "id, version, definition_json, definition_hash, created_by, created_at, updated_at, deleted_at";
const LIVE: &str = "superseded_at IS NULL AND deleted_at IS NULL";

macro_rules! def_from_row {
    ($row:expr) => {{
        use sqlx::Row;
        let row = &$row;
        let get = $crate::StoreError::db;
        let json: String = row
            .try_get("definition_json")
            .map_err(get("reading a definition"))?;
        let created_at: String = row
            .try_get("created_at")
            .map_err(get("reading a definition"))?;
        let updated_at: String = row
            .try_get("updated_at")
            .map_err(get("reading a definition"))?;
        let deleted_at: Option<String> = row
            .try_get("deleted_at")
            .map_err(get("reading a definition"))?;
        let id: i64 = row.try_get("id").map_err(get("reading a definition"))?;
        (
            id,
            StoredDefinition {
                definition: from_json(&json, "stored definition")?,
                version: row
                    .try_get("version")
                    .map_err(get("reading a definition"))?,
                definition_hash: row
                    .try_get("definition_hash")
                    .map_err(get("reading a definition"))?,
                created_at: parse_ts(&created_at)?,
                updated_at: parse_ts(&updated_at)?,
                created_by: row
                    .try_get("created_by")
                    .map_err(get("reading a definition"))?,
                deleted_at: match deleted_at {
                    Some(d) => Some(parse_ts(&d)?),
                    None => None,
                },
            },
        )
    }};
}

/// Reads the live version of `$name` through `$tx`.
macro_rules! live_row {
    ($tx:ident, $name:expr) => {{
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM tool_definitions WHERE name = $1 AND {LIVE}"
        ));
        match sqlx::query(sql)
            .bind($name)
            .fetch_optional(&mut *$tx)
            .await
            .map_err(StoreError::db("reading a definition"))?
        {
            Some(row) => Some(def_from_row!(row)),
            None => None,
        }
    }};
}

/// Inserts one version row for `$spec` through `$tx`.
macro_rules! insert_version {
    ($tx:ident, $spec:expr, $version:expr, $actor:expr, $created_at:expr, $at:expr) => {{
        let spec: &ToolSpec = $spec;
        let row = Columns::of(spec);
        sqlx::query(
            "INSERT INTO tool_definitions (name, version, description, category, effect, consequence, \
             requires_confirmation, tags_json, parameters_json, output_schema_json, constraints_json, \
             required_permissions_json, metadata_json, run_json, semver, definition_json, \
             definition_hash, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
        )
        .bind(spec.name().as_str())
        .bind($version)
        .bind(spec.description().replace('\0', "\u{fffd}"))
        .bind(spec.category().as_str())
        .bind(spec.effect().as_str())
        .bind(spec.consequence().as_str())
        .bind(spec.requires_confirmation())
        .bind(row.tags)
        .bind(row.parameters)
        .bind(row.output_schema)
        .bind(row.constraints)
        .bind(row.permissions)
        .bind(row.metadata)
        .bind(row.run)
        .bind(spec.definition().version.clone())
        .bind(row.definition)
        .bind(spec.definition_hash())
        .bind($actor)
        .bind(ts($created_at))
        .bind(ts($at))
        .execute(&mut *$tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(ref d) if d.is_unique_violation() => {
                StoreError::Conflict(spec.name().as_str().to_owned())
            }
            e => StoreError::Database { action: "writing a definition", source: e },
        })?;
    }};
}

/// The queryable JSON columns of a definition row.
struct Columns {
    tags: String,
    parameters: Option<String>,
    output_schema: Option<String>,
    constraints: Option<String>,
    permissions: Option<String>,
    metadata: Option<String>,
    run: Option<String>,
    definition: String,
}

impl Columns {
    fn of(spec: &ToolSpec) -> Self {
        let def = spec.definition();
        let text = |v: Value| v.to_string();
        let value = serde_json::to_value(def).unwrap_or(Value::Null);
        let mut definition = String::new();
        write_canonical(&value, &mut definition);
        Self {
            tags: text(json!(def.tags)),
            parameters: (!def.parameters.is_empty()).then(|| text(json!(def.parameters))),
            output_schema: def.output_schema.as_ref().map(|s| s.to_string()),
            constraints: def.constraints.as_ref().map(|c| text(json!(c))),
            permissions: (!def.required_permissions.is_empty())
                .then(|| text(json!(def.required_permissions))),
            metadata: (!def.metadata.is_empty()).then(|| text(json!(def.metadata))),
            run: def.run.as_ref().map(|r| text(json!(r))),
            definition,
        }
    }
}

/// Top-level definition fields whose JSON differs (present in one and not the other included),
/// in the order they appear in the new definition, then fields only the old one had.
pub(crate) fn changed_fields(old: &ToolDefinition, new: &ToolDefinition) -> Vec<String> {
    let old = serde_json::to_value(old).unwrap_or(Value::Null);
    let new = serde_json::to_value(new).unwrap_or(Value::Null);
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return Vec::new();
    };
    let mut changed: Vec<String> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    changed.extend(old.keys().filter(|k| !new.contains_key(*k)).cloned());
    changed
}

impl Store {
    /// The live version of every custom definition, by name.
    pub async fn definitions(&self) -> Result<Vec<StoredDefinition>, StoreError> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM tool_definitions WHERE {LIVE} ORDER BY name"
        ));
        on_pool!(self, p => {
            let rows = sqlx::query(sql)
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading definitions"))?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(def_from_row!(row).1);
            }
            Ok(out)
        })
    }

    /// The live version of one custom definition.
    pub async fn definition(&self, name: &str) -> Result<Option<StoredDefinition>, StoreError> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM tool_definitions WHERE name = $1 AND {LIVE}"
        ));
        on_pool!(self, p => {
            match sqlx::query(sql)
                .bind(name)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a definition"))?
            {
                Some(row) => Ok(Some(def_from_row!(row).1)),
                None => Ok(None),
            }
        })
    }

    /// Every stored version of `name`, oldest first, including those of removed tools (they
    /// carry `deleted_at`). Empty when the name was never stored.
    pub async fn history(&self, name: &str) -> Result<Vec<StoredDefinition>, StoreError> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM tool_definitions WHERE name = $1 ORDER BY id"
        ));
        on_pool!(self, p => {
            let rows = sqlx::query(sql)
                .bind(name)
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading a definition's history"))?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(def_from_row!(row).1);
            }
            Ok(out)
        })
    }

    /// Stores a new custom definition and writes a `created` event, in one transaction. The
    /// version is 1 for a name never stored; a name that was removed continues its numbering.
    ///
    /// Errors: `Conflict` if a live definition has the name; `PlanLimit` if the plan's
    /// `max_custom_definitions` would be exceeded. The count and the insert happen under the
    /// store's write lock, so concurrent inserts (other processes or instances included) cannot
    /// both pass the limit. Built-in names must be refused by the caller.
    pub async fn insert_definition(
        &self,
        spec: &ToolSpec,
        actor: &str,
        plan: &Tier,
    ) -> Result<StoredDefinition, StoreError> {
        let name = spec.name().as_str();
        let count_sql = sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM tool_definitions WHERE {LIVE}"
        ));
        let (stored, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            if live_row!(tx, name).is_some() {
                return Err(StoreError::Conflict(name.to_owned()));
            }
            if let Some(limit) = plan.max_custom_definitions {
                let live: i64 = sqlx::query_scalar(count_sql)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::db("counting definitions"))?;
                if u64::try_from(live).unwrap_or(0) >= limit {
                    return Err(StoreError::PlanLimit {
                        plan: plan.name.clone(),
                        limit,
                        message: plan.limit_message(limit),
                    });
                }
            }
            let previous: Option<i64> =
                sqlx::query_scalar("SELECT MAX(version) FROM tool_definitions WHERE name = $1")
                    .bind(name)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::db("reading a definition's history"))?;
            let version = previous.unwrap_or(0) + 1;
            let at = now();
            insert_version!(tx, spec, version, actor, at, at);
            let event = insert_event!(self, tx, NewEvent {
                kind: EventKind::Created,
                tool: name,
                changed_fields: &[],
                actor,
                detail: Some(json!({
                    "version": version,
                    "definitionHash": spec.definition_hash(),
                    "category": spec.category().as_str(),
                })),
            });
            let stored = StoredDefinition {
                definition: spec.definition().clone(),
                version,
                definition_hash: spec.definition_hash().to_owned(),
                created_at: at,
                updated_at: at,
                created_by: actor.to_owned(),
                deleted_at: None,
            };
            (stored, event)
        });
        metrics::counter!(toolgate_core::telemetry::DEFINITIONS_CREATED).increment(1);
        self.publish(&event);
        Ok(stored)
    }

    /// Stores a new version of a live custom definition (the previous one stays in the history)
    /// and writes an `updated` event naming the changed top-level fields. Returns the new version
    /// and those fields. An update that changes nothing writes nothing and returns the current
    /// version with no fields. `NotFound` if no live definition has the name.
    pub async fn update_definition(
        &self,
        spec: &ToolSpec,
        actor: &str,
    ) -> Result<(StoredDefinition, Vec<String>), StoreError> {
        let name = spec.name().as_str();
        let (stored, changed, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let Some((old_id, old)) = live_row!(tx, name) else {
                return Err(StoreError::not_found(name));
            };
            let changed = changed_fields(&old.definition, spec.definition());
            if changed.is_empty() {
                (old, changed, None)
            } else {
                let at = now();
                sqlx::query("UPDATE tool_definitions SET superseded_at = $1 WHERE id = $2")
                    .bind(ts(at))
                    .bind(old_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("superseding a definition"))?;
                let version = old.version + 1;
                insert_version!(tx, spec, version, actor, old.created_at, at);
                let event = insert_event!(self, tx, NewEvent {
                    kind: EventKind::Updated,
                    tool: name,
                    changed_fields: &changed,
                    actor,
                    detail: Some(json!({
                        "version": version,
                        "definitionHash": spec.definition_hash(),
                    })),
                });
                let stored = StoredDefinition {
                    definition: spec.definition().clone(),
                    version,
                    definition_hash: spec.definition_hash().to_owned(),
                    created_at: old.created_at,
                    updated_at: at,
                    created_by: actor.to_owned(),
                    deleted_at: None,
                };
                (stored, changed, Some(event))
            }
        });
        if let Some(event) = event {
            self.publish(&event);
        }
        Ok((stored, changed))
    }

    /// Removes a live custom definition: every version of it gets `deleted_at` and stays in the
    /// history; writes a `deleted` event. Returns the removed live version. `NotFound` if absent.
    pub async fn delete_definition(
        &self,
        name: &str,
        actor: &str,
    ) -> Result<StoredDefinition, StoreError> {
        let (stored, event) = write_tx!(self, LOCK_DEFINITIONS, tx => {
            let Some((_, mut live)) = live_row!(tx, name) else {
                return Err(StoreError::not_found(name));
            };
            let at = now();
            sqlx::query("UPDATE tool_definitions SET deleted_at = $1 WHERE name = $2 AND deleted_at IS NULL")
                .bind(ts(at))
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("removing a definition"))?;
            let event = insert_event!(self, tx, NewEvent {
                kind: EventKind::Deleted,
                tool: name,
                changed_fields: &[],
                actor,
                detail: Some(json!({
                    "version": live.version,
                    "definitionHash": live.definition_hash,
                })),
            });
            live.deleted_at = Some(at);
            (live, event)
        });
        self.publish(&event);
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_fields_compare_top_level_keys() {
        let mut a = ToolDefinition::new("t", "A tool that does a thing for tests");
        a.tags = vec!["x".into()];
        let mut b = a.clone();
        assert!(changed_fields(&a, &b).is_empty());
        b.description = "Another description for the same tool".into();
        b.tags.clear();
        b.title = Some("T".into());
        assert_eq!(changed_fields(&a, &b), vec!["title", "description", "tags"]);
    }
}

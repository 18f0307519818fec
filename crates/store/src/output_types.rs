//! `validate_output`'s named output types kept in the store (an output type is registered in the
//! config or in the store). The store keeps each definition as given; compiling and checking it
//! is the built-in's job, done by the caller before [`Store::put_output_type`].

use serde_json::Value;

use crate::error::StoreError;
use crate::{Store, from_json, now, on_pool, ts, write_tx};

/// The advisory lock key serializing output-type writes on PostgreSQL.
const LOCK: i64 = 0x6f75_7470_7574_7479; // "outputty"

/// Longest output-type name the store accepts.
const MAX_NAME_BYTES: usize = 128;

fn check_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "Invalid output type name {name:?}: use 1-{MAX_NAME_BYTES} letters, digits, '_', '-' or '.'"
        )))
    }
}

impl Store {
    /// Adds or replaces the output type `name`. Returns whether it replaced one.
    pub async fn put_output_type(
        &self,
        name: &str,
        definition: &Value,
    ) -> Result<bool, StoreError> {
        check_name(name)?;
        let json = definition.to_string();
        let replaced = write_tx!(self, LOCK, tx => {
            let existed: Option<String> = sqlx::query_scalar("SELECT name FROM output_types WHERE name = $1")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db("reading an output type"))?;
            sqlx::query(
                "INSERT INTO output_types (name, definition_json, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET definition_json = excluded.definition_json, \
                 updated_at = excluded.updated_at",
            )
            .bind(name)
            .bind(&json)
            .bind(ts(now()))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db("saving an output type"))?;
            existed.is_some()
        });
        Ok(replaced)
    }

    /// Every stored output type, by name.
    pub async fn output_types(&self) -> Result<Vec<(String, Value)>, StoreError> {
        let sql = "SELECT name, definition_json FROM output_types ORDER BY name";
        let rows: Vec<(String, String)> = on_pool!(self, p => {
            sqlx::query_as(sql)
                .fetch_all(p)
                .await
                .map_err(StoreError::db("listing output types"))?
        });
        rows.into_iter()
            .map(|(name, raw)| from_json(&raw, "output type definition").map(|v| (name, v)))
            .collect()
    }

    /// Removes the output type `name`. Returns whether it existed.
    pub async fn remove_output_type(&self, name: &str) -> Result<bool, StoreError> {
        check_name(name)?;
        let removed = write_tx!(self, LOCK, tx => {
            sqlx::query("DELETE FROM output_types WHERE name = $1")
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("removing an output type"))?
                .rows_affected()
        });
        Ok(removed > 0)
    }
}

//! `todo_manager`'s plans (`docs/tool-model.md#built-in-tools`): one JSON array of items per
//! (principal, plan key), kept in `todo_plans`. The store does not look inside the items; the tool
//! owns their format.
//!
//! Writes are serialized per plan: on SQLite by `BEGIN IMMEDIATE` (the database write lock), on
//! PostgreSQL by a transaction-scoped advisory lock keyed by a hash of (principal, plan key). So
//! [`Store::update_todo_plan`] is an atomic read-modify-write even across processes and instances:
//! two concurrent updates of one plan never lose each other's change.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::{Store, from_json, now, on_pool, ts, write_tx};

/// Inserts or replaces one plan row inside the transaction `$tx`.
macro_rules! upsert {
    ($tx:ident, $principal:expr, $plan:expr, $json:expr) => {
        sqlx::query(
            "INSERT INTO todo_plans (principal, plan_key, items_json, updated_at) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (principal, plan_key) \
             DO UPDATE SET items_json = excluded.items_json, updated_at = excluded.updated_at",
        )
        .bind($principal)
        .bind($plan)
        .bind($json)
        .bind(ts(now()))
        .execute(&mut *$tx)
        .await
        .map_err(StoreError::db("saving a todo plan"))?
    };
}

/// Longest plan key the store accepts (principal ids are at most 256 bytes by construction).
pub(crate) const MAX_PLAN_KEY_BYTES: usize = 256;

impl Store {
    /// The items of `principal`'s plan `plan`, as last saved; `None` if it was never saved.
    pub async fn load_todo_plan(
        &self,
        principal: &str,
        plan: &str,
    ) -> Result<Option<Value>, StoreError> {
        check_key(principal, plan)?;
        let sql = "SELECT items_json FROM todo_plans WHERE principal = $1 AND plan_key = $2";
        let raw: Option<String> = on_pool!(self, p => {
            sqlx::query_scalar(sql)
                .bind(principal)
                .bind(plan)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a todo plan"))?
        });
        raw.map(|r| from_json(&r, "todo plan items")).transpose()
    }

    /// Replaces (or creates) `principal`'s plan `plan` with `items`.
    pub async fn save_todo_plan(
        &self,
        principal: &str,
        plan: &str,
        items: &Value,
    ) -> Result<(), StoreError> {
        check_key(principal, plan)?;
        let json = items.to_string();
        write_tx!(self, plan_lock(principal, plan), tx => {
            upsert!(tx, principal, plan, &json);
        });
        Ok(())
    }

    /// Atomic read-modify-write of `principal`'s plan `plan`: `edit` receives the stored items
    /// (`None` if the plan was never saved) and returns the new items, which are saved in the same
    /// transaction; no other write to this plan can come between the read and the write. When
    /// `edit` fails, nothing is written and its error is returned as the inner `Err`.
    pub async fn update_todo_plan<F, E>(
        &self,
        principal: &str,
        plan: &str,
        edit: F,
    ) -> Result<Result<Value, E>, StoreError>
    where
        F: FnOnce(Option<Value>) -> Result<Value, E> + Send,
        E: Send,
    {
        check_key(principal, plan)?;
        let select = "SELECT items_json FROM todo_plans WHERE principal = $1 AND plan_key = $2";
        let items = write_tx!(self, plan_lock(principal, plan), tx => {
            let raw: Option<String> = sqlx::query_scalar(select)
                .bind(principal)
                .bind(plan)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db("reading a todo plan"))?;
            let current = raw
                .map(|r| from_json::<Value>(&r, "todo plan items"))
                .transpose()?;
            let items = match edit(current) {
                Ok(items) => items,
                // Dropping the transaction rolls it back.
                Err(e) => return Ok(Err(e)),
            };
            upsert!(tx, principal, plan, &items.to_string());
            items
        });
        Ok(Ok(items))
    }
}

fn check_key(principal: &str, plan: &str) -> Result<(), StoreError> {
    if principal.is_empty() || plan.is_empty() || plan.len() > MAX_PLAN_KEY_BYTES {
        return Err(StoreError::Invalid(format!(
            "A todo plan needs a principal and a plan key of 1-{MAX_PLAN_KEY_BYTES} bytes (got principal {principal:?}, plan {plan:?})"
        )));
    }
    Ok(())
}

/// The PostgreSQL advisory lock of one plan: the first 8 bytes of SHA-256(principal NUL plan).
/// A collision (with another plan or the store's fixed lock keys) only serializes more.
fn plan_lock(principal: &str, plan: &str) -> i64 {
    let mut hash = Sha256::new();
    hash.update(principal.as_bytes());
    hash.update([0u8]);
    hash.update(plan.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_differ_per_plan_and_principal() {
        assert_ne!(plan_lock("a", "b"), plan_lock("a", "c"));
        assert_ne!(plan_lock("ab", ""), plan_lock("a", "b"));
        assert_eq!(plan_lock("a", "b"), plan_lock("a", "b"));
    }
}

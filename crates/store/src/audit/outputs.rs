//! Large outputs kept apart from the log: stored by call, referenced from the `finished` entry
//! as `toolgate:output/<call id>` and covered by the chain through their SHA-256.

use toolgate_core::CallId;

use super::chain::hex_sha256;
use crate::error::StoreError;
use crate::{Store, now, on_pool, ts};

impl Store {
    /// Keeps a large output apart from the log; returns its reference,
    /// `toolgate:output/<call id>`. Storing again for the same call replaces the bytes.
    pub async fn store_output(&self, call_id: CallId, bytes: &[u8]) -> Result<String, StoreError> {
        let digest = hex_sha256(bytes);
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO audit_outputs (call_id, bytes, size, sha256, stored_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (call_id) DO UPDATE SET bytes = excluded.bytes, size = excluded.size, \
                 sha256 = excluded.sha256, stored_at = excluded.stored_at",
            )
            .bind(call_id.to_string())
            .bind(bytes)
            .bind(size)
            .bind(&digest)
            .bind(ts(now()))
            .execute(p)
            .await
            .map_err(StoreError::db("storing a call's output"))?;
        });
        Ok(format!("toolgate:output/{call_id}"))
    }

    /// A stored output, byte for byte, if the call's output was kept apart.
    pub async fn output(&self, call_id: CallId) -> Result<Option<Vec<u8>>, StoreError> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT bytes FROM audit_outputs WHERE call_id = $1")
                .bind(call_id.to_string())
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a call's output"))
        })
    }
}

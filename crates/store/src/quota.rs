//! Rate limits and concurrency caps shared by every instance on one PostgreSQL database: core's
//! [`SharedCounter`] over the `quota_buckets` and `quota_slots` tables.
//!
//! A rate limit is a token bucket row per key, refilled and taken in one
//! `INSERT … ON CONFLICT … DO UPDATE … RETURNING` statement, on the database's clock — so
//! instances whose clocks differ count the same, and concurrent takes serialize on the row. A
//! concurrency cap is `max` slot rows per key; a call leases a free one (a slot whose lease has
//! expired is free) with `FOR UPDATE SKIP LOCKED`, and gives it back when it ends. Each instance
//! renews its leases every [`SHARED_LEASE`]` / 3`, so the slots of an instance that died
//! (`kill -9`) come back within [`SHARED_LEASE`]. When the database cannot be reached the call is
//! refused `unavailable`, never let through uncounted.
//!
//! SQLite has no shared counter: one instance counts in process (core's stages without
//! [`SharedQuotas`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgPool;
use toolgate_core::{
    BoxFuture, CancellationToken, ErrorChain, ErrorKind, RateLimit, SharedCounter, SharedSlot,
    ToolError,
};
use uuid::Uuid;

use crate::{Pool, Store, StoreError};

/// How long a concurrency slot stays held without its instance renewing it: the longest a
/// killed instance's slots stay taken.
pub const SHARED_LEASE: Duration = Duration::from_secs(30);

/// Quotas counted in the store's PostgreSQL database, shared by every instance on it. Made by
/// [`Store::shared_quotas`]; renews this instance's leases until dropped or the store closes.
pub struct SharedQuotas {
    pool: PgPool,
    instance: String,
    lease: Duration,
    /// Keys whose `max` slot rows exist (made once per process and key).
    prepared: Mutex<HashSet<(String, u32)>>,
    stop: CancellationToken,
}

impl std::fmt::Debug for SharedQuotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedQuotas")
            .field("instance", &self.instance)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Drop for SharedQuotas {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Store {
    /// The shared quota counter of a PostgreSQL store (leases of [`SHARED_LEASE`]); `None` on
    /// SQLite, where one instance counts in process.
    pub fn shared_quotas(&self) -> Option<Arc<SharedQuotas>> {
        self.shared_quotas_with(SHARED_LEASE)
    }

    /// [`Store::shared_quotas`] with another lease (tests shorten it). Called inside a tokio
    /// runtime, it starts the task that renews the leases; outside one, it says so in the log
    /// and the leases are not renewed (a call longer than the lease may lose its slot).
    pub fn shared_quotas_with(&self, lease: Duration) -> Option<Arc<SharedQuotas>> {
        let Pool::Postgres(pool) = &self.inner.pool else {
            return None;
        };
        let quotas = Arc::new(SharedQuotas {
            pool: pool.clone(),
            instance: Uuid::now_v7().simple().to_string(),
            lease: lease.max(Duration::from_millis(100)),
            prepared: Mutex::new(HashSet::new()),
            stop: self.inner.shutdown.child_token(),
        });
        renew_leases(
            quotas.pool.clone(),
            quotas.instance.clone(),
            quotas.lease,
            quotas.stop.clone(),
        );
        Some(quotas)
    }
}

/// Renews `instance`'s leases every third of `lease` until `stop`.
fn renew_leases(pool: PgPool, instance: String, lease: Duration, stop: CancellationToken) {
    let every = lease / 3;
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            "shared concurrency slots are not renewed: the store's shared quotas were made outside a tokio runtime"
        );
        return;
    };
    runtime.spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let renewed = sqlx::query(
                "UPDATE quota_slots SET expires_at = now() + make_interval(secs => $2)
                 WHERE instance = $1 AND expires_at > now()",
            )
            .bind(&instance)
            .bind(lease.as_secs_f64())
            .execute(&pool)
            .await;
            if let Err(e) = renewed {
                let e = StoreError::db("renewing this instance's concurrency slots")(e);
                tracing::warn!(
                    error = %ErrorChain(&e),
                    "concurrency slots not renewed; they are given back {} s after the last renewal",
                    lease.as_secs()
                );
            }
        }
    });
}

/// The refusal when the shared count cannot be reached: the call does not run uncounted.
fn unreachable(key: &str, e: &StoreError) -> ToolError {
    ToolError::new(
        ErrorKind::Unavailable,
        format!(
            "The shared limit {key} could not be counted in the database, so the call was not run: {} (check that PostgreSQL is reachable)",
            ErrorChain(e)
        ),
    )
}

impl SharedQuotas {
    /// Takes one token from `key`'s bucket: `Ok(Ok(()))`, or `Ok(Err(wait))` when none is left.
    ///
    /// # Errors
    ///
    /// `Database` when the statement fails.
    pub async fn take_token(
        &self,
        key: &str,
        limit: RateLimit,
    ) -> Result<Result<(), Duration>, StoreError> {
        // `refill` is the bucket at this statement's time; `now()` is the database's clock (the
        // statement's start: a take that waited for the row lock may see an `at` later than its
        // own now, hence the GREATEST(0, …) and the `at` that never goes back).
        let (granted, tokens): (bool, f64) = sqlx::query_as(
            "INSERT INTO quota_buckets AS b (key, tokens, at, granted)
             VALUES ($1, $2 - 1, now(), true)
             ON CONFLICT (key) DO UPDATE SET
                 tokens = LEAST($2, b.tokens
                     + GREATEST(0, EXTRACT(EPOCH FROM now() - b.at)::float8) * $3)
                   - CASE WHEN LEAST($2, b.tokens
                     + GREATEST(0, EXTRACT(EPOCH FROM now() - b.at)::float8) * $3) >= 1
                     THEN 1 ELSE 0 END,
                 granted = LEAST($2, b.tokens
                     + GREATEST(0, EXTRACT(EPOCH FROM now() - b.at)::float8) * $3) >= 1,
                 at = GREATEST(b.at, now())
             RETURNING granted, tokens",
        )
        .bind(key)
        .bind(f64::from(limit.burst()))
        .bind(limit.per_second())
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::db("taking a call from a shared rate limit"))?;
        if granted {
            return Ok(Ok(()));
        }
        let wait = (1.0 - tokens).max(0.0) / limit.per_second();
        Ok(Err(
            Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX)
        ))
    }

    /// Leases one of `key`'s `max` slots: `Ok(Some(slot))`, or `Ok(None)` when all are held.
    ///
    /// # Errors
    ///
    /// `Database` when a statement fails.
    pub async fn lease_slot(&self, key: &str, max: u32) -> Result<Option<SharedSlot>, StoreError> {
        let max = i32::try_from(max.max(1)).unwrap_or(i32::MAX);
        self.prepare(key, max).await?;
        let lease = Uuid::now_v7().simple().to_string();
        let slot: Option<i32> = sqlx::query_scalar(
            "UPDATE quota_slots
             SET lease = $3, instance = $4, expires_at = now() + make_interval(secs => $5)
             WHERE key = $1 AND slot = (
                 SELECT slot FROM quota_slots
                 WHERE key = $1 AND slot < $2 AND expires_at <= now()
                 ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
             RETURNING slot",
        )
        .bind(key)
        .bind(max)
        .bind(&lease)
        .bind(&self.instance)
        .bind(self.lease.as_secs_f64())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::db("leasing a shared concurrency slot"))?;
        let Some(slot) = slot else {
            return Ok(None);
        };
        let pool = self.pool.clone();
        let key = key.to_owned();
        Ok(Some(SharedSlot::new(move || {
            Box::pin(async move { give_back(&pool, &key, slot, &lease).await })
        })))
    }

    /// Makes `key`'s slot rows 0..max once per process.
    async fn prepare(&self, key: &str, max: i32) -> Result<(), StoreError> {
        let entry = (key.to_owned(), max.unsigned_abs());
        if self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&entry)
        {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO quota_slots (key, slot)
             SELECT $1, s FROM generate_series(0, $2 - 1) AS s
             ON CONFLICT (key, slot) DO NOTHING",
        )
        .bind(key)
        .bind(max)
        .execute(&self.pool)
        .await
        .map_err(StoreError::db("preparing shared concurrency slots"))?;
        self.prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(entry);
        Ok(())
    }
}

/// Gives a slot back (only while this lease still holds it). A failure leaves it to expire.
async fn give_back(pool: &PgPool, key: &str, slot: i32, lease: &str) {
    let released = sqlx::query(
        "UPDATE quota_slots SET lease = NULL, instance = NULL, expires_at = '-infinity'
         WHERE key = $1 AND slot = $2 AND lease = $3",
    )
    .bind(key)
    .bind(slot)
    .bind(lease)
    .execute(pool)
    .await;
    if let Err(e) = released {
        let e = StoreError::db("giving back a shared concurrency slot")(e);
        tracing::warn!(error = %ErrorChain(&e), key, "the slot is given back when its lease expires");
    }
}

impl SharedCounter for SharedQuotas {
    fn take<'a>(
        &'a self,
        key: &'a str,
        limit: RateLimit,
    ) -> BoxFuture<'a, Result<Result<(), Duration>, ToolError>> {
        Box::pin(async move {
            self.take_token(key, limit)
                .await
                .map_err(|e| unreachable(key, &e))
        })
    }

    fn acquire<'a>(
        &'a self,
        key: &'a str,
        max: u32,
    ) -> BoxFuture<'a, Result<Option<SharedSlot>, ToolError>> {
        Box::pin(async move {
            self.lease_slot(key, max)
                .await
                .map_err(|e| unreachable(key, &e))
        })
    }
}

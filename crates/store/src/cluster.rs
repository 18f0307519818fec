//! What one instance asks of another through the shared database, so that a request may land on
//! any instance behind a load balancer (no coordination protocol beyond the store):
//!
//! - cancel requests: `tasks/cancel` of a call running on another instance writes a row; every
//!   instance reads the rows newer than the last it saw (`Store::cancel_requests_after`, polled
//!   by the server) and cancels the named call if it runs there;
//! - MCP 2026-07-28 `requestState` tokens: the first round of a confirmation stores the token's
//!   SHA-256 with its binding and expiry; the answering round takes (deletes) it on whichever
//!   instance it lands, so a token is single-use across the cluster;
//! - task questions: the questions an MCP task's call waits on, written by the instance running
//!   it, read (`Store::task_questions`) and answered (`Store::answer_task_questions`) on any
//!   instance, and taken back with their answers by the running instance
//!   (`Store::take_task_answers`, polled by the server).

use chrono::Utc;
use sqlx::Row;

use crate::{Store, StoreError, on_pool};

/// How long a cancel request is kept (a call it names has finished or been cancelled by then).
const CANCEL_KEEP_MS: i64 = 3_600_000;

/// How long a task question is kept when nothing removed it (its call was cut by a crash).
const QUESTION_KEEP_MS: i64 = 86_400_000;

/// A `tasks/cancel` of a call that may run on another instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelRequest {
    /// Increases in insertion order: the cursor of [`Store::cancel_requests_after`].
    pub id: i64,
    /// The task's id: an approval id or a call id.
    pub target: String,
    /// The principal that asked (the task's owner).
    pub principal: String,
}

impl Store {
    /// Records that `principal` asks to cancel the call of task `target`, wherever it runs; rows
    /// older than an hour are removed on the way.
    pub async fn request_cancel(&self, target: &str, principal: &str) -> Result<(), StoreError> {
        let now = Utc::now().timestamp_millis();
        on_pool!(self, p => {
            sqlx::query("DELETE FROM cancel_requests WHERE requested_ms < $1")
                .bind(now - CANCEL_KEEP_MS)
                .execute(p)
                .await
                .map_err(StoreError::db("removing old cancel requests"))?;
            sqlx::query(
                "INSERT INTO cancel_requests (target, principal, requested_ms) VALUES ($1, $2, $3)",
            )
            .bind(target)
            .bind(principal)
            .bind(now)
            .execute(p)
            .await
            .map_err(StoreError::db("recording a cancel request"))?;
            Ok(())
        })
    }

    /// The cancel requests with an id greater than `after`, oldest first (at most 1000).
    pub async fn cancel_requests_after(
        &self,
        after: i64,
    ) -> Result<Vec<CancelRequest>, StoreError> {
        on_pool!(self, p => {
            let rows = sqlx::query(
                "SELECT id, target, principal FROM cancel_requests WHERE id > $1 ORDER BY id LIMIT 1000",
            )
            .bind(after)
            .fetch_all(p)
            .await
            .map_err(StoreError::db("reading cancel requests"))?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(CancelRequest {
                    id: row
                        .try_get("id")
                        .map_err(StoreError::db("reading a cancel request"))?,
                    target: row
                        .try_get("target")
                        .map_err(StoreError::db("reading a cancel request"))?,
                    principal: row
                        .try_get("principal")
                        .map_err(StoreError::db("reading a cancel request"))?,
                });
            }
            Ok(out)
        })
    }

    /// The newest cancel request's id (0 when there is none): where a new poller starts.
    pub async fn last_cancel_request(&self) -> Result<i64, StoreError> {
        on_pool!(self, p => {
            let id: Option<i64> = sqlx::query_scalar("SELECT MAX(id) FROM cancel_requests")
                .fetch_one(p)
                .await
                .map_err(StoreError::db("reading cancel requests"))?;
            Ok(id.unwrap_or(0))
        })
    }

    /// Stores a `requestState` token (by its SHA-256, hex) with its binding (hex), expiry
    /// (milliseconds since the epoch) and what it carries to the next round (opaque text, a
    /// JSON object for the MCP server); expired tokens are removed on the way.
    pub async fn put_request_state(
        &self,
        token_sha256: &str,
        state: &RequestState,
    ) -> Result<(), StoreError> {
        let now = Utc::now().timestamp_millis();
        on_pool!(self, p => {
            sqlx::query("DELETE FROM mcp_request_states WHERE expires_ms < $1")
                .bind(now)
                .execute(p)
                .await
                .map_err(StoreError::db("removing expired MCP request states"))?;
            sqlx::query(
                "INSERT INTO mcp_request_states (token_sha256, binding, expires_ms, carried) VALUES ($1, $2, $3, $4)",
            )
            .bind(token_sha256)
            .bind(&state.binding)
            .bind(state.expires_ms)
            .bind(&state.carried)
            .execute(p)
            .await
            .map_err(StoreError::db("recording an MCP request state"))?;
            Ok(())
        })
    }

    /// Takes (deletes) the `requestState` token with this SHA-256, or `None` when it was never
    /// stored or was taken already.
    pub async fn take_request_state(
        &self,
        token_sha256: &str,
    ) -> Result<Option<RequestState>, StoreError> {
        on_pool!(self, p => {
            let row = sqlx::query(
                "DELETE FROM mcp_request_states WHERE token_sha256 = $1 RETURNING binding, expires_ms, carried",
            )
            .bind(token_sha256)
            .fetch_optional(p)
            .await
            .map_err(StoreError::db("taking an MCP request state"))?;
            match row {
                None => Ok(None),
                Some(row) => Ok(Some(RequestState {
                    binding: row
                        .try_get("binding")
                        .map_err(StoreError::db("reading an MCP request state"))?,
                    expires_ms: row
                        .try_get("expires_ms")
                        .map_err(StoreError::db("reading an MCP request state"))?,
                    carried: row
                        .try_get("carried")
                        .map_err(StoreError::db("reading an MCP request state"))?,
                })),
            }
        })
    }
}

impl Store {
    /// Records that task `task_id`'s call (of `principal`) waits on question `key` (an MCP input
    /// request, JSON); asking a key again replaces it and its answer. Rows older than a day are
    /// removed on the way.
    pub async fn ask_task_question(
        &self,
        task_id: &str,
        key: &str,
        principal: &str,
        request: &str,
    ) -> Result<(), StoreError> {
        let now = Utc::now().timestamp_millis();
        on_pool!(self, p => {
            sqlx::query("DELETE FROM task_questions WHERE asked_ms < $1")
                .bind(now - QUESTION_KEEP_MS)
                .execute(p)
                .await
                .map_err(StoreError::db("removing old task questions"))?;
            sqlx::query(
                "INSERT INTO task_questions (task_id, question_key, principal, request, asked_ms, answer) \
                 VALUES ($1, $2, $3, $4, $5, NULL) \
                 ON CONFLICT (task_id, question_key) DO UPDATE SET principal = excluded.principal, \
                 request = excluded.request, asked_ms = excluded.asked_ms, answer = NULL",
            )
            .bind(task_id)
            .bind(key)
            .bind(principal)
            .bind(request)
            .bind(now)
            .execute(p)
            .await
            .map_err(StoreError::db("recording a task question"))?;
            Ok(())
        })
    }

    /// The questions task `task_id` of `principal` waits on and nobody answered yet, by key
    /// (key, request JSON), in key order.
    pub async fn task_questions(
        &self,
        task_id: &str,
        principal: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        on_pool!(self, p => {
            let rows = sqlx::query(
                "SELECT question_key, request FROM task_questions \
                 WHERE task_id = $1 AND principal = $2 AND answer IS NULL ORDER BY question_key",
            )
            .bind(task_id)
            .bind(principal)
            .fetch_all(p)
            .await
            .map_err(StoreError::db("reading task questions"))?;
            key_value_rows(rows, "question_key", "request")
        })
    }

    /// Answers questions of task `task_id` of `principal` (key, answer JSON): each answer is kept
    /// for the instance running the call; a key naming no unanswered question of that task and
    /// principal is ignored. How many questions were answered.
    pub async fn answer_task_questions(
        &self,
        task_id: &str,
        principal: &str,
        answers: &[(String, String)],
    ) -> Result<usize, StoreError> {
        on_pool!(self, p => {
            let mut answered = 0;
            for (key, answer) in answers {
                let done = sqlx::query(
                    "UPDATE task_questions SET answer = $1 \
                     WHERE task_id = $2 AND question_key = $3 AND principal = $4 AND answer IS NULL",
                )
                .bind(answer)
                .bind(task_id)
                .bind(key)
                .bind(principal)
                .execute(p)
                .await
                .map_err(StoreError::db("answering a task question"))?;
                answered += usize::try_from(done.rows_affected()).unwrap_or(0);
            }
            Ok(answered)
        })
    }

    /// Takes (deletes) the answered questions of task `task_id`: (key, answer JSON) each.
    pub async fn take_task_answers(
        &self,
        task_id: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        on_pool!(self, p => {
            let rows = sqlx::query(
                "DELETE FROM task_questions WHERE task_id = $1 AND answer IS NOT NULL \
                 RETURNING question_key, answer",
            )
            .bind(task_id)
            .fetch_all(p)
            .await
            .map_err(StoreError::db("taking task answers"))?;
            let mut answers = key_value_rows(rows, "question_key", "answer")?;
            answers.sort();
            Ok(answers)
        })
    }

    /// Removes task `task_id`'s questions: the one under `key`, or all of them (its call
    /// finished).
    pub async fn forget_task_questions(
        &self,
        task_id: &str,
        key: Option<&str>,
    ) -> Result<(), StoreError> {
        on_pool!(self, p => {
            match key {
                Some(key) => sqlx::query(
                    "DELETE FROM task_questions WHERE task_id = $1 AND question_key = $2",
                )
                .bind(task_id)
                .bind(key)
                .execute(p)
                .await,
                None => sqlx::query("DELETE FROM task_questions WHERE task_id = $1")
                    .bind(task_id)
                    .execute(p)
                    .await,
            }
            .map_err(StoreError::db("removing task questions"))?;
            Ok(())
        })
    }
}

/// Two text columns of each row.
fn key_value_rows<R>(
    rows: Vec<R>,
    key: &str,
    value: &str,
) -> Result<Vec<(String, String)>, StoreError>
where
    R: Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    rows.into_iter()
        .map(|row| {
            Ok((
                row.try_get(key)
                    .map_err(StoreError::db("reading a task question"))?,
                row.try_get(value)
                    .map_err(StoreError::db("reading a task question"))?,
            ))
        })
        .collect()
}

/// What a stored MCP `requestState` stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestState {
    /// What the token is bound to (the MCP server's hash of principal, tool and arguments, hex).
    pub binding: String,
    /// When it stops being valid, in milliseconds since the epoch.
    pub expires_ms: i64,
    /// What the round carries to the next one (opaque to the store).
    pub carried: String,
}

#[cfg(test)]
mod tests {
    use crate::{DbUrl, Store, StoreOptions};

    async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &DbUrl::Sqlite(dir.path().join("t.db")),
            &StoreOptions::default(),
        )
        .await
        .unwrap();
        (store, dir)
    }

    #[tokio::test]
    async fn cancel_requests_are_read_after_a_cursor() {
        let (store, _dir) = store().await;
        assert_eq!(store.last_cancel_request().await.unwrap(), 0);
        store.request_cancel("apr_1", "alice").await.unwrap();
        let start = store.last_cancel_request().await.unwrap();
        store.request_cancel("call_2", "bob").await.unwrap();
        let all = store.cancel_requests_after(0).await.unwrap();
        assert_eq!(all.len(), 2);
        let newer = store.cancel_requests_after(start).await.unwrap();
        assert_eq!(newer.len(), 1);
        assert_eq!(
            (newer[0].target.as_str(), newer[0].principal.as_str()),
            ("call_2", "bob")
        );
    }

    #[tokio::test]
    async fn a_request_state_is_taken_once() {
        let (store, _dir) = store().await;
        let later = chrono::Utc::now().timestamp_millis() + 60_000;
        let state = crate::RequestState {
            binding: "b1".into(),
            expires_ms: later,
            carried: r#"{"asked":["a"]}"#.into(),
        };
        store.put_request_state("h1", &state).await.unwrap();
        assert_eq!(store.take_request_state("h1").await.unwrap(), Some(state));
        assert_eq!(store.take_request_state("h1").await.unwrap(), None);
        assert_eq!(store.take_request_state("never").await.unwrap(), None);
    }
}

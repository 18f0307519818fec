//! The audit log's single writer: every append (a `started` entry, a queued or committed
//! `finished` entry, a flush) goes through [`AuditWriter`], which commits concurrent calls'
//! entries together in one transaction (group commit), linked into the chain in arrival order.

use std::sync::{Arc, OnceLock, Weak};

use tokio::sync::{Notify, mpsc, oneshot};
use toolgate_core::{CallRecord, ErrorChain};

use super::chain::GENESIS;
use super::record::{AuditRecord, AuditStart, Entry, finished_entry, finished_entry_of};
use crate::checkpoint::Head;
use crate::error::StoreError;
use crate::{Inner, LOCK_AUDIT, Store, now, ts, write_tx};

impl Store {
    /// Appends `entry` to the chain and waits until it is committed (durably). Entries of
    /// concurrent calls share one transaction (group commit; see [`AuditWriter`]).
    pub(super) async fn append(&self, entry: Entry) -> Result<i64, StoreError> {
        self.inner.audit_writer.append(entry).await
    }

    /// Queues `entry` without waiting for its commit; [`Store::flush_audit`] (and
    /// [`Store::close`]) wait for everything queued.
    async fn append_queued(&self, entry: Entry) -> Result<(), StoreError> {
        self.inner.audit_writer.queue(entry).await
    }

    /// Waits until every audit entry queued so far is committed.
    pub async fn flush_audit(&self) -> Result<(), StoreError> {
        self.inner.audit_writer.flush().await
    }

    /// Appends `entries` to the chain in one transaction under the audit write lock; fills in
    /// each one's `seq` (the other columns are moved into the statement). Returns the new head
    /// for the checkpointer, when the store has one.
    async fn append_batch(&self, entries: &mut [Entry]) -> Result<Option<Head>, StoreError> {
        let placeholders = match &self.inner.pool {
            crate::Pool::Sqlite(_) => Placeholders::Question,
            crate::Pool::Postgres(_) => Placeholders::Numbered,
        };
        let head = write_tx!(self, LOCK_AUDIT, tx => {
            let last: Option<(i64, String)> =
                sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::db("reading the audit log"))?;
            let (mut seq, mut prev) = last.unwrap_or((0, GENESIS.to_owned()));
            // One recording time per batch (they commit together): formatted once, not per entry.
            let recorded_at = ts(now());
            for (i, entry) in entries.iter_mut().enumerate() {
                // The writer shares the runtime with the calls: a batch of hundreds of entries
                // hashed in one go would hold a worker for a millisecond or more, and every call
                // on it would wait that long (the tail latency). Other tasks run in between.
                if i % YIELD_EVERY == YIELD_EVERY - 1 {
                    tokio::task::yield_now().await;
                }
                if entry.output_ref.is_some() {
                    entry.output_sha256 =
                        sqlx::query_scalar("SELECT sha256 FROM audit_outputs WHERE call_id = $1")
                            .bind(&entry.call_id)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(StoreError::db("reading a stored output's hash"))?;
                }
                seq += 1;
                entry.link(seq, std::mem::take(&mut prev), &recorded_at);
                prev = entry.hash.clone();
            }
            let head = self.inner.checkpoints.as_ref().map(|_| Head { seq, hash: prev });
            // Multi-row INSERTs: each statement is a round trip to the database (a thread hop
            // for SQLite), so a batch costs a few instead of one per entry. Chunks hold
            // INSERT_ROWS rows or a power of two fewer, so only a handful of distinct
            // statements exist, each built once and kept prepared in the connection's cache.
            // The entries' text moves into the statement: nothing reads it after the insert.
            let mut rest = &mut entries[..];
            for size in insert_chunk_sizes(rest.len()) {
                let (chunk, tail) = rest.split_at_mut(size);
                rest = tail;
                let mut insert = sqlx::query(insert_sql(size, placeholders));
                for entry in chunk.iter_mut() {
                    insert = insert
                        .bind(entry.seq)
                        .bind(std::mem::take(&mut entry.kind))
                        .bind(std::mem::take(&mut entry.call_id))
                        .bind(std::mem::take(&mut entry.tool))
                        .bind(entry.definition_hash.take())
                        .bind(std::mem::take(&mut entry.principal))
                        .bind(std::mem::take(&mut entry.input_json))
                        .bind(entry.error_kind.take())
                        .bind(entry.error.take())
                        .bind(entry.data_json.take())
                        .bind(entry.output_ref.take())
                        .bind(entry.output_sha256.take())
                        .bind(entry.content_json.take())
                        .bind(entry.origin_json.take())
                        .bind(entry.cancelled_by.take())
                        .bind(entry.attempts)
                        .bind(entry.duration_ms)
                        .bind(std::mem::take(&mut entry.fetched_at))
                        .bind(entry.truncated)
                        .bind(std::mem::take(&mut entry.recorded_at))
                        .bind(std::mem::take(&mut entry.prev_hash))
                        .bind(std::mem::take(&mut entry.hash));
                }
                insert
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("writing the audit log"))?;
                tokio::task::yield_now().await;
            }
            head
        });
        Ok(head)
    }

    /// Records, durably, that a side-effecting call is about to run. Commits before returning.
    pub async fn audit_started(&self, entry: &AuditStart) -> Result<(), StoreError> {
        let mut e = Entry::new(
            "started",
            entry.call_id,
            &entry.tool,
            &entry.principal,
            &entry.input,
        );
        e.definition_hash = Some(entry.definition_hash.clone());
        e.fetched_at = ts(entry.fetched_at);
        self.append(e).await.map(|_| ())
    }

    /// Records a call's outcome and waits until it is committed. Data is not stored when
    /// `output_ref` is set.
    pub async fn audit_finished(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.append(finished_entry(record)).await.map(|_| ())
    }

    /// The pipeline's call, recorded as [`Store::audit_finished`] (`queued` false) or
    /// [`Store::audit_finished_queued`] (`queued` true) would record
    /// `AuditRecord::from_result` of it with its origin and canceller.
    pub(super) async fn audit_call_finished(
        &self,
        record: &CallRecord<'_>,
        queued: bool,
    ) -> Result<(), StoreError> {
        let entry = finished_entry_of(record);
        if queued {
            self.append_queued(entry).await
        } else {
            self.append(entry).await.map(|_| ())
        }
    }

    /// Queues a call's outcome for the next group commit without waiting for it (read-only
    /// calls: nothing happened that the log must prove before the caller sees the result).
    pub async fn audit_finished_queued(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.append_queued(finished_entry(record)).await
    }
}

/// Most entries one audit transaction writes.
const MAX_BATCH: usize = 512;
/// Rows per INSERT statement (22 bound values each, far below SQLite's and PostgreSQL's limits).
/// Not more: SQLite runs a statement on its own thread, which on a busy CPU takes turns with
/// the calls; 32 rows keep each turn short (p99 1.4–1.7 ms against 1.6–1.7 ms with 128, same
/// throughput, measured as for [`LINGER`]).
const INSERT_ROWS: usize = 32;
/// Entries that may wait for the writer before queueing callers wait too.
const QUEUE_CAPACITY: usize = 8192;
/// How long a batch of queued entries (nobody waits for their commit) waits for more before it
/// is committed. A commit (one fsync) costs far more than an entry, so under load this turns
/// many small transactions into a few large ones; an entry someone waits for (or a flush) ends
/// the wait at once, so no caller ever waits for it. Not longer: a batch's work (hashing,
/// inserting) grows with the linger and, on a busy CPU, is the calls' tail latency (measured
/// with 16 sessions on one CPU: p99 3.5–3.9 ms at 20 ms, 2.4–2.5 ms at 5 ms, same throughput).
const LINGER: std::time::Duration = std::time::Duration::from_millis(5);
/// Entries the writer links into the chain between two yields to the runtime.
const YIELD_EVERY: usize = 32;

/// One request to the audit writer: an entry to append (answered with its `seq` once
/// committed, if `done` is set), or a flush barrier (no entry).
pub(crate) struct Job {
    entry: Option<Entry>,
    done: Option<oneshot::Sender<Result<i64, String>>>,
}

/// The writer's side of [`AuditWriter`]: the queue, and the signal that a job someone waits
/// for was queued (it ends the linger).
pub(crate) struct Jobs {
    receiver: mpsc::Receiver<Job>,
    waited_for: Arc<Notify>,
}

/// The audit log's single writer. Appends from concurrent calls are committed together, one
/// transaction (one fsync) per batch, in arrival order, so the hash chain stays a chain and the
/// cost of durability is shared (group commit). Waiting callers are answered only after their
/// batch is committed.
#[derive(Debug)]
pub(crate) struct AuditWriter {
    jobs: mpsc::Sender<Job>,
    waited_for: Arc<Notify>,
}

impl AuditWriter {
    pub(crate) fn new() -> (Self, Jobs) {
        let (jobs, receiver) = mpsc::channel(QUEUE_CAPACITY);
        let waited_for = Arc::new(Notify::new());
        let writer = Self {
            jobs,
            waited_for: Arc::clone(&waited_for),
        };
        (
            writer,
            Jobs {
                receiver,
                waited_for,
            },
        )
    }

    /// Runs the writer until the store is dropped. It holds the store weakly, so an unused
    /// store still closes.
    pub(crate) fn spawn(store: Weak<Inner>, mut jobs: Jobs) {
        tokio::spawn(async move {
            let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
            while jobs.receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
                linger(&mut jobs, &mut batch).await;
                let had_entry: Vec<bool> = batch.iter().map(|j| j.entry.is_some()).collect();
                let mut entries: Vec<Entry> =
                    batch.iter_mut().filter_map(|j| j.entry.take()).collect();
                let inner = store.upgrade();
                let result = match &inner {
                    None => Err("the store is closed".to_owned()),
                    Some(_) if entries.is_empty() => Ok(None),
                    Some(inner) => Store {
                        inner: Arc::clone(inner),
                    }
                    .append_batch(&mut entries)
                    .await
                    .map_err(|e| ErrorChain(&e).to_string()),
                };
                if let Err(e) = &result {
                    tracing::error!(error = %e, entries = entries.len(), "audit entries could not be written");
                }
                let mut seqs = entries.iter().map(|e| e.seq);
                for (job, had_entry) in batch.drain(..).zip(had_entry) {
                    // Jobs with an entry took one seq each, in order; barriers take none.
                    let seq = if had_entry { seqs.next() } else { None };
                    let answer = match &result {
                        Ok(_) => Ok(seq.unwrap_or(0)),
                        Err(e) => Err(e.clone()),
                    };
                    if let Some(done) = job.done {
                        let _ = done.send(answer);
                    }
                }
                // After the callers are answered: the checkpointer signs the new head in the
                // background (handing it over here costs a lock and a wake-up, no I/O).
                if let (Ok(Some(head)), Some(inner)) = (result, inner)
                    && let Some(checkpoints) = &inner.checkpoints
                {
                    checkpoints.publish(head);
                }
            }
        });
    }

    /// Appends and waits for the commit.
    async fn append(&self, entry: Entry) -> Result<i64, StoreError> {
        let (done, answer) = oneshot::channel();
        self.send(Job {
            entry: Some(entry),
            done: Some(done),
        })
        .await?;
        answer
            .await
            .map_err(|_| stopped())?
            .map_err(StoreError::AuditWrite)
    }

    /// Queues without waiting for the commit (waits only while the queue is full).
    async fn queue(&self, entry: Entry) -> Result<(), StoreError> {
        self.send(Job {
            entry: Some(entry),
            done: None,
        })
        .await
    }

    /// Waits until everything queued before this call is committed.
    async fn flush(&self) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.send(Job {
            entry: None,
            done: Some(done),
        })
        .await?;
        answer
            .await
            .map_err(|_| stopped())?
            .map(|_| ())
            .map_err(StoreError::AuditWrite)
    }

    async fn send(&self, job: Job) -> Result<(), StoreError> {
        let waited_for = job.done.is_some();
        self.jobs.send(job).await.map_err(|_| stopped())?;
        if waited_for {
            // Ends a linger now; when none is under way the permit ends the next one early,
            // which only makes that batch smaller.
            self.waited_for.notify_one();
        }
        Ok(())
    }
}

/// Sizes `len` entries are inserted in: chunks of [`INSERT_ROWS`], then powers of two (16, 8,
/// …, 1) for the rest.
fn insert_chunk_sizes(len: usize) -> impl Iterator<Item = usize> {
    let mut rest = len;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let size = if rest >= INSERT_ROWS {
            INSERT_ROWS
        } else {
            1 << rest.ilog2()
        };
        rest -= size;
        Some(size)
    })
}

/// Columns of an `audit_log` row, in the order [`Store::append_batch`] binds them.
const INSERT_COLUMNS: [&str; 22] = [
    "seq",
    "kind",
    "call_id",
    "tool",
    "definition_hash",
    "principal",
    "input_json",
    "error_kind",
    "error",
    "data_json",
    "output_ref",
    "output_sha256",
    "content_json",
    "origin_json",
    "cancelled_by",
    "attempts",
    "duration_ms",
    "fetched_at",
    "truncated",
    "recorded_at",
    "prev_hash",
    "hash",
];

/// How a statement marks its parameters: SQLite binds `?` by position (numbered names would
/// make it look every parameter up by name, which grows with the square of their count);
/// PostgreSQL wants `$1`, `$2`, ….
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placeholders {
    Question,
    Numbered,
}

/// The INSERT of `rows` entries (a size [`insert_chunk_sizes`] yields), built once per size.
fn insert_sql(rows: usize, placeholders: Placeholders) -> &'static str {
    static SQL: OnceLock<[Vec<String>; 2]> = OnceLock::new();
    let [question, numbered] = SQL.get_or_init(|| {
        let sizes = 0..=INSERT_ROWS.ilog2();
        [
            sizes
                .clone()
                .map(|k| build_insert_sql(1 << k, Placeholders::Question))
                .collect(),
            sizes
                .map(|k| build_insert_sql(1 << k, Placeholders::Numbered))
                .collect(),
        ]
    });
    let all = match placeholders {
        Placeholders::Question => question,
        Placeholders::Numbered => numbered,
    };
    // Sizes are powers of two up to INSERT_ROWS, so the index is always in range.
    all.get(rows.ilog2() as usize).map_or("", String::as_str)
}

fn build_insert_sql(rows: usize, placeholders: Placeholders) -> String {
    let width = INSERT_COLUMNS.len();
    let mut sql = format!(
        "INSERT INTO audit_log ({}) VALUES ",
        INSERT_COLUMNS.join(", ")
    );
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..width {
            if column > 0 {
                sql.push_str(", ");
            }
            match placeholders {
                Placeholders::Question => sql.push('?'),
                Placeholders::Numbered => {
                    sql.push('$');
                    sql.push_str(&(row * width + column + 1).to_string());
                }
            }
        }
        sql.push(')');
    }
    sql
}

/// Lets a batch of queued entries grow for up to [`LINGER`], unless it is full already (the
/// queue has a backlog: no wait, so the writer keeps up with any rate) or holds a job someone
/// waits for.
async fn linger(jobs: &mut Jobs, batch: &mut Vec<Job>) {
    if batch.len() >= MAX_BATCH || batch.iter().any(|j| j.done.is_some()) {
        return;
    }
    // Waits without polling the queue: each entry queued meanwhile would otherwise wake the
    // writer once (a task poll per call). A job someone waits for ends the wait at once.
    tokio::select! {
        biased;
        () = jobs.waited_for.notified() => {}
        () = tokio::time::sleep(LINGER) => {}
    }
    while batch.len() < MAX_BATCH {
        match jobs.receiver.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => return,
        }
    }
}

fn stopped() -> StoreError {
    StoreError::AuditWrite(
        "The audit writer has stopped (its runtime ended); open the store again".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_chunks_are_full_or_powers_of_two_and_cover_every_entry() {
        for n in [0, 1, 2, 3, 7, 127, 128, 129, 300, 511, 512] {
            let sizes: Vec<usize> = insert_chunk_sizes(n).collect();
            assert_eq!(sizes.iter().sum::<usize>(), n, "{n}: {sizes:?}");
            assert!(
                sizes
                    .iter()
                    .all(|&s| s == INSERT_ROWS || (s.is_power_of_two() && s < INSERT_ROWS)),
                "{n}: {sizes:?}"
            );
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{n}: {sizes:?}");
            for size in sizes {
                // One placeholder per column and row; PostgreSQL's numbered without gaps.
                let width = INSERT_COLUMNS.len();
                let sql = insert_sql(size, Placeholders::Question);
                assert_eq!(sql.matches('?').count(), size * width, "{size}");
                assert!(!sql.contains('$'), "{size}");
                let sql = insert_sql(size, Placeholders::Numbered);
                assert_eq!(sql.matches('$').count(), size * width, "{size}");
                assert!(sql.ends_with(&format!("${})", size * width)), "{size}");
                assert!(!sql.contains(&format!("${}", size * width + 1)), "{size}");
            }
        }
    }

    /// A job nobody waits for (what a read-only call queues).
    fn queued() -> Job {
        Job {
            entry: None,
            done: None,
        }
    }

    /// The writer's first batch: what `spawn`'s loop has received before it lingers.
    async fn first_batch(writer: &AuditWriter, jobs: &mut Jobs, n: usize) -> Vec<Job> {
        for _ in 0..n {
            writer.send(queued()).await.unwrap();
        }
        let mut batch = Vec::new();
        jobs.receiver.recv_many(&mut batch, MAX_BATCH).await;
        assert_eq!(batch.len(), n);
        batch
    }

    // The clock is paused and advances only when every task waits, so the elapsed time says
    // whether the linger ran out (LINGER) or was ended (zero), whatever the machine's load.

    #[tokio::test(start_paused = true)]
    async fn entries_queued_during_the_linger_join_the_batch_without_ending_it() {
        let (writer, mut jobs) = AuditWriter::new();
        let mut batch = first_batch(&writer, &mut jobs, 1).await;
        let start = tokio::time::Instant::now();
        tokio::join!(linger(&mut jobs, &mut batch), async {
            writer.send(queued()).await.unwrap();
        });
        assert_eq!(start.elapsed(), LINGER);
        assert_eq!(batch.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_someone_waits_for_ends_the_linger_at_once() {
        let (writer, mut jobs) = AuditWriter::new();
        let mut batch = first_batch(&writer, &mut jobs, 1).await;
        let start = tokio::time::Instant::now();
        let (done, _answer) = oneshot::channel();
        tokio::join!(linger(&mut jobs, &mut batch), async {
            writer
                .send(Job {
                    entry: None,
                    done: Some(done),
                })
                .await
                .unwrap();
        });
        assert!(start.elapsed() < LINGER, "{:?}", start.elapsed());
        assert_eq!(batch.len(), 2);
        assert!(batch[1].done.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_does_not_linger() {
        let (writer, mut jobs) = AuditWriter::new();
        let mut batch = first_batch(&writer, &mut jobs, MAX_BATCH).await;
        writer.send(queued()).await.unwrap();
        let start = tokio::time::Instant::now();
        linger(&mut jobs, &mut batch).await;
        assert_eq!(start.elapsed(), std::time::Duration::ZERO);
        // The job behind a full batch waits for the next one.
        assert_eq!(batch.len(), MAX_BATCH);
        assert_eq!(jobs.receiver.len(), 1);
    }
}

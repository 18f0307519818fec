//! Signed checkpoints of the audit chain's head: the anchor outside the rows that shows a cut tail.
//!
//! The hash chain shows an entry edited, reordered or removed in the middle, but not the newest
//! entries removed (or all of them): what is left is still a valid chain. A checkpoint records
//! "entry `seq` had hash `hash`", signed with HMAC-SHA256 under a key that is not in the database
//! (a key file, generated next to a SQLite database by default, or a secret from the environment).
//! Checkpoints are kept in the database (`audit_checkpoints`) and in a checkpoint file outside it,
//! and [`crate::Store::verify`] checks the chain against every one that carries a valid MAC: one
//! beyond the newest entry is a cut tail, one whose entry has another hash is a rewritten log, one
//! with a bad MAC is a forgery.
//!
//! The audit writer only publishes its newest committed head (a slot and a wake-up, no I/O); a
//! background task signs it and writes both copies at most once per [`THROTTLE`], so the call path
//! never waits for a checkpoint. [`crate::Store::checkpoint_audit`] writes one at once (the CLI
//! does after its calls, and [`crate::Store::close`] does).
//!
//! A checkpoint is only written when it extends the newest valid one already kept (the entry at
//! that one's `seq` still has its hash): a process appending to a log whose tail was cut must not
//! sign the shortened chain and so hide the cut.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::sync::{Mutex, Notify};
use toolgate_core::CancellationToken;
use toolgate_core::ErrorChain;

use crate::error::StoreError;
use crate::{DbUrl, Inner, Store, now, on_pool, ts};

type HmacSha256 = Hmac<Sha256>;

/// The shortest key accepted, in bytes.
const MIN_KEY_BYTES: usize = 16;
/// Checkpoints written by the background task are at least this far apart.
pub const THROTTLE: Duration = Duration::from_secs(1);
/// Rows of `audit_checkpoints` kept (the newest); older ones add nothing the newest do not prove.
const KEEP_ROWS: i64 = 64;
/// Rows of `audit_checkpoints` [`crate::Store::verify`] reads (the newest).
const CHECK_ROWS: i64 = 1000;
/// What the MAC covers, before `seq`, `hash` and `at`.
const DOMAIN: &str = "toolgate-audit-checkpoint/1";

/// The key that signs checkpoints.
#[derive(Clone)]
pub enum AuditKey {
    /// The key itself (from the environment).
    Secret(Vec<u8>),
    /// A file holding the key, created with a random key (mode 0600) when missing.
    File(PathBuf),
}

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(_) => f.write_str("Secret(..)"),
            Self::File(p) => f.debug_tuple("File").field(p).finish(),
        }
    }
}

/// Where the audit chain's checkpoints are signed and kept outside the database.
#[derive(Clone, Debug, Default)]
pub struct AuditAnchor {
    /// No key: no checkpoints, and a cut tail goes unnoticed.
    pub key: Option<AuditKey>,
    /// The checkpoint file (written atomically); `None` keeps checkpoints in the database only.
    pub checkpoint_file: Option<PathBuf>,
}

impl AuditAnchor {
    /// No checkpoints.
    pub fn none() -> Self {
        Self::default()
    }

    /// The default for `url`: for SQLite, the key file `<db>.audit-key` and the checkpoint file
    /// `<db>.audit-checkpoint` next to the database; for PostgreSQL none (give one explicitly).
    pub fn for_url(url: &DbUrl) -> Self {
        match url {
            DbUrl::Sqlite(path) => Self {
                key: Some(AuditKey::File(suffixed(path, ".audit-key"))),
                checkpoint_file: Some(suffixed(path, ".audit-checkpoint")),
            },
            DbUrl::Postgres(_) => Self::none(),
        }
    }
}

/// `path` with `suffix` appended to its file name.
pub fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// "Entry `seq` had hash `hash`" at `at`, signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub seq: i64,
    pub hash: String,
    /// When it was signed (RFC 3339).
    pub at: String,
    /// HMAC-SHA256 (hex) of `toolgate-audit-checkpoint/1\n<seq>\n<hash>\n<at>`.
    pub mac: String,
}

/// Where a checkpoint was read from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "path")]
pub enum CheckpointSource {
    /// A row of `audit_checkpoints`.
    Database,
    /// The checkpoint file.
    File(PathBuf),
}

impl fmt::Display for CheckpointSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Database => f.write_str("the database"),
            Self::File(p) => write!(f, "the checkpoint file {}", p.display()),
        }
    }
}

/// The newest entries are gone: a checkpoint names an entry beyond the newest one left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CutTail {
    /// The first missing entry (the newest left plus one).
    pub first_missing: i64,
    /// The last entry known to have existed (the checkpoint's).
    pub last_missing: i64,
    /// The newest entry left (0: none).
    pub head: i64,
    pub source: CheckpointSource,
}

impl fmt::Display for CutTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = if self.first_missing == self.last_missing {
            format!("entry {} is", self.first_missing)
        } else {
            format!("entries {}–{} are", self.first_missing, self.last_missing)
        };
        write!(
            f,
            "audit log cut: {range} missing (checkpoint at seq {} in {}, head now {})",
            self.last_missing, self.source, self.head
        )
    }
}

/// A checkpoint that does not check out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointProblem {
    pub source: CheckpointSource,
    /// The checkpoint's `seq`, when it could be read.
    pub seq: Option<i64>,
    pub kind: CheckpointProblemKind,
    pub reason: String,
}

/// What is wrong with a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckpointProblemKind {
    /// Its MAC does not match the key: forged, or signed with another key.
    Forged,
    /// Its entry is there with another hash: the log was rewritten up to it.
    Rewritten,
    /// Its entry is gone while newer ones remain.
    Missing,
    /// The checkpoint file cannot be read or parsed.
    Unreadable,
}

impl fmt::Display for CheckpointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(
                f,
                "checkpoint at seq {seq} in {}: {}",
                self.source, self.reason
            ),
            None => write!(f, "checkpoint in {}: {}", self.source, self.reason),
        }
    }
}

/// What [`crate::Store::verify`] found about checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Findings {
    pub(crate) anchored: bool,
    pub(crate) checkpointed: Option<i64>,
    pub(crate) cut: Option<CutTail>,
    pub(crate) problems: Vec<CheckpointProblem>,
}

/// The head of the chain as last committed by this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) seq: i64,
    pub(crate) hash: String,
}

/// Signs and keeps checkpoints for one store.
pub(crate) struct Checkpointer {
    /// HMAC-SHA256 keyed with the audit key, cloned for each MAC.
    keyed: HmacSha256,
    file: Option<PathBuf>,
    /// The newest head committed by this process, replaced by each commit.
    head: std::sync::Mutex<Option<Head>>,
    /// Wakes the background task (a permit is kept when it is busy).
    changed: Arc<Notify>,
    /// Serializes writers; holds the newest `seq` this process checkpointed.
    written: Mutex<i64>,
}

impl fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpointer")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl Checkpointer {
    /// Loads (or creates) the key; `None` when the anchor has no key.
    pub(crate) fn new(anchor: &AuditAnchor) -> Result<Option<Self>, StoreError> {
        let Some(key) = &anchor.key else {
            return Ok(None);
        };
        let key = load_key(key)?;
        let keyed = HmacSha256::new_from_slice(&key).map_err(|e| {
            StoreError::AuditKey(format!(
                "The audit checkpoint key cannot key HMAC-SHA256: {e}"
            ))
        })?;
        Ok(Some(Self {
            keyed,
            file: anchor.checkpoint_file.clone(),
            head: std::sync::Mutex::new(None),
            changed: Arc::new(Notify::new()),
            written: Mutex::new(0),
        }))
    }

    /// Called by the audit writer after a commit: no I/O, only the slot replaced (an uncontended
    /// lock) and the background task woken.
    pub(crate) fn publish(&self, head: Head) {
        let old = self
            .head
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(head);
        self.changed.notify_one();
        drop(old);
    }

    fn current(&self) -> Option<Head> {
        self.head
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn sign(&self, seq: i64, hash: &str, at: &str) -> Checkpoint {
        Checkpoint {
            seq,
            hash: hash.to_owned(),
            at: at.to_owned(),
            mac: crate::audit::hex(&self.mac(seq, hash, at).finalize().into_bytes()),
        }
    }

    fn mac(&self, seq: i64, hash: &str, at: &str) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(format!("{DOMAIN}\n{seq}\n{hash}\n{at}").as_bytes());
        mac
    }

    /// Whether `cp`'s MAC is right for this key (compared in constant time).
    fn valid(&self, cp: &Checkpoint) -> bool {
        match unhex(&cp.mac) {
            Some(bytes) => self
                .mac(cp.seq, &cp.hash, &cp.at)
                .verify_slice(&bytes)
                .is_ok(),
            None => false,
        }
    }

    /// Starts the background task that checkpoints published heads, at most once per
    /// [`THROTTLE`]. It holds the store weakly and ends with it.
    pub(crate) fn spawn(&self, store: Weak<Inner>, shutdown: CancellationToken) {
        let changed = Arc::clone(&self.changed);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = changed.notified() => {}
                    () = shutdown.cancelled() => return,
                }
                let Some(inner) = store.upgrade() else { return };
                if let Err(e) = (Store { inner }).checkpoint_head().await {
                    tracing::error!(error = %ErrorChain(&e), "the audit checkpoint could not be written");
                }
                tokio::select! {
                    () = tokio::time::sleep(THROTTLE) => {}
                    () = shutdown.cancelled() => return,
                }
            }
        });
    }
}

/// The key bytes: the secret itself, or the key file's content (whitespace around it trimmed),
/// creating the file with a fresh random key when it does not exist.
fn load_key(key: &AuditKey) -> Result<Vec<u8>, StoreError> {
    let bytes = match key {
        AuditKey::Secret(secret) => secret.clone(),
        AuditKey::File(path) => read_or_create_key(path)?,
    };
    if bytes.len() < MIN_KEY_BYTES {
        let what = match key {
            AuditKey::Secret(_) => "The audit checkpoint key".to_owned(),
            AuditKey::File(p) => format!("The audit key file {}", p.display()),
        };
        return Err(StoreError::AuditKey(format!(
            "{what} is too short ({} bytes; at least {MIN_KEY_BYTES}): use a random key, for instance `openssl rand -hex 32`",
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn read_or_create_key(path: &Path) -> Result<Vec<u8>, StoreError> {
    let err = |what: &str, e: std::io::Error| {
        StoreError::AuditKey(format!(
            "Cannot {what} the audit key file {}: {e} (check the path and its permissions, or set [audit] key_file / TOOLGATE_AUDIT_KEY)",
            path.display()
        ))
    };
    match std::fs::read(path) {
        Ok(bytes) => {
            warn_if_readable_by_others(path);
            return Ok(trim(&bytes).to_vec());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err("read", e)),
    }
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| {
        StoreError::AuditKey(format!(
            "Cannot generate the audit key {}: the system's random source failed: {e}",
            path.display()
        ))
    })?;
    let mut text = crate::audit::hex(&raw);
    text.push('\n');
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| err("create the folder of", e))?;
    }
    // Written to a temporary name and hard-linked into place: a concurrent opener either finds
    // no file or the whole key, and only one key wins.
    let tmp = suffixed(path, &format!(".tmp-{}", uuid::Uuid::now_v7().simple()));
    write_private(&tmp, text.as_bytes()).map_err(|e| err("write", e))?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_parent(path);
            Ok(text.trim_end().as_bytes().to_vec())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read(path)
            .map(|b| trim(&b).to_vec())
            .map_err(|e| err("read", e)),
        Err(e) => Err(err("create", e)),
    }
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    bytes.get(start..end).unwrap_or_default()
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "the audit key file can be read by other users, who could then forge checkpoints; `chmod 600` it"
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

/// Creates `path` (which must not exist) readable and writable by the owner only, writes `bytes`
/// and syncs it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Best effort: makes a rename or link in `path`'s folder durable.
fn sync_parent(path: &Path) {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(parent)
    {
        let _ = dir.sync_all();
    }
}

/// Replaces the checkpoint file atomically: a temporary file, synced, renamed over it.
fn write_checkpoint_file(path: &Path, cp: &Checkpoint) -> std::io::Result<()> {
    let mut text = serde_json::to_string(cp).map_err(std::io::Error::other)?;
    text.push('\n');
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = suffixed(path, &format!(".tmp-{}", uuid::Uuid::now_v7().simple()));
    if let Err(e) = write_private(&tmp, text.as_bytes()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_parent(path);
    Ok(())
}

/// The checkpoint file: `None` when it does not exist; `Err` with the reason when it cannot be
/// read or parsed.
fn read_checkpoint_file(path: &Path) -> Result<Option<Checkpoint>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("it is not a checkpoint ({e})")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read it: {e}")),
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Store {
    /// Writes a checkpoint of the newest audit entry this process committed, now (not waiting
    /// for the background task), after writing every queued entry. Nothing happens when the store
    /// has no checkpoint key or this process wrote no entry.
    pub async fn checkpoint_audit(&self) -> Result<(), StoreError> {
        self.flush_audit().await?;
        self.checkpoint_head().await.map(|_| ())
    }

    /// Signs the published head and keeps it in the database and the checkpoint file, unless an
    /// earlier checkpoint no longer matches the chain (then refuses, naming the cut).
    async fn checkpoint_head(&self) -> Result<Option<Checkpoint>, StoreError> {
        let Some(cp) = &self.inner.checkpoints else {
            return Ok(None);
        };
        let mut written = cp.written.lock().await;
        let Some(head) = cp.current() else {
            return Ok(None);
        };
        if head.seq <= *written {
            return Ok(None);
        }
        // The newest valid checkpoints already kept must still match the chain.
        let file = match &cp.file {
            Some(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_checkpoint_file(&path))
                    .await
                    .map_err(|e| StoreError::AuditWrite(format!("reading the checkpoint file: {e}")))?
                    .map_err(|reason| {
                        StoreError::AuditWrite(format!(
                            "The audit checkpoint file {} is unreadable ({reason}); not replacing it: run `toolgate audit verify`, and move the file away if the log is intact",
                            cp.file.as_deref().unwrap_or(Path::new("")).display()
                        ))
                    })?
            }
            None => None,
        };
        if let Some(f) = &file
            && !cp.valid(f)
        {
            return Err(StoreError::AuditWrite(format!(
                "The audit checkpoint file {} is not signed with this audit key (forged, or the key changed); not replacing it: run `toolgate audit verify`",
                cp.file.as_deref().unwrap_or(Path::new("")).display()
            )));
        }
        let rows = self.checkpoint_rows(8).await?;
        let newest_row = rows.into_iter().find(|r| cp.valid(r));
        for anchor in file.iter().chain(newest_row.iter()) {
            if self.hash_at(anchor.seq).await?.as_deref() != Some(anchor.hash.as_str()) {
                return Err(StoreError::AuditWrite(format!(
                    "Not checkpointing the audit log: entry {} no longer matches its checkpoint (the log was cut or rewritten); run `toolgate audit verify`",
                    anchor.seq
                )));
            }
        }
        let signed = cp.sign(head.seq, &head.hash, &ts(now()));
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO audit_checkpoints (seq, hash, at, mac) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (seq) DO NOTHING",
            )
            .bind(signed.seq)
            .bind(&signed.hash)
            .bind(&signed.at)
            .bind(&signed.mac)
            .execute(p)
            .await
            .map_err(StoreError::db("writing an audit checkpoint"))?;
            sqlx::query(
                "DELETE FROM audit_checkpoints WHERE seq < \
                 (SELECT MIN(seq) FROM (SELECT seq FROM audit_checkpoints ORDER BY seq DESC LIMIT $1) AS newest)",
            )
            .bind(KEEP_ROWS)
            .execute(p)
            .await
            .map_err(StoreError::db("pruning audit checkpoints"))?;
        });
        if let Some(path) = &cp.file
            && file.as_ref().is_none_or(|f| f.seq < signed.seq)
        {
            let path = path.clone();
            let copy = signed.clone();
            tokio::task::spawn_blocking(move || write_checkpoint_file(&path, &copy))
                    .await
                    .map_err(|e| StoreError::AuditWrite(format!("writing the checkpoint file: {e}")))?
                    .map_err(|e| {
                        StoreError::AuditWrite(format!(
                            "Cannot write the audit checkpoint file {}: {e} (check that its folder is writable)",
                            cp.file.as_deref().unwrap_or(Path::new("")).display()
                        ))
                    })?;
        }
        tracing::info!(
            target: "toolgate::audit::checkpoint",
            seq = signed.seq,
            hash = %signed.hash,
            at = %signed.at,
            mac = %signed.mac,
            "audit checkpoint"
        );
        *written = signed.seq;
        Ok(Some(signed))
    }

    /// The newest `limit` rows of `audit_checkpoints`.
    async fn checkpoint_rows(&self, limit: i64) -> Result<Vec<Checkpoint>, StoreError> {
        let rows: Vec<(i64, String, String, String)> = on_pool!(self, p => {
            sqlx::query_as("SELECT seq, hash, at, mac FROM audit_checkpoints ORDER BY seq DESC LIMIT $1")
                .bind(limit)
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading audit checkpoints"))?
        });
        Ok(rows
            .into_iter()
            .map(|(seq, hash, at, mac)| Checkpoint { seq, hash, at, mac })
            .collect())
    }

    /// The stored hash of entry `seq`, if it exists.
    async fn hash_at(&self, seq: i64) -> Result<Option<String>, StoreError> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT hash FROM audit_log WHERE seq = $1")
                .bind(seq)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading the audit log"))
        })
    }

    /// Checks the chain against every checkpoint kept (file and database).
    pub(crate) async fn check_checkpoints(&self) -> Result<Findings, StoreError> {
        let Some(cp) = &self.inner.checkpoints else {
            return Ok(Findings::default());
        };
        let mut findings = Findings {
            anchored: true,
            ..Findings::default()
        };
        let mut candidates: Vec<(CheckpointSource, Checkpoint)> = Vec::new();
        if let Some(path) = &cp.file {
            let source = CheckpointSource::File(path.clone());
            let read = {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_checkpoint_file(&path))
                    .await
                    .map_err(|e| {
                        StoreError::AuditWrite(format!("reading the checkpoint file: {e}"))
                    })?
            };
            match read {
                Ok(Some(c)) => candidates.push((source, c)),
                Ok(None) => {}
                Err(reason) => findings.problems.push(CheckpointProblem {
                    source,
                    seq: None,
                    kind: CheckpointProblemKind::Unreadable,
                    reason,
                }),
            }
        }
        for row in self.checkpoint_rows(CHECK_ROWS).await? {
            candidates.push((CheckpointSource::Database, row));
        }
        let head: Option<i64> = on_pool!(self, p => {
            sqlx::query_scalar("SELECT MAX(seq) FROM audit_log")
                .fetch_one(p)
                .await
                .map_err(StoreError::db("reading the audit log"))?
        });
        let head = head.unwrap_or(0);
        for (source, c) in candidates {
            if !cp.valid(&c) {
                findings.problems.push(CheckpointProblem {
                    source,
                    seq: Some(c.seq),
                    kind: CheckpointProblemKind::Forged,
                    reason:
                        "its MAC does not match the audit key (forged, or signed with another key)"
                            .to_owned(),
                });
                continue;
            }
            if c.seq > head {
                if findings
                    .cut
                    .as_ref()
                    .is_none_or(|cut| cut.last_missing < c.seq)
                {
                    findings.cut = Some(CutTail {
                        first_missing: head + 1,
                        last_missing: c.seq,
                        head,
                        source,
                    });
                }
                continue;
            }
            match self.hash_at(c.seq).await? {
                Some(hash) if hash == c.hash => {
                    findings.checkpointed = findings.checkpointed.max(Some(c.seq));
                }
                Some(_) => findings.problems.push(CheckpointProblem {
                    source,
                    seq: Some(c.seq),
                    kind: CheckpointProblemKind::Rewritten,
                    reason: format!(
                        "entry {} has another hash than the one signed (the log was rewritten up to there)",
                        c.seq
                    ),
                }),
                None => findings.problems.push(CheckpointProblem {
                    source,
                    seq: Some(c.seq),
                    kind: CheckpointProblemKind::Missing,
                    reason: format!("entry {} is missing while newer entries remain", c.seq),
                }),
            }
        }
        Ok(findings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpointer(key: &[u8]) -> Checkpointer {
        Checkpointer::new(&AuditAnchor {
            key: Some(AuditKey::Secret(key.to_vec())),
            checkpoint_file: None,
        })
        .unwrap()
        .unwrap()
    }

    #[test]
    fn a_checkpoint_verifies_only_unchanged_and_under_its_key() {
        let a = checkpointer(b"0123456789abcdef0123");
        let cp = a.sign(14, &"ab".repeat(32), "2026-11-26T00:00:00.000000Z");
        assert!(a.valid(&cp));
        for forged in [
            Checkpoint {
                seq: 15,
                ..cp.clone()
            },
            Checkpoint {
                hash: "cd".repeat(32),
                ..cp.clone()
            },
            Checkpoint {
                at: "2026-11-27T00:00:00.000000Z".into(),
                ..cp.clone()
            },
            Checkpoint {
                mac: "00".repeat(32),
                ..cp.clone()
            },
            Checkpoint {
                mac: "not hex".into(),
                ..cp.clone()
            },
        ] {
            assert!(!a.valid(&forged), "{forged:?}");
        }
        assert!(!checkpointer(b"another key, long enough").valid(&cp));
    }

    #[test]
    fn short_keys_are_refused_and_key_files_are_created_private() {
        let err = load_key(&AuditKey::Secret(b"short".to_vec())).unwrap_err();
        assert!(err.to_string().contains("openssl rand"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/toolgate.db.audit-key");
        let key = load_key(&AuditKey::File(path.clone())).unwrap();
        assert_eq!(key.len(), 64);
        assert_eq!(load_key(&AuditKey::File(path.clone())).unwrap(), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let leftovers = std::fs::read_dir(dir.path().join("sub")).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
    }

    #[test]
    fn the_cut_names_the_missing_range() {
        let cut = CutTail {
            first_missing: 5,
            last_missing: 14,
            head: 4,
            source: CheckpointSource::Database,
        };
        assert_eq!(
            cut.to_string(),
            "audit log cut: entries 5–14 are missing (checkpoint at seq 14 in the database, head now 4)"
        );
    }
}

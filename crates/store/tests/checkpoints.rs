//! Signed checkpoints show a cut tail: `verify` after deleting the last entry, the last ten and
//! all of them (with the checkpoint rows too), a forged checkpoint, a rewritten log and a wrong
//! key — on SQLite (the default anchor: key and checkpoint files next to the database) and on
//! PostgreSQL (an explicit key and checkpoint file).
#![cfg(test)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;
use common::TestDb;
use serde_json::json;
use toolgate_core::{CallId, Outcome};
use toolgate_store::{
    AuditAnchor, AuditKey, AuditRecord, CheckpointProblemKind, CheckpointSource, DbUrl, Store,
    StoreOptions, VerifyReport,
};

const KEY: &[u8] = b"a test key of more than sixteen bytes";

/// One database per backend, with its audit anchor.
struct Anchored {
    db: TestDb,
    anchor: AuditAnchor,
}

impl Anchored {
    fn file(&self) -> PathBuf {
        self.anchor.checkpoint_file.clone().unwrap()
    }

    async fn reopen_with(&self, anchor: &AuditAnchor) -> Store {
        Store::open_with(&self.db.url, &self.db.options, anchor)
            .await
            .unwrap()
    }
}

async fn anchored_backends() -> Vec<Anchored> {
    let mut out = Vec::new();
    let (url, options, dir) = common::sqlite_target();
    // SQLite: the default anchor, files next to the database.
    let anchor = AuditAnchor::for_url(&url);
    let DbUrl::Sqlite(path) = &url else {
        unreachable!()
    };
    assert_eq!(
        anchor.checkpoint_file.as_deref(),
        Some(toolgate_store::suffixed(path, ".audit-checkpoint").as_path())
    );
    let store = Store::open(&url, &options).await.unwrap();
    out.push(Anchored {
        db: TestDb {
            store,
            url,
            options,
            dir: Some(dir),
        },
        anchor,
    });
    if common::postgres_available().await {
        let (url, options) = common::postgres_target();
        let dir = tempfile::tempdir().unwrap();
        let anchor = AuditAnchor {
            key: Some(AuditKey::Secret(KEY.to_vec())),
            checkpoint_file: Some(dir.path().join("toolgate.audit-checkpoint")),
        };
        let store = Store::open_with(&url, &options, &anchor).await.unwrap();
        out.push(Anchored {
            db: TestDb {
                store,
                url,
                options,
                dir: Some(dir),
            },
            anchor,
        });
    }
    out
}

macro_rules! on_each_anchored_backend {
    ($($name:ident => $body:path;)+) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            for a in anchored_backends().await {
                eprintln!("-- {} on {}", stringify!($name), a.db.backend());
                $body(&a).await;
                a.db.cleanup().await;
            }
        }
    )+};
}

on_each_anchored_backend! {
    deleting_the_last_entry_is_found => last_entry_body;
    deleting_the_last_ten_entries_is_found => last_ten_body;
    deleting_every_entry_is_found => all_entries_body;
    deleting_every_entry_and_checkpoint_row_is_found_by_the_file => all_rows_body;
    a_forged_checkpoint_is_reported => forged_body;
    a_rewritten_log_is_reported_and_not_signed_again => rewritten_body;
    checkpoints_under_another_key_do_not_verify => other_key_body;
    checkpoints_are_written_in_the_background => background_body;
}

fn record(i: usize) -> AuditRecord {
    AuditRecord {
        seq: None,
        call_id: CallId::new(),
        tool: "t".into(),
        definition_hash: None,
        principal: "local".into(),
        input: json!({"i": i}),
        outcome: Outcome::Data(json!(i)),
        attempts: 1,
        duration_ms: 1.0,
        fetched_at: Utc::now(),
        truncated: false,
        output_ref: None,
        content: Vec::new(),
        recorded_at: None,
        origin: None,
        cancelled_by: None,
    }
}

/// Appends `n` entries and checkpoints the head.
async fn fill(store: &Store, n: usize) {
    for i in 0..n {
        store.audit_finished(&record(i)).await.unwrap();
    }
    store.checkpoint_audit().await.unwrap();
}

/// Twenty entries, checkpointed, verified intact.
async fn twenty(a: &Anchored) {
    fill(&a.db.store, 20).await;
    let report = a.db.store.verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    assert!(report.anchored);
    assert_eq!((report.entries, report.checkpointed), (20, Some(20)));
    assert!(a.file().exists(), "the checkpoint file is written");
}

fn assert_cut(report: &VerifyReport, first: i64, last: i64, head: i64) {
    assert!(!report.ok, "{report:?}");
    assert!(report.first_broken.is_none(), "{report:?}");
    let cut = report.cut.as_ref().expect("a cut tail");
    assert_eq!(
        (cut.first_missing, cut.last_missing, cut.head),
        (first, last, head)
    );
    let text = cut.to_string();
    let range = if first == last {
        format!("entry {first} is missing")
    } else {
        format!("entries {first}–{last} are missing")
    };
    assert!(text.starts_with("audit log cut: "), "{text}");
    assert!(text.contains(&range), "{text}");
    assert!(text.contains(&format!("head now {head}")), "{text}");
}

async fn last_entry_body(a: &Anchored) {
    twenty(a).await;
    let n =
        a.db.exec("DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)")
            .await;
    assert_eq!(n, 1);
    let report = a.db.store.verify().await.unwrap();
    assert_cut(&report, 20, 20, 19);
    assert_eq!(report.entries, 19);
}

async fn last_ten_body(a: &Anchored) {
    twenty(a).await;
    assert_eq!(a.db.exec("DELETE FROM audit_log WHERE seq > 10").await, 10);
    let report = a.db.store.verify().await.unwrap();
    assert_cut(&report, 11, 20, 10);
    // A fresh process with the same anchor finds it too.
    let other = a.reopen_with(&a.anchor).await;
    assert_cut(&other.verify().await.unwrap(), 11, 20, 10);
    other.close().await;
}

async fn all_entries_body(a: &Anchored) {
    twenty(a).await;
    assert_eq!(a.db.exec("DELETE FROM audit_log").await, 20);
    let report = a.db.store.verify().await.unwrap();
    assert_cut(&report, 1, 20, 0);
    assert_eq!(report.entries, 0);
}

async fn all_rows_body(a: &Anchored) {
    twenty(a).await;
    assert_eq!(a.db.exec("DELETE FROM audit_log").await, 20);
    assert!(a.db.exec("DELETE FROM audit_checkpoints").await >= 1);
    let report = a.db.store.verify().await.unwrap();
    assert_cut(&report, 1, 20, 0);
    assert_eq!(
        report.cut.unwrap().source,
        CheckpointSource::File(a.file()),
        "the copy outside the database is what shows it"
    );
}

async fn forged_body(a: &Anchored) {
    twenty(a).await;
    // A row claiming a later head, with a made-up MAC.
    a.db.exec(
        "INSERT INTO audit_checkpoints (seq, hash, at, mac) VALUES (30, \
         '0000000000000000000000000000000000000000000000000000000000000000', \
         '2026-11-26T00:00:00.000000Z', \
         '0000000000000000000000000000000000000000000000000000000000000000')",
    )
    .await;
    let report = a.db.store.verify().await.unwrap();
    assert!(!report.ok && report.cut.is_none(), "{report:?}");
    let [problem] = report.checkpoint_problems.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(
        (problem.kind, problem.seq, &problem.source),
        (
            CheckpointProblemKind::Forged,
            Some(30),
            &CheckpointSource::Database
        )
    );
    assert!(problem.to_string().contains("MAC"), "{problem}");
    a.db.exec("DELETE FROM audit_checkpoints WHERE seq = 30")
        .await;

    // The file edited to claim another seq: its MAC no longer matches.
    let text = std::fs::read_to_string(a.file()).unwrap();
    std::fs::write(a.file(), text.replace("\"seq\":20", "\"seq\":19")).unwrap();
    let report = a.db.store.verify().await.unwrap();
    let kinds: Vec<_> = report
        .checkpoint_problems
        .iter()
        .map(|p| (p.kind, p.source.clone()))
        .collect();
    assert_eq!(
        kinds,
        [(
            CheckpointProblemKind::Forged,
            CheckpointSource::File(a.file())
        )],
        "{report:?}"
    );
    // An unreadable file is reported too.
    std::fs::write(a.file(), "not json").unwrap();
    let report = a.db.store.verify().await.unwrap();
    assert_eq!(
        report.checkpoint_problems[0].kind,
        CheckpointProblemKind::Unreadable
    );
    assert!(!report.ok);
}

async fn rewritten_body(a: &Anchored) {
    twenty(a).await;
    // The tail cut, then new entries appended on what is left (as the next calls would, or as an
    // attacker would to hide the cut): the chain is intact and longer than the checkpoint.
    assert_eq!(a.db.exec("DELETE FROM audit_log WHERE seq > 10").await, 10);
    for i in 0..15 {
        a.db.store.audit_finished(&record(i)).await.unwrap();
    }
    // The shortened chain is not signed: that would hide the cut.
    let err = a.db.store.checkpoint_audit().await.unwrap_err();
    assert!(
        err.to_string().contains("entry 20 no longer matches"),
        "{err}"
    );
    let report = a.db.store.verify().await.unwrap();
    assert!(!report.ok && report.first_broken.is_none() && report.cut.is_none());
    assert_eq!(report.entries, 25);
    assert!(
        report
            .checkpoint_problems
            .iter()
            .any(|p| p.kind == CheckpointProblemKind::Rewritten && p.seq == Some(20)),
        "{report:?}"
    );
    assert!(
        report
            .checkpoint_problems
            .iter()
            .any(|p| p.source == CheckpointSource::File(a.file())),
        "the file keeps the old head: {report:?}"
    );
}

async fn other_key_body(a: &Anchored) {
    twenty(a).await;
    let dir = tempfile::tempdir().unwrap();
    let other = a
        .reopen_with(&AuditAnchor {
            key: Some(AuditKey::File(dir.path().join("another.audit-key"))),
            checkpoint_file: a.anchor.checkpoint_file.clone(),
        })
        .await;
    let report = other.verify().await.unwrap();
    assert!(!report.ok);
    assert!(
        report
            .checkpoint_problems
            .iter()
            .all(|p| p.kind == CheckpointProblemKind::Forged),
        "{report:?}"
    );
    assert!(report.checkpoint_problems.len() >= 2, "{report:?}");
    other.close().await;
    // Without a key, nothing is checked (and the report says so).
    let bare = a.reopen_with(&AuditAnchor::none()).await;
    let report = bare.verify().await.unwrap();
    assert!(report.ok && !report.anchored && report.checkpointed.is_none());
    bare.close().await;
}

async fn background_body(a: &Anchored) {
    for i in 0..3 {
        a.db.store.audit_finished(&record(i)).await.unwrap();
    }
    // No explicit checkpoint: the background task writes one within its throttle.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let report = a.db.store.verify().await.unwrap();
        if report.checkpointed == Some(3) {
            assert!(report.ok, "{report:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint after 10 s: {report:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(a.file().exists());
    assert!(
        a.db.count("SELECT COUNT(*) FROM audit_checkpoints").await >= 1,
        "kept in the database too"
    );
    let _ = StoreOptions::default();
}
